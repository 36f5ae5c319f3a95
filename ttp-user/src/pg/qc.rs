//! One query at one cardinality (Q@C) on PostgreSQL, run the way TTPv2
//! runs it: the statement prepared once, its plan captured before every QE
//! (Fig. 5: `plan ← getQueryPlan(query)`), a Q@C restarted when the plan
//! changes (Sec. 3.2.3), a cold QE preceded by a server restart and a dropped
//! page cache (Sec. 3.1), transient errors retried with exponential
//! back-off up to ten times and then the run paused (Sec. 3.2.3).
use std::{ops::ControlFlow, time::Duration};

use serde::{Deserialize, Serialize};

use super::{
    error::{PgError, QUERY_CANCELED},
    restart::Restart,
    session::{Pg, Prepared, Session},
};
use ttp_ledger::probe::ProbeError;
use ttp_sys::sys::signals::StopFlag;
use ttp_ttpv2::model::{Labels, QcInput, Setup, WarmUp};
use ttp_window::window::record::QeRecord;
use ttp_window::window::{
    context::{QeContext, Roles},
    target::{Target, measure_target},
};

use ttp_ttpv2::procedure::{self, Attempt, Interleaved};

/// A prepared statement executed by its session's backend: the backend
/// is the query process, the postmaster and its other children utilities
/// (Sec. 3.3). Ctrl-C cancels the statement.
struct Statement<'s> {
    session: &'s Session,
    prepared: &'s Prepared,
    stop: &'s StopFlag,
}

impl Target for Statement<'_> {
    /// Rows returned, or why the statement did not complete.
    type Ran = Result<u64, PgError>;

    fn roles(&self) -> Roles {
        Roles::Server {
            query: self.session.backend_pid,
            server: self.session.postmaster_pid,
        }
    }

    fn execute(self) -> Self::Ran {
        self.session.execute(self.prepared, Some(self.stop))
    }
}

/// Options shared by every Q@C of a run or experiment.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    pub cold_cache: bool,
    /// How to restart the server for a cold QE; found from the running
    /// server (pg_ctl) when not given.
    pub restart: Option<Restart>,
    /// First back-off after a transient error, doubled each retry.
    pub backoff: Duration,
    /// `statement_timeout` of the measuring session: a QE that runs longer
    /// is cancelled by the server and counted as timed out (QE13).
    pub statement_timeout: Option<Duration>,
    /// `run --cpu LIST`: the backend serving the measuring connection is
    /// pinned to these CPUs before each QE (sched_setaffinity on its pid;
    /// a backend of a new connection is pinned before its first QE).
    pub cpu: Option<ttp_sys::sys::affinity::CpuList>,
    /// `run --warmup N`: the statement executed N times before QE 1, each
    /// after the same steps as a QE (restart and cold cache, the plan) and
    /// measured, then kept only in the Q@C's `setup.warmup`.
    pub warmup: u32,
}

/// What ttp records about the server and the Q@C beside the TTPv2 data
/// (the `postgres` object of the JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PgFacts {
    /// host, port, user, dbname (no password).
    pub target: String,
    pub server_version: String,
    pub sql: String,
    /// The command that restarted the server before each cold QE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
    /// The backend (query process) of each QE, in order.
    #[serde(default)]
    pub backend_pids: Vec<u32>,
    /// Rows the statement returned (last QE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
}

/// How a Q@C ended.
#[derive(Debug)]
pub enum QcEnd {
    /// Every QE measured.
    Complete,
    /// Ctrl-C: the QEs measured before are kept.
    Interrupted,
    /// A transient error persisted past
    /// [`MAX_RETRIES`](ttp_ttpv2::recovery::MAX_RETRIES) back-offs, or the
    /// plan kept changing: the run pauses with what it measured.
    Paused(String),
}

/// A Q@C as measured.
#[derive(Debug)]
pub struct QcRun {
    pub qc: QcInput,
    pub facts: PgFacts,
    pub end: QcEnd,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum QcError {
    #[error(transparent)]
    Pg(#[from] PgError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error("dropping the page cache for a cold QE (needs root): {0}")]
    Cache(#[source] std::io::Error),
}

/// A QE's record and the rows the statement returned.
type Measured = (Box<QeRecord>, Option<u64>);

/// The QEs of the Q@C of one statement: a connection lost is a failure of
/// the moment (Sec. 3.2.3's "network disconnection"), retried on a new
/// connection.
struct Attempts<'r, 'a, 'c, 'x> {
    runner: &'r mut Runner<'a>,
    ctx: &'r mut QeContext<'x>,
    sql: &'c str,
}

impl procedure::Attempts for Attempts<'_, '_, '_, '_> {
    type Out = Measured;
    type Error = QcError;

    fn attempt(&mut self, i: u32, first_plan: Option<&str>) -> Result<Attempt<Measured>, QcError> {
        match self.runner.one_qe(self.ctx, i, self.sql, first_plan) {
            Err(QcError::Pg(e)) if e.is_transient() => {
                self.runner.disconnect();
                Ok(Attempt::Transient {
                    what: e.to_string(),
                    ran: None,
                })
            }
            other => other,
        }
    }
}

/// Runs Q@Cs over one connection string, reconnecting as needed.
pub struct Runner<'a> {
    pg: &'a Pg,
    opts: RunnerOptions,
    session: Option<Session>,
    prepared: Option<(String, Prepared)>,
    stop: StopFlag,
    /// With a cold cache: the Sec. 3.1 procedure's files.
    cold: Option<std::rc::Rc<ttp_window::window::cold_cache::ColdCache>>,
}

impl<'a> Runner<'a> {
    /// Connects once, so a wrong connection string, a server that is down
    /// or one on another machine fail before anything is measured; for a
    /// cold cache, finds how to restart the server.
    pub(crate) fn start(
        pg: &'a Pg,
        mut opts: RunnerOptions,
        stop: StopFlag,
    ) -> Result<Self, PgError> {
        let session = pg.connect()?;
        if opts.cold_cache && opts.restart.is_none() {
            opts.restart = Some(Restart::discover(session.postmaster_pid)?);
        }
        let cold = opts
            .cold_cache
            .then(|| std::rc::Rc::new(ttp_window::window::cold_cache::ColdCache::new()));
        let r = Runner {
            pg,
            opts,
            session: Some(session),
            prepared: None,
            cold,
            stop,
        };
        r.configure()?;
        Ok(r)
    }

    /// Prepares `sql` without measuring: a syntax error or a missing table
    /// is reported before the first QE.
    pub(crate) fn check_sql(&mut self, sql: &str) -> Result<String, PgError> {
        self.prepared = None;
        let (s, st) = self.ensure(sql)?;
        s.explain(&st)
    }

    /// Session settings for measuring: parallel workers off, so the backend
    /// is the one query process (Sec. 7.2 times a single process); the
    /// statement timeout (QE13).
    fn configure(&self) -> Result<(), PgError> {
        let Some(s) = &self.session else {
            return Ok(());
        };
        let mut sql = "SET max_parallel_workers_per_gather = 0".to_string();
        if let Some(t) = self.opts.statement_timeout {
            sql += &format!("; SET statement_timeout = {}", t.as_millis().max(1));
        }
        s.batch(&sql)
    }

    /// The session with `sql` prepared, reconnecting when needed.
    fn ensure(&mut self, sql: &str) -> Result<(&Session, Prepared), PgError> {
        // Reconnecting forgets the prepared statement: look at it after.
        self.session_mut()?;
        let have = self.prepared.clone();
        let s = self.session_mut()?;
        let st = match have {
            Some((q, st)) if q == sql => st,
            _ => {
                let st = s.prepare(sql)?;
                self.prepared = Some((sql.to_string(), st.clone()));
                st
            }
        };
        let s = self.session_mut()?;
        Ok((s, st))
    }

    /// The session (reconnected if it was lost), for statements that are
    /// not measured (data generation).
    pub(crate) fn session_mut(&mut self) -> Result<&mut Session, PgError> {
        if self.session.as_ref().is_none_or(Session::is_closed) {
            self.prepared = None;
            self.session = None;
            self.session = Some(self.pg.connect()?);
            self.configure()?;
        }
        self.session.as_mut().ok_or_else(|| PgError::Lost {
            statement: "connect".into(),
            reason: "no session".into(),
        })
    }

    /// Drops the session (and its prepared statement).
    fn disconnect(&mut self) {
        self.prepared = None;
        self.session = None;
    }

    /// Measures the Q@C `sql` at `labels` with `n` QEs. `on_qe` sees the
    /// Q@C after every QE (to write it, so an interrupted run keeps it);
    /// `notify` gets messages for the user (retries, plan restarts).
    pub(crate) fn run_qc(
        &mut self,
        ctx: &mut QeContext<'_>,
        sql: &str,
        n: u32,
        labels: Labels,
        on_qe: &mut dyn FnMut(&QcInput, &PgFacts),
        notify: &dyn Fn(String),
    ) -> Result<QcRun, QcError> {
        let mut facts = PgFacts {
            target: self.pg.target().to_string(),
            sql: sql.to_string(),
            restart: self
                .opts
                .restart
                .as_ref()
                .filter(|_| self.opts.cold_cache)
                .map(Restart::describe),
            ..PgFacts::default()
        };
        let mut qc = QcInput {
            labels,
            source: None,
            command: vec![sql.to_string()],
            setup: Setup {
                qes_requested: Some(n),
                user_hz: (1_000_000_000 / ctx.tick_ns.max(1)) as u32,
                // What the overall /proc/stat counters sum over, not the
                // affinity- or cgroup-limited available_parallelism().
                cpus: ttp_ledger::collect::machine::online_cpus(std::path::Path::new("/"))
                    .unwrap_or(1),
                timeout_ms: self.opts.statement_timeout.map(|t| t.as_millis() as u64),
                query_process: None,
                utilities: Vec::new(),
                parameter: None,
                recovery: Default::default(),
                warmup: Vec::new(),
            },
            qes: Vec::new(),
        };
        // Prepared once per Q@C (Sec. 3.2.2).
        self.prepared = None;
        let (backoff, stop) = (self.opts.backoff, self.stop.clone());
        self.warm_up(ctx, sql, &mut qc, notify)?;
        let end = procedure::interleave(
            &mut qc,
            1,
            &stop,
            |qc, _| (qc.qes.len() as u32) < n,
            |qc, _| {
                let mut attempts = Attempts {
                    runner: &mut *self,
                    ctx: &mut *ctx,
                    sql,
                };
                Ok::<_, QcError>(
                    match procedure::next_qe(&mut attempts, qc, backoff, &stop, notify)? {
                        procedure::Step::Measured((rec, rows)) => {
                            facts.rows = rows.or(facts.rows);
                            if let Some(s) = &self.session {
                                facts.server_version = s.server_version.clone();
                                facts.backend_pids.push(s.backend_pid);
                            }
                            qc.qes.push(*rec);
                            on_qe(qc, &facts);
                            ControlFlow::Continue(())
                        }
                        procedure::Step::Restarted => {
                            facts.backend_pids.clear();
                            self.prepared = None;
                            ControlFlow::Continue(())
                        }
                        procedure::Step::Paused { why, .. } => {
                            ControlFlow::Break(QcEnd::Paused(why))
                        }
                        procedure::Step::Interrupted => ControlFlow::Break(QcEnd::Interrupted),
                    },
                )
            },
        )?;
        let end = match end {
            Interleaved::Done => QcEnd::Complete,
            Interleaved::Stopped => QcEnd::Interrupted,
            Interleaved::Ended(end) => end,
        };
        Ok(QcRun { qc, facts, end })
    }

    /// One QE: (cold: restart, reconnect, re-prepare), the plan, (cold: drop
    /// the page cache), then the Fig. 5 measurement of the execution.
    /// The warm-up executions (`RunnerOptions::warmup`), as
    /// commands::rounds' warm-up does for a command: measured, said, kept
    /// in `setup.warmup` only; no check or statistic reads them.
    fn warm_up(
        &mut self,
        ctx: &mut QeContext<'_>,
        sql: &str,
        qc: &mut QcInput,
        notify: &dyn Fn(String),
    ) -> Result<(), QcError> {
        for w in 1..=self.opts.warmup {
            if self.stop.raised() {
                break;
            }
            let mut attempts = Attempts {
                runner: &mut *self,
                ctx: &mut *ctx,
                sql,
            };
            match procedure::Attempts::attempt(&mut attempts, 0, None)? {
                Attempt::Ran((rec, _)) => {
                    let m = WarmUp::of(&rec);
                    notify(format!(
                        "warm-up {w}: Time_meas {:.1} ms, U {} S {} ticks (measured, not kept)",
                        m.time_meas_ms,
                        m.u_ticks.map_or("?".into(), |v| v.to_string()),
                        m.s_ticks.map_or("?".into(), |v| v.to_string()),
                    ));
                    qc.setup.warmup.push(m);
                }
                Attempt::Transient { what, .. } => notify(format!(
                    "warm-up {w}: {what}; not retried (a warm-up is not kept)"
                )),
                Attempt::PlanChanged(_) | Attempt::Interrupted => {}
            }
        }
        Ok(())
    }

    fn one_qe(
        &mut self,
        ctx: &mut QeContext<'_>,
        i: u32,
        sql: &str,
        plan0: Option<&str>,
    ) -> Result<Attempt<Measured>, QcError> {
        let cold = self.opts.cold_cache;
        let stop = self.stop.clone();
        let pin = self.opts.cpu.clone();
        let cold_cache = self.cold.clone();
        if cold && let Some(restart) = self.opts.restart.clone() {
            self.disconnect();
            restart.run()?;
        }
        let (s, st) = self.ensure(sql)?;
        let plan = s.explain(&st)?;
        if plan0.is_some_and(|p| p != plan) {
            return Ok(Attempt::PlanChanged(plan));
        }
        // After the restart and the plan: only the query's own pages are
        // left to read (Sec. 3.1: "All the pages needed to evaluate the
        // query must be read from disk").
        let cold_step = match &cold_cache {
            Some(c) if cold => Some(c.before_qe(ctx.ledger).map_err(QcError::Cache)?),
            _ => None,
        };
        if let Some(cpu) = &pin {
            cpu.pin(s.backend_pid).map_err(|e| {
                QcError::Pg(PgError::Lost {
                    statement: format!("pinning backend {} to CPUs {cpu}", s.backend_pid),
                    reason: e.to_string(),
                })
            })?;
        }
        let statement = Statement {
            session: s,
            prepared: &st,
            stop: &stop,
        };
        let (out, res) = measure_target(ctx, i, Some(plan), statement)?;
        let mut rec = out.record;
        rec.cold_cache = cold_step;
        let mut rows = None;
        match res {
            Ok(n) => {
                rec.exit_code = Some(0);
                rec.timed_out = Some(false);
                rows = Some(n);
            }
            // Ctrl-C: the QE in progress is not kept.
            Err(PgError::Cancelled) => return Ok(Attempt::Interrupted),
            Err(e) if e.sqlstate() == Some(QUERY_CANCELED) => {
                rec.timed_out = Some(true);
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Attempt::Ran((Box::new(rec), rows)))
    }
}
