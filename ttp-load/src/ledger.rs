//! `--attach-pid PID`: the kernel ledger of a server process, one row per
//! second of a load phase, beside the latency timeline — so a latency spike
//! can be read next to what the server was doing (on CPU, waiting for a CPU,
//! waiting for its I/O, reading and writing).
//!
//! The process is taken with its descendants (a PostgreSQL postmaster with
//! the backends serving the load), followed through the parent links the
//! ledger saw at fork and /proc's for older processes.
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use serde::Serialize;
use ttp_common::ExitRecord;

use super::driver::TimelineSampler;
use ttp_ledger::{
    accounts::{Image, LedgerColumns, LedgerMeasures, Window},
    probe::Ledger,
};

/// One second of the process tree's ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct LedgerRow {
    pub second: u64,
    pub pid: u32,
    /// Processes of the tree that ran in this second.
    pub processes: u32,
    /// The tree's ledger counters, summed.
    #[serde(flatten)]
    pub ledger: LedgerColumns,
    /// Ledger records lost in this second (non-zero: the row is a lower bound).
    pub lost_records: u64,
}

impl LedgerRow {
    /// Sums the measures of the processes in `tree` over `w`.
    pub fn of(second: u64, pid: u32, w: &Window, tree: &[u32]) -> Self {
        let mut m = LedgerMeasures::default();
        let mut processes = 0;
        for p in tree.iter().filter_map(|t| w.processes.get(t)) {
            if p.threads > 0 {
                processes += 1;
            }
            m += p.kernel;
        }
        LedgerRow {
            second,
            pid,
            processes,
            ledger: LedgerColumns::from(&m),
            lost_records: w.lost.losses(),
        }
    }
}

/// The sampler; several phases share one attached ledger.
pub struct LedgerSampler {
    ledger: Arc<Mutex<Ledger>>,
    pid: u32,
    prev: Option<Image>,
    exits: Vec<ExitRecord>,
}

impl LedgerSampler {
    pub fn new(ledger: Arc<Mutex<Ledger>>, pid: u32) -> Self {
        Self {
            ledger,
            pid,
            prev: None,
            exits: Vec::new(),
        }
    }

    fn wake_latency_measured(&self) -> bool {
        let l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        l.wake_latency_measured()
    }

    fn image(&mut self) -> Option<Image> {
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let snap = l.snapshot().ok()?;
        // The image first, then the exit records (see window::qe).
        let img = Image::from_snapshot(&snap);
        l.drain_exits(&mut self.exits);
        Some(img)
    }
}

/// Parent of every process in `w` that /proc still shows.
fn proc_parents(w: &Window) -> HashMap<u32, u32> {
    w.processes
        .keys()
        .filter_map(|&p| {
            let stat = procfs::process::Process::new(p as i32).ok()?.stat().ok()?;
            Some((p, stat.ppid.max(0) as u32))
        })
        .collect()
}

impl TimelineSampler for LedgerSampler {
    fn name(&self) -> &'static str {
        "ledger"
    }

    fn start(&mut self) {
        self.exits.clear();
        self.prev = self.image();
        self.exits.clear();
    }

    fn sample(&mut self, second: u64) -> serde_json::Value {
        let now = self.image();
        let row = match (&self.prev, &now) {
            (Some(before), Some(after)) => {
                let w = Window::between(before, after, &self.exits);
                let tree: Vec<u32> = w
                    .descendants(&[self.pid], &proc_parents(&w))
                    .into_iter()
                    .collect();
                let mut row = LedgerRow::of(second, self.pid, &w, &tree);
                if !self.wake_latency_measured() {
                    // Not taken without the wake-up hook: left out, as a
                    // column not known is (docs/ledger.md).
                    row.ledger.wake_latency_ns = None;
                }
                serde_json::to_value(row).unwrap_or_default()
            }
            _ => {
                serde_json::json!({"second": second, "pid": self.pid, "error": "ledger not readable"})
            }
        };
        self.prev = now;
        self.exits.clear();
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_ledger::accounts::ProcessDelta;

    /// Hand-computed sums: the tree's processes add up, a process outside
    /// the tree does not count. Catches a row of the root alone (a
    /// postmaster does no query work) or of the whole machine.
    #[test]
    fn row_sums_the_tree_only() {
        let mut w = Window::default();
        for (tgid, cpu, read) in [(10, 1_000, 4096), (11, 2_000, 8192), (99, 50_000, 1)] {
            let mut k = LedgerMeasures {
                on_cpu_ns: cpu,
                ..LedgerMeasures::default()
            };
            k.io.read_bytes = read;
            w.processes.insert(
                tgid,
                ProcessDelta {
                    tgid,
                    threads: 1,
                    kernel: k,
                    ..ProcessDelta::default()
                },
            );
        }
        let r = LedgerRow::of(3, 10, &w, &[10, 11]);
        assert_eq!(r.ledger.on_cpu_ns, Some(3_000));
        assert_eq!(r.ledger.read_bytes, Some(12_288));
        assert_eq!(r.processes, 2);
        assert_eq!(r.second, 3);
    }
}
