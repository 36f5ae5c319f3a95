//! The lab: one PostgreSQL database as the job queue and the system of
//! record of experiments run on many hosts (TTPv2 Sec. 3.2 describes
//! AZDBLab, the lab notebook the protocol was developed on). `schema`
//! creates and migrates its tables, `spec` reads an experiment spec and
//! expands it into tasks, `queue` submits, claims, records and reports.
//! docs/lab.md explains the design.
pub(crate) mod import;
pub(crate) mod passfile;
pub mod queue;
pub(crate) mod retry;
pub mod schema;
pub mod spec;
pub(crate) mod study;
pub(crate) mod tls;

use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::{Client, NoTls};

use crate::pg::session;
use ttp_sys::error::UsageError;

/// A connection to the lab database, driven from synchronous code.
pub struct Lab {
    rt: Runtime,
    client: Client,
    /// host, port, user and database, never the password.
    pub target: String,
}

/// What went wrong talking to the lab database, in one line.
#[derive(Debug, thiserror::Error)]
#[error("lab database ({target}): `{statement}` failed: {reason}")]
pub(crate) struct LabError {
    pub target: String,
    pub statement: String,
    pub reason: String,
    /// The lab could not be reached or closed the connection (restart,
    /// shutdown, network): trying again later can succeed.
    pub transient: bool,
}

/// The lab server could not be reached (refused, timed out, starting up,
/// shutting down); unlike a wrong password or URL, this can pass.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unreachable(pub String);

/// Whether `e` is the lab being unreachable for now (worth a retry),
/// rather than a refusal or a bug.
pub(crate) fn is_transient(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<Unreachable>().is_some()
            || c.downcast_ref::<LabError>().is_some_and(|l| l.transient)
    })
}

impl Lab {
    /// Connects to the lab at `url` (key=value pairs or a postgresql://
    /// URL; the password from the URL, PGPASSWORD or the password file
    /// (PGPASSFILE, ~/.pgpass) is never printed). A bad or unreachable
    /// URL is a usage error: exit 2.
    pub fn connect(url: &str) -> anyhow::Result<Lab> {
        Lab::connect_as(url, "ttp-ebpf lab")
    }

    /// [`Lab::connect`] with this `application_name` (pg_stat_activity
    /// tells a worker's connections apart by it).
    pub(crate) fn connect_as(url: &str, application: &str) -> anyhow::Result<Lab> {
        Lab::try_connect(url, application).map_err(|e| match e.downcast::<Unreachable>() {
            Ok(u) => UsageError::new(u.0).into(),
            Err(e) => e,
        })
    }

    /// [`Lab::connect_as`], but a server that cannot be reached now is an
    /// [`Unreachable`] error (a caller may wait for it), not a usage error.
    pub(crate) fn try_connect(url: &str, application: &str) -> anyhow::Result<Lab> {
        let (url, tls) = tls::split(url).map_err(UsageError::new)?;
        let mut config = session::parse_config(&url).map_err(|e| UsageError::new(e.to_string()))?;
        config.ssl_mode(tls.client_mode());
        if config.get_password().is_none()
            && let Ok(p) = std::env::var("PGPASSWORD")
        {
            config.password(p);
        }
        if config.get_password().is_none()
            && let Some(pw) = password_from_file(&config)
        {
            config.password(pw);
        }
        config.application_name(application);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        let target = session::describe(&config);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let fail = |e: tokio_postgres::Error| -> anyhow::Error {
            let msg = format!(
                "cannot connect to the lab database ({target}): {}; check --lab (host, port, user, dbname, password, sslmode, sslrootcert)",
                one_line(&e)
            );
            if transient(&e) {
                anyhow::Error::from(Unreachable(msg))
            } else {
                UsageError::new(msg).into()
            }
        };
        let client = match tls.client_config().map_err(UsageError::new)? {
            None => {
                let (client, connection) = rt.block_on(config.connect(NoTls)).map_err(fail)?;
                rt.spawn(async move {
                    let _ = connection.await;
                });
                client
            }
            Some(c) => {
                let (client, connection) = rt
                    .block_on(config.connect(tokio_postgres_rustls::MakeRustlsConnect::new(c)))
                    .map_err(fail)?;
                rt.spawn(async move {
                    let _ = connection.await;
                });
                client
            }
        };
        Ok(Lab { rt, client, target })
    }

    /// Whether the connection still answers (`SELECT 1`): one the server
    /// closed (restart, idle timeout, terminated backend) does not, and
    /// the client only learns that by using it.
    pub(crate) fn answers(&self) -> bool {
        self.rt
            .block_on(self.client.simple_query("SELECT 1"))
            .is_ok()
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub(crate) fn err(&self, statement: &str, e: tokio_postgres::Error) -> LabError {
        LabError {
            target: self.target.clone(),
            statement: statement.split_whitespace().collect::<Vec<_>>().join(" "),
            reason: one_line(&e),
            transient: transient(&e),
        }
    }
}

/// Whether a client error is the server being away (connection refused,
/// reset or closed, timed out; SQLSTATE class 08 connection exception or
/// 57P operator intervention: shutting down, starting up) rather than a
/// refusal (wrong password, no such database) or a bad statement.
fn transient(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(db) = e.as_db_error() {
        let c = db.code().code();
        return c.starts_with("08") || c.starts_with("57P");
    }
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            // A refused certificate or handshake is no outage: waiting
            // does not mend it.
            return !io.get_ref().is_some_and(|i| i.is::<rustls::Error>());
        }
        src = s.source();
    }
    e.to_string().contains("timed out")
}

/// The password for the first host of `config` from libpq's password
/// file (`PGPASSFILE` or `~/.pgpass`).
fn password_from_file(config: &tokio_postgres::Config) -> Option<String> {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => String::new(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user()?;
    let db = config.get_dbname().unwrap_or(user);
    passfile::lookup(&passfile::default_path()?, &host, port, db, user)
}

/// The client's error with its database message, on one line.
fn one_line(e: &tokio_postgres::Error) -> String {
    let mut s = match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => e.to_string(),
    };
    if let Some(src) = std::error::Error::source(e)
        && e.as_db_error().is_none()
    {
        s = format!("{s}: {src}");
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
