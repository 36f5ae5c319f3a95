//! Taskstats over generic netlink (family "TASKSTATS",
//! Documentation/accounting/taskstats.rst): per-task statistics in µs and
//! ns, on demand for a live pid or tgid, and pushed by the kernel for every
//! exiting task.
//!
//! TTPv2 Sec. 7.1 and App. B rely on the exit notifications (its ProcListen
//! thread) to keep the final counters of processes that stop during a query,
//! which /proc no longer shows; EMP Sec. 3.1 uses the µs CPU times. Both
//! need CAP_NET_ADMIN (the kernel marks TASKSTATS_CMD_GET GENL_ADMIN_PERM).
//!
//! Netlink crate: `neli` 0.7. It resolves generic-netlink families, builds
//! and parses nested attributes, and its router matches replies to requests
//! by sequence number and turns NLMSG_ERROR into errors; its plain socket
//! handle gives the exit listener direct control of the receive buffer and
//! sees ENOBUFS, which the listener must count. The rust-netlink crates
//! (netlink-sys + netlink-packet-generic) would need a hand-written
//! `GenlFamily` message type for taskstats, and procfs-style parsing of the
//! struct itself is needed either way (see [`record`]).
mod listener;
mod record;

use std::io;

use neli::consts::{nl::NlmF, socket::NlFamily};
use neli::err::RouterError;
use neli::genl::{AttrTypeBuilder, Genlmsghdr, GenlmsghdrBuilder, NlattrBuilder};
use neli::nl::NlPayload;
use neli::router::synchronous::NlRouter;
use neli::types::GenlBuffer;
use neli::utils::Groups;

pub use listener::{ExitListener, ListenerStats};
pub use record::{Origin, Scope, Taskstats};

/// Constants of include/uapi/linux/taskstats.h.
pub(crate) mod uapi {
    pub(crate) const FAMILY_NAME: &str = "TASKSTATS";
    pub(crate) const GENL_VERSION: u8 = 1;
    pub(crate) const CMD_GET: u8 = 1;
    pub(crate) const CMD_NEW: u8 = 2;
    pub(crate) const TYPE_PID: u16 = 1;
    pub(crate) const TYPE_TGID: u16 = 2;
    pub(crate) const TYPE_STATS: u16 = 3;
    pub(crate) const TYPE_AGGR_PID: u16 = 4;
    pub(crate) const TYPE_AGGR_TGID: u16 = 5;
    pub(crate) const CMD_ATTR_PID: u16 = 1;
    pub(crate) const CMD_ATTR_TGID: u16 = 2;
    pub(crate) const CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
    pub(crate) const CMD_ATTR_DEREGISTER_CPUMASK: u16 = 4;
}

/// The generic netlink message type used both ways: command `u8`,
/// attribute type `u16`.
pub(crate) type Genl = Genlmsghdr<u8, u16>;

/// Errors of the taskstats layer.
#[derive(Debug, thiserror::Error)]
pub enum TaskstatsError {
    #[error("cannot talk to the kernel over generic netlink: {0}")]
    Netlink(String),
    #[error("the kernel has no TASKSTATS netlink family: it was built without CONFIG_TASKSTATS")]
    NoFamily,
    #[error("taskstats needs CAP_NET_ADMIN: run with sudo")]
    PermissionDenied,
    #[error("no task with id {id} (it may have exited)")]
    NoSuchTask { id: u32 },
    #[error("the kernel refused the taskstats request: {0}")]
    Kernel(#[source] io::Error),
    #[error(
        "taskstats record of {len} bytes (version {version:?}) is older or shorter than the \
         {need}-byte version-5 layout this build reads"
    )]
    TooShort {
        len: usize,
        version: Option<u16>,
        need: usize,
    },
    #[error("malformed taskstats message: {0}")]
    Malformed(String),
    #[error("the taskstats listener thread could not be started: {0}")]
    Thread(#[source] io::Error),
    #[error("taskstats records of different tasks cannot be subtracted ({before} vs {after})")]
    DifferentTask { before: String, after: String },
}

impl TaskstatsError {
    fn from_errno(errno: i32, id: u32) -> TaskstatsError {
        match errno {
            libc::ESRCH => TaskstatsError::NoSuchTask { id },
            libc::EPERM | libc::EACCES => TaskstatsError::PermissionDenied,
            e => TaskstatsError::Kernel(io::Error::from_raw_os_error(e)),
        }
    }

    fn from_router<T: std::fmt::Debug, P: std::fmt::Debug>(
        e: RouterError<T, P>,
        id: u32,
    ) -> TaskstatsError {
        match e {
            RouterError::Nlmsgerr(e) => Self::from_errno(-*e.error(), id),
            other => TaskstatsError::Netlink(other.to_string()),
        }
    }
}

/// One record of a taskstats message: whom it describes and its counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskstatsRecord {
    pub scope: Scope,
    /// The pid (thread id) for [`Scope::Task`], the tgid for
    /// [`Scope::ThreadGroup`], as the kernel names it in the message.
    pub id: u32,
    pub stats: Taskstats,
}

/// Decodes the records of a `TASKSTATS_CMD_NEW` message: one
/// `TASKSTATS_TYPE_AGGR_PID` and/or one `TASKSTATS_TYPE_AGGR_TGID`, each
/// holding an id and a `TASKSTATS_TYPE_STATS` struct. Padding attributes
/// (`TASKSTATS_TYPE_NULL`) are skipped.
pub(crate) fn decode_message(
    genl: &Genl,
    origin: Origin,
) -> Result<Vec<TaskstatsRecord>, TaskstatsError> {
    let malformed = |what: &str| TaskstatsError::Malformed(what.to_string());
    let mut records = Vec::new();
    for attr in genl.attrs().iter() {
        let (scope, id_type) = match *attr.nla_type().nla_type() {
            uapi::TYPE_AGGR_PID => (Scope::Task, uapi::TYPE_PID),
            uapi::TYPE_AGGR_TGID => (Scope::ThreadGroup, uapi::TYPE_TGID),
            _ => continue,
        };
        let nested = attr
            .get_attr_handle::<u16>()
            .map_err(|e| malformed(&e.to_string()))?;
        let id = nested
            .get_attr_payload_as::<u32>(id_type)
            .map_err(|_| malformed("aggregate without its id"))?;
        let stats = nested
            .get_attribute(uapi::TYPE_STATS)
            .ok_or_else(|| malformed("aggregate without a stats struct"))?;
        let stats = Taskstats::decode(stats.nla_payload().as_ref(), scope, origin)?;
        records.push(TaskstatsRecord { scope, id, stats });
    }
    Ok(records)
}

/// Builds a `TASKSTATS_CMD_GET` message with one attribute.
pub(crate) fn get_command<P>(attr: u16, payload: P) -> Result<Genl, TaskstatsError>
where
    P: neli::Size + neli::ToBytes,
{
    let build_err = |e: &dyn std::fmt::Display| TaskstatsError::Netlink(e.to_string());
    let attr = NlattrBuilder::default()
        .nla_type(
            AttrTypeBuilder::default()
                .nla_type(attr)
                .build()
                .map_err(|e| build_err(&e))?,
        )
        .nla_payload(payload)
        .build()
        .map_err(|e| build_err(&e))?;
    GenlmsghdrBuilder::default()
        .cmd(uapi::CMD_GET)
        .version(uapi::GENL_VERSION)
        .attrs(std::iter::once(attr).collect::<GenlBuffer<_, _>>())
        .build()
        .map_err(|e| build_err(&e))
}

/// Whether the kernel currently measures block-I/O and swap-in delays
/// (`kernel.task_delayacct`, Linux 5.14+). Kernels without the sysctl had
/// delay accounting on unless booted with `nodelayacct`.
pub fn delayacct_on() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/task_delayacct").map_or(true, |v| v.trim() != "0")
}

/// Resolves the TASKSTATS family id on an open router.
fn resolve_family(router: &NlRouter) -> Result<u16, TaskstatsError> {
    router
        .resolve_genl_family(uapi::FAMILY_NAME)
        .map_err(|e| match e {
            RouterError::Nlmsgerr(ref m) if -*m.error() == libc::ENOENT => TaskstatsError::NoFamily,
            RouterError::Msg(_) => TaskstatsError::NoFamily,
            other => TaskstatsError::Netlink(other.to_string()),
        })
}

/// Resolves the TASKSTATS family id (on a short-lived socket).
pub(crate) fn family_id() -> Result<u16, TaskstatsError> {
    let (router, _) = NlRouter::connect(NlFamily::Generic, None, Groups::empty())
        .map_err(|e| TaskstatsError::Netlink(e.to_string()))?;
    resolve_family(&router)
}

/// On-demand queries of live tasks.
pub struct TaskstatsClient {
    router: NlRouter,
    family: u16,
}

impl TaskstatsClient {
    /// Opens a generic netlink socket and resolves the TASKSTATS family.
    pub fn connect() -> Result<TaskstatsClient, TaskstatsError> {
        let (router, _unsolicited) = NlRouter::connect(NlFamily::Generic, None, Groups::empty())
            .map_err(|e| TaskstatsError::Netlink(e.to_string()))?;
        let family = resolve_family(&router)?;
        Ok(TaskstatsClient { router, family })
    }

    /// The numeric id of the TASKSTATS family on this kernel.
    pub fn family(&self) -> u16 {
        self.family
    }

    /// Statistics of one task (thread) `pid` (TASKSTATS_CMD_ATTR_PID).
    pub fn pid(&self, pid: u32) -> Result<Taskstats, TaskstatsError> {
        self.query(uapi::CMD_ATTR_PID, pid, Scope::Task)
    }

    /// Statistics of thread group `tgid` (TASKSTATS_CMD_ATTR_TGID): the
    /// kernel sums its live threads and adds what its exited threads left in
    /// the group's record (delay accounting only; see [`Taskstats`]).
    pub fn tgid(&self, tgid: u32) -> Result<Taskstats, TaskstatsError> {
        self.query(uapi::CMD_ATTR_TGID, tgid, Scope::ThreadGroup)
    }

    fn query(&self, attr: u16, id: u32, scope: Scope) -> Result<Taskstats, TaskstatsError> {
        let request = get_command(attr, id)?;
        let replies = self
            .router
            .send::<u16, Genl, u16, Genl>(self.family, NlmF::empty(), NlPayload::Payload(request))
            .map_err(|e| TaskstatsError::from_router(e, id))?;
        for reply in replies {
            let reply = reply.map_err(|e| TaskstatsError::from_router(e, id))?;
            let Some(genl) = reply.get_payload() else {
                continue;
            };
            let origin = Origin {
                exit: false,
                delayacct_on: delayacct_on(),
            };
            if let Some(r) = decode_message(genl, origin)?
                .into_iter()
                .find(|r| r.scope == scope && r.id == id)
            {
                return Ok(r.stats);
            }
        }
        Err(TaskstatsError::Malformed(format!(
            "no record for {scope:?} {id} in the reply"
        )))
    }
}
