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

/// Parses a duration argument such as "10s", "500ms", "2m" (humantime
/// syntax); zero is refused. clap reports the message as a usage error.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{e}: give a duration such as 10s, 500ms or 2m"))?;
    if d.is_zero() {
        return Err("the duration must be greater than zero".into());
    }
    Ok(d)
}

/// Exit code for an error that ended a command.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a duration argument read in the wrong unit, and a zero or
    /// unreadable one let through.
    #[test]
    fn parses_durations_and_refuses_zero() {
        assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
        assert_eq!(parse_duration("2m").unwrap().as_secs(), 120);
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
    }

    /// Catches a usage error that would exit 1 instead of 2.
    #[test]
    fn usage_errors_exit_2_anywhere_in_the_chain() {
        let e = usage::<()>("bad").unwrap_err().context("while parsing");
        assert_eq!(exit_code(&e), 2);
        assert_eq!(exit_code(&anyhow::anyhow!("failed")), 1);
    }
}
