//! The kernel side of `--trace`: the programs only tracing needs (the
//! waker's view of wakeups, the per-CPU sampler), the `TRACED` set, and the
//! records of the trace ring buffer decoded into [`TraceEvent`]s.
use aya::{
    Btf, Ebpf,
    maps::{HashMap, MapData, RingBuf},
    programs::{
        BtfTracePoint, PerfEvent,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};
use ttp_common::{
    TASK_COMM_LEN, state,
    trace::{
        Block, CpuSample, EXIT_GROUP_DEAD, Header, Kind, Proc, SWITCH_PREEMPT, Switch, WAKEUP_NEW,
        Wakeup,
    },
};

use super::{Ledger, ProbeError, take};

/// Name of the trace ring buffer in the eBPF object.
pub(crate) const EVENTS_MAP: &str = "TRACE_EVENTS";
/// The set of traced processes.
pub(crate) const TRACED_MAP: &str = "TRACED";

/// How often each CPU's run-queue length and iowait tasks are sampled (a
/// sample is sent only when they changed).
pub const SAMPLE_HZ: u64 = 100;

/// The trace maps of a ledger loaded with tracing on.
pub struct TraceMaps {
    traced: HashMap<MapData, u32, u32>,
    /// Taken by the reader ([`Ledger::trace_reader`]).
    events: Option<RingBuf<MapData>>,
}

/// Loads and attaches the tracing-only programs and takes the trace maps.
pub fn attach(ebpf: &mut Ebpf, btf: &Btf) -> Result<TraceMaps, ProbeError> {
    let prog_err = |program: &str, tracepoint: &str| {
        let (program, tracepoint) = (program.to_string(), tracepoint.to_string());
        move |source| ProbeError::Program {
            program,
            tracepoint,
            source: Box::new(source),
        }
    };
    let missing = |program: &str| ProbeError::MissingProgram {
        program: program.into(),
    };
    let waking: &mut BtfTracePoint = ebpf
        .program_mut("sched_waking")
        .ok_or_else(|| missing("sched_waking"))?
        .try_into()
        .map_err(prog_err("sched_waking", "sched_waking"))?;
    waking
        .load("sched_waking", btf)
        .map_err(prog_err("sched_waking", "sched_waking"))?;
    waking
        .attach()
        .map_err(prog_err("sched_waking", "sched_waking"))?;

    let sampler: &mut PerfEvent = ebpf
        .program_mut("cpu_sample")
        .ok_or_else(|| missing("cpu_sample"))?
        .try_into()
        .map_err(prog_err("cpu_sample", "perf cpu-clock"))?;
    sampler
        .load()
        .map_err(prog_err("cpu_sample", "perf cpu-clock"))?;
    for cpu in aya::util::online_cpus().unwrap_or_default() {
        sampler
            .attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Frequency(SAMPLE_HZ),
                false,
            )
            .map_err(|source| ProbeError::Sampler {
                cpu,
                source: Box::new(source),
            })?;
    }
    Ok(TraceMaps {
        traced: take(ebpf, TRACED_MAP)?,
        events: Some(take(ebpf, EVENTS_MAP)?),
    })
}

impl Ledger {
    /// Starts tracing process `tgid` (its threads, and processes it forks
    /// from now on).
    pub fn trace_process(&mut self, tgid: u32) -> Result<(), ProbeError> {
        let t = self.trace.as_mut().ok_or(ProbeError::TraceOff)?;
        t.traced
            .insert(tgid, 1, 0)
            .map_err(|source| ProbeError::Traced {
                tgid,
                source: Box::new(source),
            })
    }

    /// The reader of the trace ring buffer, to be drained on its own
    /// thread. Only one reader exists per ledger.
    pub fn trace_reader(&mut self) -> Result<TraceReader, ProbeError> {
        let t = self.trace.as_mut().ok_or(ProbeError::TraceOff)?;
        let ring = t.events.take().ok_or(ProbeError::TraceOff)?;
        Ok(TraceReader {
            ring,
            undecodable: 0,
        })
    }
}

/// Drains the trace ring buffer.
pub struct TraceReader {
    ring: RingBuf<MapData>,
    /// Records too short for their kind or of an unknown kind (a mismatch
    /// between the eBPF object and this binary).
    pub undecodable: u64,
}

impl TraceReader {
    /// Decodes every pending record into `out`; returns how many.
    pub fn drain(&mut self, out: &mut Vec<TraceEvent>) -> usize {
        let mut n = 0;
        while let Some(item) = self.ring.next() {
            match decode(&item) {
                Some(ev) => {
                    out.push(ev);
                    n += 1;
                }
                None => self.undecodable += 1,
            }
        }
        n
    }
}

/// A thread's state, as the ledger classifies it (ttp_common::state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadState {
    Running,
    Runnable,
    Sleeping,
    Blocked,
    IoWait,
    Dead,
    Unknown,
}

impl ThreadState {
    pub fn from_ledger(id: u32) -> Self {
        match id {
            state::RUNNING => Self::Running,
            state::RUNNABLE => Self::Runnable,
            state::SLEEPING => Self::Sleeping,
            state::BLOCKED => Self::Blocked,
            state::IOWAIT => Self::IoWait,
            state::DEAD => Self::Dead,
            _ => Self::Unknown,
        }
    }
}

/// Where a block request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockPhase {
    /// Created for the submitting thread (block_io_start).
    Submit,
    /// Handed to the driver (block_rq_issue).
    Issue,
    /// Completed (block_io_done).
    Complete,
}

/// What happened, by record kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceBody {
    /// The thread starts running on `TraceEvent::cpu`, after `prev_tid`.
    SwitchIn {
        prev_tid: u32,
    },
    /// The thread leaves the CPU for `state`.
    SwitchOut {
        state: ThreadState,
        next_tid: u32,
        preempt: bool,
        /// prev_state as sched_switch passed it (TASK_* bits).
        prev_state: u32,
    },
    /// The ledger made the thread runnable.
    Wakeup {
        new: bool,
    },
    /// sched_waking, in the waker's context.
    Waking {
        waker_tid: u32,
        waker_tgid: u32,
    },
    Block {
        phase: BlockPhase,
        rq: u64,
        sector: u64,
        bytes: u32,
        /// REQ_OP_* (0 read, 1 write, 2 flush, 3 discard, …).
        op: u32,
        dev_major: u32,
        dev_minor: u32,
    },
    Fork {
        parent_tid: u32,
        parent_tgid: u32,
        comm: String,
    },
    Exec {
        old_tid: u32,
        comm: String,
    },
    Exit {
        /// The last thread of its process.
        group_dead: bool,
        comm: String,
    },
    CpuSample {
        nr_running: u32,
        nr_iowait: u32,
        idle: bool,
    },
}

/// One record of the trace stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    /// CLOCK_MONOTONIC ns.
    pub ts_ns: u64,
    pub tid: u32,
    pub tgid: u32,
    pub cpu: u32,
    pub body: TraceBody,
}

fn comm(c: &[u8; TASK_COMM_LEN]) -> String {
    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
    String::from_utf8_lossy(&c[..end]).into_owned()
}

/// A record of `len` bytes as `T`, or None when it is too short.
fn read<T: Copy>(bytes: &[u8]) -> Option<T> {
    (bytes.len() >= size_of::<T>()).then(|| {
        // SAFETY: length checked; T is a repr(C) Pod record of
        // ttp_common::trace; read_unaligned because ring-buffer items are
        // only 8-aligned by convention.
        unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) }
    })
}

/// Decodes one ring-buffer record; None for a short record or an unknown
/// kind.
pub(crate) fn decode(bytes: &[u8]) -> Option<TraceEvent> {
    let h: Header = read(bytes)?;
    let body = match Kind::from_u32(h.kind)? {
        k @ (Kind::SwitchIn | Kind::SwitchOut) => {
            let s: Switch = read(bytes)?;
            if k == Kind::SwitchIn {
                TraceBody::SwitchIn {
                    prev_tid: s.other_tid,
                }
            } else {
                TraceBody::SwitchOut {
                    state: ThreadState::from_ledger(s.state),
                    next_tid: s.other_tid,
                    preempt: s.flags & SWITCH_PREEMPT != 0,
                    prev_state: s.prev_state,
                }
            }
        }
        Kind::Wakeup => {
            let w: Wakeup = read(bytes)?;
            TraceBody::Wakeup {
                new: w.flags & WAKEUP_NEW != 0,
            }
        }
        Kind::Waking => {
            let w: Wakeup = read(bytes)?;
            TraceBody::Waking {
                waker_tid: w.waker_tid,
                waker_tgid: w.waker_tgid,
            }
        }
        k @ (Kind::BlockSubmit | Kind::BlockIssue | Kind::BlockComplete) => {
            let b: Block = read(bytes)?;
            TraceBody::Block {
                phase: match k {
                    Kind::BlockSubmit => BlockPhase::Submit,
                    Kind::BlockIssue => BlockPhase::Issue,
                    _ => BlockPhase::Complete,
                },
                rq: b.rq,
                sector: b.sector,
                bytes: b.bytes,
                op: b.op,
                dev_major: b.dev_major,
                dev_minor: b.dev_minor,
            }
        }
        k @ (Kind::Fork | Kind::Exec | Kind::Exit) => {
            let p: Proc = read(bytes)?;
            match k {
                Kind::Fork => TraceBody::Fork {
                    parent_tid: p.other_tid,
                    parent_tgid: p.other_tgid,
                    comm: comm(&p.comm),
                },
                Kind::Exec => TraceBody::Exec {
                    old_tid: p.other_tid,
                    comm: comm(&p.comm),
                },
                _ => TraceBody::Exit {
                    group_dead: p.flags & EXIT_GROUP_DEAD != 0,
                    comm: comm(&p.comm),
                },
            }
        }
        Kind::CpuSample => {
            let c: CpuSample = read(bytes)?;
            TraceBody::CpuSample {
                nr_running: c.nr_running,
                nr_iowait: c.nr_iowait,
                idle: c.idle != 0,
            }
        }
    };
    Some(TraceEvent {
        ts_ns: h.ts_ns,
        tid: h.tid,
        tgid: h.tgid,
        cpu: h.cpu,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T>(v: &T) -> Vec<u8> {
        // SAFETY: reading a repr(C) Pod value as bytes.
        unsafe { std::slice::from_raw_parts(v as *const T as *const u8, size_of::<T>()).to_vec() }
    }

    /// Catches a decoder that reads the wrong payload for a kind, mixes up
    /// switch-in and switch-out, or accepts a truncated record.
    #[test]
    fn decodes_records_by_kind_and_rejects_short_ones() {
        let hdr = |kind: Kind| Header {
            kind: kind as u32,
            tid: 11,
            tgid: 10,
            cpu: 1,
            ts_ns: 123_456_789,
        };
        let out = Switch {
            hdr: hdr(Kind::SwitchOut),
            state: state::IOWAIT,
            other_tid: 0,
            prev_state: 2,
            flags: 0,
        };
        let ev = decode(&bytes(&out)).unwrap();
        assert_eq!(
            (ev.ts_ns, ev.tid, ev.tgid, ev.cpu),
            (123_456_789, 11, 10, 1)
        );
        assert_eq!(
            ev.body,
            TraceBody::SwitchOut {
                state: ThreadState::IoWait,
                next_tid: 0,
                preempt: false,
                prev_state: 2
            }
        );
        let mut b = Block {
            hdr: hdr(Kind::BlockIssue),
            rq: 0xffff_8880_0000_1000,
            sector: 2048,
            bytes: 524_288,
            op: 0,
            dev_major: 253,
            dev_minor: 0,
        };
        let ev = decode(&bytes(&b)).unwrap();
        assert!(matches!(
            ev.body,
            TraceBody::Block {
                phase: BlockPhase::Issue,
                bytes: 524_288,
                dev_major: 253,
                ..
            }
        ));
        let mut p = Proc {
            hdr: hdr(Kind::Exit),
            flags: EXIT_GROUP_DEAD,
            ..Default::default()
        };
        p.comm[..4].copy_from_slice(b"psql");
        assert_eq!(
            decode(&bytes(&p)).unwrap().body,
            TraceBody::Exit {
                group_dead: true,
                comm: "psql".into()
            }
        );
        // A block record cut to a switch record's length is refused.
        let short = bytes(&b)[..size_of::<Switch>()].to_vec();
        assert_eq!(decode(&short), None);
        b.hdr.kind = 99;
        assert_eq!(decode(&bytes(&b)), None);
    }
}
