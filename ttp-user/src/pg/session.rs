//! One connection to a PostgreSQL server on this machine, driven from
//! synchronous code: the measuring loop is sequential (Fig. 5), so the
//! client runs on a current-thread runtime that only turns while a
//! statement is in flight, adding no threads of its own to the EXECUTOR.
use std::{str::FromStr, sync::Arc, time::Duration};

use futures_util::TryStreamExt;
use tokio::runtime::Runtime;
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage, Statement, types::ToSql};

use super::error::PgError;
use ttp_ledger::collect::proc_pid::ProcImage;
use ttp_sys::sys::signals::StopFlag;

/// A parsed connection string and the runtime its sessions use.
pub struct Pg {
    rt: Arc<Runtime>,
    config: Config,
    target: String,
}

impl Pg {
    /// Parses `conninfo` (key=value pairs or a postgresql:// URL).
    pub fn new(conninfo: &str) -> Result<Pg, PgError> {
        let config = parse_config(conninfo)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(PgError::Runtime)?;
        let target = describe(&config);
        Ok(Pg {
            rt: Arc::new(rt),
            config,
            target,
        })
    }

    /// host, port, user and database, without the password.
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// Opens a session and finds the backend serving it and the postmaster.
    pub fn connect(&self) -> Result<Session, PgError> {
        let (client, connection) = self
            .rt
            .block_on(self.config.connect(NoTls))
            .map_err(|e| PgError::from_connect(&self.target, e))?;
        let conn = self.rt.spawn(async move {
            let _ = connection.await;
        });
        let mut s = Session {
            rt: self.rt.clone(),
            client,
            conn: Some(conn),
            backend_pid: 0,
            postmaster_pid: 0,
            server_version: String::new(),
            prepared: 0,
        };
        let q = "SELECT pg_backend_pid(), current_setting('server_version')";
        let row =
            s.rt.block_on(s.client.query_one(q, &[]))
                .map_err(|e| PgError::from_client(q, e))?;
        let pid: i32 = row.get(0);
        s.server_version = row.get(1);
        s.backend_pid = pid as u32;
        s.postmaster_pid = local_postmaster(s.backend_pid)?;
        Ok(s)
    }
}

/// A connection string as the client's configuration, with a connect
/// timeout (10 s unless given) and ttp's application name.
pub(crate) fn parse_config(conninfo: &str) -> Result<Config, PgError> {
    let mut config = Config::from_str(conninfo).map_err(|e| PgError::BadConnString {
        conninfo: conninfo.to_string(),
        reason: e.to_string(),
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("ttp-ebpf");
    Ok(config)
}

/// host, port, user and database of a configuration (no password).
pub(crate) fn describe(c: &Config) -> String {
    let hosts: Vec<String> = c
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(s) => s.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .collect();
    let host = if hosts.is_empty() {
        "localhost".to_string()
    } else {
        hosts.join(",")
    };
    let port = c
        .get_ports()
        .first()
        .map_or("5432".to_string(), u16::to_string);
    format!(
        "host={host} port={port} user={} dbname={}",
        c.get_user().unwrap_or("?"),
        c.get_dbname().or(c.get_user()).unwrap_or("?")
    )
}

/// The backend must be a process of this machine for its ledger to be
/// read: returns its parent, the postmaster.
fn local_postmaster(backend: u32) -> Result<u32, PgError> {
    let root = std::path::Path::new("/proc");
    let not_local = |reason: String| PgError::NotLocal {
        pid: backend,
        reason,
    };
    let b = ProcImage::read_process(root, backend as i32)
        .map_err(|_| not_local("no such process here".into()))?;
    if !b.comm.starts_with("postgres") {
        return Err(not_local(format!("pid {backend} here is `{}`", b.comm)));
    }
    let ppid = b.ppid.max(0) as u32;
    let p = ProcImage::read_process(root, ppid as i32)
        .map_err(|_| not_local(format!("its parent {ppid} is gone")))?;
    if !(p.comm.starts_with("postgres") || p.comm.starts_with("postmaster")) {
        return Err(not_local(format!(
            "its parent {ppid} is `{}`, not a postmaster",
            p.comm
        )));
    }
    Ok(ppid)
}

/// A connected session.
pub struct Session {
    rt: Arc<Runtime>,
    client: Client,
    conn: Option<tokio::task::JoinHandle<()>>,
    /// `pg_backend_pid()`: the query process (Sec. 7.2).
    pub backend_pid: u32,
    /// The backend's parent: the postmaster.
    pub postmaster_pid: u32,
    pub server_version: String,
    prepared: u32,
}

impl Session {
    /// Runs `sql` (one or more statements, no result kept).
    pub(crate) fn batch(&self, sql: &str) -> Result<(), PgError> {
        self.rt
            .block_on(self.client.batch_execute(sql))
            .map_err(|e| PgError::from_client(sql, e))
    }

    /// The first column of the first row `sql` returns, as text.
    pub(crate) fn scalar(&self, sql: &str) -> Result<Option<String>, PgError> {
        let msgs = self
            .rt
            .block_on(self.client.simple_query(sql))
            .map_err(|e| PgError::from_client(sql, e))?;
        Ok(msgs.into_iter().find_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        }))
    }

    /// Prepares `sql` once (Sec. 3.2.2: "We run the optimizer only once,
    /// using JDBC's PreparedStatement for each part of query and
    /// cardinality"), as an SQL-level prepared statement so that
    /// `EXPLAIN EXECUTE` shows the plan of the very statement executed
    /// (what Sec. 3.2.3 found impossible with JDBC).
    pub fn prepare(&mut self, sql: &str) -> Result<Prepared, PgError> {
        // The client's own prepare tells whether the statement has
        // parameters (and reports a syntax error with its position).
        let probe = self
            .rt
            .block_on(self.client.prepare(sql))
            .map_err(|e| PgError::from_client(sql, e))?;
        if !probe.params().is_empty() {
            return Err(PgError::Parameters);
        }
        drop(probe);
        self.prepared += 1;
        let name = format!("ttp_q{}", self.prepared);
        self.batch(&format!("PREPARE {name} AS {sql}"))?;
        // `EXECUTE name`, itself prepared once: each QE is one round trip.
        let exec_sql = format!("EXECUTE {name}");
        let exec = self
            .rt
            .block_on(self.client.prepare(&exec_sql))
            .map_err(|e| PgError::from_client(&exec_sql, e))?;
        Ok(Prepared { name, exec })
    }

    /// The plan the prepared statement will run with, as PostgreSQL's JSON
    /// without costs: the operator tree is the plan (Sec. 3.2.3); an
    /// estimate that changes with the cardinality does not make another
    /// plan, so Q@Cs of one plan are compared for monotonicity (QC3/QC4).
    pub(crate) fn explain(&self, p: &Prepared) -> Result<String, PgError> {
        let sql = format!("EXPLAIN (FORMAT JSON, COSTS OFF) EXECUTE {}", p.name);
        Ok(self.scalar(&sql)?.unwrap_or_default())
    }

    /// Executes the prepared statement and consumes its result with
    /// minimal transfer (Sec. 2: "We minimize JDBC activity by returning a
    /// minimal result"): rows arrive in binary format and are dropped as
    /// they arrive, undecoded. Returns the number of rows.
    ///
    /// When `stop` is raised (Ctrl-C) while the statement runs, the server
    /// is asked to cancel it, and [`PgError::Cancelled`] is returned.
    pub fn execute(&self, p: &Prepared, stop: Option<&StopFlag>) -> Result<u64, PgError> {
        let run = async {
            let stream = self
                .client
                .query_raw(&p.exec, std::iter::empty::<&(dyn ToSql + Sync)>())
                .await?;
            let mut stream = std::pin::pin!(stream);
            let mut rows = 0u64;
            while stream.try_next().await?.is_some() {
                rows += 1;
            }
            Ok::<u64, tokio_postgres::Error>(rows)
        };
        let watch = async {
            loop {
                if stop.is_some_and(StopFlag::raised) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let stmt = || format!("EXECUTE {}", p.name);
        self.rt.block_on(async {
            let mut run = std::pin::pin!(run);
            tokio::select! {
                r = &mut run => r.map_err(|e| PgError::from_client(&stmt(), e)),
                () = watch => {
                    let _ = self.client.cancel_token().cancel_query(NoTls).await;
                    // The statement ends with "canceling statement due to
                    // user request" (or had just finished): either way the
                    // QE is not kept.
                    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
                    Err(PgError::Cancelled)
                }
            }
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}

/// A statement prepared in a session: its SQL-level name and the
/// client's statement that executes it.
#[derive(Clone)]
pub struct Prepared {
    pub name: String,
    exec: Statement,
}

impl Drop for Session {
    /// Ends the connection task, which closes the socket, so the backend
    /// exits now rather than when the runtime does.
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.abort();
            let _ = self.rt.block_on(conn);
        }
    }
}
