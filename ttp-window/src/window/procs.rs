//! /proc and taskstats images of a set of processes, taken right after a
//! ledger image, and their deltas over a window.
//!
//! schedstat, status switches and delayacct_blkio_ticks are per thread in
//! /proc (a process file shows its main thread only), so those are summed
//! over per-thread deltas; utime/stime and io are per process (they include
//! reaped threads). /proc/PID/io also counts the I/O of the children the
//! process reaped (the kernel adds a reaped child's `ioac` to its parent's
//! signal struct in `wait_task_zombie`), which /proc/PID/task/TID/io does
//! not (it is that thread's own `ioac`): the live threads' read bytes are
//! summed too, for a comparison of like with like. Threads that exit inside
//! the window leave the per-thread sums incomplete: the view says so
//! instead of guessing.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use ttp_ledger::collect::{
    proc_pid::ProcImage,
    proc_stat::{StatDelta, StatImage},
    taskstats::{Taskstats, TaskstatsClient},
};

/// One process as /proc and taskstats show it at one instant.
#[derive(Debug, Clone)]
pub struct ProcEntry {
    pub process: ProcImage,
    pub threads: Vec<ProcImage>,
    pub taskstats: Option<Taskstats>,
}

/// Images of a set of processes plus /proc/stat, at one instant.
#[derive(Debug, Clone, Default)]
pub struct ProcSet {
    pub procs: BTreeMap<u32, ProcEntry>,
    pub stat: Option<StatImage>,
}

impl ProcSet {
    /// Reads `pids` (those that have exited are skipped) and /proc/stat.
    pub fn read(pids: &BTreeSet<u32>, taskstats: Option<&TaskstatsClient>) -> Self {
        let root = Path::new("/proc");
        let mut procs = BTreeMap::new();
        for &pid in pids {
            let Ok(process) = ProcImage::read_process(root, pid as i32) else {
                continue;
            };
            let threads = ProcImage::read_threads(root, pid as i32).unwrap_or_default();
            let taskstats = taskstats.and_then(|c| c.tgid(pid).ok());
            procs.insert(
                pid,
                ProcEntry {
                    process,
                    threads,
                    taskstats,
                },
            );
        }
        Self {
            procs,
            stat: StatImage::read(root).ok(),
        }
    }

    /// Every pid in /proc.
    pub fn all_pids() -> BTreeSet<u32> {
        ttp_ledger::collect::proc_pid::list_pids(Path::new("/proc"))
            .unwrap_or_default()
            .into_iter()
            .map(|p| p as u32)
            .collect()
    }
}

/// A process's /proc counters over a window (the `proc` object of the
/// attach JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcCounters {
    pub utime_ticks: Option<u64>,
    pub stime_ticks: Option<u64>,
    pub blkio_ticks: Option<u64>,
    pub schedstat_run_ns: Option<u64>,
    pub schedstat_wait_ns: Option<u64>,
    /// /proc/PID/io: the whole process, with its exited threads and the
    /// children it reaped.
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    /// The live threads' own read bytes summed (/proc/PID/task/TID/io):
    /// neither exited threads nor reaped children.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads_read_bytes: Option<u64>,
    pub voluntary_switches: Option<u64>,
    pub involuntary_switches: Option<u64>,
    /// TTPv2 Sec. 3.5 (e), (f), the faults, (j) and (k): per process
    /// (reaped threads included), from stat and io.
    pub guest_ticks: Option<u64>,
    pub cguest_ticks: Option<u64>,
    pub minflt: Option<u64>,
    pub majflt: Option<u64>,
    pub read_syscalls: Option<u64>,
    pub write_syscalls: Option<u64>,
    /// Threads that exited inside the window: the per-thread sums
    /// (schedstat, switches, blkio) miss their share.
    pub threads_exited: u32,
}

/// taskstats (thread group) over a window, the fields the cross-check uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskstatsCounters {
    /// se.sum_exec_runtime of the live threads, ns.
    pub cpu_run_virtual_total_ns: Option<u64>,
    pub cpu_delay_total_ns: Option<u64>,
    pub blkio_delay_total_ns: Option<u64>,
    pub ac_utime_us: Option<u64>,
    pub ac_stime_us: Option<u64>,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub nvcsw: Option<u64>,
    pub nivcsw: Option<u64>,
}

fn sub(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    a?.checked_sub(b.unwrap_or(0))
}

/// `after − before` for one process; `before` is None for a process that
/// started inside the window.
pub fn proc_delta(before: Option<&ProcEntry>, after: &ProcEntry) -> ProcCounters {
    let p0 = before.map(|b| &b.process.counters);
    let p1 = &after.process.counters;
    let mut c = ProcCounters {
        utime_ticks: sub(p1.utime_ticks, p0.and_then(|p| p.utime_ticks)),
        stime_ticks: sub(p1.stime_ticks, p0.and_then(|p| p.stime_ticks)),
        read_bytes: sub(p1.read_bytes, p0.and_then(|p| p.read_bytes)),
        write_bytes: sub(p1.write_bytes, p0.and_then(|p| p.write_bytes)),
        guest_ticks: sub(p1.guest_ticks, p0.and_then(|p| p.guest_ticks)),
        cguest_ticks: sub(p1.cguest_ticks, p0.and_then(|p| p.cguest_ticks)),
        minflt: sub(p1.minflt, p0.and_then(|p| p.minflt)),
        majflt: sub(p1.majflt, p0.and_then(|p| p.majflt)),
        read_syscalls: sub(p1.read_syscalls, p0.and_then(|p| p.read_syscalls)),
        write_syscalls: sub(p1.write_syscalls, p0.and_then(|p| p.write_syscalls)),
        ..Default::default()
    };
    let key = |t: &ProcImage| (t.pid, t.starttime_ticks);
    let before_threads: BTreeMap<_, _> = before
        .map(|b| b.threads.iter().map(|t| (key(t), t)).collect())
        .unwrap_or_default();
    let after_keys: BTreeSet<_> = after.threads.iter().map(key).collect();
    c.threads_exited = before_threads
        .keys()
        .filter(|k| !after_keys.contains(k))
        .count() as u32;
    // No thread read: no per-thread sum (not a sum of zero).
    let mut sums = [(!after.threads.is_empty()).then_some(0u64); 6];
    for t in &after.threads {
        let t0 = before_threads.get(&key(t)).map(|b| &b.counters);
        let fields = [
            (
                t.counters.schedstat_run_ns,
                t0.and_then(|x| x.schedstat_run_ns),
            ),
            (
                t.counters.schedstat_wait_ns,
                t0.and_then(|x| x.schedstat_wait_ns),
            ),
            (t.counters.blkio_ticks, t0.and_then(|x| x.blkio_ticks)),
            (
                t.counters.voluntary_switches,
                t0.and_then(|x| x.voluntary_switches),
            ),
            (
                t.counters.involuntary_switches,
                t0.and_then(|x| x.involuntary_switches),
            ),
            (t.counters.read_bytes, t0.and_then(|x| x.read_bytes)),
        ];
        for (sum, (a, b)) in sums.iter_mut().zip(fields) {
            *sum = sum.and_then(|s| Some(s + sub(a, b)?));
        }
    }
    [
        c.schedstat_run_ns,
        c.schedstat_wait_ns,
        c.blkio_ticks,
        c.voluntary_switches,
        c.involuntary_switches,
        c.threads_read_bytes,
    ] = sums;
    c
}

/// taskstats `after − before` (None when either is missing or the group
/// changed identity).
pub fn taskstats_delta(before: Option<&ProcEntry>, after: &ProcEntry) -> Option<TaskstatsCounters> {
    let a = after.taskstats.as_ref()?;
    let d = match before.and_then(|b| b.taskstats.as_ref()) {
        Some(b) => b.delta(a).ok()?.0,
        None => a.clone(),
    };
    Some(TaskstatsCounters {
        cpu_run_virtual_total_ns: d.cpu_run_virtual_total_ns,
        cpu_delay_total_ns: d.cpu_delay_total_ns,
        blkio_delay_total_ns: d.blkio_delay_total_ns,
        ac_utime_us: d.ac_utime_us,
        ac_stime_us: d.ac_stime_us,
        read_bytes: d.read_bytes,
        write_bytes: d.write_bytes,
        nvcsw: d.nvcsw,
        nivcsw: d.nivcsw,
    })
}

/// /proc/stat over the window.
pub fn stat_delta(before: &ProcSet, after: &ProcSet) -> Option<StatDelta> {
    Some(before.stat.as_ref()?.delta(after.stat.as_ref()?))
}
