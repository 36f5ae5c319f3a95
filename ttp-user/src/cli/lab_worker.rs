//! `ttp-ebpf lab worker`: claims this host label's tasks one at a time and
//! times each with `run` (TTPv2), holding each task with a lease it
//! renews while `run` measures (the heartbeat), recording every QE as it
//! is measured and the Q@C result at the end; waits with back-off while
//! the lab cannot be reached (docs/lab.md, "Queue", "Leases", "Waiting").
//! This is the loop of claims, finishes and releases; measuring one task
//! is cli/lab_task.rs.
use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;

use super::lab_task::{Executor, Ran, qes_of};
use crate::lab::{
    Lab, is_transient,
    queue::{self, Claimed},
    retry::Backoff,
    schema,
};
use ttp_sys::sys::signals::StopFlag;

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
    #[arg(long, default_value = "5min", value_parser = ttp_sys::error::parse_duration)]
    pub lease: Duration,
    /// How often a waiting worker asks for new tasks (jittered: each wait
    /// is between half and all of it).
    #[arg(long, default_value = "10s", value_parser = ttp_sys::error::parse_duration)]
    pub poll: Duration,
    /// The longest wait between two attempts to reach a lab that cannot
    /// be reached (the waits double from 1 s up to this, jittered).
    #[arg(long, default_value = "60s", value_parser = ttp_sys::error::parse_duration)]
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
    /// alone, for `cargo xtask bench lab` (docs/benchmarks.md). Claims
    /// only tasks of experiments submitted with `no_run = true` (and an
    /// ordinary worker never claims those), so it cannot end a task that
    /// was meant to be measured; the JSON summary adds each claim's round
    /// trip (`claim_latencies_s`).
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

pub(crate) fn worker(a: WorkerArgs) -> anyhow::Result<()> {
    // A worker that cannot measure must not claim (and fail) tasks: the
    // privileges `run` needs are checked first.
    ttp_sys::sys::privileges::require_bpf()?;
    ttp_sys::sys::privileges::require_taskstats()?;
    if a.lease < Duration::from_secs(1) {
        return ttp_sys::error::usage(format!(
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
    let facts = serde_json::to_string(&ttp_ledger::collect::machine::facts())?;
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
    if a.no_run {
        eprintln!(
            "lab worker {name}: --no-run: claims only tasks of queue benchmarks (experiments submitted with no_run = true) and runs none"
        );
    }
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
            let c = queue::claim(lab, &a.host_label, &name, a.lease.as_secs_f64(), a.no_run)?;
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

/// The task a run begins, and whose lease it took over.
fn announce(a: &WorkerArgs, name: &str, task: &Claimed) {
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
    announce(a, name, &task);
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
        let exec = Executor {
            lab: &a.lab,
            worker: name,
            lease: a.lease,
            postgres: a.postgres.as_deref(),
        };
        let Ran { outcome, doc } = exec.run(&task, &json, &lost, s.stop);
        (outcome, doc)
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
