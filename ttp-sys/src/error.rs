//! Errors that reach the user, and the exit code each maps to.
//!
//! Layers return their own `thiserror` enums; the command edge wraps them in
//! `anyhow`. A [`UsageError`] anywhere in the chain means the user asked for
//! something that cannot be done as asked (bad pid, bad duration, missing
//! privileges): exit code 2, like clap's own usage errors. Anything else is a
//! failure while measuring: exit code 1.

/// The user's request cannot be carried out as given; the message says what
/// to do instead.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// Shorthand for returning a usage error from a command.
pub fn usage<T>(msg: impl Into<String>) -> anyhow::Result<T> {
    Err(UsageError::new(msg).into())
}

/// Exit code for an error that ended a command.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else {
        1
    }
}
