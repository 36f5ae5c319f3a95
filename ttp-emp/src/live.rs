//! One EMP run from one measured execution (EMP Sec. 3.3, Fig. 5–6): the
//! execution is measured once by [`target::measure`](ttp_window::window::target::measure) (the
//! ledger window, /proc images, taskstats exit records, every process with
//! its class), and this module reads off what EMP needs:
//!
//! * ET: `Time_meas`, the monotonic time between the two time reads;
//! * PT of the program (its query-class processes: the command and every
//!   process descended from it) from three sources — taskstats
//!   `ac_utime + ac_stime` of each of its threads' exit records, in µs
//!   (Sec. 3.1–3.2; tick-sampled), the scheduler's `sum_exec_runtime` from
//!   the same records (`cpu_run_virtual_total`, ns), and the ledger's
//!   on-CPU time in ns;
//! * the daemons: every other process that ran in the window, with the
//!   ledger's on-CPU time as its PT (Sec. 4.5.1 Step 4);
//! * flags for runs that must not be used.
//!
//! taskstats exit records reach userspace through the listener thread, so
//! the last ones of a run may still be on their way when the QE ends;
//! [`await_program_exits`] waits briefly for the records the program owes.
use std::{collections::BTreeMap, sync::mpsc::Receiver, time::Duration};

use super::{DaemonExec, EmpRun, ProgramTime, RunFlags};
use ttp_ledger::collect::taskstats::{Scope, TaskstatsRecord};
use ttp_window::window::{context::QeOutcome, record::ProcessClass};

/// A process of the program under test in one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProgramProcess {
    pid: u32,
    /// Its exit was seen (the ledger's or a taskstats exit record).
    stopped: bool,
    /// More than one thread ran in the window: the kernel then also sends a
    /// thread-group record when the last thread exits (`taskstats_exit`
    /// allocates the group's stats only for multi-threaded groups).
    multi_threaded: bool,
}

fn program_processes(o: &QeOutcome) -> Vec<ProgramProcess> {
    o.record
        .processes
        .iter()
        .filter(|p| p.class == ProcessClass::Query)
        .filter_map(|p| {
            let pid = p.pid?;
            Some(ProgramProcess {
                pid,
                stopped: p.stopped,
                multi_threaded: o.window.processes.get(&pid).is_some_and(|d| d.threads > 1),
            })
        })
        .collect()
}

/// Whether `r` is the per-task record of a thread of process `pid`. The
/// tgid is in the record from version 12; before that only the main
/// thread (pid = tgid) can be attributed.
fn task_of(r: &TaskstatsRecord, pid: u32) -> bool {
    r.scope == Scope::Task
        && match r.stats.ac_tgid {
            Some(tgid) => tgid == pid,
            None => r.id == pid,
        }
}

/// Whether `records` hold the last exit record of every program process:
/// its thread group's record when it was multi-threaded (sent with the last
/// thread's), else its main thread's. A process still running when the run
/// ended will never complete, so the answer is then `false` at once.
pub(crate) fn taskstats_complete(o: &QeOutcome, records: &[TaskstatsRecord]) -> bool {
    let procs = program_processes(o);
    !procs.is_empty()
        && procs.iter().all(|p| {
            p.stopped
                && records.iter().any(|r| {
                    if p.multi_threaded {
                        r.scope == Scope::ThreadGroup && r.id == p.pid
                    } else {
                        r.scope == Scope::Task && r.id == p.pid
                    }
                })
        })
}

/// Waits up to `wait` for the program's remaining exit records and adds
/// them to `o.taskstats_exits`. Returns whether they are complete.
///
/// The kernel queues every exit record on the socket before the parent can
/// see the exit (`taskstats_exit` runs in `do_exit` before
/// `exit_notify`), so the wait only covers the listener thread's hand-over.
pub fn await_program_exits(
    o: &mut QeOutcome,
    rx: &Receiver<TaskstatsRecord>,
    wait: Duration,
) -> bool {
    if program_processes(o).iter().any(|p| !p.stopped) {
        return false;
    }
    let end = std::time::Instant::now() + wait;
    let mut got = std::mem::take(&mut o.taskstats_exits);
    got.extend(rx.try_iter());
    let complete = loop {
        if taskstats_complete(o, &got) {
            break true;
        }
        let now = std::time::Instant::now();
        if now >= end {
            break false;
        }
        match rx.recv_timeout(end - now) {
            Ok(r) => got.push(r),
            Err(_) => break taskstats_complete(o, &got),
        }
    };
    o.taskstats_exits = got;
    complete
}

/// The program's PT from taskstats: `ac_utime + ac_stime` summed over the
/// per-task exit records of its threads, in µs (EMP Sec. 3.1–3.2). `None`
/// unless every program process's records are complete: absent is not zero.
///
/// Under tick-based CPU accounting these are counts of sampled ticks
/// (4 ms at HZ = 250), not rescaled to the exact runtime (see
/// docs/collect.md), which is why the ledger's on-CPU time is kept beside.
pub(crate) fn program_taskstats_us(o: &QeOutcome) -> Option<u64> {
    if !taskstats_complete(o, &o.taskstats_exits) {
        return None;
    }
    let mut per_thread: BTreeMap<u32, u64> = BTreeMap::new();
    for p in program_processes(o) {
        for r in o.taskstats_exits.iter().filter(|r| task_of(r, p.pid)) {
            let us = r.stats.ac_utime_us?.checked_add(r.stats.ac_stime_us?)?;
            // One record per thread id: a duplicate (the same exit seen twice)
            // must not count twice.
            per_thread.insert(r.id, us);
        }
    }
    Some(per_thread.values().sum())
}

/// The program's PT as the scheduler counts it: `se.sum_exec_runtime`
/// (taskstats `cpu_run_virtual_total`) summed over the exit records of its
/// threads, ns. Exact, and without stolen time where the kernel accounts
/// steal. `None` unless every program process's records are complete.
pub(crate) fn program_runtime_ns(o: &QeOutcome) -> Option<u64> {
    if !taskstats_complete(o, &o.taskstats_exits) {
        return None;
    }
    let mut per_thread: BTreeMap<u32, u64> = BTreeMap::new();
    for p in program_processes(o) {
        for r in o.taskstats_exits.iter().filter(|r| task_of(r, p.pid)) {
            per_thread.insert(r.id, r.stats.cpu_run_virtual_total_ns?);
        }
    }
    Some(per_thread.values().sum())
}

/// The program's PT from the ledger: on-CPU time of its processes in the
/// window, ns. `None` when the ledger saw none of them.
pub(crate) fn program_on_cpu_ns(o: &QeOutcome) -> Option<u64> {
    o.record
        .processes
        .iter()
        .filter(|p| p.class == ProcessClass::Query)
        .filter_map(|p| p.m.ledger.on_cpu_ns)
        .reduce(|a, b| a + b)
}

/// Every other process that ran in the window, with its ledger on-CPU time
/// as its PT (Sec. 4.5.1 Step 4; the measuring tool itself is one of them,
/// as the paper's `proc_monitor` is). Processes that did not run are left
/// out: an execution with no process time is not an execution.
pub(crate) fn daemon_executions(o: &QeOutcome) -> Vec<DaemonExec> {
    o.record
        .processes
        .iter()
        .filter(|p| p.class != ProcessClass::Query)
        .filter_map(|p| {
            let pt_ns = p.m.ledger.on_cpu_ns.filter(|&n| n > 0)?;
            Some(DaemonExec {
                name: p.comm.clone(),
                pid: p.pid?,
                pt_ns,
            })
        })
        .collect()
}

/// Why a run must not be used, as far as the execution itself tells.
pub(crate) fn run_flags(o: &QeOutcome, warm_up: bool) -> RunFlags {
    let r = &o.record;
    let failed = if r.timed_out == Some(true) {
        Some("timed out (killed)".to_string())
    } else if let Some(sig) = r.signal {
        Some(format!("killed by signal {sig}"))
    } else {
        r.exit_code
            .filter(|&c| c != 0)
            .map(|c| format!("exit status {c}"))
    };
    RunFlags {
        warm_up,
        failed,
        // Lost or incomplete ledger records (and threads whose end the
        // ledger never saw) leave the daemon list incomplete.
        lost_records: o.window.lost.losses() + u64::from(o.window.vanished_threads),
    }
}

/// The EMP run of one measured execution. `first_start_ns` is the ledger
/// time at which the measurement's first run began.
pub fn emp_run(index: u32, o: &QeOutcome, first_start_ns: u64, warm_up: bool) -> EmpRun {
    EmpRun {
        index,
        et_ns: o
            .record
            .time_meas_ns
            .unwrap_or((o.record.time_meas_ms * 1e6).round() as u64),
        start_offset_ns: Some(o.window.start_ns.saturating_sub(first_start_ns)),
        pt: ProgramTime {
            taskstats_us: program_taskstats_us(o),
            ledger_on_cpu_ns: program_on_cpu_ns(o),
            runtime_ns: program_runtime_ns(o),
        },
        daemons: daemon_executions(o),
        flags: run_flags(o, warm_up),
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
