//! The result of a vprofile run as one serialisable report (JSON schema
//! `ttp.vprofile/1`) and its text form: ranked factors, then the variance
//! tree.
use std::fmt::Write as _;

use super::{
    breakdown::{Breakdown, BreakdownConfig, RoundSummary},
    elf::{ElfKind, SymbolSource},
    tree::Term,
};

pub const SCHEMA: &str = "ttp.vprofile/1";

/// How the invocations were measured; filled in by the live command.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MeasurementInfo {
    /// Process measured (`None` when replaying recorded data).
    pub pid: Option<u32>,
    /// Records the kernel could not deliver (ring buffer full), all rounds.
    pub lost_records: Option<u64>,
    /// Probe hits (entries + returns), all rounds.
    pub probe_hits: Option<u64>,
    /// Cost of one probe hit measured during the run.
    pub probe_overhead_ns_per_hit: Option<f64>,
    /// Wall time spent measuring, all rounds.
    pub measured_s: Option<f64>,
    /// The calibrated cost of a probe hit subtracted from every interval
    /// (`None`: nothing was subtracted).
    #[serde(default)]
    pub probe_cost: Option<super::plan::ProbeCost>,
    /// Mean probe hit units per invocation of the root, last round.
    #[serde(default)]
    pub hits_per_invocation: Option<f64>,
    /// Mean ns subtracted from the root per invocation, last round.
    #[serde(default)]
    pub overhead_subtracted_ns_per_invocation: Option<f64>,
    /// Mean residual uncertainty of that subtraction, ns per invocation.
    #[serde(default)]
    pub overhead_uncertainty_ns_per_invocation: Option<f64>,
}

/// The binary the call graph came from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BinaryInfo {
    pub path: String,
    pub kind: ElfKind,
    pub symbols: SymbolSource,
    /// height(call_graph) of eq. 2.
    pub root_height: u32,
    /// Functions reachable from the root through direct calls.
    pub reachable_functions: usize,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct FactorReport {
    pub rank: usize,
    pub factor: String,
    pub selected: bool,
    /// Kept as the answer (a leaf, or already broken down without a
    /// dominating child), Algorithm 2 lines 28–30.
    pub kept: bool,
    pub share: f64,
    pub contribution_ns2: f64,
    pub height: u32,
    pub specificity: f64,
    pub responsibility: f64,
    /// Calling context of each instance, `root/…/function`.
    pub instances: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct NodeReport {
    pub id: usize,
    pub parent: Option<usize>,
    pub term: String,
    /// Function chain the term is measured in, from the root.
    pub context: Vec<String>,
    pub share: f64,
    pub value_ns2: f64,
    pub mean_ns: Option<f64>,
    /// Contribution set to 0 by Algorithm 2 (a child explains ≥ m of it).
    pub zeroed: bool,
    pub negative_invocations: usize,
}

/// Everything a vprofile run found.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct VprofileReport {
    pub schema: String,
    pub root: String,
    pub binary: BinaryInfo,
    pub config: BreakdownConfig,
    pub measurement: MeasurementInfo,
    /// Invocations of the root in the last round.
    pub invocations: usize,
    pub root_mean_ns: f64,
    pub root_variance_ns2: f64,
    pub rounds: Vec<RoundSummary>,
    /// `--rounds` ran out while selected functions could still be broken down.
    pub stopped_early: bool,
    /// Selected factors (s*), by rank: the k most responsible of those
    /// reaching the threshold (ttp's reading of Algorithm 1).
    pub selected: Vec<String>,
    /// What Algorithm 1 as printed would select from the same ranking
    /// (stopping at the first factor under the threshold).
    #[serde(default)]
    pub literal_selected: Vec<String>,
    /// Every factor, ranked by responsibility (Algorithm 1, line 14).
    pub factors: Vec<FactorReport>,
    pub tree: Vec<NodeReport>,
}

impl VprofileReport {
    /// Builds the report from a finished (or stopped) breakdown; `None`
    /// before the first round was observed.
    pub fn new(b: &Breakdown, binary: BinaryInfo, measurement: MeasurementInfo) -> Option<Self> {
        let tree = b.tree()?;
        let zeroed = |id: usize| {
            tree.instance_path(id)
                .is_some_and(|p| b.adjustments().zeroed.contains(&p))
        };
        let path_of = |id: usize| {
            let n = &tree.nodes[id];
            let mut p = n.context.clone();
            p.push(match &n.term {
                Term::Var(f) => f.to_string(),
                t => t.to_string(),
            });
            p.join("/")
        };
        let factors: Vec<FactorReport> = b
            .factors()
            .iter()
            .enumerate()
            .map(|(i, f)| FactorReport {
                rank: i + 1,
                factor: f.term.to_string(),
                selected: b.selected().contains(&i),
                kept: f.pinned,
                share: f.share,
                contribution_ns2: f.contribution_ns2,
                height: f.height,
                specificity: f.specificity,
                responsibility: f.responsibility,
                instances: f.instances.iter().map(|&id| path_of(id)).collect(),
            })
            .collect();
        Some(Self {
            schema: SCHEMA.into(),
            root: b.table().root.clone(),
            binary,
            config: *b.config(),
            measurement,
            invocations: tree.invocations,
            root_mean_ns: tree.root().mean_ns.unwrap_or(0.0),
            root_variance_ns2: tree.root_variance_ns2(),
            rounds: b.rounds().to_vec(),
            stopped_early: b.stopped_early,
            selected: b
                .selected()
                .iter()
                .map(|&i| b.factors()[i].term.to_string())
                .collect(),
            literal_selected: b
                .literal_selected()
                .iter()
                .map(|&i| b.factors()[i].term.to_string())
                .collect(),
            factors,
            tree: tree
                .nodes
                .iter()
                .enumerate()
                .map(|(id, n)| NodeReport {
                    id,
                    parent: n.parent,
                    term: n.term.to_string(),
                    context: n.context.clone(),
                    share: n.share,
                    value_ns2: n.value_ns2,
                    mean_ns: n.mean_ns,
                    zeroed: zeroed(id),
                    negative_invocations: n.negative_invocations,
                })
                .collect(),
        })
    }

    /// The text report: header, selected factors, the ranking, the tree
    /// (nodes below `min_share` of Var(root) folded into one line per parent).
    pub fn to_text(&self, min_share: f64) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "vprofile {} in {} ({}, {})",
            self.root,
            self.binary.path,
            self.binary.kind.label(),
            self.binary.symbols.label()
        );
        let _ = writeln!(
            s,
            "{} invocations in the last of {} round(s); mean {}, standard deviation {}",
            self.invocations,
            self.rounds.len(),
            ms(self.root_mean_ns),
            ms(self.root_variance_ns2.sqrt()),
        );
        if let Some(lost) = self.measurement.lost_records {
            let _ = writeln!(s, "lost records: {lost}");
        }
        if let Some(o) = self.measurement.probe_overhead_ns_per_hit {
            let _ = writeln!(
                s,
                "probe programs: {o:.0} ns per hit (inside the eBPF programs)"
            );
        }
        let m = &self.measurement;
        match (
            m.probe_cost,
            m.overhead_subtracted_ns_per_invocation,
            m.overhead_uncertainty_ns_per_invocation,
        ) {
            (Some(c), Some(cut), Some(unc)) => {
                let _ = writeln!(
                    s,
                    "probe cost subtracted: {:.0} ns per hit, {:.0} ns for the root's entry and return (± {:.0} ns per hit); {:.1} hit units and {} per invocation, ± {}",
                    c.per_hit_ns,
                    c.boundary_ns,
                    c.uncertainty_per_hit_ns,
                    m.hits_per_invocation.unwrap_or(0.0),
                    ms(cut),
                    ms(unc)
                );
            }
            _ => {
                let _ = writeln!(s, "probe cost: not subtracted (no probe hits counted)");
            }
        }
        let _ = writeln!(
            s,
            "\nFactors explaining the variance (k = {}, threshold {:.1} % of Var(root)):",
            self.config.k,
            self.config.threshold_share * 100.0
        );
        if self.selected.is_empty() {
            let _ = writeln!(
                s,
                "  none: no factor reaches the threshold (lower --threshold)"
            );
        }
        if self.literal_selected != self.selected {
            let literal = if self.literal_selected.is_empty() {
                "nothing".to_string()
            } else {
                self.literal_selected.join(", ")
            };
            let _ = writeln!(
                s,
                "  (Algorithm 1 as printed, stopping at the first factor under the threshold, would select {literal})"
            );
        }
        let _ = writeln!(
            s,
            "  {:>4}  {:<40} {:>9} {:>6} {:>11} {:>9}",
            "rank", "factor", "share", "height", "specificity", "resp/Var"
        );
        let shown = self
            .factors
            .iter()
            .filter(|f| f.selected || f.rank <= self.config.k.max(5));
        for f in shown {
            let mark = match (f.selected, f.kept) {
                (true, true) => " *kept",
                (true, false) => " *",
                _ => "",
            };
            let _ = writeln!(
                s,
                "  {:>4}  {:<40} {:>8.1}% {:>6} {:>11} {:>9.3}{mark}",
                f.rank,
                truncate(&f.factor, 40),
                f.share * 100.0,
                f.height,
                f.specificity,
                f.responsibility / self.root_variance_ns2,
            );
        }
        if self.stopped_early {
            let _ = writeln!(
                s,
                "  (stopped after --rounds {}: selected functions could be broken down further)",
                self.config.max_rounds
            );
        }
        let _ = writeln!(s, "\nVariance tree (share of Var(root)):");
        self.write_node(&mut s, 0, "", true, min_share);
        s
    }

    fn write_node(&self, s: &mut String, id: usize, prefix: &str, last: bool, min_share: f64) {
        let n = &self.tree[id];
        let (branch, child_prefix) = if id == 0 {
            ("", String::new())
        } else if last {
            ("└─ ", format!("{prefix}   "))
        } else {
            ("├─ ", format!("{prefix}│  "))
        };
        let mean = n
            .mean_ns
            .map(|m| format!("  mean {}", ms(m)))
            .unwrap_or_default();
        let zeroed = if n.zeroed {
            "  (explained by a child)"
        } else {
            ""
        };
        let neg = if n.negative_invocations > 0 {
            format!(
                "  ({} invocations with children longer than the parent)",
                n.negative_invocations
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{prefix}{branch}{} {:.1} %{mean}{zeroed}{neg}",
            n.term,
            n.share * 100.0
        );
        let children: Vec<usize> = self
            .tree
            .iter()
            .filter(|c| c.parent == Some(id))
            .map(|c| c.id)
            .collect();
        let (shown, folded): (Vec<usize>, Vec<usize>) = children
            .into_iter()
            .partition(|&c| self.tree[c].share.abs() >= min_share);
        let mut shown = shown;
        shown.sort_by(|a, b| self.tree[*b].share.total_cmp(&self.tree[*a].share));
        for (i, &c) in shown.iter().enumerate() {
            let last = i + 1 == shown.len() && folded.is_empty();
            self.write_node(s, c, &child_prefix, last, min_share);
        }
        if !folded.is_empty() {
            let sum: f64 = folded.iter().map(|&c| self.tree[c].share).sum();
            let _ = writeln!(
                s,
                "{child_prefix}└─ {} more terms under {:.1} % each, {:.1} % together",
                folded.len(),
                min_share * 100.0,
                sum * 100.0
            );
        }
    }
}

/// Nanoseconds as milliseconds with three decimals.
fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}
