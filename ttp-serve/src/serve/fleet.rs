//! The ledger summed per group of processes for as long as `serve` runs:
//! counters that only grow, per systemd unit, control group, command name
//! or user, with the busiest groups under their own name and the rest in
//! `other` (docs/serve.md, "Grouping").
//!
//! Everything is counted as increments. At each refresh every thread's
//! counters are compared with the last values seen for it; the growth goes
//! to the group the thread's process belongs to *now*. A thread that exits
//! adds the growth its final account (its exit record) shows over the last
//! values seen, once. So:
//! - a series is a sum of non-negative increments and never decreases;
//! - a process that moves to another group (systemd moving a process into
//!   a scope) takes only its future time along, the past stays where it was
//!   counted;
//! - a thread that left the map before its exit record was read keeps its
//!   last values until the record comes (or, when the record was lost,
//!   they stay counted and the thread is counted as vanished).
//!
//! Top N: groups are ranked by recent on-CPU time (an exponentially
//! decayed sum, [`RANK_HALF_LIFE_REFRESHES`]); each refresh the N best are
//! named and every increment of the refresh goes to the series its group
//! has *at that refresh*: its own when named, `other` otherwise. A named
//! series therefore counts its group's time while it was among the top N
//! (resuming, not restarting, if it comes back), `other` everything else,
//! and the series add up to the machine's total exactly.
use std::collections::{BTreeMap, HashMap, HashSet};

use ttp_common::{ExitRecord, ThreadAccount};

use ttp_ledger::accounts::{CpuTimes, Image, LedgerMeasures, ThreadKey, comm};
use ttp_ledger::probe::KernelStats;

/// The label value of the groups folded together by `--top`.
pub(crate) const OTHER: &str = "other";

/// The group of a process whose group could not be found (it exited
/// before it was seen and its parent is unknown).
pub(crate) const UNKNOWN: &str = "unknown";

/// The rank of a group halves after this many refreshes without on-CPU
/// time: at the default 10 s interval a group that stopped working leaves
/// the top N within about a minute, while one busy burst does not push out
/// a steadily busy group at once.
pub(crate) const RANK_HALF_LIFE_REFRESHES: f64 = 6.0;

/// Refreshes a thread may be missing from the ledger's map without an exit
/// record before it is counted as vanished (its record was lost). Records
/// are written before the account leaves the map, so one refresh would do;
/// two leave room for a record still in flight.
const VANISH_AFTER: u32 = 2;

/// How long (in refreshes) a retired thread's key is remembered, so an
/// account read between its exit record and its removal from the map is
/// not counted again.
const RETIRED_MEMORY: u64 = 4;

/// What processes are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// The systemd unit (service, scope, …) of the process's control
    /// group; its path where no unit names it.
    Unit,
    /// The control-group path (unified hierarchy).
    Cgroup,
    /// The command name of the process (its main thread's comm).
    Comm,
    /// The process's effective user.
    User,
}

impl GroupBy {
    /// The label the groups carry in the exposition.
    pub(crate) fn label(self) -> &'static str {
        match self {
            GroupBy::Unit => "unit",
            GroupBy::Cgroup => "cgroup",
            GroupBy::Comm => "comm",
            GroupBy::User => "user",
        }
    }
}

/// Finds the group of a thread's process.
pub(crate) trait Grouping {
    /// A refresh begins: what was read from /proc for the last one is stale.
    fn begin(&mut self);
    /// Every account of the refresh is noted before any is grouped (a
    /// child's group may come from a parent whose record comes later).
    fn note(&mut self, _a: &ThreadAccount) {}
    /// The group of `a`'s process.
    fn group_of(&mut self, a: &ThreadAccount) -> String;
}

#[derive(Debug, Clone, Copy, Default)]
struct Tracked {
    last: LedgerMeasures,
    missing: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Rank {
    score: f64,
}

/// The counters of every group since `serve` started; see the module
/// documentation.
#[derive(Debug, Default)]
pub(crate) struct Fleet {
    top: Option<usize>,
    threads: HashMap<ThreadKey, Tracked>,
    retired: HashMap<ThreadKey, u64>,
    ranks: HashMap<String, Rank>,
    /// Every series ever named, with its value.
    series: BTreeMap<String, LedgerMeasures>,
    named: HashSet<String>,
    other: LedgerMeasures,
    cpus: BTreeMap<u32, CpuTimes>,
    stats: KernelStats,
    vanished: u64,
    refreshes: u64,
}

/// What one refresh leaves to export.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct FleetView {
    /// (group, counters): the named groups, then `other` when `--top` folds.
    pub groups: Vec<(String, LedgerMeasures)>,
    pub cpus: BTreeMap<u32, CpuTimes>,
    pub stats: KernelStats,
    /// Threads whose exit record never came.
    pub vanished_threads: u64,
    /// Threads followed now.
    pub threads: u64,
    pub refreshes: u64,
}

impl Fleet {
    /// `top`: how many groups keep their own series (`None`: all).
    pub(crate) fn new(top: Option<usize>) -> Self {
        Self {
            top,
            ..Default::default()
        }
    }

    /// Adds what `image` and the exit records received after it show
    /// since the last refresh.
    pub(crate) fn refresh(
        &mut self,
        image: &Image,
        exits: &[ExitRecord],
        groups: &mut impl Grouping,
    ) {
        groups.begin();
        self.refreshes += 1;
        let now = self.refreshes;
        self.retired.retain(|_, at| now - *at <= RETIRED_MEMORY);
        for a in image
            .threads
            .values()
            .chain(exits.iter().map(|e| &e.account))
        {
            groups.note(a);
        }
        let mut growth: HashMap<String, LedgerMeasures> = HashMap::new();
        let mut seen = HashSet::with_capacity(image.threads.len());
        for (key, a) in &image.threads {
            if self.retired.contains_key(key) {
                continue;
            }
            seen.insert(*key);
            let t = self.threads.entry(*key).or_default();
            let delta = LedgerMeasures::of(a).since(&t.last);
            t.last += delta;
            t.missing = 0;
            *growth.entry(groups.group_of(a)).or_default() += delta;
        }
        for e in exits {
            let key = ThreadKey::of(&e.account);
            if self.retired.contains_key(&key) {
                continue;
            }
            let last = self.threads.remove(&key).unwrap_or_default().last;
            let delta = LedgerMeasures::of(&e.account).since(&last);
            *growth.entry(groups.group_of(&e.account)).or_default() += delta;
            self.retired.insert(key, now);
            seen.insert(key);
        }
        let mut vanished = 0;
        self.threads.retain(|key, t| {
            if seen.contains(key) {
                return true;
            }
            t.missing += 1;
            let keep = t.missing <= VANISH_AFTER;
            if !keep {
                vanished += 1;
            }
            keep
        });
        self.vanished += vanished;
        self.rank(&growth);
        for (group, delta) in growth {
            if self.named.contains(&group) {
                *self.series.entry(group).or_default() += delta;
            } else {
                self.other += delta;
            }
        }
        for (id, t) in &image.cpus {
            let c = self.cpus.entry(*id).or_default();
            // The open interval of a CPU is closed by its state at the
            // read; an iowait count ended by a wakeup that could not take
            // the CPU's lock can move a few µs between idle and iowait
            // afterwards. Each series keeps its largest value.
            c.busy_ns = c.busy_ns.max(t.busy_ns);
            c.idle_ns = c.idle_ns.max(t.idle_ns);
            c.iowait_ns = c.iowait_ns.max(t.iowait_ns);
        }
        self.stats = image.stats;
    }

    fn rank(&mut self, growth: &HashMap<String, LedgerMeasures>) {
        let decay = 0.5f64.powf(1.0 / RANK_HALF_LIFE_REFRESHES);
        for r in self.ranks.values_mut() {
            r.score *= decay;
        }
        for (group, d) in growth {
            self.ranks.entry(group.clone()).or_default().score += d.on_cpu_ns as f64;
        }
        let Some(top) = self.top else {
            self.named.extend(growth.keys().cloned());
            return;
        };
        let mut order: Vec<(&String, f64)> = self.ranks.iter().map(|(g, r)| (g, r.score)).collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        self.named = order.iter().take(top).map(|(g, _)| (*g).clone()).collect();
        // A group that has not run for a long time (its rank decayed below
        // 1 µs) is forgotten; its series, if it had one, stays.
        self.ranks
            .retain(|g, r| r.score > 1e3 || self.named.contains(g));
    }

    /// The series as of the last refresh: the named ones (a series whose
    /// group is out of the top N now is left out until it comes back), then
    /// `other`.
    pub(crate) fn view(&self) -> FleetView {
        let mut groups: Vec<(String, LedgerMeasures)> = self
            .series
            .iter()
            .filter(|(g, _)| self.named.contains(*g))
            .map(|(g, m)| (g.clone(), *m))
            .collect();
        if self.top.is_some() {
            groups.push((OTHER.into(), self.other));
        }
        FleetView {
            groups,
            cpus: self.cpus.clone(),
            stats: self.stats,
            vanished_threads: self.vanished,
            threads: self.threads.len() as u64,
            refreshes: self.refreshes,
        }
    }
}

/// The groups of live processes, read from /proc (collect/identity.rs) once
/// a refresh; a process that is gone keeps the group it was last seen in,
/// and one never seen takes its parent's (a child starts in its parent's
/// control group and with its user).
#[derive(Debug)]
pub(crate) struct ProcGroups {
    by: GroupBy,
    proc_root: std::path::PathBuf,
    users: ttp_ledger::collect::identity::UserNames,
    /// tgid → (group, refresh when read).
    known: HashMap<u32, (String, u64)>,
    /// tgid → (parent tgid, refresh when noted), from the ledger's fork
    /// records.
    parents: HashMap<u32, (u32, u64)>,
    refresh: u64,
}

/// Refreshes a gone process's group is remembered for its late threads.
const GONE_MEMORY: u64 = 8;

/// How far up the fork chain a gone process's group is looked for.
const MAX_ANCESTORS: usize = 16;

impl ProcGroups {
    pub(crate) fn new(by: GroupBy, proc_root: impl Into<std::path::PathBuf>) -> Self {
        Self {
            by,
            proc_root: proc_root.into(),
            users: ttp_ledger::collect::identity::UserNames::read(std::path::Path::new(
                "/etc/passwd",
            )),
            known: HashMap::new(),
            parents: HashMap::new(),
            refresh: 0,
        }
    }

    fn read(&self, tgid: u32) -> Option<String> {
        use ttp_ledger::collect::identity as id;
        match self.by {
            GroupBy::Unit => id::cgroup_path(&self.proc_root, tgid).map(|p| id::unit_of(&p)),
            GroupBy::Cgroup => id::cgroup_path(&self.proc_root, tgid),
            GroupBy::User => id::effective_uid(&self.proc_root, tgid).map(|u| self.users.name(u)),
            GroupBy::Comm => std::fs::read_to_string(self.proc_root.join(format!("{tgid}/comm")))
                .ok()
                .map(|c| c.trim_end_matches('\n').to_string()),
        }
    }

    fn of_tgid(&mut self, tgid: u32) -> Option<String> {
        if let Some((g, at)) = self.known.get(&tgid)
            && *at == self.refresh
        {
            return Some(g.clone());
        }
        match self.read(tgid) {
            Some(g) => {
                self.known.insert(tgid, (g.clone(), self.refresh));
                Some(g)
            }
            None => self.known.get(&tgid).map(|(g, _)| g.clone()),
        }
    }
}

impl Grouping for ProcGroups {
    fn begin(&mut self) {
        self.refresh += 1;
        let now = self.refresh;
        self.known.retain(|_, (_, at)| now - *at <= GONE_MEMORY);
        self.parents.retain(|_, (_, at)| now - *at <= GONE_MEMORY);
    }

    fn note(&mut self, a: &ThreadAccount) {
        if a.parent_tgid != 0 && a.parent_tgid != a.tgid {
            self.parents.insert(a.tgid, (a.parent_tgid, self.refresh));
        }
    }

    fn group_of(&mut self, a: &ThreadAccount) -> String {
        if let Some(g) = self.of_tgid(a.tgid) {
            return g;
        }
        // Up the fork chain: a short-lived process's parent may itself be
        // gone (a shell that ran a pipeline), its grandparent not.
        let mut parent = a.parent_tgid;
        for _ in 0..MAX_ANCESTORS {
            if parent == 0 {
                break;
            }
            if let Some(g) = self.of_tgid(parent) {
                return g;
            }
            parent = self.parents.get(&parent).map_or(0, |p| p.0);
        }
        match self.by {
            // The ledger has the thread's own name.
            GroupBy::Comm => comm(a),
            _ => UNKNOWN.into(),
        }
    }
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
