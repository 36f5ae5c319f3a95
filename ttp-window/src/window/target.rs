//! What a QE executes: the seam between TTPv2's one Fig. 5 sequence
//! ([`super::qe`]: images, time reads, exit records, App. B sets, every
//! process classified) and the things ttp measures with it. A target says
//! who plays which role in the QE (Sec. 4) and runs once between the two
//! time reads; the sequence around it is the same for every target. A new
//! target is one `impl Target`, not a copy of a command's measurement.
//!
//! Targets today: a command held before `execve` ([`HeldCommand`], `run`,
//! `run --protocol emp`, `calibrate`) and a statement a PostgreSQL backend
//! executes (`pg::qc`, `run --postgres`). What runs beside a command for
//! the whole QE (`run --blame`) plugs in through [`BesideQe`].
use std::{collections::BTreeSet, time::Duration};

use crate::window::{
    blame_record::BlameSummary,
    qe::{QeContext, QeOutcome, measure_with},
    record::ProcessClass,
};
use ttp_ledger::probe::ProbeError;
use ttp_sys::sys::spawn::{HeldChild, RunningChild, SpawnError};

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
    pub(super) fn tree_root(&self) -> u32 {
        match *self {
            Roles::CommandTree { root } => root,
            Roles::Server { server, .. } => server,
        }
    }

    /// The class of process `pid` (`tree`: the tree root's descendants).
    pub(super) fn classify(
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

pub(super) fn classify(
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

/// One execution of something measured as a QE.
pub trait Target {
    /// What one execution returns beside the measurement (how it ended).
    type Ran;
    /// Who plays which role in the QE, known before it starts.
    fn roles(&self) -> Roles;
    /// The execution between the two time reads (once: it consumes the
    /// target).
    fn execute(self) -> Self::Ran;
}

/// Measures one execution of `target` in Fig. 5 order (steps 3–15) and
/// returns what it returned; the caller records how it ended.
pub fn measure_target<T: Target>(
    ctx: &mut QeContext<'_>,
    qe: u32,
    plan: Option<String>,
    target: T,
) -> Result<(QeOutcome, T::Ran), ProbeError> {
    let roles = target.roles();
    measure_with(ctx, qe, plan, roles, move || target.execute())
}

/// A command held before `execve` (sys/spawn.rs): its process tree is the
/// query (Sec. 7.2). `execute` releases it and waits for its exit without
/// reaping it, so the query process stays in /proc as a zombie and the
/// after-image reads its final counters (Fig. 5); it is reaped after the
/// per-process after-image, by the caller.
pub(crate) struct HeldCommand {
    pub held: HeldChild,
    pub timeout: Option<Duration>,
}

impl Target for HeldCommand {
    /// The running (exited, unreaped) child and whether it hit the timeout.
    type Ran = Result<(RunningChild, bool), SpawnError>;

    fn roles(&self) -> Roles {
        Roles::CommandTree {
            root: self.held.pid(),
        }
    }

    fn execute(self) -> Self::Ran {
        let child = self.held.release()?;
        let timed_out = super::qe::wait_exited(child.pid(), self.timeout);
        Ok((child, timed_out))
    }
}
