//! The timeline as Chrome Trace Event Format JSON (the "JSON Object
//! Format" that Perfetto's UI and chrome://tracing open as they are).
//!
//! Tracks: one process per traced process with one thread track per
//! thread (its states as complete "X" events) and I/O rows (requests as
//! "X" events, device time nested inside); a "CPUs" process with counters;
//! for `run`, a protocol process with one slice per QE. Wakeups are v1 flow
//! events ("s" in the waker's running slice, "f" bound to the wakee's
//! runnable slice). Timestamps are CLOCK_MONOTONIC, in µs with three
//! decimals (the format's unit, ns precision).
use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::report::trace::{IoRequest, MarkKind, QeSlice, StateSlice, Timeline, Trace};
use ttp_ledger::probe::ThreadState;
use ttp_sys::sys::export::{ExportError, Exporter};

/// A `--trace` recording as a Chrome-format file (`run --trace`,
/// `attach --trace`).
pub struct Chrome<'a>(pub &'a Trace);

impl Exporter for Chrome<'_> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        Ok(self.0.to_bytes())
    }
}

impl Trace {
    /// The Chrome Trace Event Format JSON text.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let devices = DeviceNames::default();
        let lookup = |ma, mi| devices.name(ma, mi);
        Document {
            timeline: self.timeline(),
            qes: self.qes(),
            protocol: self.command(),
            devices: &lookup,
            metadata: self.metadata(),
            warnings: self.warnings(),
        }
        .to_bytes()
    }
}

/// Block device names from /sys/dev/block/MAJOR:MINOR/uevent (DEVNAME),
/// read once per device.
#[derive(Default)]
struct DeviceNames {
    cache: std::cell::RefCell<HashMap<(u32, u32), String>>,
}

impl DeviceNames {
    fn name(&self, major: u32, minor: u32) -> String {
        self.cache
            .borrow_mut()
            .entry((major, minor))
            .or_insert_with(|| {
                std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"))
                    .ok()
                    .and_then(|u| {
                        u.lines()
                            .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_string))
                    })
                    .unwrap_or_else(|| format!("{major}:{minor}"))
            })
            .clone()
    }
}

/// Track ids ttp makes up start here: above PID_MAX_LIMIT (2^22), so they
/// never collide with a real pid or tid.
pub(crate) const SYNTHETIC_ID_BASE: u32 = 1 << 30;
/// The "CPUs" process that holds the per-CPU counters.
pub(crate) const CPUS_PID: u32 = SYNTHETIC_ID_BASE;
/// The protocol process that holds the QE slices of `run`.
pub(crate) const PROTOCOL_PID: u32 = SYNTHETIC_ID_BASE + 1;
/// I/O rows: tid = IO_TID_BASE + a row number unique in the trace.
pub(crate) const IO_TID_BASE: u32 = SYNTHETIC_ID_BASE + 0x1000;

/// CLOCK_MONOTONIC ns as the format's µs. The division is correctly
/// rounded and serde_json prints the shortest decimal that reads back as
/// the same double, so the text carries the exact ns while they fit in 53
/// bits (104 days of uptime).
pub(crate) fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// One trace event; fields a phase does not use are left out.
#[derive(Serialize)]
struct Event<'a> {
    ph: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'static str,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    /// Flow binding point ("e": the enclosing slice).
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    /// Instant scope ("t" thread, "g" global).
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    args: Map<String, Value>,
}

impl<'a> Event<'a> {
    fn new(ph: &'static str, name: &'a str, pid: u32, tid: u32) -> Self {
        Self {
            ph,
            name,
            cat: "",
            pid,
            tid,
            ts: None,
            dur: None,
            id: None,
            bp: None,
            s: None,
            args: Map::new(),
        }
    }
    fn at(mut self, ns: u64) -> Self {
        self.ts = Some(us(ns));
        self
    }
    fn span(mut self, start_ns: u64, end_ns: u64) -> Self {
        self.ts = Some(us(start_ns));
        self.dur = Some(us(end_ns.saturating_sub(start_ns)));
        self
    }
    fn cat(mut self, cat: &'static str) -> Self {
        self.cat = cat;
        self
    }
    fn arg(mut self, k: &str, v: impl Into<Value>) -> Self {
        self.args.insert(k.into(), v.into());
        self
    }
}

/// Name shown for a state slice.
pub(crate) fn state_name(s: ThreadState) -> &'static str {
    match s {
        ThreadState::Running => "Running",
        ThreadState::Runnable => "Runnable",
        ThreadState::Sleeping => "Sleeping",
        ThreadState::Blocked => "Blocked",
        ThreadState::IoWait => "I/O wait",
        ThreadState::Dead => "Dead",
        ThreadState::Unknown => "Unknown",
    }
}

/// REQ_OP_* names (include/linux/blk_types.h).
pub(crate) fn op_name(op: u32) -> &'static str {
    match op {
        0 => "read",
        1 => "write",
        2 => "flush",
        3 => "discard",
        5 => "secure erase",
        9 => "write zeroes",
        _ => "other I/O",
    }
}

/// Everything the writer needs besides the timeline.
pub(crate) struct Document<'a> {
    pub timeline: &'a Timeline,
    pub qes: &'a [QeSlice],
    /// Name of the protocol track (e.g. "ttp run (TTPv2)").
    pub protocol: &'a str,
    /// "major:minor" → device name, for I/O slices.
    pub devices: &'a dyn Fn(u32, u32) -> String,
    /// The trace's "metadata" object (schema, losses, clock, command).
    pub metadata: Value,
    /// Instant events at the start of the trace when something was lost.
    pub warnings: Vec<String>,
}

impl Document<'_> {
    /// The JSON text.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut events: Vec<Vec<u8>> = Vec::new();
        let mut push = |e: Event| events.push(serde_json::to_vec(&e).expect("serialisable"));
        let tl = self.timeline;

        // Names and order: processes by pid, then CPUs; threads by tid, then
        // I/O rows.
        for (i, tgid) in tl.processes().iter().enumerate() {
            let name = tl
                .threads
                .get(&(*tgid, *tgid))
                .or_else(|| {
                    tl.threads
                        .range((*tgid, 0)..=(*tgid, u32::MAX))
                        .next()
                        .map(|(_, n)| n)
                })
                .cloned()
                .unwrap_or_default();
            push(Event::new("M", "process_name", *tgid, 0).arg("name", name));
            push(Event::new("M", "process_sort_index", *tgid, 0).arg("sort_index", i as u64 + 1));
        }
        for ((tgid, tid), name) in &tl.threads {
            push(Event::new("M", "thread_name", *tgid, *tid).arg("name", name.as_str()));
            push(Event::new("M", "thread_sort_index", *tgid, *tid).arg("sort_index", *tid as u64));
        }

        for s in &tl.slices {
            push(state_event(s));
        }
        self.io_events(&mut push);
        for (i, f) in tl.flows.iter().enumerate() {
            let id = i as u64 + 1;
            let name = "wakeup";
            let mut s = Event::new("s", name, f.waker.tgid, f.waker.tid)
                .cat("wakeup")
                .at(f.waker.ts_ns);
            s.id = Some(id);
            push(s);
            // Bound to the enclosing slice at its midpoint: the runnable
            // slice, whatever order same-stamp events are read in.
            let mid = f.runnable_start_ns + (f.runnable_end_ns - f.runnable_start_ns) / 2;
            let mut e = Event::new("f", name, f.wakee_tgid, f.wakee_tid)
                .cat("wakeup")
                .at(mid);
            e.id = Some(id);
            e.bp = Some("e");
            push(e);
        }
        for m in &tl.marks {
            let (name, ev) = match &m.kind {
                MarkKind::Fork {
                    parent_tid,
                    parent_tgid,
                } => (
                    "fork".to_string(),
                    Map::from_iter([
                        ("parent_tid".to_string(), Value::from(*parent_tid)),
                        ("parent_pid".to_string(), Value::from(*parent_tgid)),
                    ]),
                ),
                MarkKind::Exec { comm } => (
                    format!("exec {comm}"),
                    Map::from_iter([("comm".to_string(), Value::from(comm.as_str()))]),
                ),
                MarkKind::Exit { group_dead } => (
                    if *group_dead {
                        "exit (process)"
                    } else {
                        "exit"
                    }
                    .to_string(),
                    Map::new(),
                ),
            };
            let mut e = Event::new("i", &name, m.tgid, m.tid)
                .cat("process")
                .at(m.ts_ns);
            e.s = Some("t");
            e.args = ev;
            push(e);
        }

        if !tl.counters.is_empty() {
            push(Event::new("M", "process_name", CPUS_PID, 0).arg("name", "CPUs"));
            push(Event::new("M", "process_sort_index", CPUS_PID, 0).arg("sort_index", 1u64 << 20));
            for c in &tl.counters {
                let rq = format!("cpu{} run queue", c.cpu);
                push(
                    Event::new("C", &rq, CPUS_PID, CPUS_PID)
                        .at(c.ts_ns)
                        .arg("tasks", c.nr_running),
                );
                let io = format!("cpu{} iowait", c.cpu);
                push(
                    Event::new("C", &io, CPUS_PID, CPUS_PID)
                        .at(c.ts_ns)
                        .arg("tasks", c.nr_iowait),
                );
            }
        }

        if !self.qes.is_empty() {
            push(Event::new("M", "process_name", PROTOCOL_PID, 0).arg("name", self.protocol));
            push(Event::new("M", "process_sort_index", PROTOCOL_PID, 0).arg("sort_index", 0u64));
            push(Event::new("M", "thread_name", PROTOCOL_PID, PROTOCOL_PID).arg("name", "QEs"));
            for q in self.qes {
                let mut e = Event::new("X", &q.name, PROTOCOL_PID, PROTOCOL_PID)
                    .cat("protocol")
                    .span(q.start_ns, q.end_ns)
                    .arg("time_meas_ms", q.time_meas_ms)
                    .arg("dropped", q.dropped.is_some());
                if let Some(c) = q.time_calc_ms {
                    e = e.arg("time_calc_ms", c);
                }
                if let Some(r) = &q.dropped {
                    e = e.arg("drop_reason", r.as_str());
                }
                push(e);
            }
        }

        for w in &self.warnings {
            let mut e = Event::new("i", w, CPUS_PID, CPUS_PID)
                .cat("ttp")
                .at(tl.start_ns);
            e.s = Some("g");
            push(e);
        }

        let mut out = Vec::with_capacity(events.iter().map(|e| e.len() + 2).sum::<usize>() + 1024);
        out.extend_from_slice(
            b"{\"schema\":\"ttp.trace/1\",\"displayTimeUnit\":\"ns\",\"metadata\":",
        );
        out.extend(serde_json::to_vec(&self.metadata).expect("serialisable"));
        out.extend_from_slice(b",\"traceEvents\":[\n");
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b",\n");
            }
            out.extend_from_slice(e);
        }
        out.extend_from_slice(b"\n]}\n");
        out
    }

    fn io_events(&self, push: &mut impl FnMut(Event)) {
        let tl = self.timeline;
        // Rows get trace-wide unique tids, in (process, row) order.
        let mut rows: Vec<(u32, u32)> = tl.io.iter().map(|r| (r.tgid, r.lane)).collect();
        rows.sort_unstable();
        rows.dedup();
        let row_tid =
            |r: &IoRequest| IO_TID_BASE + rows.binary_search(&(r.tgid, r.lane)).unwrap_or(0) as u32;
        for (i, (tgid, lane)) in rows.iter().enumerate() {
            let tid = IO_TID_BASE + i as u32;
            let name = format!("block I/O #{lane}");
            push(Event::new("M", "thread_name", *tgid, tid).arg("name", name.as_str()));
            push(
                Event::new("M", "thread_sort_index", *tgid, tid)
                    .arg("sort_index", (1u64 << 32) + *lane as u64),
            );
        }
        for r in &tl.io {
            let tid = row_tid(r);
            let end = r.end_ns(tl.end_ns);
            let dev = (self.devices)(r.dev.0, r.dev.1);
            let mut e = Event::new("X", op_name(r.op), r.tgid, tid)
                .cat("block")
                .span(r.submit_ns, end)
                .arg("bytes", r.bytes)
                .arg("sector", r.sector)
                .arg("device", dev)
                .arg("submitter_tid", r.tid)
                .arg("queue_us", r.issue_ns.map(|i| us(i - r.submit_ns)))
                .arg(
                    "device_us",
                    match (r.issue_ns, r.complete_ns) {
                        (Some(i), Some(c)) => Some(us(c - i)),
                        _ => None,
                    },
                );
            if r.complete_ns.is_none() {
                e = e.arg("incomplete", true);
            }
            push(e);
            if let Some(i) = r.issue_ns {
                push(
                    Event::new("X", "on device", r.tgid, tid)
                        .cat("block")
                        .span(i, end),
                );
            }
        }
    }
}

fn state_event(s: &StateSlice) -> Event<'static> {
    let mut e = Event::new("X", state_name(s.state), s.tgid, s.tid)
        .cat("sched")
        .span(s.start_ns, s.end_ns);
    if let Some(cpu) = s.cpu {
        e = e.arg("cpu", cpu);
    }
    if let Some(w) = s.woken_by {
        e = e.arg(
            "woken_by",
            json!({"tid": w.tid, "pid": w.tgid, "waking_us": us(w.ts_ns)}),
        );
    }
    if s.preempted {
        e = e.arg("preempted", true);
    }
    if s.inferred {
        e = e.arg("inferred", true);
    }
    e
}
