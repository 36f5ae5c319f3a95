//! A run of commands from its plan to its Q@Cs: the measurement session
//! it needs (the trace, wake latency, the blame beside each QE), the
//! plan's rounds (`rounds.rs`), and the session closed again. `run -- CMD`
//! and the lab worker's command tasks both measure through [`measure`];
//! what they do with each QE is their callback's.
use anyhow::Context;

use super::{
    plan::Plan,
    rounds::{self, Measured},
};
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::sys::{affinity::CpuList, signals::StopFlag};
use ttp_ttpv2::model::QcInput;
use ttp_window::window::{
    context::{BesideQe, FollowProcess},
    session::{MeasurementSession, SessionOptions},
    trace_record::{Recorder, Recording},
};

/// What sees the Q@Cs after every QE: the Q@Cs, the index of the one just
/// measured, the QE's name, the machine they run on (the run's JSON
/// carries its facts).
pub type OnQe<'a> = dyn FnMut(&[QcInput], usize, &str, &MachineFacts) -> anyhow::Result<()> + 'a;

/// A run of commands as measured.
pub struct Run {
    /// The Q@Cs with their QEs (a command that could not start at all
    /// keeps its one QE saying why).
    pub qcs: Vec<QcInput>,
    /// The machine's facts, with the run's deviations (`--cpu`).
    pub machine: MachineFacts,
    /// How the rounds ended, and when each QE ran.
    pub measured: Measured,
    /// `--trace`: what the ledger recorded of the command's processes.
    pub recording: Option<Recording>,
}

/// Measures `plan`: opens its session, runs its rounds until every Q@C
/// has its N QEs, Ctrl-C (`stop`) or a failure that ends the run, and
/// closes the session. After every QE, `on_qe` sees the Q@Cs (to save
/// them, record them, show progress); `notify` gets what the user must
/// read (restarts, retries, a QE interrupted). An error is one before the
/// first QE (the session, the trace) or `on_qe`'s; a failure of a QE is
/// [`Measured::failure`], with the QEs before it kept.
pub fn measure(
    plan: &Plan,
    stop: &StopFlag,
    on_qe: &mut OnQe<'_>,
    notify: &dyn Fn(String),
) -> anyhow::Result<Run> {
    let mut session = MeasurementSession::open(SessionOptions {
        trace: plan.trace,
        delay_accounting: true,
        taskstats_exits: true,
        hold_page_reporting: true,
        wake_latency: plan.wake_latency,
        irq_time: plan.irq_time,
        ..Default::default()
    })?;
    let mut recorder = match plan.trace {
        true => Some(Recorder::start(&mut session.ledger, &[]).context("starting the trace")?),
        false => None,
    };
    let mut machine = session.machine_facts(plan.cold_cache.is_some());
    if let Some(pin) = &plan.pin {
        machine.deviations.push(pinned_statement(pin));
    }
    let mut qcs = plan.qc_inputs(session.user_hz as u32, &machine);
    let blame = plan.blame_window.map(|w| ttp_blame::qe::QeBlameStarter {
        window_ns: u64::try_from(w.as_nanos()).unwrap_or(u64::MAX),
    });
    let mut ctx = session.qe_context(plan.run_as.clone());
    ctx.recorder = recorder.as_mut().map(|r| r as &mut dyn FollowProcess);
    plan.configure(&mut ctx);
    ctx.beside = blame.as_ref().map(|b| b as &dyn BesideQe);
    let mut each = |qcs: &[QcInput], j: usize, who: &str| on_qe(qcs, j, who, &machine);
    let measured = rounds::measure(&mut ctx, plan, &mut qcs, stop, &mut each, notify)?;
    drop(ctx);
    let recording = match recorder {
        Some(r) => Some(r.finish(&session.ledger).context("finishing the trace")?),
        None => None,
    };
    drop(session);
    Ok(Run {
        qcs,
        machine,
        measured,
        recording,
    })
}

/// The sentence the Sec. 9 paragraph (6) carries for `--cpu`.
pub fn pinned_statement(pin: &CpuList) -> String {
    let n = pin.cpus().len();
    format!(
        "the command was pinned to CPU{} {pin} with sched_setaffinity before exec (--cpu), the other CPUs staying online",
        if n == 1 { "" } else { "s" }
    )
}
