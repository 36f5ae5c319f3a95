//! The blame of one QE as its record keeps it (`run --blame`; iQCAR,
//! shared paper 002): the victim's blocked time per resource and its split
//! into the causes of eq. 5, the most blamed processes and the
//! highest-ranked explanations (Sec. 4.2). The analysis that fills these
//! types is `ttp_blame`; they are defined here, with the QE record
//! (window/record.rs) that carries them, and imported from here by
//! `ttp_blame` and the reports.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Category of a cause of the victim's blocked time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// A process running concurrently with the victim (eq. 5, p1).
    Concurrent,
    /// Another thread of the victim itself: its tasks contend with each
    /// other too (a p1 term whose culprit is the victim).
    Own,
    /// A known process (Sec. 5.1): kernel threads (kworker, jbd2, kswapd,
    /// ksoftirqd …) and the commands given with `--known` (eq. 5, p2).
    Known,
    /// Consumption no measured thread accounts for — steal time, interrupt
    /// time, requests without an owner — and blocked time with no consumer
    /// at all (eq. 5, β_unknown).
    Unknown,
}

impl CauseKind {
    pub const ALL: [CauseKind; 4] = [Self::Concurrent, Self::Own, Self::Known, Self::Unknown];

    pub fn name(self) -> &'static str {
        match self {
            Self::Concurrent => "concurrent",
            Self::Own => "own",
            Self::Known => "known",
            Self::Unknown => "unknown",
        }
    }

    /// Whether the term belongs to p1 (concurrency) or p2 (known and
    /// unknown causes) of eq. 5.
    pub fn is_p1(self) -> bool {
        matches!(self, Self::Concurrent | Self::Own)
    }
}

/// A resource the victim can be blocked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    Cpu,
    Disk,
    Memory,
}

impl Resource {
    pub const ALL: [Resource; 3] = [Self::Cpu, Self::Disk, Self::Memory];

    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Disk => "disk",
            Self::Memory => "memory",
        }
    }

    /// What the victim's blocked time on this resource is.
    pub fn blocked_what(self) -> &'static str {
        match self {
            Self::Cpu => "CPU (run-queue wait)",
            Self::Disk => "I/O (iowait)",
            Self::Memory => "memory (reclaim/compaction stall)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceSummary {
    pub resource: Resource,
    /// Whether the victim's blocked time on it was measured.
    pub blocked_measured: bool,
    /// Whether every thread's consumption of it was measured.
    pub consumption_measured: bool,
    pub consumption_unit: String,
    /// The victim's blocked time (BC of the resource node, Sec. 4.1).
    pub blocked_ns: u64,
    /// How it splits into the terms of eq. 5, ns; adds up to `blocked_ns`.
    pub by_kind: BTreeMap<CauseKind, f64>,
    pub slowdown: SlowdownSummary,
    pub units: Vec<UnitSummary>,
}

/// Slowdown S (eq. 4) summed over the rows where it is defined (App. B.2:
/// S_vt = Σ_k S_k), with its p1/p2 parts (eq. 5).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlowdownSummary {
    /// Rows (victim thread × unit × window) where the victim consumed some
    /// of the unit, so that RATP_vt is finite.
    pub rows_defined: usize,
    /// Rows where it consumed none (fully blocked): S is infinite there.
    pub rows_undefined: usize,
    pub sum: f64,
    pub p1_sum: f64,
    pub p2_sum: f64,
}

impl SlowdownSummary {
    /// Mean slowdown per defined row.
    pub fn mean(&self) -> Option<f64> {
        (self.rows_defined > 0).then(|| self.sum / self.rows_defined as f64)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitSummary {
    pub unit: String,
    pub blocked_ns: u64,
    pub by_kind: BTreeMap<CauseKind, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CulpritSummary {
    /// Absent for the unknown cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub process: String,
    pub group: String,
    pub kind: CauseKind,
    /// ttp's blame (BC of the process node), ns.
    pub blame_ns: f64,
    pub by_resource: BTreeMap<Resource, f64>,
    /// Degree of Responsibility of the process node (Sec. 4.2).
    pub dor: f64,
    /// The overlap baseline's blame, ns (0 if not a concurrent process).
    pub overlap_blame_ns: f64,
    pub overlap_share: f64,
}

/// `Expl(victim, resource, unit, process, group, P)`: the paper's
/// `Expl(vq, vs, res, res', host, cs, cq, P)` with host → unit and
/// stage/query → process/group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    pub rank: usize,
    pub kind: CauseKind,
    /// Culprit process; absent for the unknown cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub process: String,
    pub group: String,
    pub resource: Resource,
    pub unit: String,
    /// Blame contribution along the path, ns.
    pub blame_ns: f64,
    /// Share of the victim's blocked time on `resource`.
    pub share_of_resource: f64,
    /// Path weight P (Sec. 4.2): product of the Impact Factors from the
    /// culprit to the victim, i.e. the share of all its blocked time.
    pub path_weight: f64,
    /// Σ over windows of β̂ (eq. 8) of the process's threads towards the
    /// victim's threads on this unit, where defined (dimensionless).
    pub beta_hat: f64,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlameSummary {
    /// Nominal δt and the windows measured.
    pub window_ns: u64,
    pub windows: usize,
    /// The victim's blocked time per resource and its split into causes
    /// (eq. 5), as in the full report.
    pub resources: Vec<ResourceSummary>,
    /// The most blamed processes (ttp's blame beside the overlap
    /// baseline's), highest first.
    pub culprits: Vec<CulpritSummary>,
    /// The highest-ranked explanations (Sec. 4.2).
    pub explanations: Vec<Explanation>,
}

impl BlameSummary {
    /// Blocked time on every measured resource, ns.
    pub fn blocked_ns(&self) -> u64 {
        self.resources
            .iter()
            .filter(|r| r.blocked_measured)
            .map(|r| r.blocked_ns)
            .sum()
    }
}
