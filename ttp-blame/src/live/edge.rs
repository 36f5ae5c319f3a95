//! One edge between windows: every thread's cumulative counters at one
//! instant — iowait and identity from the ledger, on-CPU time and run-queue
//! wait per CPU, disk I/O per device and memory stalls from the blame detail
//! — and the window between two edges in the recording's terms (iQCAR
//! Sec. 5.3: the blocked time and data processed of every task per
//! interval).
use std::collections::{BTreeMap, BTreeSet, HashMap};

use ttp_common::{ExitRecord, ThreadAccount, detail::DeviceIo, state};

use crate::input::{CpuWindow, DeviceWindow, TaskWindow, Window};
use ttp_ledger::{
    accounts::{Image, ThreadKey},
    probe::{DetailSnapshot, Snapshot},
};

/// An interval still open at an edge — a thread running, or waiting in a
/// run queue — and the CPU it is charged to so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Open {
    pub cpu: u32,
    pub since_ns: u64,
    /// Its length up to the edge.
    pub ns: u64,
}

/// One per-CPU time of a thread (on-CPU or run-queue wait) at an edge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PerCpu {
    /// Closed intervals per CPU (the detail's counters, cumulative).
    pub closed: BTreeMap<u32, u64>,
    /// The interval open at the edge.
    pub open: Option<Open>,
    /// Open time charged at earlier edges whose interval has closed since
    /// but whose closed total has not yet been seen: taken out of the next
    /// closed counts so that no time is charged twice.
    pub debt_ns: u64,
}

/// One thread's cumulative counters at an edge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ThreadEdge {
    pub tgid: u32,
    pub on_cpu: PerCpu,
    /// Run-queue wait per CPU it was switched in on (or, while it still
    /// waits, the CPU whose queue holds it).
    pub runq: PerCpu,
    /// Blocked in iowait (the ledger's, open interval closed at the edge).
    pub iowait_ns: u64,
    /// The part of it the device served the thread's process (the ledger's
    /// `iowait_own_ns`, closed at the edge the same way).
    pub iowait_own_ns: u64,
    /// Direct reclaim + compaction, the open stall closed at the edge.
    pub mem_stall_ns: u64,
    /// Completed I/O per device (kernel dev_t).
    pub disk: BTreeMap<u32, DeviceIo>,
}

/// Every thread's counters and the machine's at one instant.
#[derive(Debug, Clone, Default)]
pub(crate) struct Edge {
    /// When every open interval was closed: the window boundary.
    pub at_ns: u64,
    /// How long its reads took, up to `at_ns` (set by the sampler).
    pub read_ns: u64,
    pub threads: HashMap<ThreadKey, ThreadEdge>,
    /// Time each CPU spent in its idle state (the ledger's idle + iowait).
    pub cpu_idle: BTreeMap<u32, u64>,
    /// I/O completed per device without a known owner.
    pub unowned: BTreeMap<u32, DeviceIo>,
}

/// The open intervals of a thread the ledger shows running or runnable.
/// The detail's own running mark is exact; otherwise (a thread running since
/// before the detail was loaded, or still waiting) the ledger's interval is
/// open only if the detail has seen no switch-in since it began — one after
/// it means the ledger was read just before the interval closed — and is
/// charged to the CPU the kernel has the thread on (`task_cpu`).
fn open_intervals(
    a: Option<&ThreadAccount>,
    detail: &[(u32, u64, u64)],
    at: u64,
    task_cpu: &mut dyn FnMut(u32, u32) -> Option<u32>,
) -> (Option<Open>, Option<Open>) {
    let open = |cpu, since: u64| Open {
        cpu,
        since_ns: since,
        ns: at.saturating_sub(since),
    };
    let running = detail
        .iter()
        .filter(|(_, since, _)| *since != 0)
        .max_by_key(|(_, since, _)| *since)
        .map(|&(cpu, since, _)| open(cpu, since));
    let Some(a) = a else {
        return (running, None);
    };
    let last_in = detail.iter().map(|d| d.2).max().unwrap_or(0);
    let from_ledger = |st| a.state == st && last_in < a.state_since_ns && a.state_since_ns != 0;
    let on_cpu = running.or_else(|| {
        from_ledger(state::RUNNING)
            .then(|| task_cpu(a.tgid, a.tid).map(|c| open(c, a.state_since_ns)))
            .flatten()
    });
    let runq = from_ledger(state::RUNNABLE)
        .then(|| task_cpu(a.tgid, a.tid).map(|c| open(c, a.state_since_ns)))
        .flatten();
    (on_cpu, runq)
}

impl Edge {
    /// The edge of a ledger snapshot and the detail read after it, every
    /// open interval closed at `snap.at_ns` (the caller sets it after the
    /// last read, so that one instant ends every interval). `exited` are the
    /// exit records of threads that ended since the last edge: their final
    /// accounts stand in for the ledger's, and their detail entries are
    /// still there (forgotten one window later).
    pub fn build(
        snap: &Snapshot,
        detail: &DetailSnapshot,
        exited: &[ExitRecord],
        task_cpu: &mut dyn FnMut(u32, u32) -> Option<u32>,
    ) -> Self {
        let at = snap.at_ns;
        let image = Image::from_snapshot(snap);
        let live: HashMap<ThreadKey, &ThreadAccount> =
            snap.threads.iter().map(|a| (ThreadKey::of(a), a)).collect();
        let mut threads: HashMap<ThreadKey, ThreadEdge> = image
            .threads
            .iter()
            .map(|(k, a)| {
                let t = ThreadEdge {
                    tgid: a.tgid,
                    iowait_ns: a.iowait_ns,
                    iowait_own_ns: a.iowait_own_ns,
                    ..Default::default()
                };
                (*k, t)
            })
            .collect();
        let mut dead: BTreeSet<ThreadKey> = BTreeSet::new();
        for e in exited {
            let key = ThreadKey::of(&e.account);
            dead.insert(key);
            threads.insert(
                key,
                ThreadEdge {
                    tgid: e.account.tgid,
                    iowait_ns: e.account.iowait_ns,
                    iowait_own_ns: e.account.iowait_own_ns,
                    ..Default::default()
                },
            );
        }
        let key = |tid, start| ThreadKey { tid, start };
        // (cpu, running since, last switch-in) per thread.
        let mut marks: HashMap<ThreadKey, Vec<(u32, u64, u64)>> = HashMap::new();
        for (k, v) in &detail.thread_cpu {
            let tk = key(k.tid, v.start_time_ns);
            if let Some(t) = threads.get_mut(&tk) {
                t.on_cpu.closed.insert(k.cpu, v.on_cpu_ns);
                t.runq.closed.insert(k.cpu, v.runq_wait_ns);
                marks
                    .entry(tk)
                    .or_default()
                    .push((k.cpu, v.running_since_ns, v.switched_in_ns));
            }
        }
        for (k, t) in threads.iter_mut() {
            if dead.contains(k) {
                continue;
            }
            let m = marks.get(k).map(Vec::as_slice).unwrap_or(&[]);
            let (on_cpu, runq) = open_intervals(live.get(k).copied(), m, at, task_cpu);
            t.on_cpu.open = on_cpu;
            t.runq.open = runq;
        }
        for (k, v) in &detail.thread_dev {
            if let Some(t) = threads.get_mut(&key(k.tid, v.start_time_ns)) {
                t.disk.insert(k.dev, v.io);
            }
        }
        for (tid, m) in &detail.mem {
            if let Some(t) = threads.get_mut(&key(*tid, m.start_time_ns)) {
                let open = if m.depth > 0 {
                    at.saturating_sub(m.since_ns)
                } else {
                    0
                };
                t.mem_stall_ns = m.stall_ns + open;
            }
        }
        Self {
            at_ns: at,
            read_ns: 0,
            threads,
            cpu_idle: image
                .cpus
                .iter()
                .map(|(c, t)| (*c, t.idle_ns + t.iowait_ns))
                .collect(),
            unowned: detail.unowned.iter().copied().collect(),
        }
    }

    /// Makes every cumulative counter at least its value at `prev`.
    /// Counters only grow; a value read mid-update could otherwise be
    /// counted twice.
    pub(crate) fn hold_max(&mut self, prev: &Edge) {
        fn max_map<V: Copy>(cur: &mut BTreeMap<u32, V>, prev: &BTreeMap<u32, V>, f: fn(V, V) -> V) {
            for (k, p) in prev {
                if let Some(c) = cur.get_mut(k) {
                    *c = f(*c, *p);
                }
            }
        }
        let io_max = |a: DeviceIo, b: DeviceIo| DeviceIo {
            bytes: a.bytes.max(b.bytes),
            requests: a.requests.max(b.requests),
        };
        for (k, t) in &mut self.threads {
            if let Some(p) = prev.threads.get(k) {
                max_map(&mut t.on_cpu.closed, &p.on_cpu.closed, u64::max);
                max_map(&mut t.runq.closed, &p.runq.closed, u64::max);
                max_map(&mut t.disk, &p.disk, io_max);
                t.iowait_ns = t.iowait_ns.max(p.iowait_ns);
                t.mem_stall_ns = t.mem_stall_ns.max(p.mem_stall_ns);
            }
        }
        max_map(&mut self.cpu_idle, &prev.cpu_idle, u64::max);
        max_map(&mut self.unowned, &prev.unowned, io_max);
    }
}

/// What one thread did between two edges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ThreadDelta {
    pub on_cpu: BTreeMap<u32, u64>,
    pub runq: BTreeMap<u32, u64>,
    pub iowait_ns: u64,
    pub iowait_own_ns: u64,
    pub mem_stall_ns: u64,
    pub disk: BTreeMap<u32, DeviceIo>,
}

/// The time of one per-CPU counter between two edges, and the debt `cur`
/// carries on. Closed time is what the counters grew by; an interval open
/// at both edges adds its growth; one open at the previous edge and closed
/// since is in the closed counts in full, so what was charged of it then is
/// owed and taken out of them (first on the CPU it was charged to); one
/// open now adds its length so far.
pub(crate) fn per_cpu_delta(prev: Option<&PerCpu>, cur: &mut PerCpu) -> BTreeMap<u32, u64> {
    let mut d: BTreeMap<u32, u64> = cur
        .closed
        .iter()
        .map(|(c, v)| {
            let before = prev.and_then(|p| p.closed.get(c)).copied().unwrap_or(0);
            (*c, v.saturating_sub(before))
        })
        .collect();
    let mut debt = prev.map_or(0, |p| p.debt_ns);
    let prev_open = prev.and_then(|p| p.open);
    let growth = match (prev_open, cur.open) {
        (Some(p), Some(c)) if p.since_ns == c.since_ns => Some((c.cpu, c.ns.saturating_sub(p.ns))),
        (p, c) => {
            debt += p.map_or(0, |p| p.ns);
            c.map(|c| (c.cpu, c.ns))
        }
    };
    if debt > 0 {
        let first = prev_open.map(|p| p.cpu);
        let mut order: Vec<u32> = d.keys().copied().collect();
        order.sort_by_key(|c| (Some(*c) != first, std::cmp::Reverse(d[c])));
        for c in order {
            let v = d.get_mut(&c).expect("key from d");
            let take = (*v).min(debt);
            *v -= take;
            debt -= take;
        }
    }
    cur.debt_ns = debt;
    if let Some((cpu, g)) = growth {
        *d.entry(cpu).or_default() += g;
    }
    d.retain(|_, v| *v > 0);
    d
}

fn io_delta(cur: &DeviceIo, prev: Option<&DeviceIo>) -> DeviceIo {
    let p = prev.copied().unwrap_or_default();
    DeviceIo {
        bytes: cur.bytes.saturating_sub(p.bytes),
        requests: cur.requests.saturating_sub(p.requests),
    }
}

/// `cur − prev`; a thread new since the last edge counts from zero (its
/// counters began with it). Updates the debts `cur` carries.
pub(crate) fn thread_delta(prev: Option<&ThreadEdge>, cur: &mut ThreadEdge) -> ThreadDelta {
    ThreadDelta {
        on_cpu: per_cpu_delta(prev.map(|p| &p.on_cpu), &mut cur.on_cpu),
        runq: per_cpu_delta(prev.map(|p| &p.runq), &mut cur.runq),
        iowait_ns: cur
            .iowait_ns
            .saturating_sub(prev.map_or(0, |p| p.iowait_ns)),
        iowait_own_ns: cur
            .iowait_own_ns
            .saturating_sub(prev.map_or(0, |p| p.iowait_own_ns)),
        mem_stall_ns: cur
            .mem_stall_ns
            .saturating_sub(prev.map_or(0, |p| p.mem_stall_ns)),
        disk: cur
            .disk
            .iter()
            .map(|(d, io)| (*d, io_delta(io, prev.and_then(|p| p.disk.get(d)))))
            .filter(|(_, io)| io.bytes > 0 || io.requests > 0)
            .collect(),
    }
}

/// Label of iowait that no device can be named for (nothing completed
/// anywhere, and the process never did I/O).
pub(crate) const UNKNOWN_DEVICE: &str = "unknown-device";

/// Context [`to_window`] needs beyond the two edges.
pub(crate) struct Naming<'a> {
    /// Recording task id of a thread.
    pub task_id: &'a mut dyn FnMut(&ThreadKey) -> u32,
    /// Name of a block device.
    pub device: &'a mut dyn FnMut(u32) -> String,
    /// The device each process last completed I/O on (updated here).
    pub last_device: &'a mut HashMap<u32, u32>,
}

/// The recording's window between `prev` and `cur`.
///
/// A thread's iowait is charged to the devices its process completed
/// requests on in the window, split evenly (the format's "devices its
/// requests were on"); without any, to the device the process last used,
/// else to the device that completed the most bytes in the window, else
/// to [`UNKNOWN_DEVICE`].
pub(crate) fn to_window(prev: &Edge, cur: &mut Edge, naming: Naming<'_>) -> Window {
    let deltas: Vec<(ThreadKey, u32, ThreadDelta)> = cur
        .threads
        .iter_mut()
        .map(|(k, t)| (*k, t.tgid, thread_delta(prev.threads.get(k), t)))
        .collect();
    let mut proc_devs: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for (_, tgid, d) in &deltas {
        for dev in d.disk.keys() {
            proc_devs.entry(*tgid).or_default().insert(*dev);
        }
    }
    for (tgid, devs) in &proc_devs {
        if let Some(d) = devs.iter().next() {
            naming.last_device.insert(*tgid, *d);
        }
    }
    // Sec. 5.1 External-IO: a device's total is every thread's I/O plus
    // what completed without a known owner.
    let mut device_deltas: BTreeMap<u32, DeviceIo> = cur
        .unowned
        .iter()
        .map(|(d, io)| (*d, io_delta(io, prev.unowned.get(d))))
        .collect();
    for (_, _, d) in &deltas {
        for (dev, io) in &d.disk {
            let t = device_deltas.entry(*dev).or_default();
            t.bytes += io.bytes;
            t.requests += io.requests;
        }
    }
    device_deltas.retain(|_, io| io.bytes > 0 || io.requests > 0);
    let busiest = device_deltas
        .iter()
        .max_by_key(|(d, io)| (io.bytes, std::cmp::Reverse(**d)))
        .map(|(d, _)| *d);
    let mut tasks: Vec<TaskWindow> = Vec::new();
    for (key, tgid, d) in deltas {
        if d == ThreadDelta::default() {
            continue;
        }
        let mut tw = TaskWindow {
            task: (naming.task_id)(&key),
            on_cpu_ns: d.on_cpu,
            runq_wait_ns: d.runq,
            mem_stall_ns: d.mem_stall_ns,
            ..Default::default()
        };
        for (dev, io) in &d.disk {
            let name = (naming.device)(*dev);
            if io.bytes > 0 {
                tw.disk_bytes.insert(name.clone(), io.bytes);
            }
            if io.requests > 0 {
                tw.disk_requests.insert(name, io.requests);
            }
        }
        if d.iowait_ns > 0 {
            let devs: Vec<u32> = match proc_devs.get(&tgid) {
                Some(s) if !s.is_empty() => s.iter().copied().collect(),
                _ => naming
                    .last_device
                    .get(&tgid)
                    .copied()
                    .or(busiest)
                    .into_iter()
                    .collect(),
            };
            if devs.is_empty() {
                tw.iowait_ns.insert(UNKNOWN_DEVICE.to_string(), d.iowait_ns);
            } else {
                // Even split; the remainder of the division goes to the first.
                let n = devs.len() as u64;
                // The own part cannot exceed the wait it is part of.
                let own = d.iowait_own_ns.min(d.iowait_ns);
                for (i, dev) in devs.iter().enumerate() {
                    let part = d.iowait_ns / n + if i == 0 { d.iowait_ns % n } else { 0 };
                    *tw.iowait_ns.entry((naming.device)(*dev)).or_default() += part;
                    let own_part = own / n + if i == 0 { own % n } else { 0 };
                    if own_part > 0 {
                        *tw.iowait_own_ns.entry((naming.device)(*dev)).or_default() += own_part;
                    }
                }
            }
        }
        tasks.push(tw);
    }
    tasks.sort_by_key(|t| t.task);
    Window {
        start_ns: prev.at_ns,
        end_ns: cur.at_ns,
        cpus: cur
            .cpu_idle
            .iter()
            .map(|(cpu, idle)| CpuWindow {
                cpu: *cpu,
                idle_ns: Some(idle.saturating_sub(prev.cpu_idle.get(cpu).copied().unwrap_or(0))),
                steal_ns: None,
            })
            .collect(),
        devices: device_deltas
            .iter()
            .map(|(d, io)| DeviceWindow {
                device: (naming.device)(*d),
                bytes: Some(io.bytes),
                requests: Some(io.requests),
            })
            .collect(),
        tasks,
        start_read_ns: prev.read_ns,
        end_read_ns: cur.read_ns,
    }
}
