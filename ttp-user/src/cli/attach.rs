//! `ttp-ebpf attach`: the ledger of a running process (or of the whole
//! machine), live, with a final summary and the cross-check against what the
//! kernel itself reports over the same window.
use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use clap::Args;

use crate::report::{
    self,
    attach::{References, Summary, Targets},
    exit_stats::ExitRecords,
    render::attach::TextOptions,
    trace,
};
use ttp_ledger::{
    accounts::{DEFAULT_KEEP_EXITED, Image, RunningWindow, Window},
    collect::taskstats::TaskstatsClient,
    probe::{
        cost::{CostSnapshot, CostUnavailable},
        probe_error_ctx,
    },
};
use ttp_sys::{
    error::{parse_duration, usage},
    sys::signals::StopFlag,
};
use ttp_window::window::{
    bracket::{EndReads, SchedReads, WindowReads},
    procs::ProcSet,
    session::{MeasurementSession, SessionOptions},
    trace_record::Recorder,
};

/// Attach to a running process (or all processes) and show where its time
/// goes: on CPU, waiting for a CPU, sleeping, blocked, waiting for I/O (and
/// whose I/O the disk was serving meanwhile), and the disk I/O it issued.
/// The summary cross-checks the ledger against schedstat, /proc and
/// taskstats over the same window.
#[derive(Debug, Args)]
pub(crate) struct AttachArgs {
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
    /// List this many processes in the summary, busiest (on-CPU) first; the
    /// rest are summed in one line. 0 lists them all. The JSON always has
    /// every process.
    #[arg(long, value_name = "N", default_value_t = report::render::attach::DEFAULT_TOP)]
    pub top: usize,
    /// Show every cross-check comparison in the summary, not only the
    /// flagged ones (a summary of one process shows them all anyway).
    #[arg(long)]
    pub checks: bool,
    /// Room for this many thread accounts in the kernel's ledger instead
    /// of the size chosen from /proc/sys/kernel/threads-max and the threads
    /// alive now (docs/ledger.md). Threads that find it full are counted
    /// and shown, never guessed.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_threads: Option<u32>,
    /// Keep a row for at most this many processes that ended in the
    /// window; beyond it the ended processes with the least on-CPU +
    /// iowait time are summed by command name (docs/attach.md). Live
    /// processes always have their row.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEEP_EXITED, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub keep_exited: usize,
    /// Print only the final summary, not the live table.
    #[arg(long, short)]
    pub quiet: bool,
    /// Also measure wake latency (`wake_latency_ns`: wall clock from each
    /// wake-up to the switch-in) by loading a program on every wake-up of
    /// the machine; without it the ledger has no wake-up program and ends
    /// each sleep at the switch-in (docs/ledger.md). `--trace` implies it.
    #[arg(long)]
    pub wake_latency: bool,
    /// Also measure the interrupt time inside each process's on-CPU time
    /// (`irq_ns`: hard and soft interrupt handlers that ran while its
    /// threads were on a CPU, which this kernel charges to them) by
    /// loading programs on every interrupt of the machine; the
    /// summary then gives the on-CPU time without interrupts beside the
    /// kernel's (docs/ledger.md). The local timer is counted (x86), IPIs are not.
    #[arg(long)]
    pub irq_time: bool,
}

pub fn run(args: AttachArgs) -> anyhow::Result<()> {
    if let Some(pid) = args.pid
        && !Path::new(&format!("/proc/{pid}")).exists()
    {
        return usage(format!(
            "no process with pid {pid}: it may have exited (list processes with `ps -e`)"
        ));
    }
    // Before any thread starts: memory that a fork storm's records took is
    // given back after it (sys/malloc.rs).
    ttp_sys::sys::malloc::for_long_runs();
    // The session switches delay accounting on (it feeds the taskstats and
    // delayacct_blkio_ticks references) and restores it when it drops, also
    // on error and Ctrl-C.
    let mut session = MeasurementSession::open(SessionOptions {
        trace: args.trace.is_some(),
        delay_accounting: true,
        taskstats_exits: true,
        max_threads: args.max_threads,
        statements_of: None,
        wake_latency: args.wake_latency,
        irq_time: args.irq_time,
        fixed_exit_queue: true,
        ..Default::default()
    })?;
    let (mut start, first) = start(&args, &mut session)?;
    let followed = follow(&args, &mut session, &mut start, first)?;
    let summary = summarize(&session, &start, followed);
    summary.print(&TextOptions {
        top: (args.top > 0).then_some(args.top),
        all_checks: args.checks,
    });
    if let Some(path) = &args.json {
        report::format::write(path, &report::format::json::Json(&summary.json()))?;
    }
    if let (Some(path), Some(rec)) = (&args.trace, start.recorder) {
        let t = trace::Trace::new(rec.finish(&session.ledger)?, "ttp attach");
        report::format::write_unannounced_file(path, &report::format::chrome::Chrome(&t))?;
        for w in t.warnings() {
            eprintln!("trace: {w}");
        }
        eprintln!(
            "wrote trace {} (open it in ui.perfetto.dev)",
            path.display()
        );
    }
    drop(session);
    if summary.flagged() > 0 {
        eprintln!(
            "ttp: {} cross-check comparisons outside tolerance (see the summary)",
            summary.flagged()
        );
    }
    Ok(())
}

/// What `attach` takes at the window's start and keeps to its summary.
struct Start {
    stop: StopFlag,
    parents: HashMap<u32, u32>,
    targets: Targets,
    recorder: Option<Recorder>,
    taskstats: Option<TaskstatsClient>,
    /// The processes whose kernel counters bracket the ledger's reads
    /// (`None`: every process, with --all); followed as the tree grows.
    bracket_set: Option<BTreeSet<u32>>,
    cost_first: Result<CostSnapshot, CostUnavailable>,
    /// The processes the references are read for at the start.
    initial: BTreeSet<u32>,
    procs_before: ProcSet,
    sched_start: EndReads,
}

/// The window's start: the first image, bracketed by the kernel's own
/// counters, and the references read with it; then the line that says
/// measuring has begun. Returns the first image apart, for the loop.
fn start(args: &AttachArgs, session: &mut MeasurementSession) -> anyhow::Result<(Start, Image)> {
    let stop = session.stop_flag()?;
    let attached_ms = session.attach_ms();
    let seeded = session.seeded;
    let parents = session.parents();
    let targets = Targets {
        pid: args.pid,
        children: args.children,
        all: args.all,
        own_tgid: std::process::id(),
    };
    let recorder = match &args.trace {
        Some(_) => {
            let traced = Vec::from_iter(targets.of(&Window::default(), &parents));
            Some(Recorder::start(&mut session.ledger, &traced)?)
        }
        None => None,
    };
    let taskstats = TaskstatsClient::connect().ok();
    // The kernel's runtime and run_delay read before an image and again
    // after the references read with it bracket the ledger's own reads
    // (window/bracket.rs). Every process with --all; else the target's
    // tree as the last image knew it (a process started since adds all of
    // its counters to the range: never a flag, docs/ledger.md).
    let bracket_set = (!args.all).then(|| targets.of(&Window::default(), &parents));
    let sched_pre0 = SchedReads::read(bracket_set.as_ref());
    let first = Image::from_snapshot(&session.ledger.snapshot().map_err(probe_error_ctx)?);
    let sched_at0 = SchedReads::read(bracket_set.as_ref());
    let cost_first = session.ledger.cost_snapshot();
    let initial: BTreeSet<u32> = if args.all {
        ProcSet::all_pids()
    } else {
        targets.of(&Window::default(), &parents)
    };
    let procs_before = ProcSet::read(&initial, taskstats.as_ref());
    let sched_start = EndReads {
        pre: sched_pre0,
        at: sched_at0,
        post: SchedReads::read(bracket_set.as_ref()),
    };
    // The window starts at the first image; say so only now, so whoever
    // waits for this line starts the workload inside the window.
    eprintln!(
        "ttp: ledger attached in {attached_ms:.1} ms ({seeded} existing threads seeded); measuring, Ctrl-C ends with the summary"
    );
    let start = Start {
        stop,
        parents,
        targets,
        recorder,
        taskstats,
        bracket_set,
        cost_first,
        initial,
        procs_before,
        sched_start,
    };
    Ok((start, first))
}

/// What the measuring loop leaves for the summary.
struct Followed {
    last: Image,
    running: RunningWindow,
    exit_records: ExitRecords,
    notes: Vec<String>,
    /// The kernel's counters right before and after the last image, when
    /// it may have ended the window.
    last_pre: Option<(SchedReads, SchedReads)>,
    cost_last: Result<CostSnapshot, CostUnavailable>,
}

/// The window: an image every interval, the live table, exit records
/// folded as they arrive, until the duration, Ctrl-C or the target's exit.
fn follow(
    args: &AttachArgs,
    session: &mut MeasurementSession,
    st: &mut Start,
    first: Image,
) -> anyhow::Result<Followed> {
    let end_at = args.duration.map(|d| Instant::now() + d);
    // Exit records are folded into their process's row as they arrive
    // (accounts/running.rs): memory follows the processes kept, not the
    // exits of the window.
    let mut last = first.clone();
    // Both reserve the memory of the rows they may keep now, so that it
    // does not grow while they fill (docs/attach.md).
    let mut exit_records = ExitRecords::with_capacity(args.keep_exited + first.threads.len());
    let mut running = RunningWindow::new(first, args.keep_exited);
    let mut notes = Vec::new();
    let mut live = report::attach::LiveTable::new();
    let mut target_exited = false;
    let is_target_exit = |e: &ttp_common::ExitRecord| {
        args.pid
            .is_some_and(|pid| e.account.tid == pid && e.account.tgid == pid)
    };
    // The target's end ends the window: the pidfd wakes the loop at the
    // exit instead of at the next refresh (without it, a target that exits
    // 1.09 s in would be reported over 2 s). With --children the window
    // still ends at the refresh after the exit: descendants the target did
    // not wait for may still be running and are part of the tree.
    let watch = args
        .pid
        .filter(|_| !args.children)
        .and_then(|p| ttp_sys::sys::pidfd::PidExit::open(p).ok());
    // Records drained while waiting for the target's, before the image.
    let mut early = Vec::new();
    // Read right before and right after the image that may end the
    // window: when the end is foreseen (the duration is up, Ctrl-C, the
    // target's pidfd), and at every image while a target's tree is
    // followed (its target's exit record, seen only after the image, ends
    // the window too).
    let mut last_pre: Option<(SchedReads, SchedReads)>;
    let mut cost_last;
    loop {
        let left = end_at.map(|e| e.saturating_duration_since(Instant::now()));
        let step = left.map_or(args.interval, |l| l.min(args.interval));
        let gone = st.stop.sleep_watching(step, watch.as_ref());
        let ending = gone || st.stop.raised() || end_at.is_some_and(|e| Instant::now() >= e);
        if gone && !target_exited {
            target_exited = await_target_exit(session, &mut early, is_target_exit);
        }
        let pre = (ending || (args.pid.is_some() && args.children))
            .then(|| SchedReads::read(st.bracket_set.as_ref()));
        let image = Image::from_snapshot(&session.ledger.snapshot().map_err(probe_error_ctx)?);
        last_pre = pre.map(|pre| (pre, SchedReads::read(st.bracket_set.as_ref())));
        cost_last = session.ledger.cost_snapshot();
        if args.children {
            let tree = Window::between(&image, &image, &[]);
            st.bracket_set = Some(st.targets.of(&tree, &st.parents));
        }
        // After the image: a thread missing from it has its record queued.
        let mut batch = std::mem::take(&mut early);
        session.ledger.drain_exits(&mut batch);
        target_exited |= batch.iter().any(is_target_exit);
        if let Some(rx) = session.taskstats_exits() {
            rx.try_iter().for_each(|r| exit_records.add(r));
        }
        if !args.quiet {
            let interval_exits: Vec<_> = running.pending().chain(&batch).copied().collect();
            let interval = Window::between(&last, &image, &interval_exits);
            live.print(&interval, &st.targets, &st.parents);
        }
        running.fold(&image, batch);
        // What this interval's records and image freed goes back now, not
        // at the end (docs/attach.md, "Memory of a long run").
        ttp_sys::sys::malloc::trim();
        if running.take_compacted() {
            // Exit records of processes folded into command groups are
            // not compared any more.
            let live: BTreeSet<u32> = image.threads.values().map(|a| a.tgid).collect();
            exit_records.retain(|tgid| running.has_tgid(tgid) || live.contains(&tgid));
        }
        last = image;
        if let Some(pid) = args.pid
            && target_exited
        {
            notes.push(format!(
                "process {pid} exited; its final account comes from its exit record"
            ));
            break;
        }
        if gone && let Some(pid) = args.pid {
            notes.push(format!(
                "process {pid} exited but its exit record did not arrive within 200 ms: its account ends at its last switch the ledger read"
            ));
            break;
        }
        if st.stop.raised() || end_at.is_some_and(|e| Instant::now() >= e) {
            break;
        }
    }
    if let Some(pid) = args.pid.filter(|_| target_exited) {
        await_taskstats_exit(session, pid, &mut exit_records, &mut notes);
    }
    if let Some(rx) = session.taskstats_exits() {
        rx.try_iter().for_each(|r| exit_records.add(r));
    }
    Ok(Followed {
        last,
        running,
        exit_records,
        notes,
        last_pre,
        cost_last,
    })
}

/// The target's exit record is written at its last switch, just after its
/// pidfd wakes: waits for it (briefly, draining into `early`) so that the
/// next image closes the window. Whether it came.
fn await_target_exit(
    session: &mut MeasurementSession,
    early: &mut Vec<ttp_common::ExitRecord>,
    is_target_exit: impl Fn(&ttp_common::ExitRecord) -> bool,
) -> bool {
    let give_up = Instant::now() + Duration::from_millis(200);
    while Instant::now() < give_up {
        let from = early.len();
        session.ledger.drain_exits(early);
        // The program frees the thread's account before it sends the
        // record (ttp-ebpf/src/ledger.rs, `retire`): once the record is
        // here, the image that follows cannot read the account still there.
        if early[from..].iter().any(&is_target_exit) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// The kernel sends a target's taskstats exit record before the exit that
/// ended the window, but the listener thread may not have passed it on yet
/// (a busy machine): wait for it briefly, then take what came.
fn await_taskstats_exit(
    session: &MeasurementSession,
    pid: u32,
    exit_records: &mut ExitRecords,
    notes: &mut Vec<String>,
) {
    let Some(rx) = session.taskstats_exits() else {
        return;
    };
    // 2 s: on a machine busy with other processes' exits the listener
    // thread can be that far behind; it costs nothing when the record is
    // already there.
    let give_up = Instant::now() + Duration::from_secs(2);
    while !exit_records.has(pid) {
        let left = give_up.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) => exit_records.add(r),
            Err(_) => break,
        }
    }
    if !exit_records.has(pid) {
        notes.push(format!(
            "process {pid}'s taskstats exit record did not arrive within 2 s: no taskstats reference for it"
        ));
    }
}

/// The window closed, the references read at its end, and the summary
/// with its cross-check (report/attach.rs).
fn summarize(session: &MeasurementSession, st: &Start, f: Followed) -> Summary {
    let Followed {
        last,
        running,
        exit_records,
        mut notes,
        last_pre,
        cost_last,
    } = f;
    let window = running.close(&last);
    let mut final_targets: BTreeSet<u32> = st
        .targets
        .select(&window, &st.parents)
        .iter()
        .map(|(k, _)| k.tgid)
        .collect();
    final_targets.extend(&st.initial);
    let procs_after = ProcSet::read(&final_targets, st.taskstats.as_ref());
    let sched_reads = WindowReads {
        start: Some(st.sched_start.clone()),
        end: last_pre.map(|(pre, at)| {
            let after = st.bracket_set.clone().map(|mut s| {
                s.extend(&final_targets);
                s
            });
            EndReads {
                pre,
                at,
                post: SchedReads::read(after.as_ref()),
            }
        }),
    };
    if st.taskstats.is_none() {
        notes.push("taskstats unavailable: no taskstats references in the cross-check".into());
    }
    let switched_on = session.delay_accounting_switched_on();
    if switched_on {
        notes.push("kernel.task_delayacct was switched on for the measurement and restored after; it covers tasks started after it was switched on".into());
    }
    let (taskstats_exits, listener_overflows) = match session.exit_listener() {
        Some(l) => {
            let seen = exit_records
                .leaders()
                .filter(|p| final_targets.contains(p))
                .count();
            (Some(seen as u64), l.stats().overflows)
        }
        None => (None, 0),
    };
    let probe_cost = match (&st.cost_first, &cost_last) {
        (Ok(a), Ok(b)) => Some(ttp_ledger::probe::cost::ProbeCost::between(a, b)),
        (Err(e), _) | (_, Err(e)) => {
            notes.push(e.to_string());
            None
        }
    };
    let mut summary = Summary::build(
        &st.targets,
        &window,
        &st.parents,
        &References {
            before: &st.procs_before,
            after: &procs_after,
            exit_records: &exit_records,
            taskstats_exits,
            listener_overflows,
            delayacct_switched_on: switched_on,
            sched_reads: &sched_reads,
        },
        notes,
    );
    summary.doc.probe_cost = probe_cost;
    summary.doc.wake_latency_measured = Some(session.ledger.wake_latency_measured());
    summary.doc.irq_time_measured = Some(session.ledger.irq_time_measured());
    summary
}
