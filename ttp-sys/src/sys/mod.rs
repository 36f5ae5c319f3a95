//! The machine: privileges, the invoking user, signals and guards that undo
//! every change the tool makes.
pub mod affinity;
pub mod atomic;
pub mod clock;
pub mod delayacct;
pub mod executable;
pub mod export;
pub mod held;
pub mod invoker;
pub mod logging;
pub mod malloc;
pub mod page_cache;
pub mod page_reporting;
pub mod pidfd;
pub mod privileges;
pub mod run_state;
pub mod setup_check;
pub mod signals;
pub mod spawn;
pub mod sysctl;
