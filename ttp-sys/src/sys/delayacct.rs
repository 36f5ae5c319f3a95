//! Delay accounting (kernel.task_delayacct) switched on for a measurement
//! and restored after, shared by concurrent ttp instances, and restored by
//! the next ttp command when an instance is killed before it could
//! (sys/held.rs, sys/run_state.rs).
//!
//! Switching it off while another measurement runs is not harmless: a task
//! that began a block-I/O wait while it was off and ends it while it is on
//! is charged `now − 0`, an uptime-sized BlockIO delay (kernel/delayacct.c).
//! So instances hold a shared lock on /run/ttp/delayacct.lock; the first one
//! records the previous value in /run/ttp/delayacct.json and then switches
//! accounting on, the last one out restores it.
use super::{
    held::Held,
    run_state::{self, Tracked},
};

/// kernel.task_delayacct as a tracked setting of this machine.
pub fn tracked() -> Tracked {
    run_state::task_delayacct()
}

/// Delay accounting held on; restored when the last holder drops it.
pub struct DelayAcct(Held);

impl DelayAcct {
    /// Switches delay accounting on; None if it cannot (no such sysctl, not
    /// root, the state cannot be recorded): the measurement goes on without
    /// the delay-accounting references, and says so. A change a dead
    /// instance left is restored first and said on stderr.
    pub fn enable() -> Option<Self> {
        let d = Self::enable_at(tracked())?;
        if let Some(l) = d.0.leftover() {
            log::warn!("{l}");
        }
        Some(d)
    }

    /// As [`enable`](Self::enable), for the setting and run directory given.
    pub(crate) fn enable_at(tracked: Tracked) -> Option<Self> {
        Held::hold(
            tracked,
            &["1"],
            "its delay-accounting references are missing",
        )
        .map(Self)
    }

    /// Delay accounting was off before this measurement.
    pub fn switched_on(&self) -> bool {
        self.0.changed()
    }

    /// What a dead instance had left and this one restored on the way in.
    #[cfg(test)]
    pub(crate) fn leftover(&self) -> Option<&super::run_state::Leftover> {
        self.0.leftover()
    }
}

#[cfg(test)]
mod tests;
