//! The kernel's runtime and run_delay read just before a ledger image and
//! again after the references taken with it, so that the cross-check
//! compares the ledger with the kernel at the same instants
//! (docs/ledger.md, "Cross-check").
//!
//! A ledger image and its references (/proc, taskstats) cannot be read at
//! one instant: the image is read first, then the references one process
//! after another, while busy threads keep running. Both counters only grow,
//! so a process's value at the image lies between a read before the image
//! and a read after the last reference; the growth between those two reads
//! (the slack) is how far the image and any reference read between them can
//! be apart.
use std::collections::{BTreeMap, BTreeSet};

/// Per process (tgid), per thread (tid): /proc/TID/schedstat's
/// (sum_exec_runtime ns, run_delay ns, pcount), and the thread's own
/// /proc/PID/task/TID/io `read_bytes` (0 when unreadable).
#[derive(Debug, Clone, Default)]
pub struct SchedReads(BTreeMap<u32, BTreeMap<u32, ThreadRead>>);

/// One thread's (sum_exec_runtime ns, run_delay ns, pcount, read_bytes).
type ThreadRead = (u64, u64, u64, u64);

/// How much a process's runtime and run_delay grew between two reads, and
/// how many switches it can have made meanwhile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slack {
    pub run_ns: u64,
    pub wait_ns: u64,
    /// `pcount` (switches in) grew by this much, plus one for each thread
    /// whose runtime grew: one running at the first read may have been
    /// switched out without being switched in again (its runtime grows at
    /// that switch-out, update_curr).
    pub switches: u64,
    /// The threads' own read bytes (/proc/TID/io) grew by this much: a
    /// busy reader's I/O between the image and the /proc read.
    pub read_bytes: u64,
}

/// /proc/PID/task/TID/schedstat: sum_exec_runtime, run_delay, pcount;
/// and the thread's own read_bytes (0 when it cannot be read). Only the
/// task directory's io is the thread's: /proc/TID/io is the whole
/// process's, reaped children included (proc_tgid_io_accounting).
fn schedstat3(pid: u32, tid: u32) -> Option<ThreadRead> {
    let task = format!("/proc/{pid}/task/{tid}");
    let text = std::fs::read_to_string(format!("{task}/schedstat")).ok()?;
    let mut f = text.split_ascii_whitespace().map(|v| v.parse::<u64>().ok());
    let (run, wait, pcount) = (f.next()??, f.next()??, f.next()??);
    let read_bytes = std::fs::read_to_string(format!("{task}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("read_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0);
    Some((run, wait, pcount, read_bytes))
}

/// The slack at both ends of a window: the ledger's figure lies in
/// `[reference − end, reference + start]` when the references were read
/// after the images. `runtime` and `run_delay`: where the process was read
/// right before and right after both images, the range of the kernel's own
/// growth between the ledger's two reads, from those reads alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bracket {
    pub start: Slack,
    pub end: Slack,
    pub runtime: Option<(u64, u64)>,
    pub run_delay: Option<(u64, u64)>,
}

impl SchedReads {
    /// /proc/PID/task/TID/schedstat of every thread of `pids`, or of every
    /// process when `pids` is None. Threads that are gone are skipped.
    pub fn read(pids: Option<&BTreeSet<u32>>) -> Self {
        let all;
        let pids = match pids {
            Some(p) => p,
            None => {
                all = super::procs::ProcSet::all_pids();
                &all
            }
        };
        let mut out = BTreeMap::new();
        for &pid in pids {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            let threads: BTreeMap<u32, ThreadRead> = dir
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter_map(|tid| Some((tid, schedstat3(pid, tid)?)))
                .collect();
            out.insert(pid, threads);
        }
        Self(out)
    }

    #[cfg(test)]
    pub(crate) fn from_threads(rows: &[(u32, u32, u64, u64, u64)]) -> Self {
        let mut out: BTreeMap<u32, BTreeMap<u32, ThreadRead>> = BTreeMap::new();
        for &(tgid, tid, run, wait, pcount) in rows {
            out.entry(tgid)
                .or_default()
                .insert(tid, (run, wait, pcount, 0));
        }
        Self(out)
    }

    /// `tgid`'s threads summed: (sum_exec_runtime, run_delay); None when
    /// the process was not read.
    fn totals(&self, tgid: u32) -> Option<(u64, u64)> {
        let t = self.0.get(&tgid)?;
        Some(
            t.values()
                .fold((0, 0), |(r, w), &(run, wait, ..)| (r + run, w + wait)),
        )
    }

    /// Whether every thread of `tgid` read here was read in `later` too.
    fn threads_all_in(&self, later: &SchedReads, tgid: u32) -> bool {
        let Some(mine) = self.0.get(&tgid) else {
            return true;
        };
        let theirs = later.0.get(&tgid);
        mine.keys()
            .all(|tid| theirs.is_some_and(|t| t.contains_key(tid)))
    }

    /// What `tgid`'s threads grew by from `self` (before) to `after`. A
    /// thread missing before started in between (its counters were 0); a
    /// thread missing after is gone and adds nothing. None when the process
    /// is not in `after`.
    pub(crate) fn slack(&self, after: &SchedReads, tgid: u32) -> Option<Slack> {
        let post = after.0.get(&tgid)?;
        let pre = self.0.get(&tgid);
        let mut s = Slack::default();
        for (tid, &(run, wait, pcount, read)) in post {
            let (r0, w0, p0, b0) = pre
                .and_then(|p| p.get(tid))
                .copied()
                .unwrap_or((0, 0, 0, 0));
            s.run_ns += run.saturating_sub(r0);
            s.wait_ns += wait.saturating_sub(w0);
            s.switches += pcount.saturating_sub(p0) + u64::from(run > r0);
            s.read_bytes += read.saturating_sub(b0);
        }
        Some(s)
    }
}

/// The reads at one end of a window: before the image, right after it,
/// and after the references read with it.
#[derive(Debug, Clone, Default)]
pub struct EndReads {
    pub pre: SchedReads,
    pub at: SchedReads,
    pub post: SchedReads,
}

/// The reads around the first and the last image of a window; either end
/// may be missing (then its slack is 0 and that end is compared as read).
#[derive(Debug, Clone, Default)]
pub struct WindowReads {
    pub start: Option<EndReads>,
    pub end: Option<EndReads>,
}

impl WindowReads {
    /// The bracket of process `tgid`. `at_start`/`at_end`: whether the
    /// process the report describes is the one of that pid at the window's
    /// start and end (its start time matched): the reads of an earlier or
    /// later process with the same pid are not its own, and are not used.
    pub fn bracket(&self, tgid: u32, at_start: bool, at_end: bool) -> Bracket {
        let start = self.start.as_ref().filter(|_| at_start);
        let end = self.end.as_ref().filter(|_| at_end);
        let slack = |e: Option<&EndReads>| {
            e.and_then(|e| e.pre.slack(&e.post, tgid))
                .unwrap_or_default()
        };
        // The ledger read each counter between `pre` and `at`: its growth
        // lies in [pre_end − at_start, at_end − pre_start]. A process not
        // yet there at the start had 0; one gone at the end gets no range,
        // and so does one with a thread read at the start and gone at the
        // end (the end's sums no longer hold what that thread ran).
        let range = |pick: fn((u64, u64)) -> u64| {
            let e = self.end.as_ref().filter(|_| at_end)?;
            if let Some(s) = start
                && !s.pre.threads_all_in(&e.at, tgid)
            {
                return None;
            }
            let at_end = pick(e.at.totals(tgid)?);
            let pre_end = e.pre.totals(tgid).map_or(0, pick);
            let at_start = start.and_then(|s| s.at.totals(tgid)).map_or(0, pick);
            let pre_start = start.and_then(|s| s.pre.totals(tgid)).map_or(0, pick);
            Some((
                pre_end.saturating_sub(at_start),
                at_end.saturating_sub(pre_start),
            ))
        };
        Bracket {
            start: slack(start),
            end: slack(end),
            runtime: range(|t| t.0),
            run_delay: range(|t| t.1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a slack that counts a thread's whole runtime when it was
    /// read at both ends (it must be the growth), loses a thread started
    /// in between (all of its runtime is growth), or charges a thread that
    /// ended in between.
    #[test]
    fn slack_is_the_growth_of_the_threads_read_after() {
        let pre = SchedReads::from_threads(&[
            (10, 10, 1_000, 50, 5),
            (10, 11, 2_000, 0, 9),
            (10, 12, 7, 7, 1),
        ]);
        let post = SchedReads::from_threads(&[
            (10, 10, 1_300, 60, 7),
            (10, 11, 2_000, 0, 9),
            (10, 13, 40, 4, 3),
        ]);
        // Switches: thread 10 switched in twice (+1, it ran), 11 not at
        // all, 13 three times since it started (+1).
        assert_eq!(
            pre.slack(&post, 10),
            Some(Slack {
                run_ns: 340,
                wait_ns: 14,
                switches: 2 + 1 + 3 + 1,
                read_bytes: 0,
            })
        );
        assert_eq!(pre.slack(&post, 99), None);
    }

    /// Catches a range taken from the references (read later) instead of
    /// the reads around the images, or one that loses a process started
    /// inside the window (0 at the start).
    #[test]
    fn range_is_between_the_reads_around_the_images() {
        let r = |rows: &[(u32, u32, u64, u64, u64)]| SchedReads::from_threads(rows);
        let w = WindowReads {
            start: Some(EndReads {
                pre: r(&[(10, 10, 1_000, 100, 1)]),
                at: r(&[(10, 10, 1_010, 101, 1)]),
                post: r(&[(10, 10, 1_500, 150, 2)]),
            }),
            end: Some(EndReads {
                pre: r(&[(10, 10, 5_000, 500, 5), (20, 20, 70, 7, 1)]),
                at: r(&[(10, 10, 5_020, 502, 5), (20, 20, 90, 9, 1)]),
                post: r(&[(10, 10, 6_000, 600, 6), (20, 20, 95, 9, 1)]),
            }),
        };
        let b = w.bracket(10, true, true);
        assert_eq!(b.runtime, Some((5_000 - 1_010, 5_020 - 1_000)));
        assert_eq!(b.run_delay, Some((500 - 101, 502 - 100)));
        assert_eq!(b.start.run_ns, 500);
        assert_eq!(w.bracket(20, true, true).runtime, Some((70, 90)));
        assert_eq!(w.bracket(30, true, true).runtime, None);
        // Process 10 of the report started inside the window with the pid
        // of an earlier one: the start reads are not its own.
        let reused = w.bracket(10, false, true);
        assert_eq!(reused.runtime, Some((5_000, 5_020)));
        assert_eq!(reused.start, Slack::default());
    }

    /// Catches a range whose end sums lost a thread that ended inside the
    /// window (its whole runtime would come off the upper bound, and a
    /// right figure would be flagged).
    #[test]
    fn no_range_when_a_thread_ended_inside_the_window() {
        let r = |rows: &[(u32, u32, u64, u64, u64)]| SchedReads::from_threads(rows);
        let start = EndReads {
            pre: r(&[(10, 10, 1_000, 0, 1), (10, 11, 9_000, 0, 1)]),
            at: r(&[(10, 10, 1_000, 0, 1), (10, 11, 9_000, 0, 1)]),
            post: r(&[(10, 10, 1_000, 0, 1), (10, 11, 9_000, 0, 1)]),
        };
        let end = EndReads {
            pre: r(&[(10, 10, 2_000, 0, 2)]),
            at: r(&[(10, 10, 2_000, 0, 2)]),
            post: r(&[(10, 10, 2_000, 0, 2)]),
        };
        let w = WindowReads {
            start: Some(start),
            end: Some(end),
        };
        assert_eq!(w.bracket(10, true, true).runtime, None);
        assert_eq!(w.bracket(10, true, true).run_delay, None);
    }
}
