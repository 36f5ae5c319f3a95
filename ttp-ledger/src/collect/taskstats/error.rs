//! The errors of the taskstats layer.
use std::io;

use neli::err::RouterError;

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
    pub(super) fn from_errno(errno: i32, id: u32) -> TaskstatsError {
        match errno {
            libc::ESRCH => TaskstatsError::NoSuchTask { id },
            libc::EPERM | libc::EACCES => TaskstatsError::PermissionDenied,
            e => TaskstatsError::Kernel(io::Error::from_raw_os_error(e)),
        }
    }

    pub(super) fn from_router<T: std::fmt::Debug, P: std::fmt::Debug>(
        e: RouterError<T, P>,
        id: u32,
    ) -> TaskstatsError {
        match e {
            RouterError::Nlmsgerr(e) => Self::from_errno(-*e.error(), id),
            other => TaskstatsError::Netlink(other.to_string()),
        }
    }
}
