//! EMP's runs of commands, shared by `run --protocol emp` and `calibrate`:
//! one discarded warm-up execution (EMP Sec. 4: "the very first measurement
//! is thrown out due to code and input read"), then N executions, each
//! measured once by [`target::measure`] under the kernel ledger and turned into
//! an [`EmpRun`] (ttp-emp/src/live.rs), several commands interleaved
//! through the one Q@C procedure's `interleave`.
use std::{ops::ControlFlow, process::Command, time::Duration};

use ttp_emp::{EmpRun, live as emp_runs};
use ttp_sys::sys::{signals::StopFlag, spawn::RunAs};
use ttp_ttpv2::procedure::{self, Interleaved};
use ttp_window::window::{
    session::{MeasurementSession, SessionOptions},
    target,
};

/// How long to wait after a run for taskstats exit records still on their
/// way from the listener thread.
const TASKSTATS_GRACE: Duration = Duration::from_millis(500);

/// What to measure.
pub(crate) struct LivePlan<'a> {
    pub command: &'a [String],
    /// Measured runs after the warm-up.
    pub runs: u32,
    pub timeout: Option<Duration>,
    pub run_as: RunAs,
    /// Send the program's standard output to /dev/null (calibrations run
    /// the program hundreds of times).
    pub quiet: bool,
    /// `run --cpu LIST`: every run (the warm-up too) pinned to these CPUs
    /// before exec.
    pub pin: Option<ttp_sys::sys::affinity::CpuList>,
}

/// The runs measured, and why the loop ended early if it did.
pub(crate) struct LiveRuns {
    /// Run 0 is the warm-up (flagged), runs 1.. the measured ones.
    pub runs: Vec<EmpRun>,
    pub interrupted: bool,
    /// The command could not be started or the ledger failed; the runs
    /// before are kept.
    pub failure: Option<anyhow::Error>,
    /// Notes for the report (e.g. taskstats unavailable).
    pub notes: Vec<String>,
}

impl LivePlan<'_> {
    /// The runs of `commands` commands, warm-ups included: the progress
    /// bar's length.
    pub(crate) fn runs_of(&self, commands: usize) -> u64 {
        (u64::from(self.runs) + 1) * commands as u64
    }
}

/// Runs `plan.command` 1 + `plan.runs` times. After every completed run,
/// `after_run` gets all runs so far (to write results and show progress,
/// [`progress_message`]); `notify` gets what the user must read (a run
/// interrupted). A run interrupted by Ctrl-C is not kept.
pub fn measure(
    plan: &LivePlan<'_>,
    stop: &StopFlag,
    notify: &dyn Fn(String),
    mut after_run: impl FnMut(&[EmpRun]) -> anyhow::Result<()>,
) -> anyhow::Result<LiveRuns> {
    let mut all = measure_interleaved(plan, &[plan.command], stop, notify, |_, runs| {
        after_run(runs)
    })?;
    Ok(all.remove(0))
}

/// Runs each of `commands` 1 + `plan.runs` times, interleaved (`run
/// --protocol emp -- CMD1 ::: CMD2`, docs/run.md): round r runs every
/// command once, the first rotating each round; round 0 is every command's
/// warm-up. `after_run` gets the command's index and its runs so far. The
/// runs of one command are numbered 0, 1, … as when it runs alone. A
/// failure or Ctrl-C ends every command's runs; the failure is kept with
/// the command that failed.
pub(crate) fn measure_interleaved(
    plan: &LivePlan<'_>,
    commands: &[&[String]],
    stop: &StopFlag,
    notify: &dyn Fn(String),
    mut after_run: impl FnMut(usize, &[EmpRun]) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<LiveRuns>> {
    let mut session = MeasurementSession::open(SessionOptions {
        trace: false,
        delay_accounting: false,
        taskstats_exits: true,
        hold_page_reporting: true,
        ..Default::default()
    })?;
    let mut notes = Vec::new();
    if let Some(e) = &session.listener_error {
        notes.push(format!(
            "taskstats exit records unavailable ({e}): PT from the ledger only"
        ));
    }
    let listening = session.taskstats_exits().is_some();
    let mut ctx = session.qe_context(plan.run_as.clone());
    ctx.timeout = plan.timeout;
    let k = commands.len();
    let mut outs: Vec<LiveRuns> = (0..k)
        .map(|_| LiveRuns {
            runs: Vec::with_capacity(plan.runs as usize + 1),
            interrupted: false,
            failure: None,
            notes: notes.clone(),
        })
        .collect();
    let mut first_start_ns: Vec<Option<u64>> = vec![None; k];
    let mut taskstats_missing = vec![0u32; k];
    // Round r runs every command's run r − 1 (round 1: the warm-ups).
    let end = procedure::interleave(
        &mut outs,
        k,
        stop,
        |outs, j| outs[j].runs.len() as u32 <= plan.runs,
        |outs, j| {
            let out = &mut outs[j];
            let index = out.runs.len() as u32;
            let mut outcome =
                match target::measure(&mut ctx, index + 1, command_of(plan, commands[j]), None) {
                    Ok(o) => o,
                    Err(e) => {
                        out.failure = Some(super::failure::qe_failure(e));
                        return Ok(ControlFlow::Break(false));
                    }
                };
            if stop.raised() {
                notify(format!(
                    "run {index} interrupted: not kept (runs 0–{} kept)",
                    index.saturating_sub(1)
                ));
                return Ok(ControlFlow::Break(true));
            }
            if let Some(rx) = ctx.taskstats_exits
                && !emp_runs::await_program_exits(&mut outcome, rx, TASKSTATS_GRACE)
            {
                taskstats_missing[j] += 1;
            }
            out.notes.extend(losses_note(index, &outcome.window));
            let first = *first_start_ns[j].get_or_insert(outcome.window.start_ns);
            let run = emp_runs::emp_run(index, &outcome, first, index == 0);
            out.runs.push(run);
            after_run(j, &out.runs)?;
            anyhow::Ok(ControlFlow::Continue(()))
        },
    )?;
    // Ctrl-C between or during runs; a failure is kept with its command.
    let ended = matches!(end, Interleaved::Stopped | Interleaved::Ended(true));
    for (out, missing) in outs.iter_mut().zip(taskstats_missing) {
        out.interrupted = ended;
        if listening && missing > 0 {
            out.notes.push(format!(
                "taskstats exit records of the program incomplete in {missing} run(s): their taskstats PT is absent"
            ));
        }
    }
    if let Some(l) = session.exit_listener() {
        let s = l.stats();
        if s.overflows > 0 {
            for out in &mut outs {
                out.notes.push(format!(
                    "the taskstats listener's buffer overflowed {} time(s): some exit records were lost",
                    s.overflows
                ));
            }
        }
    }
    Ok(outs)
}

/// The command of a run: quiet and pinned as the plan says.
fn command_of(plan: &LivePlan<'_>, command: &[String]) -> Command {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    if plan.quiet {
        cmd.stdout(std::process::Stdio::null());
    }
    if let Some(pin) = plan.pin.clone() {
        use std::os::unix::process::CommandExt;
        // SAFETY: pin_self only calls sched_setaffinity on a set on the
        // stack: no allocation or lock between fork and exec.
        unsafe { cmd.pre_exec(move || pin.pin_self()) };
    }
    cmd
}

/// The note of a run whose ledger records are incomplete, in words.
fn losses_note(index: u32, window: &ttp_ledger::accounts::Window) -> Option<String> {
    let lost = &window.lost;
    (lost.losses() > 0 || window.vanished_threads > 0).then(|| {
        format!(
            "run {index}: ledger records incomplete (exit records lost {}, thread map full {}, task reads failed {}, request map full {}, per-process disk map full {}, CPU out of range {}, threads vanished {})",
            lost.exit_records_lost,
            lost.thread_map_full,
            lost.read_failed,
            lost.request_map_full,
            lost.proc_disk_map_full,
            lost.cpu_out_of_range,
            window.vanished_threads
        )
    })
}

/// The progress line after a run: the command's label when several run.
pub(crate) fn progress_message(run: &EmpRun, label: Option<usize>) -> String {
    let pt = run.pt.ledger_on_cpu_ns.map(|n| n as f64 / 1e6);
    format!(
        "{}run {}{}: ET {:.1} ms, PT {}",
        label.map_or(String::new(), |j| format!("{} ", ttp_compare::label(j))),
        run.index,
        if run.index == 0 { " (warm-up)" } else { "" },
        run.et_ns as f64 / 1e6,
        pt.map_or("—".to_string(), |p| format!("{p:.1} ms"))
    )
}
