//! An independent reading of one process's own-I/O time in iowait, from
//! perf's record of the kernel's block and scheduler tracepoints (perf's
//! ring buffers, not eBPF: a completion interrupt that arrives while an
//! eBPF program runs is still recorded, and perf counts what it loses).
//! The ledger's definition (docs/ledger.md, "The two exact I/O measures",
//! after TTPv2 Sec. 12): a request is in service from `block_rq_issue` to
//! `block_io_done` and belongs to the process that created it
//! (`block_io_start`); while n processes have requests in service each
//! accrues at 1/n; a task accrues its process's part over its iowait waits
//! (a switch-out in state D to its wake-up).
use std::{
    collections::HashMap,
    path::PathBuf,
    process::{Child, Command, Stdio},
};

const EVENTS: [&str; 5] = [
    "block:block_io_start",
    "block:block_rq_issue",
    "block:block_io_done",
    "sched:sched_switch",
    "sched:sched_wakeup",
];

/// `perf record -a` of the events above, until `stop`.
pub struct PerfRecord {
    child: Child,
    data: PathBuf,
}

impl PerfRecord {
    /// None when perf is not installed (the caller says what to install).
    pub fn start() -> Option<Self> {
        let data = super::temp_path("own-io.perf.data");
        let mut cmd = Command::new("perf");
        cmd.args(["record", "-a", "-q", "-o"]).arg(&data);
        for e in EVENTS {
            cmd.args(["-e", e]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // perf attaches within a few hundred ms; its header says when.
        for _ in 0..100 {
            if std::fs::metadata(&data).is_ok_and(|m| m.len() > 0) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        Some(Self { child, data })
    }

    /// Stops the recording and returns `perf script`'s text.
    pub fn stop(mut self) -> String {
        // SAFETY: plain syscall on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        let out = Command::new("perf")
            .args(["script", "--ns", "-F", "pid,tid,time,event,trace", "-i"])
            .arg(&self.data)
            .output()
            .expect("perf script");
        let _ = std::fs::remove_file(&self.data);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for PerfRecord {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.data);
    }
}

/// The process's own-I/O time over its iowait waits, two ways.
#[derive(Debug, Default)]
pub struct OwnTruth {
    pub waits: u64,
    /// Σ wait, switch-out to `sched_wakeup` (or to the switch-in when the
    /// wake-up was not recorded), ns.
    pub iowait_ns: f64,
    /// Own time from each switch-out to its wake-up, ns.
    pub to_wakeup_ns: f64,
    /// Own time from each switch-out to the switch-in (which takes in the
    /// request's last stretch, `block_io_done` running after the wake-up),
    /// each wait's capped at the wait, ns.
    pub to_switch_in_capped_ns: f64,
    /// Requests issued and never done in the record, left out.
    pub never_done: u64,
}

enum Ev {
    Start(String, u32),
    Issue(String),
    Done(String),
    Out(bool),
    In,
    Wake,
}

/// Reads `perf script` text for process `pid` (single-threaded).
pub fn own_truth(script: &str, pid: u32) -> OwnTruth {
    let mut ev: Vec<(u64, Ev)> = Vec::new();
    for line in script.lines() {
        let Some((head, rest)) = line.split_once(": ") else {
            continue;
        };
        let mut h = head.split_whitespace();
        let (Some(ids), Some(time)) = (h.next(), h.next()) else {
            continue;
        };
        let Some(tgid) = ids.split('/').next().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Some((s, ns)) = time.trim_end_matches(':').split_once('.') else {
            continue;
        };
        let (Ok(s), Ok(ns)) = (s.parse::<u64>(), ns.parse::<u64>()) else {
            continue;
        };
        let t = s * 1_000_000_000 + ns;
        let Some((event, trace)) = rest.trim_start().split_once(": ") else {
            continue;
        };
        // "254,0 RM 4096 () 19640848 + 8 ...": device and first sector.
        let key = || {
            let f: Vec<&str> = trace.split_whitespace().collect();
            let i = f
                .iter()
                .position(|x| x.starts_with('(') && x.ends_with(')'))?;
            Some(format!("{} {}", f.first()?, f.get(i + 1)?))
        };
        let field = |name: &str| {
            trace
                .split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(str::to_string)
        };
        let e = match event.trim() {
            "block:block_io_start" => key().map(|k| Ev::Start(k, tgid)),
            "block:block_rq_issue" => key().map(Ev::Issue),
            "block:block_io_done" => key().map(Ev::Done),
            "sched:sched_switch" => {
                let prev = field("prev_pid=").and_then(|p| p.parse::<u32>().ok());
                let next = field("next_pid=").and_then(|p| p.parse::<u32>().ok());
                if prev == Some(pid) {
                    let d = field("prev_state=").is_some_and(|s| s.starts_with('D'));
                    ev.push((t, Ev::Out(d)));
                }
                (next == Some(pid)).then_some(Ev::In)
            }
            "sched:sched_wakeup" => {
                (field("pid=").and_then(|p| p.parse::<u32>().ok()) == Some(pid)).then_some(Ev::Wake)
            }
            _ => None,
        };
        if let Some(e) = e {
            ev.push((t, e));
        }
    }
    ev.sort_by_key(|e| e.0);
    // A request issued and never done in the record would stay in service
    // to its end: left out, and counted.
    // So is one whose block_io_done never came before its sector's next
    // request (the kernel does not emit it for every request).
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut drop: std::collections::HashSet<usize> = Default::default();
    for (i, (_, e)) in ev.iter().enumerate() {
        match e {
            Ev::Start(k, _) => {
                if let Some(j) = open.remove(k.as_str()) {
                    drop.insert(j);
                }
            }
            Ev::Issue(k) => {
                open.entry(k).or_insert(i);
            }
            Ev::Done(k) => {
                open.remove(k.as_str());
            }
            _ => {}
        }
    }
    drop.extend(open.into_values());
    let mut out = OwnTruth {
        never_done: drop.len() as u64,
        ..Default::default()
    };
    let mut owner: HashMap<String, u32> = HashMap::new();
    let mut issued: HashMap<String, u32> = HashMap::new();
    let mut inflight: HashMap<u32, u32> = HashMap::new();
    // Waiting: (switch-out, own to wake-up, own to switch-in, wake-up).
    let mut wait: Option<(u64, f64, f64, Option<u64>)> = None;
    let mut last = 0u64;
    for (i, (t, e)) in ev.iter().enumerate() {
        if let Some(w) = wait.as_mut()
            && *t > last
            && inflight.get(&pid).copied().unwrap_or(0) > 0
        {
            let n = inflight.values().filter(|&&v| v > 0).count() as f64;
            let share = (t - last) as f64 / n;
            if w.3.is_none() {
                w.1 += share;
            }
            w.2 += share;
        }
        last = *t;
        match e {
            Ev::Start(k, tgid) => {
                owner.insert(k.clone(), *tgid);
            }
            Ev::Issue(k) if !drop.contains(&i) => {
                if let Some(&o) = owner.get(k)
                    && !issued.contains_key(k)
                {
                    issued.insert(k.clone(), o);
                    *inflight.entry(o).or_default() += 1;
                }
            }
            Ev::Done(k) => {
                if let Some(o) = issued.remove(k) {
                    *inflight.entry(o).or_default() -= 1;
                }
                owner.remove(k);
            }
            Ev::Out(true) => wait = Some((*t, 0.0, 0.0, None)),
            Ev::Wake => {
                if let Some(w) = wait.as_mut()
                    && w.3.is_none()
                {
                    w.3 = Some(*t);
                }
            }
            Ev::In => {
                if let Some((t0, to_wake, to_in, woke)) = wait.take() {
                    let end = woke.unwrap_or(*t);
                    let span = (end - t0) as f64;
                    out.waits += 1;
                    out.iowait_ns += span;
                    out.to_wakeup_ns += to_wake;
                    out.to_switch_in_capped_ns += to_in.min(span);
                }
            }
            _ => {}
        }
    }
    out
}
