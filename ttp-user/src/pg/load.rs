//! `ttp-ebpf load --postgres CONNSTR --sql "…"`: the load driver's target
//! for PostgreSQL. A pool of connections, each with the statement prepared
//! once; a request takes a free connection, executes the statement and
//! consumes its rows. The pool is sized to the phase's concurrency (capped
//! by `--pool-size`), so requests over it wait for a connection — with
//! their latency still counted from their intended start (open model).
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio_postgres::{Client, Config, NoTls, Statement, types::ToSql};

use super::session::{describe, parse_config};
use crate::protocol::load::{
    clock::{Clock, ClockKind},
    targets::{ConnectFuture, RequestError, RequestFuture, Target, TargetError, TargetFactory},
};

/// Default most connections of the pool (PostgreSQL's default
/// max_connections is 100).
pub const DEFAULT_POOL: usize = 16;

/// `--postgres CONNSTR --sql SQL [--pool-size N]`.
#[derive(Debug, Clone)]
pub struct PgFactory {
    config: Config,
    sql: String,
    pool_max: usize,
}

impl PgFactory {
    pub fn new(conninfo: &str, sql: &str, pool_max: Option<usize>) -> Result<Self, String> {
        let config = parse_config(conninfo).map_err(|e| e.to_string())?;
        if sql.trim().is_empty() {
            return Err(
                "--postgres needs --sql \"SELECT …\" (the statement each request runs)".into(),
            );
        }
        if pool_max == Some(0) {
            return Err("--pool-size must be at least 1".into());
        }
        Ok(Self {
            config,
            sql: sql.to_string(),
            pool_max: pool_max.unwrap_or(DEFAULT_POOL),
        })
    }
}

struct Conn {
    client: Client,
    statement: Statement,
}

async fn connect_one(config: &Config, sql: &str) -> Result<Conn, String> {
    let (client, connection) = config.connect(NoTls).await.map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let statement = client
        .prepare(sql)
        .await
        .map_err(|e| crate::pg::PgError::from_client(sql, e).to_string())?;
    if !statement.params().is_empty() {
        return Err(crate::pg::PgError::Parameters.to_string());
    }
    Ok(Conn { client, statement })
}

impl TargetFactory for PgFactory {
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "postgres",
            "server": describe(&self.config),
            "sql": self.sql,
            "pool_max": self.pool_max,
        })
    }

    fn summary(&self) -> String {
        format!(
            "PostgreSQL {}: `{}` (pool of up to {} connections, statement prepared once on each)",
            describe(&self.config),
            crate::pg::error::short(&self.sql),
            self.pool_max
        )
    }

    fn supports_virtual_clock(&self) -> bool {
        false
    }

    fn connect<'a>(&'a self, clock: &'a Clock, concurrency: usize) -> ConnectFuture<'a> {
        Box::pin(async move {
            if clock.kind() != ClockKind::Real {
                return Err(TargetError::WrongClock {
                    target: "postgres",
                    clock: clock.kind(),
                });
            }
            let size = concurrency.clamp(1, self.pool_max);
            let mut conns = Vec::with_capacity(size);
            for _ in 0..size {
                conns.push(
                    connect_one(&self.config, &self.sql)
                        .await
                        .map_err(|reason| TargetError::Connect {
                            target: describe(&self.config),
                            reason,
                        })?,
                );
            }
            Ok(Arc::new(PgTarget {
                config: self.config.clone(),
                sql: Arc::new(self.sql.clone()),
                free: Arc::new(Mutex::new(conns)),
                permits: Arc::new(Semaphore::new(size)),
            }) as Arc<dyn Target>)
        })
    }
}

struct PgTarget {
    config: Config,
    sql: Arc<String>,
    free: Arc<Mutex<Vec<Conn>>>,
    permits: Arc<Semaphore>,
}

/// A connection taken from the pool; back in the pool when dropped unless
/// the request broke it (or was abandoned mid-way: its result is unknown).
struct Taken {
    conn: Option<Conn>,
    free: Arc<Mutex<Vec<Conn>>>,
    healthy: bool,
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take()
            && self.healthy
            && !c.client.is_closed()
        {
            self.free.lock().unwrap_or_else(|e| e.into_inner()).push(c);
        }
    }
}

fn request_error(e: tokio_postgres::Error) -> RequestError {
    match e.as_db_error() {
        Some(db) => RequestError::Other {
            kind: "postgres_error",
            message: format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        },
        None => RequestError::Other {
            kind: "postgres_connection",
            message: e.to_string(),
        },
    }
}

impl Target for PgTarget {
    fn call(&self) -> RequestFuture {
        let (config, sql, free, permits) = (
            self.config.clone(),
            self.sql.clone(),
            self.free.clone(),
            self.permits.clone(),
        );
        Box::pin(async move {
            let _permit = permits
                .acquire_owned()
                .await
                .map_err(|e| RequestError::Other {
                    kind: "postgres_pool",
                    message: e.to_string(),
                })?;
            let conn = free.lock().unwrap_or_else(|e| e.into_inner()).pop();
            // A connection lost earlier is replaced here.
            let conn = match conn {
                Some(c) => c,
                None => {
                    connect_one(&config, &sql)
                        .await
                        .map_err(|message| RequestError::Other {
                            kind: "postgres_connection",
                            message,
                        })?
                }
            };
            let mut taken = Taken {
                conn: Some(conn),
                free,
                healthy: false,
            };
            let c = taken.conn.as_ref().ok_or(RequestError::Other {
                kind: "postgres_pool",
                message: "no connection".into(),
            })?;
            let rows = async {
                let stream = c
                    .client
                    .query_raw(&c.statement, std::iter::empty::<&(dyn ToSql + Sync)>())
                    .await?;
                let mut stream = std::pin::pin!(stream);
                use futures_util::TryStreamExt;
                while stream.try_next().await?.is_some() {}
                Ok::<(), tokio_postgres::Error>(())
            }
            .await;
            match rows {
                Ok(()) => {
                    taken.healthy = true;
                    Ok(())
                }
                Err(e) => {
                    // A statement error leaves the connection usable.
                    taken.healthy = e.as_db_error().is_some();
                    Err(request_error(e))
                }
            }
        })
    }
}
