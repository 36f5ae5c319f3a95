//! `ttp-ebpf attach`: the ledger of a running process (or of the whole
//! machine), live, with a final summary and the cross-check against what the
//! kernel itself reports.
use std::{collections::HashMap, path::PathBuf, time::Duration};

use anyhow::Context;
use clap::Args;

use crate::{
    accounts::{Image, Window},
    error::usage,
    probe::{AttachOptions, Ledger, probe_error_ctx, seed},
    report::{self, trace, units::parse_duration},
    sys::signals::StopFlag,
};

/// Attach to a running process (or all processes) and show where its time
/// goes: on CPU, waiting for a CPU, sleeping, blocked, waiting for I/O (and
/// whose I/O the disk was serving meanwhile), and the disk I/O it issued.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Process to attach to.
    #[arg(long, required_unless_present = "all", conflicts_with = "all")]
    pub pid: Option<u32>,
    /// Include the process's descendants, present and future.
    #[arg(long)]
    pub children: bool,
    /// Account for every process on the machine.
    #[arg(long)]
    pub all: bool,
    /// Stop after this long (e.g. 10s, 2m); default: until Ctrl-C or the
    /// process exits.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Refresh the live table this often.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Write the final summary as JSON (schema ttp.attach/1) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write a timeline of the process (its threads' states, wakeups,
    /// block I/O, and the processes it forks meanwhile) to FILE as Chrome
    /// Trace Event Format JSON: open it in ui.perfetto.dev or
    /// chrome://tracing. See docs/trace.md.
    #[arg(long, value_name = "FILE", conflicts_with = "all")]
    pub trace: Option<PathBuf>,
    /// Print only the final summary, not the live table.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(args: AttachArgs) -> anyhow::Result<()> {
    if let Some(pid) = args.pid
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        return usage(format!(
            "no process with pid {pid}: it may have exited (list processes with `ps -e`)"
        ));
    }
    let stop = StopFlag::install().context("installing signal handlers")?;
    let started = crate::sys::clock::monotonic_ns();
    let options = AttachOptions {
        trace: args.trace.is_some(),
    };
    let mut ledger = Ledger::attach_with(&options).map_err(probe_error_ctx)?;
    let seeded = ledger.seed(&seed::threads_from_proc());
    let recorder = match (&args.trace, args.pid) {
        (Some(_), Some(pid)) => Some(trace::Recorder::start(
            &mut ledger,
            &trace::family(pid, args.children),
        )?),
        _ => None,
    };
    eprintln!(
        "ttp: ledger attached in {:.1} ms ({seeded} existing threads seeded); Ctrl-C ends with the summary",
        (ledger.ready_ns - started) as f64 / 1e6
    );
    let session = report::attach::Session::start(&mut ledger, args.pid, args.children, args.all)?;
    let end_at = args.duration.map(|d| std::time::Instant::now() + d);
    let mut exits = Vec::new();
    let mut last = session.first_image().clone();
    let mut ended_note = None;
    loop {
        let until_end = end_at.map(|e| e.saturating_duration_since(std::time::Instant::now()));
        stop.sleep(until_end.map_or(args.interval, |u| u.min(args.interval)));
        ledger.drain_exits(&mut exits);
        let snap = ledger.snapshot().map_err(probe_error_ctx)?;
        let image = Image::from_snapshot(&snap);
        let interval = Window::between(&last, &image, &exits);
        if !args.quiet {
            session.print_interval(&interval);
        }
        last = image;
        if let Some(pid) = args.pid
            && exits
                .iter()
                .any(|e| e.account.tid == pid && e.account.tgid == pid)
        {
            ended_note = Some(format!(
                "process {pid} exited; its final account comes from its exit record"
            ));
            break;
        }
        if stop.raised() || end_at.is_some_and(|e| std::time::Instant::now() >= e) {
            break;
        }
    }
    let summary = session.finish(&last, &exits, ended_note, &HashMap::new());
    summary.print();
    if let Some(path) = &args.json {
        report::atomic::write_json(path, &summary.json())
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let (Some(path), Some(rec)) = (&args.trace, recorder) {
        let t = trace::Trace::new(rec.finish(&ledger)?, "ttp attach");
        t.write(path)?;
        for w in t.warnings() {
            eprintln!("trace: {w}");
        }
        eprintln!(
            "wrote trace {} (open it in ui.perfetto.dev)",
            path.display()
        );
    }
    Ok(())
}
