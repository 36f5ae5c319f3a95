//! What Linux itself reports about time and I/O: `/proc/<pid>` and
//! `/proc/<pid>/task/<tid>` (stat, status, io, schedstat), `/proc/stat`,
//! the clock rates, and taskstats over generic netlink.
//!
//! These are the kernel's own counters that the eBPF ledger is checked
//! against, and the per-process and overall measures of TTPv2 Sec. 3.5–3.6
//! (collected before and after each query execution, Sec. 7.1 Fig. 5).
//!
//! Conventions, kept by every reader here:
//! - every reader takes the root of the tree it reads (`/proc` in production,
//!   a fixture copy in tests);
//! - every counter is `Option<u64>`: a counter the kernel does not provide
//!   (compiled out, unreadable, not filled in for this kind of record) is
//!   `None`, never zero;
//! - deltas between two images refuse to go backwards: a counter that
//!   decreased yields `None` and is named in the delta, it never wraps.
pub mod clock;
pub mod identity;
pub mod machine;
pub mod proc_pid;
pub mod proc_stat;
pub mod taskstats;

use std::path::PathBuf;

/// Errors of the /proc readers.
#[derive(Debug, thiserror::Error)]
pub enum ProcReadError {
    /// The process or thread exited (or never existed) while it was read.
    #[error("process {pid} does not exist (it may have exited); check the pid with `ps -p {pid}`")]
    Gone { pid: i32 },
    /// A file that every kernel provides could not be read or parsed.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: procfs::ProcError,
    },
    /// Two images of different tasks (pid reused, or different pids) were
    /// subtracted.
    #[error(
        "images belong to different tasks (pid {before_pid} started at tick {before_start_ticks}, \
         pid {after_pid} started at tick {after_start_ticks}); the pid was reused"
    )]
    DifferentTask {
        before_pid: i32,
        before_start_ticks: u64,
        after_pid: i32,
        after_start_ticks: u64,
    },
}

/// `after - before` for a cumulative counter, or `None` when either side is
/// absent or the counter went backwards. Cumulative kernel counters never
/// decrease for one task, so a decrease means the two readings are not
/// comparable (a reused pid, a wrapped 32-bit counter, or /proc/stat iowait,
/// which the kernel documents as able to decrease); subtracting anyway would
/// wrap to a huge number.
pub(crate) fn forward(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    after?.checked_sub(before?)
}

/// Collects the names of counters that went backwards while a delta is
/// computed, so callers can flag them instead of silently seeing `None`.
#[derive(Debug, Default)]
pub(crate) struct Regressions(pub Vec<&'static str>);

impl Regressions {
    /// [`forward`], remembering `name` when both sides are present but the
    /// counter decreased.
    pub(crate) fn sub(
        &mut self,
        name: &'static str,
        before: Option<u64>,
        after: Option<u64>,
    ) -> Option<u64> {
        if let (Some(b), Some(a)) = (before, after)
            && a < b
        {
            self.0.push(name);
        }
        forward(before, after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_refuses_to_wrap() {
        // Catches a plain `a - b` (panics in debug, wraps to ~1.8e19 in release).
        assert_eq!(forward(Some(10), Some(3)), None);
        assert_eq!(forward(Some(3), Some(10)), Some(7));
        // Catches treating an absent counter as zero.
        assert_eq!(forward(None, Some(10)), None);
        assert_eq!(forward(Some(3), None), None);
    }

    #[test]
    fn regressions_are_named() {
        // Catches a decrease that is reported as `None` without saying which counter.
        let mut r = Regressions::default();
        assert_eq!(r.sub("x", Some(5), Some(4)), None);
        assert_eq!(r.sub("y", None, Some(4)), None);
        assert_eq!(r.sub("z", Some(4), Some(4)), Some(0));
        assert_eq!(r.0, vec!["x"]);
    }
}
