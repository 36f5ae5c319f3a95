//! Delay accounting (kernel.task_delayacct) switched on for a measurement
//! and restored after, shared by concurrent ttp instances, and restored by
//! the next ttp command when an instance is killed before it could
//! (sys/run_state.rs).
//!
//! Switching it off while another measurement runs is not harmless: a task
//! that began a block-I/O wait while it was off and ends it while it is on
//! is charged `now − 0`, an uptime-sized BlockIO delay (kernel/delayacct.c).
//! So instances hold a shared lock on /run/ttp/delayacct.lock; the first one
//! records the previous value in /run/ttp/delayacct.json and then switches
//! accounting on, the last one out restores it.
use std::fs::File;

use super::run_state::{self, Leftover, Tracked, flock};

/// kernel.task_delayacct as a tracked setting of this machine.
pub fn tracked() -> Tracked {
    run_state::task_delayacct()
}

pub struct DelayAcct {
    tracked: Tracked,
    holders: File,
    /// It was off before ttp (this or another instance) switched it on.
    switched_on: bool,
    /// What a dead instance had left, found and handled on the way in.
    leftover: Option<Leftover>,
}

impl DelayAcct {
    /// Switches delay accounting on; None if it cannot (no such sysctl, not
    /// root, the state cannot be recorded): the measurement goes on without
    /// the delay-accounting references, and says so. A change a dead
    /// instance left is restored first and said on stderr.
    pub fn enable() -> Option<Self> {
        let d = Self::enable_at(tracked())?;
        if let Some(l) = &d.leftover {
            log::warn!("{l}");
        }
        Some(d)
    }

    /// As [`enable`](Self::enable), for the setting and run directory given.
    pub(crate) fn enable_at(tracked: Tracked) -> Option<Self> {
        let warn = |what: &str, e: std::io::Error| {
            log::warn!(
                "{what}: {e}; {} is left as it is and its delay-accounting references are missing",
                tracked.setting
            );
        };
        let dir = match tracked.lock_dir(true) {
            Ok(Some(d)) => d,
            Ok(None) => return None,
            Err(e) => {
                warn(&format!("cannot lock {}", tracked.dir.display()), e);
                return None;
            }
        };
        let holders = match tracked.open_lock(true) {
            Ok(f) => f,
            Err(e) => {
                warn(&format!("cannot open {}", tracked.lock_path().display()), e);
                return None;
            }
        };
        let alone = flock(&holders, libc::LOCK_EX | libc::LOCK_NB);
        let leftover = if alone {
            tracked.restore_abandoned()
        } else {
            None
        };
        let current = tracked.current().ok()?;
        let previous = if alone {
            if current != "1" {
                // Recorded before it is changed: a SIGKILL between the two
                // leaves a record the next command reads (run_state.rs).
                if let Err(e) = tracked.record(&current, "1") {
                    warn(
                        &format!("cannot record {}", tracked.state_path().display()),
                        e,
                    );
                    return None;
                }
                if tracked.set("1").is_err() {
                    let _ = tracked.forget();
                    return None;
                }
            }
            current
        } else {
            // Another live instance switched it on, or found it on; but it
            // may have been switched off since (by hand, or by a program
            // that does not know of the lock): check, and switch it on as
            // the first holder would, recording the value first when no
            // holder did (the last one out restores the record).
            let recorded = tracked.recorded().ok().flatten();
            if current != "1" {
                if recorded.is_none()
                    && let Err(e) = tracked.record(&current, "1")
                {
                    warn(
                        &format!("cannot record {}", tracked.state_path().display()),
                        e,
                    );
                    return None;
                }
                if tracked.set("1").is_err() {
                    if recorded.is_none() {
                        let _ = tracked.forget();
                    }
                    return None;
                }
            }
            match recorded {
                Some(c) => c.original,
                None => current,
            }
        };
        // Downgrading is not atomic under flock; the directory lock keeps
        // every other instance from testing the exclusive lock meanwhile.
        flock(&holders, libc::LOCK_SH);
        drop(dir);
        Some(Self {
            tracked,
            holders,
            switched_on: previous != "1",
            leftover,
        })
    }

    /// Delay accounting was off before this measurement.
    pub fn switched_on(&self) -> bool {
        self.switched_on
    }

    /// What a dead instance had left and this one restored on the way in.
    #[cfg(test)]
    pub(crate) fn leftover(&self) -> Option<&Leftover> {
        self.leftover.as_ref()
    }
}

impl Drop for DelayAcct {
    fn drop(&mut self) {
        // Without the directory lock (removed by hand) restoring still
        // matters more than the race it guards against.
        let dir = self.tracked.lock_dir(false).ok().flatten();
        if flock(&self.holders, libc::LOCK_EX | libc::LOCK_NB) {
            // The last instance out: put back what the first one recorded.
            if let Ok(Some(change)) = self.tracked.recorded() {
                if let Err(e) = self.tracked.set(&change.original) {
                    log::error!(
                        "cannot restore {} = {} ({e}); restore it by hand: sysctl -w {}={}",
                        change.setting,
                        change.original,
                        change.setting,
                        change.original
                    );
                } else {
                    let _ = self.tracked.forget();
                }
            }
        }
        flock(&self.holders, libc::LOCK_UN);
        drop(dir);
    }
}

#[cfg(test)]
mod tests;
