//! One statement's Q@C measured as `run --postgres` measures it, from its
//! plan to the Q@C and the machine it ran on: the connection checked and
//! the statement prepared before anything is measured, the measurement
//! session of PostgreSQL (`open_session`), the Q@C (`qc.rs`), the session
//! closed. `run --postgres` and the lab worker's query tasks both measure
//! through [`measure`]; what they do with each QE is their callback's.
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::sys::{affinity::CpuList, signals::StopFlag, spawn::RunAs};
use ttp_ttpv2::{
    analysis::RunDocument,
    model::{Labels, QcInput},
    paragraph::Wording,
};

use super::{
    Pg,
    error::pg_error,
    qc::{PgFacts, QcError, QcRun, Runner, RunnerOptions},
};

/// A `run --postgres`, validated once by the command line.
pub(crate) struct StatementPlan {
    /// key=value pairs or a postgresql:// URL.
    pub conninfo: String,
    /// The statement, prepared once and executed once per QE.
    pub sql: String,
    /// QEs of the Q@C (TTPv2's N).
    pub n: u32,
    pub labels: Labels,
    /// The cold cache, the restart, the back-off, the time-out, the pin,
    /// the warm-up.
    pub runner: RunnerOptions,
}

/// What sees the Q@C after every QE, with the server's facts and the
/// machine's (the run's JSON carries both).
pub type OnQe<'a> = dyn FnMut(&QcInput, &PgFacts, &MachineFacts) + 'a;

/// Measures `plan`'s Q@C until its N QEs, Ctrl-C (`stop`) or a pause;
/// `on_qe` sees the Q@C after every QE, `notify` gets what the user must
/// read (retries, plan restarts). A server that cannot be reached, a
/// statement that does not prepare, or a failure that stops the Q@C is
/// an error (what the user can fix, a usage error).
pub fn measure(
    plan: &StatementPlan,
    stop: &StopFlag,
    on_qe: &mut OnQe<'_>,
    notify: &dyn Fn(String),
) -> anyhow::Result<(QcRun, MachineFacts)> {
    ttp_sys::sys::privileges::require_bpf()?;
    let pg = Pg::new(&plan.conninfo).map_err(pg_error)?;
    let mut runner = Runner::start(&pg, plan.runner.clone(), stop.clone()).map_err(pg_error)?;
    runner.check_sql(&plan.sql).map_err(pg_error)?;
    let (mut session, mut machine) = super::open_session(plan.runner.cold_cache)?;
    if let Some(pin) = &plan.runner.cpu {
        machine.deviations.push(pinned_statement(pin));
    }
    let mut ctx = session.qe_context(RunAs::Current);
    let outcome = runner.run_qc(
        &mut ctx,
        &plan.sql,
        plan.n,
        plan.labels.clone(),
        &mut |qc, facts| on_qe(qc, facts, &machine),
        notify,
    );
    drop(ctx);
    drop(session);
    match outcome {
        Ok(run) => Ok((run, machine)),
        Err(QcError::Probe(e)) => Err(ttp_ledger::probe::probe_error_ctx(e)),
        Err(e) => {
            Err(anyhow::Error::new(e).context("the Q@C stopped; the QEs measured before are kept"))
        }
    }
}

/// The run JSON (`ttp.run/1`) with the `postgres` object beside it; its
/// Sec. 9 paragraph worded by `wording` (the report layer's).
pub(crate) fn run_json(
    qc: &QcInput,
    facts: &PgFacts,
    machine: &MachineFacts,
    wording: Wording,
) -> anyhow::Result<(RunDocument, serde_json::Value)> {
    let doc = RunDocument::new(qc, Some(machine), wording);
    let mut v = serde_json::to_value(&doc)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("postgres".into(), serde_json::to_value(facts)?);
    }
    Ok((doc, v))
}

/// The sentence the Sec. 9 paragraph (6) carries for `--cpu` with
/// `--postgres`: the query process is the backend, not a command ttp starts.
fn pinned_statement(pin: &CpuList) -> String {
    let n = pin.cpus().len();
    format!(
        "the backend serving the measuring connection (the query process) was pinned to CPU{} {pin} with sched_setaffinity before each QE (--cpu); the postmaster and other processes were not, and the other CPUs stayed online",
        if n == 1 { "" } else { "s" }
    )
}
