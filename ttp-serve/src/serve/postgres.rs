//! `serve --postgres`: every statement of each PostgreSQL server, followed
//! through restarts by its data directory, summed per (database, user,
//! fingerprint) (statement_series.rs). docs/serve.md, "PostgreSQL
//! statements".
//!
//! Each server gets the statements' socket programs of its own (the
//! boundaries of `statements`, docs/statements.md), loaded for its
//! postmaster: the programs know the server by its postmaster's pid, so a
//! new postmaster (a restart) means draining the old programs and loading
//! new ones. Every tick:
//! - the data directory's `postmaster.pid` names the postmaster; a live
//!   process of that pid whose working directory is the data directory is
//!   the server (a stale file after a crash names none, or another
//!   process);
//! - a new postmaster: the old programs are drained and dropped, new ones
//!   attached, the restart counted, and the time the new server ran before
//!   the attach is counted as unobserved (one line in the log);
//! - the same postmaster with a new checkpointer: the postmaster
//!   reinitialised after a backend crashed (a crash-restart); counted, the
//!   programs stay (the new backends are the same postmaster's children);
//! - the key texts the kernel sent are drained; at each refresh the
//!   kernel's sums are read into the series (what each key added since
//!   the last read); a backend killed with a statement open is counted as
//!   interrupted.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::serve::{
    pg_names,
    pg_procs::{checkpointer_of, postmaster_of, running_servers},
    pg_sums::{Increments, ServerSums},
    statement_series::{StatementSeries, StatementTotals},
};
use ttp_ledger::probe::{
    AttachOptions, Ledger, pg_status::StatusSource, statements::StatementProbes,
};
use ttp_statements::{GroupBy, requested_waits, session};

/// The longest normalised text a `query` label carries, in characters:
/// enough to recognise a statement, short enough for a label (the
/// fingerprint id tells two long texts with the same start apart).
pub(crate) const QUERY_LABEL_CHARS: usize = 120;

/// One server's programs, loaded for its postmaster. Fields drop in
/// declaration order: the probes' links before the object they live in.
struct Attached {
    probes: StatementProbes,
    _object: Ledger,
    postmaster: u32,
    checkpointer: Option<u32>,
    /// Records the ring could not take, as its counter stood when last read.
    lost_records: u64,
    /// How its status entries are read (`None`: not read, no texts).
    status: Option<StatusSource>,
    /// The kernel's sums, read at each refresh (serve always sums: by
    /// query id, or by the fingerprint computed in the kernel; session.rs,
    /// `Server::summed`).
    sums: ServerSums,
    /// Statements of killed backends the kernel counted (sums), as its
    /// counter stood when last read.
    killed_open: u64,
    /// Failed reads of the sums already said.
    read_errors_said: u64,
}

/// What one server's exposition shows.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct ServerView {
    pub data_directory: String,
    pub up: bool,
    pub restarts: u64,
    pub crash_restarts: u64,
    pub unobserved_ns: u64,
    pub interrupted: u64,
    pub lost_records: u64,
    /// While followed with its status entries read: the server's major
    /// version and the one whose layout reads them (a server newer than
    /// ttp knows is read with the newest layout it knows).
    pub status_entry: Option<(u32, u32)>,
    pub statements: Vec<SeriesView>,
}

/// One series with its labels resolved.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct SeriesView {
    pub database: String,
    pub user: String,
    /// PostgreSQL's query id (pg_stat_statements' `queryid`), where the
    /// server computes one.
    pub queryid: Option<i64>,
    /// The fingerprint's id (16 hex digits of its SHA-256), `other` for
    /// the folded series.
    pub fingerprint: String,
    /// The normalised text, at most [`QUERY_LABEL_CHARS`] characters.
    pub query: String,
    pub totals: StatementTotals,
}

/// One server followed by its data directory; see the module documentation.
pub(crate) struct Server {
    data: PathBuf,
    attached: Option<Attached>,
    series: StatementSeries,
    restarts: u64,
    crash_restarts: u64,
    unobserved_ns: u64,
    interrupted: u64,
    /// Lost records of programs already dropped.
    lost_before: u64,
    /// Since when the server has been seen down (Unix ns); serve's start
    /// before it was first seen.
    unwatched_since_ns: u64,
    /// Whether a postmaster was ever attached (a later one is a restart).
    seen: bool,
    /// Database and user names by oid, from the backends' process titles.
    databases: HashMap<u32, String>,
    users: HashMap<u32, String>,
    /// Why the last attach failed, said once until it changes.
    last_error: Option<String>,
    /// When the postmaster was last looked at.
    followed_at: Option<Instant>,
}

/// How often each server's postmaster is looked at: a restart is seen
/// within it.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Server {
    /// `data`: the data directory (made absolute); `top`: series kept
    /// under their own labels.
    pub(crate) fn new(data: PathBuf, top: usize) -> Self {
        Self {
            data,
            attached: None,
            series: StatementSeries::new(top),
            restarts: 0,
            crash_restarts: 0,
            unobserved_ns: 0,
            interrupted: 0,
            lost_before: 0,
            unwatched_since_ns: unix_ns(),
            seen: false,
            databases: HashMap::new(),
            users: HashMap::new(),
            last_error: None,
            followed_at: None,
        }
    }

    fn data_directory(&self) -> &Path {
        &self.data
    }

    /// Follows the server one tick: see the module documentation. The
    /// postmaster is looked at once every [`FOLLOW_EVERY`]; the records are
    /// drained every tick.
    pub(crate) fn tick(&mut self) {
        if self.followed_at.is_none_or(|t| t.elapsed() >= FOLLOW_EVERY) {
            self.followed_at = Some(Instant::now());
            self.follow();
        }
        self.drain();
    }

    fn follow(&mut self) {
        let now = postmaster_of(&self.data);
        if let Some(a) = &self.attached
            && now.map(|(pid, _)| pid) != Some(a.postmaster)
        {
            self.detach();
        }
        match (&mut self.attached, now) {
            (Some(a), _) => {
                let cp = checkpointer_of(a.postmaster);
                if let (Some(old), Some(new)) = (a.checkpointer, cp)
                    && old != new
                {
                    self.crash_restarts += 1;
                    eprintln!(
                        "ttp: postgres {}: the postmaster {} reinitialised after a backend crash (crash-restart {}); its statements are still followed",
                        self.data.display(),
                        a.postmaster,
                        self.crash_restarts
                    );
                }
                if cp.is_some() {
                    a.checkpointer = cp;
                }
            }
            (None, Some((pid, started_unix_ns))) => self.attach(pid, started_unix_ns),
            (None, None) => {}
        }
    }

    fn attach(&mut self, pid: u32, started_unix_ns: u64) {
        match attach(pid, &self.data) {
            Ok(a) => {
                let at = unix_ns();
                let gap = at.saturating_sub(started_unix_ns.max(self.unwatched_since_ns));
                self.unobserved_ns += gap;
                let what = if self.seen {
                    self.restarts += 1;
                    format!("restart {}", self.restarts)
                } else {
                    "first seen".to_string()
                };
                eprintln!(
                    "ttp: postgres {}: following postmaster {pid} ({what}); {:.3} s of it ran before its statements were followed",
                    self.data.display(),
                    gap as f64 / 1e9
                );
                self.seen = true;
                self.last_error = None;
                self.attached = Some(a);
            }
            Err(e) => {
                let e = format!("{e:#}");
                if self.last_error.as_ref() != Some(&e) {
                    eprintln!(
                        "ttp: postgres {}: cannot follow postmaster {pid}: {e}; trying again every second",
                        self.data.display()
                    );
                    self.last_error = Some(e);
                }
            }
        }
    }

    /// Drains and drops the programs of a postmaster that is gone.
    fn detach(&mut self) {
        self.drain();
        self.read_sums(true);
        if let Some(a) = self.attached.take() {
            self.lost_before += a.lost_records;
            eprintln!(
                "ttp: postgres {}: postmaster {} is gone; its statements are counted up to here",
                self.data.display(),
                a.postmaster
            );
        }
        self.unwatched_since_ns = unix_ns();
    }

    /// Takes in the key texts the kernel sent since the last drain.
    fn drain(&mut self) {
        let Some(a) = &mut self.attached else { return };
        a.sums.drain_texts(&mut a.probes);
    }

    /// Reads the kernel's sums into the series: what each key added since
    /// the last read (`last`: the programs are about to be dropped).
    fn read_sums(&mut self, last: bool) {
        let Some(a) = &mut self.attached else { return };
        let sums = &mut a.sums;
        let Increments { series, other } = sums.read(&mut a.probes, last);
        if let (n, Some(e)) = sums.read_errors()
            && n > a.read_errors_said
        {
            // Not lost: the sums only grow, the next read has them.
            eprintln!(
                "ttp: postgres {}: {n} reads of a key of the kernel's sums failed so far (last: {e}); their statements are counted at a later read",
                self.data.display()
            );
            a.read_errors_said = n;
        }
        if let Ok(st) = a.probes.stats() {
            a.lost_records = st.lost_records;
            self.interrupted += st.killed_open.saturating_sub(a.killed_open);
            a.killed_open = st.killed_open;
        }
        let mut catalog_read = false;
        for (key, t, tgid) in series {
            self.learn_names(key.database, key.user, tgid, &mut catalog_read);
            self.series.add(key, t);
        }
        self.series.add_other(other);
    }

    /// Names the oids of a statement when they are new: from the title of
    /// its backend `tgid` while it runs, else from the shared catalogs (read at most once a
    /// drain). An oid no source names is shown as `oid N`.
    fn learn_names(&mut self, database: u32, user: u32, tgid: u32, catalog_read: &mut bool) {
        let known = |m: &HashMap<u32, String>, oid: u32| oid == 0 || m.contains_key(&oid);
        if known(&self.databases, database) && known(&self.users, user) {
            return;
        }
        // Without a status entry the oids are 0: a title names nothing then.
        if database != 0
            && user != 0
            && tgid != 0
            && let Some((u, d)) = pg_names::title_names(tgid)
        {
            self.databases.insert(database, d);
            self.users.insert(user, u);
            return;
        }
        if !*catalog_read {
            *catalog_read = true;
            let (dbs, users) = pg_names::catalog_names(&self.data);
            self.databases.extend(dbs);
            self.users.extend(users);
        }
    }

    /// Counts what was drained since the last refresh (serve's interval),
    /// the kernel's sums read once.
    pub(crate) fn refresh(&mut self) {
        self.read_sums(false);
        self.series.refresh();
    }

    pub(crate) fn view(&self) -> ServerView {
        let name = |names: &HashMap<u32, String>, oid: u32| match (oid, names.get(&oid)) {
            (_, Some(n)) => n.clone(),
            (0, None) => String::new(),
            (oid, None) => format!("oid {oid}"),
        };
        ServerView {
            data_directory: self.data.display().to_string(),
            up: self.attached.is_some(),
            restarts: self.restarts,
            crash_restarts: self.crash_restarts,
            unobserved_ns: self.unobserved_ns,
            interrupted: self.interrupted,
            lost_records: self.lost_before + self.attached.as_ref().map_or(0, |a| a.lost_records),
            status_entry: self
                .attached
                .as_ref()
                .and_then(|a| a.status)
                .map(|s| (s.major, s.assumed_from.unwrap_or(s.major))),
            statements: self
                .series
                .view()
                .into_iter()
                .map(|(key, totals)| match key {
                    Some(k) => SeriesView {
                        database: name(&self.databases, k.database),
                        user: name(&self.users, k.user),
                        queryid: k.queryid,
                        fingerprint: fingerprint_id(&k.fingerprint),
                        query: query_label(&k.fingerprint),
                        totals,
                    },
                    None => SeriesView {
                        fingerprint: "other".into(),
                        query: "other".into(),
                        totals,
                        ..Default::default()
                    },
                })
                .collect(),
        }
    }
}

/// The statements' programs of the server whose postmaster is `pid`,
/// through the statements session (ttp-statements/src/session.rs): the
/// kernel sums the statements, keyed by query id where the server
/// computes one, else by the fingerprint it computes. Its notes are said
/// once an attach.
fn attach(pid: u32, data: &Path) -> anyhow::Result<Attached> {
    let mut server = session::Server::find(pid, None, true)?;
    let summed = server.summed(true, GroupBy::Fingerprint);
    debug_assert!(summed, "serve always sums");
    let mut object = Ledger::attach_with(&AttachOptions {
        statements_of: Some(pid),
        statements_socket: server.socket_statements(summed, GroupBy::Fingerprint, false),
        no_ledger_programs: true,
        no_bpf_stats: true,
        exit_ring_bytes: Some(ttp_ledger::probe::exits::ring_bytes(1, 1)),
        ..Default::default()
    })
    .map_err(ttp_ledger::probe::probe_error_ctx)?;
    let probes = server.attach(&mut object, &requested_waits(&[], true), None)?;
    for note in &server.notes {
        eprintln!("ttp: postgres {}: {note}", data.display());
    }
    Ok(Attached {
        probes,
        _object: object,
        postmaster: pid,
        checkpointer: checkpointer_of(pid),
        lost_records: 0,
        status: server.status,
        sums: ServerSums::new(),
        killed_open: 0,
        read_errors_said: 0,
    })
}

/// The id a fingerprint is exported under: 16 hex digits of its SHA-256,
/// the same on every machine and across restarts of serve.
pub(crate) fn fingerprint_id(fingerprint: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(fingerprint.as_bytes());
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The normalised text, cut at [`QUERY_LABEL_CHARS`] characters (`…` marks
/// a cut).
pub(crate) fn query_label(fingerprint: &str) -> String {
    match fingerprint.char_indices().nth(QUERY_LABEL_CHARS) {
        Some((at, _)) => format!("{}…", &fingerprint[..at]),
        None => fingerprint.to_string(),
    }
}

/// The servers `serve --postgres` follows: the data directories given, or
/// (`--postgres` without a value) every server found running, now and at
/// every later tick.
pub(crate) struct Servers {
    servers: Vec<Server>,
    find_running: bool,
    /// When /proc was last searched for servers (every [`FOLLOW_EVERY`]).
    searched_at: Option<Instant>,
    top: usize,
}

impl Servers {
    /// `dirs`: the data directories given (an empty one: every server
    /// found). A directory that is not a data directory is a usage error.
    pub(crate) fn new(dirs: &[String], top: usize) -> anyhow::Result<Self> {
        let mut servers: Vec<Server> = Vec::new();
        let mut find_running = false;
        for d in dirs {
            if d.is_empty() {
                find_running = true;
                continue;
            }
            let d = Path::new(d);
            let abs = match std::fs::canonicalize(d) {
                Ok(p) if p.join("PG_VERSION").is_file() => p,
                _ => {
                    return ttp_sys::error::usage(format!(
                        "--postgres {}: not a PostgreSQL data directory (no PG_VERSION in it): give the server's data directory, or --postgres alone for every server running",
                        d.display()
                    ));
                }
            };
            if !servers.iter().any(|s| s.data == abs) {
                servers.push(Server::new(abs, top));
            }
        }
        Ok(Self {
            servers,
            find_running,
            searched_at: None,
            top,
        })
    }

    /// Follows every server one tick (and, with `--postgres` alone, takes
    /// in the servers started since the last search, once a second).
    pub(crate) fn tick(&mut self) {
        if self.find_running && self.searched_at.is_none_or(|t| t.elapsed() >= FOLLOW_EVERY) {
            self.searched_at = Some(Instant::now());
            for d in running_servers() {
                if !self.servers.iter().any(|s| s.data == d) {
                    self.servers.push(Server::new(d, self.top));
                }
            }
        }
        for s in &mut self.servers {
            s.tick();
        }
    }

    /// Counts what was drained since the last refresh; the servers' views.
    pub(crate) fn refresh(&mut self) -> Vec<ServerView> {
        self.servers
            .iter_mut()
            .map(|s| {
                s.refresh();
                s.view()
            })
            .collect()
    }

    /// The data directories followed, for the start line.
    pub(crate) fn describe(&self) -> String {
        let mut v: Vec<String> = self
            .servers
            .iter()
            .map(|s| s.data_directory().display().to_string())
            .collect();
        if self.find_running {
            v.push("every server found running".into());
        }
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a label longer than its bound, and two fingerprints under
    /// one id.
    #[test]
    fn labels() {
        let long = "select ".repeat(40);
        let l = query_label(&long);
        assert_eq!(l.chars().count(), QUERY_LABEL_CHARS + 1);
        assert!(l.ends_with('…'));
        assert_eq!(query_label("select $1"), "select $1");
        assert_eq!(fingerprint_id("select $1").len(), 16);
        assert_ne!(fingerprint_id("select $1"), fingerprint_id("select $2"));
    }
}
