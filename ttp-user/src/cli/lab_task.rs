//! One task of `ttp-ebpf lab worker`, measured: the task becomes `run`'s
//! own arguments (a query task: `run --postgres`, after its cardinality
//! is made on the DBMS under test through `experiment`'s code), and while
//! `run` measures, a thread records each QE as it lands in the run JSON
//! and renews the task's lease (the heartbeat; docs/lab.md, "Queue",
//! "Leases"). Claiming, finishing and releasing tasks are the worker's
//! loop (cli/lab_worker.rs).
use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;

use super::run::RunArgs;
use crate::lab::{
    Lab, is_transient,
    queue::{self, Claimed},
    retry::Backoff,
    spec::{CommandSpec, Payload, QUERY_LABEL, QueryTask},
};
use ttp_sys::sys::signals::StopFlag;

/// How often the lease is renewed: a tenth of it, so that nine
/// heartbeats in a row can be late or lost before the task is taken over.
fn heartbeat_period(lease: Duration) -> Duration {
    lease / 10
}

/// The `run` of a command task: `-n N [--cold-cache] --label K=V …
/// --json FILE -- ARGV`, built as `run`'s own arguments.
fn run_args(key: &str, c: &CommandSpec, json: &Path) -> RunArgs {
    // The command's name labels its Q@C, unless its labels name the
    // query: then they are the Q@C's name, and commands of one query at
    // several cardinalities are one query for the monotonicity checks
    // (TTPv2 App. E QC3/QC4), as `experiment`'s Q@Cs are.
    let mut labels = Vec::new();
    if !c.labels.contains_key(QUERY_LABEL) {
        labels.push(format!("command={key}"));
    }
    labels.extend(c.labels.iter().map(|(k, v)| format!("{k}={v}")));
    RunArgs {
        n: c.n,
        cold_cache: c.cold_cache,
        labels,
        json: Some(json.to_path_buf()),
        command: c.argv.clone(),
        ..RunArgs::default()
    }
}

/// The `run --postgres` of a query task, as `experiment` runs its Q@C:
/// `-n N [--cold-cache [--restart-cmd CMD]] --backoff B --timeout T
/// --label query=Q --label cardinality=C --json FILE --postgres CONN --sql
/// SQL`, with `experiment`'s defaults (cli/experiment.rs), which are
/// `run`'s too.
fn query_run_args(q: &QueryTask, conn: &str, json: &Path) -> anyhow::Result<RunArgs> {
    let e = &q.experiment;
    let duration = |option: &str, given: &Option<String>, default: Duration| match given {
        Some(s) => ttp_sys::error::parse_duration(s)
            .map_err(|why| anyhow::anyhow!("the spec's {option} {s:?}: {why}")),
        None => Ok(default),
    };
    let defaults = RunArgs::default();
    Ok(RunArgs {
        n: e.n,
        cold_cache: e.cold_cache,
        restart_cmd: e.restart_cmd.clone().filter(|_| e.cold_cache),
        backoff: duration("backoff", &e.backoff, defaults.backoff)?,
        timeout: duration("timeout", &e.timeout, defaults.timeout)?,
        labels: q
            .labels()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        json: Some(json.to_path_buf()),
        postgres: Some(conn.to_string()),
        sql: Some(q.query.sql.clone()),
        // As `experiment`, whose specification has no warm-up: the QEs
        // are the spec's.
        warmup: Some(0),
        ..defaults
    })
}

/// Makes the task's cardinality on the DBMS under test (the maximal table
/// from the spec's seed when another spec made it, then the variable
/// table), through `experiment`'s own code. A DBMS under test this worker
/// cannot reach fails the task with one line, as a missing binary does.
fn prepare_query(q: &QueryTask, conn: &str) -> anyhow::Result<()> {
    use crate::pg::{Pg, experiment::prepare_cardinality};
    let cannot = |e: String| {
        anyhow::anyhow!(
            "this worker cannot run the query spec: {e}; give the worker its DBMS under test with `lab worker --postgres CONN`"
        )
    };
    let pg = Pg::new(conn).map_err(|e| cannot(e.to_string()))?;
    let s = pg.connect().map_err(|e| cannot(e.to_string()))?;
    prepare_cardinality(&s, &q.experiment, q.cardinality).map_err(|e| {
        anyhow::anyhow!(
            "populating {} at cardinality {} on {}: {e}",
            q.experiment.data.table,
            q.cardinality,
            pg.target()
        )
    })
}

/// The QEs of a run JSON as (QE number, the run JSON's record).
pub(crate) fn qes_of(doc: &serde_json::Value) -> Vec<(i32, String)> {
    doc.get("qes")
        .and_then(|q| q.as_array())
        .map(|qes| {
            qes.iter()
                .filter_map(|q| {
                    let n = i32::try_from(q.get("qe")?.as_u64()?).ok()?;
                    Some((n, q.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn read_doc(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// While `run` measures a task, on a connection of its own: inserts the
/// QEs of the run JSON as `run` rewrites it after each QE, and renews the
/// task's lease every [`heartbeat_period`], until `done` is raised. A lab
/// that cannot be reached is tried again with back-off; the QEs stay in
/// the run JSON meanwhile.
struct Follower {
    url: String,
    worker: String,
    task: Claimed,
    json: PathBuf,
    lease: Duration,
    done: Arc<AtomicBool>,
    /// Raised with `stop` when a heartbeat finds the task taken over, so
    /// that `run` ends after the QE in progress (which it does not keep).
    lost: Arc<AtomicBool>,
    stop: StopFlag,
}

impl Follower {
    fn run(self) {
        let id = self.task.id;
        let mut lab: Option<Lab> = None;
        let mut backoff = Backoff::new(Duration::from_millis(200), heartbeat_period(self.lease));
        let mut next_try = Instant::now();
        let mut renewed = Instant::now();
        let mut lost = false;
        loop {
            let last = self.done.load(Ordering::SeqCst);
            if lab.is_none() && Instant::now() >= next_try {
                match Lab::try_connect(&self.url, "ttp-ebpf lab (QEs)") {
                    Ok(l) => lab = Some(l),
                    Err(e) => {
                        log::warn!("task {id}: the lab for QEs and heartbeats: {e:#}");
                        next_try = Instant::now() + backoff.next_wait();
                    }
                }
            }
            if let Some(l) = lab.as_mut() {
                let mut step = || -> anyhow::Result<()> {
                    if !last && !lost && renewed.elapsed() >= heartbeat_period(self.lease) {
                        if !queue::renew(l, &self.task, &self.worker, self.lease.as_secs_f64())? {
                            lost = true;
                            eprintln!(
                                "lab worker {}: task {id} is no longer held by this worker (its lease expired and it was taken over); stopping its run after the QE in progress",
                                self.worker
                            );
                            self.lost.store(true, Ordering::SeqCst);
                            self.stop.as_atomic().store(true, Ordering::SeqCst);
                        }
                        renewed = Instant::now();
                    }
                    if let Some(doc) = read_doc(&self.json) {
                        queue::record_qes(l, &self.task, &qes_of(&doc))?;
                    }
                    Ok(())
                };
                match step() {
                    Ok(()) => backoff.reset(),
                    Err(e) => {
                        log::warn!("task {id}: recording QEs or renewing the lease: {e:#}");
                        if is_transient(&e) {
                            lab = None;
                            next_try = Instant::now() + backoff.next_wait();
                        }
                    }
                }
            }
            if last {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// What measuring a task needs of its worker.
pub struct Executor<'a> {
    /// The lab URL, for the follower's connection of its own.
    pub lab: &'a str,
    /// This worker's name in the lab.
    pub worker: &'a str,
    pub lease: Duration,
    /// `lab worker --postgres`: this host's DBMS under test.
    pub postgres: Option<&'a str>,
}

impl Executor<'_> {
    /// Runs one task with `run` (a query task: `run --postgres` after its
    /// cardinality is made), writing the run JSON to `json`, while a thread
    /// records its QEs as they come and renews the lease; `lost` is raised
    /// (with `stop`) when a heartbeat finds the task taken over.
    pub fn run(
        &self,
        task: &Claimed,
        json: &Path,
        lost: &Arc<AtomicBool>,
        stop: &StopFlag,
    ) -> anyhow::Result<()> {
        let payload: Payload = serde_json::from_str(&task.payload).context("the task's payload")?;
        let done = Arc::new(AtomicBool::new(false));
        let follower = Follower {
            url: self.lab.to_string(),
            worker: self.worker.to_string(),
            task: task.clone(),
            json: json.to_path_buf(),
            lease: self.lease,
            done: done.clone(),
            lost: lost.clone(),
            stop: stop.clone(),
        };
        // The heartbeat runs from here: making a large cardinality may take
        // longer than a lease.
        let follower = std::thread::spawn(move || follower.run());
        let r = (|| {
            let args = match &payload {
                Payload::Command(c) => run_args(&task.key, c, json),
                Payload::Query(q) => {
                    let conn = self.postgres.unwrap_or(&q.experiment.connection);
                    prepare_query(q, conn)?;
                    query_run_args(q, conn, json)?
                }
            };
            let _log = StdoutToStderr::new();
            super::run::run(args)
        })();
        done.store(true, Ordering::SeqCst);
        let _ = follower.join();
        r
    }
}

/// While alive, the process's standard output goes to standard error:
/// `run`'s report of each task is the worker's log, and standard output
/// keeps only the worker's own summary (plain or `--json`).
struct StdoutToStderr(Option<libc::c_int>);

impl StdoutToStderr {
    fn new() -> Self {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: dup and dup2 on the standard descriptors; no memory is
        // involved. On failure nothing is redirected.
        let saved = unsafe { libc::dup(libc::STDOUT_FILENO) };
        if saved < 0 || unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
            if saved >= 0 {
                // SAFETY: closing the descriptor dup returned.
                unsafe { libc::close(saved) };
            }
            return StdoutToStderr(None);
        }
        StdoutToStderr(Some(saved))
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        if let Some(fd) = self.0.take() {
            // SAFETY: puts back the descriptor saved in `new` and closes
            // the copy.
            unsafe {
                libc::dup2(fd, libc::STDOUT_FILENO);
                libc::close(fd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_becomes_runs_own_arguments() {
        let c = CommandSpec {
            name: "spin".into(),
            argv: vec!["/bin/sleep".into(), "0.1".into()],
            n: 4,
            cold_cache: true,
            labels: [("size".to_string(), "3".to_string())].into(),
        };
        let a = run_args("spin", &c, Path::new("/tmp/x.json"));
        assert_eq!(a.n, 4);
        assert!(a.cold_cache);
        assert_eq!(a.command, ["/bin/sleep", "0.1"]);
        assert_eq!(a.labels, ["command=spin", "size=3"]);
        assert_eq!(a.json.as_deref(), Some(Path::new("/tmp/x.json")));
    }

    /// A command whose labels name its query is labelled by them alone,
    /// so its Q@Cs at several cardinalities form one query.
    #[test]
    fn a_query_label_replaces_the_command_label() {
        let c = CommandSpec {
            name: "s20".into(),
            argv: vec!["/bin/true".into()],
            n: 6,
            cold_cache: false,
            labels: [
                ("query".to_string(), "spin".to_string()),
                ("cardinality".to_string(), "20".to_string()),
            ]
            .into(),
        };
        let a = run_args("s20", &c, Path::new("/tmp/x.json"));
        assert_eq!(a.labels, ["cardinality=20", "query=spin"]);
    }

    /// A query task becomes `run --postgres` with `experiment`'s labels
    /// and its n, back-off and timeout.
    #[test]
    fn a_query_task_becomes_run_postgres() {
        let text = "name = \"e\"\nhosts = [\"a\"]\nconnection = \"host=/tmp port=5\"\nn = 3\ntimeout = \"5s\"\ncardinalities = [10]\n[data]\ngenerate = \"SELECT 1\"\n[[query]]\nname = \"q\"\nsql = \"SELECT 2\"\n";
        let spec = crate::lab::spec::LabSpec::parse(text).unwrap();
        let Payload::Query(q) = &spec.tasks()[0].payload else {
            panic!("a query task")
        };
        let a = query_run_args(q, "host=/x port=7", Path::new("/tmp/x.json")).unwrap();
        assert_eq!(a.n, 3);
        assert_eq!(a.postgres.as_deref(), Some("host=/x port=7"));
        assert_eq!(a.sql.as_deref(), Some("SELECT 2"));
        assert_eq!(a.labels, ["cardinality=10", "query=q"]);
        assert_eq!(a.timeout, Duration::from_secs(5));
        assert_eq!(a.backoff, Duration::from_millis(100));
        assert!(!a.cold_cache && a.command.is_empty());
    }

    #[test]
    fn qes_are_read_from_the_run_json() {
        let doc = serde_json::json!({"qes": [{"qe": 1, "x": 2}, {"qe": 2}, {"nope": 1}]});
        let q = qes_of(&doc);
        assert_eq!(q.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
        assert!(q[0].1.contains("\"x\":2"));
    }
}
