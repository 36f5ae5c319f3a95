//! Delay accounting (kernel.task_delayacct) switched on for a measurement
//! and restored after, shared by concurrent ttp instances.
//!
//! Switching it off while another measurement runs is not harmless: a task
//! that began a block-I/O wait while it was off and ends it while it is on
//! is charged `now − 0`, an uptime-sized BlockIO delay (kernel/delayacct.c).
//! So instances hold a shared lock on /run/ttp-delayacct.lock; the first one
//! records the previous value in that file and switches accounting on, the
//! last one out restores it.
use std::{
    fs::{File, OpenOptions},
    io::{Read, Seek, Write},
    os::fd::AsRawFd,
};

const SYSCTL: &str = "/proc/sys/kernel/task_delayacct";
const LOCK: &str = "/run/ttp-delayacct.lock";

pub struct DelayAcct {
    lock: File,
    /// It was off before ttp (this or another instance) switched it on.
    switched_on: bool,
}

fn flock(f: &File, op: libc::c_int) -> bool {
    // SAFETY: flock on an open descriptor.
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

impl DelayAcct {
    /// Switches delay accounting on; None if it cannot (no such sysctl, not
    /// root): the measurement goes on without the delay-accounting
    /// references, and says so.
    pub fn enable() -> Option<Self> {
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(LOCK)
            .ok()?;
        let alone = flock(&lock, libc::LOCK_EX | libc::LOCK_NB);
        let current = std::fs::read_to_string(SYSCTL).ok()?.trim().to_string();
        let previous = if alone {
            lock.set_len(0).ok()?;
            lock.write_all(current.as_bytes()).ok()?;
            if current != "1" {
                std::fs::write(SYSCTL, "1\n").ok()?;
            }
            current
        } else {
            let mut recorded = String::new();
            let _ = lock.read_to_string(&mut recorded);
            if recorded.trim().is_empty() {
                current
            } else {
                recorded.trim().to_string()
            }
        };
        flock(&lock, libc::LOCK_SH);
        Some(Self {
            lock,
            switched_on: previous != "1",
        })
    }

    /// Delay accounting was off before this measurement.
    pub fn switched_on(&self) -> bool {
        self.switched_on
    }
}

impl Drop for DelayAcct {
    fn drop(&mut self) {
        if flock(&self.lock, libc::LOCK_EX | libc::LOCK_NB) {
            let mut previous = String::new();
            let _ = self.lock.rewind();
            let _ = self.lock.read_to_string(&mut previous);
            let previous = previous.trim();
            if !previous.is_empty() && previous != "1" {
                let _ = std::fs::write(SYSCTL, format!("{previous}\n"));
            }
            let _ = self.lock.set_len(0);
        }
        flock(&self.lock, libc::LOCK_UN);
    }
}
