//! `statements`: every SQL statement a PostgreSQL server ran in a window,
//! from its own USDT probes (probe/usdt.rs, ttp-ebpf/src/statements.rs),
//! grouped (by fingerprint, exact text or backend) with where its time went.
//!
//! Per group: calls; elapsed; the thread's on-CPU and run-queue wait (the
//! scheduler's counters at both probes), sleep, blocked and iowait (own and
//! others' I/O, the ledger's split: docs/ledger.md); the server's wait
//! probes inside the statement; HdrHistogram latency percentiles; and the
//! component that explains the variance of its latency, by VProfiler's
//! eq. 1 (paper 004, Sec. 3.1: Var(ΣX) = ΣVar(X) + 2ΣCov) over a disjoint
//! split of the elapsed time (see [`VARIANCE_PARTS`]).
pub mod crosscheck;
pub mod document;
pub mod extended;
pub mod fingerprint;
pub mod follow;
pub mod parallel;
pub(crate) mod plans;
pub mod session;
mod statement;
pub mod sums;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use ttp_common::statements::{WAITS, flag, part, wait};

use self::parallel::GroupWorkers;
pub use self::statement::Statement;
use ttp_variance::{ChildSlot, ChildTable, Invocation, Term, VarianceTree};

/// JSON schema name of the result.
pub const SCHEMA: &str = "ttp.statements/1";

/// The server's wait probe pairs, in `Record::waits_ns` order: (label,
/// start probe, done probe).
pub const WAIT_PROBES: [(&str, &str, &str); WAITS] = [
    ("lock_wait", "lock__wait__start", "lock__wait__done"),
    ("lwlock_wait", "lwlock__wait__start", "lwlock__wait__done"),
    ("buffer_read", "buffer__read__start", "buffer__read__done"),
    ("smgr_read", "smgr__md__read__start", "smgr__md__read__done"),
    (
        "wal_write",
        "wal__buffer__write__dirty__start",
        "wal__buffer__write__dirty__done",
    ),
    ("sort", "sort__start", "sort__done"),
    ("execute", "query__execute__start", "query__execute__done"),
];

/// Wait pairs attached only when asked for (`--detail`): each probe hit
/// costs a uprobe trap, 1.1–1.4 µs end to end here, and a pgbench -S
/// statement costs ~30 µs of CPU (docs/benchmarks.md, "`statements`
/// cost"). The buffer pair fires per page, the LWLock pair per contended
/// lock, the storage pair per block read. The heavyweight-lock, WAL-write
/// and sort pairs fire only when a statement waits or sorts, so they stay
/// on; the executor pair fires once per statement and is what sees the
/// extended query protocol's statements ([`extended`]), so it stays on
/// unless `--simple-only`. (label in [`WAIT_PROBES`], `--detail` name.)
pub(crate) const DETAIL_WAITS: [(&str, &str); 3] = [
    ("buffer_read", "buffers"),
    ("lwlock_wait", "lwlock"),
    ("smgr_read", "smgr"),
];

/// The opt-in wait pairs of `--detail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Detail {
    /// buffer__read__start/done: every shared-buffer page access.
    Buffers,
    /// lwlock__wait__start/done: every contended LWLock, per tranche.
    Lwlock,
    /// smgr__md__read__start/done: every block read from a relation file.
    Smgr,
    /// All of them.
    All,
}

impl Detail {
    fn name(self) -> &'static str {
        match self {
            Detail::Buffers => "buffers",
            Detail::Lwlock => "lwlock",
            Detail::Smgr => "smgr",
            Detail::All => "all",
        }
    }
}

/// The `--detail` name that attaches wait pair `label`, if it is opt-in.
pub(crate) fn detail_of(label: &str) -> Option<&'static str> {
    DETAIL_WAITS
        .iter()
        .find(|(l, _)| *l == label)
        .map(|(_, d)| *d)
}

/// Which wait pairs (in [`WAIT_PROBES`] order) to attach: every pair that
/// is not opt-in, and the opt-in ones `details` names; with `simple_only`
/// not the executor pair (the extended protocol's statements are then not
/// seen).
pub fn requested_waits(details: &[Detail], simple_only: bool) -> [bool; WAITS] {
    let mut on = [false; WAITS];
    for (i, (label, _, _)) in WAIT_PROBES.iter().enumerate() {
        on[i] = match detail_of(label) {
            None => true,
            Some(d) => details.iter().any(|x| *x == Detail::All || x.name() == d),
        };
    }
    if simple_only {
        on[wait::EXECUTE] = false;
    }
    on
}

/// The server binary of the PostgreSQL installed here, for tests that
/// read a real binary (`None`, said on stderr, when there is none).
#[cfg(test)]
pub(crate) fn installed_server() -> Option<std::path::PathBuf> {
    let found = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path().join("bin/postgres"))
            .find(|p| p.exists())
    });
    if found.is_none() {
        eprintln!("no /usr/lib/postgresql/*/bin/postgres: skipped");
    }
    found
}

/// How statements are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The normalised text (constants → `$n`; fingerprint.rs).
    Fingerprint,
    /// The exact text.
    Text,
    /// The backend process.
    Backend,
}

/// A wait probe pair's sums in one group; absent from the report when the
/// binary lacks either probe (never shown as zero).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitSum {
    pub waits: u64,
    pub wait_ns: u64,
}

/// Latency percentiles of a group, from an HdrHistogram (3 significant
/// digits).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// One term of eq. 1 over the group's components.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarianceTerm {
    /// `Var(on_cpu)`, `Cov(iowait, lock_wait)`, … (`img_statement`: the
    /// part of the elapsed time no component covers).
    pub term: String,
    /// Var(X) or 2·Cov(X, Y), ns².
    pub value_ns2: f64,
    /// `value_ns2` / Var(elapsed).
    pub share: f64,
}

/// Which component explains the variance of the group's latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variance {
    pub variance_ns2: f64,
    /// Terms by decreasing share.
    pub terms: Vec<VarianceTerm>,
    /// The term with the largest share.
    pub explained_by: String,
}

/// One group of statements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub key: String,
    /// PostgreSQL's query id of the group's statements (`st_query_id`,
    /// equal to pg_stat_statements' `queryid`), where the server computes
    /// one (`compute_query_id`, or pg_stat_statements loaded) and all its
    /// statements had the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queryid: Option<i64>,
    /// What the kernel keyed the group's sums by: `queryid`, `fingerprint`
    /// (the text's fingerprint hash computed in the kernel, where the
    /// backend had no query id), both joined by `+` (a statement the
    /// server gave a query id only sometimes), `text` or `backend`; absent
    /// for records (`--each`, `--usdt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_key: Option<String>,
    /// The fingerprint hash the kernel computed (16 hex digits), where the
    /// group has one fingerprint key: `ttp_common::fingerprint::string_hash`
    /// of `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint_hash: Option<String>,
    /// PostgreSQL 18's plan ids the group's statements ended with
    /// (`st_plan_id`, set only by extensions that compute plan ids, such
    /// as pg_stat_plans), each with its calls, most calls first
    /// ([`plans`]). Absent where no statement had one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan_ids: Vec<plans::PlanCalls>,
    /// Statements with a plan id beyond the kernel's slots for the key
    /// (not in `plan_ids`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub plan_ids_other: u64,
    /// An example of the exact text (for fingerprints and backends).
    pub example: String,
    pub calls: u64,
    pub elapsed_ns: u64,
    pub on_cpu_ns: u64,
    pub runq_wait_ns: u64,
    /// Off its CPU, not in the run queue and not in iowait. With the
    /// ledger (USDT boundaries, `--ledger`): its interruptible sleeps;
    /// without it: every such wait, `blocked_ns` absent.
    pub sleep_ns: u64,
    /// The ledger's measures; absent (never 0) where the ledger did not
    /// run (socket boundaries without `--ledger`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_ns: Option<u64>,
    pub iowait_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iowait_own_ns: Option<u64>,
    /// `iowait_ns` − `iowait_own_ns`: waiting while the disk served others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iowait_others_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iowait_share_ns: Option<u64>,
    /// Statements whose reply carried an error (socket boundaries, plain
    /// text connections): counted in `calls`, not by pg_stat_statements.
    #[serde(default)]
    pub errors: u64,
    /// Statements of the extended query protocol ([`Statement::extended`]).
    #[serde(default)]
    pub extended: u64,
    /// `elapsed` − (on-CPU + run-queue + sleep + blocked + iowait): time
    /// the scheduler's and the ledger's counters do not cover (the running
    /// interval's last stretch the kernel had not yet added to its runtime
    /// at the probe, events the ledger missed).
    pub unattributed_ns: i64,
    /// Per wait probe pair (label → sums), only the available ones.
    pub waits: BTreeMap<String, WaitSum>,
    pub latency: Latency,
    pub variance: Option<Variance>,
    /// Statements whose text was cut at 255 bytes.
    pub truncated: u64,
    /// Statements the ledger had no account for (ledger parts not counted).
    pub without_account: u64,
    /// What the statements' parallel workers spent, beside the leaders'
    /// figures above (which it is not part of: the leader's wait for them
    /// is in its sleep). Absent when no statement had a worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_workers: Option<GroupWorkers>,
}

/// The disjoint split of a statement's elapsed time used for eq. 1:
/// heavyweight and LWLock waits are sleeps (the backend sleeps on its latch
/// or semaphore), so they come out of the ledger's sleep + blocked; the
/// rest of it is `other_sleep`. Buffer, storage, WAL and sort probes
/// overlap on-CPU and iowait, so they are reported but not in this split.
pub(crate) const VARIANCE_PARTS: [&str; 6] = [
    "on_cpu",
    "runq_wait",
    "iowait",
    "lock_wait",
    "lwlock_wait",
    "other_sleep",
];

pub(crate) fn variance_split(s: &Statement) -> [u64; 6] {
    let lock = s.waits_ns[wait::LOCK];
    let lw = s.waits_ns[wait::LWLOCK];
    let sleeps = s.parts[part::SLEEP] + s.parts[part::BLOCKED];
    [
        s.parts[part::ON_CPU],
        s.parts[part::RUNQ],
        s.parts[part::IOWAIT],
        lock,
        lw,
        sleeps.saturating_sub(lock + lw),
    ]
}

/// Eq. 1 over [`VARIANCE_PARTS`] (paper 004, Sec. 3.1), computed by the
/// variance module's tree with the statement as root and the components as
/// its children; `None` with fewer than 2 calls or no variance.
/// A lock or LWLock pair that was not measured (the binary lacks it, or
/// `--detail` did not ask for it) is no term of its own: its time stays in
/// `other_sleep`, so no component is shown as a zero it was never measured
/// to be.
pub(crate) fn variance(statements: &[&Statement], available: &[bool; WAITS]) -> Option<Variance> {
    let keep: Vec<usize> = (0..VARIANCE_PARTS.len())
        .filter(|&i| match VARIANCE_PARTS[i] {
            "lock_wait" => available[wait::LOCK],
            "lwlock_wait" => available[wait::LWLOCK],
            _ => true,
        })
        .collect();
    let mut table = ChildTable::new("statement");
    for &i in &keep {
        let name = VARIANCE_PARTS[i];
        table.slots.push(ChildSlot {
            parent: None,
            function: name.into(),
            call_sites: Vec::new(),
        });
    }
    let inv: Vec<Invocation> = statements
        .iter()
        .map(|s| Invocation {
            root_ns: s.elapsed_ns,
            children_ns: {
                let split = variance_split(s);
                keep.iter().map(|&i| split[i]).collect()
            },
        })
        .collect();
    let tree = VarianceTree::compute(&table, &inv).ok()?;
    let mut terms: Vec<VarianceTerm> = tree
        .nodes
        .iter()
        .filter(|n| n.parent == Some(0))
        .map(|n| VarianceTerm {
            term: match &n.term {
                Term::Var(f) => format!("Var({f})"),
                t => t.to_string(),
            },
            value_ns2: n.value_ns2,
            share: n.share,
        })
        .collect();
    terms.sort_by(|a, b| b.share.total_cmp(&a.share));
    let explained_by = terms.first()?.term.clone();
    Some(Variance {
        variance_ns2: tree.root_variance_ns2(),
        terms,
        explained_by,
    })
}

fn latency(statements: &[&Statement]) -> Latency {
    let Ok(mut h) = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3) else {
        return Latency::default();
    };
    for s in statements {
        h.saturating_record(s.elapsed_ns.max(1));
    }
    Latency {
        mean_ns: h.mean(),
        p50_ns: h.value_at_quantile(0.5),
        p90_ns: h.value_at_quantile(0.9),
        p99_ns: h.value_at_quantile(0.99),
        max_ns: h.max(),
    }
}

/// The key of a statement under `by`.
pub fn key(s: &Statement, by: GroupBy) -> String {
    match by {
        GroupBy::Fingerprint => fingerprint::fingerprint(&s.text),
        GroupBy::Text => s.text.clone(),
        GroupBy::Backend => format!("backend {}", s.tgid),
    }
}

/// Groups `statements` by `by`, largest elapsed first. `available[i]`:
/// whether the binary has wait pair `i`.
pub fn group(statements: &[Statement], by: GroupBy, available: &[bool; WAITS]) -> Vec<Group> {
    let mut by_key: BTreeMap<String, Vec<&Statement>> = BTreeMap::new();
    for s in statements {
        by_key.entry(key(s, by)).or_default().push(s);
    }
    let mut groups: Vec<Group> = by_key
        .into_iter()
        .map(|(key, ss)| summarise(key, &ss, available))
        .collect();
    groups.sort_by(|a, b| b.elapsed_ns.cmp(&a.elapsed_ns).then(a.key.cmp(&b.key)));
    groups
}

/// A group's time split, from its summed elapsed time, parts and waits:
/// the one arithmetic of the groups from records ([`summarise`]) and
/// from the kernel's sums (`sums::group`).
pub(crate) struct Split {
    pub on_cpu_ns: u64,
    pub runq_wait_ns: u64,
    pub sleep_ns: u64,
    pub blocked_ns: Option<u64>,
    pub iowait_ns: u64,
    pub iowait_own_ns: Option<u64>,
    pub iowait_others_ns: Option<u64>,
    pub iowait_share_ns: Option<u64>,
    pub unattributed_ns: i64,
    pub waits: BTreeMap<String, WaitSum>,
}

impl Split {
    /// `parts`: summed per `part`; `waits[i]`: (waits, wait ns) of pair
    /// `i`, shown where `available[i]`; `ledger`: whether any statement
    /// had its ledger account (else its blocked and own-iowait parts are
    /// not measured).
    pub(crate) fn of(
        elapsed_ns: u64,
        parts: &[u64; ttp_common::statements::PARTS],
        waits: impl Fn(usize) -> (u64, u64),
        available: &[bool; WAITS],
        ledger: bool,
    ) -> Self {
        let p = |i: usize| parts[i];
        let (on_cpu, runq, sleep, blocked, iowait, own) = (
            p(part::ON_CPU),
            p(part::RUNQ),
            p(part::SLEEP),
            p(part::BLOCKED),
            p(part::IOWAIT),
            p(part::IOWAIT_OWN),
        );
        let mut sums = BTreeMap::new();
        for (i, (label, _, _)) in WAIT_PROBES.iter().enumerate() {
            if available[i] {
                let (n, ns) = waits(i);
                sums.insert(
                    (*label).to_string(),
                    WaitSum {
                        waits: n,
                        wait_ns: ns,
                    },
                );
            }
        }
        let covered = on_cpu + runq + sleep + blocked + iowait;
        let measured = |v: u64| ledger.then_some(v);
        Split {
            on_cpu_ns: on_cpu,
            runq_wait_ns: runq,
            sleep_ns: sleep,
            blocked_ns: measured(blocked),
            iowait_ns: iowait,
            iowait_own_ns: measured(own),
            iowait_others_ns: measured(iowait.saturating_sub(own)),
            iowait_share_ns: measured(p(part::IOWAIT_SHARE)),
            unattributed_ns: elapsed_ns as i64 - covered as i64,
            waits: sums,
        }
    }
}

fn summarise(key: String, ss: &[&Statement], available: &[bool; WAITS]) -> Group {
    let sum = |f: &dyn Fn(&Statement) -> u64| ss.iter().map(|s| f(s)).sum::<u64>();
    let elapsed_ns = sum(&|s| s.elapsed_ns);
    let parts = std::array::from_fn(|i| sum(&|s| s.parts[i]));
    // The ledger's parts exist where any statement had its account.
    let ledger = ss.iter().any(|s| s.flags & flag::NO_ACCOUNT == 0);
    let split = Split::of(
        elapsed_ns,
        &parts,
        |i| {
            (
                ss.iter().map(|s| u64::from(s.waits[i])).sum(),
                sum(&|s| s.waits_ns[i]),
            )
        },
        available,
        ledger,
    );
    let queryid = ss
        .first()
        .map(|s| s.query_id)
        .filter(|q| *q != 0 && ss.iter().all(|s| s.query_id == *q))
        .map(|q| q as i64);
    let mut plans = plans::Plans::default();
    for s in ss {
        plans.count(s.plan_id);
    }
    Group {
        key,
        queryid,
        kernel_key: None,
        fingerprint_hash: None,
        plan_ids: plans.list(),
        plan_ids_other: 0,
        example: ss.first().map(|s| s.text.clone()).unwrap_or_default(),
        calls: ss.len() as u64,
        elapsed_ns,
        on_cpu_ns: split.on_cpu_ns,
        runq_wait_ns: split.runq_wait_ns,
        sleep_ns: split.sleep_ns,
        blocked_ns: split.blocked_ns,
        iowait_ns: split.iowait_ns,
        iowait_own_ns: split.iowait_own_ns,
        iowait_others_ns: split.iowait_others_ns,
        iowait_share_ns: split.iowait_share_ns,
        errors: ss.iter().filter(|s| s.flags & flag::ERROR != 0).count() as u64,
        extended: ss.iter().filter(|s| s.extended()).count() as u64,
        unattributed_ns: split.unattributed_ns,
        waits: split.waits,
        latency: latency(ss),
        variance: variance(ss, available),
        truncated: ss.iter().filter(|s| s.flags & flag::TRUNCATED != 0).count() as u64,
        without_account: ss
            .iter()
            .filter(|s| s.flags & flag::NO_ACCOUNT != 0)
            .count() as u64,
        parallel_workers: GroupWorkers::of(ss),
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests;
