//! A QE that could not be measured, as the error that ends a run of
//! commands (the rounds and EMP's runs both end that way).
use ttp_sys::error::UsageError;
use ttp_window::window::context::QeError;

/// A QE that could not be measured, as the error that ends the run: a
/// start the user can fix (not found, not executable) is a usage error.
pub(crate) fn qe_failure(e: QeError) -> anyhow::Error {
    match e {
        QeError::Spawn(e) if e.is_usage() => UsageError::new(e.to_string()).into(),
        QeError::Spawn(e) => e.into(),
        QeError::Probe(e) => ttp_ledger::probe::probe_error_ctx(e),
        e @ (QeError::Trace(_) | QeError::Blame(_)) => e.into(),
    }
}
