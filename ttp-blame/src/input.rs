//! The input of contention blame: a sequence of windows of length δt, each
//! holding what every thread blocked on and consumed (iQCAR Sec. 5.3: "the
//! time-series data for its blocked-time and the corresponding data processed
//! metrics"). The live source fills it from the kernel ledger; `blame --from`
//! reads it back from a JSON recording (schema [`RECORDING_SCHEMA`]).
//!
//! Absent is not zero: a whole source the kernel could not measure is marked
//! in [`Sources`]; per-CPU and per-device machine counters are `Option`.
//! Within a measured source, a thread missing from a window's `tasks` (or a
//! CPU/device missing from its maps) consumed and waited for nothing there.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::error::BlameError;

/// Value of [`Recording::schema`].
pub(crate) const RECORDING_SCHEMA: &str = "ttp.blame-input/1";

/// Everything the analysis needs, for one victim over consecutive windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    pub schema: String,
    /// Nominal window length δt; the last window may be shorter (the victim
    /// exited, or the measurement stopped).
    pub window_ns: u64,
    pub victim: VictimSpec,
    pub sources: Sources,
    /// Identity of every thread alive at some point of the recording, the
    /// victim's included, also threads that never ran (the overlap baseline
    /// needs them).
    pub tasks: Vec<TaskInfo>,
    pub windows: Vec<Window>,
}

/// The process whose blocked time is explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VictimSpec {
    pub pid: u32,
    /// Also count the processes it forks (transitively) as the victim.
    #[serde(default)]
    pub children: bool,
}

impl VictimSpec {
    /// The victim's processes: `pid` and, with `children`, every process
    /// of `tasks` whose parent chain reaches it.
    pub(crate) fn processes(&self, tasks: &[TaskInfo]) -> BTreeSet<u32> {
        let mut pids = BTreeSet::from([self.pid]);
        if self.children {
            // Fixed point over ppid links: each pass adds one generation.
            loop {
                let before = pids.len();
                for t in tasks {
                    if t.ppid.is_some_and(|p| pids.contains(&p)) {
                        pids.insert(t.pid);
                    }
                }
                if pids.len() == before {
                    break;
                }
            }
        }
        pids
    }
}

/// Which ledger sources were measured. A source set to `false` makes the
/// report say "not measured" instead of showing zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sources {
    /// `on_cpu_ns` per CPU for every thread.
    pub cpu_time: bool,
    /// `runq_wait_ns` per CPU for the victim's threads.
    pub runq_wait: bool,
    /// `iowait_ns` per device for the victim's threads.
    pub iowait: bool,
    /// `disk_bytes` / `disk_requests` per device for every thread.
    pub disk_io: bool,
    /// `mem_stall_ns` (direct reclaim + compaction) for the victim's threads.
    pub mem_stall: bool,
    /// `mem_alloc_pages` for every thread.
    pub mem_alloc: bool,
    /// `iowait_own_ns` per device for the victim's threads (ttp's
    /// extension: the part of iowait the disk spent on its own requests).
    #[serde(default)]
    pub iowait_own: bool,
}

/// Identity of one thread; `id` is unique in the recording, so a reused tid
/// is a new entry (the ledger keys threads by tid and start time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInfo {
    pub id: u32,
    pub tid: u32,
    /// Thread-group id: the process.
    pub pid: u32,
    /// Parent of the process (needed for `--children`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    /// Thread name.
    pub comm: String,
    /// Name of the process (its main thread); `comm` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_comm: Option<String>,
    /// cgroup v2 path, e.g. `/system.slice/nginx.service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// systemd unit, e.g. `nginx.service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// A kernel thread (PF_KTHREAD): kworker, jbd2, kswapd, ksoftirqd …
    #[serde(default)]
    pub kernel_thread: bool,
    /// Start time on the windows' clock; absent = before the recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ns: Option<u64>,
    /// Exit time on the windows' clock; absent = still alive at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_ns: Option<u64>,
}

impl TaskInfo {
    /// The process name shown in reports.
    pub(crate) fn process_name(&self) -> &str {
        self.process_comm.as_deref().unwrap_or(&self.comm)
    }
}

/// One window [start_ns, end_ns) on a monotonic clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Machine counters per CPU: every online CPU, in every window.
    #[serde(default)]
    pub cpus: Vec<CpuWindow>,
    /// Machine counters per block device: every device with requests.
    #[serde(default)]
    pub devices: Vec<DeviceWindow>,
    /// Threads that consumed or waited for something in this window.
    #[serde(default)]
    pub tasks: Vec<TaskWindow>,
    /// How long the reads of the edge at `start_ns` took (from the first
    /// read to the instant that closed every open interval). A switch inside
    /// them can count the same time on a thread and on the idle task, so the
    /// capacity check (eq. 12) allows it. 0 when not recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub start_read_ns: u64,
    /// The same for the edge at `end_ns`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub end_read_ns: u64,
}

impl Window {
    /// δt of this window (Sec. 3.1, eq. 1), the actual length.
    pub(crate) fn len_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Per-CPU machine counters in one window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuWindow {
    pub cpu: u32,
    /// Time the CPU spent in its idle state (the ledger's idle + iowait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ns: Option<u64>,
    /// Time the hypervisor ran something else on this vCPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ns: Option<u64>,
}

/// Per-device machine counters in one window: every request completed,
/// whoever issued it (the paper's External-IO, Sec. 5.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceWindow {
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
}

/// What one thread consumed and waited for in one window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskWindow {
    /// [`TaskInfo::id`].
    pub task: u32,
    /// CPU time consumed, per CPU.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub on_cpu_ns: BTreeMap<u32, u64>,
    /// Time runnable but waiting in the run queue, per CPU of that queue.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runq_wait_ns: BTreeMap<u32, u64>,
    /// Time blocked in iowait, per device it waited for.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub iowait_ns: BTreeMap<String, u64>,
    /// Part of `iowait_ns` during which the device served its process's own
    /// requests (the ledger's `iowait_own_ns`), per device.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub iowait_own_ns: BTreeMap<String, u64>,
    /// Bytes of its requests completed, per device.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disk_bytes: BTreeMap<String, u64>,
    /// Its requests completed, per device.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disk_requests: BTreeMap<String, u64>,
    /// Time stalled in direct reclaim or compaction.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mem_stall_ns: u64,
    /// Pages allocated.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mem_alloc_pages: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Recording {
    /// Structural checks: a recording that fails them cannot be analysed.
    pub fn validate(&self) -> Result<(), BlameError> {
        let bad = |what: String| Err(BlameError::InvalidRecording { what });
        if self.schema != RECORDING_SCHEMA {
            return bad(format!(
                "schema is {:?}, expected {RECORDING_SCHEMA:?}",
                self.schema
            ));
        }
        if self.window_ns == 0 {
            return bad("window_ns is 0".into());
        }
        let mut ids = BTreeSet::new();
        for t in &self.tasks {
            if !ids.insert(t.id) {
                return bad(format!("task id {} appears twice in tasks", t.id));
            }
        }
        let mut prev_end = 0;
        for (i, w) in self.windows.iter().enumerate() {
            if w.end_ns <= w.start_ns {
                return bad(format!("window {i} ends at or before its start"));
            }
            if w.start_ns < prev_end {
                return bad(format!("window {i} starts before window {} ends", i - 1));
            }
            prev_end = w.end_ns;
            let mut seen = BTreeSet::new();
            for tw in &w.tasks {
                if !ids.contains(&tw.task) {
                    return Err(BlameError::UnknownTask {
                        window: i,
                        task: tw.task,
                    });
                }
                if !seen.insert(tw.task) {
                    return bad(format!("task {} listed twice in window {i}", tw.task));
                }
            }
        }
        Ok(())
    }

    /// Ids of the victim's threads: the process `spec.pid` and, with
    /// `children`, every process whose parent chain reaches it.
    pub(crate) fn victim_tasks(&self, spec: &VictimSpec) -> Result<BTreeSet<u32>, BlameError> {
        let pids = spec.processes(&self.tasks);
        let ids: BTreeSet<u32> = self
            .tasks
            .iter()
            .filter(|t| pids.contains(&t.pid))
            .map(|t| t.id)
            .collect();
        if ids.is_empty() {
            return Err(BlameError::NoVictim { pid: spec.pid });
        }
        Ok(ids)
    }

    /// Keeps the windows that start within `duration_ns` of the first one.
    pub fn truncate(&mut self, duration_ns: u64) {
        if let Some(first) = self.windows.first().map(|w| w.start_ns) {
            self.windows
                .retain(|w| w.start_ns < first.saturating_add(duration_ns));
        }
    }

    /// Merges every `factor` consecutive windows into one (a longer δt, to
    /// see how explanations depend on it, Sec. 6.3.1). Counters add up;
    /// a machine counter absent in any part is absent in the sum.
    pub fn merge_windows(&mut self, factor: usize) {
        if factor <= 1 {
            return;
        }
        self.window_ns = self.window_ns.saturating_mul(factor as u64);
        let windows = std::mem::take(&mut self.windows);
        self.windows = windows.chunks(factor).map(merge_chunk).collect();
    }
}

fn merge_chunk(chunk: &[Window]) -> Window {
    let mut cpus: BTreeMap<u32, CpuWindow> = BTreeMap::new();
    let mut devices: BTreeMap<String, DeviceWindow> = BTreeMap::new();
    let mut tasks: BTreeMap<u32, TaskWindow> = BTreeMap::new();
    let add_opt = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
    for (i, w) in chunk.iter().enumerate() {
        // A CPU or device missing from some part has no counters there.
        let listed_cpus: BTreeSet<u32> = w.cpus.iter().map(|c| c.cpu).collect();
        for c in cpus.values_mut() {
            if !listed_cpus.contains(&c.cpu) {
                c.idle_ns = None;
                c.steal_ns = None;
            }
        }
        for c in &w.cpus {
            let e = cpus.entry(c.cpu).or_insert_with(|| CpuWindow {
                cpu: c.cpu,
                idle_ns: if i == 0 { Some(0) } else { None },
                steal_ns: if i == 0 { Some(0) } else { None },
            });
            e.idle_ns = add_opt(e.idle_ns, c.idle_ns);
            e.steal_ns = add_opt(e.steal_ns, c.steal_ns);
        }
        let listed_devs: BTreeSet<&str> = w.devices.iter().map(|d| d.device.as_str()).collect();
        for d in devices.values_mut() {
            if !listed_devs.contains(d.device.as_str()) {
                d.bytes = None;
                d.requests = None;
            }
        }
        for d in &w.devices {
            let e = devices
                .entry(d.device.clone())
                .or_insert_with(|| DeviceWindow {
                    device: d.device.clone(),
                    bytes: if i == 0 { Some(0) } else { None },
                    requests: if i == 0 { Some(0) } else { None },
                });
            e.bytes = add_opt(e.bytes, d.bytes);
            e.requests = add_opt(e.requests, d.requests);
        }
        for t in &w.tasks {
            let e = tasks.entry(t.task).or_insert_with(|| TaskWindow {
                task: t.task,
                ..Default::default()
            });
            add_map(&mut e.on_cpu_ns, &t.on_cpu_ns);
            add_map(&mut e.runq_wait_ns, &t.runq_wait_ns);
            add_map(&mut e.iowait_ns, &t.iowait_ns);
            add_map(&mut e.disk_bytes, &t.disk_bytes);
            add_map(&mut e.disk_requests, &t.disk_requests);
            e.mem_stall_ns = e.mem_stall_ns.saturating_add(t.mem_stall_ns);
            e.mem_alloc_pages = e.mem_alloc_pages.saturating_add(t.mem_alloc_pages);
        }
    }
    Window {
        start_ns: chunk.first().map_or(0, |w| w.start_ns),
        end_ns: chunk.last().map_or(0, |w| w.end_ns),
        cpus: cpus.into_values().collect(),
        devices: devices.into_values().collect(),
        tasks: tasks.into_values().collect(),
        start_read_ns: chunk.first().map_or(0, |w| w.start_read_ns),
        end_read_ns: chunk.last().map_or(0, |w| w.end_read_ns),
    }
}

fn add_map<K: Ord + Clone>(into: &mut BTreeMap<K, u64>, from: &BTreeMap<K, u64>) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}
