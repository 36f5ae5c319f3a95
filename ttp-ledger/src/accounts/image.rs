//! Images of the ledger at one instant, and windows between two images.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use ttp_common::{ExitRecord, ThreadAccount};

use super::{
    close::{CpuTimes, close, close_cpu},
    keys::{ThreadKey, comm},
    measures::LedgerMeasures,
};
use crate::probe::{KernelStats, Snapshot};

/// Every thread account closed at `at_ns`.
#[derive(Debug, Clone, Default)]
pub struct Image {
    pub at_ns: u64,
    pub threads: HashMap<ThreadKey, ThreadAccount>,
    pub cpus: BTreeMap<u32, CpuTimes>,
    pub stats: KernelStats,
}

impl Image {
    pub fn from_snapshot(s: &Snapshot) -> Self {
        Self {
            at_ns: s.at_ns,
            threads: s
                .threads
                .iter()
                .map(|a| (ThreadKey::of(a), close(a, s)))
                .collect(),
            cpus: s
                .cpus
                .iter()
                .map(|(id, c)| (*id, close_cpu(c, s.at_ns)))
                .collect(),
            stats: s.stats,
        }
    }
}

/// A process's measures over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessDelta {
    pub tgid: u32,
    pub comm: String,
    /// tgid of its parent when the ledger saw it fork.
    pub parent_tgid: Option<u32>,
    /// Threads that ran in the window.
    pub threads: u32,
    /// Its main thread exited within the window.
    pub exited: bool,
    pub kernel: LedgerMeasures,
}

/// The ledger's account of a window: per process, per CPU, and what was lost.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
    pub processes: BTreeMap<u32, ProcessDelta>,
    pub cpus: BTreeMap<u32, CpuTimes>,
    pub lost: KernelStats,
    /// Threads that were in the first image but neither in the second nor
    /// in an exit record (their end is unknown; non-zero means lost records).
    pub vanished_threads: u32,
}

impl Window {
    /// Measures between `before` and `after`; `exits` are the exit records
    /// received up to `after` (records from outside the window are ignored).
    pub fn between(before: &Image, after: &Image, exits: &[ExitRecord]) -> Self {
        // An image's time is read after its maps, so a thread read into the
        // first image may exit before that time: its record (exit_ns <=
        // before.at_ns) still ends it inside the window, or it would count
        // as vanished. Earlier records of threads not in the image are not
        // the window's.
        let exited: HashMap<ThreadKey, &ExitRecord> = exits
            .iter()
            .filter(|e| {
                e.exit_ns <= after.at_ns
                    && (e.exit_ns > before.at_ns
                        || before.threads.contains_key(&ThreadKey::of(&e.account)))
            })
            .map(|e| (ThreadKey::of(&e.account), e))
            .collect();
        let mut w = Window {
            start_ns: before.at_ns,
            end_ns: after.at_ns,
            lost: after.stats.since(&before.stats),
            ..Default::default()
        };
        let keys: BTreeSet<ThreadKey> = after
            .threads
            .keys()
            .chain(exited.keys())
            .chain(before.threads.keys())
            .copied()
            .collect();
        for key in keys {
            let (last, from_exit) = match (after.threads.get(&key), exited.get(&key)) {
                (Some(a), _) => (a, false),
                (None, Some(e)) => (&e.account, true),
                (None, None) => {
                    w.vanished_threads += 1;
                    continue;
                }
            };
            let first = before
                .threads
                .get(&key)
                .map(LedgerMeasures::of)
                .unwrap_or_default();
            let delta = LedgerMeasures::of(last).since(&first);
            let p = w
                .processes
                .entry(last.tgid)
                .or_insert_with(|| ProcessDelta {
                    tgid: last.tgid,
                    ..Default::default()
                });
            let is_leader = last.tid == last.tgid;
            if is_leader || p.comm.is_empty() {
                p.comm = comm(last);
            }
            if last.parent_tgid != 0 && (is_leader || p.parent_tgid.is_none()) {
                p.parent_tgid = Some(last.parent_tgid);
            }
            if is_leader && from_exit {
                p.exited = true;
            }
            if delta != LedgerMeasures::default() {
                p.threads += 1;
            }
            p.kernel += delta;
        }
        w.cpus = after
            .cpus
            .iter()
            .map(|(id, t)| {
                (
                    *id,
                    t.since(&before.cpus.get(id).copied().unwrap_or_default()),
                )
            })
            .collect();
        w
    }

    /// `roots` and every process descended from them, following the parent
    /// links the ledger recorded at fork plus `extra_parents` (tgid → parent
    /// tgid, e.g. from /proc for processes older than the probes).
    pub fn descendants(&self, roots: &[u32], extra_parents: &HashMap<u32, u32>) -> BTreeSet<u32> {
        let parent_of = |tgid: u32| {
            self.processes
                .get(&tgid)
                .and_then(|p| p.parent_tgid)
                .or_else(|| extra_parents.get(&tgid).copied())
        };
        let mut set: BTreeSet<u32> = roots.iter().copied().collect();
        let all: Vec<u32> = self
            .processes
            .keys()
            .chain(extra_parents.keys())
            .copied()
            .collect();
        loop {
            let before = set.len();
            for &t in &all {
                if !set.contains(&t)
                    && let Some(p) = parent_of(t)
                    && set.contains(&p)
                {
                    set.insert(t);
                }
            }
            if set.len() == before {
                return set;
            }
        }
    }

    /// Sum over the CPUs.
    pub fn cpu_total(&self) -> CpuTimes {
        self.cpus.values().fold(CpuTimes::default(), |mut acc, c| {
            acc.busy_ns += c.busy_ns;
            acc.idle_ns += c.idle_ns;
            acc.iowait_ns += c.iowait_ns;
            acc
        })
    }
}
