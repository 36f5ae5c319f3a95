//! A machine setting held at a value for the length of a measurement,
//! shared by concurrent ttp instances, and put back by the next ttp
//! command when an instance is killed before it could (sys/run_state.rs).
//!
//! Instances hold a shared lock on `/run/ttp/<id>.lock`; the first one
//! records the previous value in `/run/ttp/<id>.json` and then changes the
//! setting, the last one out restores it. `kernel.task_delayacct`
//! (sys/delayacct.rs) and free page reporting's order
//! (sys/page_reporting.rs) are held this way.
use std::fs::File;

use super::run_state::{Leftover, Tracked, flock};

/// One instance's hold on a setting; dropping it releases the hold, and
/// the last holder out restores the value recorded before the change.
pub struct Held {
    tracked: Tracked,
    holders: File,
    /// The value before ttp (this or another instance) changed it.
    previous: String,
    /// The value the setting was held at (the previous one when it was
    /// already one of those wanted).
    held_at: String,
    /// What a dead instance had left, found and handled on the way in.
    leftover: Option<Leftover>,
}

impl Held {
    /// Holds `tracked` at the first of `wanted` the kernel accepts, unless
    /// it already has the first. None when it cannot (no such setting,
    /// not root, the state cannot be recorded, no value accepted): the
    /// measurement goes on without it (`consequence` says what that costs,
    /// in the warning of a failure). A change a dead instance left is
    /// restored first ([`Held::leftover`]).
    pub(crate) fn hold(tracked: Tracked, wanted: &[&str], consequence: &str) -> Option<Self> {
        let warn = |what: &str, e: std::io::Error| {
            log::warn!(
                "{what}: {e}; {} is left as it is and {consequence}",
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
        // Another live instance changed it, or found it as wanted; but it
        // may have been changed since (by hand, or by a program that does
        // not know of the lock): check, and change it as the first holder
        // would, recording the value first when no holder did (the last
        // one out restores the record).
        let recorded = if alone {
            None
        } else {
            tracked.recorded().ok().flatten()
        };
        // Already at the first value wanted: nothing to change (delay
        // accounting found on). Any other value is changed, the record
        // written before each try naming the value tried, so that a
        // SIGKILL at any point leaves a record of what the setting may
        // now hold (run_state.rs).
        let held_at = if current == wanted[0] {
            current.clone()
        } else {
            let mut took = None;
            for w in wanted {
                if recorded.is_none()
                    && let Err(e) = tracked.record(&current, w)
                {
                    warn(
                        &format!("cannot record {}", tracked.state_path().display()),
                        e,
                    );
                    return None;
                }
                if tracked.set(w).is_ok() {
                    took = Some(w.to_string());
                    break;
                }
            }
            let Some(took) = took else {
                if recorded.is_none() {
                    let _ = tracked.forget();
                }
                return None;
            };
            took
        };
        let previous = match recorded {
            Some(c) => c.original,
            None => current,
        };
        // Downgrading is not atomic under flock; the directory lock keeps
        // every other instance from testing the exclusive lock meanwhile.
        flock(&holders, libc::LOCK_SH);
        drop(dir);
        Some(Self {
            tracked,
            holders,
            previous,
            held_at,
            leftover,
        })
    }

    /// The value before ttp changed it.
    pub fn previous(&self) -> &str {
        &self.previous
    }

    /// The value it is held at.
    pub fn held_at(&self) -> &str {
        &self.held_at
    }

    /// Whether the setting had another value before ttp held it.
    pub fn changed(&self) -> bool {
        self.previous != self.held_at
    }

    /// What a dead instance had left and this one restored on the way in.
    pub fn leftover(&self) -> Option<&Leftover> {
        self.leftover.as_ref()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Without the directory lock (removed by hand) restoring still
        // matters more than the race it guards against.
        let dir = self.tracked.lock_dir(false).ok().flatten();
        if flock(&self.holders, libc::LOCK_EX | libc::LOCK_NB) {
            // The last instance out: put back what the first one recorded.
            if let Ok(Some(change)) = self.tracked.recorded() {
                if let Err(e) = self.tracked.set(&change.original) {
                    log::error!(
                        "cannot restore {} = {} ({e}); restore it by hand: {}",
                        change.setting,
                        change.original,
                        self.tracked.by_hand(&change.original)
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
