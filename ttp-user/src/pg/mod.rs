//! PostgreSQL as the measured DBMS: a session on the server of this
//! machine whose backend is the query process (TTPv2 Sec. 7.2), Q@Cs run
//! with plan capture, cold restarts and retries (Sec. 3.1–3.2), the data
//! generation of an experiment (Sec. 3.2.1), one statement's Q@C from its
//! plan (`statement.rs`, `run --postgres` and the lab worker), and a pooled
//! target for the load driver.
pub(crate) mod error;
pub mod experiment;
pub(crate) mod load;
pub(crate) mod qc;
pub(crate) mod restart;
pub(crate) mod script;
pub(crate) mod session;
pub(crate) mod statement;
pub(crate) mod study;

pub use error::PgError;
pub use qc::{PgFacts, QcEnd, QcRun, Runner, RunnerOptions};
pub use session::{Pg, Session};

use ttp_ledger::collect::machine::MachineFacts;
use ttp_window::window::session::{MeasurementSession, SessionOptions};

/// Opens the measurement session of a PostgreSQL run or experiment, with
/// the machine facts of its report: the session's own and how measuring
/// PostgreSQL deviates from the protocol (Sec. 9 (6)).
pub(crate) fn open_session(cold_cache: bool) -> anyhow::Result<(MeasurementSession, MachineFacts)> {
    let session = MeasurementSession::open(SessionOptions {
        trace: false,
        delay_accounting: true,
        taskstats_exits: true,
        hold_page_reporting: true,
        ..Default::default()
    })?;
    let mut machine = session.machine_facts(cold_cache);
    // Sec. 7.2 times one query process: with parallel workers the query's
    // work would be spread over short-lived processes.
    machine.deviations.push(
        "parallel query was switched off in the measuring session (max_parallel_workers_per_gather = 0), so the backend is the only query process".into(),
    );
    if cold_cache {
        machine.deviations.push(
            "PostgreSQL cannot empty its buffers, so before each QE the server was restarted, the statement prepared again on a new connection and the page cache dropped: the cold start is somewhat artificially cold (Sec. 3.1)".into(),
        );
    }
    Ok((session, machine))
}
