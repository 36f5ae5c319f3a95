//! What can go wrong talking to PostgreSQL, and which of it is transient.
//!
//! TTPv2 Sec. 3.2.3: "when any exception (e.g., network disconnection or a
//! runtime error) occurs during query execution ... exponential backoff is
//! performed ... If the exception happens more than the ten-time threshold,
//! then the ongoing experiment is automatically paused". Only errors that a
//! later attempt can cure are retried; a syntax error or a wrong password
//! fails at once.

/// SQLSTATEs a retry can cure: connection exceptions (class 08), the
/// server shutting down or starting up (57P01–57P03), too many
/// connections (53300), and the two concurrency failures a rerun resolves
/// (40001 serialization failure, 40P01 deadlock).
fn transient_sqlstate(code: &str) -> bool {
    code.starts_with("08")
        || matches!(
            code,
            "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01"
        )
}

/// SQLSTATE of a statement cancelled by `statement_timeout` (QE13).
pub(crate) const QUERY_CANCELED: &str = "57014";

/// A PostgreSQL error as the command's error: what the user can fix (the
/// connection string, the SQL, where ttp runs) is a usage error (exit 2).
pub(crate) fn pg_error(e: PgError) -> anyhow::Error {
    match e {
        PgError::BadConnString { .. }
        | PgError::Connect { .. }
        | PgError::Sql { .. }
        | PgError::Parameters
        | PgError::NotLocal { .. }
        | PgError::NoRestart { .. } => ttp_sys::error::UsageError::new(e.to_string()).into(),
        other => anyhow::Error::new(other),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "connection string {conninfo:?} is not valid: {reason}; use key=value pairs (host=/var/run/postgresql port=5432 user=me dbname=db) or a postgresql:// URL"
    )]
    BadConnString { conninfo: String, reason: String },
    #[error(
        "cannot connect to PostgreSQL ({target}): {reason}; is the server running, and are host, port, user and dbname right?"
    )]
    Connect {
        target: String,
        reason: String,
        transient: bool,
    },
    #[error("PostgreSQL refused `{statement}`: {message} (SQLSTATE {code}){detail}")]
    Sql {
        statement: String,
        code: String,
        message: String,
        /// ", detail: …" / ", hint: …" or empty.
        detail: String,
    },
    #[error("the connection to PostgreSQL was lost during `{statement}`: {reason}")]
    Lost { statement: String, reason: String },
    #[error(
        "backend pid {pid} is not a PostgreSQL process on this machine ({reason}): ttp must run on the server's machine, in its pid namespace"
    )]
    NotLocal { pid: u32, reason: String },
    #[error(
        "the statement takes parameters ($1 …); give one without placeholders (TTPv2 prepares each query once and executes it as is)"
    )]
    Parameters,
    #[error("restarting PostgreSQL with `{command}` failed: {reason}")]
    Restart { command: String, reason: String },
    #[error(
        "cannot restart the server for a cold cache: {reason}; give --restart-cmd (e.g. 'systemctl restart postgresql')"
    )]
    NoRestart { reason: String },
    #[error("the statement was cancelled (interrupted)")]
    Cancelled,
    #[error("cannot start the client runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl PgError {
    /// Whether a retry after a back-off may succeed (Sec. 3.2.3).
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            PgError::Connect { transient, .. } => *transient,
            PgError::Sql { code, .. } => transient_sqlstate(code),
            PgError::Lost { .. } => true,
            _ => false,
        }
    }

    /// The SQLSTATE, for errors the server reported.
    pub(crate) fn sqlstate(&self) -> Option<&str> {
        match self {
            PgError::Sql { code, .. } => Some(code),
            _ => None,
        }
    }

    /// A statement error from the client library.
    pub(crate) fn from_client(statement: &str, e: tokio_postgres::Error) -> PgError {
        let statement = short(statement);
        if let Some(db) = e.as_db_error() {
            let mut detail = String::new();
            if let Some(d) = db.detail() {
                detail += &format!(", detail: {d}");
            }
            if let Some(h) = db.hint() {
                detail += &format!(", hint: {h}");
            }
            if let Some(tokio_postgres::error::ErrorPosition::Original(p)) = db.position() {
                detail += &format!(", at character {p}");
            }
            return PgError::Sql {
                statement,
                code: db.code().code().to_string(),
                message: db.message().to_string(),
                detail,
            };
        }
        PgError::Lost {
            statement,
            reason: reason(&e),
        }
    }

    /// A failed connection attempt to `target`.
    pub(crate) fn from_connect(target: &str, e: tokio_postgres::Error) -> PgError {
        let transient = match e.as_db_error() {
            Some(db) => transient_sqlstate(db.code().code()),
            // No answer from a server: refused, no socket file yet, reset,
            // timed out — what a restarting server looks like.
            None => {
                io_kind(&e).is_some_and(|k| {
                    use std::io::ErrorKind::*;
                    matches!(
                        k,
                        ConnectionRefused
                            | NotFound
                            | ConnectionReset
                            | ConnectionAborted
                            | TimedOut
                    )
                }) || e.is_closed()
            }
        };
        PgError::Connect {
            target: target.to_string(),
            reason: reason(&e),
            transient,
        }
    }
}

/// The error text with its causes ("error connecting to server: No such
/// file or directory (os error 2)").
fn reason(e: &tokio_postgres::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s += &format!(": {t}");
        }
        src = c.source();
    }
    s
}

fn io_kind(e: &tokio_postgres::Error) -> Option<std::io::ErrorKind> {
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        src = c.source();
    }
    None
}

/// A statement shortened for messages.
pub(crate) fn short(sql: &str) -> String {
    let one_line: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches retrying what cannot succeed (a syntax error would be run
    /// eleven times) or giving up on a restarting server.
    #[test]
    fn transient_classes() {
        let sql = |code: &str| PgError::Sql {
            statement: "x".into(),
            code: code.into(),
            message: "m".into(),
            detail: String::new(),
        };
        for code in [
            "08006", "08001", "57P01", "57P03", "53300", "40001", "40P01",
        ] {
            assert!(sql(code).is_transient(), "{code}");
        }
        // 42601 syntax error, 42P01 undefined table, 28P01 bad password,
        // 57014 statement timeout (a QE13 time-out, not a retry).
        for code in ["42601", "42P01", "28P01", "3D000", QUERY_CANCELED, "22012"] {
            assert!(!sql(code).is_transient(), "{code}");
        }
        assert!(
            PgError::Lost {
                statement: "x".into(),
                reason: "closed".into()
            }
            .is_transient()
        );
        assert!(!PgError::Parameters.is_transient());
    }

    /// Catches messages that flood the terminal with a long statement.
    #[test]
    fn statements_are_shortened_to_one_line() {
        assert_eq!(short("SELECT\n  1"), "SELECT 1");
        let long = "x ".repeat(100);
        let s = short(&long);
        assert_eq!(s.chars().count(), 81);
        assert!(s.ends_with('…'));
    }
}
