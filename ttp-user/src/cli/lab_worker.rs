//! `ttp-ebpf lab worker`: claims this host label's tasks one at a time and
//! times each with `run` (TTPv2), holding each task with a lease it
//! renews while `run` measures (the heartbeat), recording every QE as it
//! is measured and the Q@C result at the end; waits with back-off while
//! the lab cannot be reached (docs/lab.md, "Queue", "Leases", "Waiting").
use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Parser;

use crate::{
    lab::{
        Lab, is_transient,
        queue::{self, Claimed},
        retry::Backoff,
        schema,
        spec::{CommandSpec, Payload, QUERY_LABEL, QueryTask},
    },
    sys::signals::StopFlag,
};

/// Claim this host label's pending tasks (and tasks whose lease expired)
/// one at a time and time each with `run` (TTPv2), recording every QE as
/// it is measured and the Q@C result at the end. Needs root, as `run`.
/// Without --once, waits for new tasks until Ctrl-C/SIGTERM.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// What this host is, as specs name it (e.g. nvme-16c).
    #[arg(long, value_name = "LABEL")]
    pub host_label: String,
    /// Exit 0 once nothing is pending for the label; without it, wait for
    /// new tasks (polling every --poll) until Ctrl-C/SIGTERM.
    #[arg(long)]
    pub once: bool,
    /// Stop after this many tasks.
    #[arg(long, value_name = "N")]
    pub max_tasks: Option<u32>,
    /// This worker's name in the lab (default HOSTNAME:PID).
    #[arg(long, value_name = "NAME")]
    pub worker_name: Option<String>,
    /// How long a claim holds a task without a heartbeat; renewed every
    /// tenth of it while the task runs. A task whose worker died is taken
    /// over by another worker of its label this long after the last
    /// heartbeat.
    #[arg(long, default_value = "5min", value_parser = crate::report::units::parse_duration)]
    pub lease: Duration,
    /// How often a waiting worker asks for new tasks (jittered: each wait
    /// is between half and all of it).
    #[arg(long, default_value = "10s", value_parser = crate::report::units::parse_duration)]
    pub poll: Duration,
    /// The longest wait between two attempts to reach a lab that cannot
    /// be reached (the waits double from 1 s up to this, jittered).
    #[arg(long, default_value = "60s", value_parser = crate::report::units::parse_duration)]
    pub retry_cap: Duration,
    /// This host's DBMS under test, for query specs (key=value pairs or
    /// a postgresql:// URL, password included if it needs one); default:
    /// the spec's `connection`. Each worker needs a DBMS under test (or a
    /// database) of its own: a task replaces its tables.
    #[arg(long, value_name = "CONN")]
    pub postgres: Option<String>,
    /// Print a summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Claim and finish each task without running its command: the queue
    /// alone, for `cargo xtask bench lab` (docs/benchmarks.md); the JSON
    /// summary adds each claim's round trip (`claim_latencies_s`).
    #[arg(long, hide = true)]
    pub no_run: bool,
}

/// The worker's connection to the lab, opened again and waited for (with
/// back-off) when the lab cannot be reached.
struct Session<'a> {
    url: &'a str,
    name: &'a str,
    lab: Option<Lab>,
    backoff: Backoff,
    stop: &'a StopFlag,
}

impl Session<'_> {
    /// Runs `f` on the connection, connecting (again) as needed. While the
    /// lab cannot be reached (refused, timed out, restarting) it waits with
    /// back-off, saying once what it waits for; other errors are returned.
    /// `None`: stopped by a signal while waiting.
    fn with<T>(
        &mut self,
        what: &str,
        mut f: impl FnMut(&mut Lab) -> anyhow::Result<T>,
    ) -> anyhow::Result<Option<T>> {
        let mut since: Option<Instant> = None;
        loop {
            let tried = match self.lab.as_mut() {
                Some(lab) => f(lab),
                None => Lab::try_connect(self.url, "ttp-ebpf lab").and_then(|mut lab| {
                    let r = f(&mut lab);
                    self.lab = Some(lab);
                    r
                }),
            };
            match tried {
                Ok(v) => {
                    if let Some(t) = since {
                        eprintln!(
                            "lab worker {}: the lab answers again after {:.0} s; continuing",
                            self.name,
                            t.elapsed().as_secs_f64()
                        );
                    }
                    self.backoff.reset();
                    return Ok(Some(v));
                }
                Err(e) if is_transient(&e) => {
                    self.lab = None;
                    if since.is_none() {
                        since = Some(Instant::now());
                        eprintln!(
                            "lab worker {}: waiting for the lab to {what}: {}; trying again with back-off",
                            self.name,
                            e.root_cause()
                        );
                    }
                    self.stop.sleep(self.backoff.next_wait());
                    if self.stop.raised() {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// How often the lease is renewed: a tenth of it, so that nine
/// heartbeats in a row can be late or lost before the task is taken over.
fn heartbeat_period(lease: Duration) -> Duration {
    lease / 10
}
/// `run`'s command line, parsed by `run`'s own argument struct.
#[derive(Debug, Parser)]
struct RunLine {
    #[command(flatten)]
    run: super::run::RunArgs,
}

/// The `run` arguments of a task: `-n N [--cold-cache] --label K=V …
/// --json FILE -- ARGV`.
fn run_args(key: &str, c: &CommandSpec, json: &Path) -> anyhow::Result<super::run::RunArgs> {
    let mut line: Vec<String> = vec!["run".into(), "-n".into(), c.n.to_string()];
    if c.cold_cache {
        line.push("--cold-cache".into());
    }
    // The command's name labels its Q@C, unless its labels name the
    // query: then they are the Q@C's name, and commands of one query at
    // several cardinalities are one query for the monotonicity checks
    // (TTPv2 App. E QC3/QC4), as `experiment`'s Q@Cs are.
    if !c.labels.contains_key(QUERY_LABEL) {
        line.push("--label".into());
        line.push(format!("command={key}"));
    }
    for (k, v) in &c.labels {
        line.push("--label".into());
        line.push(format!("{k}={v}"));
    }
    line.push("--json".into());
    line.push(json.display().to_string());
    line.push("--".into());
    line.extend(c.argv.iter().cloned());
    Ok(RunLine::try_parse_from(line)
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))?
        .run)
}

/// The `run --postgres` arguments of a query task, as `experiment` runs
/// its Q@C: `-n N [--cold-cache [--restart-cmd CMD]] --backoff B --timeout
/// T --label query=Q --label cardinality=C --json FILE --postgres CONN
/// --sql SQL`.
fn query_run_args(q: &QueryTask, conn: &str, json: &Path) -> anyhow::Result<super::run::RunArgs> {
    let e = &q.experiment;
    let mut line: Vec<String> = vec!["run".into(), "-n".into(), e.n.to_string()];
    if e.cold_cache {
        line.push("--cold-cache".into());
        if let Some(r) = &e.restart_cmd {
            line.extend(["--restart-cmd".into(), r.clone()]);
        }
    }
    // experiment's defaults (cli/experiment.rs), which are run's too.
    line.extend([
        "--backoff".into(),
        e.backoff.clone().unwrap_or_else(|| "100ms".into()),
        "--timeout".into(),
        e.timeout.clone().unwrap_or_else(|| "20m".into()),
    ]);
    for (k, v) in q.labels() {
        line.extend(["--label".into(), format!("{k}={v}")]);
    }
    line.extend([
        "--json".into(),
        json.display().to_string(),
        "--postgres".into(),
        conn.to_string(),
        "--sql".into(),
        q.query.sql.clone(),
    ]);
    Ok(RunLine::try_parse_from(line)
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))?
        .run)
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
fn qes_of(doc: &serde_json::Value) -> Vec<(i32, String)> {
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

fn read_doc(path: &Path) -> Option<serde_json::Value> {
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

pub fn worker(a: WorkerArgs) -> anyhow::Result<()> {
    // A worker that cannot measure must not claim (and fail) tasks: the
    // privileges `run` needs are checked first.
    crate::sys::privileges::require_bpf()?;
    crate::sys::privileges::require_taskstats()?;
    if a.lease < Duration::from_secs(1) {
        return crate::error::usage(format!(
            "--lease {:?} is too short: at least 1 s (the heartbeat renews it every tenth)",
            a.lease
        ));
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let name = a
        .worker_name
        .clone()
        .unwrap_or_else(|| format!("{hostname}:{}", std::process::id()));
    let facts = serde_json::to_string(&crate::collect::machine::facts())?;
    let stop = StopFlag::install().context("installing signal handlers")?;
    let mut s = Session {
        url: &a.lab,
        name: &name,
        // --once: a lab that cannot be reached at start is a usage error
        // (exit 2); a waiting worker waits for it.
        lab: if a.once {
            Some(Lab::connect(&a.lab)?)
        } else {
            None
        },
        backoff: Backoff::new(Duration::from_secs(1), a.retry_cap),
        stop: &stop,
    };
    let up = s.with("register this worker", |lab| {
        schema::require_current(lab)?;
        queue::register_host(lab, &name, &a.host_label, &hostname, &facts)
    })?;
    let mut sum = Summary::default();
    if up.is_none() {
        sum.stopped = true;
    }
    let mut poll = Backoff::new(a.poll, a.poll);
    while up.is_some()
        && a.max_tasks
            .is_none_or(|m| sum.done + (sum.failed.len() as u32) < m)
        && !stop.raised()
    {
        let claimed = s.with("claim a task", |lab| {
            queue::touch_host(lab, &name)?;
            let t = Instant::now();
            let c = queue::claim(lab, &a.host_label, &name, a.lease.as_secs_f64())?;
            if c.is_some() {
                sum.claim_s.push(t.elapsed().as_secs_f64());
            }
            Ok(c)
        })?;
        let task = match claimed {
            None => break,
            Some(Some(t)) => t,
            Some(None) if a.once => break,
            Some(None) => {
                stop.sleep(poll.next_wait());
                continue;
            }
        };
        if !run_one(&a, &mut s, &name, task, &mut sum)? {
            break;
        }
    }
    sum.stopped |= stop.raised();
    if a.json {
        let mut doc = serde_json::json!({
            "schema": "ttp.lab-worker/1",
            "worker": name,
            "host_label": a.host_label,
            "done": sum.done,
            "failed": sum.failed,
            "taken_over": sum.taken_over,
            "lost_to_takeover": sum.lost,
            "stopped": sum.stopped,
        });
        if a.no_run {
            doc["claim_latencies_s"] = serde_json::json!(sum.claim_s);
        }
        println!("{doc}");
    } else {
        println!(
            "lab worker {name} ({}): {} tasks done ({} taken over), {} failed, {} lost to a takeover",
            a.host_label,
            sum.done,
            sum.taken_over,
            sum.failed.len(),
            sum.lost
        );
    }
    if !sum.failed.is_empty() {
        anyhow::bail!(
            "{} task(s) failed: {}",
            sum.failed.len(),
            sum.failed.join("; ")
        );
    }
    // A waiting worker ends with a signal: that is its normal end. With
    // --once, a signal cut the work short.
    if sum.stopped && a.once {
        anyhow::bail!("stopped by a signal");
    }
    Ok(())
}

#[derive(Default)]
struct Summary {
    done: u32,
    /// Tasks taken over by another worker while this one measured them.
    lost: u32,
    taken_over: u32,
    failed: Vec<String>,
    stopped: bool,
    /// Round trip of each claim that got a task, in seconds.
    claim_s: Vec<f64>,
}

/// Measures one claimed task and records it; false when the worker was
/// stopped (the task was released).
fn run_one(
    a: &WorkerArgs,
    s: &mut Session,
    name: &str,
    task: Claimed,
    sum: &mut Summary,
) -> anyhow::Result<bool> {
    eprintln!(
        "lab worker {name}: task {} ({} / {} on {}), attempt {}",
        task.id, task.experiment, task.key, a.host_label, task.attempt
    );
    if let Some(t) = &task.taken_over {
        eprintln!(
            "lab worker {name}: task {} taken over from {} (claimed {:.1} s ago; its lease expired {:.1} s ago); measured again from the start",
            task.id, t.from_worker, t.after_s, t.expired_s
        );
    }
    let json = std::env::temp_dir().join(format!(
        "ttp-lab-{}-task{}-{}.json",
        std::process::id(),
        task.id,
        task.attempt
    ));
    let lost = Arc::new(AtomicBool::new(false));
    let (outcome, doc) = if a.no_run {
        (Ok(()), Some(serde_json::json!({ "no_run": true })))
    } else {
        let outcome = run_task(a, name, &task, &json, &lost, s.stop);
        (outcome, read_doc(&json))
    };
    let qes = doc.as_ref().map(qes_of).unwrap_or_default();
    // Until the lab has them, the QEs stay in the run's JSON.
    let kept = || format!("the run's JSON with its QEs is kept at {}", json.display());
    if lost.load(Ordering::SeqCst) {
        // Taken over: the stop was ours, not a signal's; the worker goes
        // on. The QEs measured stay as this abandoned attempt's.
        s.stop.as_atomic().store(false, Ordering::SeqCst);
        s.with("record the QEs of a task taken over", |lab| {
            queue::record_qes(lab, &task, &qes)
        })
        .with_context(kept)?;
        let _ = std::fs::remove_file(&json);
        eprintln!(
            "lab worker {name}: task {} was taken over by another worker; its run stopped after {} QEs, kept as abandoned attempt {}",
            task.id,
            qes.len(),
            task.attempt
        );
        sum.lost += 1;
        return Ok(true);
    }
    if s.stop.raised() {
        // Stopped: the task goes back to the queue at once (not after its
        // lease), its QEs kept as an abandoned attempt. The signal already
        // came, so this does not wait for a lab that cannot be reached.
        let released = s.lab.as_mut().map(|lab| {
            if !lab.answers() {
                *lab = Lab::connect(&a.lab)?;
            }
            queue::record_qes(lab, &task, &qes)?;
            queue::release(lab, &task, name)
        });
        match released {
            Some(Ok(_)) => {
                let _ = std::fs::remove_file(&json);
                eprintln!(
                    "lab worker {name}: stopped; task {} is pending again, its {} QEs kept as abandoned attempt {}",
                    task.id,
                    qes.len(),
                    task.attempt
                );
            }
            Some(Err(e)) => return Err(e).with_context(kept),
            None => anyhow::bail!(
                "stopped while the lab could not be reached; task {} is taken over after its lease; {}",
                task.id,
                kept()
            ),
        }
        return Ok(false);
    }
    let result = match (&outcome, &doc) {
        (Ok(()), Some(d)) => Ok(d.to_string()),
        (Ok(()), None) => Err("run wrote no JSON".to_string()),
        (Err(e), _) => Err(format!("{e:#}")),
    };
    let res = result.as_ref().map(String::as_str).map_err(String::as_str);
    let Some(ours) = s
        .with("record task's result", |lab| {
            queue::finish(lab, &task, name, &qes, res)
        })
        .with_context(kept)?
    else {
        anyhow::bail!(
            "stopped by a signal before the lab could be reached; {}",
            kept()
        );
    };
    let _ = std::fs::remove_file(&json);
    match (&result, ours) {
        (_, false) => eprintln!(
            "lab worker {name}: task {} was no longer held by this worker; its result was not recorded",
            task.id
        ),
        (Ok(_), true) => {
            sum.done += 1;
            sum.taken_over += u32::from(task.taken_over.is_some());
        }
        (Err(e), true) => {
            eprintln!("lab worker {name}: task {} failed: {e}", task.id);
            sum.failed.push(format!("task {}: {e}", task.id));
        }
    }
    Ok(true)
}

/// Runs one task with `run` (a query task: `run --postgres` after its
/// cardinality is made), while a thread records its QEs as they come and
/// renews the lease.
fn run_task(
    a: &WorkerArgs,
    worker: &str,
    task: &Claimed,
    json: &Path,
    lost: &Arc<AtomicBool>,
    stop: &StopFlag,
) -> anyhow::Result<()> {
    let payload: Payload = serde_json::from_str(&task.payload).context("the task's payload")?;
    let done = Arc::new(AtomicBool::new(false));
    let follower = Follower {
        url: a.lab.clone(),
        worker: worker.to_string(),
        task: task.clone(),
        json: json.to_path_buf(),
        lease: a.lease,
        done: done.clone(),
        lost: lost.clone(),
        stop: stop.clone(),
    };
    // The heartbeat runs from here: making a large cardinality may take
    // longer than a lease.
    let follower = std::thread::spawn(move || follower.run());
    let r = (|| {
        let args = match &payload {
            Payload::Command(c) => run_args(&task.key, c, json)?,
            Payload::Query(q) => {
                let conn = a.postgres.as_deref().unwrap_or(&q.experiment.connection);
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
        let a = run_args("spin", &c, Path::new("/tmp/x.json")).unwrap();
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
        let a = run_args("s20", &c, Path::new("/tmp/x.json")).unwrap();
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
