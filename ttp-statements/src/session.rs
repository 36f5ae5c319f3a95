//! One statements session, below the command line: what `statements` and
//! `serve --postgres` both do to measure a PostgreSQL server's statements
//! (docs/statements.md; docs/serve.md, "PostgreSQL statements").
//!
//! - [`Server::find`]: the server of a postmaster: its binary (the
//!   postmaster's executable, refused in one line when it was replaced
//!   since the server started: a package upgrade leaves the old inode
//!   running under a `(deleted)` name), whether it is a PostgreSQL server,
//!   where its backends' status entries are, whether it computes query ids,
//!   its USDT probes;
//! - [`Server::summed`]: whether the kernel sums its statements or sends a
//!   record each, and [`Server::socket_statements`], what the socket
//!   programs are loaded with;
//! - [`Server::attach`]: the statement probes in a loaded object;
//! - [`SumsReader`]: the sums and their keys' texts, read on the caller's
//!   interval; nothing it holds grows with the statements;
//! - [`report`] and [`sums_report`]: the document (`ttp.statements/1`).
//!
//! Following a server through its restarts is the caller's: `statements`
//! measures one postmaster, `serve` follows a data directory and opens a
//! session for each postmaster it finds there.
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::{Path, PathBuf},
};

use ttp_common::{
    statements::{Stats, WAITS, flag, wait},
    sums::{SumKey, Sums, key_by as kernel_key_by},
};

use super::{
    GroupBy, Statement, WAIT_PROBES, detail_of,
    document::{ProbeAvailability, ProbeCounts, StatementsReport, TrancheRow},
    extended, group, parallel,
    sums::{self, Snapshot, Texts, Totals},
};
use ttp_ledger::probe::{
    Ledger, SocketStatements,
    pg_status::{self, StatusSource},
    probe_error_ctx,
    statements::{StatementProbes, StatementsProbeError, WORKER_FUNCTION, WorkerSite},
    symbols::Image,
    usdt::{self, UsdtError, UsdtProbe},
};
use ttp_sys::error::usage;

/// The executable of `pid`, or a usage error saying what to do (a binary
/// replaced since the process started cannot be read for its symbols).
/// A server in another mount namespace (a container) is read through
/// `/proc/PID/root` (ttp_sys::sys::executable).
pub(crate) fn server_binary(pid: u32) -> anyhow::Result<PathBuf> {
    use ttp_sys::sys::executable::{Executable, of_process};
    match of_process(pid) {
        Ok(Executable::Path(p)) => Ok(p),
        Ok(Executable::Replaced(p)) => usage(format!(
            "the executable of process {pid} was replaced since it started ({} (deleted)); restart the server or give --binary",
            p.display()
        )),
        Err(e) => usage(format!(
            "cannot read the executable of process {pid} ({e}): give the postmaster's pid (first line of postmaster.pid) and run with sudo"
        )),
    }
}

/// How the kernel keys the sums for `--by`.
pub(crate) fn key_by(by: GroupBy) -> u32 {
    match by {
        GroupBy::Fingerprint => kernel_key_by::QUERY,
        GroupBy::Text => kernel_key_by::TEXT,
        GroupBy::Backend => kernel_key_by::BACKEND,
    }
}

/// A PostgreSQL server found by its postmaster; see the module
/// documentation.
#[derive(Debug, Clone)]
pub struct Server {
    pub pid: u32,
    pub binary: PathBuf,
    /// The binary's USDT probes (none at the socket on a binary without
    /// notes: the wait columns are then not measured).
    pub probes: Vec<UsdtProbe>,
    /// Boundaries at the client socket (else at the USDT probes).
    pub socket: bool,
    pub status: Option<StatusSource>,
    /// Whether the server computes query ids (None: not known).
    pub query_ids: Option<bool>,
    /// Where the status entries were found, or why not (socket only).
    pub status_note: Option<String>,
    /// Lines for the user, said once by the caller (with its prefix).
    pub notes: Vec<String>,
    /// Where parallel workers' shares are seen, when the binary has it.
    pub worker: Option<WorkerSite>,
    /// The address of the global pointing at the running statement's text
    /// (extended.rs), when the binary has it.
    pub query_text: Option<u64>,
}

impl Server {
    /// The server of postmaster `pid` running `binary` (default: its
    /// executable). A bad pid or binary is a usage error in one line. The
    /// binary is read once; every lookup below parses those bytes.
    pub fn find(pid: u32, binary: Option<&Path>, socket: bool) -> anyhow::Result<Self> {
        let binary = match binary {
            Some(b) => b.to_path_buf(),
            None => server_binary(pid)?,
        };
        let image = match Image::read(&binary) {
            Ok(i) => i,
            Err(e) => return usage(format!("cannot read {} ({e})", binary.display())),
        };
        let mut s = Self {
            pid,
            binary,
            probes: Vec::new(),
            socket,
            status: None,
            query_ids: None,
            status_note: None,
            notes: Vec::new(),
            worker: parallel::worker_site(&image),
            query_text: extended::query_text_global(&image),
        };
        if socket {
            if let Some(why) = pg_status::not_a_server(&image) {
                return usage(why);
            }
            match pg_status::find(pid, &image) {
                Ok(st) => {
                    if st.assumed_from.is_some() {
                        s.notes.push(st.describe());
                    }
                    s.status_note = Some(st.describe());
                    s.status = Some(st);
                    s.query_ids = pg_status::query_ids_computed(pid, &image);
                }
                Err(e) => {
                    s.notes.push(format!(
                        "the backends' status entries cannot be read: {e}; statements end at their reply's ReadyForQuery bytes and have no text"
                    ));
                    s.status_note = Some(format!("not read: {e}"));
                }
            }
        }
        s.probes = match usdt::probes_of(&image) {
            Ok(p) => p,
            Err(UsdtError::NoNotes { .. }) if socket => Vec::new(),
            Err(
                e @ (UsdtError::NoNotes { .. } | UsdtError::NotElf { .. } | UsdtError::Read { .. }),
            ) => return usage(e.to_string()),
            Err(e) => return Err(e.into()),
        };
        Ok(s)
    }

    /// Whether the kernel sums the statements: as asked (`asked`: socket
    /// boundaries without `--each`). On a server that computes no query
    /// ids, statements grouped by fingerprint are keyed by their
    /// fingerprint, computed in the kernel (docs/statements.md, "The
    /// fingerprint in the kernel"); the status note says so.
    pub fn summed(&mut self, asked: bool, by: GroupBy) -> bool {
        let no_query_ids = self.status.is_some() && self.query_ids == Some(false);
        if asked
            && no_query_ids
            && matches!(by, GroupBy::Fingerprint)
            && let Some(note) = &mut self.status_note
        {
            note.push_str("; no query ids: keyed by the fingerprint computed in the kernel");
        }
        asked
    }

    /// What the socket programs are loaded with (`None` at the USDT
    /// boundaries). `bounded`: the session ends after a set window
    /// (`statements --duration`); one that runs on (until Ctrl-C,
    /// `serve`) loads the fingerprint machine whatever the server
    /// computes now, since a reload or a role's setting can turn its
    /// query ids off while it runs.
    pub fn socket_statements(
        &self,
        summed: bool,
        by: GroupBy,
        bounded: bool,
    ) -> Option<SocketStatements> {
        self.socket.then_some(SocketStatements {
            status: self.status,
            each: !summed,
            key_by: key_by(by),
            sums: summed,
            // Where the server computes query ids, a statement without one
            // is keyed, in a bounded window, by its text's hash: the groups
            // merge it by the same fingerprint, and the program loads
            // without the fingerprint machine (docs/statements.md, "The
            // fingerprint in the kernel"). Without query ids, a distinct
            // literal would be a key each, so a session that runs on keeps
            // the machine.
            fingerprint: !bounded || self.query_ids != Some(true),
        })
    }

    /// Attaches the statement probes in `ledger`'s object (loaded with
    /// [`Self::socket_statements`]): the wait pairs `requested`, parallel
    /// workers where `worker` is given.
    pub fn attach(
        &self,
        ledger: &mut Ledger,
        requested: &[bool; WAITS],
        worker: Option<WorkerSite>,
    ) -> anyhow::Result<StatementProbes> {
        match StatementProbes::attach(
            ledger,
            &self.binary,
            &self.probes,
            &WAIT_PROBES,
            requested,
            worker,
            self.query_text,
            self.socket,
        ) {
            Ok(sp) => Ok(sp),
            Err(e @ StatementsProbeError::Missing { .. }) => usage(e.to_string()),
            Err(StatementsProbeError::Probe(e)) => Err(probe_error_ctx(e)),
            Err(e) => Err(e.into()),
        }
    }
}

/// Exited backends whose totals are kept under their own key (`--by
/// backend`); the statements of those beyond are summed under `other`.
pub(crate) const EXITED_BACKENDS_KEPT: usize = 4096;

/// The sums of one attached session and their keys' texts. What it holds
/// is bounded by the keys (the kernel's map has at most 4 096 and `other`;
/// with `--by backend`, [`EXITED_BACKENDS_KEPT`] exited backends more).
#[derive(Debug, Default)]
pub struct SumsReader {
    pub texts: Texts,
    /// Keys whose sums could not be read, over every read (a key removed
    /// between the map's walk and its read; a failing syscall).
    pub read_errors: u64,
    /// The last such error, for the report.
    pub last_error: Option<String>,
    /// `--by backend`: exited backends' keys that could not be taken out
    /// of the kernel's map (they stay there, counted, and take room).
    pub remove_errors: u64,
    /// `--by backend`: the totals of backends that exited, taken out of
    /// the kernel's map ([`Self::evict_exited`]).
    exited: BTreeMap<SumKey, Totals>,
    /// Keys in the kernel's map at the last read.
    pub kernel_keys: u64,
}

impl SumsReader {
    /// Takes in the key texts the kernel sent since the last call.
    pub fn drain_texts(&mut self, sp: &mut StatementProbes) {
        let texts = &mut self.texts;
        sp.drain_texts(|r| texts.take(r));
    }

    /// Every key's totals now (exited backends' included), the texts that
    /// came since taken in.
    pub fn read(&mut self, sp: &mut StatementProbes) -> Snapshot {
        let mut snap = Snapshot::default();
        self.read_with(sp, |key, per_cpu| {
            snap.0.insert(key, Totals::of(per_cpu));
        });
        self.kernel_keys = snap.0.len() as u64;
        for (k, t) in &self.exited {
            snap.0.entry(*k).or_default().add(t);
        }
        snap
    }

    /// `--by backend`: takes the keys of backends that exited out of the
    /// kernel's map, keeping their totals here, so that the map's room
    /// serves the backends that run (a pool that reconnects, `pgbench -C`,
    /// would fill it within 4 096 connections and sum the rest under
    /// `other`). Beyond [`EXITED_BACKENDS_KEPT`] exited backends their
    /// statements are summed under `other`. A pid reused by a new backend
    /// before this runs is summed with its predecessor, as before.
    pub(crate) fn evict_exited(&mut self, sp: &mut StatementProbes) {
        let mut gone: Vec<(SumKey, Totals)> = Vec::new();
        self.read_with(sp, |key, per_cpu| {
            if key.kind == ttp_common::sums::key_kind::BACKEND
                && !Path::new(&format!("/proc/{}", key.id)).exists()
            {
                gone.push((key, Totals::of(per_cpu)));
            }
        });
        for (key, t) in gone {
            // Read before the removal: the backend is gone, nothing adds
            // to its key any more.
            if let Err(e) = sp.remove_sum(&key) {
                // Still in the kernel's map, and still counted there: not
                // a failed read. Tried again at the next eviction.
                self.remove_errors += 1;
                self.last_error = Some(format!("taking backend {} out: {e}", key.id));
                continue;
            }
            let kept = if self.exited.len() < EXITED_BACKENDS_KEPT || self.exited.contains_key(&key)
            {
                key
            } else {
                // Its text goes with it: what is kept stays bounded by
                // the keys kept.
                self.texts.0.remove(&key);
                SumKey {
                    kind: ttp_common::sums::key_kind::OTHER,
                    ..SumKey::default()
                }
            };
            self.exited.entry(kept).or_default().add(&t);
        }
    }

    /// Hands every key's sums (a value per CPU) to `f`, the texts that
    /// came since taken in (a reader that keeps less than [`Totals`]:
    /// serve).
    pub fn read_with(&mut self, sp: &mut StatementProbes, f: impl FnMut(SumKey, &[Sums])) {
        self.drain_texts(sp);
        let (errors, last) = sp.sums(f);
        self.read_errors += errors;
        if last.is_some() {
            self.last_error = last;
        }
        // A text sent after the read of its key's first statement.
        self.drain_texts(sp);
    }
}

/// A NUL-terminated string at `addr` in process `pid`'s memory.
fn read_c_string(pid: u32, addr: u64) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = [0u8; 64];
    let n = f.read_at(&mut buf, addr).ok()?;
    let end = buf[..n].iter().position(|b| *b == 0).unwrap_or(n);
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The probes' counters, or zeros and why they could not be read: a
/// failed read of the counters never costs the window's document (the
/// report shows the failure).
fn read_stats(sp: &StatementProbes) -> (Stats, Option<String>) {
    match sp.stats() {
        Ok(s) => (s, None),
        Err(e) => (Stats::default(), Some(e.to_string())),
    }
}

/// The document of a window from records: `statements` (parallel workers'
/// shares joined, `unjoined` of them left), grouped `by`, with the probes'
/// counters, the LWLock tranches and which probes the binary has.
#[allow(clippy::too_many_arguments)]
pub fn report(
    server: &Server,
    by: GroupBy,
    sp: &StatementProbes,
    statements: Vec<Statement>,
    unjoined: u64,
    window_start_ns: u64,
    window_end_ns: u64,
) -> anyhow::Result<StatementsReport> {
    let stats = read_stats(sp);
    Ok(report_with(
        server,
        by,
        sp,
        statements,
        unjoined,
        window_start_ns,
        window_end_ns,
        stats,
    ))
}

/// [`report`] with the counters already read (`stats`: as
/// [`read_stats`] gives them).
#[allow(clippy::too_many_arguments)]
fn report_with(
    server: &Server,
    by: GroupBy,
    sp: &StatementProbes,
    statements: Vec<Statement>,
    unjoined: u64,
    window_start_ns: u64,
    window_end_ns: u64,
    (stats, stats_error): (Stats, Option<String>),
) -> StatementsReport {
    let backends: BTreeSet<u32> = statements.iter().map(|s| s.tgid).collect();
    let groups = group(&statements, by, &sp.available);
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut tranches: Vec<TrancheRow> = Vec::new();
    for (ptr, t) in sp.tranches() {
        let name = names
            .entry(ptr)
            .or_insert_with(|| {
                read_c_string(t.tgid, ptr)
                    .or_else(|| read_c_string(server.pid, ptr))
                    .unwrap_or_else(|| format!("tranche at {ptr:#x}"))
            })
            .clone();
        match tranches.iter_mut().find(|r| r.tranche == name) {
            Some(r) => {
                r.waits += t.waits;
                r.wait_ns += t.wait_ns;
            }
            None => tranches.push(TrancheRow {
                tranche: name,
                waits: t.waits,
                wait_ns: t.wait_ns,
            }),
        }
    }
    tranches.sort_by_key(|t| std::cmp::Reverse(t.wait_ns));
    let mut probes: Vec<ProbeAvailability> = sp
        .sites
        .iter()
        .map(|s| ProbeAvailability {
            name: s.name.clone(),
            sites: s.sites,
            available: s.sites > 0,
            not_measured_without: (s.sites > 0 && !s.attached)
                .then(|| {
                    WAIT_PROBES
                        .iter()
                        .find(|(_, a, b)| *a == s.name || *b == s.name)
                        .and_then(|(label, _, _)| detail_of(label))
                        .map(str::to_string)
                })
                .flatten(),
        })
        .collect();
    probes.push(ProbeAvailability {
        name: WORKER_FUNCTION.into(),
        sites: usize::from(sp.workers),
        available: sp.workers,
        not_measured_without: None,
    });
    let socket = server.socket;
    StatementsReport {
        schema: super::SCHEMA.into(),
        postmaster: server.pid,
        binary: server.binary.display().to_string(),
        boundaries: if socket { "socket" } else { "usdt" }.into(),
        status_entry: server.status_note.clone(),
        ledger: true,
        semaphores: "kernel uprobe reference counter (ref_ctr_offset)".into(),
        by,
        window_start_ns,
        window_end_ns,
        backends: Some(backends.len()),
        statements: statements.len() as u64,
        extended_statements: (sp.available[wait::EXECUTE] || socket).then(|| {
            statements
                .iter()
                .filter(|s| s.flags & flag::EXTENDED != 0)
                .count() as u64
        }),
        probes,
        counts: ProbeCounts {
            // Measured from the records, not the counters.
            worker_shares_unjoined: Some(unjoined),
            ..probe_counts(&stats, stats_error)
        },
        groups,
        tranches,
        cross_check: None,
        cross_check_note: None,
    }
}

/// The document's counts from the programs' counters `stats`, read
/// unless `error`: then each is `None` (null in the JSON), not 0, and the
/// failure is counted.
fn probe_counts(stats: &Stats, error: Option<String>) -> ProbeCounts {
    let counted = error.is_none();
    let read = |v: u64| counted.then_some(v);
    ProbeCounts {
        hits: read(stats.hits),
        records: read(stats.statements),
        records_lost: read(stats.lost_records),
        done_without_start: read(stats.done_without_start),
        other_processes: read(stats.other_processes),
        no_state: read(stats.no_state),
        text_unread: read(stats.text_unread),
        restarted: read(stats.restarted),
        mean_probe_ns: counted.then(|| {
            if stats.hits > 0 {
                stats.probe_ns as f64 / stats.hits as f64
            } else {
                0.0
            }
        }),
        worker_shares: read(stats.workers),
        worker_shares_unjoined: read(stats.workers_unjoined),
        socket_events: read(stats.socket_events),
        connections: read(stats.connections),
        exited_open: read(stats.exited_open),
        killed_open: read(stats.killed_open),
        prepares: read(stats.prepares),
        keys: None,
        summed_other: None,
        texts_lost: None,
        sums_unread: 0,
        counters_unread: u64::from(!counted),
        counters_error: error,
    }
}

/// The counts only the sums have, from the same counters (`None` where
/// `counts` says they were not read).
fn add_sums_counts(counts: &mut ProbeCounts, stats: &Stats) {
    let counted = counts.counters_unread == 0;
    counts.summed_other = counted.then_some(stats.sums_other);
    counts.texts_lost = counted.then_some(stats.texts_lost);
    // The kernel joins the shares: unjoined is its counter here.
    counts.worker_shares_unjoined = counted.then_some(stats.workers_unjoined);
}

/// The document of a window from the sums: `window` is what the keys
/// added between the window's two reads (`at_end.since(&at_start)`; the
/// map starts empty at attach, but statements that ended between the
/// attach and the window's start are not the window's).
pub fn sums_report(
    server: &Server,
    by: GroupBy,
    sp: &StatementProbes,
    reader: &SumsReader,
    window: &Snapshot,
    window_start_ns: u64,
    window_end_ns: u64,
) -> anyhow::Result<StatementsReport> {
    let (stats, stats_error) = read_stats(sp);
    let mut report = report_with(
        server,
        by,
        sp,
        Vec::new(),
        stats.workers_unjoined,
        window_start_ns,
        window_end_ns,
        (stats, stats_error),
    );
    report.groups = sums::groups(window, &reader.texts, by, &sp.available);
    report.statements = window.calls();
    report.backends = (report.counts.counters_unread == 0).then_some(stats.backends as usize);
    report.extended_statements = Some(report.groups.iter().map(|g| g.extended).sum());
    add_sums_counts(&mut report.counts, &stats);
    report.counts.keys = Some(window.0.len() as u64);
    report.counts.sums_unread = reader.read_errors;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> Stats {
        Stats {
            hits: 40,
            probe_ns: 4_000,
            lost_records: 3,
            killed_open: 2,
            sums_other: 7,
            texts_lost: 5,
            workers_unjoined: 1,
            ..Default::default()
        }
    }

    /// Counters read: the document carries them as read.
    #[test]
    fn read_counters_are_the_counts() {
        let mut c = probe_counts(&stats(), None);
        add_sums_counts(&mut c, &stats());
        assert_eq!(c.records_lost, Some(3));
        assert_eq!(c.killed_open, Some(2));
        assert_eq!(c.summed_other, Some(7));
        assert_eq!(c.texts_lost, Some(5));
        assert_eq!(c.worker_shares_unjoined, Some(1));
        assert_eq!(c.mean_probe_ns, Some(100.0));
        assert_eq!(c.counters_unread, 0);
    }

    /// Counters not read: every count they give is null in the JSON (not
    /// 0), and the failure is counted with its reason.
    #[test]
    fn unread_counters_are_null_not_zero() {
        let mut c = probe_counts(&Stats::default(), Some("EBADF".into()));
        add_sums_counts(&mut c, &Stats::default());
        assert_eq!(c.counters_unread, 1);
        let json = serde_json::to_value(&c).unwrap();
        for field in [
            "hits",
            "records",
            "records_lost",
            "done_without_start",
            "other_processes",
            "no_state",
            "text_unread",
            "restarted",
            "mean_probe_ns",
            "worker_shares",
            "worker_shares_unjoined",
            "socket_events",
            "connections",
            "exited_open",
            "killed_open",
            "prepares",
            "summed_other",
            "texts_lost",
        ] {
            assert!(json[field].is_null(), "{field}: {json}");
        }
        assert_eq!(json["counters_error"], "EBADF");
        // Read back, still not measured.
        let back: ProbeCounts = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
    }
}
