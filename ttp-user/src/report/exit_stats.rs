//! taskstats of processes that exit inside an attach window, from their
//! exit records: the process is gone from /proc and from taskstats queries
//! when the window closes, but the kernel sent its counters as it exited
//! (kernel/taskstats.c `taskstats_exit`), so its cross-check can still run.
//!
//! Which record describes the whole process: a multi-threaded group gets a
//! thread-group record when its last thread exits (`fill_tgid_exit` sums
//! every thread's delays into `signal->stats`); a single-threaded process
//! gets none (`taskstats_tgid_alloc` allocates no group stats for it), and
//! the record of its one thread, whose pid is the tgid, is the process.
use std::collections::HashMap;

use ttp_ledger::collect::taskstats::{Scope, Taskstats, TaskstatsRecord};
use ttp_window::window::procs::TaskstatsCounters;

/// The fields of an exit record the cross-check compares
/// ([`window_counters`]), in [`ExitCounters::FIELDS`] order, `u64::MAX`
/// standing for a field the record lacks: 72 bytes kept per ended process
/// instead of the whole record (about 0.5 KiB), for as long as its row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitCounters([u64; 9]);

const ABSENT: u64 = u64::MAX;

impl ExitCounters {
    /// The fields, as [`TaskstatsCounters`] names them.
    const FIELDS: [fn(&Taskstats) -> Option<u64>; 9] = [
        |t| t.cpu_run_virtual_total_ns,
        |t| t.cpu_delay_total_ns,
        |t| t.blkio_delay_total_ns,
        |t| t.ac_utime_us,
        |t| t.ac_stime_us,
        |t| t.read_bytes,
        |t| t.write_bytes,
        |t| t.nvcsw,
        |t| t.nivcsw,
    ];

    pub(crate) fn of(t: &Taskstats) -> Self {
        // A counter at u64::MAX (never seen: 584 years of ns) reads as absent.
        Self(Self::FIELDS.map(|f| f(t).unwrap_or(ABSENT)))
    }

    fn get(&self, i: usize) -> Option<u64> {
        (self.0[i] != ABSENT).then_some(self.0[i])
    }
}

/// A tgid's exit counters: its thread-group record's if one came, else its
/// leader's.
#[derive(Debug, Clone, Copy)]
struct ExitEntry {
    counters: ExitCounters,
    group: bool,
    leader: bool,
}

/// The exit records of a window, by the tgid they may describe.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExitRecords {
    by_tgid: HashMap<u32, ExitEntry>,
}

impl ExitRecords {
    /// Room for `n` tgids, its memory written now (a long `attach` keeps
    /// about as many as it keeps rows: docs/attach.md).
    pub(crate) fn with_capacity(n: usize) -> Self {
        let mut by_tgid = HashMap::with_capacity(n);
        let blank = ExitEntry {
            counters: ExitCounters([ABSENT; 9]),
            group: false,
            leader: false,
        };
        for k in 0..by_tgid.capacity() as u32 {
            by_tgid.insert(k, blank);
        }
        by_tgid.clear();
        Self { by_tgid }
    }

    pub(crate) fn add(&mut self, r: TaskstatsRecord) {
        let counters = ExitCounters::of(&r.stats);
        match r.scope {
            Scope::ThreadGroup => {
                let e = self.by_tgid.entry(r.id).or_insert(ExitEntry {
                    counters,
                    group: true,
                    leader: false,
                });
                e.counters = counters;
                e.group = true;
            }
            Scope::Task => {
                // A thread whose pid is its tgid: the group leader.
                if r.stats.ac_tgid.is_none_or(|t| t == r.id) {
                    let e = self.by_tgid.entry(r.id).or_insert(ExitEntry {
                        counters,
                        group: false,
                        leader: true,
                    });
                    if !e.group {
                        e.counters = counters;
                    }
                    e.leader = true;
                }
            }
        }
    }

    /// Keeps the records of the tgids `keep` accepts (a long window drops
    /// those of processes it no longer compares).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.by_tgid.retain(|t, _| keep(*t));
    }

    /// Whether a record of `tgid` (its group's or its leader's) arrived.
    pub(crate) fn has(&self, tgid: u32) -> bool {
        self.by_tgid.contains_key(&tgid)
    }

    /// Leader threads that exited: one per process whose leader exited.
    pub(crate) fn leaders(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_tgid
            .iter()
            .filter(|(_, e)| e.leader)
            .map(|(t, _)| *t)
    }

    /// The counters of the whole process `tgid`: its thread-group record's,
    /// or, for a process the ledger saw with one thread, its leader's.
    pub(crate) fn process(&self, tgid: u32, threads: u32) -> Option<ExitCounters> {
        let e = self.by_tgid.get(&tgid)?;
        (e.group || (threads <= 1 && e.leader)).then_some(e.counters)
    }
}

/// `exit − before` over the window. `before` is the thread-group query at
/// the window's start: `Some(None)` when the process existed then but
/// taskstats did not answer (nothing to subtract: no counters), `None` when
/// the process started inside the window (its whole life is in it).
pub(crate) fn window_counters(
    before: Option<Option<&Taskstats>>,
    exit: &ExitCounters,
) -> Option<TaskstatsCounters> {
    let before = match before {
        Some(None) => return None,
        Some(Some(b)) => Some(b),
        None => None,
    };
    // As procs::taskstats_delta: absent after → unknown; absent before →
    // 0 (the kernel leaves zero delay groups out); backwards → unknown.
    let d = |i: usize| {
        let a = exit.get(i)?;
        a.checked_sub(before.and_then(ExitCounters::FIELDS[i]).unwrap_or(0))
    };
    Some(TaskstatsCounters {
        cpu_run_virtual_total_ns: d(0),
        cpu_delay_total_ns: d(1),
        blkio_delay_total_ns: d(2),
        ac_utime_us: d(3),
        ac_stime_us: d(4),
        read_bytes: d(5),
        write_bytes: d(6),
        nvcsw: d(7),
        nivcsw: d(8),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record with only the fields a test sets.
    fn rec(scope: Scope, run_ns: u64, blkio_ns: Option<u64>, utime_us: Option<u64>) -> Taskstats {
        Taskstats {
            scope,
            version: 16,
            ac_exitcode: Some(0),
            ac_flag: 0,
            ac_nice: 0,
            cpu_count: Some(1),
            cpu_delay_total_ns: Some(0),
            blkio_count: None,
            blkio_delay_total_ns: blkio_ns,
            swapin_count: None,
            swapin_delay_total_ns: None,
            cpu_run_real_total_ns: Some(run_ns),
            cpu_run_virtual_total_ns: Some(run_ns),
            ac_comm: None,
            ac_uid: None,
            ac_gid: None,
            ac_pid: None,
            ac_ppid: None,
            ac_btime_s: None,
            ac_etime_us: None,
            ac_utime_us: utime_us,
            ac_stime_us: None,
            ac_minflt: None,
            ac_majflt: None,
            read_char_bytes: None,
            write_char_bytes: None,
            read_syscalls: None,
            write_syscalls: None,
            read_bytes: None,
            write_bytes: None,
            cancelled_write_bytes: None,
            nvcsw: None,
            nivcsw: None,
            ac_tgid: None,
            ac_tgetime_us: None,
        }
    }

    fn record(scope: Scope, id: u32, tgid: Option<u32>, run_ns: u64) -> TaskstatsRecord {
        let mut stats = rec(scope, run_ns, None, None);
        stats.ac_tgid = tgid;
        TaskstatsRecord { scope, id, stats }
    }

    /// A two-thread group's record wins over its leader's; a single-thread
    /// process uses its leader's; a non-leader thread's record describes no
    /// process; a multi-threaded process without a group record gets none
    /// (its leader's record would miss the other threads). Catches an
    /// exited process left without taskstats, or given one thread's
    /// counters as the whole process's.
    #[test]
    fn the_record_of_the_whole_process() {
        let mut r = ExitRecords::default();
        r.add(record(Scope::Task, 10, Some(10), 5));
        r.add(record(Scope::Task, 11, Some(10), 7));
        r.add(record(Scope::ThreadGroup, 10, None, 12));
        r.add(record(Scope::Task, 20, Some(20), 3));
        r.add(record(Scope::Task, 31, Some(30), 4));
        r.add(record(Scope::Task, 40, Some(40), 9));
        let run = |t: Option<ExitCounters>| t.and_then(|t| t.get(0));
        assert_eq!(run(r.process(10, 2)), Some(12));
        assert_eq!(run(r.process(20, 1)), Some(3));
        assert_eq!(run(r.process(30, 1)), None);
        assert_eq!(run(r.process(40, 2)), None);
        let mut leaders: Vec<u32> = r.leaders().collect();
        leaders.sort();
        assert_eq!(leaders, [10, 20, 40]);
    }

    /// Exit 300 ms of runtime after a start-of-window query of 100 ms: 200
    /// ms in the window; a field absent before counts from 0, one absent at
    /// exit is unknown, one that went backwards is unknown; a process
    /// started inside the window keeps its whole record; one that taskstats
    /// did not answer for at the start gets nothing. Catches a lifetime
    /// total passed off as the window's share.
    #[test]
    fn the_window_share_of_an_exit_record() {
        let before = rec(Scope::ThreadGroup, 100_000_000, None, Some(50));
        let exit = rec(Scope::Task, 300_000_000, Some(4_000_000), None);
        let c = window_counters(Some(Some(&before)), &ExitCounters::of(&exit)).unwrap();
        assert_eq!(c.cpu_run_virtual_total_ns, Some(200_000_000));
        assert_eq!(c.blkio_delay_total_ns, Some(4_000_000));
        assert_eq!(c.ac_utime_us, None);
        let back = rec(Scope::Task, 50_000_000, None, None);
        let c = window_counters(Some(Some(&before)), &ExitCounters::of(&back)).unwrap();
        assert_eq!(c.cpu_run_virtual_total_ns, None);
        let c = window_counters(None, &ExitCounters::of(&exit)).unwrap();
        assert_eq!(c.cpu_run_virtual_total_ns, Some(300_000_000));
        assert!(window_counters(Some(None), &ExitCounters::of(&exit)).is_none());
    }
}
