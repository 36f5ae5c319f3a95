//! The kernel ledger's measures of a thread or process over a window, in the
//! units they were taken in (ns, counts, bytes).
use std::ops::AddAssign;

use serde::{Deserialize, Serialize};
use ttp_common::ThreadAccount;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoMeasures {
    pub read_requests: u64,
    pub read_bytes: u64,
    pub write_requests: u64,
    pub write_bytes: u64,
    /// Time its requests spent on the device (issue → completion).
    pub device_ns: u64,
    /// Time its requests spent queued in the block layer (start → issue).
    pub queue_ns: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measures {
    /// The kernel's runtime (`se.sum_exec_runtime`), steal left out.
    pub on_cpu_ns: u64,
    /// The kernel's run-queue wait (`sched_info.run_delay`).
    pub runq_wait_ns: u64,
    /// Wall clock from a wakeup or a preemption to the switch-in.
    #[serde(default)]
    pub wake_latency_ns: u64,
    pub sleep_ns: u64,
    pub blocked_ns: u64,
    /// Blocked on block I/O (`in_iowait`): the delay-accounting blkio delay,
    /// TTPv2's BlockIO.
    pub iowait_ns: u64,
    /// Part of `iowait_ns` while the disk served this process's requests.
    pub iowait_own_ns: u64,
    /// Its share of the machine's iowait (idle CPU time while it waited).
    pub iowait_share_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub wakeups: u64,
    pub io: IoMeasures,
}

impl Measures {
    pub fn of(a: &ThreadAccount) -> Self {
        Self {
            on_cpu_ns: a.on_cpu_ns,
            runq_wait_ns: a.runq_wait_ns,
            wake_latency_ns: a.wake_latency_ns,
            sleep_ns: a.sleep_ns,
            blocked_ns: a.blocked_ns,
            iowait_ns: a.iowait_ns,
            iowait_own_ns: a.iowait_own_ns,
            iowait_share_ns: a.iowait_share_ns,
            voluntary_switches: a.voluntary_switches,
            involuntary_switches: a.involuntary_switches,
            wakeups: a.wakeups,
            io: IoMeasures {
                read_requests: a.io.read_requests,
                read_bytes: a.io.read_bytes,
                write_requests: a.io.write_requests,
                write_bytes: a.io.write_bytes,
                device_ns: a.io.device_ns,
                queue_ns: a.io.queue_ns,
            },
        }
    }

    /// `self − earlier`, field by field; a counter that went backwards (which
    /// the ledger never does for one thread) counts as 0, not as a wrap.
    pub fn since(&self, earlier: &Self) -> Self {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Self {
            on_cpu_ns: d(self.on_cpu_ns, earlier.on_cpu_ns),
            runq_wait_ns: d(self.runq_wait_ns, earlier.runq_wait_ns),
            wake_latency_ns: d(self.wake_latency_ns, earlier.wake_latency_ns),
            sleep_ns: d(self.sleep_ns, earlier.sleep_ns),
            blocked_ns: d(self.blocked_ns, earlier.blocked_ns),
            iowait_ns: d(self.iowait_ns, earlier.iowait_ns),
            iowait_own_ns: d(self.iowait_own_ns, earlier.iowait_own_ns),
            iowait_share_ns: d(self.iowait_share_ns, earlier.iowait_share_ns),
            voluntary_switches: d(self.voluntary_switches, earlier.voluntary_switches),
            involuntary_switches: d(self.involuntary_switches, earlier.involuntary_switches),
            wakeups: d(self.wakeups, earlier.wakeups),
            io: IoMeasures {
                read_requests: d(self.io.read_requests, earlier.io.read_requests),
                read_bytes: d(self.io.read_bytes, earlier.io.read_bytes),
                write_requests: d(self.io.write_requests, earlier.io.write_requests),
                write_bytes: d(self.io.write_bytes, earlier.io.write_bytes),
                device_ns: d(self.io.device_ns, earlier.io.device_ns),
                queue_ns: d(self.io.queue_ns, earlier.io.queue_ns),
            },
        }
    }
}

impl AddAssign for Measures {
    fn add_assign(&mut self, o: Self) {
        self.on_cpu_ns += o.on_cpu_ns;
        self.runq_wait_ns += o.runq_wait_ns;
        self.wake_latency_ns += o.wake_latency_ns;
        self.sleep_ns += o.sleep_ns;
        self.blocked_ns += o.blocked_ns;
        self.iowait_ns += o.iowait_ns;
        self.iowait_own_ns += o.iowait_own_ns;
        self.iowait_share_ns += o.iowait_share_ns;
        self.voluntary_switches += o.voluntary_switches;
        self.involuntary_switches += o.involuntary_switches;
        self.wakeups += o.wakeups;
        self.io.read_requests += o.io.read_requests;
        self.io.read_bytes += o.io.read_bytes;
        self.io.write_requests += o.io.write_requests;
        self.io.write_bytes += o.io.write_bytes;
        self.io.device_ns += o.io.device_ns;
        self.io.queue_ns += o.io.queue_ns;
    }
}
