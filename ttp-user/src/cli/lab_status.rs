//! `ttp-ebpf lab status`: per experiment and host label, the tasks in each
//! state, QEs measured, median Q@C time and ETA, and the running tasks;
//! with `--watch`, again every `--interval` until nothing is left to do
//! or Ctrl-C: redrawn in place with a progress bar per row on a terminal,
//! one plain line per row that changed otherwise (docs/lab.md, "Status").
use std::{
    collections::BTreeMap,
    fmt::Write as _,
    io::{IsTerminal, Write as _},
    time::{Duration, Instant},
};

use anyhow::Context;

use crate::lab::{
    Lab, is_transient,
    queue::{self, RunningTask, StatusRow},
    schema,
};
use ttp_sys::{error::usage, sys::signals::StopFlag};

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
    /// Follow the progress until no task is pending or running (or
    /// Ctrl-C): redrawn with progress bars on a terminal, one line per
    /// change otherwise (one JSON document per change with --json).
    #[arg(long)]
    pub watch: bool,
    /// How often --watch asks the lab.
    #[arg(long, default_value = "2s", value_parser = ttp_sys::error::parse_duration)]
    pub interval: Duration,
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn status(a: StatusArgs) -> anyhow::Result<()> {
    let mut lab = Lab::connect(&a.lab)?;
    schema::require_current(&mut lab)?;
    if let Some(e) = &a.experiment
        && !queue::has_experiment(&mut lab, e)?
    {
        return usage(format!("no experiment {e:?} in the lab ({})", lab.target));
    }
    if !a.watch {
        let (rows, running) = read(&mut lab, a.experiment.as_deref())?;
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&document(&lab, &rows, &running))?
            );
        } else {
            print!("{}", table(&lab.target, &rows, &running));
        }
        return Ok(());
    }
    if a.interval < Duration::from_millis(100) {
        return usage("--interval must be at least 100ms");
    }
    watch(&a, lab)
}

fn read(
    lab: &mut Lab,
    experiment: Option<&str>,
) -> anyhow::Result<(Vec<StatusRow>, Vec<RunningTask>)> {
    Ok((
        queue::status(lab, experiment)?,
        queue::running(lab, experiment)?,
    ))
}

fn document(lab: &Lab, rows: &[StatusRow], running: &[RunningTask]) -> serde_json::Value {
    serde_json::json!({
        "schema": "ttp.lab-status/1",
        "lab": lab.target,
        "rows": rows,
        "running": running,
    })
}

fn secs(s: Option<f64>) -> String {
    s.map_or("?".to_string(), |s| {
        humantime::format_duration(Duration::from_secs(s.round() as u64)).to_string()
    })
}

/// Said of each queue benchmark (`no_run = true`) beside the table: its
/// done tasks count as no result (docs/lab.md, "No-run experiments").
const NOT_RUN: &str = "experiment {e} is a queue benchmark (no_run = true): its tasks were finished by `lab worker --no-run` without being run, and none is a measured result";

/// The status table, as `lab status` prints it.
fn table(target: &str, rows: &[StatusRow], running: &[RunningTask]) -> String {
    let mut out = format!("lab {target}\n");
    let _ = writeln!(
        out,
        "{:<24} {:<16} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>9} {:>10}",
        "experiment",
        "host label",
        "pending",
        "running",
        "done",
        "failed",
        "QEs",
        "median Q@C",
        "ETA",
        "abandoned",
        "taken over"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<24} {:<16} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>9} {:>10}",
            r.experiment,
            r.host_label,
            r.pending,
            r.running,
            r.done,
            r.failed,
            r.qes_measured,
            secs(r.median_qc_s),
            secs(r.eta_s),
            r.abandoned_attempts,
            r.taken_over
        );
    }
    if rows.is_empty() {
        out.push_str("(no tasks)\n");
    }
    let mut no_run: Vec<&str> = rows
        .iter()
        .filter(|r| r.no_run)
        .map(|r| r.experiment.as_str())
        .collect();
    no_run.dedup();
    for e in no_run {
        let _ = writeln!(out, "{}", NOT_RUN.replace("{e}", e));
    }
    for r in running {
        let _ = writeln!(
            out,
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
    out
}

/// Tasks finished (done or failed) of all.
fn finished(r: &StatusRow) -> (i64, i64) {
    let total = r.pending + r.running + r.done + r.failed;
    (r.done + r.failed, total)
}

/// `[#####-----]  5/10` for a row.
fn bar(r: &StatusRow) -> String {
    const WIDTH: i64 = 30;
    let (done, total) = finished(r);
    let filled = if total == 0 {
        WIDTH
    } else {
        done * WIDTH / total
    };
    format!(
        "{:<24} {:<16} [{}{}] {done}/{total} done, {} running, ETA {}",
        r.experiment,
        r.host_label,
        "#".repeat(filled as usize),
        "-".repeat((WIDTH - filled) as usize),
        r.running,
        secs(r.eta_s)
    )
}

/// One plain line for a row: what `--watch` prints when it changed.
fn line(elapsed: Duration, r: &StatusRow) -> String {
    let (done, total) = finished(r);
    format!(
        "+{:.1}s {} {}: {done}/{total} finished ({} done, {} failed), {} running, {} pending, {} QEs, ETA {}",
        elapsed.as_secs_f64(),
        r.experiment,
        r.host_label,
        r.done,
        r.failed,
        r.running,
        r.pending,
        r.qes_measured,
        secs(r.eta_s)
    ) + if r.no_run {
        " (no run: nothing measured)"
    } else {
        ""
    }
}

fn watch(a: &StatusArgs, mut lab: Lab) -> anyhow::Result<()> {
    let stop = StopFlag::install().context("installing signal handlers")?;
    let tty = std::io::stdout().is_terminal() && !a.json;
    let start = Instant::now();
    let mut shown: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut said_waiting = false;
    loop {
        let read = read(&mut lab, a.experiment.as_deref());
        let (rows, running) = match read {
            Ok(r) => r,
            Err(e) if is_transient(&e) => {
                if !said_waiting {
                    eprintln!(
                        "lab status: the lab cannot be reached ({}); trying again every {:?}",
                        e.root_cause(),
                        a.interval
                    );
                    said_waiting = true;
                }
                stop.sleep(a.interval);
                if stop.raised() {
                    return Ok(());
                }
                if let Ok(l) = Lab::try_connect(&a.lab, "ttp-ebpf lab") {
                    lab = l;
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        said_waiting = false;
        let mut out = std::io::stdout().lock();
        if tty {
            // Home, clear, redraw.
            let mut screen = String::from("\x1b[H\x1b[2J");
            screen.push_str(&format!(
                "lab {} (every {:?}; Ctrl-C to stop)\n",
                lab.target, a.interval
            ));
            for r in &rows {
                screen.push_str(&bar(r));
                screen.push('\n');
            }
            screen.push_str(&table(&lab.target, &rows, &running));
            out.write_all(screen.as_bytes())?;
        } else if a.json {
            let doc = document(&lab, &rows, &running).to_string();
            if shown
                .insert((String::new(), String::new()), doc.clone())
                .as_deref()
                != Some(doc.as_str())
            {
                writeln!(out, "{doc}")?;
            }
        } else {
            for r in &rows {
                let key = (r.experiment.clone(), r.host_label.clone());
                // Compare without the elapsed time: a line per change.
                let now = line(Duration::ZERO, r);
                if shown.get(&key) != Some(&now) {
                    writeln!(out, "{}", line(start.elapsed(), r))?;
                    shown.insert(key, now);
                }
            }
        }
        out.flush()?;
        drop(out);
        if rows.iter().all(|r| r.pending + r.running == 0) {
            return Ok(());
        }
        stop.sleep(a.interval);
        if stop.raised() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pending: i64, running: i64, done: i64, failed: i64) -> StatusRow {
        StatusRow {
            experiment: "e".into(),
            host_label: "h".into(),
            pending,
            running,
            done,
            failed,
            qes_measured: 7,
            median_qc_s: Some(2.0),
            eta_s: Some(4.0),
            abandoned_attempts: 0,
            taken_over: 0,
            no_run: false,
        }
    }

    /// Catches a bar that counts running or pending tasks as finished, or
    /// overflows its width.
    #[test]
    fn bars_and_lines_count_finished_tasks() {
        let b = bar(&row(1, 1, 1, 1));
        assert!(
            b.contains(&format!("[{}{}] 2/4 done", "#".repeat(15), "-".repeat(15))),
            "{b}"
        );
        let full = bar(&row(0, 0, 3, 0));
        assert!(
            full.contains(&format!("[{}] 3/3", "#".repeat(30))),
            "{full}"
        );
        let l = line(Duration::from_millis(1500), &row(2, 1, 1, 0));
        assert_eq!(
            l,
            "+1.5s e h: 1/4 finished (1 done, 0 failed), 1 running, 2 pending, 7 QEs, ETA 4s"
        );
    }

    /// Catches a queue benchmark whose done tasks read as measured ones.
    #[test]
    fn a_no_run_experiment_says_nothing_was_measured() {
        let mut r = row(0, 0, 3, 0);
        r.no_run = true;
        // Two host labels of one experiment: said once.
        let t = table("lab", &[r.clone(), r.clone()], &[]);
        assert_eq!(
            t.matches("queue benchmark (no_run = true)").count(),
            1,
            "{t}"
        );
        assert!(t.contains("experiment e is a queue benchmark"), "{t}");
        assert!(line(Duration::ZERO, &r).ends_with("(no run: nothing measured)"));
        assert!(!table("lab", &[row(0, 0, 1, 0)], &[]).contains("no_run"));
    }
}
