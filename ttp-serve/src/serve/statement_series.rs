//! One PostgreSQL server's statements summed per (database, user,
//! fingerprint) for as long as `serve --postgres` runs: counters that only
//! grow, the busiest series under their own labels and the rest in
//! `other` (docs/serve.md, "PostgreSQL statements").
//!
//! The rule is the one of the process groups (fleet.rs): statements are
//! added as increments; at each refresh the series are ranked by their
//! recent elapsed time (an exponentially decayed sum), the N best are
//! named, and every increment of the refresh goes to the series its key has
//! *at that refresh*: its own when named, `other` otherwise. So a series is
//! a sum of non-negative increments and never decreases; one that falls
//! out of the top N keeps its total and is left out of the exposition
//! until it comes back, when it resumes from that total; `other` holds
//! everything the named series did not, and all series add up to every
//! statement seen, exactly.
use std::collections::{BTreeMap, HashMap, HashSet};

/// Upper bounds of the latency histogram's buckets, ns (the last bucket,
/// +Inf, is implicit; the exposition gives them in seconds). From 50 µs (a primary-key SELECT over a
/// Unix socket) to 10 s, about 2.5 per decade: enough to tell a statement
/// that became 2× slower, few enough that a series costs 17 samples.
pub(crate) const LATENCY_BOUNDS_NS: [u64; 15] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// Buckets of the histogram: the bounds, then +Inf.
pub(crate) const BUCKETS: usize = LATENCY_BOUNDS_NS.len() + 1;

/// A series' rank halves after this many refreshes without statements
/// (as the process groups', fleet.rs).
const RANK_HALF_LIFE_REFRESHES: f64 = 6.0;

/// The key of a series: the statement's database and user (their oids,
/// as the backend's status entry holds them; 0 when it was not read), its
/// query id where the server computes one, and its fingerprint
/// (ttp-statements/src/fingerprint.rs): pg_stat_statements' key and
/// text, so that the two join.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct SeriesKey {
    pub database: u32,
    pub user: u32,
    /// PostgreSQL's query id where the server computes one (equal to
    /// pg_stat_statements' `queryid`), as the kernel keyed the sums.
    pub queryid: Option<i64>,
    pub fingerprint: String,
}

/// What a series has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct StatementTotals {
    pub calls: u64,
    pub elapsed_ns: u64,
    pub on_cpu_ns: u64,
    pub runq_wait_ns: u64,
    pub lock_wait_ns: u64,
    pub iowait_ns: u64,
    /// Statements per latency bucket ([`LATENCY_BOUNDS_NS`], then +Inf);
    /// not cumulative.
    pub buckets: [u64; BUCKETS],
}

impl StatementTotals {
    /// One statement: its elapsed time and its parts as the groups of
    /// `statements` read them (ttp-statements, `socket_parts`). The
    /// series' tests add statements one at a time; serve adds the
    /// kernel's sums (pg_sums.rs).
    #[cfg(test)]
    pub(crate) fn of(s: &ttp_statements::Statement) -> Self {
        use ttp_common::statements::{part, wait};
        let mut buckets = [0; BUCKETS];
        let i = LATENCY_BOUNDS_NS
            .iter()
            .position(|b| s.elapsed_ns <= *b)
            .unwrap_or(BUCKETS - 1);
        buckets[i] = 1;
        Self {
            calls: 1,
            elapsed_ns: s.elapsed_ns,
            on_cpu_ns: s.parts[part::ON_CPU],
            runq_wait_ns: s.parts[part::RUNQ],
            lock_wait_ns: s.waits_ns[wait::LOCK],
            iowait_ns: s.parts[part::IOWAIT],
            buckets,
        }
    }
}

impl std::ops::AddAssign for StatementTotals {
    fn add_assign(&mut self, o: Self) {
        self.calls += o.calls;
        self.elapsed_ns += o.elapsed_ns;
        self.on_cpu_ns += o.on_cpu_ns;
        self.runq_wait_ns += o.runq_wait_ns;
        self.lock_wait_ns += o.lock_wait_ns;
        self.iowait_ns += o.iowait_ns;
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
    }
}

/// The series of one server; see the module documentation.
#[derive(Debug)]
pub(crate) struct StatementSeries {
    top: usize,
    ranks: HashMap<SeriesKey, f64>,
    /// Every series ever named, with its totals.
    series: BTreeMap<SeriesKey, StatementTotals>,
    named: HashSet<SeriesKey>,
    other: StatementTotals,
    /// Added since the last refresh.
    growth: HashMap<SeriesKey, StatementTotals>,
    /// Added to `other` since the last refresh.
    growth_other: StatementTotals,
}

impl StatementSeries {
    /// `top`: how many series keep their own labels (at least 1).
    pub(crate) fn new(top: usize) -> Self {
        Self {
            top: top.max(1),
            ranks: HashMap::new(),
            series: BTreeMap::new(),
            named: HashSet::new(),
            other: StatementTotals::default(),
            growth: HashMap::new(),
            growth_other: StatementTotals::default(),
        }
    }

    /// Adds one statement (or a key's statements since the last read of
    /// the sums); it is counted at the next [`Self::refresh`].
    pub(crate) fn add(&mut self, key: SeriesKey, t: StatementTotals) {
        *self.growth.entry(key).or_default() += t;
    }

    /// Adds statements that have no series of their own (the kernel's map
    /// had no room for their key): they go to `other` at the next
    /// [`Self::refresh`].
    pub(crate) fn add_other(&mut self, t: StatementTotals) {
        self.growth_other += t;
    }

    /// Ranks the series and counts what was added since the last refresh.
    pub(crate) fn refresh(&mut self) {
        let decay = 0.5f64.powf(1.0 / RANK_HALF_LIFE_REFRESHES);
        for r in self.ranks.values_mut() {
            *r *= decay;
        }
        for (key, t) in &self.growth {
            *self.ranks.entry(key.clone()).or_default() += t.elapsed_ns as f64;
        }
        let mut order: Vec<(&SeriesKey, f64)> = self.ranks.iter().map(|(k, r)| (k, *r)).collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        self.named = order
            .iter()
            .take(self.top)
            .map(|(k, _)| (*k).clone())
            .collect();
        // A series idle for long (rank below 1 µs) is forgotten; its
        // totals, if it was ever named, stay.
        let named = &self.named;
        self.ranks.retain(|k, r| *r > 1e3 || named.contains(k));
        self.other += std::mem::take(&mut self.growth_other);
        for (key, t) in std::mem::take(&mut self.growth) {
            if self.named.contains(&key) {
                *self.series.entry(key).or_default() += t;
            } else {
                self.other += t;
            }
        }
    }

    /// The named series as of the last refresh, then `other` (`None`).
    pub(crate) fn view(&self) -> Vec<(Option<SeriesKey>, StatementTotals)> {
        let mut v: Vec<(Option<SeriesKey>, StatementTotals)> = self
            .series
            .iter()
            .filter(|(k, _)| self.named.contains(*k))
            .map(|(k, t)| (Some(k.clone()), *t))
            .collect();
        v.push((None, self.other));
        v
    }
}

#[cfg(test)]
#[path = "statement_series_tests.rs"]
mod tests;
