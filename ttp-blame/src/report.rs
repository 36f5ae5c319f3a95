//! The result of a blame analysis: what the text report, the JSON file
//! (`"schema": "ttp.blame/1"`) and the DOT graph are made from.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    attribute::{self, Attribution, Check, Row},
    baseline::Baseline,
    cause::{Classifier, GroupBy, UNKNOWN},
    graph::{self, Graph},
    input::{Recording, Sources},
    options::{DiskMeasure, Options},
};
use ttp_window::window::blame_record::{CauseKind, Explanation, Resource};

use ttp_window::window::blame_record::{
    CulpritSummary, ResourceSummary, SlowdownSummary, UnitSummary,
};

/// Value of [`BlameReport::schema`].
pub(crate) const REPORT_SCHEMA: &str = "ttp.blame/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlameReport {
    pub schema: String,
    pub victim: VictimSummary,
    /// Nominal δt.
    pub window_ns: u64,
    pub windows: usize,
    /// From the first window's start to the last one's end.
    pub span_ns: u64,
    pub options: OptionsSummary,
    pub sources: Sources,
    pub resources: Vec<ResourceSummary>,
    /// Per culprit process: ttp's blame beside the overlap baseline's.
    pub culprits: Vec<CulpritSummary>,
    pub explanations: Vec<Explanation>,
    pub baseline: Baseline,
    pub graph: Graph,
    pub checks: Vec<Check>,
    /// ttp's disk extension: the victim's iowait split into its own
    /// requests' service and waiting behind others', blamed for the second
    /// only (`None`: not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_split: Option<super::disk_split::DiskSplit>,
    /// One row per victim thread, unit and window (RATP, eq. 7, slowdown,
    /// and each cause's share).
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VictimSummary {
    pub pid: u32,
    pub comm: String,
    pub children: bool,
    pub threads: usize,
    /// When the last victim thread exited, from the first window's start;
    /// absent if it was still running at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exited_after_ns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionsSummary {
    pub disk_by: DiskMeasure,
    pub group_by: GroupBy,
    pub known_comms: Vec<String>,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn assemble(
    rec: &Recording,
    opts: &Options,
    cls: &Classifier,
    attr: Attribution,
    graph: Graph,
    explanations: Vec<Explanation>,
    baseline: Baseline,
) -> BlameReport {
    let first = rec.windows.first().map_or(0, |w| w.start_ns);
    let last = rec.windows.last().map_or(0, |w| w.end_ns);
    let victim_tasks: Vec<_> = cls
        .victim_ids()
        .iter()
        .filter_map(|&id| cls.task(id))
        .collect();
    let exited_after_ns = victim_tasks
        .iter()
        .map(|t| t.exit_ns)
        .collect::<Option<Vec<u64>>>()
        .and_then(|v| v.into_iter().max())
        .map(|e| e.saturating_sub(first));
    let victim = VictimSummary {
        pid: rec.victim.pid,
        comm: cls
            .process_task(rec.victim.pid)
            .map_or(String::new(), |t| t.process_name().to_string()),
        children: rec.victim.children,
        threads: victim_tasks.len(),
        exited_after_ns,
    };
    let mut checks = attr.checks.clone();
    checks.push(sum_check(&attr.rows));
    BlameReport {
        schema: REPORT_SCHEMA.into(),
        victim,
        window_ns: rec.window_ns,
        windows: rec.windows.len(),
        span_ns: last.saturating_sub(first),
        options: OptionsSummary {
            disk_by: opts.disk_by,
            group_by: opts.group_by,
            known_comms: opts.known_comms.clone(),
        },
        sources: rec.sources,
        resources: resources(rec, opts, &attr.rows),
        culprits: culprits(&attr.rows, cls, &graph, &baseline),
        explanations,
        baseline,
        graph,
        checks,
        disk_split: super::disk_split::summarize(&attr.rows, cls),
        rows: attr.rows,
    }
}

fn resources(rec: &Recording, opts: &Options, rows: &[Row]) -> Vec<ResourceSummary> {
    Resource::ALL
        .into_iter()
        .map(|r| {
            let mut units: BTreeMap<String, UnitSummary> = BTreeMap::new();
            let mut slowdown = SlowdownSummary::default();
            for row in rows.iter().filter(|row| row.unit.resource == r) {
                let u = units
                    .entry(row.unit.unit.clone())
                    .or_insert_with(|| UnitSummary {
                        unit: row.unit.unit.clone(),
                        blocked_ns: 0,
                        by_kind: zero_kinds(),
                    });
                u.blocked_ns += row.blocked_ns;
                for s in &row.shares {
                    *u.by_kind.entry(s.kind).or_default() += s.blame_ns;
                }
                match (row.slowdown, row.slowdown_p1, row.slowdown_p2) {
                    (Some(s), Some(p1), Some(p2)) => {
                        slowdown.rows_defined += 1;
                        slowdown.sum += s;
                        slowdown.p1_sum += p1;
                        slowdown.p2_sum += p2;
                    }
                    _ => slowdown.rows_undefined += 1,
                }
            }
            let mut by_kind = zero_kinds();
            for u in units.values() {
                for (k, v) in &u.by_kind {
                    *by_kind.entry(*k).or_default() += v;
                }
            }
            ResourceSummary {
                resource: r,
                blocked_measured: attribute::blocked_measured(r, &rec.sources),
                consumption_measured: attribute::consumption_measured(r, &rec.sources),
                consumption_unit: attribute::consumption_unit(r, opts.disk_by).into(),
                blocked_ns: units.values().map(|u| u.blocked_ns).sum(),
                by_kind,
                slowdown,
                units: units.into_values().collect(),
            }
        })
        .collect()
}

fn zero_kinds() -> BTreeMap<CauseKind, f64> {
    CauseKind::ALL.into_iter().map(|k| (k, 0.0)).collect()
}

fn culprits(rows: &[Row], cls: &Classifier, graph: &Graph, base: &Baseline) -> Vec<CulpritSummary> {
    let mut by: BTreeMap<Option<u32>, (CauseKind, BTreeMap<Resource, f64>)> = BTreeMap::new();
    for row in rows {
        for s in &row.shares {
            let pid = s.task.and_then(|t| cls.task(t)).map(|t| t.pid);
            let e = by.entry(pid).or_insert_with(|| (s.kind, BTreeMap::new()));
            *e.1.entry(row.unit.resource).or_default() += s.blame_ns;
        }
    }
    // Concurrent processes only the baseline blames appear too: that is
    // where the two methods disagree most.
    for b in &base.entries {
        by.entry(Some(b.pid))
            .or_insert_with(|| (CauseKind::Concurrent, BTreeMap::new()));
    }
    let mut out: Vec<CulpritSummary> = by
        .into_iter()
        .map(|(pid, (kind, by_resource))| {
            let task = pid.and_then(|p| cls.process_task(p));
            let node_id = pid.map_or(graph::group_id(UNKNOWN), graph::process_id);
            let b = pid.and_then(|p| base.entries.iter().find(|e| e.pid == p));
            CulpritSummary {
                pid,
                process: task.map_or(UNKNOWN.into(), |t| t.process_name().into()),
                group: task.map_or(UNKNOWN.into(), |t| cls.group(t.id)),
                kind,
                // fold from +0.0: an empty f64 `sum()` is −0.0.
                blame_ns: by_resource.values().fold(0.0, |a, b| a + b),
                by_resource,
                dor: graph.node(&node_id).map_or(0.0, |n| n.dor),
                overlap_blame_ns: b.map_or(0.0, |e| e.blame_ns),
                overlap_share: b.map_or(0.0, |e| e.share),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.blame_ns
            .total_cmp(&a.blame_ns)
            .then(b.overlap_blame_ns.total_cmp(&a.overlap_blame_ns))
            .then(a.pid.cmp(&b.pid))
    });
    out
}

/// Eq. 10 distributes all of a Level-3 node's BC: the contributions of every
/// row must add up to its blocked time.
fn sum_check(rows: &[Row]) -> Check {
    let mut c = Check {
        name: "blame_sums_to_blocked_time".into(),
        basis: "Sec. 4.1, eq. 10: a unit's blocked time is fully distributed to its causes".into(),
        violations: 0,
        first: None,
    };
    for row in rows {
        let sum: f64 = row.shares.iter().map(|s| s.blame_ns).sum();
        let bt = row.blocked_ns as f64;
        if (sum - bt).abs() > 1e-9 * bt + 1e-3 {
            c.fail(|| {
                format!(
                    "window {}, {} {}: {sum} ns distributed of {bt} ns",
                    row.window,
                    row.unit.resource.name(),
                    row.unit.unit
                )
            });
        }
    }
    c
}
