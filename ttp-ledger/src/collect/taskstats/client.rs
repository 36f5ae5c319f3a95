//! Requests to the kernel's TASKSTATS family and the decoding of its
//! messages: the family's constants, a client asking for one task's or
//! one process's counters, and the message decoder the exit listener
//! shares.
use neli::err::RouterError;

use neli::consts::{nl::NlmF, socket::NlFamily};
use neli::genl::{AttrTypeBuilder, Genlmsghdr, GenlmsghdrBuilder, NlattrBuilder};
use neli::nl::NlPayload;
use neli::router::synchronous::NlRouter;
use neli::types::GenlBuffer;
use neli::utils::Groups;

use super::{
    error::TaskstatsError,
    record::{Origin, Scope, Taskstats},
};

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
