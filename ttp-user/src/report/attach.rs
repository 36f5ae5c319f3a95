//! The attach report: the live interval table, and the final summary with
//! its cross-check (terminal and ttp.attach/1 JSON; docs/attach.md).
use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::report::{
    exit_stats::{ExitRecords, window_counters},
    render::attach::{
        ATTACH_SCHEMA, AgreementView, AttachDoc, CpuView, LostView, MachineView, OverallView,
        ProcessView, TextOptions, WindowView,
    },
    units::{bytes, ms},
};
use ttp_ledger::accounts::{ClosedWindow, ExitedGroup, ProcKey, ProcessDelta, Window};
use ttp_window::window::{
    bracket::WindowReads,
    crosscheck::{self, Agreement},
    procs::{self, ProcEntry, ProcSet},
};

/// Which processes a session reports on.
pub(crate) struct Targets {
    pub pid: Option<u32>,
    pub children: bool,
    pub all: bool,
    pub own_tgid: u32,
}

impl Targets {
    /// The target (and its descendants with --children), or every process
    /// but ttp itself with --all. `parents` maps tgid → parent for
    /// processes older than the probes.
    pub(crate) fn of(&self, w: &Window, parents: &HashMap<u32, u32>) -> BTreeSet<u32> {
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
            w.descendants(&[pid], parents)
        } else {
            BTreeSet::from([pid])
        }
    }
}

impl Targets {
    /// The rows of `w` this session reports on: the target instance(s)
    /// of its pid, with --children every row whose tgid descends from it,
    /// with --all every row but ttp's own.
    pub(crate) fn select<'a>(
        &self,
        w: &'a ClosedWindow,
        parents: &HashMap<u32, u32>,
    ) -> Vec<(ProcKey, &'a ProcessDelta)> {
        let set: Option<BTreeSet<u32>> = match (self.all, self.pid, self.children) {
            (true, ..) => None,
            (false, Some(pid), true) => {
                let mut links = parents.clone();
                for (_, p) in &w.processes {
                    if let Some(pp) = p.parent_tgid {
                        links.insert(p.tgid, pp);
                    }
                }
                Some(descendants(pid, &links))
            }
            (false, Some(pid), false) => Some(BTreeSet::from([pid])),
            (false, None, _) => Some(BTreeSet::new()),
        };
        w.processes
            .iter()
            .filter(|(k, _)| k.tgid != self.own_tgid || !self.all)
            .filter(|(k, _)| set.as_ref().is_none_or(|s| s.contains(&k.tgid)))
            .map(|(k, p)| (*k, p))
            .collect()
    }

    /// The ended processes folded by command: with --all every group;
    /// otherwise none (they are the machine's, not the target's).
    pub(crate) fn groups(&self, w: &ClosedWindow) -> Vec<ExitedGroup> {
        if self.all {
            w.exited_groups.clone()
        } else {
            Vec::new()
        }
    }
}

/// `root` and every tgid whose chain of parents in `links` reaches it.
fn descendants(root: u32, links: &HashMap<u32, u32>) -> BTreeSet<u32> {
    let mut set = BTreeSet::from([root]);
    loop {
        let before = set.len();
        for (&t, p) in links {
            if set.contains(p) {
                set.insert(t);
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

/// The live table of `attach`: on a terminal each interval redraws the
/// previous one in place (cursor up over its lines, clear to the end of the
/// screen), as `top` does; into a pipe or file every interval is printed
/// whole, header included, so each block stands alone in a log.
#[derive(Debug, Default)]
pub(crate) struct LiveTable {
    tty: bool,
    /// Terminal rows the previous block took.
    last_lines: usize,
    /// Terminal width in columns (a longer line wraps onto more rows).
    columns: Option<usize>,
}

/// The terminal's width (TIOCGWINSZ on stdout), when it says.
fn terminal_columns() -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes one winsize into the valid pointer.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

impl LiveTable {
    pub(crate) fn new() -> Self {
        use std::io::IsTerminal;
        Self {
            tty: std::io::stdout().is_terminal(),
            last_lines: 0,
            columns: None,
        }
    }

    /// What to write for the next interval's `block`.
    fn frame(&mut self, block: &str) -> String {
        let mut out = String::new();
        if self.tty && self.last_lines > 0 {
            // CSI n A: up n lines; CSI J: clear to the end of the screen.
            out.push_str(&format!("\x1b[{}A\x1b[J", self.last_lines));
        }
        out.push_str(block);
        self.last_lines = block
            .lines()
            .map(|l| match self.columns {
                Some(c) => l.chars().count().div_ceil(c).max(1),
                None => 1,
            })
            .sum();
        out
    }

    pub(crate) fn print(&mut self, w: &Window, targets: &Targets, parents: &HashMap<u32, u32>) {
        use std::io::Write;
        let block = interval_block(w, targets, parents);
        if self.tty {
            self.columns = terminal_columns();
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(self.frame(&block).as_bytes());
        let _ = out.flush();
    }
}

fn interval_block(w: &Window, targets: &Targets, parents: &HashMap<u32, u32>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let set = targets.of(w, parents);
    let mut rows: Vec<&ProcessDelta> = set.iter().filter_map(|t| w.processes.get(t)).collect();
    rows.sort_by_key(|p| std::cmp::Reverse(p.kernel.on_cpu_ns + p.kernel.iowait_ns));
    let _ = writeln!(
        out,
        "{:>8} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>6} {:>10} {:>8} {:>6}",
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
    for p in rows.iter().take(if targets.all { 15 } else { usize::MAX }) {
        let k = &p.kernel;
        let _ = writeln!(
            out,
            "{:>8} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>6} {:>10} {:>8} {:>6}",
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
    let extra = crate::report::losses::Extra {
        vanished_threads: u64::from(w.vanished_threads),
        ..Default::default()
    };
    let losses = crate::report::losses::describe(&w.lost, &extra);
    if !losses.is_empty() {
        out.push_str(&crate::report::losses::lines(&losses));
    }
    out.push('\n');
    out
}

/// A comparison with an exit record's runtime. The kernel writes the record
/// in do_exit (kernel/taskstats.c `taskstats_exit` via delayacct_add_tsk),
/// reading `se.sum_exec_runtime` of a task that is still running: it lacks
/// the time since the scheduler last brought it up to date (at most one
/// kernel tick) and the rest of the exit path (freeing memory and files,
/// kernel/exit.c), which the ledger counts up to the task's last switch.
/// The tolerance grows by one tick for the first; a larger surplus is the
/// exit path, whose length the kernel does not report (on a loaded virtual
/// machine it includes stolen time), so it is shown as informational with
/// its size. A ledger short of the record is still flagged: that time was
/// lost.
fn from_exit_record(a: &mut Agreement, kernel_tick_ns: u64) {
    if a.reference != "taskstats cpu_run_virtual_total" {
        return;
    }
    a.reference = "taskstats exit record cpu_run_virtual_total";
    a.tolerance += kernel_tick_ns;
    a.recheck();
    if !a.within && a.ledger > a.kernel && a.informational.is_none() {
        a.informational = Some(
            "the exit record is read before the exit path ends; the ledger counts the rest of it, up to the last switch",
        );
    }
}

/// The attach summary: its document, built once from the window and the
/// references; the terminal text and the JSON are both rendered from it.
pub(crate) struct Summary {
    pub doc: AttachDoc,
}

/// What the summary compares the ledger with.
pub(crate) struct References<'a> {
    pub before: &'a ProcSet,
    pub after: &'a ProcSet,
    pub exit_records: &'a ExitRecords,
    pub taskstats_exits: Option<u64>,
    pub listener_overflows: u64,
    pub delayacct_switched_on: bool,
    /// Runtime and run_delay read around the window's first and last
    /// images (window/bracket.rs).
    pub sched_reads: &'a WindowReads,
}

impl Summary {
    pub(crate) fn build(
        targets: &Targets,
        window: &ClosedWindow,
        parents: &HashMap<u32, u32>,
        refs: &References,
        notes: Vec<String>,
    ) -> Self {
        let user_hz = ttp_ledger::collect::clock::user_hz().unwrap_or(100);
        let hz = ttp_ledger::collect::clock::kernel_hz(
            std::path::Path::new("/proc"),
            std::path::Path::new("/boot"),
        )
        .map(|k| k.hz);
        // Unknown CONFIG_HZ: the longest tick in use (HZ=100, 10 ms).
        let kernel_tick_ns = 1_000_000_000 / hz.unwrap_or(100);
        let tick_ns = 1_000_000_000 / user_hz;
        let (before, after, exit_records) = (refs.before, refs.after, refs.exit_records);
        let stat = procs::stat_delta(before, after);
        let steal = stat.as_ref().map(crosscheck::steal_fraction).unwrap_or(0.0);
        let rows = targets.select(window, parents);
        // /proc and taskstats answer by pid. An entry is this row's process
        // when its start (stat field 22, USER_HZ ticks of CLOCK_BOOTTIME)
        // is the row's leader's (CLOCK_MONOTONIC ns, or those same ticks
        // for a process seeded from /proc), within a tick of rounding: a
        // pid handed out again, even after the window, is not compared.
        // A row whose leader was not seen falls back on order: the counters
        // before belong to the pid's first row, those after to its last.
        let boot_offset =
            ttp_sys::sys::clock::boottime_ns().saturating_sub(ttp_sys::sys::clock::monotonic_ns());
        let same = |k: &ProcKey, e: &ProcEntry| {
            let t = e.process.starttime_ticks;
            k.start_ns == t || (k.start_ns.saturating_add(boot_offset) / tick_ns).abs_diff(t) <= 1
        };
        let mut first_of: HashMap<u32, ProcKey> = HashMap::new();
        let mut last_of: HashMap<u32, ProcKey> = HashMap::new();
        let mut last_ended_of: HashMap<u32, ProcKey> = HashMap::new();
        for (k, p) in &rows {
            first_of.entry(k.tgid).or_insert(*k);
            last_of.insert(k.tgid, *k);
            if p.exited {
                last_ended_of.insert(k.tgid, *k);
            }
        }
        let processes: Vec<ProcessView> = rows
            .iter()
            .map(|(k, p)| {
                let b = before.procs.get(&p.tgid).filter(|e| {
                    if k.start_ns != 0 {
                        same(k, e)
                    } else {
                        first_of[&k.tgid] == *k
                    }
                });
                let a = after.procs.get(&p.tgid).filter(|e| {
                    if k.start_ns != 0 {
                        same(k, e)
                    } else {
                        last_of[&k.tgid] == *k
                    }
                });
                let proc = a.map(|a| procs::proc_delta(b, a));
                // A process that exited has its counters in its exit
                // record: a query finds it gone, or, while it is a zombie
                // still in /proc, answers with its exited threads left out
                // (kernel/taskstats.c fill_stats_for_tgid skips them).
                let exit_stats = (p.exited && last_ended_of.get(&k.tgid) == Some(k))
                    .then(|| exit_records.process(p.tgid, p.threads))
                    .flatten();
                let from_exit = exit_stats.is_some();
                let taskstats = match exit_stats {
                    Some(e) => window_counters(b.map(|b| b.taskstats.as_ref()), &e),
                    None if p.exited => None,
                    None => a.and_then(|a| procs::taskstats_delta(b, a)),
                };
                // A process already running when ttp switched delay
                // accounting on has no delay record.
                let covers = !(refs.delayacct_switched_on && b.is_some());
                let agreement = crosscheck::process(
                    &p.kernel,
                    proc.as_ref(),
                    taskstats.as_ref(),
                    p.threads,
                    tick_ns,
                    covers,
                    steal,
                );
                let agreement = crosscheck::impossible_delays(
                    agreement,
                    window.end_ns.saturating_sub(window.start_ns),
                    p.threads,
                );
                let agreement = crosscheck::at_the_ledgers_reads(
                    agreement,
                    &refs.sched_reads.bracket(p.tgid, b.is_some(), a.is_some()),
                );
                let mut agreement =
                    crosscheck::missed_switches(agreement, window.lost.switches_unseen);
                if from_exit {
                    agreement
                        .iter_mut()
                        .for_each(|r| from_exit_record(r, kernel_tick_ns));
                }
                ProcessView {
                    pid: p.tgid,
                    start_key: (k.start_ns != 0).then_some(k.start_ns),
                    comm: p.comm.clone(),
                    parent_pid: p.parent_tgid,
                    exited: p.exited,
                    threads: p.threads,
                    kernel: p.kernel,
                    proc,
                    taskstats,
                    agreement: agreement.iter().map(AgreementView::from).collect(),
                }
            })
            .collect();
        let machine_agreement = stat
            .as_ref()
            .map(|s| crosscheck::machine(&window.cpu_total(), window.cpus.len(), s, tick_ns))
            .unwrap_or_default();
        let w = window;
        let st = stat.as_ref();
        let doc = AttachDoc {
            schema: ATTACH_SCHEMA.into(),
            kernel_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .ok(),
            hz,
            user_hz: Some(user_hz),
            cpus: Some(w.cpus.len() as u64),
            window: WindowView {
                start_ns: w.start_ns,
                end_ns: w.end_ns,
                duration_ns: w.end_ns - w.start_ns,
                clock: "CLOCK_MONOTONIC".into(),
            },
            lost: LostView {
                kernel: w.lost,
                vanished_threads: w.vanished_threads,
                taskstats_listener_overflows: refs.listener_overflows,
            },
            processes,
            exited_groups: targets.groups(w),
            overall: OverallView {
                kernel: MachineView {
                    cpus: w
                        .cpus
                        .iter()
                        .map(|(&cpu, c)| CpuView {
                            cpu,
                            busy_ns: c.busy_ns,
                            idle_ns: c.idle_ns,
                            iowait_ns: c.iowait_ns,
                        })
                        .collect(),
                    total: w.cpu_total(),
                },
                proc_stat: st.map(|s| s.total.clone()),
                proc_stat_per_cpu: st.map(|s| s.per_cpu.clone()),
                agreement: machine_agreement.iter().map(AgreementView::from).collect(),
            },
            taskstats_exit_records: refs.taskstats_exits,
            probe_cost: None,
            wake_latency_measured: Some(true),
            irq_time_measured: None,
            notes,
        };
        Self { doc }
    }

    /// Comparisons outside tolerance.
    pub(crate) fn flagged(&self) -> usize {
        self.doc
            .processes
            .iter()
            .flat_map(|p| &p.agreement)
            .chain(&self.doc.overall.agreement)
            .filter(|a| a.flagged())
            .count()
    }

    /// The terminal summary, rendered from the document `--json` writes by
    /// the renderer `ttp-ebpf report` uses, so the two cannot drift apart.
    pub(crate) fn print(&self, o: &TextOptions) {
        print!("{}", self.doc.text_with(o));
    }

    /// The summary as JSON (schema `ttp.attach/1`), keys sorted as written.
    pub(crate) fn json(&self) -> Value {
        self.doc.to_json()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a terminal the second interval moves up over the first one's
    /// three lines (more when a line wraps) and clears before drawing; into
    /// a pipe nothing is erased. Catches a header repeated every second on a terminal, and
    /// escape codes written into a log.
    #[test]
    fn live_table_redraws_in_place_on_a_terminal_only() {
        let mut tty = LiveTable {
            tty: true,
            last_lines: 0,
            columns: None,
        };
        assert_eq!(tty.frame("head\nrow\n\n"), "head\nrow\n\n");
        assert_eq!(tty.frame("head\nrow2\n\n"), "\x1b[3A\x1b[Jhead\nrow2\n\n");
        // 10 columns: a 25-character line takes 3 rows.
        tty.columns = Some(10);
        tty.frame(&format!("{}\nrow\n\n", "x".repeat(25)));
        assert!(tty.frame("x\n").starts_with("\x1b[5A\x1b[J"));
        let mut pipe = LiveTable::default();
        pipe.frame("head\nrow\n\n");
        assert_eq!(pipe.frame("head\nrow2\n\n"), "head\nrow2\n\n");
    }

    fn row(reference: &'static str, ledger: u64, kernel: u64) -> Agreement {
        Agreement {
            measure: "on_cpu_ns",
            ledger,
            reference,
            kernel,
            rel_diff: 0.0,
            tolerance: 2_000_000,
            kernel_low: None,
            kernel_high: None,
            within: ledger.abs_diff(kernel) <= 2_000_000,
            informational: None,
        }
    }

    /// The numbers of a real `dd` that exited inside the window (ledger
    /// 123.20 ms, its exit record 120.47 ms, HZ=250): outside the 2 ms
    /// tolerance of a live query, within it plus one 4 ms tick; 10 ms more
    /// is the exit path (informational), 10 ms less is flagged; other
    /// references are left alone. Catches an exit record compared as if
    /// read at the task's last switch, and an allowance that passes a
    /// ledger short of the kernel.
    #[test]
    fn exit_record_runtime_allows_one_tick() {
        let tick = 4_000_000;
        let mut a = row("taskstats cpu_run_virtual_total", 123_203_256, 120_471_220);
        assert!(!a.within);
        from_exit_record(&mut a, tick);
        assert!(a.within && !a.flagged());
        assert_eq!(a.reference, "taskstats exit record cpu_run_virtual_total");
        // 10 ms more than the record: the exit path, informational.
        let mut far = row("taskstats cpu_run_virtual_total", 130_500_000, 120_471_220);
        from_exit_record(&mut far, tick);
        assert!(!far.within && !far.flagged() && far.informational.is_some());
        // 10 ms less: time the ledger lost, flagged.
        let mut short = row("taskstats cpu_run_virtual_total", 110_400_000, 120_471_220);
        from_exit_record(&mut short, tick);
        assert!(short.flagged());
        let mut other = row("taskstats blkio_delay_total", 123_203_256, 120_471_220);
        from_exit_record(&mut other, tick);
        assert!(other.flagged());
    }
}
