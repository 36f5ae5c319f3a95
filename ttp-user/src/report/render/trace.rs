//! `ttp.trace/1` (a `--trace` file), read back: per thread, the time in
//! each state and the block I/O it submitted, added up from the trace's own
//! events; the QE slices of a `run` trace.
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{
    rendered::{RenderError, Rendered},
    table::{Table, ms3},
};
use crate::report::format::chrome::{IO_TID_BASE, PROTOCOL_PID, SYNTHETIC_ID_BASE};
use crate::report::trace::TraceMetadata;

const STATES: [&str; 5] = ["Running", "Runnable", "Sleeping", "Blocked", "I/O wait"];

#[derive(Debug, Default, Clone)]
struct ThreadRow {
    comm: String,
    /// ns per state, in STATES order.
    state_ns: [f64; 5],
    io_requests: u64,
    io_bytes: u64,
}

#[derive(Debug, Clone)]
struct QeRow {
    name: String,
    dur_ns: f64,
    args: Value,
}

pub(crate) struct TraceSummary {
    metadata: TraceMetadata,
    /// (pid, tid) → row.
    threads: BTreeMap<(u64, u64), ThreadRow>,
    process_names: BTreeMap<u64, String>,
    qes: Vec<QeRow>,
}

impl TraceSummary {
    pub(crate) fn from_value(v: Value) -> Result<Self, RenderError> {
        let invalid = |what: &str| RenderError::Invalid {
            schema: "ttp.trace/1".into(),
            source: serde::de::Error::custom(what),
        };
        let events = v["traceEvents"]
            .as_array()
            .ok_or_else(|| invalid("no traceEvents array"))?;
        let mut s = TraceSummary {
            metadata: match v.get("metadata") {
                Some(m) => {
                    TraceMetadata::deserialize(m).map_err(|source| RenderError::Invalid {
                        schema: "ttp.trace/1".into(),
                        source,
                    })?
                }
                None => TraceMetadata::default(),
            },
            threads: BTreeMap::new(),
            process_names: BTreeMap::new(),
            qes: Vec::new(),
        };
        let io_base = IO_TID_BASE as u64;
        for e in events {
            let (Some(pid), Some(tid)) = (e["pid"].as_u64(), e["tid"].as_u64()) else {
                continue;
            };
            let name = e["name"].as_str().unwrap_or_default();
            let dur_ns = e["dur"].as_f64().unwrap_or(0.0) * 1e3;
            match e["ph"].as_str() {
                Some("M") if name == "process_name" => {
                    let n = e["args"]["name"].as_str().unwrap_or_default();
                    s.process_names.insert(pid, n.to_string());
                }
                Some("M") if name == "thread_name" && tid < io_base => {
                    let n = e["args"]["name"].as_str().unwrap_or_default();
                    s.threads.entry((pid, tid)).or_default().comm = n.to_string();
                }
                Some("X") if pid == PROTOCOL_PID as u64 => s.qes.push(QeRow {
                    name: name.to_string(),
                    dur_ns,
                    args: e["args"].clone(),
                }),
                Some("X") if e["cat"] == "block" && name != "on device" => {
                    let submitter = e["args"]["submitter_tid"].as_u64().unwrap_or(tid);
                    let row = s.threads.entry((pid, submitter)).or_default();
                    row.io_requests += 1;
                    row.io_bytes += e["args"]["bytes"].as_u64().unwrap_or(0);
                }
                Some("X") if e["cat"] == "sched" && pid < SYNTHETIC_ID_BASE as u64 => {
                    if let Some(i) = STATES.iter().position(|s| *s == name) {
                        s.threads.entry((pid, tid)).or_default().state_ns[i] += dur_ns;
                    }
                }
                _ => {}
            }
        }
        Ok(s)
    }
}

impl Rendered for TraceSummary {
    fn title(&self) -> String {
        format!(
            "ttp trace ({}): {} thread(s) over {:.3} s",
            if self.metadata.command.is_empty() {
                "ttp"
            } else {
                &self.metadata.command
            },
            self.threads.len(),
            self.metadata.duration_ns as f64 / 1e9
        )
    }

    fn text(&self) -> String {
        let m = &self.metadata;
        let mut out = format!(
            "{}\nclock {}, {} events, {} lost; open it in ui.perfetto.dev or chrome://tracing\n\n",
            self.title(),
            if m.clock.is_empty() { "?" } else { &m.clock },
            m.events,
            m.events_lost
        );
        out.push_str(&format!(
            "{:>8} {:>8} {:<16} {:>11} {:>11} {:>11} {:>11} {:>11} {:>6} {:>12}\n",
            "PID",
            "TID",
            "COMM",
            "RUN ms",
            "RUNQ ms",
            "SLEEP ms",
            "BLOCK ms",
            "IOWAIT ms",
            "IOREQ",
            "IOBYTES"
        ));
        for ((pid, tid), r) in &self.threads {
            let [run, runq, sleep, block, iowait] = r.state_ns.map(|v| ms3(Some(v)));
            out.push_str(&format!(
                "{pid:>8} {tid:>8} {:<16} {run:>11} {runq:>11} {sleep:>11} {block:>11} {iowait:>11} {:>6} {:>12}\n",
                r.comm, r.io_requests, r.io_bytes
            ));
        }
        if !self.qes.is_empty() {
            out.push_str("\nQE slices:\n");
            for q in &self.qes {
                out.push_str(&format!(
                    "  {:<10} {:>12} ms  Time_meas {} ms, Time_calc {} ms{}\n",
                    q.name,
                    ms3(Some(q.dur_ns)),
                    q.args["time_meas_ms"],
                    q.args["time_calc_ms"],
                    if q.args["dropped"] == true {
                        format!(
                            ", dropped ({})",
                            q.args["drop_reason"].as_str().unwrap_or("?")
                        )
                    } else {
                        String::new()
                    }
                ));
            }
        }
        for w in &self.metadata.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        out
    }

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "pid",
            "tid",
            "process",
            "comm",
            "running_ms",
            "runnable_ms",
            "sleeping_ms",
            "blocked_ms",
            "iowait_ms",
            "io_requests",
            "io_bytes",
        ]);
        for ((pid, tid), r) in &self.threads {
            let mut row = vec![
                pid.to_string(),
                tid.to_string(),
                self.process_names.get(pid).cloned().unwrap_or_default(),
                r.comm.clone(),
            ];
            row.extend(r.state_ns.iter().map(|v| ms3(Some(*v))));
            row.push(r.io_requests.to_string());
            row.push(r.io_bytes.to_string());
            t.push(row);
        }
        t
    }
}
