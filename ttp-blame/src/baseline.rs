//! The overlap baseline iQCAR is compared against (Sec. 6.1, Deep-Overlap):
//! blame proportional to the cumulative time the culprit's tasks overlapped
//! the victim's tasks, whatever they did meanwhile. On one host the tasks
//! are threads; overlap is taken over the threads' lifetimes within the
//! analysed span, and the victim's whole blocked time is shared out among
//! the concurrent processes (the candidates ttp's p1 term has).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{cause::Classifier, input::Recording};
use ttp_window::window::blame_record::CauseKind;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverlapEntry {
    pub pid: u32,
    pub process: String,
    pub group: String,
    /// Σ over its threads and the victim's threads of their common lifetime.
    pub overlap_ns: u64,
    /// The victim's blocked time shared in proportion to `overlap_ns`.
    pub blame_ns: f64,
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub method: String,
    pub entries: Vec<OverlapEntry>,
}

/// Deep-Overlap over `rec`, sharing out `blocked_total_ns`.
pub(crate) fn deep_overlap(rec: &Recording, cls: &Classifier, blocked_total_ns: f64) -> Baseline {
    let (Some(first), Some(last)) = (rec.windows.first(), rec.windows.last()) else {
        return Baseline {
            method: "deep_overlap".into(),
            entries: Vec::new(),
        };
    };
    let span = (first.start_ns, last.end_ns);
    let life = |id: u32| -> Option<(u64, u64)> {
        let t = cls.task(id)?;
        let a = t.start_ns.unwrap_or(span.0).max(span.0);
        let b = t.exit_ns.unwrap_or(span.1).min(span.1);
        (b > a).then_some((a, b))
    };
    let victim: Vec<(u64, u64)> = cls.victim_ids().iter().filter_map(|&id| life(id)).collect();
    let mut per_pid: BTreeMap<u32, u64> = BTreeMap::new();
    for t in cls.tasks() {
        if cls.kind(t.id) != CauseKind::Concurrent {
            continue;
        }
        let Some((a, b)) = life(t.id) else { continue };
        let ov: u64 = victim
            .iter()
            .map(|&(va, vb)| vb.min(b).saturating_sub(va.max(a)))
            .sum();
        *per_pid.entry(t.pid).or_default() += ov;
    }
    let sum: u64 = per_pid.values().sum();
    let mut entries: Vec<OverlapEntry> = per_pid
        .into_iter()
        .filter(|(_, ov)| *ov > 0)
        .map(|(pid, overlap_ns)| {
            let share = overlap_ns as f64 / sum as f64;
            let task = cls.process_task(pid);
            OverlapEntry {
                pid,
                process: task.map_or(String::new(), |t| t.process_name().to_string()),
                group: task.map_or(String::new(), |t| cls.group(t.id)),
                overlap_ns,
                blame_ns: share * blocked_total_ns,
                share,
            }
        })
        .collect();
    entries.sort_by(|a, b| b.overlap_ns.cmp(&a.overlap_ns).then(a.pid.cmp(&b.pid)));
    Baseline {
        method: "deep_overlap".into(),
        entries,
    }
}
