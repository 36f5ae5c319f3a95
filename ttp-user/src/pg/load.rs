//! `ttp-ebpf load --postgres CONNSTR --sql "…"` (or `-f SCRIPT`): the load
//! driver's target for PostgreSQL. A pool of connections, each with the
//! statements prepared once; a request takes a free connection, executes
//! the statement — or the script's statements in order, one transaction
//! (pg::script) — and consumes their rows. The pool is sized to the phase's concurrency (capped
//! by `--pool-size`), so requests over it wait for a connection — with
//! their latency still counted from their intended start (open model).
use std::sync::{Arc, Mutex};

use tokio_postgres::{
    Client, Config, NoTls, Statement,
    types::{ToSql, Type},
};

use super::{
    script::{ParamSpec, Script},
    session::{describe, parse_config},
};
use ttp_load::{
    clock::{Clock, ClockKind},
    pool::Pool,
    schedule::SplitMix64,
    targets::{ConnectFuture, RequestError, RequestFuture, Target, TargetError, TargetFactory},
};

/// Default most connections of the pool (PostgreSQL's default
/// max_connections is 100).
pub(crate) const DEFAULT_POOL: usize = 16;

/// `--postgres CONNSTR (--sql SQL [--param …] | -f SCRIPT) [--pool-size N]`.
#[derive(Debug, Clone)]
pub(crate) struct PgFactory {
    config: Config,
    script: Script,
    /// `-f`: the script's file, for reports.
    file: Option<String>,
    pool_max: usize,
    param_seed: u64,
}

impl PgFactory {
    /// `params` are `$1`, `$2`, … of `--sql` in order; their values come
    /// from a SplitMix64 seeded with `param_seed`, drawn in send order.
    pub(crate) fn with_params(mut self, params: Vec<ParamSpec>, param_seed: u64) -> Self {
        let sql = self.script.statements[0].sql.clone();
        self.script = Script::single(&sql, params);
        self.param_seed = param_seed;
        self
    }

    /// `-f FILE`: each request runs `script` (its `\set` variables drawn
    /// from a SplitMix64 seeded with `param_seed`, in send order).
    pub(crate) fn with_script(mut self, script: Script, file: &str, param_seed: u64) -> Self {
        self.script = script;
        self.file = Some(file.to_string());
        self.param_seed = param_seed;
        self
    }

    pub(crate) fn new(conninfo: &str, sql: &str, pool_max: Option<usize>) -> Result<Self, String> {
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
            script: Script::single(sql, Vec::new()),
            file: None,
            pool_max: pool_max.unwrap_or(DEFAULT_POOL),
            param_seed: 0,
        })
    }
}

struct Conn {
    client: Client,
    /// The script's statements, prepared, in order.
    statements: Vec<Statement>,
}

async fn connect_one(config: &Config, script: &Script) -> Result<Conn, String> {
    let (client, connection) = config.connect(NoTls).await.map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut statements = Vec::with_capacity(script.statements.len());
    for st in &script.statements {
        let statement = client
            .prepare(&st.sql)
            .await
            .map_err(|e| crate::pg::PgError::from_client(&st.sql, e).to_string())?;
        let params: Vec<&ParamSpec> = st.vars.iter().map(|&v| &script.vars[v]).collect();
        check_types(&statement, &params, script.from_file)?;
        statements.push(statement);
    }
    Ok(Conn { client, statements })
}

/// The statement's `$n` are integers whose type holds each variable's
/// range. Errors name `$n` for `--sql`, the `:NAME` of a script's line.
fn check_types(
    statement: &Statement,
    params: &[&ParamSpec],
    from_file: bool,
) -> Result<(), String> {
    let what = |i: usize| match params.get(i) {
        Some(p) if from_file => format!(":{}", p.name),
        _ => format!("${}", i + 1),
    };
    let n_params = params.len();
    let types = statement.params();
    if types.len() != n_params {
        return Err(format!(
            "the statement has {} parameter(s) ($1…) and {n_params} --param option(s) were given; give one --param NAME=uniform:LO:HI per $n, in order",
            types.len()
        ));
    }
    if let Some((i, t)) = types
        .iter()
        .enumerate()
        .find(|(_, t)| ![Type::INT2, Type::INT4, Type::INT8].contains(t))
    {
        return Err(format!(
            "{} has type {t}; the values drawn are integers (smallint, integer, bigint); cast it, e.g. {}::bigint",
            what(i),
            what(i)
        ));
    }
    for ((i, t), p) in types.iter().enumerate().zip(params) {
        let (min, max) = if *t == Type::INT2 {
            (i16::MIN.into(), i16::MAX.into())
        } else if *t == Type::INT4 {
            (i32::MIN.into(), i32::MAX.into())
        } else {
            (i64::MIN, i64::MAX)
        };
        if p.lo < min || p.hi > max {
            let given = if from_file { "\\set" } else { "--param" };
            return Err(format!(
                "{given} {}: [{}, {}] does not fit {} of type {t}",
                p.name,
                p.lo,
                p.hi,
                what(i)
            ));
        }
    }
    Ok(())
}

impl TargetFactory for PgFactory {
    fn describe(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "kind": "postgres",
            "server": describe(&self.config),
            "sql": self.script.text(),
            "pool_max": self.pool_max,
            "params": self.script.vars,
            "param_seed": self.param_seed,
        });
        if let Some(file) = &self.file {
            v["script"] = serde_json::json!({
                "file": file,
                "statements": self.script.statements,
            });
        }
        v
    }

    fn summary(&self) -> String {
        let vars = &self.script.vars;
        let params: String = match &self.file {
            None => vars
                .iter()
                .enumerate()
                .map(|(i, p)| format!(", ${} = {} uniform on [{}, {}]", i + 1, p.name, p.lo, p.hi))
                .collect(),
            Some(_) => vars
                .iter()
                .map(|p| format!(", :{} uniform on [{}, {}]", p.name, p.lo, p.hi))
                .collect(),
        };
        let seed = if vars.is_empty() {
            String::new()
        } else {
            format!(" (seed {})", self.param_seed)
        };
        let what = match &self.file {
            None => format!("`{}`", crate::pg::error::short(&self.script.text())),
            Some(f) => format!(
                "script {f}, {} statement(s) a transaction: `{}`",
                self.script.statements.len(),
                crate::pg::error::short(&self.script.text())
            ),
        };
        format!(
            "PostgreSQL {}: {what}{params}{seed} (pool of up to {} connections, statements prepared once on each)",
            describe(&self.config),
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
            let pool = Pool::connect(size, || connect_one(&self.config, &self.script))
                .await
                .map_err(|reason| TargetError::Connect {
                    target: describe(&self.config),
                    reason,
                })?;
            Ok(Arc::new(PgTarget {
                config: self.config.clone(),
                script: Arc::new(self.script.clone()),
                pool,
                rng: Mutex::new(SplitMix64::new(self.param_seed)),
            }) as Arc<dyn Target>)
        })
    }
}

struct PgTarget {
    config: Config,
    script: Arc<Script>,
    pool: Pool<Conn>,
    /// Draws the parameters in call order (the open model calls in
    /// schedule order, so a seed replays the same values).
    rng: Mutex<SplitMix64>,
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
        let (config, script, lease) = (self.config.clone(), self.script.clone(), self.pool.take());
        let values: Vec<i64> = {
            let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
            self.script.vars.iter().map(|p| p.draw(&mut rng)).collect()
        };
        Box::pin(async move {
            let lease = lease.await.map_err(|e| RequestError::Other {
                kind: "postgres_pool",
                message: e.to_string(),
            })?;
            // A connection lost earlier is replaced here.
            let c =
                match lease.pooled() {
                    Some(c) => c,
                    None => connect_one(&config, &script).await.map_err(|message| {
                        RequestError::Other {
                            kind: "postgres_connection",
                            message,
                        }
                    })?,
                };
            let rows = async {
                for (statement, st) in c.statements.iter().zip(&script.statements) {
                    // Each value as the type the server chose for its $n.
                    let boxed: Vec<Box<dyn ToSql + Sync + Send>> = st
                        .vars
                        .iter()
                        .map(|&v| values[v])
                        .zip(statement.params())
                        .map(|(v, t)| -> Box<dyn ToSql + Sync + Send> {
                            if *t == Type::INT2 {
                                Box::new(v as i16)
                            } else if *t == Type::INT4 {
                                Box::new(v as i32)
                            } else {
                                Box::new(v)
                            }
                        })
                        .collect();
                    let stream = c
                        .client
                        .query_raw(
                            statement,
                            boxed.iter().map(|b| b.as_ref() as &(dyn ToSql + Sync)),
                        )
                        .await?;
                    let mut stream = std::pin::pin!(stream);
                    use futures_util::TryStreamExt;
                    while stream.try_next().await?.is_some() {}
                }
                Ok::<(), tokio_postgres::Error>(())
            }
            .await;
            // Only a connection whose request completed goes back (an
            // abandoned one is dropped with this future). A statement error
            // leaves it usable, unless a script's transaction may still be
            // open on it: that one is closed (the server rolls it back).
            let healthy = match &rows {
                Ok(()) => true,
                Err(e) => e.as_db_error().is_some() && script.statements.len() == 1,
            };
            if healthy && !c.client.is_closed() {
                lease.put_back(c);
            }
            rows.map_err(request_error)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a --param parser that accepts what it cannot draw, and a
    /// draw that leaves its range, misses an end, or ignores its seed:
    /// 20 000 draws on [1, 4] must hit each value 5 000 ± 300 times (about
    /// 5 standard deviations of a binomial(20 000, 1/4)), and the same seed
    /// must give the same values.
    #[test]
    fn params_parse_and_draw_uniformly_from_their_seed() {
        let p = ParamSpec::parse("aid=uniform:1:4").unwrap();
        assert_eq!((p.name.as_str(), p.lo, p.hi), ("aid", 1, 4));
        for bad in [
            "aid",
            "aid=uniform:5:1",
            "aid=normal:1:2",
            "=uniform:1:2",
            "a=uniform:1",
        ] {
            assert!(ParamSpec::parse(bad).is_err(), "{bad} accepted");
        }
        let mut rng = SplitMix64::new(7);
        let mut counts = [0u32; 4];
        let first: Vec<i64> = (0..20_000).map(|_| p.draw(&mut rng)).collect();
        for v in &first {
            counts[(*v - 1) as usize] += 1;
        }
        for c in counts {
            assert!(c.abs_diff(5_000) < 300, "{counts:?}");
        }
        let mut again = SplitMix64::new(7);
        assert!((0..100).all(|i| p.draw(&mut again) == first[i]));
        let wide = ParamSpec::parse("x=uniform:-9223372036854775808:9223372036854775807").unwrap();
        let _ = wide.draw(&mut rng);
    }
}
