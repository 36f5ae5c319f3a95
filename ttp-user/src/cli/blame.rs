//! `ttp-ebpf blame`: which concurrent processes slowed a victim process, by
//! how much and through which resource (iQCAR contention blame).
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context;

use crate::report::{
    format::{Outputs, dot::Dot, json::Json},
    progress::Progress,
    render,
};
use ttp_blame::{
    BlameError, DiskMeasure, GroupBy, Options, Recording, VictimSpec, live,
    source::{self, SourceError, StopReason},
};
use ttp_ledger::probe::probe_error_ctx;
use ttp_sys::error::usage;
use ttp_window::window::session::MeasurementSession;

/// Explain a process's blocked time: which concurrent processes, kernel
/// threads or unknown causes made it wait for CPU, disk and memory, with
/// the overlap-time baseline beside it.
///
/// Live (needs root): `sudo ttp-ebpf blame --pid PID --duration 10s`.
/// Offline, without root: `ttp-ebpf blame --from recording.json`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The victim process (required live; overrides the recording's victim
    /// with --from).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Also count the processes the victim forks as the victim.
    #[arg(long)]
    pub children: bool,
    /// Window length δt (e.g. 50ms). With --from, a multiple of the recorded
    /// window: consecutive windows are merged.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub window: Option<Duration>,
    /// Stop after this long (e.g. 10s); live, by default run until the
    /// victim exits or Ctrl-C. With --from, analyse only the start.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Analyse recorded window data (JSON, schema ttp.blame-input/1)
    /// instead of measuring.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Save the measured window data here, for `--from` later.
    #[arg(long, value_name = "FILE", conflicts_with = "from")]
    pub record: Option<PathBuf>,
    /// Write the result as JSON (schema ttp.blame/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the blame graph as Graphviz DOT (`dot -Tsvg FILE`).
    #[arg(long, value_name = "FILE")]
    pub dot: Option<PathBuf>,
    /// Group culprit processes by systemd unit, cgroup or user.
    #[arg(long, value_enum, default_value_t = GroupArg::Unit)]
    pub group_by: GroupArg,
    /// Count disk consumption in bytes or in requests.
    #[arg(long, value_enum, default_value_t = DiskArg::Bytes)]
    pub disk_by: DiskArg,
    /// Treat processes whose name starts with COMM as known causes, like
    /// kernel threads (repeatable).
    #[arg(long = "known", value_name = "COMM")]
    pub known: Vec<String>,
    /// How many explanations and culprits the text report lists.
    #[arg(long, default_value_t = render::blame::TOP)]
    pub top: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum GroupArg {
    Unit,
    Cgroup,
    User,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DiskArg {
    Bytes,
    Requests,
}

/// Default δt (50 ms).
const DEFAULT_WINDOW: Duration = Duration::from_millis(50);

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.known.iter().any(|k| k.is_empty()) {
        return usage("--known needs a process name prefix, e.g. --known backup");
    }
    let opts = Options {
        disk_by: match args.disk_by {
            DiskArg::Bytes => DiskMeasure::Bytes,
            DiskArg::Requests => DiskMeasure::Requests,
        },
        group_by: match args.group_by {
            GroupArg::Unit => GroupBy::Unit,
            GroupArg::Cgroup => GroupBy::Cgroup,
            GroupArg::User => GroupBy::User,
        },
        known_comms: args.known.clone(),
    };
    let rec = match &args.from {
        Some(path) => load(path, &args)?,
        None => measure(&args)?,
    };
    let report = match ttp_blame::analyze(&rec, &opts) {
        Ok(r) => r,
        Err(e @ (BlameError::NoVictim { .. } | BlameError::NoWindows)) => {
            return usage(e.to_string());
        }
        Err(e) => return Err(e.into()),
    };
    let shown = render::Blame {
        report,
        top: args.top,
    };
    render::print(&shown);
    let report = shown.report;
    let title = format!(
        "ttp blame: pid {} {}",
        report.victim.pid, report.victim.comm
    );
    Outputs::default()
        .add_unannounced(args.json.as_deref(), Json(&report))
        .add_unannounced(
            args.dot.as_deref(),
            Dot {
                graph: &report.graph,
                title,
            },
        )
        .write()?;
    Ok(())
}

/// Reads a recording and applies --pid, --children, --window, --duration.
fn load(path: &Path, args: &Args) -> anyhow::Result<Recording> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading {}; check the path", path.display()))?;
    let mut rec: Recording = match serde_json::from_str(&text) {
        Ok(r) => r,
        Err(e) => {
            return usage(format!(
                "{} is not a blame recording (schema ttp.blame-input/1): {e}",
                path.display()
            ));
        }
    };
    if let Err(e) = rec.validate() {
        return usage(e.to_string());
    }
    if let Some(pid) = args.pid {
        rec.victim = VictimSpec {
            pid,
            children: args.children,
        };
    } else if args.children {
        rec.victim.children = true;
    }
    if let Some(w) = args.window {
        let asked_ns = duration_ns(w);
        if asked_ns == 0 || !asked_ns.is_multiple_of(rec.window_ns) {
            return usage(
                BlameError::WindowNotMultiple {
                    asked_ns,
                    recorded_ns: rec.window_ns,
                }
                .to_string(),
            );
        }
        rec.merge_windows((asked_ns / rec.window_ns) as usize);
    }
    if let Some(d) = args.duration {
        rec.truncate(duration_ns(d));
    }
    Ok(rec)
}

/// Measures the live victim until it exits, --duration passes or Ctrl-C.
fn measure(args: &Args) -> anyhow::Result<Recording> {
    let Some(pid) = args.pid else {
        return usage("give the victim with --pid PID, or analyse a recording with --from FILE");
    };
    let window = args.window.unwrap_or(DEFAULT_WINDOW);
    if window.is_zero() {
        return usage("--window must be longer than 0, e.g. --window 50ms");
    }
    let victim = VictimSpec {
        pid,
        children: args.children,
    };
    let no_victim = |e: SourceError| match e {
        e @ SourceError::NoSuchProcess { .. } => usage(e.to_string()),
        SourceError::Probe(e) => Err(probe_error_ctx(e)),
    };
    // Before anything is loaded: a mistyped pid costs no ledger load.
    if let Err(e) = source::check_victim(Path::new("/proc"), pid) {
        return no_victim(e);
    }
    let session = MeasurementSession::open_blame()?;
    let stop = session.stop_flag()?;
    let mut src = match live::open_live(session, &victim, duration_ns(window)) {
        Ok(s) => s,
        Err(e) => return no_victim(e),
    };
    eprintln!(
        "Measuring pid {pid} every {}; stops when it exits{}, or on Ctrl-C.",
        humantime::format_duration(window),
        match args.duration {
            Some(d) => format!(", after {}", humantime::format_duration(d)),
            None => String::new(),
        }
    );
    let limit_ns = args.duration.map(duration_ns);
    let bar = progress(limit_ns, duration_ns(window));
    let (rec, reason) = source::collect(src.as_mut(), victim, limit_ns, stop.as_atomic(), |_| {
        bar.inc(1)
    })?;
    bar.finish_and_clear();
    if reason == StopReason::Interrupted {
        eprintln!(
            "Interrupted: analysing the {} windows measured so far.",
            rec.windows.len()
        );
    }
    if let Some(path) = &args.record {
        crate::report::format::write_unannounced_file(path, &Json(&rec))?;
    }
    Ok(rec)
}

/// The windows measured so far, out of those `limit_ns` holds.
fn progress(limit_ns: Option<u64>, window_ns: u64) -> Progress {
    Progress::styled(
        limit_ns.map(|l| l.div_ceil(window_ns.max(1))),
        "{spinner} {pos} windows {wide_bar} {elapsed}",
    )
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
