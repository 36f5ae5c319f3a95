//! The attach session's report: which processes are shown, the live
//! interval table, and the final summary (terminal and ttp.attach/1 JSON).
use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use crate::{
    accounts::{Image, ProcessDelta, Window},
    probe::{Ledger, probe_error_ctx},
    report::units::{bytes, ms},
};

pub struct Session {
    pid: Option<u32>,
    children: bool,
    all: bool,
    first: Image,
    own_tgid: u32,
}

impl Session {
    pub fn start(
        ledger: &mut Ledger,
        pid: Option<u32>,
        children: bool,
        all: bool,
    ) -> anyhow::Result<Self> {
        let snap = ledger.snapshot().map_err(probe_error_ctx)?;
        Ok(Self {
            pid,
            children,
            all,
            first: Image::from_snapshot(&snap),
            own_tgid: std::process::id(),
        })
    }

    pub fn first_image(&self) -> &Image {
        &self.first
    }

    /// The processes this session reports on within `w`: the target (and
    /// its descendants with --children), or every process but ttp itself
    /// with --all.
    fn targets(&self, w: &Window, extra_parents: &HashMap<u32, u32>) -> BTreeSet<u32> {
        if self.all {
            return w
                .processes
                .keys()
                .copied()
                .filter(|&t| t != self.own_tgid)
                .collect();
        }
        let Some(pid) = self.pid else {
            return BTreeSet::new();
        };
        if self.children {
            w.descendants(&[pid], extra_parents)
        } else {
            BTreeSet::from([pid])
        }
    }

    pub fn print_interval(&self, w: &Window) {
        let targets = self.targets(w, &HashMap::new());
        let mut rows: Vec<&ProcessDelta> =
            targets.iter().filter_map(|t| w.processes.get(t)).collect();
        rows.sort_by_key(|p| std::cmp::Reverse(p.kernel.on_cpu_ns + p.kernel.iowait_ns));
        println!(
            "{:>8} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>10} {:>9} {:>7}",
            "PID",
            "COMM",
            "CPU ms",
            "RUNQ ms",
            "SLEEP ms",
            "BLOCK ms",
            "IOWAIT ms",
            "OWN ms",
            "SHARE ms",
            "IOREQ",
            "IOBYTES",
            "DEV ms",
            "CSW"
        );
        for p in rows.iter().take(if self.all { 15 } else { usize::MAX }) {
            let k = &p.kernel;
            println!(
                "{:>8} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>10} {:>9} {:>7}",
                p.tgid,
                p.comm,
                ms(k.on_cpu_ns),
                ms(k.runq_wait_ns),
                ms(k.sleep_ns),
                ms(k.blocked_ns),
                ms(k.iowait_ns),
                ms(k.iowait_own_ns),
                ms(k.iowait_share_ns),
                k.io.read_requests + k.io.write_requests,
                bytes(k.io.read_bytes + k.io.write_bytes),
                ms(k.io.device_ns),
                k.voluntary_switches + k.involuntary_switches
            );
        }
        if w.lost.losses() > 0 {
            println!("lost in the kernel this interval: {:?}", w.lost);
        }
        println!();
    }

    pub fn finish(
        &self,
        last: &Image,
        exits: &[ttp_common::ExitRecord],
        note: Option<String>,
        extra_parents: &HashMap<u32, u32>,
    ) -> Summary {
        let window = Window::between(&self.first, last, exits);
        let targets = self.targets(&window, extra_parents);
        Summary {
            processes: targets
                .iter()
                .filter_map(|t| window.processes.get(t).cloned())
                .collect(),
            window,
            notes: note.into_iter().collect(),
        }
    }
}

pub struct Summary {
    pub window: Window,
    pub processes: Vec<ProcessDelta>,
    pub notes: Vec<String>,
}

impl Summary {
    pub fn print(&self) {
        let w = &self.window;
        println!(
            "== summary over {:.3} s ==",
            (w.end_ns - w.start_ns) as f64 / 1e9
        );
        for p in &self.processes {
            let k = &p.kernel;
            println!(
                "pid {} ({}){}: on-CPU {} ms, run-queue {} ms, sleep {} ms, blocked {} ms, iowait {} ms (own I/O {} ms, share of machine iowait {} ms), I/O {} reads / {} writes, {} read, {} written, device {} ms",
                p.tgid,
                p.comm,
                if p.exited { " exited" } else { "" },
                ms(k.on_cpu_ns),
                ms(k.runq_wait_ns),
                ms(k.sleep_ns),
                ms(k.blocked_ns),
                ms(k.iowait_ns),
                ms(k.iowait_own_ns),
                ms(k.iowait_share_ns),
                k.io.read_requests,
                k.io.write_requests,
                bytes(k.io.read_bytes),
                bytes(k.io.write_bytes),
                ms(k.io.device_ns),
            );
        }
        let t = w.cpu_total();
        println!(
            "machine: busy {} ms, idle {} ms, iowait {} ms over {} CPUs",
            ms(t.busy_ns),
            ms(t.idle_ns),
            ms(t.iowait_ns),
            w.cpus.len()
        );
        println!(
            "lost: {}",
            if w.lost.losses() == 0 {
                "nothing".to_string()
            } else {
                format!("{:?}", w.lost)
            }
        );
        for n in &self.notes {
            println!("note: {n}");
        }
    }

    pub fn json(&self) -> Value {
        let w = &self.window;
        json!({
            "schema": "ttp.attach/1",
            "window": {"start_ns": w.start_ns, "end_ns": w.end_ns, "duration_ns": w.end_ns - w.start_ns},
            "lost": w.lost,
            "processes": self.processes.iter().map(|p| json!({
                "pid": p.tgid, "comm": p.comm, "exited": p.exited, "threads": p.threads, "kernel": p.kernel,
            })).collect::<Vec<_>>(),
            "overall": {"kernel": {
                "cpus": w.cpus.iter().map(|(id, c)| json!({"cpu": id, "busy_ns": c.busy_ns, "idle_ns": c.idle_ns, "iowait_ns": c.iowait_ns})).collect::<Vec<_>>(),
                "total": w.cpu_total(),
            }},
            "notes": self.notes,
        })
    }
}
