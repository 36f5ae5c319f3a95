//! What a QE is measured with and what it returns: the context every QE
//! of a run shares ([`QeContext`]), the outcome of one ([`QeOutcome`],
//! [`QeError`]), who plays which role in it ([`Roles`], Sec. 4), and the
//! seams through which what sits above the window joins a QE
//! ([`FollowProcess`] for `--trace`, [`BesideQe`] for `run --blame`). The
//! Fig. 5 sequence that fills them is window/qe.rs, reached through
//! window/target.rs.
use std::{collections::BTreeSet, sync::mpsc::Receiver, time::Duration};

use crate::window::{
    blame_record::BlameSummary,
    record::{ProcessClass, QeRecord},
};
use ttp_ledger::{
    accounts::Window,
    collect::taskstats::TaskstatsRecord,
    probe::{Ledger, ProbeError},
};
use ttp_sys::sys::spawn::{RunAs, SpawnError};

/// Follows a QE's command from the moment it is held, before it executes
/// (`--trace`: `report::trace::Recorder` adds it to the traced processes).
pub trait FollowProcess {
    fn follow(
        &mut self,
        ledger: &mut Ledger,
        tgid: u32,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// What stays the same across the QEs of a run.
pub struct QeContext<'a> {
    pub ledger: &'a mut Ledger,
    /// With `--trace`: each QE's command is added to the traced processes
    /// while it is held, so its whole life is in the trace.
    pub recorder: Option<&'a mut dyn FollowProcess>,
    pub taskstats_exits: Option<&'a Receiver<TaskstatsRecord>>,
    pub own_tgid: u32,
    /// Names of utility processes (`--utility`).
    pub utilities: &'a [String],
    /// With `--query-process NAME` the command's own tree is a utility and
    /// the query process is chosen by name afterwards (Sec. 7.2).
    pub query_by_name: bool,
    pub tick_ns: u64,
    pub timeout: Option<Duration>,
    pub run_as: RunAs,
    /// With `run --blame`: each QE's contention blame, measured beside it.
    pub beside: Option<&'a dyn BesideQe>,
}

/// A measured QE: the protocol's record, the ledger's window, and the
/// taskstats exit records received during it (EMP's PT is summed from them).
pub struct QeOutcome {
    /// CLOCK_MONOTONIC ns of the two time reads around the execution
    /// (Time_meas = t1 − t0).
    pub t0_ns: u64,
    pub t1_ns: u64,
    pub record: QeRecord,
    pub window: Window,
    pub taskstats_exits: Vec<TaskstatsRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum QeError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Trace(Box<dyn std::error::Error + Send + Sync>),
    #[error("--blame cannot measure the command: {0}")]
    Blame(String),
}

/// A measurement that runs beside each QE's command from the moment it is
/// held until it has exited (`run --blame`: the contention blame of
/// `ttp_blame::qe`). The protocol that provides it sits above this
/// window, so the window sees it only through this seam.
pub trait BesideQe {
    /// Starts on the held command `pid` (not yet released); an error means
    /// the QE cannot be measured as asked.
    fn start(&self, pid: u32) -> Result<Box<dyn RunningBeside>, String>;
}

/// A measurement started by [`BesideQe::start`]; dropped without
/// [`RunningBeside::finish`] (the QE failed) it stops.
pub trait RunningBeside {
    /// After the command has exited: its blame, or why there is none (kept
    /// in the QE's record as text).
    fn finish(self: Box<Self>) -> Result<BlameSummary, String>;
}

/// Who plays which role in a QE (Sec. 4), known before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    /// A measured command: its process tree is the query (a utility with
    /// `--query-process NAME`, which picks the query process afterwards).
    CommandTree { root: u32 },
    /// A statement executed by a server (a DBMS): `query` is the process
    /// executing it (PostgreSQL's backend, `pg_backend_pid()`), `server` and
    /// its other descendants are utilities (Sec. 3.3).
    Server { query: u32, server: u32 },
}

impl Roles {
    pub(crate) fn tree_root(&self) -> u32 {
        match *self {
            Roles::CommandTree { root } => root,
            Roles::Server { server, .. } => server,
        }
    }

    /// The class of process `pid` (`tree`: the tree root's descendants).
    pub fn classify(
        &self,
        ctx: &QeContext<'_>,
        pid: u32,
        comm: &str,
        tree: &BTreeSet<u32>,
    ) -> ProcessClass {
        classify(
            *self,
            ctx.own_tgid,
            ctx.utilities,
            ctx.query_by_name,
            (pid, comm),
            tree,
        )
    }
}

pub fn classify(
    roles: Roles,
    own_tgid: u32,
    utilities: &[String],
    query_by_name: bool,
    (pid, comm): (u32, &str),
    tree: &BTreeSet<u32>,
) -> ProcessClass {
    if pid == own_tgid {
        return ProcessClass::Executor;
    }
    match roles {
        Roles::CommandTree { .. } if tree.contains(&pid) => {
            if query_by_name {
                ProcessClass::Utility
            } else {
                ProcessClass::Query
            }
        }
        Roles::Server { query, .. } if pid == query => ProcessClass::Query,
        Roles::Server { .. } if tree.contains(&pid) => ProcessClass::Utility,
        _ if utilities.iter().any(|u| u == comm) => ProcessClass::Utility,
        _ => ProcessClass::Daemon,
    }
}
