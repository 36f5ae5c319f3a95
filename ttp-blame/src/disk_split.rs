//! ttp's extension of iQCAR for the disk (docs/blame.md, "The victim's own
//! disk time"): the victim's iowait split into the device serving its own
//! requests and waiting behind others', and the culprits blamed for the
//! second part only. Eq. 10 distributes the whole blocked time, the
//! victim's own service time included (only eq. 4's slowdown is an
//! excess); this view is reported beside the paper's figures, never
//! instead of them.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{attribute::Row, cause::Classifier};
use ttp_window::window::blame_record::{CauseKind, Resource};

/// The split over all windows, units and victim threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskSplit {
    /// The victim's iowait, ns (the disk resource's blocked time).
    pub blocked_ns: u64,
    /// The device serving the victim process's own requests meanwhile.
    pub own_service_ns: u64,
    /// The rest: waiting behind others' requests (or for nothing the ledger
    /// could name).
    pub behind_others_ns: u64,
    /// Part of `behind_others_ns` in windows where nobody else used the
    /// device: blamed on no one.
    pub unattributed_ns: f64,
    /// The culprits of `behind_others_ns`, most blamed first.
    pub culprits: Vec<DiskSplitCulprit>,
}

/// One process's share of the time the victim waited behind others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskSplitCulprit {
    /// `None`: the unknown cause (I/O no thread owns).
    pub pid: Option<u32>,
    pub process: String,
    pub kind: CauseKind,
    pub behind_blame_ns: f64,
}

/// The split of the disk rows, or `None` when it was not measured (no
/// disk row carries it).
pub(crate) fn summarize(rows: &[Row], cls: &Classifier) -> Option<DiskSplit> {
    let disk: Vec<&Row> = rows
        .iter()
        .filter(|r| r.unit.resource == Resource::Disk && r.own_service_ns.is_some())
        .collect();
    if disk.is_empty() {
        return None;
    }
    let mut split = DiskSplit {
        blocked_ns: 0,
        own_service_ns: 0,
        behind_others_ns: 0,
        unattributed_ns: 0.0,
        culprits: Vec::new(),
    };
    let mut by: BTreeMap<Option<u32>, (CauseKind, f64)> = BTreeMap::new();
    for r in disk {
        split.blocked_ns += r.blocked_ns;
        split.own_service_ns += r.own_service_ns.unwrap_or(0);
        let behind = r.behind_others_ns.unwrap_or(0);
        split.behind_others_ns += behind;
        let mut given = 0.0;
        for s in &r.shares {
            let b = s.behind_blame_ns.unwrap_or(0.0);
            if b > 0.0 {
                let pid = s.task.and_then(|t| cls.task(t)).map(|t| t.pid);
                by.entry(pid).or_insert((s.kind, 0.0)).1 += b;
                given += b;
            }
        }
        split.unattributed_ns += (behind as f64 - given).max(0.0);
    }
    split.culprits = by
        .into_iter()
        .map(|(pid, (kind, ns))| DiskSplitCulprit {
            pid,
            process: pid
                .and_then(|p| cls.process_task(p))
                .map_or(super::cause::UNKNOWN.into(), |t| t.process_name().into()),
            kind,
            behind_blame_ns: ns,
        })
        .collect();
    split
        .culprits
        .sort_by(|a, b| b.behind_blame_ns.total_cmp(&a.behind_blame_ns));
    Some(split)
}
