//! The `vprofile` uprobes (ttp-ebpf/src/vprofile.rs) as an
//! [`InvocationSource`]: the programs are loaded once; each round attaches
//! the plan's new call sites (a round's plan extends the previous one:
//! slots and sites are only appended, with the same ids), drains one record
//! per root invocation from the ring buffer until the round ends, and keeps
//! every probe attached for the next round. Detaching a uprobe waits for
//! an RCU grace period (~0.1 s here), so the links are detached once, at
//! the end, in parallel.
use std::{
    num::NonZeroU32,
    path::Path,
    time::{Duration, Instant},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{MapData, PerCpuArray, RingBuf},
    programs::{
        UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLink, UProbeScope},
    },
};
use ttp_common::vprofile::{Record, Stats};

use super::{
    driver::{InvocationSource, RoundData, Stop},
    plan::{ProbeCost, ProbePlan},
};
use ttp_ledger::probe::{ProbeError, load_object, take};
use ttp_sys::sys::signals::StopFlag;
use ttp_variance::ChildTable;

#[derive(Debug, thiserror::Error)]
pub enum VprofProbeError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error("attaching {program} at offset {offset:#x} of {binary}: {source}")]
    Attach {
        program: &'static str,
        offset: u64,
        binary: String,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("process {pid} exited during the measurement")]
    ProcessGone { pid: u32 },
    #[error("the pid must not be 0")]
    ZeroPid,
    #[error("calibrating the probe cost: {0}")]
    Calibration(String),
}

/// Measures one process through uprobes.
pub struct UprobeSource {
    pid: u32,
    /// Records that reported untracked calls (their sums may be short).
    pub incomplete_records: u64,
    loaded: Option<Loaded>,
    stop: Option<StopFlag>,
    /// The calibrated cost of a hit (see [`calibrate`]), an upper bound.
    cost: Option<ProbeCost>,
}

struct Loaded {
    // Field order is drop order: links and maps before the object.
    links: Vec<UProbeLink>,
    ring: RingBuf<MapData>,
    stats: PerCpuArray<MapData, Stats>,
    ebpf: Ebpf,
    /// Sites of the plan attached so far.
    sites: usize,
    /// Counters at the end of the previous round (they are cumulative).
    seen: Stats,
}

impl UprobeSource {
    pub fn new(pid: u32) -> Self {
        Self {
            pid,
            incomplete_records: 0,
            loaded: None,
            stop: None,
            cost: None,
        }
    }

    /// The calibrated cost of a probe hit ([`calibrate`]): the upper end of
    /// the uncertainty of the cost subtracted from every interval.
    pub fn with_cost(mut self, cost: ProbeCost) -> Self {
        self.cost = Some(cost);
        self
    }

    /// Ends the current round early (and the run) when `stop` is raised.
    pub fn with_stop_flag(mut self, stop: StopFlag) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Loads the programs now, so that missing privileges are reported
    /// before any work.
    pub fn preload(&mut self) -> Result<(), VprofProbeError> {
        if self.loaded.is_none() {
            self.loaded = Some(self.load()?);
        }
        Ok(())
    }

    fn load(&self) -> Result<Loaded, VprofProbeError> {
        let mut loader = EbpfLoader::new();
        loader.override_global("VPROF_TGID", &self.pid, true);
        let mut ebpf = load_object(&mut loader)?;
        for name in PROGRAMS {
            program(&mut ebpf, name)?
                .load()
                .map_err(|source| program_error(name, source))?;
        }
        Ok(Loaded {
            links: Vec::new(),
            ring: take(&mut ebpf, "VPROF_RECORDS")?,
            stats: take(&mut ebpf, "VPROF_STATS")?,
            ebpf,
            sites: 0,
            seen: Stats::default(),
        })
    }

    /// Attaches the plan's sites not attached yet; the root's probes go on
    /// after the first round's sites, the uretprobe first (a return without
    /// a seen entry is ignored; an entry without its return probe would
    /// leave the thread "inside" the root). Per site the return probe goes
    /// on before the call probe, for the same reason.
    fn attach(&self, l: &mut Loaded, plan: &ProbePlan) -> Result<(), VprofProbeError> {
        let pid = NonZeroU32::new(self.pid).ok_or(VprofProbeError::ZeroPid)?;
        let scope = UProbeScope::OneProcess(pid);
        let binary = plan.binary.as_path();
        let Loaded {
            links, ebpf, sites, ..
        } = l;
        let mut attach = |name: &'static str, offset: u64, cookie: Option<u64>| {
            let point = UProbeAttachPoint {
                location: UProbeAttachLocation::AbsoluteOffset(offset),
                cookie,
            };
            let prog = program(ebpf, name)?;
            let id = prog
                .attach(point, binary, scope)
                .map_err(|source| attach_error(name, offset, binary, source))?;
            let link = prog
                .take_link(id)
                .map_err(|source| attach_error(name, offset, binary, source))?;
            links.push(link);
            Ok::<(), VprofProbeError>(())
        };
        let first = *sites == 0;
        // A return address that is itself a measured call (`call f; call g`)
        // needs no probe of its own: the call probe there closes the frame
        // first. Every uprobe costs a grace period to detach.
        let calls: std::collections::HashSet<u64> =
            plan.sites.iter().map(|s| s.call_offset).collect();
        for site in plan.sites.iter().skip(*sites) {
            if !calls.contains(&site.return_offset) {
                attach("vprof_return", site.return_offset, Some(site.cookie()))?;
            }
            attach("vprof_call", site.call_offset, Some(site.cookie()))?;
        }
        *sites = plan.sites.len();
        if first {
            attach("vprof_root_return", plan.root_offset, None)?;
            attach("vprof_root_entry", plan.root_offset, None)?;
        }
        Ok(())
    }
}

impl Drop for UprobeSource {
    /// Detaches every link, in parallel: each detach waits for a grace
    /// period, and concurrent waits overlap.
    fn drop(&mut self) {
        let Some(mut l) = self.loaded.take() else {
            return;
        };
        let links = std::mem::take(&mut l.links);
        let per_thread = links.len().div_ceil(8).max(1);
        let mut chunks: Vec<Vec<UProbeLink>> = Vec::new();
        let mut links = links.into_iter().peekable();
        while links.peek().is_some() {
            chunks.push(links.by_ref().take(per_thread).collect());
        }
        std::thread::scope(|s| {
            for chunk in chunks {
                s.spawn(move || drop(chunk));
            }
        });
    }
}

const PROGRAMS: [&str; 4] = [
    "vprof_root_entry",
    "vprof_root_return",
    "vprof_call",
    "vprof_return",
];

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut UProbe, VprofProbeError> {
    ebpf.program_mut(name)
        .ok_or_else(|| ProbeError::MissingProgram {
            program: name.into(),
        })?
        .try_into()
        .map_err(|source| program_error(name, source).into())
}

fn program_error(name: &str, source: aya::programs::ProgramError) -> ProbeError {
    ProbeError::Program {
        program: name.into(),
        tracepoint: "uprobe".into(),
        source: Box::new(source),
    }
}

fn attach_error(
    program: &'static str,
    offset: u64,
    binary: &Path,
    source: aya::programs::ProgramError,
) -> VprofProbeError {
    VprofProbeError::Attach {
        program,
        offset,
        binary: binary.display().to_string(),
        source: Box::new(source),
    }
}

impl InvocationSource for UprobeSource {
    fn measure(
        &mut self,
        _table: &ChildTable,
        plan: &ProbePlan,
        stop: Stop,
    ) -> Result<RoundData, Box<dyn std::error::Error + Send + Sync>> {
        if self.loaded.is_none() {
            self.loaded = Some(self.load()?);
        }
        let mut l = self.loaded.take().expect("just loaded");
        let attached = self.attach(&mut l, plan);
        // Invocations that began before this round's probes were all on
        // have partial sums for the new slots: only later ones count.
        let ready_ns = ttp_sys::sys::clock::monotonic_ns();
        self.loaded = Some(l);
        attached?;
        let l = self.loaded.as_mut().expect("kept");
        let started = Instant::now();
        let mut data = RoundData::default();
        let mut raw: Vec<Record> = Vec::new();
        loop {
            while let Some(item) = l.ring.next() {
                if item.len() < size_of::<Record>() {
                    continue;
                }
                // SAFETY: the kernel wrote a whole Record (checked length);
                // read_unaligned because ring-buffer items are only
                // 8-aligned by convention, not by type.
                let rec = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const Record) };
                if rec.start_ns < ready_ns {
                    continue;
                }
                if rec.untracked_calls > 0 {
                    self.incomplete_records += 1;
                }
                data.invocations.push(plan.invocation(&rec));
                raw.push(rec);
                data.root_hits.push(rec.root_hits);
                data.starts_ns.push(rec.start_ns);
            }
            let done = match stop {
                Stop::Duration(d) => started.elapsed() >= d,
                Stop::Invocations(n) => data.invocations.len() >= n,
            };
            if done {
                break;
            }
            // Stopped: end the round whatever it holds (the driver reports
            // the earlier rounds when this one has fewer than two
            // invocations); a root that is never called must not keep
            // the run waiting past Ctrl-C or SIGTERM.
            if self.stop.as_ref().is_some_and(StopFlag::raised) {
                data.interrupted = true;
                break;
            }
            if !Path::new(&format!("/proc/{}", self.pid)).exists() {
                if data.invocations.len() >= 2 {
                    break;
                }
                return Err(Box::new(VprofProbeError::ProcessGone { pid: self.pid }));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        data.elapsed = started.elapsed();
        let mut total = Stats::default();
        if let Ok(per_cpu) = l.stats.get(&0, 0) {
            for s in per_cpu.iter() {
                total.lost_records += s.lost_records;
                total.hits += s.hits;
                total.probe_ns += s.probe_ns;
            }
        }
        data.lost_records = total.lost_records - l.seen.lost_records;
        data.probe_hits = total.hits - l.seen.hits;
        data.probe_ns = total.probe_ns - l.seen.probe_ns;
        l.seen = total;
        // The probes' own cost, taken out of every interval: the calibrated
        // cost, else the time the programs ran on this round's hits (a lower
        // bound: the traps around them are not in it). docs/vprofile.md,
        // "The probes' own cost".
        if data.probe_hits > 0 {
            let in_programs = data.probe_ns as f64 / data.probe_hits as f64;
            let cost = self.cost.unwrap_or(ProbeCost {
                per_hit_ns: in_programs,
                boundary_ns: in_programs,
                call_boundary_ns: in_programs,
                // Without a calibration only the programs' own run time is
                // known; the traps around them cost more, by an unknown
                // amount of at least as much again.
                uncertainty_per_hit_ns: in_programs,
            });
            data.invocations.clear();
            for rec in &raw {
                let (inv, cut) = plan.corrected_invocation(rec, &cost);
                data.root_overhead_ns += cut;
                data.invocations.push(inv);
            }
            data.cost = Some(cost);
        }
        Ok(data)
    }
}

/// Calibration root: calls [`calibration_leaf`] `n` times. Not
/// inlined and not mangled, so that its call instruction can be probed
/// like any program's.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn ttp_vprof_calibration_root(n: u64) -> u64 {
    let mut acc = 0u64;
    let mut i = 0;
    while i < n {
        acc = acc.wrapping_add(calibration_leaf(i));
        i += 1;
    }
    acc
}

/// Calibration leaf: a few instructions. Private, so that the root calls it
/// directly (an exported one may be called through the GOT).
#[inline(never)]
extern "C" fn calibration_leaf(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17)
}

/// Calls per calibration invocation with hits inside.
const CALIBRATION_CALLS: u64 = 16;
/// Invocations of each kind, bare and probed (at least).
const CALIBRATION_RUNS: usize = 600;
/// How long the probed calibration runs.
const CALIBRATION_TIME: Duration = Duration::from_millis(400);

/// Interquartile range.
fn iqr(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[v.len() * 3 / 4] - v[v.len() / 4]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs the calibration root alternately with 0 and [`CALIBRATION_CALLS`]
/// calls on this thread, at least `runs` times each, until `stop` (if
/// given) is raised; returns (start, calls, duration by the thread's own
/// clock) of each run.
fn time_calibration_root(
    runs: usize,
    stop: Option<&std::sync::atomic::AtomicBool>,
) -> Vec<(u64, u64, f64)> {
    let mut out = Vec::new();
    let started = Instant::now();
    loop {
        let n = if out.len() % 2 == 0 {
            0
        } else {
            CALIBRATION_CALLS
        };
        let t0 = ttp_sys::sys::clock::monotonic_ns();
        std::hint::black_box(ttp_vprof_calibration_root(std::hint::black_box(n)));
        let d = ttp_sys::sys::clock::monotonic_ns().saturating_sub(t0) as f64;
        out.push((t0, n, d));
        let enough = out.len() >= 2 * runs;
        match stop {
            Some(s) if s.load(std::sync::atomic::Ordering::Relaxed) && enough => break,
            None if enough => break,
            _ => {}
        }
        if out.len() % 1024 == 0 && started.elapsed() > Duration::from_secs(10) {
            break; // a bound, should the stop never come
        }
    }
    out
}

/// Durations of the runs with `n` calls that started at or after `from`.
fn runs_of(runs: &[(u64, u64, f64)], n: u64, from: u64) -> Vec<f64> {
    runs.iter()
        .filter(|r| r.1 == n && r.0 >= from)
        .map(|r| r.2)
        .collect()
}

/// Measures what the probes add to the intervals they measure, on ttp's
/// own calibration root (a function this process times itself without
/// probes, then runs with the same programs attached the same way: root
/// entry and return, a call site and its return site, so the same traps).
/// Medians, so that preemption of a few runs does not move the figures.
///
/// - boundary (the root's entry and return probes, the return probe's
///   trampoline included): the probes' duration of the root with no call
///   inside, minus its bare duration;
/// - per call, and per hit inside an interval: the probes' summed duration
///   of 16 calls to a leaf, less the bare time those calls add to the
///   root, per call. A hit inside an interval costs what a call's two
///   probes add to the call (a trap out of the program and back, and one
///   program run), so the same figure serves for both;
/// - uncertainty per hit: the standard errors of the medians (IQR/√n), the
///   leaf's own time (between 0 and the bare time per call), a quarter of a
///   call's cost for the model (see below), and how much more than a call's
///   cost a hit adds to the root's interval with 16 calls inside than with
///   none: a single-stepped probed instruction is stepped after the program
///   read the clock, so the step lands in the enclosing interval, and which
///   sites are stepped is not counted.
pub fn calibrate() -> Result<ProbeCost, VprofProbeError> {
    use crate::{callgraph::CallGraph, elf::ElfImage};
    use ttp_variance::ChildSlot;
    let fail = |what: String| VprofProbeError::Calibration(what);
    let exe = std::env::current_exe().map_err(|e| fail(format!("own executable: {e}")))?;
    let elf = ElfImage::load(&exe).map_err(|e| fail(e.to_string()))?;
    let root = elf
        .lookup("ttp_vprof_calibration_root")
        .map_err(|e| fail(e.to_string()))?;
    let graph = CallGraph::build(&elf, root);
    let leaf = graph
        .children(root)
        .into_iter()
        .find(|c| c.name.contains("calibration_leaf"))
        .ok_or_else(|| fail("no call to the calibration leaf found".into()))?;
    let mut table = ChildTable::new("ttp_vprof_calibration_root");
    table.slots.push(ChildSlot {
        parent: None,
        function: leaf.name,
        call_sites: leaf.call_sites,
    });
    let plan = ProbePlan::new(&elf, root, &table).map_err(|e| fail(e.to_string()))?;

    let bare = time_calibration_root(CALIBRATION_RUNS, None);
    let (bare0, bare_n) = (runs_of(&bare, 0, 0), runs_of(&bare, CALIBRATION_CALLS, 0));
    let mut source = UprobeSource::new(std::process::id());
    source.preload()?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (data, own) = std::thread::scope(|s| {
        let worker = s.spawn(|| time_calibration_root(CALIBRATION_RUNS, Some(&stop)));
        // A time limit, not a count: should the probes see nothing, the
        // calibration fails instead of waiting for ever.
        let data = source.measure(&table, &plan, Stop::Duration(CALIBRATION_TIME));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (data, worker.join())
    });
    let data = data.map_err(|e| fail(e.to_string()))?;
    own.map_err(|_| fail("the calibration thread panicked".into()))?;
    drop(source);
    let hits_n = 2 * CALIBRATION_CALLS as u32 + 1;
    let probed = |units: u32, col: Option<usize>| -> Vec<f64> {
        data.invocations
            .iter()
            .zip(&data.root_hits)
            .filter(|(_, h)| **h == units)
            .map(|(inv, _)| col.map_or(inv.root_ns, |c| inv.children_ns[c]) as f64)
            .collect()
    };
    let (probe0, probe_n) = (probed(1, None), probed(hits_n, None));
    if probe0.len() < CALIBRATION_RUNS / 4 || probe_n.len() < CALIBRATION_RUNS / 4 {
        let mut seen: Vec<u32> = data.root_hits.clone();
        seen.sort_unstable();
        seen.dedup();
        return Err(fail(format!(
            "the probes saw {} and {} calibration invocations of each kind ({} records, {} hits; hit counts {:?})",
            probe0.len(),
            probe_n.len(),
            data.invocations.len(),
            data.probe_hits,
            &seen[..seen.len().min(8)]
        )));
    }
    let calls = CALIBRATION_CALLS as f64;
    let inner = f64::from(hits_n - 1);
    let (b0, bn) = (median(bare0), median(bare_n));
    let p0 = median(probe0.clone());
    // How much the probes' root interval grows per hit inside it: more than
    // a call's own cost when the instruction under the return-site probe is
    // single-stepped (the step runs after the program has read the clock,
    // so it lands in the parent's interval, not the call's). Which sites
    // are stepped is not counted per invocation: that difference is part
    // of the uncertainty.
    let per_hit_in_root = ((median(probe_n.clone()) - bn) - (p0 - b0)) / inner;
    let boundary = p0 - b0;
    // A call's interval: the leaf's own time is at most the bare time the
    // calls add to the root (loop included).
    let slot = probed(hits_n, Some(0));
    let call_boundary = (median(slot.clone()) - (bn - b0).max(0.0)) / calls;
    // Standard errors of the two medians (IQR/√n), and what the leaf's own
    // time may be (0 to the bare time per call).
    let se = |v: &[f64]| iqr(v) / (v.len() as f64).sqrt();
    let spread = se(&slot) / calls + (bn - b0).max(0.0) / calls + se(&probe0);
    if !(boundary.is_finite() && call_boundary.is_finite() && call_boundary > 0.0) {
        return Err(fail(format!(
            "the cost came out as {call_boundary:.0} ns per call, {boundary:.0} ns at the root"
        )));
    }
    Ok(ProbeCost {
        per_hit_ns: call_boundary,
        boundary_ns: boundary.max(0.0),
        call_boundary_ns: call_boundary,
        // The model's own error: a hit inside an interval is taken to cost
        // what a call's two probes add, though the instruction under the
        // probe (emulated like a call, or single-stepped) changes it; on the
        // fixture's short root the subtraction landed within 0.1 µs per hit
        // of the bare CPU time, and a quarter of a call's cost covers that.
        uncertainty_per_hit_ns: spread
            + 0.25 * call_boundary
            + (per_hit_in_root - call_boundary).max(0.0),
    })
}
