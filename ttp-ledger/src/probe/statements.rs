//! The `statements` uprobe program (ttp-ebpf/src/statements.rs) loaded in
//! the ledger's object, so it reads the ledger's thread accounts, and
//! attached at a PostgreSQL binary's USDT probes with their semaphores
//! counted by the kernel (usdt_attach.rs).
use std::{os::fd::AsFd, path::Path};

use aya::{
    maps::{MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::UProbe,
};
use ttp_common::{
    statements::{Record, Stats, Tranche, WAITS, arg, cookie, kind, wait},
    sums::{SumKey, Sums, TextRecord, key_kind},
};

/// pt_regs slot of `rip`: when a uprobe fires, the probed address (a
/// function's entry, a USDT probe's `nop`).
const RIP_SLOT: u32 = 16;

use super::{
    Ledger, ProbeError, take,
    usdt::{ArgLocation, UsdtProbe, pt_regs_slot},
    usdt_attach::{self, Site, UprobePmu, UsdtLink},
};

/// Where a parallel worker's share of a statement is seen: the entry of
/// the function every parallel worker runs (`ParallelWorkerMain`), and the
/// global that points at the worker's registration (`MyBgworkerEntry`,
/// whose first field is its name), as the distance from that function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSite {
    /// File offset of the function's first instruction.
    pub entry_offset: u64,
    /// Address of the global minus address of the function.
    pub name_pointer_from_entry: i32,
}

const PROGRAM: &str = "stmt_usdt";
/// The kind of `query__execute__start`'s sites.
const EXECUTE_START: u32 = kind::WAIT_BASE + 2 * wait::EXECUTE as u32;
/// The function every parallel worker runs (see [`WorkerSite`]).
pub const WORKER_FUNCTION: &str = "ParallelWorkerMain";

#[derive(Debug, thiserror::Error)]
pub enum StatementsProbeError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(
        "{binary} has no {name} probe: ttp needs query__start and query__done (a PostgreSQL built with --enable-dtrace)"
    )]
    Missing { binary: String, name: &'static str },
    #[error("preparing the statement sums map: {0}")]
    Sums(String),
    #[error("loading the statements program: {0}")]
    Program(#[source] Box<aya::programs::ProgramError>),
    #[error("the uprobe PMU is not available ({0}): this kernel has no CONFIG_UPROBE_EVENTS")]
    Pmu(#[source] std::io::Error),
    #[error("attaching {name} at offset {offset:#x} of {binary}: {source}")]
    Attach {
        name: String,
        offset: u64,
        binary: String,
        #[source]
        source: std::io::Error,
    },
}

/// Most statement keys the kernel sums at once.
pub(crate) const MAX_SUM_KEYS: u32 = 4096;
/// Kernel memory the sums map may take: its entries are preallocated, a
/// value per CPU each.
pub(crate) const SUM_MAP_BYTES: u64 = 64 << 20;

/// Keys of the sums map on this machine: [`MAX_SUM_KEYS`], fewer where a
/// value per CPU each would exceed [`SUM_MAP_BYTES`] (at least 256).
pub(crate) fn sum_keys() -> u32 {
    let cpus = aya::util::nr_cpus().unwrap_or(1).max(1) as u64;
    let per_key = (std::mem::size_of::<Sums>() + std::mem::size_of::<SumKey>()) as u64 * cpus;
    (SUM_MAP_BYTES / per_key).clamp(256, u64::from(MAX_SUM_KEYS)) as u32
}

/// Bytes of the text ring: room for a text of every key from every CPU
/// (a key's text goes out at most once a CPU, and keys are never
/// evicted), so a burst of new keys between two drains loses none.
pub(crate) fn text_ring_bytes() -> u32 {
    let cpus = aya::util::nr_cpus().unwrap_or(1).max(1) as u64;
    let record = (std::mem::size_of::<TextRecord>() + 8) as u64;
    let need = (u64::from(sum_keys()) + 1) * cpus * record;
    need.next_power_of_two().clamp(4096, 1 << 30) as u32
}

/// Inserts the key a full map's statements land in, before the programs
/// can fill the map.
fn insert_other(sums: &mut PerCpuHashMap<MapData, SumKey, Sums>) -> Result<(), String> {
    // SAFETY: `Sums` is plain integers (aya::Pod): all-zero bytes are valid.
    let zero: Sums = unsafe { std::mem::zeroed() };
    let cpus = aya::util::nr_cpus().map_err(|(what, e)| format!("{what}: {e}"))?;
    let values = aya::maps::PerCpuValues::try_from(vec![zero; cpus]).map_err(|e| e.to_string())?;
    let other = SumKey {
        kind: key_kind::OTHER,
        ..SumKey::default()
    };
    sums.insert(other, values, 0).map_err(|e| e.to_string())
}

/// One probe name's availability in the binary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProbeSites {
    pub name: String,
    /// Sites in the binary (0: the binary lacks the probe).
    pub sites: usize,
    /// Whether they were attached (an opt-in pair not asked for is not).
    pub attached: bool,
}

/// The attached probes and their maps. Dropping it detaches every site
/// (and the kernel gives back the semaphore counts).
pub struct StatementProbes {
    links: Vec<UsdtLink>,
    ring: RingBuf<MapData>,
    sums: PerCpuHashMap<MapData, SumKey, Sums>,
    texts: RingBuf<MapData>,
    tranches: PerCpuHashMap<MapData, u64, Tranche>,
    stats: PerCpuArray<MapData, Stats>,
    /// Whether both probes of each wait pair are in the binary and attached.
    pub available: [bool; WAITS],
    /// Whether parallel workers' shares are measured.
    pub workers: bool,
    /// Why they are not, when the binary has the function but attaching
    /// to it failed.
    pub worker_error: Option<String>,
    pub sites: Vec<ProbeSites>,
}

/// (probe name, kind, whether its first argument is read, whether it is
/// attached).
fn wanted(
    waits: &[(&'static str, &'static str, &'static str); WAITS],
    requested: &[bool; WAITS],
) -> Vec<(&'static str, u32, bool, bool)> {
    let mut v = vec![
        ("query__done", kind::QUERY_DONE, false, true),
        ("query__start", kind::QUERY_START, true, true),
    ];
    for (i, (label, start, done)) in waits.iter().enumerate() {
        let k = kind::WAIT_BASE + 2 * i as u32;
        // Done first: a done whose start was not seen is ignored, a start
        // whose done is missing would leave a wait open.
        v.push((done, k + 1, false, requested[i]));
        v.push((start, k, *label == "lwlock_wait", requested[i]));
    }
    v
}

/// The cookie argument encoding of a probe's first argument.
fn arg_cookie(p: &UsdtProbe) -> (u32, u32, i32) {
    match p.args.first().map(|a| &a.location) {
        Some(ArgLocation::Register { reg }) => match pt_regs_slot(reg) {
            Some(slot) => (arg::REGISTER, slot, 0),
            None => (arg::NONE, 0, 0),
        },
        Some(ArgLocation::Memory { reg, offset }) => {
            match (pt_regs_slot(reg), i32::try_from(*offset)) {
                (Some(slot), Ok(off)) => (arg::MEMORY, slot, off),
                _ => (arg::NONE, 0, 0),
            }
        }
        _ => (arg::NONE, 0, 0),
    }
}

impl StatementProbes {
    /// Loads the program in `ledger`'s object and attaches it at every site
    /// of the probes `statements` reads. `waits`: the wait pairs, in
    /// `Record::waits_ns` order; `requested[i]`: attach pair `i`; `worker`:
    /// where parallel workers are seen, if the binary has it; `query_text`:
    /// the address of the global that points at the running statement's
    /// text (`debug_query_string`), read where the executor pair opens a
    /// statement of the extended query protocol. `socket`: the statements'
    /// boundaries come from the socket programs the ledger loaded
    /// (wire.rs), so `query__start/done` are neither needed nor attached,
    /// and `probes` may be empty (a server without USDT notes).
    #[allow(clippy::too_many_arguments)]
    pub fn attach(
        ledger: &mut Ledger,
        binary: &Path,
        probes: &[UsdtProbe],
        waits: &[(&'static str, &'static str, &'static str); WAITS],
        requested: &[bool; WAITS],
        worker: Option<WorkerSite>,
        query_text: Option<u64>,
        socket: bool,
    ) -> Result<Self, StatementsProbeError> {
        let bin = binary.display().to_string();
        for name in ["query__start", "query__done"] {
            if !socket && !probes.iter().any(|p| p.name == name) {
                return Err(StatementsProbeError::Missing {
                    binary: bin.clone(),
                    name,
                });
            }
        }
        let pmu = UprobePmu::read().map_err(StatementsProbeError::Pmu)?;
        let ebpf = ledger.object_mut();
        let prog: &mut UProbe = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| ProbeError::MissingProgram {
                program: PROGRAM.into(),
            })?
            .try_into()
            .map_err(|e| StatementsProbeError::Program(Box::new(e)))?;
        prog.load()
            .map_err(|e| StatementsProbeError::Program(Box::new(e)))?;
        let fd = prog
            .fd()
            .map_err(|e| StatementsProbeError::Program(Box::new(e)))?
            .as_fd();
        let mut links = Vec::new();
        let mut sites = Vec::new();
        for (name, k, reads_arg, attach) in wanted(waits, requested) {
            let attach = attach && !(socket && (k == kind::QUERY_START || k == kind::QUERY_DONE));
            let mut n = 0;
            for p in probes.iter().filter(|p| p.name == name) {
                n += 1;
                if !attach {
                    continue;
                }
                let (mode, slot, off) = if reads_arg {
                    arg_cookie(p)
                } else if k == EXECUTE_START {
                    // The global at a fixed distance from the probe's
                    // address, which is `rip` when the probe fires.
                    query_text
                        .and_then(|g| i32::try_from(g as i64 - p.pc as i64).ok())
                        .map_or((arg::NONE, 0, 0), |off| (arg::MEMORY, RIP_SLOT, off))
                } else {
                    (arg::NONE, 0, 0)
                };
                let site = Site {
                    offset: p.pc_offset,
                    ref_ctr: p.semaphore_offset,
                    cookie: cookie(k, mode, slot, off),
                    ret: false,
                };
                let link = usdt_attach::attach(&pmu, fd, binary, site).map_err(|source| {
                    StatementsProbeError::Attach {
                        name: name.into(),
                        offset: p.pc_offset,
                        binary: bin.clone(),
                        source,
                    }
                })?;
                links.push(link);
            }
            sites.push(ProbeSites {
                name: name.into(),
                sites: n,
                attached: attach && n > 0,
            });
        }
        // A parallel worker's share: the entry (its name read through the
        // global) and the return of the function. Without them the
        // statements are still measured: the reason is kept.
        let mut worker_error = None;
        if let Some(w) = worker {
            let mut pair = Vec::new();
            for (k, mode, off, ret) in [
                (
                    kind::WORKER_START,
                    arg::MEMORY,
                    w.name_pointer_from_entry,
                    false,
                ),
                (kind::WORKER_DONE, arg::NONE, 0, true),
            ] {
                let site = Site {
                    offset: w.entry_offset,
                    ref_ctr: 0,
                    cookie: cookie(k, mode, RIP_SLOT, off),
                    ret,
                };
                match usdt_attach::attach(&pmu, fd, binary, site) {
                    Ok(link) => pair.push(link),
                    Err(e) => {
                        worker_error = Some(format!(
                            "attaching {} {} at offset {:#x} of {bin}: {e}",
                            if ret { "a uretprobe" } else { "a uprobe" },
                            WORKER_FUNCTION,
                            w.entry_offset
                        ));
                        pair.clear();
                        break;
                    }
                }
            }
            links.extend(pair);
        }
        let has = |name: &str| sites.iter().any(|s| s.name == name && s.attached);
        let mut available = [false; WAITS];
        for (i, (_, start, done)) in waits.iter().enumerate() {
            available[i] = has(start) && has(done);
        }
        let ebpf = ledger.object_mut();
        let mut sums: PerCpuHashMap<MapData, SumKey, Sums> = take(ebpf, "STMT_SUMS")?;
        if socket {
            insert_other(&mut sums).map_err(StatementsProbeError::Sums)?;
        }
        Ok(Self {
            links,
            sums,
            texts: take(ebpf, "STMT_TEXTS")?,
            ring: take(ebpf, "STMT_RECORDS")?,
            tranches: take(ebpf, "STMT_TRANCHES")?,
            stats: take(ebpf, "STMT_STATS")?,
            available,
            workers: worker.is_some() && worker_error.is_none(),
            worker_error,
            sites,
        })
    }

    /// Hands every record waiting in the ring buffer to `f`.
    pub fn drain(&mut self, mut f: impl FnMut(&Record)) {
        while let Some(item) = self.ring.next() {
            if item.len() >= std::mem::size_of::<Record>() {
                // SAFETY: the kernel wrote a whole Record (the size was
                // checked); read unaligned from the ring's bytes.
                let r: Record = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
                f(&r);
            }
        }
    }

    /// Hands every key's sums (one value per CPU) to `f`; returns how
    /// many keys could not be read, and the last error.
    pub fn sums(&self, mut f: impl FnMut(SumKey, &[Sums])) -> (u64, Option<String>) {
        let mut failed = (0, None);
        for item in self.sums.iter() {
            match item {
                Ok((key, per_cpu)) => f(key, &per_cpu),
                Err(e) => {
                    failed.0 += 1;
                    failed.1 = Some(e.to_string());
                }
            }
        }
        failed
    }

    /// Takes `key` out of the sums map (`--by backend`: a backend that
    /// exited, whose totals the reader keeps), making room for new keys.
    pub fn remove_sum(&mut self, key: &SumKey) -> Result<(), String> {
        self.sums.remove(key).map_err(|e| e.to_string())
    }

    /// Hands every key text waiting in its ring to `f`.
    pub fn drain_texts(&mut self, mut f: impl FnMut(&TextRecord)) {
        while let Some(item) = self.texts.next() {
            if item.len() >= std::mem::size_of::<TextRecord>() {
                // SAFETY: the kernel wrote a whole TextRecord (the size
                // was checked); read unaligned from the ring's bytes.
                let r: TextRecord = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
                f(&r);
            }
        }
    }

    /// The probes' counters, summed over CPUs.
    pub fn stats(&self) -> Result<Stats, ProbeError> {
        let per_cpu = self.stats.get(&0, 0).map_err(|source| ProbeError::Map {
            map: "STMT_STATS".into(),
            source: Box::new(source),
        })?;
        let mut s = Stats::default();
        for c in per_cpu.iter() {
            s.hits += c.hits;
            s.statements += c.statements;
            s.lost_records += c.lost_records;
            s.done_without_start += c.done_without_start;
            s.no_state += c.no_state;
            s.text_unread += c.text_unread;
            s.restarted += c.restarted;
            s.probe_ns += c.probe_ns;
            s.other_processes += c.other_processes;
            s.workers += c.workers;
            s.socket_events += c.socket_events;
            s.connections += c.connections;
            s.exited_open += c.exited_open;
            s.prepares += c.prepares;
            s.killed_open += c.killed_open;
            s.sums_other += c.sums_other;
            s.texts_lost += c.texts_lost;
            s.backends += c.backends;
            s.workers_unjoined += c.workers_unjoined;
        }
        Ok(s)
    }

    /// LWLock waits per tranche-name pointer, summed over CPUs.
    pub fn tranches(&self) -> Vec<(u64, Tranche)> {
        let mut out = Vec::new();
        for (ptr, per_cpu) in self.tranches.iter().flatten() {
            let mut t = Tranche::default();
            for c in per_cpu.iter() {
                t.waits += c.waits;
                t.wait_ns += c.wait_ns;
                if c.tgid != 0 {
                    t.tgid = c.tgid;
                }
            }
            out.push((ptr, t));
        }
        out
    }

    /// Sites attached.
    pub fn links(&self) -> usize {
        self.links.len()
    }
}
