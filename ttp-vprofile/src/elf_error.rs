//! Errors about the binary given to `vprofile`; each says what to do next.
use std::path::PathBuf;

use ttp_ledger::probe::symbols::SymbolSource;

/// Errors about the binary itself; each says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not an ELF file: pass the program's executable or shared library with --binary"
    )]
    NotElf { path: PathBuf },
    #[error(
        "{path} is a {class}-bit ELF file for machine {machine}; only x86-64 (64-bit, EM_X86_64) binaries can be profiled"
    )]
    NotX86_64 {
        path: PathBuf,
        class: u8,
        machine: u16,
    },
    #[error("{path}: malformed ELF ({detail})")]
    Malformed { path: PathBuf, detail: String },
    #[error(
        "{path} is stripped: it has no .symtab and its .dynsym defines no functions. \
         Install its debug symbols (e.g. the -dbgsym package) or rebuild it without `-s`/`strip`, \
         or export the functions (`-rdynamic`)"
    )]
    Stripped { path: PathBuf },
    #[error("function `{name}` not found in {path}{}{}", suggestion_text(suggestions), stripped_hint(*symbols))]
    SymbolNotFound {
        name: String,
        path: PathBuf,
        suggestions: Vec<String>,
        symbols: SymbolSource,
    },
    #[error(
        "`{name}` is imported by {path} from a shared library ({}): pass that library with --binary",
        version.as_deref().unwrap_or("unversioned")
    )]
    Imported {
        name: String,
        version: Option<String>,
        path: PathBuf,
    },
    #[error("`{name}` names {} functions in {path} (static functions of different files): pick one by address, e.g. {}", addresses.len(), addresses.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>().join(", "))]
    Ambiguous {
        name: String,
        path: PathBuf,
        addresses: Vec<u64>,
    },
    #[error("no function starts at address {address:#x} in {path}")]
    NoFunctionAt { address: u64, path: PathBuf },
}

fn suggestion_text(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("; close names: {}", s.join(", "))
    }
}

fn stripped_hint(source: SymbolSource) -> &'static str {
    match source {
        SymbolSource::Dynsym => {
            "; the file has no .symtab and no debug file was found (by build-id or .gnu_debuglink under --debug-dir, /usr/lib/debug by default, or from DEBUGINFOD_URLS), so only exported functions are known: install its debug symbols (the -dbgsym or -debuginfo package) to see static ones"
        }
        _ => "",
    }
}
