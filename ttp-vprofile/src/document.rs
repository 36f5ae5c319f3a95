//! The result of a vprofile run as one serialisable report (JSON schema
//! `ttp.vprofile/1`); its text form and chart are in report/vprofile/.
use super::{
    breakdown::{Breakdown, BreakdownConfig, RoundSummary},
    elf::ElfKind,
};
use ttp_ledger::probe::symbols::SymbolSource;
use ttp_variance::Term;

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
    /// The separate debug file that named the functions, if one did.
    #[serde(default)]
    pub symbol_file: Option<String>,
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
    /// Where each function of the tree that no symbol names lies.
    #[serde(default)]
    pub unnamed: Vec<UnnamedFunction>,
}

/// A function without a symbol (`sub_ADDR`, its address in the file).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct UnnamedFunction {
    pub name: String,
    /// The nearest function symbol before it and the offset from its start
    /// (`PortalRun+0x5a0`).
    pub near: String,
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
            unnamed: Vec::new(),
        })
    }
}
