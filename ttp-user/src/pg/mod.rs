//! PostgreSQL as the measured DBMS: a session on the server of this
//! machine whose backend is the query process (TTPv2 Sec. 7.2), Q@Cs run
//! with plan capture, cold restarts and retries (Sec. 3.1–3.2), the data
//! generation of an experiment (Sec. 3.2.1), and a pooled target for the
//! load driver.
pub mod error;
pub mod experiment;
pub mod load;
pub mod qc;
pub mod restart;
pub mod session;

pub use error::PgError;
pub use qc::{PgFacts, QcEnd, QcRun, Runner, RunnerOptions};
pub use session::{Pg, Session};
