//! Deviation facts of the Sec. 9 paragraph that need more than the
//! machine facts: the cold-cache procedure as done (Sec. 3.1), the steal
//! time measured, the Step 0 check snapshot's warnings (Sec. 8.1), and a
//! query measured as a process tree (Sec. 7.2).
use serde::{Deserialize, Serialize};

use super::model::QcInput;
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::sys::setup_check::Status;
use ttp_window::window::record::ProcessClass;

/// What of Sec. 3.1's cold-cache procedure (disk and controller caches
/// filled with 64 MB of unrelated data, then the page cache dropped) was
/// not done or not shown to work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "shortfall", rename_all = "snake_case")]
pub enum ColdCacheShortfall {
    /// The procedure is not recorded for `missing` of `qes` QEs.
    NotRecorded { missing: usize, qes: usize },
    /// The fill was skipped or cut short before `qes` QEs, for these
    /// reasons (each once, sorted).
    FillSkipped { qes: usize, reasons: Vec<String> },
    /// Whether the drop took effect could not be checked before `qes` QEs.
    DropUnchecked { qes: usize },
    /// A file read again after the drop did not reach the device before
    /// `qes` QEs.
    DropIneffective { qes: usize },
}

/// The shortfalls over every QE; empty when all of the procedure was done
/// and shown to work, so that "with a cold cache" is said only then.
pub(crate) fn cold_cache_shortfalls(qcs: &[QcInput]) -> Vec<ColdCacheShortfall> {
    let qes: Vec<_> = qcs.iter().flat_map(|q| &q.qes).collect();
    let steps: Vec<_> = qes.iter().filter_map(|q| q.cold_cache.as_ref()).collect();
    let mut out = Vec::new();
    if steps.len() < qes.len() {
        out.push(ColdCacheShortfall::NotRecorded {
            missing: qes.len() - steps.len(),
            qes: qes.len(),
        });
    }
    let mut reasons: Vec<String> = steps
        .iter()
        .filter_map(|s| s.fill_skipped.clone())
        .collect();
    if !reasons.is_empty() {
        let n = reasons.len();
        reasons.sort();
        reasons.dedup();
        out.push(ColdCacheShortfall::FillSkipped { qes: n, reasons });
    }
    let unverified = steps.iter().filter(|s| s.flushed().is_none()).count();
    if unverified > 0 {
        out.push(ColdCacheShortfall::DropUnchecked { qes: unverified });
    }
    let failed = steps.iter().filter(|s| s.flushed() == Some(false)).count();
    if failed > 0 {
        out.push(ColdCacheShortfall::DropIneffective { qes: failed });
    }
    out
}

/// (QEs with steal time, QEs with it measured, steal ticks summed), over
/// the QEs whose overall steal ticks were read (App. E (5), X5).
pub(crate) fn steal_measured(qcs: &[QcInput]) -> Option<(usize, usize, u64)> {
    let steal: Vec<u64> = qcs
        .iter()
        .flat_map(|q| &q.qes)
        .filter_map(|qe| qe.overall.steal_ticks)
        .collect();
    (!steal.is_empty()).then(|| {
        (
            steal.iter().filter(|&&t| t > 0).count(),
            steal.len(),
            steal.iter().sum(),
        )
    })
}

/// One item of the Step 0 check that warned or failed, with what it found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetupItem {
    pub title: String,
    pub failed: bool,
    pub detail: String,
}

/// Step 0 (Sec. 8.1) as `ttp-ebpf check` found it before the first QE:
/// each item that warned or failed (empty: nothing to warn of); `None`
/// when no check ran.
pub(crate) fn setup_check_items(m: &MachineFacts) -> Option<Vec<SetupItem>> {
    let report = m.setup_check.as_ref()?;
    Some(
        report
            .items
            .iter()
            .filter(|i| i.status != Status::Pass)
            .map(|i| SetupItem {
                title: i.title.clone(),
                failed: i.status == Status::Fail,
                detail: i.detail.clone(),
            })
            .collect(),
    )
}

/// A command's whole process tree measured as the query: its processes'
/// measures summed, where the paper times one DBMS query process (Sec.
/// 7.2). The most processes in one QE, when any QE measured a tree.
pub(crate) fn query_tree(qcs: &[QcInput]) -> Option<usize> {
    let qes: Vec<_> = qcs
        .iter()
        .flat_map(|q| &q.qes)
        .filter(|qe| qe.query_is_tree == Some(true))
        .collect();
    if qes.is_empty() {
        return None;
    }
    Some(
        qes.iter()
            .map(|qe| qe.of_class(ProcessClass::Query).count())
            .max()
            .unwrap_or(0),
    )
}
