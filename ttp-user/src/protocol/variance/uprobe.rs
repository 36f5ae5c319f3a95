//! The `vprofile` uprobes (ttp-ebpf/src/vprof.rs) as an
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
use ttp_common::vprof::{Record, Stats};

use super::{
    driver::{InvocationSource, RoundData, Stop},
    plan::ProbePlan,
    tree::ChildTable,
};
use crate::{
    probe::{ProbeError, load_object, take},
    sys::signals::StopFlag,
};

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
}

/// Measures one process through uprobes.
pub struct UprobeSource {
    pid: u32,
    /// Records that reported untracked calls (their sums may be short).
    pub incomplete_records: u64,
    loaded: Option<Loaded>,
    stop: Option<StopFlag>,
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
        }
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
        let ready_ns = crate::sys::clock::monotonic_ns();
        self.loaded = Some(l);
        attached?;
        let l = self.loaded.as_mut().expect("kept");
        let started = Instant::now();
        let mut data = RoundData::default();
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
                data.starts_ns.push(rec.start_ns);
            }
            let done = match stop {
                Stop::Duration(d) => started.elapsed() >= d,
                Stop::Invocations(n) => data.invocations.len() >= n,
            };
            if done {
                break;
            }
            if self.stop.as_ref().is_some_and(StopFlag::raised) && data.invocations.len() >= 2 {
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
        Ok(data)
    }
}
