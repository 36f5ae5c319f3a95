//! `ttp-ebpf lab`: experiments across many hosts in one PostgreSQL lab
//! database (docs/lab.md). `init` creates or migrates the schema,
//! `submit` registers a spec and its tasks, `worker` claims this host
//! label's tasks and times each with `run` (TTPv2), `status` counts.
use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::{
    error::usage,
    lab::{
        Lab,
        queue::{self, Claimed, Submitted},
        schema,
        spec::{CommandSpec, LabSpec},
    },
    sys::signals::StopFlag,
};

/// Experiments across many hosts, with one PostgreSQL database as the job
/// queue and the system of record (docs/lab.md).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    Init(InitArgs),
    Submit(SubmitArgs),
    Worker(WorkerArgs),
    Status(StatusArgs),
}

/// Create the lab's tables, or migrate them to this version.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The lab database: key=value pairs or a postgresql:// URL (password
    /// from the URL or PGPASSWORD; never printed).
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Register an experiment spec and expand it into tasks: one per
/// [[command]] × host label. The same spec again changes nothing; a
/// different spec under an existing name is refused.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The spec (TOML): name, hosts = [..], [[command]] name, argv, n,
    /// cold_cache, labels.
    pub spec: PathBuf,
    #[arg(long, value_name = "URL")]
    pub lab: String,
    #[arg(long)]
    pub json: bool,
}

/// Claim this host label's pending tasks one at a time and time each
/// with `run` (TTPv2), recording every QE as it is measured and the Q@C
/// result at the end. Needs root, as `run`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// What this host is, as specs name it (e.g. nvme-16c).
    #[arg(long, value_name = "LABEL")]
    pub host_label: String,
    /// Exit 0 once nothing is pending for the label (required: waiting
    /// for new tasks is not offered).
    #[arg(long, required = true)]
    pub once: bool,
    /// Stop after this many tasks.
    #[arg(long, value_name = "N")]
    pub max_tasks: Option<u32>,
    /// This worker's name in the lab (default HOSTNAME:PID).
    #[arg(long, value_name = "NAME")]
    pub worker_name: Option<String>,
    /// How long a claim holds a task (recorded as lease_until).
    #[arg(long, default_value = "6h", value_parser = crate::report::units::parse_duration)]
    pub lease: Duration,
    /// Print a summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Per experiment and host label: tasks pending, running, done, failed
/// and the QEs measured, the median Q@C time and an ETA; the running
/// tasks by worker, with their age and lease.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// Only this experiment.
    #[arg(long, value_name = "NAME")]
    pub experiment: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        LabCommand::Init(a) => init(a),
        LabCommand::Submit(a) => submit(a),
        LabCommand::Worker(a) => worker(a),
        LabCommand::Status(a) => status(a),
    }
}

fn init(a: InitArgs) -> anyhow::Result<()> {
    let mut lab = Lab::connect(&a.lab)?;
    let applied = schema::init(&mut lab)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "schema": "ttp.lab-init/1",
                "lab": lab.target,
                "version": schema::latest(),
                "applied": applied,
            })
        );
    } else if applied.is_empty() {
        println!(
            "lab {}: schema already at version {}, nothing to do",
            lab.target,
            schema::latest()
        );
    } else {
        println!(
            "lab {}: schema at version {} (applied migrations {applied:?})",
            lab.target,
            schema::latest()
        );
    }
    Ok(())
}

fn submit(a: SubmitArgs) -> anyhow::Result<()> {
    let text = match std::fs::read_to_string(&a.spec) {
        Ok(t) => t,
        Err(e) => return usage(format!("cannot read spec {}: {e}", a.spec.display())),
    };
    let spec = match LabSpec::parse(&text) {
        Ok(s) => s,
        Err(e) => return usage(format!("spec {}: {e}", a.spec.display())),
    };
    let mut lab = Lab::connect(&a.lab)?;
    schema::require_current(&mut lab)?;
    let done = queue::submit(&mut lab, &spec)?;
    let (new, tasks) = match done {
        Submitted::New(n) => (true, n),
        Submitted::Unchanged => (false, 0),
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "schema": "ttp.lab-submit/1",
                "experiment": spec.name,
                "spec_sha256": spec.hash(),
                "submitted": new,
                "tasks": tasks,
            })
        );
    } else if new {
        println!(
            "experiment {:?} submitted: {tasks} tasks ({} commands × {} host labels)",
            spec.name,
            spec.command.len(),
            spec.hosts.len()
        );
    } else {
        println!(
            "experiment {:?} is already in the lab with this spec: nothing changed",
            spec.name
        );
    }
    Ok(())
}

fn status(a: StatusArgs) -> anyhow::Result<()> {
    let mut lab = Lab::connect(&a.lab)?;
    schema::require_current(&mut lab)?;
    if let Some(e) = &a.experiment
        && !queue::has_experiment(&mut lab, e)?
    {
        return usage(format!("no experiment {e:?} in the lab ({})", lab.target));
    }
    let rows = queue::status(&mut lab, a.experiment.as_deref())?;
    let running = queue::running(&mut lab, a.experiment.as_deref())?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "schema": "ttp.lab-status/1",
                "lab": lab.target,
                "rows": rows,
                "running": running,
            }))?
        );
        return Ok(());
    }
    println!("lab {}", lab.target);
    println!(
        "{:<24} {:<16} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10}",
        "experiment",
        "host label",
        "pending",
        "running",
        "done",
        "failed",
        "QEs",
        "median Q@C",
        "ETA"
    );
    let secs = |s: Option<f64>| {
        s.map_or("?".to_string(), |s| {
            humantime::format_duration(Duration::from_secs(s.round() as u64)).to_string()
        })
    };
    for r in &rows {
        println!(
            "{:<24} {:<16} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10}",
            r.experiment,
            r.host_label,
            r.pending,
            r.running,
            r.done,
            r.failed,
            r.qes_measured,
            secs(r.median_qc_s),
            secs(r.eta_s)
        );
    }
    if rows.is_empty() {
        println!("(no tasks)");
    }
    for r in &running {
        println!(
            "running: task {} ({} / {} on {}) attempt {} by {} for {:.0} s, lease {:.0} s left",
            r.task,
            r.experiment,
            r.key,
            r.host_label,
            r.attempt,
            r.claimed_by,
            r.running_s,
            r.lease_left_s
        );
    }
    Ok(())
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
    line.push("--label".into());
    line.push(format!("command={key}"));
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

/// Inserts the QEs of the run JSON as `run` rewrites it after each QE,
/// on a connection of its own, until `done` is raised.
fn follow_qes(url: String, task: Claimed, json: PathBuf, done: Arc<AtomicBool>) {
    let Ok(mut lab) = Lab::connect_as(&url, "ttp-ebpf lab (QEs)") else {
        return;
    };
    loop {
        let last = done.load(Ordering::SeqCst);
        if let Some(doc) = read_doc(&json)
            && let Err(e) = queue::record_qes(&mut lab, &task, &qes_of(&doc))
        {
            log::warn!("recording QEs of task {}: {e:#}", task.id);
        }
        if last {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn worker(a: WorkerArgs) -> anyhow::Result<()> {
    // A worker that cannot measure must not claim (and fail) tasks: the
    // privileges `run` needs are checked first.
    crate::sys::privileges::require_bpf()?;
    crate::sys::privileges::require_taskstats()?;
    let mut lab = Lab::connect(&a.lab)?;
    schema::require_current(&mut lab)?;
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let name = a
        .worker_name
        .clone()
        .unwrap_or_else(|| format!("{hostname}:{}", std::process::id()));
    let facts = serde_json::to_string(&crate::collect::machine::facts())?;
    queue::register_host(&mut lab, &name, &a.host_label, &hostname, &facts)?;
    let stop = StopFlag::install().context("installing signal handlers")?;
    let (mut done, mut failed, mut stopped) = (0u32, Vec::<String>::new(), false);
    while a.max_tasks.is_none_or(|m| done + (failed.len() as u32) < m) && !stop.raised() {
        queue::touch_host(&mut lab, &name)?;
        let Some(task) = queue::claim(&mut lab, &a.host_label, &name, a.lease.as_secs_f64())?
        else {
            break;
        };
        eprintln!(
            "lab worker {name}: task {} ({} / {} on {}), attempt {}",
            task.id, task.experiment, task.key, a.host_label, task.attempt
        );
        let json = std::env::temp_dir().join(format!(
            "ttp-lab-{}-task{}-{}.json",
            std::process::id(),
            task.id,
            task.attempt
        ));
        let outcome = run_task(&a.lab, &task, &json);
        let qes = read_doc(&json).map(|d| qes_of(&d)).unwrap_or_default();
        let doc = read_doc(&json);
        // Until the lab has them, the QEs stay in the run's JSON.
        let kept = || format!("the run's JSON with its QEs is kept at {}", json.display());
        // The connection sat idle while `run` measured: one closed
        // meanwhile (server restart, idle timeout) is opened again.
        if !lab.answers() {
            eprintln!("lab worker {name}: the lab connection was closed; connecting again");
            lab = Lab::connect(&a.lab).with_context(kept)?;
        }
        if stop.raised() {
            queue::record_qes(&mut lab, &task, &qes).with_context(kept)?;
            queue::release(&mut lab, &task, &name).with_context(kept)?;
            let _ = std::fs::remove_file(&json);
            stopped = true;
            eprintln!(
                "lab worker {name}: stopped; task {} is pending again, its {} QEs kept as abandoned attempt {}",
                task.id,
                qes.len(),
                task.attempt
            );
            break;
        }
        let result = match (&outcome, &doc) {
            (Ok(()), Some(d)) => Ok(d.to_string()),
            (Ok(()), None) => Err("run wrote no JSON".to_string()),
            (Err(e), _) => Err(format!("{e:#}")),
        };
        let ours = queue::finish(
            &mut lab,
            &task,
            &name,
            &qes,
            result.as_ref().map(String::as_str).map_err(String::as_str),
        )
        .with_context(kept)?;
        let _ = std::fs::remove_file(&json);
        match (&result, ours) {
            (_, false) => eprintln!(
                "lab worker {name}: task {} was no longer held by this worker; its result was not recorded",
                task.id
            ),
            (Ok(_), true) => done += 1,
            (Err(e), true) => {
                eprintln!("lab worker {name}: task {} failed: {e}", task.id);
                failed.push(format!("task {}: {e}", task.id));
            }
        }
    }
    stopped |= stop.raised();
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "schema": "ttp.lab-worker/1",
                "worker": name,
                "host_label": a.host_label,
                "done": done,
                "failed": failed,
                "stopped": stopped,
            })
        );
    } else {
        println!(
            "lab worker {name} ({}): {done} tasks done, {} failed",
            a.host_label,
            failed.len()
        );
    }
    if !failed.is_empty() {
        anyhow::bail!("{} task(s) failed: {}", failed.len(), failed.join("; "));
    }
    if stopped {
        anyhow::bail!("stopped by a signal");
    }
    Ok(())
}

/// Runs one task with `run`, while a thread records its QEs as they come.
fn run_task(url: &str, task: &Claimed, json: &Path) -> anyhow::Result<()> {
    let c: CommandSpec = serde_json::from_str(&task.payload).context("the task's command")?;
    let args = run_args(&task.key, &c, json)?;
    let done = Arc::new(AtomicBool::new(false));
    let follower = {
        let (url, task, json, done) = (
            url.to_string(),
            task.clone(),
            json.to_path_buf(),
            done.clone(),
        );
        std::thread::spawn(move || follow_qes(url, task, json, done))
    };
    let r = {
        let _log = StdoutToStderr::new();
        super::run::run(args)
    };
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

    #[test]
    fn qes_are_read_from_the_run_json() {
        let doc = serde_json::json!({"qes": [{"qe": 1, "x": 2}, {"qe": 2}, {"nope": 1}]});
        let q = qes_of(&doc);
        assert_eq!(q.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
        assert!(q[0].1.contains("\"x\":2"));
    }
}
