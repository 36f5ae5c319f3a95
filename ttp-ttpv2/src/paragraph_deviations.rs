//! Deviation statements of the Sec. 9 paragraph that need more than the
//! machine facts: the cold-cache procedure as done (Sec. 3.1), the steal
//! time measured, the Step 0 check snapshot's warnings (Sec. 8.1), and a
//! query measured as a process tree (Sec. 7.2).
use super::model::QcInput;
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::sys::setup_check::Status;
use ttp_window::window::record::ProcessClass;

/// What of Sec. 3.1's cold-cache procedure (disk and controller caches
/// filled with 64 MB of unrelated data, then the page cache dropped) was
/// not done or not shown to work, over every QE; empty when all of it
/// was, so that "with a cold cache" is said only then.
pub(crate) fn cold_cache_shortfalls(qcs: &[QcInput]) -> Vec<String> {
    let qes: Vec<_> = qcs.iter().flat_map(|q| &q.qes).collect();
    let steps: Vec<_> = qes.iter().filter_map(|q| q.cold_cache.as_ref()).collect();
    let mut out = Vec::new();
    if steps.len() < qes.len() {
        out.push(format!(
            "the cold-cache procedure is not recorded for {} of {} QEs (the page cache was dropped; whether the disk caches were filled is not known)",
            qes.len() - steps.len(),
            qes.len()
        ));
    }
    let mut reasons: Vec<&str> = steps
        .iter()
        .filter_map(|s| s.fill_skipped.as_deref())
        .collect();
    if !reasons.is_empty() {
        let n = reasons.len();
        reasons.sort();
        reasons.dedup();
        out.push(format!(
            "the disk and controller cache fill (Sec. 3.1: 64 MB of unrelated data) was skipped or cut short before {n} QE(s): {}",
            reasons.join("; ")
        ));
    }
    let unverified = steps.iter().filter(|s| s.flushed().is_none()).count();
    if unverified > 0 {
        out.push(format!(
            "whether the page cache drop took effect could not be checked before {unverified} QE(s)"
        ));
    }
    let failed = steps.iter().filter(|s| s.flushed() == Some(false)).count();
    if failed > 0 {
        out.push(format!(
            "a file read again after the page cache drop did not reach the device before {failed} QE(s), so the drop did not take full effect"
        ));
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

/// Longest detail quoted from one check item.
const DETAIL_CHARS: usize = 90;

/// Step 0 (Sec. 8.1) as `ttp-ebpf check` found it before the first QE: each
/// item that warned or failed, with what was found.
pub(crate) fn setup_check_warnings(m: &MachineFacts) -> Option<String> {
    let report = m.setup_check.as_ref()?;
    let items: Vec<String> = report
        .items
        .iter()
        .filter(|i| i.status != Status::Pass)
        .map(|i| {
            let mut detail: String = i.detail.chars().take(DETAIL_CHARS).collect();
            if i.detail.chars().count() > DETAIL_CHARS {
                detail.push('…');
            }
            let what = if i.status == Status::Fail {
                "failed"
            } else {
                "warned"
            };
            format!("{} {what} ({detail})", i.title)
        })
        .collect();
    Some(if items.is_empty() {
        "the Step 0 check (ttp-ebpf check, before the first QE) found nothing to warn of".into()
    } else {
        format!(
            "the Step 0 check (ttp-ebpf check, before the first QE; the snapshot is in the JSON) reported: {}",
            items.join("; ")
        )
    })
}

/// A command's whole process tree measured as the query: its processes'
/// measures summed, where the paper times one DBMS query process (Sec. 7.2).
pub(crate) fn query_tree(qcs: &[QcInput]) -> Option<String> {
    let qes: Vec<_> = qcs
        .iter()
        .flat_map(|q| &q.qes)
        .filter(|qe| qe.query_is_tree == Some(true))
        .collect();
    if qes.is_empty() {
        return None;
    }
    let most = qes
        .iter()
        .map(|qe| qe.of_class(ProcessClass::Query).count())
        .max()
        .unwrap_or(0);
    Some(format!(
        "the query is the measured command's whole process tree, its processes' measures summed (at most {most} process{} in one QE), where the paper times one DBMS query process (Sec. 7.2)",
        if most == 1 { "" } else { "es" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paragraph::deviations;
    use crate::testutil::{clean_qc, query_proc};
    use ttp_sys::sys::setup_check::{CheckItem, CheckReport};

    fn item(id: &str, status: Status, detail: &str) -> CheckItem {
        CheckItem {
            id: id.into(),
            title: id.to_uppercase(),
            source: "TTPv2 Sec. 8.1".into(),
            status,
            detail: detail.into(),
            remedy: None,
            fix: None,
        }
    }

    /// A run on a VM whose command forked: the deviations name the steal
    /// time measured, every item of the check snapshot that did not pass
    /// (and none that did), and the process tree as the query. Catches a
    /// statement left out, a passing item listed, or the tree claimed for a
    /// run that measured one chosen process.
    #[test]
    fn steal_check_warnings_and_process_tree_are_stated() {
        let mut qc = clean_qc(6);
        for qe in &mut qc.qes {
            qe.query_is_tree = Some(true);
        }
        qc.qes[2].overall.steal_ticks = Some(3);
        qc.qes[4].processes.push(query_proc(77, 1, 0, 0));
        let m = MachineFacts {
            virtualization: Some("virtual machine (kvm)".into()),
            setup_check: Some(CheckReport {
                schema: "ttp.check/1".into(),
                root: "/".into(),
                sample_ms: 1000,
                items: vec![
                    item("turbo", Status::Warn, "turbo state not exposed"),
                    item("kernel", Status::Pass, "Linux 6.18"),
                    item("btf", Status::Fail, &"x".repeat(200)),
                ],
                fixes: vec![],
                leftovers: vec![],
            }),
            ..MachineFacts::default()
        };
        let d = deviations(Some(&m), std::slice::from_ref(&qc)).join("\n");
        for needle in [
            "steal time was measured during 1 of 6 QEs (3 ticks in all; X5 counts them)",
            "TURBO warned (turbo state not exposed)",
            "BTF failed (xxxxxxxxxx",
            "…)",
            "the query is the measured command's whole process tree, its processes' measures summed (at most 2 processes in one QE)",
        ] {
            assert!(d.contains(needle), "missing {needle:?} in:\n{d}");
        }
        assert!(!d.contains("KERNEL"), "{d}");
        for qe in &mut qc.qes {
            qe.query_is_tree = Some(false);
            qe.overall.steal_ticks = Some(0);
        }
        let d = deviations(Some(&m), std::slice::from_ref(&qc)).join("\n");
        assert!(!d.contains("process tree"), "{d}");
        assert!(
            d.contains("no steal time was measured during the 6 QEs"),
            "{d}"
        );
    }
}
