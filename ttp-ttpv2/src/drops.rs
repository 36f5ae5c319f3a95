//! Step 2 (Sec. 8.3): drop the QEs flagged by the query-execution checks
//! of Table XI; Step 3 (Sec. 8.4): drop whole Q@Cs.
use serde::{Deserialize, Serialize};

use super::checks::Verdict;
use super::model::QcInput;

/// Minimum QEs a Q@C must keep (Step 3 (iv): "less than six valid query
/// executions" are dropped).
pub(crate) const MIN_RETAINED_QES: usize = 6;

/// Step 3 (iii): Time_meas of 2 ticks or less.
pub(crate) const MIN_TIME_MEAS_TICKS: f64 = 2.0;

/// Step 2: per QE, the ids of the Table XI checks it violated (empty: kept).
pub(crate) fn step2(
    qe_verdicts: &[(&'static str, Vec<Verdict>)],
    n_qes: usize,
) -> Vec<Vec<String>> {
    (0..n_qes)
        .map(|i| {
            qe_verdicts
                .iter()
                .filter(|(_, v)| v.get(i) == Some(&Verdict::Violation))
                .map(|(id, _)| id.to_string())
                .collect()
        })
        .collect()
}

/// A Step 3 rule that dropped a Q@C.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step3Drop {
    /// `S3.i` … `S3.iv`.
    pub rule: String,
    pub reason: String,
}

/// Step 3 for one Q@C: the rules that drop it, in the paper's order.
/// `qc_flags` are the ids of the Table XII rows 1–2 checks it violated,
/// `dropped_by` the Step 2 outcome per QE.
pub(crate) fn step3(qc: &QcInput, qc_flags: &[&str], dropped_by: &[Vec<String>]) -> Vec<Step3Drop> {
    let mut drops = Vec::new();
    let mut drop = |rule: &str, reason: String| {
        drops.push(Step3Drop {
            rule: rule.into(),
            reason,
        })
    };
    // (i) the Q@Cs identified in the first two rows of Table XII.
    if !qc_flags.is_empty() {
        drop(
            "S3.i",
            format!("Step 3 (i): flagged by {}", qc_flags.join(", ")),
        );
    }
    // (ii) the identified query process does not appear in every QE.
    let without: Vec<String> = qc
        .qes
        .iter()
        .filter(|q| !q.has_query_process())
        .map(|q| q.qe.to_string())
        .collect();
    if !without.is_empty() {
        drop(
            "S3.ii",
            format!("Step 3 (ii): no query process in QE {}", without.join(", ")),
        );
    }
    let retained: Vec<f64> = qc
        .qes
        .iter()
        .zip(dropped_by)
        .filter(|(_, d)| d.is_empty())
        .map(|(q, _)| q.time_meas_ms)
        .collect();
    // (iii) average Time_meas over the remaining QEs of 2 ticks or less.
    let tick_ms = qc.setup.tick_ms();
    if !retained.is_empty() {
        let avg = retained.iter().sum::<f64>() / retained.len() as f64;
        if avg <= MIN_TIME_MEAS_TICKS * tick_ms {
            drop(
                "S3.iii",
                format!(
                    "Step 3 (iii): average Time_meas {avg:.1} ms is 2 ticks ({:.0} ms) or less",
                    2.0 * tick_ms
                ),
            );
        }
    }
    // (iv) fewer than six valid QEs.
    if retained.len() < MIN_RETAINED_QES {
        drop(
            "S3.iv",
            format!(
                "Step 3 (iv): {} QE(s) retained, fewer than {MIN_RETAINED_QES}",
                retained.len()
            ),
        );
    }
    drops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::clean_qc;
    use ttp_window::window::record::ProcessClass;

    fn rules(d: &[Step3Drop]) -> Vec<&str> {
        d.iter().map(|d| d.rule.as_str()).collect()
    }

    fn kept(n: usize) -> Vec<Vec<String>> {
        vec![vec![]; n]
    }

    /// Catches a QE dropped for a pass or an n/a verdict.
    #[test]
    fn step2_drops_only_violations() {
        let v = vec![
            (
                "QE4",
                vec![Verdict::Pass, Verdict::Violation, Verdict::na("x")],
            ),
            (
                "QE9",
                vec![Verdict::Pass, Verdict::Violation, Verdict::Pass],
            ),
            (
                "QE13",
                vec![Verdict::Violation, Verdict::Pass, Verdict::Pass],
            ),
        ];
        assert_eq!(
            step2(&v, 3),
            vec![
                vec!["QE13".to_string()],
                vec!["QE4".into(), "QE9".into()],
                vec![]
            ]
        );
    }

    #[test]
    fn clean_qc_is_kept() {
        let qc = clean_qc(10);
        assert!(step3(&qc, &[], &kept(10)).is_empty());
    }

    #[test]
    fn rule_i_qc_flags() {
        let qc = clean_qc(10);
        assert_eq!(rules(&step3(&qc, &["QC2"], &kept(10))), vec!["S3.i"]);
    }

    /// Catches (ii) looking only at retained QEs: a QE without the query
    /// process drops the Q@C even though Step 2 already dropped that QE.
    #[test]
    fn rule_ii_query_process_missing() {
        let mut qc = clean_qc(10);
        qc.qes[4]
            .processes
            .retain(|p| p.class != ProcessClass::Query);
        let mut d = kept(10);
        d[4] = vec!["QE12".into()];
        let s = step3(&qc, &[], &d);
        assert_eq!(rules(&s), vec!["S3.ii"]);
        assert!(s[0].reason.contains("QE 5"));
    }

    /// Boundary: an average Time_meas of 20 ms (2 ticks) is dropped, 20.5 ms
    /// is kept; QEs dropped in Step 2 do not enter the average.
    #[test]
    fn rule_iii_short_time_meas() {
        let mut qc = clean_qc(8);
        for qe in &mut qc.qes {
            qe.time_meas_ms = 20.0;
        }
        assert_eq!(rules(&step3(&qc, &[], &kept(8))), vec!["S3.iii"]);
        qc.qes[0].time_meas_ms = 24.0;
        assert!(step3(&qc, &[], &kept(8)).is_empty());
        let mut d = kept(8);
        d[0] = vec!["QE9".into()];
        assert_eq!(rules(&step3(&qc, &[], &d)), vec!["S3.iii"]);
    }

    /// Boundary: 6 retained QEs are kept, 5 are dropped.
    #[test]
    fn rule_iv_fewer_than_six() {
        let qc = clean_qc(7);
        let mut d = kept(7);
        d[0] = vec!["QE9".into()];
        assert!(step3(&qc, &[], &d).is_empty());
        d[1] = vec!["QE4".into()];
        let s = step3(&qc, &[], &d);
        assert_eq!(rules(&s), vec!["S3.iv"]);
        assert!(s[0].reason.contains("5 QE(s)"));
    }
}
