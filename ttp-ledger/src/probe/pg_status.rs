//! Where `statements` reads a PostgreSQL backend's own status entry at the
//! end of each statement (ttp-ebpf/src/wire.rs): the global `MyBEEntry`
//! (exported in the binary's dynamic symbols, like every global extensions
//! may use) points at the backend's `PgBackendStatus` in shared memory,
//! whose state says whether a reply ends the statement, and which holds the
//! statement's text (`st_activity_raw`), query id, database and user.
//!
//! The struct's layout is the server version's. Its offsets come from a
//! table checked with `offsetof` against the server headers of the version
//! each row names, and are then checked on the running server: a backend's
//! entry, read through `/proc/PID/mem`, must hold that backend's pid and a
//! valid state. A server whose layout is unknown or fails the check is
//! still measured: the reply's bytes decide the end (a ReadyForQuery
//! message), and the statements have no text.
use std::{
    os::unix::fs::{FileExt, MetadataExt},
    path::Path,
};

/// Offsets of the fields read, in bytes from the entry's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusLayout {
    /// `st_state` (`BackendState`, an int).
    pub state: u32,
    /// `st_activity_raw` (a `char *` into shared memory).
    pub activity: u32,
    /// `st_query_id` (uint64).
    pub query_id: u32,
    /// `st_activity_start_timestamp`, followed by
    /// `st_state_start_timestamp`, `st_databaseid` and `st_userid`.
    pub activity_start: u32,
}

/// `st_procpid`'s offset (the second int of the struct in every version).
const OFF_PROCPID: u64 = 4;

/// The layout of `PgBackendStatus` in PostgreSQL `major` on x86-64.
/// PostgreSQL 15: `offsetof` against Debian's postgresql-server-dev-15
/// headers (procpid 4, activity start 32, state start 40, database 48,
/// user 52, state 232, activity 248, query id 424; size 432). 14 has the
/// same fields in the same order and sizes (`st_query_id` was added in 14,
/// last), and so have 16 and 17; for them the check on the running server
/// (see [`find`]) is what vouches for the table.
pub fn layout(major: u32) -> Option<StatusLayout> {
    match major {
        14..=17 => Some(StatusLayout {
            state: 232,
            activity: 248,
            query_id: 424,
            activity_start: 32,
        }),
        _ => None,
    }
}

/// The global every backend points at its entry with.
pub const ENTRY_GLOBAL: &str = "MyBEEntry";

/// Where the entries are, for one running server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusSource {
    /// Address of `MyBEEntry` in the backends.
    pub entry_global: u64,
    pub layout: StatusLayout,
    /// The server's major version (its data directory's PG_VERSION).
    pub major: u32,
    /// A backend whose entry was read and held its pid and a valid state;
    /// `None` when the server had no backend with an entry to check.
    pub checked_on: Option<u32>,
}

/// The status entries of the server whose postmaster is `postmaster`,
/// running `binary`, or why they cannot be read (one line).
pub fn find(postmaster: u32, binary: &Path) -> Result<StatusSource, String> {
    let version_file = format!("/proc/{postmaster}/cwd/PG_VERSION");
    let major: u32 = std::fs::read_to_string(&version_file)
        .map_err(|e| format!("cannot read {version_file} ({e})"))?
        .trim()
        .parse()
        .map_err(|_| format!("{version_file} holds no version number"))?;
    let layout = layout(major)
        .ok_or_else(|| format!("the status entry of PostgreSQL {major} is not known to ttp"))?;
    // The programs copy the entry's first STATUS_BYTES at once.
    let last = [
        layout.state + 4,
        layout.activity + 8,
        layout.query_id + 8,
        layout.activity_start + 24,
    ];
    if last
        .iter()
        .any(|&end| end as usize > ttp_common::statements::STATUS_BYTES)
    {
        return Err(format!(
            "the status entry of PostgreSQL {major} lies beyond what ttp copies"
        ));
    }
    let data = std::fs::read(binary).map_err(|e| format!("reading {}: {e}", binary.display()))?;
    let file = object::File::parse(&*data).map_err(|e| format!("{}: {e}", binary.display()))?;
    let symbol = symbol(&file, ENTRY_GLOBAL)
        .ok_or_else(|| format!("{} has no symbol {ENTRY_GLOBAL}", binary.display()))?;
    let bias = load_bias(postmaster, binary, &file)?;
    let source = StatusSource {
        entry_global: bias + symbol,
        layout,
        major,
        checked_on: None,
    };
    check(postmaster, source)
}

/// Why `binary` is not a PostgreSQL server binary (it has no
/// [`ENTRY_GLOBAL`]), if it is not.
pub fn not_a_server(binary: &Path) -> Option<String> {
    let data = match std::fs::read(binary) {
        Ok(d) => d,
        Err(e) => return Some(format!("cannot read {} ({e})", binary.display())),
    };
    match object::File::parse(&*data) {
        Ok(file) if symbol(&file, ENTRY_GLOBAL).is_some() => None,
        Ok(_) => Some(format!(
            "{} is not a PostgreSQL server binary (it has no {ENTRY_GLOBAL}): give the postmaster's pid (first line of postmaster.pid) or its binary with --binary",
            binary.display()
        )),
        Err(e) => Some(format!("{} is not an ELF file ({e})", binary.display())),
    }
}

fn symbol(file: &object::File, name: &str) -> Option<u64> {
    super::symbols::defined_address(file, name, None)
}

/// Where `binary` is loaded in `pid`: the start of its mapping at file
/// offset 0 (matched by inode, so a symlink or bind path finds it) less
/// the first loadable segment's page-aligned address.
fn load_bias(pid: u32, binary: &Path, file: &object::File) -> Result<u64, String> {
    use object::{Object, ObjectSegment};
    let inode = std::fs::metadata(binary)
        .map_err(|e| format!("{}: {e}", binary.display()))?
        .ino();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("cannot read /proc/{pid}/maps ({e})"))?;
    let start = maps
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (range, offset, ino) = (f.first()?, f.get(2)?, f.get(4)?);
            (ino.parse::<u64>().ok()? == inode && u64::from_str_radix(offset, 16).ok()? == 0)
                .then(|| u64::from_str_radix(range.split('-').next()?, 16).ok())
                .flatten()
        })
        .ok_or_else(|| {
            format!(
                "process {pid} does not map {} (is it that server's binary?)",
                binary.display()
            )
        })?;
    let first = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
    Ok(start - first)
}

/// The children of `pid` (processes whose parent it is).
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|c| {
            std::fs::read_to_string(format!("/proc/{c}/stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

/// The pid a process has in its own pid namespace (the last of
/// /proc/PID/status's NSpid), which is what the server stores.
fn own_pid(pid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("NSpid:"))?
                .split_whitespace()
                .last()?
                .parse()
                .ok()
        })
        .unwrap_or(pid)
}

/// Checks the layout on the server's backends: every child whose
/// `MyBEEntry` is set must have an entry with its own pid and a state
/// PostgreSQL defines (0..=6). One that does not is a wrong table row or
/// a wrong address: the whole source is refused.
fn check(postmaster: u32, mut source: StatusSource) -> Result<StatusSource, String> {
    for child in children(postmaster) {
        let Ok(mem) = std::fs::File::open(format!("/proc/{child}/mem")) else {
            continue;
        };
        let mut word = [0u8; 8];
        if mem.read_exact_at(&mut word, source.entry_global).is_err() {
            continue;
        }
        let entry = u64::from_ne_bytes(word);
        if entry == 0 {
            continue; // an auxiliary process, or a backend starting
        }
        let mut pid = [0u8; 4];
        let mut state = [0u8; 4];
        if mem.read_exact_at(&mut pid, entry + OFF_PROCPID).is_err()
            || mem
                .read_exact_at(&mut state, entry + u64::from(source.layout.state))
                .is_err()
        {
            return Err(format!(
                "process {child}'s status entry at {entry:#x} is not readable"
            ));
        }
        let (pid, state) = (u32::from_ne_bytes(pid), u32::from_ne_bytes(state));
        if pid == 0 {
            continue; // its entry is not in use yet
        }
        if pid != own_pid(child) || state > 6 {
            return Err(format!(
                "process {child}'s status entry does not hold its pid and state where PostgreSQL {} keeps them (pid {pid}, state {state})",
                source.major
            ));
        }
        source.checked_on = Some(child);
        break;
    }
    Ok(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a symbol taken from the wrong table: the installed server
    /// exports the global, a pointer in a data segment.
    #[test]
    fn the_installed_server_exports_its_status_entry() {
        let Some(bin) = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|d| {
            d.flatten()
                .map(|e| e.path().join("bin/postgres"))
                .find(|p| p.exists())
        }) else {
            eprintln!("no /usr/lib/postgresql/*/bin/postgres: skipped");
            return;
        };
        let data = std::fs::read(&bin).unwrap();
        let file = object::File::parse(&*data).unwrap();
        assert!(symbol(&file, ENTRY_GLOBAL).is_some());
        assert_eq!(layout(13), None);
        assert_eq!(layout(15).map(|l| l.query_id), Some(424));
    }
}
