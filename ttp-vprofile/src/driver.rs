//! Runs Algorithm 2 against a live workload: each round turns the child
//! table into probes ([`ProbePlan`]), has an [`InvocationSource`] measure
//! them, and feeds the invocations to the [`Breakdown`]. The source is the
//! eBPF uprobe loader in the `vprofile` command, and recorded data in tests.
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{
    breakdown::{Breakdown, BreakdownConfig},
    callgraph::CallGraph,
    document::{BinaryInfo, MeasurementInfo, UnnamedFunction, VprofileReport},
    elf::ElfImage,
    plan::{PlanError, ProbeCost, ProbePlan},
};
use ttp_variance::{ChildTable, Invocation, TreeError};

/// When a round's measurement ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this much wall time.
    Duration(Duration),
    /// After this many completed root invocations.
    Invocations(usize),
}

/// What one round of probing delivered.
#[derive(Debug, Clone, Default)]
pub struct RoundData {
    pub invocations: Vec<Invocation>,
    /// Root entry time of each invocation (CLOCK_MONOTONIC ns), when the
    /// source knows it.
    pub starts_ns: Vec<u64>,
    /// Records the ring buffer dropped.
    pub lost_records: u64,
    /// Probe hits (all uprobes and uretprobes of the round).
    pub probe_hits: u64,
    /// Time spent inside the probes, ns.
    pub probe_ns: u64,
    /// Probe hit units per invocation (hits inside the root + 1,
    /// `Record::root_hits`), when the source counts them.
    pub root_hits: Vec<u32>,
    /// The calibrated probe cost subtracted from every interval, if any.
    pub cost: Option<ProbeCost>,
    /// Σ over invocations of the ns subtracted from the root.
    pub root_overhead_ns: f64,
    pub elapsed: Duration,
    /// The user asked to stop (Ctrl-C): no further round is run.
    pub interrupted: bool,
}

/// Measures one round: attaches the plan's probes, collects the records
/// until `stop`, detaches.
pub trait InvocationSource {
    fn measure(
        &mut self,
        table: &ChildTable,
        plan: &ProbePlan,
        stop: Stop,
    ) -> Result<RoundData, Box<dyn std::error::Error + Send + Sync>>;
}

#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("round {round}: {source}")]
    Tree { round: usize, source: TreeError },
    #[error("round {round}: measuring failed: {source}")]
    Source {
        round: usize,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(
        "stopped before {root} ran twice (it may never be called: check that the program runs it, or pick another --root); nothing to report"
    )]
    StoppedBeforeInvocations { root: String },
    #[error(
        "{root} makes no call that can be measured (only indirect calls, calls to unnamed code, or none): its variance is all img_{root}; pick a function higher up as --root"
    )]
    NoChildren { root: String },
}

/// Runs Algorithm 2 to the end (or `config.max_rounds`) and returns the
/// report; `only_root_children` restricts the root's measured children. `progress` shows a bar on stderr (hidden if it is no terminal).
pub fn drive(
    elf: &ElfImage,
    graph: &CallGraph,
    config: BreakdownConfig,
    stop: Stop,
    only_root_children: Option<Vec<String>>,
    source: &mut dyn InvocationSource,
    pid: Option<u32>,
) -> Result<VprofileReport, DriveError> {
    let root = graph.root();
    let root_name = super::callgraph::unique_name(elf, root);
    if graph.children(root).is_empty()
        && graph
            .unnamed_children_of(&super::callgraph::ChildKey::Local(root))
            .is_empty()
    {
        return Err(DriveError::NoChildren { root: root_name });
    }
    let bar =
        ProgressBar::with_draw_target(Some(config.max_rounds as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} round {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let root_label = root_name.clone();
    let mut b = Breakdown::new(root_name, config);
    if let Some(only) = only_root_children {
        b = b.only_root_children(only);
    }
    let mut info = MeasurementInfo {
        pid,
        lost_records: Some(0),
        probe_hits: Some(0),
        probe_overhead_ns_per_hit: None,
        measured_s: Some(0.0),
        ..Default::default()
    };
    let mut probe_ns = 0u64;
    let mut round = 0;
    while let Some(table) = b.next_table(graph) {
        round += 1;
        let plan = ProbePlan::new(elf, root, table)?;
        bar.set_position(round as u64);
        bar.set_message(format!(
            "measuring {} call sites in {} slots",
            plan.sites.len(),
            plan.slots
        ));
        let data = source
            .measure(table, &plan, stop)
            .map_err(|source| DriveError::Source { round, source })?;
        // Stopped (Ctrl-C, SIGTERM) before the root ran twice this round:
        // the rounds before it are the report, if any.
        if data.interrupted && data.invocations.len() < 2 {
            if round == 1 {
                return Err(DriveError::StoppedBeforeInvocations {
                    root: root_label.clone(),
                });
            }
            b.stopped_early = !b.is_done();
            break;
        }
        *info.lost_records.get_or_insert(0) += data.lost_records;
        *info.probe_hits.get_or_insert(0) += data.probe_hits;
        *info.measured_s.get_or_insert(0.0) += data.elapsed.as_secs_f64();
        probe_ns += data.probe_ns;
        // The report's numbers are the last round's: so is its overhead.
        let n = data.invocations.len().max(1) as f64;
        info.probe_cost = data.cost;
        info.hits_per_invocation = (!data.root_hits.is_empty()).then(|| {
            data.root_hits.iter().map(|&h| f64::from(h)).sum::<f64>() / data.root_hits.len() as f64
        });
        info.overhead_subtracted_ns_per_invocation = data.cost.map(|_| data.root_overhead_ns / n);
        info.overhead_uncertainty_ns_per_invocation = data.cost.map(|c| {
            data.root_hits
                .iter()
                .map(|&h| c.uncertainty_ns(h))
                .sum::<f64>()
                / n
        });
        b.observe(&data.invocations, graph)
            .map_err(|source| DriveError::Tree { round, source })?;
        if data.interrupted {
            b.stopped_early = !b.is_done();
            break;
        }
    }
    bar.finish_and_clear();
    if let Some(hits) = info.probe_hits.filter(|&h| h > 0) {
        info.probe_overhead_ns_per_hit = Some(probe_ns as f64 / hits as f64);
    }
    let binary = BinaryInfo {
        path: elf.path().display().to_string(),
        kind: elf.kind(),
        symbols: elf.symbol_source(),
        symbol_file: elf.symbol_file().map(|p| p.display().to_string()),
        root_height: graph.root_height(),
        reachable_functions: graph.reachable(),
    };
    let mut report =
        VprofileReport::new(&b, binary, info).expect("at least one round was observed");
    let mut unnamed: Vec<String> = b
        .table()
        .slots
        .iter()
        .map(|s| s.function.clone())
        .filter(|f| f.starts_with("sub_"))
        .collect();
    unnamed.sort();
    unnamed.dedup();
    report.unnamed = unnamed
        .into_iter()
        .filter_map(|name| {
            Some(UnnamedFunction {
                near: graph.near_symbol(&name)?,
                name,
            })
        })
        .collect();
    Ok(report)
}
