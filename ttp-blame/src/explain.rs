//! Ranked explanations (iQCAR Sec. 4.2, "Candidate Explanations"): one per
//! path culprit process → unit → resource → victim, scored by its path
//! weight P, the share of the victim's blocked time that flows along it.
use std::collections::BTreeMap;

use super::{
    attribute::Attribution,
    cause::{Classifier, UNKNOWN},
    units::fmt_ns,
};
use ttp_window::window::blame_record::{CauseKind, Resource};

use ttp_window::window::blame_record::Explanation;

/// All explanations, highest blame first.
pub(crate) fn explain(attr: &Attribution, cls: &Classifier) -> Vec<Explanation> {
    let mut per_resource: BTreeMap<Resource, f64> = BTreeMap::new();
    // (kind, pid, resource, unit) → (blame, Σ β̂)
    type Key = (CauseKind, Option<u32>, Resource, String);
    let mut paths: BTreeMap<Key, (f64, f64)> = BTreeMap::new();
    for row in &attr.rows {
        *per_resource.entry(row.unit.resource).or_default() += row.blocked_ns as f64;
        for s in &row.shares {
            let pid = s.task.and_then(|t| cls.task(t)).map(|t| t.pid);
            let key = (s.kind, pid, row.unit.resource, row.unit.unit.clone());
            let e = paths.entry(key).or_default();
            e.0 += s.blame_ns;
            e.1 += s.beta_hat.unwrap_or(0.0);
        }
    }
    let total: f64 = per_resource.values().sum();
    let mut out: Vec<Explanation> = paths
        .into_iter()
        .filter(|(_, (ns, _))| *ns > 0.0)
        .map(|((kind, pid, resource, unit), (blame_ns, beta_hat))| {
            let task = pid.and_then(|p| cls.process_task(p));
            let process = task.map_or(UNKNOWN.to_string(), |t| t.process_name().to_string());
            let group = task.map_or(UNKNOWN.to_string(), |t| cls.group(t.id));
            let share_of_resource = blame_ns / per_resource[&resource];
            Explanation {
                rank: 0,
                kind,
                pid,
                text: sentence(
                    kind,
                    pid,
                    &process,
                    resource,
                    &unit,
                    blame_ns,
                    share_of_resource,
                ),
                process,
                group,
                resource,
                unit,
                blame_ns,
                share_of_resource,
                path_weight: if total > 0.0 { blame_ns / total } else { 0.0 },
                beta_hat,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.blame_ns
            .total_cmp(&a.blame_ns)
            .then(a.pid.cmp(&b.pid))
            .then(a.unit.cmp(&b.unit))
    });
    for (i, e) in out.iter_mut().enumerate() {
        e.rank = i + 1;
    }
    out
}

fn sentence(
    kind: CauseKind,
    pid: Option<u32>,
    process: &str,
    resource: Resource,
    unit: &str,
    blame_ns: f64,
    share: f64,
) -> String {
    let who = match (kind, pid) {
        (CauseKind::Unknown, _) | (_, None) => match resource {
            Resource::Cpu => "unknown causes (steal, interrupts, untracked threads)".to_string(),
            Resource::Disk => "unknown causes (requests without a known owner)".to_string(),
            Resource::Memory => "unknown causes".to_string(),
        },
        (CauseKind::Own, Some(p)) => format!("the victim's own threads in {process} (pid {p})"),
        (CauseKind::Known, Some(p)) => format!("known process {process} (pid {p})"),
        (CauseKind::Concurrent, Some(p)) => format!("process {process} (pid {p})"),
    };
    let place = match resource {
        Resource::Cpu => format!("on {unit}"),
        Resource::Disk => format!("on device {unit}"),
        Resource::Memory => "on memory".to_string(),
    };
    format!(
        "{who} {place} caused {} ({:.1} %) of the victim's {} blocked time",
        fmt_ns(blame_ns),
        share * 100.0,
        resource.blocked_what()
    )
}
