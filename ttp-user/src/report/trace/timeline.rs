//! From the kernel's event stream to what a timeline shows: each thread's
//! consecutive states, each block request from submission to completion,
//! who woke whom, and the per-CPU counters.
//!
//! Every state change in the stream carries the ledger's own state and
//! timestamp, so summing a thread's `Running` slices over a window gives
//! the ledger's on_cpu_ns for it. Before a thread's first event its state
//! comes from the ledger's account (a seed, read when tracing started);
//! without one it is inferred from that event (a switch-out means it was
//! running) and marked as inferred.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use ttp_ledger::probe::{BlockPhase, ThreadState, TraceBody, TraceEvent};
use ttp_window::window::trace_record::Seed;

/// The task that woke a thread (sched_waking, in its context).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waker {
    pub tid: u32,
    pub tgid: u32,
    pub ts_ns: u64,
}

/// One interval of one thread in one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSlice {
    pub tid: u32,
    pub tgid: u32,
    pub state: ThreadState,
    /// The CPU, for `Running`.
    pub cpu: Option<u32>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// For `Runnable` after a wakeup: who woke the thread.
    pub woken_by: Option<Waker>,
    /// For `Runnable` after a switch-out: it was preempted.
    pub preempted: bool,
    /// The state was inferred from the thread's first event, not known.
    pub inferred: bool,
}

/// A block request of a traced thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoRequest {
    pub tid: u32,
    pub tgid: u32,
    pub op: u32,
    /// Bytes at issue (after merges), else at submission.
    pub bytes: u32,
    pub sector: u64,
    pub dev: (u32, u32),
    pub submit_ns: u64,
    pub issue_ns: Option<u64>,
    pub complete_ns: Option<u64>,
    /// Row of its process's I/O tracks: requests in flight at once get
    /// different rows, so each row's slices never overlap.
    pub lane: u32,
}

impl IoRequest {
    /// Its end on the timeline: completion, or the end of the trace.
    pub(crate) fn end_ns(&self, trace_end_ns: u64) -> u64 {
        self.complete_ns.unwrap_or(trace_end_ns)
    }
}

/// A wakeup whose waker is a traced thread that was running at the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub waker: Waker,
    pub wakee_tid: u32,
    pub wakee_tgid: u32,
    /// The wakee's `Runnable` slice the wakeup started.
    pub runnable_start_ns: u64,
    pub runnable_end_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuCounter {
    pub cpu: u32,
    pub ts_ns: u64,
    pub nr_running: u32,
    pub nr_iowait: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkKind {
    Fork { parent_tid: u32, parent_tgid: u32 },
    Exec { comm: String },
    Exit { group_dead: bool },
}

/// A point event on a thread's track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub tid: u32,
    pub tgid: u32,
    pub ts_ns: u64,
    pub kind: MarkKind,
}

/// Anomalies met while building the timeline: reported, never hidden.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TimelineStats {
    /// Block issues or completions of requests submitted before tracing
    /// started (their submission was not seen).
    pub io_unmatched: u64,
    /// Requests still in flight when the trace ended.
    pub io_incomplete: u64,
    /// Events stamped after the end of the trace (left out).
    pub events_after_end: u64,
    /// Events of threads stamped before the start of the trace (left out).
    pub events_before_start: u64,
    /// Slices whose state was inferred from the thread's first event.
    pub inferred_slices: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub start_ns: u64,
    pub end_ns: u64,
    /// (tgid, tid) → command name.
    pub threads: BTreeMap<(u32, u32), String>,
    pub slices: Vec<StateSlice>,
    pub io: Vec<IoRequest>,
    pub flows: Vec<Flow>,
    pub counters: Vec<CpuCounter>,
    pub marks: Vec<Mark>,
    pub stats: TimelineStats,
}

#[derive(Debug, Clone)]
struct Open {
    state: ThreadState,
    cpu: Option<u32>,
    since: u64,
    woken_by: Option<Waker>,
    preempted: bool,
    inferred: bool,
}

#[derive(Debug, Default)]
struct Live {
    tgid: u32,
    cur: Option<Open>,
    /// Its state before the first event is settled (seed, inference, fork).
    known: bool,
    waking: Option<Waker>,
}

impl Timeline {
    /// Builds the timeline of `events` (any order) between `start_ns` and
    /// `end_ns`. `names` ((tgid, tid) → comm, e.g. from the ledger at the
    /// end) names threads the events do not.
    pub(crate) fn build(
        events: &[TraceEvent],
        seeds: &[Seed],
        names: &BTreeMap<(u32, u32), String>,
        start_ns: u64,
        end_ns: u64,
    ) -> Self {
        let mut order: Vec<&TraceEvent> = events.iter().collect();
        // Records from different CPUs reach the ring buffer slightly out of
        // order; the stable sort keeps a CPU's own order on equal stamps.
        order.sort_by_key(|e| e.ts_ns);
        let mut t = Timeline {
            start_ns,
            end_ns,
            ..Default::default()
        };
        let mut seeds: HashMap<u32, &Seed> = seeds.iter().map(|s| (s.tid, s)).collect();
        for s in seeds.values() {
            t.threads.insert((s.tgid, s.tid), s.comm.clone());
        }
        let mut live: HashMap<u32, Live> = HashMap::new();
        let mut open_io: HashMap<u64, IoRequest> = HashMap::new();
        let mut io_done: Vec<IoRequest> = Vec::new();
        let mut wakeups: Vec<(Waker, u32, u32, u64)> = Vec::new();

        // The per-CPU sampler runs from load time: the last sample of each
        // CPU before the trace starts is its counters' value at the start.
        let mut before_start: HashMap<u32, CpuCounter> = HashMap::new();
        for ev in order {
            if ev.ts_ns > end_ns {
                t.stats.events_after_end += 1;
                continue;
            }
            if ev.ts_ns < start_ns {
                match &ev.body {
                    TraceBody::CpuSample {
                        nr_running,
                        nr_iowait,
                        ..
                    } => {
                        before_start.insert(
                            ev.cpu,
                            CpuCounter {
                                cpu: ev.cpu,
                                ts_ns: start_ns,
                                nr_running: *nr_running,
                                nr_iowait: *nr_iowait,
                            },
                        );
                    }
                    _ => t.stats.events_before_start += 1,
                }
                continue;
            }
            match &ev.body {
                TraceBody::CpuSample {
                    nr_running,
                    nr_iowait,
                    ..
                } => {
                    t.counters.push(CpuCounter {
                        cpu: ev.cpu,
                        ts_ns: ev.ts_ns,
                        nr_running: *nr_running,
                        nr_iowait: *nr_iowait,
                    });
                    continue;
                }
                TraceBody::Block {
                    phase,
                    rq,
                    sector,
                    bytes,
                    op,
                    dev_major,
                    dev_minor,
                } => {
                    match phase {
                        BlockPhase::Submit => {
                            let req = IoRequest {
                                tid: ev.tid,
                                tgid: ev.tgid,
                                op: *op,
                                bytes: *bytes,
                                sector: *sector,
                                dev: (*dev_major, *dev_minor),
                                submit_ns: ev.ts_ns,
                                issue_ns: None,
                                complete_ns: None,
                                lane: 0,
                            };
                            // An address still open means its completion
                            // was lost: keep the old request as incomplete.
                            if let Some(old) = open_io.insert(*rq, req) {
                                io_done.push(old);
                            }
                        }
                        BlockPhase::Issue => match open_io.get_mut(rq) {
                            Some(r) => {
                                r.issue_ns = Some(ev.ts_ns);
                                if *bytes > 0 {
                                    r.bytes = *bytes;
                                }
                                r.sector = *sector;
                            }
                            None => t.stats.io_unmatched += 1,
                        },
                        BlockPhase::Complete => match open_io.remove(rq) {
                            Some(mut r) => {
                                r.complete_ns = Some(ev.ts_ns);
                                io_done.push(r);
                            }
                            None => t.stats.io_unmatched += 1,
                        },
                    }
                    continue;
                }
                TraceBody::Waking {
                    waker_tid,
                    waker_tgid,
                } => {
                    live.entry(ev.tid)
                        .or_insert_with(|| Live {
                            tgid: ev.tgid,
                            ..Default::default()
                        })
                        .waking = Some(Waker {
                        tid: *waker_tid,
                        tgid: *waker_tgid,
                        ts_ns: ev.ts_ns,
                    });
                    continue;
                }
                _ => {}
            }

            let l = live.entry(ev.tid).or_insert_with(|| Live {
                tgid: ev.tgid,
                ..Default::default()
            });
            l.tgid = ev.tgid;
            if !l.known {
                l.known = true;
                let seed = seeds.remove(&ev.tid).filter(|s| s.tgid == ev.tgid);
                l.cur = match (seed, &ev.body) {
                    (_, TraceBody::Fork { .. }) => None,
                    (Some(s), _) if s.since_ns <= ev.ts_ns && s.state != ThreadState::Unknown => {
                        Some(Open {
                            state: s.state,
                            cpu: None,
                            since: s.since_ns.max(start_ns),
                            woken_by: None,
                            preempted: false,
                            inferred: false,
                        })
                    }
                    (_, body) => {
                        let state = match body {
                            TraceBody::SwitchOut { .. } | TraceBody::Exit { .. } => {
                                Some(ThreadState::Running)
                            }
                            TraceBody::SwitchIn { .. } => Some(ThreadState::Runnable),
                            _ => None,
                        };
                        state.map(|state| {
                            t.stats.inferred_slices += 1;
                            Open {
                                state,
                                cpu: (state == ThreadState::Running).then_some(ev.cpu),
                                since: start_ns,
                                woken_by: None,
                                preempted: false,
                                inferred: true,
                            }
                        })
                    }
                };
            }
            let close = |l: &mut Live, slices: &mut Vec<StateSlice>| {
                if let Some(o) = l.cur.take()
                    && ev.ts_ns > o.since
                {
                    slices.push(StateSlice {
                        tid: ev.tid,
                        tgid: l.tgid,
                        state: o.state,
                        cpu: o.cpu,
                        start_ns: o.since,
                        end_ns: ev.ts_ns,
                        woken_by: o.woken_by,
                        preempted: o.preempted,
                        inferred: o.inferred,
                    });
                }
            };
            let open = |state, cpu, woken_by, preempted| Open {
                state,
                cpu,
                since: ev.ts_ns,
                woken_by,
                preempted,
                inferred: false,
            };
            match &ev.body {
                TraceBody::SwitchIn { .. } => {
                    close(l, &mut t.slices);
                    l.cur = Some(open(ThreadState::Running, Some(ev.cpu), None, false));
                }
                TraceBody::SwitchOut { state, preempt, .. } => {
                    close(l, &mut t.slices);
                    l.cur = Some(open(*state, None, None, *preempt));
                }
                TraceBody::Wakeup { new } => {
                    close(l, &mut t.slices);
                    let waker = if *new { None } else { l.waking.take() };
                    if let Some(w) = waker {
                        wakeups.push((w, ev.tid, ev.tgid, ev.ts_ns));
                    }
                    l.cur = Some(open(ThreadState::Runnable, None, waker, false));
                }
                TraceBody::Exit { group_dead, comm } => {
                    close(l, &mut t.slices);
                    t.threads.insert((ev.tgid, ev.tid), comm.clone());
                    t.marks.push(Mark {
                        tid: ev.tid,
                        tgid: ev.tgid,
                        ts_ns: ev.ts_ns,
                        kind: MarkKind::Exit {
                            group_dead: *group_dead,
                        },
                    });
                    // A later thread with this tid is another thread.
                    live.remove(&ev.tid);
                }
                TraceBody::Fork {
                    parent_tid,
                    parent_tgid,
                    comm,
                } => {
                    t.threads.insert((ev.tgid, ev.tid), comm.clone());
                    t.marks.push(Mark {
                        tid: ev.tid,
                        tgid: ev.tgid,
                        ts_ns: ev.ts_ns,
                        kind: MarkKind::Fork {
                            parent_tid: *parent_tid,
                            parent_tgid: *parent_tgid,
                        },
                    });
                }
                TraceBody::Exec { comm, .. } => {
                    t.threads.insert((ev.tgid, ev.tid), comm.clone());
                    t.marks.push(Mark {
                        tid: ev.tid,
                        tgid: ev.tgid,
                        ts_ns: ev.ts_ns,
                        kind: MarkKind::Exec { comm: comm.clone() },
                    });
                }
                TraceBody::Waking { .. }
                | TraceBody::Block { .. }
                | TraceBody::CpuSample { .. } => {}
            }
        }

        // Threads seeded but silent for the whole trace stay in their state.
        for s in seeds.values() {
            if s.state != ThreadState::Unknown && s.since_ns <= end_ns {
                live.insert(
                    s.tid,
                    Live {
                        tgid: s.tgid,
                        cur: Some(Open {
                            state: s.state,
                            cpu: None,
                            since: s.since_ns.max(start_ns),
                            woken_by: None,
                            preempted: false,
                            inferred: false,
                        }),
                        known: true,
                        waking: None,
                    },
                );
            }
        }
        // Open intervals end with the trace ("as of now", like the ledger).
        for (tid, l) in live {
            if let Some(o) = l.cur
                && end_ns > o.since
            {
                t.slices.push(StateSlice {
                    tid,
                    tgid: l.tgid,
                    state: o.state,
                    cpu: o.cpu,
                    start_ns: o.since,
                    end_ns,
                    woken_by: o.woken_by,
                    preempted: o.preempted,
                    inferred: o.inferred,
                });
            }
        }
        t.slices
            .sort_by_key(|s| (s.tgid, s.tid, s.start_ns, s.end_ns));
        for s in &t.slices {
            t.threads
                .entry((s.tgid, s.tid))
                .or_insert_with(|| names.get(&(s.tgid, s.tid)).cloned().unwrap_or_default());
        }
        for (k, v) in t.threads.iter_mut() {
            if v.is_empty() {
                *v = names
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| format!("tid {}", k.1));
            }
        }

        t.stats.io_incomplete = open_io.len() as u64;
        io_done.extend(open_io.into_values());
        t.io = assign_lanes(io_done, end_ns);
        t.flows = bind_flows(&t.slices, wakeups);
        t.counters.extend(before_start.into_values());
        t.counters.sort_by_key(|c| (c.cpu, c.ts_ns));
        t
    }

    /// Processes in the timeline.
    pub(crate) fn processes(&self) -> BTreeSet<u32> {
        self.threads.keys().map(|(tgid, _)| *tgid).collect()
    }

    /// Time thread `tid` spent in `state` within [from_ns, to_ns] (the
    /// tests' truth for the slices).
    #[cfg(test)]
    pub(crate) fn time_in(&self, tid: u32, state: ThreadState, from_ns: u64, to_ns: u64) -> u64 {
        self.slices
            .iter()
            .filter(|s| s.tid == tid && s.state == state)
            .map(|s| s.end_ns.min(to_ns).saturating_sub(s.start_ns.max(from_ns)))
            .sum()
    }
}

/// Gives each request the first row of its process that is free when it
/// is submitted (greedy interval partitioning: as few rows as requests
/// ever in flight at once).
fn assign_lanes(mut io: Vec<IoRequest>, end_ns: u64) -> Vec<IoRequest> {
    io.sort_by_key(|r| (r.tgid, r.submit_ns, r.tid));
    let mut lanes: HashMap<u32, Vec<u64>> = HashMap::new();
    for r in &mut io {
        let rows = lanes.entry(r.tgid).or_default();
        let end = r.end_ns(end_ns);
        match rows
            .iter()
            .position(|&busy_until| busy_until <= r.submit_ns)
        {
            Some(i) => {
                rows[i] = end;
                r.lane = i as u32;
            }
            None => {
                r.lane = rows.len() as u32;
                rows.push(end);
            }
        }
    }
    io
}

/// Keeps the wakeups whose waker was a traced thread running at the time
/// of the wakeup (only then is there a slice on its track to start an
/// arrow from).
fn bind_flows(slices: &[StateSlice], wakeups: Vec<(Waker, u32, u32, u64)>) -> Vec<Flow> {
    let mut running: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    let mut runnable_end: HashMap<(u32, u64), u64> = HashMap::new();
    for s in slices {
        match s.state {
            ThreadState::Running => running
                .entry(s.tid)
                .or_default()
                .push((s.start_ns, s.end_ns)),
            ThreadState::Runnable => {
                runnable_end.insert((s.tid, s.start_ns), s.end_ns);
            }
            _ => {}
        }
    }
    wakeups
        .into_iter()
        .filter_map(|(w, tid, tgid, at)| {
            let spans = running.get(&w.tid)?;
            let i = spans.partition_point(|&(start, _)| start <= w.ts_ns);
            let &(_, end) = spans.get(i.checked_sub(1)?)?;
            if w.ts_ns > end {
                return None;
            }
            Some(Flow {
                waker: w,
                wakee_tid: tid,
                wakee_tgid: tgid,
                runnable_start_ns: at,
                runnable_end_ns: *runnable_end.get(&(tid, at))?,
            })
        })
        .collect()
}
