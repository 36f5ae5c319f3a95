//! The blame detail (ttp-ebpf/src/detail.rs), seen from userspace: which of
//! its programs this kernel runs, and reading and pruning its maps.
//!
//! The detail is loaded by [`Ledger::attach_blame`] only. For every other
//! command the loader leaves `DETAIL_ENABLED` at 0 (the sched_switch hooks
//! are then dead code the verifier removes), attaches none of these programs
//! and shrinks these maps to one entry each.
use aya::{
    EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray},
};
use ttp_common::detail::{
    DeviceIo, MemStall, ThreadCpu, ThreadCpuKey, ThreadDevIo, ThreadDevKey, stat,
};

use super::{Ledger, ProbeError, btf::DetailOffsets};

/// Maps of the detail programs, shrunk to one entry when not in blame mode.
const DETAIL_MAPS: &[&str] = &["THREAD_CPU", "THREAD_DEV", "UNOWNED_IO", "MEM_STALL"];

/// What each detail program measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Disk,
    DirectReclaim,
    MemcgReclaim,
    Compaction,
}

/// Detail programs: (program, tp_btf tracepoint, what it measures).
pub(super) const DETAIL_PROGRAMS: &[(&str, &str, Part)] = &[
    ("detail_block_rq_complete", "block_rq_complete", Part::Disk),
    (
        "detail_reclaim_begin",
        "mm_vmscan_direct_reclaim_begin",
        Part::DirectReclaim,
    ),
    (
        "detail_reclaim_end",
        "mm_vmscan_direct_reclaim_end",
        Part::DirectReclaim,
    ),
    (
        "detail_memcg_reclaim_begin",
        "mm_vmscan_memcg_reclaim_begin",
        Part::MemcgReclaim,
    ),
    (
        "detail_memcg_reclaim_end",
        "mm_vmscan_memcg_reclaim_end",
        Part::MemcgReclaim,
    ),
    (
        "detail_compaction_begin",
        "mm_compaction_begin",
        Part::Compaction,
    ),
    (
        "detail_compaction_end",
        "mm_compaction_end",
        Part::Compaction,
    ),
];

/// What the detail measures on this kernel. Per-CPU on-CPU time and
/// run-queue wait are always there (they live in sched_switch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DetailAvailability {
    /// Bytes and requests completed per device and owner thread.
    pub disk_devices: bool,
    /// Direct-reclaim stalls (the memory source needs at least these).
    pub direct_reclaim: bool,
    /// Reclaim forced by a cgroup's memory limit.
    pub memcg_reclaim: bool,
    /// Direct-compaction stalls.
    pub compaction: bool,
    /// Why a part is missing, for the user.
    pub notes: Vec<String>,
}

impl DetailAvailability {
    pub(super) fn set(&mut self, part: Part, on: bool) {
        let slot = match part {
            Part::Disk => &mut self.disk_devices,
            Part::DirectReclaim => &mut self.direct_reclaim,
            Part::MemcgReclaim => &mut self.memcg_reclaim,
            Part::Compaction => &mut self.compaction,
        };
        *slot = on;
    }
}

/// The parts whose offsets this kernel's BTF has, decided before loading.
pub(super) struct Plan {
    globals: Vec<(&'static str, u32)>,
    pub(super) skip: Vec<Part>,
    pub(super) notes: Vec<String>,
}

impl Plan {
    pub(super) fn new(offsets: DetailOffsets) -> Self {
        let mut plan = Plan {
            globals: vec![("DETAIL_ENABLED", 1)],
            skip: Vec::new(),
            notes: Vec::new(),
        };
        match offsets.disk {
            Ok(g) => plan.globals.extend(g),
            Err(e) => {
                plan.skip.push(Part::Disk);
                plan.notes
                    .push(format!("disk I/O per device not measured: {e}"));
            }
        }
        match offsets.compaction {
            Ok(g) => plan.globals.push(g),
            Err(e) => {
                plan.skip.push(Part::Compaction);
                plan.notes
                    .push(format!("compaction stalls not measured: {e}"));
            }
        }
        plan
    }

    pub(super) fn configure<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        for (name, value) in &self.globals {
            loader.override_global(name, value, true);
        }
    }
}

/// Outside blame mode: the detail maps are never written, keep them tiny.
pub(super) fn shrink_maps(loader: &mut EbpfLoader<'_>) {
    for name in DETAIL_MAPS {
        loader.map_max_entries(name, 1);
    }
}

/// Kernel-side counters of the detail programs, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DetailStats {
    pub thread_cpu_full: u64,
    pub thread_dev_full: u64,
    pub device_full: u64,
    pub mem_full: u64,
    pub read_failed: u64,
}

impl DetailStats {
    /// Updates that were lost (a map was full or a kernel read failed).
    pub fn losses(&self) -> u64 {
        self.thread_cpu_full
            + self.thread_dev_full
            + self.device_full
            + self.mem_full
            + self.read_failed
    }
}

/// The detail maps of a ledger loaded in blame mode.
pub(super) struct DetailMaps {
    thread_cpu: HashMap<MapData, ThreadCpuKey, ThreadCpu>,
    thread_dev: HashMap<MapData, ThreadDevKey, ThreadDevIo>,
    unowned: HashMap<MapData, u32, DeviceIo>,
    mem: HashMap<MapData, u32, MemStall>,
    stats: PerCpuArray<MapData, u64>,
    pub(super) availability: DetailAvailability,
}

impl DetailMaps {
    pub(super) fn take(
        ebpf: &mut aya::Ebpf,
        availability: DetailAvailability,
    ) -> Result<Self, ProbeError> {
        Ok(Self {
            thread_cpu: super::take(ebpf, "THREAD_CPU")?,
            thread_dev: super::take(ebpf, "THREAD_DEV")?,
            unowned: super::take(ebpf, "UNOWNED_IO")?,
            mem: super::take(ebpf, "MEM_STALL")?,
            stats: super::take(ebpf, "DETAIL_STATS")?,
            availability,
        })
    }
}

/// Every detail entry as read at `at_ns` (CLOCK_MONOTONIC, taken after the
/// maps were read).
#[derive(Debug, Clone, Default)]
pub struct DetailSnapshot {
    pub at_ns: u64,
    pub thread_cpu: Vec<(ThreadCpuKey, ThreadCpu)>,
    pub thread_dev: Vec<(ThreadDevKey, ThreadDevIo)>,
    /// I/O completed per device without a known owner.
    pub unowned: Vec<(u32, DeviceIo)>,
    pub mem: Vec<(u32, MemStall)>,
    pub stats: DetailStats,
}

fn entries<K: aya::Pod, V: aya::Pod>(
    map: &HashMap<MapData, K, V>,
    name: &str,
) -> Result<Vec<(K, V)>, ProbeError> {
    super::batch::hash_entries(map).map_err(|source| ProbeError::Map {
        map: name.into(),
        source: Box::new(source),
    })
}

/// The detail entries of one thread that is gone: its (thread, CPU) and
/// (thread, device) pairs and its memory-stall account.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadDetailKeys {
    pub tid: u32,
    pub cpus: Vec<u32>,
    pub devs: Vec<u32>,
}

impl Ledger {
    /// What the detail measures here; `None` unless loaded by
    /// [`Ledger::attach_blame`].
    pub fn detail_availability(&self) -> Option<&DetailAvailability> {
        self.detail.as_ref().map(|d| &d.availability)
    }

    /// Reads every detail map; `None` unless loaded in blame mode. The
    /// (thread, CPU) pairs are read first, so that a reader can read the
    /// CPUs' idle state right after them (see [`Ledger::cpu_accounts`]).
    pub fn detail_snapshot(&self) -> Result<Option<DetailSnapshot>, ProbeError> {
        let Some(d) = &self.detail else {
            return Ok(None);
        };
        let mut counters = [0u64; stat::COUNT as usize];
        for (i, slot) in counters.iter_mut().enumerate() {
            let per_cpu = d
                .stats
                .get(&(i as u32), 0)
                .map_err(|source| ProbeError::Map {
                    map: "DETAIL_STATS".into(),
                    source: Box::new(source),
                })?;
            *slot = per_cpu.iter().sum();
        }
        Ok(Some(DetailSnapshot {
            thread_cpu: entries(&d.thread_cpu, "THREAD_CPU")?,
            thread_dev: entries(&d.thread_dev, "THREAD_DEV")?,
            unowned: entries(&d.unowned, "UNOWNED_IO")?,
            mem: entries(&d.mem, "MEM_STALL")?,
            stats: DetailStats {
                thread_cpu_full: counters[stat::THREAD_CPU_FULL as usize],
                thread_dev_full: counters[stat::THREAD_DEV_FULL as usize],
                device_full: counters[stat::DEVICE_FULL as usize],
                mem_full: counters[stat::MEM_FULL as usize],
                read_failed: counters[stat::READ_FAILED as usize],
            },
            at_ns: ttp_sys::sys::clock::monotonic_ns(),
        }))
    }

    /// Forgets the detail entries of threads that are gone. Entries stay
    /// after a thread exits until this is called, so that its last counts
    /// (and requests completing after it) are read first. Returns how many
    /// entries were removed.
    pub fn forget_detail(&mut self, threads: &[ThreadDetailKeys]) -> usize {
        let Some(d) = &mut self.detail else {
            return 0;
        };
        let mut removed = 0;
        for t in threads {
            for &cpu in &t.cpus {
                removed += d
                    .thread_cpu
                    .remove(&ThreadCpuKey { tid: t.tid, cpu })
                    .is_ok() as usize;
            }
            for &dev in &t.devs {
                removed += d
                    .thread_dev
                    .remove(&ThreadDevKey { tid: t.tid, dev })
                    .is_ok() as usize;
            }
            removed += d.mem.remove(&t.tid).is_ok() as usize;
        }
        removed
    }
}
