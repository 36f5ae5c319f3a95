//! Tests on constructed windows whose answer is computed by hand.
use std::collections::BTreeMap;

use super::input::{
    CpuWindow, DeviceWindow, RECORDING_SCHEMA, Recording, Sources, TaskInfo, TaskWindow,
    VictimSpec, Window,
};

mod attribution;
mod graph;
mod scenario;
mod source;

pub(crate) const MS: u64 = 1_000_000;
pub(crate) const MIB: u64 = 1 << 20;

pub(crate) fn all_sources() -> Sources {
    Sources {
        cpu_time: true,
        runq_wait: true,
        iowait: true,
        disk_io: true,
        mem_stall: true,
        mem_alloc: true,
        iowait_own: true,
    }
}

/// A single-threaded process (tid = pid = id).
pub(crate) fn proc_task(pid: u32, comm: &str) -> TaskInfo {
    TaskInfo {
        id: pid,
        tid: pid,
        pid,
        ppid: Some(1),
        comm: comm.into(),
        process_comm: None,
        cgroup: None,
        unit: Some(format!("{comm}.service")),
        uid: Some(1000),
        user: None,
        kernel_thread: false,
        start_ns: None,
        exit_ns: None,
    }
}

pub(crate) fn kthread(pid: u32, comm: &str) -> TaskInfo {
    TaskInfo {
        kernel_thread: true,
        ppid: Some(2),
        unit: None,
        uid: Some(0),
        ..proc_task(pid, comm)
    }
}

pub(crate) fn recording(
    victim: u32,
    window_ns: u64,
    tasks: Vec<TaskInfo>,
    windows: Vec<Window>,
) -> Recording {
    Recording {
        schema: RECORDING_SCHEMA.into(),
        window_ns,
        victim: VictimSpec {
            pid: victim,
            children: false,
        },
        sources: all_sources(),
        tasks,
        windows,
    }
}

/// Window `i` of length `len` after consecutive windows of length `len`.
pub fn window(i: u64, len: u64) -> Window {
    Window {
        start_ns: i * len,
        end_ns: (i + 1) * len,
        cpus: Vec::new(),
        devices: Vec::new(),
        tasks: Vec::new(),
        start_read_ns: 0,
        end_read_ns: 0,
    }
}

pub(crate) fn cpu(cpu: u32, idle_ns: Option<u64>, steal_ns: Option<u64>) -> CpuWindow {
    CpuWindow {
        cpu,
        idle_ns,
        steal_ns,
    }
}

pub(crate) fn device(name: &str, bytes: Option<u64>, requests: Option<u64>) -> DeviceWindow {
    DeviceWindow {
        device: name.into(),
        bytes,
        requests,
    }
}

/// Builder for one thread's window.
pub(crate) struct Tw(pub TaskWindow);

impl Tw {
    pub fn new(task: u32) -> Self {
        Self(TaskWindow {
            task,
            ..Default::default()
        })
    }
    pub(crate) fn on_cpu(mut self, cpu: u32, ns: u64) -> Self {
        self.0.on_cpu_ns.insert(cpu, ns);
        self
    }
    pub(crate) fn wait(mut self, cpu: u32, ns: u64) -> Self {
        self.0.runq_wait_ns.insert(cpu, ns);
        self
    }
    pub(crate) fn iowait(mut self, dev: &str, ns: u64) -> Self {
        self.0.iowait_ns.insert(dev.into(), ns);
        self
    }
    pub(crate) fn iowait_own(mut self, dev: &str, ns: u64) -> Self {
        self.0.iowait_own_ns.insert(dev.into(), ns);
        self
    }
    pub(crate) fn io(mut self, dev: &str, bytes: u64, requests: u64) -> Self {
        self.0.disk_bytes.insert(dev.into(), bytes);
        self.0.disk_requests.insert(dev.into(), requests);
        self
    }
    pub(crate) fn mem(mut self, stall_ns: u64, pages: u64) -> Self {
        self.0.mem_stall_ns = stall_ns;
        self.0.mem_alloc_pages = pages;
        self
    }
    pub(crate) fn done(self) -> TaskWindow {
        self.0
    }
}

/// Relative closeness, for values computed by hand.
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// Blame per (pid or None for unknown, resource) over all rows.
pub(crate) fn blame_by_pid(
    report: &super::BlameReport,
) -> BTreeMap<(Option<u32>, ttp_window::window::blame_record::Resource), f64> {
    let mut m = BTreeMap::new();
    for c in &report.culprits {
        for (r, ns) in &c.by_resource {
            m.insert((c.pid, *r), *ns);
        }
    }
    m
}
