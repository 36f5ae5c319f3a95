//! Blame attribution in one window (iQCAR Sec. 3 and App. A–B, adapted to
//! one host; docs/blame.md maps every equation).
//!
//! A *task* is a thread. A *resource unit* — the paper's host h, the scope
//! within which tasks contend — is one CPU (run queues are per CPU), one
//! block device, or the machine's memory. For every victim thread t blocked
//! on unit u in window δt:
//!
//! - RATP_t = δt / δr_t (eq. 1–2), RATP-blocked_t = BT_t / δr_t (eq. 7);
//! - every other consumer c of u (another process, a known kernel thread, the
//!   victim's other threads, and the unknown consumption the machine counters
//!   leave unexplained) gets β̂(c→t) = RATP-blocked_t / RATP_c (eq. 8) and
//!   the eq. 6 blame β(c→t) = RATP_t / RATP_c;
//! - BT_t is distributed over the causes in proportion to β̂ (eq. 10 applied
//!   with the Level-3 node of this window), so the contributions add up to
//!   BT_t exactly; with no consumer at all, BT_t is unknown (eq. 5);
//! - slowdown S_t = (RATP_t − RATP*) / RATP* (eq. 4), with the capacity C of
//!   eq. 12 taken as everything consumed on u, i.e. S_t = Σ_c δr_c / δr_t
//!   (eq. 17), split into p1 (concurrent + own) and p2 (known + unknown).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    cause::Classifier,
    input::{Recording, Sources, Window},
    options::{DiskMeasure, Options},
};
use ttp_window::window::blame_record::CauseKind;

use ttp_window::window::blame_record::Resource;

// What the recording says about each resource (the enum and its names
// are in window/blame_record.rs, beside the per-QE summary that holds it).

/// Unit in which consumption δr of `r` is counted.
pub(crate) fn consumption_unit(r: Resource, disk_by: DiskMeasure) -> &'static str {
    match (r, disk_by) {
        (Resource::Cpu, _) => "ns",
        (Resource::Disk, DiskMeasure::Bytes) => "bytes",
        (Resource::Disk, DiskMeasure::Requests) => "requests",
        (Resource::Memory, _) => "pages",
    }
}

/// Whether the recording measured the victim's blocked time on `r`.
pub(crate) fn blocked_measured(r: Resource, s: &Sources) -> bool {
    match r {
        Resource::Cpu => s.runq_wait,
        Resource::Disk => s.iowait,
        Resource::Memory => s.mem_stall,
    }
}

/// Whether the recording measured every thread's consumption of `r`.
pub(crate) fn consumption_measured(r: Resource, s: &Sources) -> bool {
    match r {
        Resource::Cpu => s.cpu_time,
        Resource::Disk => s.disk_io,
        Resource::Memory => s.mem_alloc,
    }
}

/// One resource unit: the scope within which tasks contend.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct UnitKey {
    pub resource: Resource,
    /// `cpu3`, a device name (`vda`), or `memory`.
    pub unit: String,
}

impl UnitKey {
    fn cpu(cpu: u32) -> Self {
        Self {
            resource: Resource::Cpu,
            unit: format!("cpu{cpu}"),
        }
    }
    fn disk(dev: &str) -> Self {
        Self {
            resource: Resource::Disk,
            unit: dev.to_string(),
        }
    }
    fn memory() -> Self {
        Self {
            resource: Resource::Memory,
            unit: "memory".to_string(),
        }
    }
}

/// One cause's part of one victim thread's blocked time on one unit in one
/// window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// Task id of the cause; `None` for the unknown cause.
    pub task: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub kind: CauseKind,
    /// δr_c: what the cause consumed of the unit in the window.
    pub consumed: f64,
    /// Its blame contribution (eq. 10), in ns of the victim's blocked time.
    pub blame_ns: f64,
    /// β(c→t) = RATP_t / RATP_c (eq. 6); `None` when the victim consumed
    /// nothing (RATP_t infinite).
    pub beta: Option<f64>,
    /// β̂(c→t) = RATP-blocked_t / RATP_c (eq. 8); `None` likewise.
    pub beta_hat: Option<f64>,
    /// ttp's disk extension: its part of the victim's time waiting behind
    /// others' requests ([`Row::behind_others_ns`]), in proportion to δr_c
    /// among the causes that are not the victim's own process. `None` where
    /// the split was not measured (not disk, or no own-I/O clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind_blame_ns: Option<f64>,
}

/// One victim thread's blocked time on one unit in one window, and its
/// distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub window: usize,
    /// δt, the actual window length.
    pub window_len_ns: u64,
    pub victim_task: u32,
    pub victim_tid: u32,
    #[serde(flatten)]
    pub unit: UnitKey,
    /// BT_t (Sec. 3.4).
    pub blocked_ns: u64,
    /// δr_t: what the victim thread consumed of the unit.
    pub victim_consumed: f64,
    /// RATP_t = δt / δr_t (eq. 2), ns per unit of consumption.
    pub ratp: Option<f64>,
    /// RATP-blocked_t = BT_t / δr_t (eq. 7).
    pub ratp_blocked: Option<f64>,
    /// S_t (eq. 4, with C from eq. 12).
    pub slowdown: Option<f64>,
    /// The p1 (concurrent + own) part of S_t (eq. 5).
    pub slowdown_p1: Option<f64>,
    /// The p2 (known + unknown) part of S_t (eq. 5).
    pub slowdown_p2: Option<f64>,
    /// ttp's disk extension (docs/blame.md, "The victim's own disk
    /// time"): the part of BT during which the device served the victim
    /// process's own requests (the ledger's `iowait_own_ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_service_ns: Option<u64>,
    /// BT − own service: waiting while the device served others, or nobody
    /// the ledger could name. Blamed on the other consumers of the unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind_others_ns: Option<u64>,
    pub shares: Vec<Share>,
}

/// A sanity check over the input (each tied to an invariant of the paper).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    /// Where the invariant comes from.
    pub basis: String,
    pub violations: usize,
    /// The first violation, described.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
}

impl Check {
    fn new(name: &str, basis: &str) -> Self {
        Self {
            name: name.into(),
            basis: basis.into(),
            violations: 0,
            first: None,
        }
    }
    pub(crate) fn fail(&mut self, what: impl FnOnce() -> String) {
        if self.first.is_none() {
            self.first = Some(what());
        }
        self.violations += 1;
    }
    pub fn passed(&self) -> bool {
        self.violations == 0
    }
}

/// Accounted time may exceed the window by this fraction (clock reads at the
/// window edges are not simultaneous on all CPUs) before a check fails.
const TOLERANCE: f64 = 0.02;

/// Consumers of one unit in one window.
#[derive(Debug, Default)]
struct UnitTable {
    /// (task id, δr).
    consumers: Vec<(u32, f64)>,
    /// Consumption the machine counters show that no thread accounts for.
    unknown: f64,
}

/// The rows of every window, and the input checks.
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    pub rows: Vec<Row>,
    pub checks: Vec<Check>,
}

/// Attributes the victim's blocked time in every window of `rec`.
pub(crate) fn attribute(rec: &Recording, cls: &Classifier, opts: &Options) -> Attribution {
    let mut checks = InputChecks::new();
    let mut rows = Vec::new();
    for (i, w) in rec.windows.iter().enumerate() {
        let tables = unit_tables(i, w, &rec.sources, opts.disk_by, &mut checks);
        for tw in w.tasks.iter().filter(|tw| cls.is_victim(tw.task)) {
            let mut blocked: Vec<(UnitKey, u64)> = Vec::new();
            if rec.sources.runq_wait {
                blocked.extend(
                    tw.runq_wait_ns
                        .iter()
                        .map(|(c, ns)| (UnitKey::cpu(*c), *ns)),
                );
            }
            if rec.sources.iowait {
                blocked.extend(tw.iowait_ns.iter().map(|(d, ns)| (UnitKey::disk(d), *ns)));
            }
            if rec.sources.mem_stall {
                blocked.push((UnitKey::memory(), tw.mem_stall_ns));
            }
            checks.victim_wait(i, w, tw.task, &blocked);
            for (unit, bt) in blocked.into_iter().filter(|(_, bt)| *bt > 0) {
                let empty = UnitTable::default();
                let table = tables.get(&unit).unwrap_or(&empty);
                let mut row = distribute(i, w.len_ns(), tw.task, unit, bt, table, cls);
                if row.unit.resource == Resource::Disk && rec.sources.iowait_own {
                    let own = tw.iowait_own_ns.get(&row.unit.unit).copied().unwrap_or(0);
                    split_disk_wait(&mut row, own);
                }
                rows.push(row);
            }
        }
    }
    Attribution {
        rows,
        checks: checks.into_vec(),
    }
}

/// Splits BT of victim thread `victim` on `unit` over its causes.
fn distribute(
    window: usize,
    len_ns: u64,
    victim: u32,
    unit: UnitKey,
    bt_ns: u64,
    table: &UnitTable,
    cls: &Classifier,
) -> Row {
    let dt = len_ns as f64;
    let bt = bt_ns as f64;
    let vc: f64 = table
        .consumers
        .iter()
        .filter(|(t, _)| *t == victim)
        .map(|(_, a)| a)
        .sum();
    let mut causes: Vec<(Option<u32>, CauseKind, f64)> = table
        .consumers
        .iter()
        .filter(|(t, a)| *t != victim && *a > 0.0)
        .map(|&(t, a)| (Some(t), cls.kind(t), a))
        .collect();
    if table.unknown > 0.0 {
        causes.push((None, CauseKind::Unknown, table.unknown));
    }
    let total: f64 = causes.iter().map(|c| c.2).sum();
    // With the victim's own consumption δr_t = 0, RATP_t (eq. 2) and
    // RATP-blocked_t (eq. 7) are infinite: eq. 6, 8 and 4 are undefined, but
    // the eq. 10 proportions (δr_c / Σ δr_c') still are.
    let defined = vc > 0.0;
    let shares: Vec<Share> = if total > 0.0 {
        causes
            .iter()
            .map(|&(task, kind, a)| Share {
                task,
                tid: task.and_then(|t| cls.task(t)).map(|t| t.tid),
                pid: task.and_then(|t| cls.task(t)).map(|t| t.pid),
                kind,
                consumed: a,
                // Eq. 10: BC = β̂_c / Σ β̂ · BT; within one window and unit
                // β̂_c ∝ δr_c (eq. 8 with RATP_c = δt / δr_c, eq. 2).
                blame_ns: bt * a / total,
                // Eq. 6 / 18: RATP_t / RATP_c = (δt/δr_t) / (δt/δr_c).
                beta: defined.then(|| a / vc),
                // Eq. 8: (BT/δr_t) / (δt/δr_c).
                beta_hat: defined.then(|| (bt / vc) / (dt / a)),
                behind_blame_ns: None,
            })
            .collect()
    } else {
        // Nothing measured consumed the unit while the victim was blocked on
        // it: the whole BT is unknown (eq. 5, β_unknown).
        vec![Share {
            task: None,
            tid: None,
            pid: None,
            kind: CauseKind::Unknown,
            consumed: 0.0,
            blame_ns: bt,
            beta: None,
            beta_hat: None,
            behind_blame_ns: None,
        }]
    };
    let p1: f64 = causes.iter().filter(|c| c.1.is_p1()).map(|c| c.2).sum();
    Row {
        window,
        window_len_ns: len_ns,
        victim_task: victim,
        victim_tid: cls.task(victim).map_or(0, |t| t.tid),
        unit,
        blocked_ns: bt_ns,
        victim_consumed: vc,
        ratp: defined.then(|| dt / vc),
        ratp_blocked: defined.then(|| bt / vc),
        // Eq. 4 with RATP* = 1/C, C = (δr_t + Σ δr_c)/δt (eq. 3, 12), which
        // equals the eq. 17 sum Σ δr_c / δr_t.
        slowdown: defined.then(|| total / vc),
        slowdown_p1: defined.then(|| p1 / vc),
        slowdown_p2: defined.then(|| (total - p1) / vc),
        own_service_ns: None,
        behind_others_ns: None,
        shares,
    }
}

/// ttp's extension beyond eq. 10 for the disk (docs/blame.md, "The
/// victim's own disk time"): of the victim thread's iowait BT, `own_ns` is
/// the device serving its own process's requests — time no other process
/// caused — and only the rest, BT − own, is waiting behind others. That rest
/// is shared over the causes other than the victim's own threads in
/// proportion to δr_c, as eq. 10 shares BT; with no such cause it is left
/// unattributed (nobody else used the device in the window). The eq. 10
/// figures (`blame_ns`) are left as they are.
pub(crate) fn split_disk_wait(row: &mut Row, own_ns: u64) {
    let own = own_ns.min(row.blocked_ns);
    let behind = row.blocked_ns - own;
    row.own_service_ns = Some(own);
    row.behind_others_ns = Some(behind);
    let others: f64 = row
        .shares
        .iter()
        .filter(|s| s.kind != CauseKind::Own && s.consumed > 0.0)
        .map(|s| s.consumed)
        .sum();
    for s in &mut row.shares {
        s.behind_blame_ns = Some(if s.kind != CauseKind::Own && s.consumed > 0.0 {
            behind as f64 * s.consumed / others
        } else {
            0.0
        });
    }
}

/// Who consumed each unit in window `w`, and how much no thread explains.
fn unit_tables(
    i: usize,
    w: &Window,
    sources: &Sources,
    disk_by: DiskMeasure,
    checks: &mut InputChecks,
) -> BTreeMap<UnitKey, UnitTable> {
    let mut tables: BTreeMap<UnitKey, UnitTable> = BTreeMap::new();
    for tw in &w.tasks {
        if sources.cpu_time {
            for (cpu, ns) in &tw.on_cpu_ns {
                let t = tables.entry(UnitKey::cpu(*cpu)).or_default();
                t.consumers.push((tw.task, *ns as f64));
            }
        }
        if sources.disk_io {
            let per_dev = match disk_by {
                DiskMeasure::Bytes => &tw.disk_bytes,
                DiskMeasure::Requests => &tw.disk_requests,
            };
            for (dev, n) in per_dev {
                let t = tables.entry(UnitKey::disk(dev)).or_default();
                t.consumers.push((tw.task, *n as f64));
            }
        }
        if sources.mem_alloc && tw.mem_alloc_pages > 0 {
            let t = tables.entry(UnitKey::memory()).or_default();
            t.consumers.push((tw.task, tw.mem_alloc_pages as f64));
        }
    }
    let len = w.len_ns() as f64;
    if sources.cpu_time {
        for c in &w.cpus {
            let t = tables.entry(UnitKey::cpu(c.cpu)).or_default();
            let tasks: f64 = t.consumers.iter().map(|x| x.1).sum();
            // Eq. 12: the capacity of a CPU in δt is δt; what neither a
            // thread nor the idle task used went to an unknown consumer
            // (steal, interrupts). Without the idle time, only the steal
            // time is known to be such.
            t.unknown = match (c.idle_ns, c.steal_ns) {
                (Some(idle), _) => {
                    let used = tasks + idle as f64;
                    let slack = (w.start_read_ns + w.end_read_ns) as f64;
                    checks.cpu_capacity(i, c.cpu, used, len, slack);
                    (len - used).max(0.0)
                }
                (None, Some(steal)) => steal as f64,
                (None, None) => 0.0,
            };
        }
    }
    if sources.disk_io {
        for d in &w.devices {
            let total = match disk_by {
                DiskMeasure::Bytes => d.bytes,
                DiskMeasure::Requests => d.requests,
            };
            if let Some(total) = total {
                let t = tables.entry(UnitKey::disk(&d.device)).or_default();
                let tasks: f64 = t.consumers.iter().map(|x| x.1).sum();
                checks.device_total(i, &d.device, tasks, total as f64);
                // Sec. 5.1 External-IO: device total minus all tasks' usage.
                t.unknown = (total as f64 - tasks).max(0.0);
            }
        }
    }
    tables
}

/// The sanity checks on the input, collected while attributing.
struct InputChecks {
    cpu: Check,
    wait: Check,
    device: Check,
}

impl InputChecks {
    fn new() -> Self {
        Self {
            cpu: Check::new(
                "cpu_time_within_window",
                "eq. 12: what threads and the idle task use of a CPU cannot exceed δt",
            ),
            wait: Check::new(
                "victim_blocked_within_window",
                "Sec. 3.4: a thread's blocked time is bounded by δt",
            ),
            device: Check::new(
                "device_total_covers_threads",
                "Sec. 5.1: a device's total I/O includes every thread's I/O",
            ),
        }
    }

    /// Eq. 12; `slack` is how long the reads of the window's two edges
    /// took (a switch inside them counts on a thread and the idle task).
    fn cpu_capacity(&mut self, i: usize, cpu: u32, used: f64, len: f64, slack: f64) {
        if used > len * (1.0 + TOLERANCE) + slack {
            self.cpu.fail(|| {
                format!("window {i}, cpu{cpu}: {used:.0} ns accounted in a {len:.0} ns window")
            });
        }
    }

    fn victim_wait(&mut self, i: usize, w: &Window, task: u32, blocked: &[(UnitKey, u64)]) {
        let len = w.len_ns() as f64;
        for r in Resource::ALL {
            let sum: u64 = blocked
                .iter()
                .filter(|(u, _)| u.resource == r)
                .map(|b| b.1)
                .sum();
            if sum as f64 > len * (1.0 + TOLERANCE) {
                self.wait.fail(|| {
                    format!(
                        "window {i}, task {task}: {sum} ns blocked on {} in a {len:.0} ns window",
                        r.name()
                    )
                });
            }
        }
    }

    fn device_total(&mut self, i: usize, dev: &str, tasks: f64, total: f64) {
        if tasks > total * (1.0 + TOLERANCE) {
            self.device.fail(|| {
                format!(
                    "window {i}, {dev}: threads account for {tasks:.0}, device total {total:.0}"
                )
            });
        }
    }

    fn into_vec(self) -> Vec<Check> {
        vec![self.cpu, self.wait, self.device]
    }
}
