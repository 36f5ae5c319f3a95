//! Function symbols of an x86-64 ELF file (executable, PIE or shared
//! library): names ↔ addresses and sizes, the machine code of each function,
//! the imports its PLT stubs and GOT slots jump to, and the file offsets
//! uprobes attach at.
//!
//! `.symtab` is read when present (it names static functions too), else
//! the `.symtab` of the binary's separate debug file where one is found
//! (probe/symbols.rs: build-id, debug link, debuginfod), else `.dynsym`
//! (what a stripped binary or a distribution's shared library keeps). Several symbols at one address (`malloc`, `__libc_malloc`) are one
//! function with aliases. Versioned names (`memcpy@@GLIBC_2.14` in a
//! `.symtab`, or the `.gnu.version` entry of a `.dynsym` symbol) keep their
//! version beside the plain name, so `memcpy`, `memcpy@@GLIBC_2.14` and
//! `memcpy@GLIBC_2.2.5` can all be asked for.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

pub use super::elf_error::ElfError;
use super::symbols::{
    CodeSection, Function, RawSymbol, group_functions, levenshtein, split_version,
};
use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget,
    SectionKind, SymbolKind, elf,
    read::elf::{Dyn as _, ElfFile64, FileHeader as _, ProgramHeader as _, SectionHeader as _},
};
use ttp_ledger::probe::symbols::SymbolSource;
use ttp_ledger::probe::symbols::{DebugIds, DebugSearch, find_debug_file};

/// How the file is loaded: at fixed addresses, or anywhere (then the
/// addresses here are relative to the load bias).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElfKind {
    /// `ET_EXEC`: addresses are the run-time addresses.
    Executable,
    /// `ET_DYN` with `DF_1_PIE`: a position-independent executable.
    PieExecutable,
    /// `ET_DYN` without `DF_1_PIE`: a shared library such as libc.so.6.
    SharedLibrary,
}

impl ElfKind {
    pub fn label(self) -> &'static str {
        match self {
            ElfKind::Executable => "executable",
            ElfKind::PieExecutable => "PIE executable",
            ElfKind::SharedLibrary => "shared library",
        }
    }
}

/// What a GOT slot (reached through a PLT stub or `call *slot(%rip)`) is
/// bound to at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Import {
    pub name: String,
    pub version: Option<String>,
    /// Index into [`ElfImage::functions`] when this file itself defines the
    /// symbol (an exported function called through its own PLT, or an ifunc
    /// resolved by an `R_X86_64_IRELATIVE` relocation).
    pub local: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
struct LoadSegment {
    vaddr: u64,
    filesz: u64,
    offset: u64,
}

/// A parsed ELF file: owns its bytes and the tables derived from them.
#[derive(Debug)]
pub struct ElfImage {
    path: PathBuf,
    data: Vec<u8>,
    kind: ElfKind,
    source: SymbolSource,
    /// The separate debug file the names came from, if any.
    symbol_file: Option<PathBuf>,
    /// Sorted by address.
    functions: Vec<Function>,
    /// Plain and versioned names → (index into `functions`, whether the
    /// name is the default version `@@` or unversioned).
    by_name: HashMap<String, Vec<(usize, bool)>>,
    /// GOT slot address → what it is bound to.
    got: HashMap<u64, Import>,
    /// Imported names (undefined `.dynsym` entries), for error messages.
    imported: HashMap<String, Option<String>>,
    plt: Vec<(u64, u64)>,
    code: Vec<CodeSection>,
    segments: Vec<LoadSegment>,
}

const EM_X86_64: u16 = 62;

impl ElfImage {
    /// Reads and parses `path`, with the names of its own tables only.
    pub fn load(path: &Path) -> Result<Self, ElfError> {
        Self::load_with(path, &DebugSearch::none())
    }

    /// Reads and parses `path`; without a `.symtab` of its own, the names
    /// come from its debug file where `search` finds one.
    pub fn load_with(path: &Path, search: &DebugSearch) -> Result<Self, ElfError> {
        let data = std::fs::read(path).map_err(|source| ElfError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse_with(path, data, search)
    }

    /// Parses ELF bytes; `path` is only used in messages.
    pub fn parse(path: &Path, data: Vec<u8>) -> Result<Self, ElfError> {
        Self::parse_with(path, data, &DebugSearch::none())
    }

    fn parse_with(path: &Path, data: Vec<u8>, search: &DebugSearch) -> Result<Self, ElfError> {
        let path = path.to_owned();
        if data.len() < 20 || &data[..4] != b"\x7fELF" {
            return Err(ElfError::NotElf { path });
        }
        let class = if data[4] == 2 { 64 } else { 32 };
        let machine = if data[5] == 1 {
            u16::from_le_bytes([data[18], data[19]])
        } else {
            u16::from_be_bytes([data[18], data[19]])
        };
        if class != 64 || machine != EM_X86_64 {
            return Err(ElfError::NotX86_64 {
                path,
                class,
                machine,
            });
        }
        let malformed = |e: object::Error| ElfError::Malformed {
            path: path.clone(),
            detail: e.to_string(),
        };
        let file = ElfFile64::<object::Endianness>::parse(&*data).map_err(malformed)?;
        let endian = file.endian();
        let header = file.elf_header();

        let kind = match header.e_type(endian) {
            elf::ET_EXEC => ElfKind::Executable,
            _ if dynamic_flags_1(&file) & u64::from(elf::DF_1_PIE) != 0 => ElfKind::PieExecutable,
            _ => ElfKind::SharedLibrary,
        };

        let mut code = Vec::new();
        let mut plt = Vec::new();
        for section in file.sections() {
            let Some((offset, size)) = section.file_range() else {
                continue;
            };
            let name = section.name().unwrap_or("");
            if name.starts_with(".plt") {
                plt.push((section.address(), size));
            }
            let exec =
                section.elf_section_header().sh_flags(endian) & u64::from(elf::SHF_EXECINSTR) != 0;
            if exec && section.kind() == SectionKind::Text {
                code.push(CodeSection {
                    address: section.address(),
                    size,
                    file_offset: offset,
                });
            }
        }
        let segments = file
            .elf_program_headers()
            .iter()
            .filter(|p| p.p_type(endian) == elf::PT_LOAD)
            .map(|p| LoadSegment {
                vaddr: p.p_vaddr(endian),
                filesz: p.p_filesz(endian),
                offset: p.p_offset(endian),
            })
            .collect();

        // .dynsym with versions, needed for imports even when .symtab exists.
        let versions = file
            .elf_section_table()
            .versions(endian, &*data)
            .map_err(malformed)?;
        let mut dynsyms: HashMap<usize, RawSymbol> = HashMap::new();
        let mut dyn_defined: HashMap<usize, bool> = HashMap::new();
        let mut imported = HashMap::new();
        if let Some(table) = file.dynamic_symbol_table() {
            for sym in table.symbols() {
                let raw_name = sym.name().unwrap_or("");
                let (base, version, mut default_version) = split_version(raw_name);
                let mut version = version.map(str::to_owned);
                if version.is_none()
                    && let Some(v) = versions.as_ref()
                {
                    let vi = v.version_index(endian, sym.index());
                    if vi.index() > elf::VER_NDX_GLOBAL
                        && let Ok(Some(ver)) = v.version(vi)
                    {
                        version = Some(String::from_utf8_lossy(ver.name()).into_owned());
                        default_version = !vi.is_hidden();
                    }
                }
                if sym.is_undefined() && !base.is_empty() {
                    imported.insert(base.to_owned(), version.clone());
                }
                dyn_defined.insert(sym.index().0, !sym.is_undefined());
                dynsyms.insert(
                    sym.index().0,
                    RawSymbol {
                        name: base.to_owned(),
                        version,
                        default_version,
                        address: sym.address(),
                        size: sym.size(),
                        global: sym.is_global(),
                        ifunc: sym.elf_symbol().st_type() == elf::STT_GNU_IFUNC,
                    },
                );
            }
        }

        let own = symtab_functions(&file);
        let debug = if own.is_empty() && !search.is_none() {
            let ids = object::File::parse(&*data)
                .map(|f| DebugIds::of(&f))
                .unwrap_or_default();
            find_debug_file(&path, &ids, search)
        } else {
            None
        };
        let from_debug = debug.as_ref().and_then(|d| {
            let f = ElfFile64::<object::Endianness>::parse(&*d.data).ok()?;
            let syms = symtab_functions(&f);
            (!syms.is_empty()).then_some((d.source, syms, d.path.clone()))
        });
        let (source, raw, symbol_file): (SymbolSource, Vec<RawSymbol>, Option<PathBuf>) = if !own
            .is_empty()
        {
            (SymbolSource::Symtab, own, None)
        } else if let Some((source, syms, path)) = from_debug {
            (source, syms, Some(path))
        } else {
            let syms = file
                .dynamic_symbols()
                .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.address() != 0)
                .filter_map(|s| dynsyms.get(&s.index().0))
                .map(|r| RawSymbol {
                    name: r.name.clone(),
                    version: r.version.clone(),
                    default_version: r.default_version,
                    address: r.address,
                    size: r.size,
                    global: r.global,
                    ifunc: r.ifunc,
                })
                .collect();
            (SymbolSource::Dynsym, syms, None)
        };
        if raw.is_empty() {
            return Err(ElfError::Stripped { path });
        }
        let functions = group_functions(raw, &code);
        let mut by_name: HashMap<String, Vec<(usize, bool)>> = HashMap::new();
        for (i, f) in functions.iter().enumerate() {
            // A versioned name is in `aliases` in full (`memcpy@GLIBC_2.2.5`).
            let plain = f.version.is_none().then(|| f.name.clone());
            for full in plain.iter().chain(f.aliases.iter()) {
                let (base, _, default) = split_version(full);
                for key in [full.as_str(), base] {
                    let e = by_name.entry(key.to_owned()).or_default();
                    if !e.iter().any(|&(j, _)| j == i) {
                        e.push((i, default));
                    }
                }
            }
        }
        let mut image = Self {
            path,
            data: Vec::new(),
            kind,
            source,
            symbol_file,
            functions,
            by_name,
            got: HashMap::new(),
            imported,
            plt,
            code,
            segments,
        };

        // GOT slots: JUMP_SLOT/GLOB_DAT name a .dynsym symbol; IRELATIVE
        // (ifunc inside this file) names the resolver by its address.
        let mut got = HashMap::new();
        if let Some(relocs) = file.dynamic_relocations() {
            for (slot, reloc) in relocs {
                let RelocationFlags::Elf { r_type } = reloc.flags() else {
                    continue;
                };
                let import = match (r_type, reloc.target()) {
                    (
                        elf::R_X86_64_JUMP_SLOT | elf::R_X86_64_GLOB_DAT,
                        RelocationTarget::Symbol(i),
                    ) => {
                        let Some(sym) = dynsyms.get(&i.0) else {
                            continue;
                        };
                        if sym.name.is_empty() {
                            continue;
                        }
                        let local = if dyn_defined.get(&i.0) == Some(&true) {
                            image.function_at(sym.address)
                        } else {
                            None
                        };
                        Import {
                            name: sym.name.clone(),
                            version: sym.version.clone(),
                            local,
                        }
                    }
                    (elf::R_X86_64_IRELATIVE, _) => {
                        let Some(local) = image.function_at(reloc.addend() as u64) else {
                            continue;
                        };
                        Import {
                            name: image.functions[local].name.clone(),
                            version: image.functions[local].version.clone(),
                            local: Some(local),
                        }
                    }
                    _ => continue,
                };
                got.insert(slot, import);
            }
        }
        image.got = got;
        image.data = data;
        Ok(image)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn kind(&self) -> ElfKind {
        self.kind
    }
    pub(crate) fn symbol_source(&self) -> SymbolSource {
        self.source
    }
    /// The separate debug file that named the functions, if one did.
    pub(crate) fn symbol_file(&self) -> Option<&Path> {
        self.symbol_file.as_deref()
    }
    /// All functions, sorted by address.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// The function starting exactly at `address`.
    pub(crate) fn function_at(&self, address: u64) -> Option<usize> {
        self.functions
            .binary_search_by_key(&address, |f| f.address)
            .ok()
    }

    /// The function whose body contains `address`.
    pub(crate) fn function_containing(&self, address: u64) -> Option<usize> {
        let i = self.functions.partition_point(|f| f.address <= address);
        (i > 0 && self.functions[i - 1].contains(address)).then(|| i - 1)
    }

    /// What the GOT slot at `address` is bound to.
    pub(crate) fn got_slot(&self, address: u64) -> Option<&Import> {
        self.got.get(&address)
    }

    /// True if `address` lies in a `.plt`, `.plt.sec` or `.plt.got` section.
    pub(crate) fn in_plt(&self, address: u64) -> bool {
        self.plt
            .iter()
            .any(|&(a, s)| address >= a && address - a < s)
    }

    /// The machine code at [address, address + len), if the file holds it.
    pub fn code(&self, address: u64, len: u64) -> Option<&[u8]> {
        let s = self
            .code
            .iter()
            .find(|s| address >= s.address && address - s.address < s.size)?;
        let start = s.file_offset + (address - s.address);
        let end = start + len.min(s.size - (address - s.address));
        self.data.get(start as usize..end as usize)
    }

    /// The file offset of the byte at virtual address `address` (what a
    /// uprobe is attached at).
    pub(crate) fn file_offset(&self, address: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| address >= s.vaddr && address - s.vaddr < s.filesz)
            .map(|s| s.offset + (address - s.vaddr))
    }

    /// Finds a function by name: plain (`memcpy`), versioned
    /// (`memcpy@GLIBC_2.2.5`, `memcpy@@GLIBC_2.14`) or an address (`0x4011d6`).
    pub fn lookup(&self, name: &str) -> Result<usize, ElfError> {
        if let Some(hex) = name.strip_prefix("0x")
            && let Ok(address) = u64::from_str_radix(hex, 16)
        {
            return self.function_at(address).ok_or(ElfError::NoFunctionAt {
                address,
                path: self.path.clone(),
            });
        }
        let (base, version, _) = split_version(name);
        let found: Vec<(usize, bool)> = match self.by_name.get(name) {
            Some(v) => v.clone(),
            None if version.is_some() => Vec::new(),
            None => self.by_name.get(base).cloned().unwrap_or_default(),
        };
        match found.len() {
            1 => Ok(found[0].0),
            0 => {
                if let Some(v) = self.imported.get(base) {
                    return Err(ElfError::Imported {
                        name: base.to_owned(),
                        version: v.clone(),
                        path: self.path.clone(),
                    });
                }
                Err(ElfError::SymbolNotFound {
                    name: name.to_owned(),
                    path: self.path.clone(),
                    suggestions: self.close_names(base, 5),
                    symbols: self.source,
                })
            }
            _ => {
                // Several versions of one symbol: a plain name means the
                // default version (`@@`), as the linker would bind it.
                let default: Vec<usize> = found
                    .iter()
                    .filter(|&&(_, d)| d && version.is_none())
                    .map(|&(i, _)| i)
                    .collect();
                if default.len() == 1 {
                    return Ok(default[0]);
                }
                Err(ElfError::Ambiguous {
                    name: name.to_owned(),
                    path: self.path.clone(),
                    addresses: found
                        .iter()
                        .map(|&(i, _)| self.functions[i].address)
                        .collect(),
                })
            }
        }
    }

    /// Up to `n` known function names closest to `wanted` (substring
    /// matches first, then by edit distance).
    pub(crate) fn close_names(&self, wanted: &str, n: usize) -> Vec<String> {
        let lower = wanted.to_lowercase();
        let mut scored: Vec<(usize, &str)> = self
            .by_name
            .keys()
            .filter(|k| !k.contains('@'))
            .filter_map(|k| {
                let kl = k.to_lowercase();
                let d = if kl.contains(&lower) || (kl.len() >= 3 && lower.contains(&kl)) {
                    0
                } else {
                    levenshtein(&lower, &kl)
                };
                (d <= (wanted.len() / 3).max(2)).then_some((d, k.as_str()))
            })
            .collect();
        scored.sort_by(|a, b| (a.0, a.1.len(), a.1).cmp(&(b.0, b.1.len(), b.1)));
        scored
            .into_iter()
            .take(n)
            .map(|(_, k)| k.to_owned())
            .collect()
    }
}

/// The function symbols of `file`'s `.symtab` (none when it has none).
fn symtab_functions(file: &ElfFile64<object::Endianness>) -> Vec<RawSymbol> {
    let Some(table) = file.symbol_table() else {
        return Vec::new();
    };
    table
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.address() != 0)
        .map(|s| {
            let (base, version, default_version) = split_version(s.name().unwrap_or(""));
            RawSymbol {
                name: base.to_owned(),
                version: version.map(str::to_owned),
                default_version,
                address: s.address(),
                size: s.size(),
                global: s.is_global(),
                ifunc: s.elf_symbol().st_type() == elf::STT_GNU_IFUNC,
            }
        })
        .collect()
}

/// `DT_FLAGS_1` of the dynamic section, 0 when absent.
fn dynamic_flags_1(file: &ElfFile64<object::Endianness>) -> u64 {
    let endian = file.endian();
    for section in file.elf_section_table().iter() {
        if let Ok(Some((entries, _))) = section.dynamic(endian, file.data()) {
            for d in entries {
                if d.d_tag(endian) == elf::DT_FLAGS_1 {
                    return d.d_val(endian);
                }
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches accepting files that are not ELF or not x86-64.
    #[test]
    fn rejects_non_elf_and_other_machines() {
        let p = Path::new("x");
        assert!(matches!(
            ElfImage::parse(p, b"#!/bin/sh\necho hi\n".to_vec()),
            Err(ElfError::NotElf { .. })
        ));
        let mut aarch64 = vec![0u8; 64];
        aarch64[..4].copy_from_slice(b"\x7fELF");
        aarch64[4] = 2;
        aarch64[5] = 1;
        aarch64[18] = 183; // EM_AARCH64
        assert!(matches!(
            ElfImage::parse(p, aarch64),
            Err(ElfError::NotX86_64 {
                machine: 183,
                class: 64,
                ..
            })
        ));
    }
}
