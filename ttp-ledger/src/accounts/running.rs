//! A window that stays open for as long as `attach` runs (hours), in memory
//! that does not grow with the processes that start and end meanwhile.
//!
//! [`Window::between`](super::Window::between) needs every exit record of
//! the window at its end. A long `attach` instead folds each record into
//! its process's row as it arrives (the record is then dropped), and keeps
//! at most `keep_exited` rows of processes that ended: past that, the ended
//! processes with the least on-CPU + iowait time are folded into one line
//! per command name ([`ExitedGroup`]; docs/attach.md says why). Live
//! processes always keep their row; the kernel's own table (`THREADS`)
//! bounds them.
//!
//! Rows are keyed by process *instance*, (tgid, start time of its leader),
//! so a pid the kernel hands out twice within the window gives two rows.
//! A non-leader thread carries only its own start time: it belongs to the
//! latest instance of its tgid whose leader started at or before it.
//!
//! The result is the same as `Window::between(first, last, all records)`
//! (a test checks it): a record is folded only once it is inside the
//! window as of an image and its thread is not in that image (an image's
//! account wins over a record, as there).
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use ttp_common::{ExitRecord, ThreadAccount};

use super::{
    close::CpuTimes,
    image::{Image, ProcessDelta},
    keys::{ProcKey, ThreadKey},
    measures::LedgerMeasures,
    rows::Rows,
};
use crate::probe::KernelStats;

/// Ended processes of one command name, summed (beyond `keep_exited`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitedGroup {
    pub comm: String,
    pub processes: u64,
    pub threads: u64,
    pub kernel: LedgerMeasures,
}

/// Command names given their own [`ExitedGroup`]; the rest share one
/// (`OTHER_COMMS`), so the groups too are bounded.
pub(crate) const MAX_GROUPS: usize = 1024;
/// The group of command names beyond [`MAX_GROUPS`].
pub(crate) const OTHER_COMMS: &str = "(other commands)";
/// Default room for rows of ended processes: a 20 000-process fork storm
/// within one window keeps every process, at about 0.5 KiB a row.
pub const DEFAULT_KEEP_EXITED: usize = 32_768;

/// The window so far.
#[derive(Debug)]
pub struct RunningWindow {
    first: Image,
    /// Threads of `first` whose exit record was folded.
    first_ended: HashSet<ThreadKey>,
    /// Records not yet foldable: after the image they were read with, of a
    /// thread still in it, or (flag set) of a thread whose process had no
    /// leader in it, held for one more image.
    pending: Vec<(ExitRecord, bool)>,
    rows: Rows,
    /// Scratch of [`RunningWindow::compact`], reserved with the rows.
    ended_scratch: Vec<(u64, ProcKey)>,
    /// Rows whose process ended (leader's record folded).
    ended_rows: usize,
    keep_exited: usize,
    groups: BTreeMap<String, ExitedGroup>,
    /// Set when rows were folded into groups since the last
    /// [`RunningWindow::take_compacted`].
    compacted: bool,
    /// Rows an exit record was folded into by the current fold: kept until
    /// the next fold (see [`RunningWindow::compact`]).
    recent: HashSet<ProcKey>,
    /// The threads of the latest image folded against, with their tgids.
    previous: HashMap<ThreadKey, u32>,
    /// Threads gone from an image whose record has not come yet, with
    /// their tgid and how many images have passed since: their process
    /// keeps its row meanwhile (see [`RunningWindow::compact`]).
    awaited: HashMap<ThreadKey, (u32, u32)>,
}

/// Images a thread gone without a record holds its process's row for. The
/// probe frees a thread's account a moment before it sends the record (so
/// that no image holds a thread twice, ledger.rs `retire`), and an image
/// read in between, with the drain right after it, has neither; the record
/// comes with the next drain. One image would do; a record that has not
/// come after four was lost (the kernel counts those).
const AWAIT_IMAGES: u32 = 4;

/// The window at its end.
#[derive(Debug, Clone, Default)]
pub struct ClosedWindow {
    pub start_ns: u64,
    pub end_ns: u64,
    /// One row per process instance, in key order.
    pub processes: Vec<(ProcKey, ProcessDelta)>,
    /// Ended processes folded by command name, busiest first.
    pub exited_groups: Vec<ExitedGroup>,
    pub cpus: BTreeMap<u32, CpuTimes>,
    pub lost: KernelStats,
    /// Threads in the first image with neither a later account nor an exit
    /// record (non-zero means lost records).
    pub vanished_threads: u32,
}

impl ClosedWindow {
    pub fn cpu_total(&self) -> CpuTimes {
        self.cpus.values().fold(CpuTimes::default(), |mut acc, c| {
            acc.busy_ns += c.busy_ns;
            acc.idle_ns += c.idle_ns;
            acc.iowait_ns += c.iowait_ns;
            acc
        })
    }
}

/// tgid → start time of its leader, of the leaders in `img`.
fn leaders(img: &Image) -> HashMap<u32, u64> {
    img.threads
        .values()
        .filter(|a| a.tid == a.tgid)
        .map(|a| (a.tgid, a.start_time_ns))
        .collect()
}

impl RunningWindow {
    /// Reserves (and writes) the memory of `keep_exited` rows of ended
    /// processes, plus room for the processes alive in `first`, now.
    pub fn new(first: Image, keep_exited: usize) -> Self {
        let keep_exited = keep_exited.max(1);
        let live = leaders(&first).len();
        let room = keep_exited + keep_exited / 8 + 2 * live;
        let mut ended_scratch = vec![(0, ProcKey::default()); room];
        ended_scratch.clear();
        let previous = first.threads.iter().map(|(k, a)| (*k, a.tgid)).collect();
        Self {
            previous,
            awaited: HashMap::new(),
            recent: HashSet::new(),
            first,
            first_ended: HashSet::new(),
            pending: Vec::new(),
            rows: Rows::with_capacity(room),
            ended_scratch,
            ended_rows: 0,
            keep_exited,
            groups: BTreeMap::new(),
            compacted: false,
        }
    }

    /// Folds `records` (read after `img` was taken) and the ones pending.
    pub fn fold(&mut self, img: &Image, records: Vec<ExitRecord>) {
        self.fold_with(img, records, false);
    }

    /// `last_image`: no image comes after `img`, so nothing is held for one.
    fn fold_with(&mut self, img: &Image, records: Vec<ExitRecord>, last_image: bool) {
        let live = leaders(img);
        let mut batch = std::mem::take(&mut self.pending);
        batch.extend(records.into_iter().map(|e| (e, false)));
        // Leaders first: a thread's row is found from its leader's.
        batch.sort_by_key(|(e, _)| e.account.tid != e.account.tgid);
        self.await_records(img, &batch);
        self.recent.clear();
        for (e, held) in batch {
            let key = ThreadKey::of(&e.account);
            if e.exit_ns > img.at_ns || img.threads.contains_key(&key) {
                self.pending.push((e, held));
                continue;
            }
            // Records of threads that ended before the window and were not
            // in its first image are not the window's.
            if e.exit_ns <= self.first.at_ns && !self.first.threads.contains_key(&key) {
                continue;
            }
            // A thread whose process has no leader in the image: the
            // process may have started after the image read its maps (a
            // fork storm: the read takes milliseconds), its leader alive
            // but not in this image, or a pid's earlier process would take
            // the thread. The next image has the leader, or its record.
            let a = &e.account;
            if !held
                && !last_image
                && a.tid != a.tgid
                && live.get(&a.tgid).is_none_or(|&s| s > e.exit_ns)
            {
                self.pending.push((e, true));
                continue;
            }
            if self.first.threads.contains_key(&key) {
                self.first_ended.insert(key);
            }
            self.add(&e.account, Some(e.exit_ns), &live);
        }
        if self.ended_rows > self.keep_exited {
            self.compact(img, &live);
        }
    }

    /// Notes the threads of the previous image that `img` lacks and whose
    /// record is not in `batch` (every record read so far, pending ones
    /// included), and forgets those whose record came or that waited
    /// [`AWAIT_IMAGES`] images.
    fn await_records(&mut self, img: &Image, batch: &[(ExitRecord, bool)]) {
        let came: HashSet<ThreadKey> = batch
            .iter()
            .map(|(e, _)| ThreadKey::of(&e.account))
            .collect();
        self.awaited.retain(|k, (_, waited)| {
            *waited += 1;
            !came.contains(k) && *waited <= AWAIT_IMAGES
        });
        for (k, &tgid) in &self.previous {
            if !img.threads.contains_key(k) && !came.contains(k) {
                self.awaited.insert(*k, (tgid, 0));
            }
        }
        self.previous.clear();
        self.previous
            .extend(img.threads.iter().map(|(k, a)| (*k, a.tgid)));
    }

    /// Records read but not yet folded (see [`RunningWindow::fold`]).
    pub fn pending(&self) -> impl Iterator<Item = &ExitRecord> {
        self.pending.iter().map(|(e, _)| e)
    }

    /// Whether rows were folded into groups since the last call.
    pub fn take_compacted(&mut self) -> bool {
        std::mem::take(&mut self.compacted)
    }

    /// Whether a row of `tgid` is kept.
    pub fn has_tgid(&self, tgid: u32) -> bool {
        self.rows.has_tgid(tgid)
    }

    /// The row `a` belongs to; `exit_ns`: when it ended (None: alive at
    /// the last image). A live thread belongs to the live process of its
    /// tgid; a thread that ended, to the live process if that one's leader
    /// had started by then, else to the latest earlier process of the tgid
    /// with a row. (Start times are compared with the exit only: a thread
    /// older than the probes carries /proc's start in ticks, a later one
    /// the kernel's in ns.)
    fn key_of(&self, a: &ThreadAccount, exit_ns: Option<u64>, live: &HashMap<u32, u64>) -> ProcKey {
        let tgid = a.tgid;
        if a.tid == tgid {
            return ProcKey {
                tgid,
                start_ns: a.start_time_ns,
            };
        }
        if let Some(&s) = live.get(&tgid)
            && exit_ns.is_none_or(|e| s <= e)
        {
            return ProcKey { tgid, start_ns: s };
        }
        self.rows
            .latest_at_or_before(tgid, exit_ns.unwrap_or(u64::MAX))
            .unwrap_or(ProcKey { tgid, start_ns: 0 })
    }

    /// Adds thread `a`'s measures since the first image to its row, as
    /// `Window::between` does; `exit_ns`: `a` comes from an exit record.
    fn add(&mut self, a: &ThreadAccount, exit_ns: Option<u64>, live: &HashMap<u32, u64>) {
        let first = self
            .first
            .threads
            .get(&ThreadKey::of(a))
            .map(LedgerMeasures::of)
            .unwrap_or_default();
        let delta = LedgerMeasures::of(a).since(&first);
        let key = self.key_of(a, exit_ns, live);
        let row = self.rows.get_or_insert(key);
        let is_leader = a.tid == a.tgid;
        if is_leader || row.comm[0] == 0 {
            row.comm = a.comm;
        }
        let p = &mut row.delta;
        if a.parent_tgid != 0 && (is_leader || p.parent_tgid.is_none()) {
            p.parent_tgid = Some(a.parent_tgid);
        }
        if is_leader && exit_ns.is_some() && !p.exited {
            p.exited = true;
            self.ended_rows += 1;
        }
        if exit_ns.is_some() {
            self.recent.insert(key);
        }
        if delta != LedgerMeasures::default() {
            p.threads += 1;
        }
        p.kernel += delta;
    }

    /// Folds the least busy ended rows into their command's group, down to
    /// three quarters of `keep_exited` (so a compaction is rare: one per
    /// `keep_exited / 4` processes that end).
    /// `img`: the image the records were folded against, `live` its
    /// leaders.
    fn compact(&mut self, img: &Image, live: &HashMap<u32, u64>) {
        let target = self.keep_exited - self.keep_exited / 4;
        // A process whose other threads' records are still pending (read
        // after the image, or held for the next one: a fork storm's leader
        // is folded before its threads) keeps its row until they are in;
        // folded now, they would start a second row of it. So does one
        // whose leader ended while other threads run on (pthread_exit in
        // main): its process has not ended, and those threads' accounts
        // belong to its row. (A tgid's threads without a leader in the
        // image are of the process whose leader ended: the pid is not
        // handed out again while any thread of it is alive.) So does one
        // with a thread gone from the image whose record has not come.
        // And so does one that an exit record came to with this fold: an
        // image is read slot by slot over milliseconds, so a thread
        // created meanwhile by one that then ended may be in neither the
        // image nor the records; the next image has it, or its record.
        // (Seen: a leader that started two threads and ended within 0.7
        // ms, its row folded at an image without them, the threads' time
        // 2.5 s later in a second row of the pid.)
        let mut waiting: HashSet<u32> = self.pending.iter().map(|(e, _)| e.account.tgid).collect();
        waiting.extend(self.awaited.values().map(|&(tgid, _)| tgid));
        waiting.extend(
            img.threads
                .values()
                .filter(|a| !live.contains_key(&a.tgid))
                .map(|a| a.tgid),
        );
        let mut ended = std::mem::take(&mut self.ended_scratch);
        ended.clear();
        ended.extend(
            self.rows
                .iter()
                .filter(|r| {
                    r.delta.exited
                        && !waiting.contains(&r.key.tgid)
                        && !self.recent.contains(&r.key)
                })
                .map(|r| {
                    let p = &r.delta;
                    (p.kernel.on_cpu_ns.saturating_add(p.kernel.iowait_ns), r.key)
                }),
        );
        ended.sort_unstable();
        // Down to `target` rows of ended processes in all, of those that
        // may go now (the others count, and go at a later fold).
        let excess = self.ended_rows.saturating_sub(target).min(ended.len());
        for &(_, k) in ended.iter().take(excess) {
            let Some(row) = self.rows.remove(k) else {
                continue;
            };
            let comm = row.comm_str();
            let p = row.delta;
            let name = if self.groups.contains_key(&comm) || self.groups.len() < MAX_GROUPS {
                comm
            } else {
                OTHER_COMMS.to_string()
            };
            let g = self
                .groups
                .entry(name.clone())
                .or_insert_with(|| ExitedGroup {
                    comm: name,
                    ..Default::default()
                });
            g.processes += 1;
            g.threads += u64::from(p.threads);
            g.kernel += p.kernel;
            self.ended_rows -= 1;
        }
        self.ended_scratch = ended;
        self.compacted |= excess > 0;
    }

    /// The window from the first image to `last` (the image the latest
    /// [`RunningWindow::fold`] was given).
    pub fn close(mut self, last: &Image) -> ClosedWindow {
        self.fold_with(last, Vec::new(), true);
        let live = leaders(last);
        // Leaders first, as in `fold`.
        let mut threads: Vec<&ThreadAccount> = last.threads.values().collect();
        threads.sort_by_key(|a| (a.tid != a.tgid, a.tid));
        for a in threads {
            self.add(a, None, &live);
        }
        let vanished = self
            .first
            .threads
            .keys()
            .filter(|k| !last.threads.contains_key(k) && !self.first_ended.contains(k))
            .count() as u32;
        let mut exited_groups: Vec<ExitedGroup> = self.groups.into_values().collect();
        exited_groups.sort_by_key(|g| {
            std::cmp::Reverse(g.kernel.on_cpu_ns.saturating_add(g.kernel.iowait_ns))
        });
        ClosedWindow {
            start_ns: self.first.at_ns,
            end_ns: last.at_ns,
            processes: self.rows.into_sorted(),
            exited_groups,
            cpus: last
                .cpus
                .iter()
                .map(|(id, t)| {
                    let b = self.first.cpus.get(id).copied().unwrap_or_default();
                    (*id, t.since(&b))
                })
                .collect(),
            lost: last.stats.since(&self.first.stats),
            vanished_threads: vanished,
        }
    }
}

#[cfg(test)]
#[path = "running_tests.rs"]
mod tests;
