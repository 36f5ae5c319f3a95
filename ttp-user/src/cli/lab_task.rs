//! One task of `ttp-ebpf lab worker`, measured: the task becomes `run`'s
//! typed plan (a command task: `commands::Plan`; a query task: the
//! `pg::statement::StatementPlan` of `run --postgres`, after its
//! cardinality is made on the DBMS under test through `experiment`'s
//! code) and is measured by the function `run` calls. After each QE the
//! task's callback hands the QEs to a thread that records them in the lab
//! and renews the task's lease (the heartbeat; docs/lab.md, "Queue",
//! "Leases"), and rewrites the run's JSON, which keeps them until the lab
//! has them. Claiming, finishing and releasing tasks are the worker's
//! loop (cli/lab_worker.rs).
use std::{
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;

use super::run_args::RunArgs;
use crate::{
    commands,
    lab::{
        Lab, is_transient,
        queue::{self, Claimed},
        retry::Backoff,
        spec::{CommandSpec, Payload, QUERY_LABEL, QueryTask},
    },
    pg::{
        PgFacts,
        statement::{self, run_json},
    },
    report::{
        progress::Progress,
        render::{self, Rendered},
    },
};
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::sys::signals::StopFlag;
use ttp_ttpv2::{analysis::RunDocument, model::QcInput};

/// How often the lease is renewed: a tenth of it, so that nine
/// heartbeats in a row can be late or lost before the task is taken over.
fn heartbeat_period(lease: Duration) -> Duration {
    lease / 10
}

/// The `run` of a command task: `-n N [--cold-cache] --label K=V …
/// -- ARGV`, built as `run`'s own arguments (its plan is `run`'s).
fn run_args(key: &str, c: &CommandSpec) -> RunArgs {
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
        command: c.argv.clone(),
        ..RunArgs::default()
    }
}

/// The `run --postgres` of a query task, as `experiment` runs its Q@C:
/// `-n N [--cold-cache [--restart-cmd CMD]] --backoff B --timeout T
/// --label query=Q --label cardinality=C --postgres CONN --sql SQL`, with
/// `experiment`'s defaults (cli/experiment.rs), which are `run`'s too.
fn query_run_args(q: &QueryTask, conn: &str) -> anyhow::Result<RunArgs> {
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

/// The QEs measured so far, handed from the measuring thread to the one
/// that records them: each hand-over holds every QE of the run (the lab
/// records a QE once), so only the newest waits.
#[derive(Default)]
struct Pending(Mutex<Option<Vec<(i32, String)>>>);

impl Pending {
    fn publish(&self, qes: Vec<(i32, String)>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(qes);
    }

    fn take(&self) -> Option<Vec<(i32, String)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Puts back QEs the lab did not take, unless newer ones came since.
    fn put_back(&self, qes: Vec<(i32, String)>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(qes);
    }
}

/// While a task is measured, on a connection of its own: inserts the QEs
/// handed over after each QE, and renews the task's lease every
/// [`heartbeat_period`], until `done` is raised. A lab that cannot be
/// reached is tried again with back-off; the QEs stay in the run JSON
/// meanwhile.
struct Follower {
    url: String,
    worker: String,
    task: Claimed,
    qes: Arc<Pending>,
    lease: Duration,
    done: Arc<AtomicBool>,
    /// Raised with `stop` when a heartbeat finds the task taken over, so
    /// that the run ends after the QE in progress (which it does not keep).
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
                    if let Some(qes) = self.qes.take()
                        && let Err(e) = queue::record_qes(l, &self.task, &qes)
                    {
                        self.qes.put_back(qes);
                        return Err(e);
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
pub(crate) struct Executor<'a> {
    /// The lab URL, for the follower's connection of its own.
    pub lab: &'a str,
    /// This worker's name in the lab.
    pub worker: &'a str,
    pub lease: Duration,
    /// `lab worker --postgres`: this host's DBMS under test.
    pub postgres: Option<&'a str>,
}

/// A task measured: how its run ended (`run`'s error for a failed task)
/// and its run JSON document, holding the QEs measured (none when no QE
/// was).
pub(crate) struct Ran {
    pub outcome: anyhow::Result<()>,
    pub doc: Option<serde_json::Value>,
}

impl Executor<'_> {
    /// Measures one task as `run` measures it (a query task: `run
    /// --postgres`, after its cardinality is made), rewriting the run JSON
    /// `json` after each QE, while a thread records its QEs as they come
    /// and renews the lease; `lost` is raised (with `stop`) when a
    /// heartbeat finds the task taken over.
    pub fn run(&self, task: &Claimed, json: &Path, lost: &Arc<AtomicBool>, stop: &StopFlag) -> Ran {
        let payload: Payload = match serde_json::from_str(&task.payload) {
            Ok(p) => p,
            Err(e) => {
                return Ran {
                    outcome: Err(anyhow::Error::new(e).context("the task's payload")),
                    doc: None,
                };
            }
        };
        let done = Arc::new(AtomicBool::new(false));
        let qes = Arc::new(Pending::default());
        let follower = Follower {
            url: self.lab.to_string(),
            worker: self.worker.to_string(),
            task: task.clone(),
            qes: qes.clone(),
            lease: self.lease,
            done: done.clone(),
            lost: lost.clone(),
            stop: stop.clone(),
        };
        // The heartbeat runs from here: making a large cardinality may take
        // longer than a lease.
        let follower = std::thread::spawn(move || follower.run());
        let mut out = Output {
            json,
            qes: &qes,
            doc: None,
        };
        let outcome = match &payload {
            Payload::Command(c) => measure_command(&task.key, c, stop, &mut out),
            Payload::Query(q) => {
                let conn = self.postgres.unwrap_or(&q.experiment.connection);
                prepare_query(q, conn).and_then(|()| measure_query(q, conn, stop, &mut out))
            }
        };
        done.store(true, Ordering::SeqCst);
        let _ = follower.join();
        Ran {
            outcome,
            doc: out.doc,
        }
    }
}

/// Where a task's run goes after each QE and at its end: the run JSON,
/// the QEs handed to the follower, and the document kept for the result.
struct Output<'a> {
    json: &'a Path,
    qes: &'a Pending,
    doc: Option<serde_json::Value>,
}

impl Output<'_> {
    /// The run's document as it stands: its QEs to the lab, the whole to
    /// the run JSON (rewritten after every QE, as `run --json` does).
    fn update(&mut self, doc: serde_json::Value) -> anyhow::Result<()> {
        self.qes.publish(qes_of(&doc));
        let written = ttp_sys::sys::atomic::write_json(self.json, &doc)
            .with_context(|| format!("writing {}", self.json.display()));
        self.doc = Some(doc);
        written
    }
}

/// A command task: `run`'s plan of its arguments, measured by
/// `commands::measure`; `run`'s report of it goes to standard error, the
/// worker's log (standard output keeps only the worker's summary).
fn measure_command(
    key: &str,
    c: &CommandSpec,
    stop: &StopFlag,
    out: &mut Output<'_>,
) -> anyhow::Result<()> {
    let plan = super::run::plan(&run_args(key, c))?;
    let bar = Progress::new(u64::from(plan.n) * plan.qcs.len() as u64, "QE");
    let mut on_qe = |qcs: &[QcInput], _: usize, _: &str, machine: &MachineFacts| {
        bar.set_position(qcs.iter().map(|q| q.qes.len() as u64).sum());
        out.update(super::run::document(qcs, machine)?)
    };
    let run = commands::measure(&plan, stop, &mut on_qe, &|m| bar.notice(m));
    bar.finish_and_clear();
    let commands::Run {
        mut qcs,
        machine,
        measured,
        ..
    } = run?;
    let failure = super::run::reportable(&mut qcs, measured.failure)?;
    out.update(super::run::document(&qcs, &machine)?)?;
    if let [qc] = &qcs[..] {
        eprint!(
            "{}",
            render::Run(RunDocument::new(
                qc,
                Some(&machine),
                crate::report::ttpv2::paragraph::text
            ))
            .text()
        );
    }
    match failure {
        Some(e) => Err(super::run::could_not_run(e)),
        None => Ok(()),
    }
}

/// A query task: `run --postgres`'s plan of its arguments, measured by
/// `pg::statement::measure`; its report goes to standard error, as a
/// command task's.
fn measure_query(
    q: &QueryTask,
    conn: &str,
    stop: &StopFlag,
    out: &mut Output<'_>,
) -> anyhow::Result<()> {
    let plan = super::run_pg::plan(&query_run_args(q, conn)?, conn)?;
    let bar = Progress::new(u64::from(plan.n), "QE");
    let mut write_err: Option<anyhow::Error> = None;
    let mut on_qe = |qc: &QcInput, facts: &PgFacts, machine: &MachineFacts| {
        bar.set_position(qc.qes.len() as u64);
        if let Err(e) = run_json(qc, facts, machine, crate::report::ttpv2::paragraph::text)
            .and_then(|(_, v)| out.update(v))
        {
            write_err.get_or_insert(e);
        }
    };
    let outcome = statement::measure(&plan, stop, &mut on_qe, &|m| bar.notice(m));
    bar.finish_and_clear();
    if let Some(e) = write_err {
        return Err(e);
    }
    let (run, machine) = outcome?;
    super::run_pg::nothing_measured(&run)?;
    let (doc, value) = run_json(
        &run.qc,
        &run.facts,
        &machine,
        crate::report::ttpv2::paragraph::text,
    )?;
    out.update(value)?;
    eprint!("{}", super::run_pg::header(&run.facts, &run.qc));
    eprintln!("{}", render::Run(doc).text());
    super::run_pg::ended(&run, Some(out.json))
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
        let a = run_args("spin", &c);
        assert_eq!(a.n, 4);
        assert!(a.cold_cache);
        assert_eq!(a.command, ["/bin/sleep", "0.1"]);
        assert_eq!(a.labels, ["command=spin", "size=3"]);
        assert_eq!(a.json, None);
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
        let a = run_args("s20", &c);
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
        let a = query_run_args(q, "host=/x port=7").unwrap();
        assert_eq!(a.n, 3);
        assert_eq!(a.postgres.as_deref(), Some("host=/x port=7"));
        assert_eq!(a.sql.as_deref(), Some("SELECT 2"));
        assert_eq!(a.labels, ["cardinality=10", "query=q"]);
        assert_eq!(a.timeout, Duration::from_secs(5));
        assert_eq!(a.backoff, Duration::from_millis(100));
        assert!(!a.cold_cache && a.command.is_empty());
    }

    /// QEs the lab did not take are tried again, unless a newer hand-over
    /// (which holds them too) came meanwhile. Catches QEs lost when a
    /// write to the lab fails, and a stale set put over a newer one.
    #[test]
    fn pending_qes_keep_the_newest_hand_over() {
        let p = Pending::default();
        assert!(p.take().is_none());
        p.publish(vec![(1, "a".into())]);
        let first = p.take().expect("handed over");
        assert!(p.take().is_none(), "taken once");
        p.put_back(first.clone());
        assert_eq!(p.take(), Some(first.clone()), "a failed write is retried");
        p.publish(vec![(1, "a".into()), (2, "b".into())]);
        p.put_back(first);
        assert_eq!(p.take().map(|q| q.len()), Some(2), "the newer set stays");
    }

    #[test]
    fn qes_are_read_from_the_run_json() {
        let doc = serde_json::json!({"qes": [{"qe": 1, "x": 2}, {"qe": 2}, {"nope": 1}]});
        let q = qes_of(&doc);
        assert_eq!(q.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
        assert!(q[0].1.contains("\"x\":2"));
    }
}
