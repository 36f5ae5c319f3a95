//! The machine: privileges, the invoking user, signals and guards that undo
//! every change the tool makes.
pub mod clock;
pub mod logging;
pub mod signals;
