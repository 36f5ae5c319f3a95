//! One query execution (QE), measured in the order of TTPv2's Fig. 5:
//! per-process image (/proc, and the kernel ledger) → overall image
//! (/proc/stat) → time → execute → time → overall image → processes that
//! stopped in between (ledger exit records, taskstats exit records) →
//! per-process image. Every process seen is kept with its class (Sec. 4).
//! Private to `window`: what runs a QE goes through window/target.rs
//! (`measure_target`, or `measure` for a command).
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::mpsc::Receiver,
    time::Duration,
};

use ttp_common::ExitRecord;

use crate::window::{
    context::{QeContext, QeOutcome, Roles},
    procs::{self, ProcSet},
    record::{
        Measures, OverallMeasures, ProcKey, ProcessClass, ProcessMeasures, ProcessSets, QeRecord,
    },
};
use ttp_ledger::{
    accounts::{Image, LedgerColumns, ThreadKey, Window},
    collect::{
        proc_stat::StatImage,
        taskstats::{Scope as TsScope, TaskstatsRecord},
    },
    probe::ProbeError,
};
use ttp_sys::sys::clock;

fn ticks_to_ns(t: u64, tick_ns: u64) -> u64 {
    t * tick_ns
}

/// Measures one QE whose execution is `execute` (Fig. 5, steps 3–15):
/// images before, the time, `execute()`, the time, images after, the
/// processes that stopped in between; every process classified by `roles`.
/// Returns what `execute` returned beside the measurement; the caller fills
/// in how the execution ended (exit code, time-out).
pub(super) fn measure_with<R>(
    ctx: &mut QeContext<'_>,
    qe: u32,
    plan: Option<String>,
    roles: Roles,
    execute: impl FnOnce() -> R,
) -> Result<(QeOutcome, R), ProbeError> {
    // Per-process images (the ledger's, then /proc's M1: a process that
    // exits between the two has its exit record inside the window), then
    // the overall image.
    let mut exits = Vec::new();
    ctx.ledger.drain_exits(&mut exits);
    exits.clear();
    let before = Image::from_snapshot(&ctx.ledger.snapshot()?);
    let m1 = ProcSet::read(&ProcSet::all_pids(), None);
    let stat_before = StatImage::read(std::path::Path::new("/proc")).ok();
    // The probes' own cost, read just outside the two time reads.
    let cost_before = ctx.ledger.cost_snapshot().ok();
    let start_unix = clock::realtime_ns();
    let t0 = clock::monotonic_ns();
    let ran = execute();
    let t1 = clock::monotonic_ns();
    let end_unix = clock::realtime_ns();
    let cost_after = ctx.ledger.cost_snapshot().ok();
    let stat_after = StatImage::read(std::path::Path::new("/proc")).ok();
    // The ledger image first, then the exit records: a thread missing from
    // the image retired before it was read, so its record is already queued.
    let after = Image::from_snapshot(&ctx.ledger.snapshot()?);
    ctx.ledger.drain_exits(&mut exits);
    let ts_exits: Vec<TaskstatsRecord> = ctx
        .taskstats_exits
        .map(|rx| receive_exits(rx, &exits))
        .unwrap_or_default();
    let m2 = ProcSet::read(&ProcSet::all_pids(), None);
    // Listening stops here (App. B): which processes of M2 are still alive
    // now. One that vanished after M2 without an exit record is neither
    // Continuing nor Stopped (P_y or P_z), as App. B defines them; read
    // before the last exit records are drained, so that one that exits in
    // between has its record there.
    let alive_at_end: BTreeSet<u32> = m2
        .procs
        .iter()
        .filter(|(pid, e)| still_alive(**pid, e.process.starttime_ticks))
        .map(|(&p, _)| p)
        .collect();
    // Processes that exited between the ledger's after-image and the check
    // above are stopped too (App. B), though their measures end at the
    // image.
    let mut late = Vec::new();
    ctx.ledger.drain_exits(&mut late);
    let late_exited: BTreeSet<u32> = late
        .iter()
        .filter(|e| e.account.tid == e.account.tgid)
        .map(|e| e.account.tgid)
        .collect();
    // Processes the ledger already had before the window: a taskstats
    // lifetime of one of them is not the window's (fill_processes).
    let alive_before: BTreeSet<u32> = before.threads.values().map(|a| a.tgid).collect();
    // A record that reached the queue only after the first drain still
    // ends its thread inside the window when the thread exited before the
    // after-image (exit_ns ≤ its instant; `Window::between` keeps only
    // those): without it, a thread of the before-image missing from the
    // after-image would count as vanished and its process, the query
    // process among them, would have no ledger measures at all.
    exits.extend(late.iter().copied());
    let window = Window::between(&before, &after, &exits);
    let time_meas_ns = t1 - t0;
    let mut rec = QeRecord::new(qe, time_meas_ns as f64 / 1e6);
    rec.time_meas_ns = Some(time_meas_ns);
    rec.start_unix_ns = Some(start_unix);
    rec.end_unix_ns = Some(end_unix);
    rec.plan = plan;
    rec.probe_cost = cost_before
        .zip(cost_after)
        .map(|(b, a)| ttp_ledger::probe::cost::ProbeCost::between(&b, &a));
    rec.overall = overall(stat_before.as_ref(), stat_after.as_ref(), &window);
    let query_tgids = fill_processes(
        ctx,
        &mut rec,
        &window,
        (&m1, &m2),
        &ts_exits,
        (&late_exited, &alive_at_end, &alive_before),
        roles,
    );
    rec.query_threads_max = Some(threads_at_once(&before, &after, &exits, &query_tgids));
    rec.exit_records_lost = Some(window.lost.exit_records_lost);
    Ok((
        QeOutcome {
            t0_ns: t0,
            t1_ns: t1,
            record: rec,
            window,
            taskstats_exits: ts_exits,
        },
        ran,
    ))
}

/// The taskstats exit records received so far, waiting (at most
/// [`EXIT_RECORD_WAIT`]) for those of the threads the ledger saw exit: the
/// kernel queued them before the exit completed, but the listener thread
/// may not have handed them over yet.
fn receive_exits(
    rx: &Receiver<TaskstatsRecord>,
    ledger_exits: &[ExitRecord],
) -> Vec<TaskstatsRecord> {
    let mut got: Vec<TaskstatsRecord> = rx.try_iter().collect();
    let mut missing: BTreeSet<u32> = ledger_exits.iter().map(|e| e.account.tid).collect();
    let deadline = std::time::Instant::now() + EXIT_RECORD_WAIT;
    loop {
        for r in &got {
            if let (TsScope::Task, Some(tid)) = (r.scope, r.stats.ac_pid) {
                missing.remove(&tid);
            }
        }
        let now = std::time::Instant::now();
        if missing.is_empty() || now >= deadline {
            return got;
        }
        match rx.recv_timeout(deadline - now) {
            Ok(r) => got.push(r),
            Err(_) => return got,
        }
    }
}

/// How long a QE waits for exit records the ledger says are due.
const EXIT_RECORD_WAIT: Duration = Duration::from_millis(200);

/// A thread group that exited during the QE, summed over the taskstats exit
/// records of its threads. The kernel's thread-group exit record carries
/// only the delay group (`fill_tgid_exit`), so U and S come from the
/// per-thread records, grouped by `ac_tgid` (taskstats version 12; older
/// kernels give the main thread's record only).
#[derive(Debug, Default, Clone, PartialEq)]
struct GroupExit {
    threads: u32,
    utime_us: Option<u64>,
    stime_us: Option<u64>,
    /// Sum of the threads' `sum_exec_runtime` (`cpu_run_virtual_total`).
    runtime_ns: Option<u64>,
    blkio_ns: Option<u64>,
    nvcsw: Option<u64>,
    nivcsw: Option<u64>,
    minflt: Option<u64>,
    majflt: Option<u64>,
    read_syscalls: Option<u64>,
    write_syscalls: Option<u64>,
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.saturating_add(b?))
}

impl GroupExit {
    fn by_tgid(records: &[TaskstatsRecord]) -> BTreeMap<u32, GroupExit> {
        let mut out: BTreeMap<u32, GroupExit> = BTreeMap::new();
        for r in records.iter().filter(|r| r.scope == TsScope::Task) {
            let s = &r.stats;
            let Some(tgid) = s.ac_tgid.or(s.ac_pid) else {
                continue;
            };
            let g = out.entry(tgid).or_insert_with(|| GroupExit {
                utime_us: Some(0),
                stime_us: Some(0),
                runtime_ns: Some(0),
                blkio_ns: Some(0),
                nvcsw: Some(0),
                nivcsw: Some(0),
                minflt: Some(0),
                majflt: Some(0),
                read_syscalls: Some(0),
                write_syscalls: Some(0),
                ..GroupExit::default()
            });
            g.threads += 1;
            g.utime_us = add_opt(g.utime_us, s.ac_utime_us);
            g.stime_us = add_opt(g.stime_us, s.ac_stime_us);
            g.runtime_ns = add_opt(g.runtime_ns, s.cpu_run_virtual_total_ns);
            g.blkio_ns = add_opt(g.blkio_ns, s.blkio_delay_total_ns);
            g.nvcsw = add_opt(g.nvcsw, s.nvcsw);
            g.nivcsw = add_opt(g.nivcsw, s.nivcsw);
            g.minflt = add_opt(g.minflt, s.ac_minflt);
            g.majflt = add_opt(g.majflt, s.ac_majflt);
            g.read_syscalls = add_opt(g.read_syscalls, s.read_syscalls);
            g.write_syscalls = add_opt(g.write_syscalls, s.write_syscalls);
        }
        out
    }

    /// User and system ns as /proc/PID/stat reports a thread group: the
    /// group's exact runtime split in the ratio of its tick-sampled user and
    /// system time (the kernel's `cputime_adjust`, which also gives all of
    /// it to user time when nothing was sampled). Without the runtime, the
    /// sampled times themselves.
    fn adjusted_ns(&self) -> (Option<u64>, Option<u64>) {
        let (Some(u), Some(s)) = (self.utime_us, self.stime_us) else {
            return (None, None);
        };
        let (u, s) = (u * 1000, s * 1000);
        match self.runtime_ns {
            Some(rt) if rt > 0 => {
                if s == 0 {
                    (Some(rt), Some(0))
                } else if u == 0 {
                    (Some(0), Some(rt))
                } else {
                    let s_adj = (s as u128 * rt as u128 / (s + u) as u128) as u64;
                    (Some(rt - s_adj), Some(s_adj))
                }
            }
            _ => (Some(u), Some(s)),
        }
    }
}

fn overall(b: Option<&StatImage>, a: Option<&StatImage>, w: &Window) -> OverallMeasures {
    let mut o = OverallMeasures {
        iowait_ns: Some(w.cpu_total().iowait_ns),
        ..Default::default()
    };
    if let (Some(b), Some(a)) = (b, a) {
        let d = b.delta(a);
        let t = &d.total;
        o.user_ticks = t.user;
        o.nice_ticks = t.nice;
        o.system_ticks = t.system;
        o.idle_ticks = t.idle;
        o.iowait_ticks = t.iowait;
        o.irq_ticks = t.irq;
        o.softirq_ticks = t.softirq;
        o.steal_ticks = t.steal;
        o.guest_ticks = t.guest;
        o.guest_nice_ticks = t.guest_nice;
        o.forks = d.processes;
    }
    o
}

fn fill_processes(
    ctx: &QeContext<'_>,
    rec: &mut QeRecord,
    w: &Window,
    (m1, m2): (&ProcSet, &ProcSet),
    ts_exits: &[TaskstatsRecord],
    (late_exited, alive_at_end, alive_before): (&BTreeSet<u32>, &BTreeSet<u32>, &BTreeSet<u32>),
    roles: Roles,
) -> BTreeSet<u32> {
    let key_of = |pid: u32| -> ProcKey {
        let start = m2
            .procs
            .get(&pid)
            .or_else(|| m1.procs.get(&pid))
            .map(|e| ticks_to_ns(e.process.starttime_ticks, ctx.tick_ns))
            .unwrap_or(0);
        ProcKey {
            pid,
            start_time_ns: start,
        }
    };
    let mut parents: HashMap<u32, u32> = HashMap::new();
    for set in [m1, m2] {
        for (pid, e) in &set.procs {
            parents.insert(*pid, e.process.ppid.max(0) as u32);
        }
    }
    let tree = w.descendants(&[roles.tree_root()], &parents);
    let groups = GroupExit::by_tgid(ts_exits);
    let pids: BTreeSet<u32> = w
        .processes
        .keys()
        .chain(m1.procs.keys())
        .chain(m2.procs.keys())
        .copied()
        .collect();
    let mut stopped = Vec::new();
    for pid in pids {
        let ledger = w.processes.get(&pid);
        let b = m1.procs.get(&pid);
        let a = m2.procs.get(&pid);
        // Stopped: its exit was recorded (ledger or taskstats), or it is a
        // zombie in M2, whose final counters the after-image read (another
        // program's child its parent has not reaped yet). A process that
        // vanished without a record stays out of this set, so App. B finds
        // it as ephemeral.
        let is_stopped = ledger.is_some_and(|l| l.exited)
            || a.is_some_and(|e| e.process.state == 'Z')
            || late_exited.contains(&pid)
            || (a.is_none() && groups.contains_key(&pid));
        // The ledger's comm is the one after exec (the before-image of the
        // command shows the held child's name).
        let comm = ledger
            .map(|l| l.comm.clone())
            .filter(|c| !c.is_empty())
            .or_else(|| a.or(b).map(|e| e.process.comm.clone()))
            .unwrap_or_default();
        let class = roles.classify(ctx, pid, &comm, &tree);
        let mut m = Measures::default();
        if let Some(a) = a {
            let d = procs::proc_delta(b, a);
            m.u_ticks = d.utime_ticks;
            m.s_ticks = d.stime_ticks;
            m.blkio_ticks = d.blkio_ticks;
            m.vol_cs = d.voluntary_switches;
            m.invol_cs = d.involuntary_switches;
            // Sec. 3.5 (e), (f), the faults, (j), (k).
            m.guest_ticks = d.guest_ticks;
            m.cguest_ticks = d.cguest_ticks;
            m.minflt = d.minflt;
            m.majflt = d.majflt;
            m.read_syscalls = d.read_syscalls;
            m.write_syscalls = d.write_syscalls;
        } else if let Some(g) = groups
            .get(&pid)
            .filter(|_| b.is_some() || !alive_before.contains(&pid))
        {
            // Stopped inside the QE: its final figures come from the taskstats
            // exit records of all its threads (a multi-threaded process's
            // main thread alone carries a fraction of its time), in ticks as
            // /proc would have shown the whole group. Those records cover
            // the process's whole life: less its before-image (M1), or
            // whole when it started inside the window. One the ledger had
            // before the window but M1 missed (it exited while /proc was
            // read) has no before-image to subtract: its lifetime is not
            // the window's, so the ledger's figure below stands instead.
            let before = b.map(|e| &e.process.counters);
            let (u_ns, s_ns) = g.adjusted_ns();
            m.u_ns = u_ns;
            m.s_ns = s_ns;
            m.u_ticks = u_ns.map(|n| {
                (n / ctx.tick_ns).saturating_sub(before.and_then(|c| c.utime_ticks).unwrap_or(0))
            });
            m.s_ticks = s_ns.map(|n| {
                (n / ctx.tick_ns).saturating_sub(before.and_then(|c| c.stime_ticks).unwrap_or(0))
            });
            m.blkio_ns = g.blkio_ns;
            m.blkio_ticks = g.blkio_ns.map(|n| n / ctx.tick_ns);
            m.vol_cs = g.nvcsw;
            m.invol_cs = g.nivcsw;
            // Faults and system calls from the exit records, less what the
            // before-image had already counted. Taskstats carries no guest
            // time, so guest and cguest stay unknown (X3 says so).
            let since =
                |total: Option<u64>,
                 f: fn(&ttp_ledger::collect::proc_pid::Counters) -> Option<u64>| {
                    total.map(|t| t.saturating_sub(before.and_then(f).unwrap_or(0)))
                };
            m.minflt = since(g.minflt, |c| c.minflt);
            m.majflt = since(g.majflt, |c| c.majflt);
            m.read_syscalls = since(g.read_syscalls, |c| c.read_syscalls);
            m.write_syscalls = since(g.write_syscalls, |c| c.write_syscalls);
        } else if let Some(l) = ledger {
            // Only the ledger saw it: U+S as one sum, from its on-CPU time.
            m.su_ticks = Some((l.kernel.on_cpu_ns + ctx.tick_ns / 2) / ctx.tick_ns);
        }
        if let Some(l) = ledger {
            // BlockIO (Sec. 3.5 (i)) is the time the process waited for block
            // I/O: the ledger measures exactly that (switch-out with
            // in_iowait to wakeup). Delay accounting's blkio on this kernel
            // is erratic under CPU contention (docs/ttpv2.md), so it is kept
            // beside it for comparison, not used.
            m.blkio_proc_ticks = m.blkio_ticks;
            m.blkio_ticks = Some(l.kernel.iowait_ns / ctx.tick_ns);
        }
        if let Some(l) = ledger {
            m.ledger = LedgerColumns::from(&l.kernel);
            if !ctx.ledger.wake_latency_measured() {
                // Not taken without the wake-up hook (`run --wake-latency`):
                // left out, as a column not known is (docs/ledger.md).
                m.ledger.wake_latency_ns = None;
            }
            if !ctx.ledger.irq_time_measured() {
                // Likewise without the interrupt programs (`--irq-time`).
                m.ledger.irq_ns = None;
            }
        }
        let key = key_of(pid);
        if is_stopped {
            stopped.push(key);
        }
        rec.processes.push(ProcessMeasures {
            pid: Some(pid),
            start_time_ns: Some(key.start_time_ns),
            comm,
            class,
            stopped: is_stopped,
            m,
        });
    }
    // A zombie in the before-image stopped before the QE (e.g. a restarted
    // server's old postmaster that init has not reaped yet): it is not a
    // live process of M1 (App. B), nor of M2 if still unreaped there.
    let dead_before: BTreeSet<u32> = m1
        .procs
        .iter()
        .filter(|(_, e)| e.process.state == 'Z')
        .map(|(&p, _)| p)
        .collect();
    let live = |set: &ProcSet| -> Vec<ProcKey> {
        set.procs
            .keys()
            .filter(|p| !dead_before.contains(p))
            .map(|&p| key_of(p))
            .collect()
    };
    let m1_keys = live(m1);
    let m2_keys = live(m2);
    // Continuing: alive when listening stopped (App. B), observed by
    // reading /proc again then; a zombie child counts as stopped.
    let continuing = continuing_pids(m2, alive_at_end, late_exited)
        .into_iter()
        .map(key_of)
        .collect();
    rec.process_sets = Some(ProcessSets {
        m1: m1_keys,
        m2: m2_keys,
        stopped,
        continuing: Some(continuing),
    });
    // The processes whose threads can run the query at once: the query
    // processes, or with --query-process (chosen after the run) the tree.
    if ctx.query_by_name {
        tree
    } else {
        rec.of_class(ProcessClass::Query)
            .filter_map(|p| p.pid)
            .collect()
    }
}

/// App. B's Continuing set, by pid: processes of M2 that were not zombies
/// there, are still alive when listening stops, and did not exit in
/// between. A process of M2 that vanished after it without an exit record
/// is in none of Continuing and Stopped: App. B finds it as P_y (started
/// during the QE) or P_z (in M1 too).
fn continuing_pids(
    m2: &ProcSet,
    alive_at_end: &BTreeSet<u32>,
    late_exited: &BTreeSet<u32>,
) -> Vec<u32> {
    m2.procs
        .iter()
        .filter(|(p, e)| {
            e.process.state != 'Z' && alive_at_end.contains(p) && !late_exited.contains(p)
        })
        .map(|(&p, _)| p)
        .collect()
}

/// Process `pid` with start time `start_ticks` exists and is not a zombie.
fn still_alive(pid: u32, start_ticks: u64) -> bool {
    match ttp_ledger::collect::proc_pid::ProcImage::read_process(
        std::path::Path::new("/proc"),
        pid as i32,
    ) {
        Ok(img) => img.starttime_ticks == start_ticks && img.state != 'Z',
        Err(_) => false,
    }
}

/// The most threads of processes `tgids` that were alive at the same time
/// during the window and ran on a CPU in it: the most CPUs the query could
/// have used at once (a thread's life is from its fork, or the window's
/// start, to its exit record, or the window's end).
fn threads_at_once(
    before: &Image,
    after: &Image,
    exits: &[ExitRecord],
    tgids: &BTreeSet<u32>,
) -> u32 {
    let (w0, w1) = (before.at_ns, after.at_ns);
    let ran = |tid: u32, start: u64, on_cpu_ns: u64| {
        let earlier = before
            .threads
            .get(&ThreadKey { tid, start })
            .map_or(0, |t| t.on_cpu_ns);
        on_cpu_ns > earlier
    };
    let mut edges: Vec<(u64, i32)> = Vec::new();
    let mut seen = BTreeSet::new();
    let lives = exits
        .iter()
        .map(|e| (&e.account, e.exit_ns))
        .chain(after.threads.values().map(|t| (t, w1)));
    for (t, end) in lives {
        if !tgids.contains(&t.tgid) || !seen.insert((t.tid, t.start_time_ns)) {
            continue;
        }
        if !ran(t.tid, t.start_time_ns, t.on_cpu_ns) {
            continue;
        }
        let (a, b) = (t.start_time_ns.max(w0), end.min(w1));
        if b > a {
            edges.push((a, 1));
            edges.push((b, -1));
        }
    }
    // Ends before starts at the same instant: a thread that exits as
    // another is forked did not run beside it.
    edges.sort_by_key(|&(t, d)| (t, d));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as u32
}

#[cfg(test)]
#[path = "qe_tests.rs"]
mod tests;
