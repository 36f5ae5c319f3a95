//! Where a binary's symbols come from: the one place uprobe users ask for
//! names (vprofile's call graph searches debug files; statements looks up
//! the server's exported globals with [`defined_address`]).
//!
//! A distribution strips `.symtab` from its binaries and ships it apart, as
//! perf, gdb and bcc expect. They are tried in the order those tools use:
//! 1. the binary's own `.symtab`;
//! 2. a separate debug file found by build-id,
//!    `DIR/.build-id/xx/yyyy….debug` under each debug directory
//!    (`/usr/lib/debug` by default: Debian's `-dbgsym`, Fedora's
//!    `-debuginfo`);
//! 3. the file `.gnu_debuglink` names, next to the binary, in its `.debug/`
//!    directory, or under a debug directory followed by the binary's own
//!    directory, accepted only if its CRC-32 is the one the link records;
//! 4. a debuginfod server, when `DEBUGINFOD_URLS` names one
//!    ([`debuginfod`]);
//! 5. `.dynsym`, the exported symbols every dynamic binary keeps.
//!
//! A debug file must carry the binary's build-id when the binary has one,
//! so a stale file from another build is never used to name code.
mod debuginfod;

use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol, SymbolKind};

/// Which table named the functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolSource {
    /// The binary's own `.symtab`.
    Symtab,
    /// A debug file found by build-id under a debug directory.
    BuildId,
    /// The debug file `.gnu_debuglink` names.
    DebugLink,
    /// A debug file a debuginfod server sent (or its cache held).
    Debuginfod,
    /// Only the exported symbols: static functions have no name.
    Dynsym,
}

impl SymbolSource {
    pub fn label(self) -> &'static str {
        match self {
            SymbolSource::Symtab => ".symtab",
            SymbolSource::BuildId => ".symtab of the debug file found by build-id",
            SymbolSource::DebugLink => ".symtab of the debug file .gnu_debuglink names",
            SymbolSource::Debuginfod => ".symtab of the debug file from debuginfod",
            SymbolSource::Dynsym => ".dynsym only",
        }
    }
}

/// Where to look for debug files.
#[derive(Debug, Clone, Default)]
pub struct DebugSearch {
    /// Debug directories, tried in order (gdb's `debug-file-directory`).
    pub dirs: Vec<PathBuf>,
    /// debuginfod servers (`DEBUGINFOD_URLS`), tried in order.
    pub debuginfod: Vec<String>,
    /// Where debuginfod's files are cached (as elfutils' client caches).
    pub cache: Option<PathBuf>,
}

/// The distributions' debug directory.
pub(crate) const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

impl DebugSearch {
    /// No separate debug files: the binary's own tables only.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether nothing beyond the binary itself is searched.
    pub fn is_none(&self) -> bool {
        self.dirs.is_empty() && self.debuginfod.is_empty()
    }

    /// `dirs` (the system's debug directory when empty) and the servers
    /// of `DEBUGINFOD_URLS`.
    pub fn from_env(dirs: &[PathBuf]) -> Self {
        let dirs = if dirs.is_empty() {
            vec![PathBuf::from(SYSTEM_DEBUG_DIR)]
        } else {
            dirs.to_vec()
        };
        Self {
            dirs,
            debuginfod: debuginfod::urls_from_env(),
            cache: debuginfod::cache_dir(),
        }
    }
}

/// A separate debug file that matches the binary.
#[derive(Debug)]
pub struct DebugFile {
    pub path: PathBuf,
    pub source: SymbolSource,
    pub data: Vec<u8>,
}

/// What identifies a binary's debug file.
#[derive(Debug, Clone, Default)]
pub struct DebugIds {
    pub build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: the debug file's name and CRC-32.
    pub debuglink: Option<(String, u32)>,
}

impl DebugIds {
    pub fn of(file: &object::File) -> Self {
        Self {
            build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
            debuglink: file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc)),
        }
    }

    fn build_id_hex(&self) -> Option<String> {
        let id = self.build_id.as_ref().filter(|id| id.len() >= 2)?;
        Some(id.iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// The debug file of `binary` (steps 2–4 of the module's order), or `None`.
pub fn find_debug_file(binary: &Path, ids: &DebugIds, search: &DebugSearch) -> Option<DebugFile> {
    if let Some(hex) = ids.build_id_hex() {
        for dir in &search.dirs {
            let path = dir
                .join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..]));
            if let Some(f) = accept(&path, ids, None, SymbolSource::BuildId) {
                return Some(f);
            }
        }
    }
    if let Some((name, crc)) = &ids.debuglink {
        for path in debuglink_candidates(binary, name, &search.dirs) {
            if let Some(f) = accept(&path, ids, Some(*crc), SymbolSource::DebugLink) {
                return Some(f);
            }
        }
    }
    if let Some(hex) = ids.build_id_hex() {
        for url in &search.debuginfod {
            match debuginfod::fetch(url, &hex, search.cache.as_deref()) {
                Ok(path) => {
                    if let Some(f) = accept(&path, ids, None, SymbolSource::Debuginfod) {
                        return Some(f);
                    }
                    log::warn!(
                        "{} (from {url} or an earlier fetch) is not the debug file of build-id {hex}: removed",
                        path.display()
                    );
                    debuginfod::forget(&path);
                }
                Err(e) => log::info!("debuginfod {url}: {e}"),
            }
        }
    }
    None
}

/// Where `.gnu_debuglink`'s `name` may be, in gdb's order: the binary's
/// directory, its `.debug/`, then each debug directory followed by the
/// binary's (absolute) directory.
fn debuglink_candidates(binary: &Path, name: &str, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let real = std::fs::canonicalize(binary).unwrap_or_else(|_| binary.to_owned());
    let Some(dir) = real.parent() else {
        return Vec::new();
    };
    let mut out = vec![dir.join(name), dir.join(".debug").join(name)];
    for d in dirs {
        out.push(d.join(dir.strip_prefix("/").unwrap_or(dir)).join(name));
    }
    // The link may name the binary's own file name: that is not a debug file.
    out.retain(|p| std::fs::canonicalize(p).map_or(true, |c| c != real));
    out
}

/// `path` as the debug file of a binary with `ids`: an ELF file with
/// function symbols, the binary's build-id (when it has one) and, for a
/// debug link, the CRC-32 the link records.
fn accept(
    path: &Path,
    ids: &DebugIds,
    crc: Option<u32>,
    source: SymbolSource,
) -> Option<DebugFile> {
    let data = std::fs::read(path).ok()?;
    if let Some(want) = crc {
        let mut c = flate2::Crc::new();
        c.update(&data);
        if c.sum() != want {
            log::info!("{}: CRC differs from .gnu_debuglink's", path.display());
            return None;
        }
    }
    let file = object::File::parse(&*data).ok()?;
    if let Some(want) = &ids.build_id
        && file.build_id().ok().flatten() != Some(want.as_slice())
    {
        log::info!("{}: another build's debug file", path.display());
        return None;
    }
    let has_functions = file
        .symbols()
        .any(|s| s.kind() == SymbolKind::Text && !s.is_undefined());
    has_functions.then(|| DebugFile {
        path: path.to_owned(),
        source,
        data,
    })
}

/// A binary mapped once: what one `statements` session looks up in the
/// server's binary (whether it is a server, its status entries' global,
/// the query-id globals, its USDT notes, the parallel-worker site, the
/// query-text global) is parsed from this one mapping, not from a read of
/// the whole file each; the parse touches only the pages it reads (the
/// headers, symbol tables and notes, not the code).
pub struct Image {
    path: PathBuf,
    map: memmap2::Mmap,
}

impl Image {
    /// Maps `path` read-only.
    pub fn read(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        // SAFETY: a private read-only mapping. Its bytes change only if
        // the file is written in place, which Linux refuses for the
        // executable of a running process (ETXTBSY), the server's here;
        // an upgrade replaces the file under a new inode and leaves this
        // one as it is.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(Self {
            path: path.to_owned(),
            map,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn data(&self) -> &[u8] {
        &self.map
    }

    /// The bytes parsed as an object file.
    pub fn parse(&self) -> object::Result<object::File<'_>> {
        object::File::parse(&*self.map)
    }
}

/// The address of the defined symbol `name` of `kind` in `file` (its
/// `.symtab`, then its `.dynsym`).
pub fn defined_address(file: &object::File, name: &str, kind: Option<SymbolKind>) -> Option<u64> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .find(|s| {
            kind.is_none_or(|k| s.kind() == k)
                && s.name() == Ok(name)
                && !s.is_undefined()
                && s.address() != 0
        })
        .map(|s| s.address())
}

#[cfg(test)]
mod tests;
