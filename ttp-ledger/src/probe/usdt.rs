//! USDT probes (SystemTap SDT notes) of an ELF file: the `.note.stapsdt`
//! notes a program built with `<sys/sdt.h>` carries (PostgreSQL's
//! `--enable-dtrace`), each giving a probe's provider and name, its address,
//! the address of its semaphore and where each argument is at the probe.
//!
//! Note layout (SystemTap wiki, "UserSpaceProbeImplementation"): owner
//! `stapsdt`, type 3, descriptor = pc, base, semaphore (three addresses of
//! the ELF class's size), then provider, name and argument string, each
//! NUL-terminated. `base` is the address of `.stapsdt.base` at link time: if
//! the file was prelinked, the probe addresses move by the difference.
//! Arguments are `[-]SIZE@OPERAND` in the assembler's syntax (`8@%rdi`,
//! `-4@-20(%rbp)`, `4@$1`, `-4@40+CheckpointStats(%rip)`).
use std::path::Path;

use object::{Object, ObjectSection, ObjectSegment};

/// Note type of an SDT probe.
const NT_STAPSDT: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum UsdtError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not an ELF file this tool reads: {reason}")]
    NotElf { path: String, reason: String },
    #[error(
        "{path} has no USDT probes (no .note.stapsdt section): it was built without SDT markers (PostgreSQL: --enable-dtrace); use a server binary that has them (check with `readelf -n`)"
    )]
    NoNotes { path: String },
    #[error("{path}: malformed .note.stapsdt: {reason}")]
    Malformed { path: String, reason: String },
}

/// A binary that cannot be probed is the user's to fix: one line, exit 2.
impl From<UsdtError> for ttp_sys::error::UsageError {
    fn from(e: UsdtError) -> Self {
        ttp_sys::error::UsageError::new(e.to_string())
    }
}

/// Where an argument's value is at the probe.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgLocation {
    /// In a register (`%rdi`, or a narrower name of it: `%edi`).
    Register { reg: String },
    /// In memory at register + offset (`-144(%rbp)`, `(%r12)`).
    Memory { reg: String, offset: i64 },
    /// A constant (`$8192`).
    Constant { value: i64 },
    /// Anything else (a symbol relative to `%rip`, ...): not read.
    Other { text: String },
}

/// One argument of a probe.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UsdtArg {
    /// Bytes (1, 2, 4, 8).
    pub size: u8,
    pub signed: bool,
    pub location: ArgLocation,
}

/// One probe site (a probe name can have several).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UsdtProbe {
    pub provider: String,
    pub name: String,
    /// Address of the probe's `nop`, adjusted for prelinking.
    pub pc: u64,
    /// `.stapsdt.base` address the note was written against.
    pub base: u64,
    /// Address of the semaphore (a `u16` the probe site tests before
    /// computing its arguments), 0 when the probe has none.
    pub semaphore: u64,
    pub args_spec: String,
    pub args: Vec<UsdtArg>,
    /// File offset of `pc` (where a uprobe is attached).
    pub pc_offset: u64,
    /// File offset of the semaphore (the kernel's `ref_ctr_offset`), 0 when
    /// the probe has none.
    pub semaphore_offset: u64,
}

/// Every USDT probe of an ELF file.
pub fn read_probes(path: &Path) -> Result<Vec<UsdtProbe>, UsdtError> {
    let p = path.display().to_string();
    let data = std::fs::read(path).map_err(|source| UsdtError::Read {
        path: p.clone(),
        source,
    })?;
    parse_probes(&p, &data)
}

/// Every USDT probe of a binary already read.
pub fn probes_of(image: &super::symbols::Image) -> Result<Vec<UsdtProbe>, UsdtError> {
    parse_probes(&image.path().display().to_string(), image.data())
}

/// [`read_probes`] on the file's bytes.
pub(crate) fn parse_probes(path: &str, data: &[u8]) -> Result<Vec<UsdtProbe>, UsdtError> {
    let file = object::File::parse(data).map_err(|e| UsdtError::NotElf {
        path: path.into(),
        reason: e.to_string(),
    })?;
    let malformed = |reason: &str| UsdtError::Malformed {
        path: path.into(),
        reason: reason.into(),
    };
    let Some(notes) = file.section_by_name(".note.stapsdt") else {
        return Err(UsdtError::NoNotes { path: path.into() });
    };
    let bytes = notes.data().map_err(|e| malformed(&e.to_string()))?;
    let actual_base = file.section_by_name(".stapsdt.base").map(|s| s.address());
    let little = file.is_little_endian();
    let word = if file.is_64() { 8 } else { 4 };
    let rd32 = |b: &[u8]| -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    let rdw = |b: &[u8]| -> u64 {
        if word == 8 {
            let a: [u8; 8] = b[..8].try_into().unwrap_or_default();
            if little {
                u64::from_le_bytes(a)
            } else {
                u64::from_be_bytes(a)
            }
        } else {
            u64::from(rd32(b))
        }
    };
    let segments: Vec<(u64, u64, u64)> = file
        .segments()
        .filter_map(|s| {
            let (off, size) = s.file_range();
            (size > 0).then_some((s.address(), off, size))
        })
        .collect();
    let to_offset = |addr: u64| {
        segments
            .iter()
            .find(|(va, _, size)| addr >= *va && addr < va + size)
            .map(|(va, off, _)| addr - va + off)
    };
    let align4 = |n: usize| (n + 3) & !3;
    let mut probes = Vec::new();
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        let namesz = rd32(&bytes[at..]) as usize;
        let descsz = rd32(&bytes[at + 4..]) as usize;
        let ntype = rd32(&bytes[at + 8..]);
        let name_at = at + 12;
        let desc_at = name_at + align4(namesz);
        let next = desc_at + align4(descsz);
        if desc_at + descsz > bytes.len() {
            return Err(malformed("a note runs past the end of the section"));
        }
        let owner = &bytes[name_at..name_at + namesz];
        if ntype == NT_STAPSDT && owner.strip_suffix(&[0]).unwrap_or(owner) == b"stapsdt" {
            let desc = &bytes[desc_at..desc_at + descsz];
            if desc.len() < 3 * word {
                return Err(malformed(
                    "a probe descriptor is shorter than its addresses",
                ));
            }
            let mut pc = rdw(desc);
            let base = rdw(&desc[word..]);
            let mut semaphore = rdw(&desc[2 * word..]);
            if let Some(actual) = actual_base
                && actual != base
            {
                // Prelinked: the probe and its semaphore moved with the file.
                pc = pc.wrapping_add(actual).wrapping_sub(base);
                if semaphore != 0 {
                    semaphore = semaphore.wrapping_add(actual).wrapping_sub(base);
                }
            }
            let mut strings = desc[3 * word..].split(|b| *b == 0);
            let mut next_str = || {
                strings
                    .next()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .ok_or_else(|| malformed("a probe lacks its provider, name or arguments"))
            };
            let provider = next_str()?;
            let name = next_str()?;
            let args_spec = next_str().unwrap_or_default();
            let pc_offset = to_offset(pc)
                .ok_or_else(|| malformed(&format!("probe {name} at {pc:#x} is in no segment")))?;
            let semaphore_offset = if semaphore == 0 {
                0
            } else {
                to_offset(semaphore).ok_or_else(|| {
                    malformed(&format!(
                        "semaphore of {name} at {semaphore:#x} is in no segment"
                    ))
                })?
            };
            probes.push(UsdtProbe {
                args: parse_args(&args_spec),
                provider,
                name,
                pc,
                base,
                semaphore,
                args_spec,
                pc_offset,
                semaphore_offset,
            });
        }
        at = next;
    }
    Ok(probes)
}

/// The arguments of a note's argument string (space-separated).
pub(crate) fn parse_args(spec: &str) -> Vec<UsdtArg> {
    spec.split_whitespace().filter_map(parse_arg).collect()
}

fn parse_arg(text: &str) -> Option<UsdtArg> {
    let (size, operand) = text.split_once('@')?;
    let n: i64 = size.parse().ok()?;
    let location = if let Some(reg) = operand.strip_prefix('%') {
        ArgLocation::Register { reg: reg.into() }
    } else if let Some(v) = operand.strip_prefix('$') {
        match v.parse() {
            Ok(value) => ArgLocation::Constant { value },
            Err(_) => ArgLocation::Other {
                text: operand.into(),
            },
        }
    } else if let Some((off, rest)) = operand.split_once("(%")
        && let Some(reg) = rest.strip_suffix(')')
        && reg != "rip"
        && let Ok(offset) = if off.is_empty() { Ok(0) } else { off.parse() }
    {
        ArgLocation::Memory {
            reg: reg.into(),
            offset,
        }
    } else {
        ArgLocation::Other {
            text: operand.into(),
        }
    };
    Some(UsdtArg {
        size: n.unsigned_abs().min(255) as u8,
        signed: n < 0,
        location,
    })
}

/// Index of an x86-64 register in the kernel's `struct pt_regs` (as an
/// array of u64), for any of its names (`rdi`, `edi`, `di`, `dil`, `r8d`).
pub(crate) fn pt_regs_slot(reg: &str) -> Option<u32> {
    let canon = match reg {
        "rax" | "eax" | "ax" | "al" => "rax",
        "rbx" | "ebx" | "bx" | "bl" => "rbx",
        "rcx" | "ecx" | "cx" | "cl" => "rcx",
        "rdx" | "edx" | "dx" | "dl" => "rdx",
        "rsi" | "esi" | "si" | "sil" => "rsi",
        "rdi" | "edi" | "di" | "dil" => "rdi",
        "rbp" | "ebp" | "bp" | "bpl" => "rbp",
        "rsp" | "esp" | "sp" | "spl" => "rsp",
        r if r.starts_with('r') => r.trim_end_matches(['d', 'w', 'b']),
        _ => return None,
    };
    // struct pt_regs (arch/x86/include/asm/ptrace.h), in order.
    const ORDER: [&str; 21] = [
        "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
        "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss",
    ];
    ORDER.iter().position(|r| *r == canon).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POSTGRES: &str = "/usr/lib/postgresql/15/bin/postgres";

    /// Catches a wrong operand grammar: each form PostgreSQL 15's notes use.
    #[test]
    fn argument_forms() {
        let a = parse_args("8@%rdi -4@-144(%rbp) 4@(%r12) -4@$8192 -4@40+CheckpointStats(%rip)");
        assert_eq!(a.len(), 5);
        assert_eq!(
            a[0],
            UsdtArg {
                size: 8,
                signed: false,
                location: ArgLocation::Register { reg: "rdi".into() }
            }
        );
        assert_eq!(
            a[1].location,
            ArgLocation::Memory {
                reg: "rbp".into(),
                offset: -144
            }
        );
        assert!(a[1].signed);
        assert_eq!(
            a[2].location,
            ArgLocation::Memory {
                reg: "r12".into(),
                offset: 0
            }
        );
        assert_eq!(a[3].location, ArgLocation::Constant { value: 8192 });
        assert!(matches!(a[4].location, ArgLocation::Other { .. }));
    }

    /// Catches a wrong pt_regs order: rdi is slot 14, r14d is r14 (slot 1).
    #[test]
    fn register_slots() {
        assert_eq!(pt_regs_slot("rdi"), Some(14));
        assert_eq!(pt_regs_slot("eax"), Some(10));
        assert_eq!(pt_regs_slot("r14d"), Some(1));
        assert_eq!(pt_regs_slot("r8"), Some(9));
        assert_eq!(pt_regs_slot("xmm0"), None);
    }

    /// A hand-built ELF note section, parsed through `parse_probes` on a
    /// minimal object would need a whole ELF writer; the real binary is the
    /// fixture when present (Debian's postgresql-15), checked against what
    /// `readelf -n` prints for it.
    #[test]
    fn postgres_notes_match_readelf() {
        let path = Path::new(POSTGRES);
        if !path.exists() {
            eprintln!("skipped: {POSTGRES} not installed");
            return;
        }
        let probes = read_probes(path).expect("postgres has notes");
        let out = std::process::Command::new("readelf")
            .args(["-n", POSTGRES])
            .output()
            .expect("readelf runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let readelf_names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Name: "))
            .collect();
        assert_eq!(probes.len(), readelf_names.len());
        for (p, n) in probes.iter().zip(&readelf_names) {
            assert_eq!(p.provider, "postgresql");
            assert_eq!(&p.name, n);
            assert_ne!(p.semaphore, 0, "{} has a semaphore", p.name);
        }
        let locations: Vec<u64> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Location: "))
            .filter_map(|l| l.split(',').next())
            .filter_map(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
            .collect();
        let pcs: Vec<u64> = probes.iter().map(|p| p.pc).collect();
        assert_eq!(pcs, locations);
        let start = probes.iter().find(|p| p.name == "query__start").unwrap();
        assert_eq!(start.args.len(), 1);
        assert_eq!(start.args[0].size, 8);
        // The file offsets point at the probe's nop (0x90) in the file.
        let data = std::fs::read(path).unwrap();
        for p in &probes {
            assert_eq!(data[p.pc_offset as usize], 0x90, "{} at a nop", p.name);
        }
    }

    /// Catches a binary without notes being accepted (the command's exit 2).
    #[test]
    fn binary_without_notes() {
        let err = read_probes(Path::new("/bin/true")).unwrap_err();
        assert!(matches!(err, UsdtError::NoNotes { .. }), "{err}");
        assert!(err.to_string().contains("no USDT probes"));
    }
}
