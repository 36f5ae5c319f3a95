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
mod client;
mod error;
mod listener;
mod record;

pub use client::{TaskstatsClient, TaskstatsRecord, delayacct_on};
pub use error::TaskstatsError;
pub use listener::{ExitListener, ListenerStats};
pub use record::{Origin, Scope, Taskstats};
