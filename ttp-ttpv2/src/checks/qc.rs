//! Q@C sanity checks QC1–QC4 (Table XII, App. E), and the monotonicity
//! comparison shared with the post checks POST2/POST3 (Table XIV).
//!
//! The query computation time of a QE is its Time_calc (eq. 2); at Step 1
//! the checks see every QE that did not time out, before any drop.
use std::collections::{BTreeMap, BTreeSet};

use super::{CheckResult, Verdict, aggregate};
use crate::calc::QeCalc;
use crate::model::QcInput;
use crate::stats::{mean, median, sample_sd};

/// Time_calc of the QEs the Step 1 Q@C checks look at: all that did not
/// time out (App. E, QC (1)) and have a query process.
pub(crate) fn step1_times(qc: &QcInput, calcs: &[QeCalc]) -> Vec<(u32, f64)> {
    qc.qes
        .iter()
        .zip(calcs)
        .filter(|(qe, _)| qe.timed_out != Some(true))
        .filter_map(|(qe, c)| c.time_calc_ms.map(|t| (qe.qe, t)))
        .collect()
}

/// App. E QC (1) and POST1: sd of the computation time above 20% of its
/// average.
pub(crate) fn excessive_variation(times: &[f64]) -> Verdict {
    match (sample_sd(times), mean(times)) {
        (Some(sd), Some(m)) => Verdict::from_bool(sd > 0.2 * m),
        _ => Verdict::na("fewer than 2 QEs with a calculated time"),
    }
}

/// The Step 1 Q@C checks. Returns the results and, per Q@C, the ids of the
/// checks that flag it for Step 3 (i) (QC1, QC2).
pub(crate) fn qc_checks(
    qcs: &[QcInput],
    calcs: &[Vec<QeCalc>],
) -> (Vec<CheckResult>, Vec<Vec<&'static str>>) {
    let times: Vec<Vec<(u32, f64)>> = qcs
        .iter()
        .zip(calcs)
        .map(|(qc, c)| step1_times(qc, c))
        .collect();
    let only = |t: &Vec<(u32, f64)>| t.iter().map(|x| x.1).collect::<Vec<f64>>();

    let qc1: Vec<Verdict> = times
        .iter()
        .map(|t| excessive_variation(&only(t)))
        .collect();

    // App. E QC (2): the first QE longer than all the others by ten times
    // the average sd of the computation time. The sd is taken over the QEs
    // after the first (with the first included, a single Q@C's own outlier
    // inflates the sd so that it could never be 10 sds away) and averaged
    // over the Q@Cs analysed together. The margin is at least one tick, the
    // resolution of Time_calc.
    let rest_sds: Vec<f64> = times
        .iter()
        .filter_map(|t| {
            let mut t = t.clone();
            t.sort_by_key(|x| x.0);
            let rest: Vec<f64> = t.iter().skip(1).map(|x| x.1).collect();
            sample_sd(&rest)
        })
        .collect();
    let avg_sd = mean(&rest_sds);
    let qc2: Vec<Verdict> = times
        .iter()
        .zip(qcs)
        .map(|(t, qc)| {
            let mut t = t.clone();
            t.sort_by_key(|x| x.0);
            let (Some(first), Some(avg_sd), true) = (t.first(), avg_sd, t.len() >= 3) else {
                return Verdict::na("needs at least 3 QEs with a calculated time");
            };
            if first.0 != qc.qes.iter().map(|q| q.qe).min().unwrap_or(0) {
                return Verdict::na("the first QE has no calculated time");
            }
            let rest_max = t[1..].iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
            let margin = (10.0 * avg_sd).max(qc.setup.tick_ms());
            Verdict::from_bool(first.1 > rest_max + margin)
        })
        .collect();

    let names: Vec<String> = qcs.iter().map(QcInput::name).collect();
    let mut results = vec![
        aggregate("QC1", names.iter().cloned().zip(qc1.iter())),
        aggregate("QC2", names.iter().cloned().zip(qc2.iter())),
    ];
    let points: Vec<Option<(f64, f64)>> = times
        .iter()
        .map(|t| {
            let t = only(t);
            median(&t).map(|m| (m, sample_sd(&t).unwrap_or(0.0)))
        })
        .collect();
    let (strict, relaxed) = monotonicity(
        ("QC3", "QC4"),
        qcs,
        &points,
        "no query time at two or more cardinalities of one query (their QEs have no query time)",
    );
    results.push(strict);
    results.push(relaxed);

    let flags = qc1
        .iter()
        .zip(&qc2)
        .map(|(a, b)| {
            let mut f = Vec::new();
            if *a == Verdict::Violation {
                f.push("QC1");
            }
            if *b == Verdict::Violation {
                f.push("QC2");
            }
            f
        })
        .collect();
    (results, flags)
}

/// The Q@Cs of one query: same labels apart from the cardinality, and the
/// same single plan when plans were recorded.
fn query_group(qc: &QcInput) -> String {
    let mut key: Vec<String> = qc
        .labels
        .iter()
        .filter(|(k, _)| k.as_str() != qc.setup.cardinality_label())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let plans: BTreeSet<&str> = qc.qes.iter().filter_map(|q| q.plan.as_deref()).collect();
    if plans.len() == 1 {
        key.extend(plans.iter().map(|p| format!("plan={p}")));
    }
    key.join(",")
}

/// App. E QC (3)/(4) and POST2/POST3. `points[i]` is the query time and
/// its sd of Q@C `i` (`None`: Q@C left out). Within each query, Q@Cs are
/// ordered by cardinality and each adjacent pair with different
/// cardinalities is compared: *strict* — the lower cardinality took longer;
/// *relaxed* — still longer after subtracting half its sd and adding half
/// the higher one's sd. `left_out` is the reason given when the labels
/// hold two cardinalities of one query but the Q@Cs without a point leave
/// no pair to compare (e.g. "no Q@C retained"): the study had the
/// cardinalities, so "needs two cardinalities" would mislead.
pub(crate) fn monotonicity(
    ids: (&str, &str),
    qcs: &[QcInput],
    points: &[Option<(f64, f64)>],
    left_out: &str,
) -> (CheckResult, CheckResult) {
    let mut groups: BTreeMap<String, Vec<(f64, usize)>> = BTreeMap::new();
    let mut labelled: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    let mut bad_card = Vec::new();
    for (i, qc) in qcs.iter().enumerate() {
        let Some(card) = qc.labels.get(qc.setup.cardinality_label()) else {
            continue;
        };
        let parsed = card.trim().parse::<f64>().ok().filter(|c| c.is_finite());
        if let Some(c) = parsed {
            labelled
                .entry(query_group(qc))
                .or_default()
                .insert(c.to_bits());
        }
        if points[i].is_none() {
            continue;
        }
        match parsed {
            Some(c) => groups.entry(query_group(qc)).or_default().push((c, i)),
            _ => bad_card.push(format!(
                "{} (cardinality {card:?} is not a number)",
                qc.name()
            )),
        }
    }
    let (mut pairs, mut strict, mut relaxed) = (0u64, Vec::new(), Vec::new());
    // Table XII (3)/(4) are percentages of Q@Cs: the Q@Cs compared, and
    // those that took longer than the next higher cardinality (App. E QC
    // (3): "the query time of the Q@C at a lower cardinality is greater").
    let (mut compared, mut strict_qcs, mut relaxed_qcs) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for members in groups.values_mut() {
        members.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in members.windows(2) {
            let ((c_lo, lo), (c_hi, hi)) = (w[0], w[1]);
            if c_lo == c_hi {
                continue;
            }
            let ((t_lo, sd_lo), (t_hi, sd_hi)) = (
                points[lo].unwrap_or_default(),
                points[hi].unwrap_or_default(),
            );
            pairs += 1;
            compared.extend([lo, hi]);
            let name = format!("{} > {}", qcs[lo].name(), qcs[hi].name());
            if t_lo > t_hi {
                strict.push(name.clone());
                strict_qcs.insert(lo);
            }
            if t_lo - 0.5 * sd_lo > t_hi + 0.5 * sd_hi {
                relaxed.push(name);
                relaxed_qcs.insert(lo);
            }
        }
    }
    let note = (!bad_card.is_empty()).then(|| format!("left out: {}", bad_card.join(", ")));
    if pairs == 0 {
        let why = if labelled.values().any(|cards| cards.len() > 1) {
            left_out
        } else {
            "needs Q@Cs of the same query at two or more cardinalities (--label cardinality=N)"
        };
        return (
            CheckResult::na(ids.0, why).with_note(note.clone()),
            CheckResult::na(ids.1, why).with_note(note),
        );
    }
    let pairs_note = |violating: usize| {
        let p = format!("{violating} of {pairs} adjacent pair(s) of cardinalities");
        Some(match &note {
            Some(n) => format!("{p}; {n}"),
            None => p,
        })
    };
    let n = compared.len() as u64;
    (
        CheckResult::counted(ids.0, strict_qcs.len() as u64, n, strict.clone())
            .with_note(pairs_note(strict.len())),
        CheckResult::counted(ids.1, relaxed_qcs.len() as u64, n, relaxed.clone())
            .with_note(pairs_note(relaxed.len())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calc::calc_qe;
    use crate::testutil::clean_qc;

    fn run(qcs: &[QcInput]) -> (Vec<CheckResult>, Vec<Vec<&'static str>>) {
        let calcs: Vec<Vec<QeCalc>> = qcs
            .iter()
            .map(|qc| qc.qes.iter().map(|q| calc_qe(q, &qc.setup)).collect())
            .collect();
        qc_checks(qcs, &calcs)
    }

    fn set_query_u(qc: &mut QcInput, qe: usize, u: u64) {
        qc.qes[qe].processes[0].m.u_ticks = Some(u);
    }

    /// Clean Time_calc ≈ 1900 ms; a QE at 100 ticks pushes the sd above 20%
    /// of the mean. Catches a threshold on the wrong statistic.
    #[test]
    fn qc1_excessive_variation() {
        let qc = clean_qc(8);
        let (r, flags) = run(std::slice::from_ref(&qc));
        assert_eq!(r[0].violations, Some(0));
        assert!(flags[0].is_empty());
        let mut qc = clean_qc(8);
        set_query_u(&mut qc, 3, 1500);
        let (r, flags) = run(std::slice::from_ref(&qc));
        assert_eq!(r[0].violations, Some(1));
        assert_eq!(flags[0], vec!["QC1"]);
        // A timed-out QE is left out of QC1 (App. E QC (1)).
        qc.qes[3].timed_out = Some(true);
        assert_eq!(run(std::slice::from_ref(&qc)).0[0].violations, Some(0));
    }

    /// Clean QEs 2..8 have Time_calc 1900..1930 ms with sd 12.7 ms, so the
    /// first QE may reach 1930 + 127 ms: 2050 passes, 2100 fires. Catches
    /// comparing against the mean instead of the maximum of the rest, and
    /// an sd that includes the first QE itself.
    #[test]
    fn qc2_first_qe_cache_effect() {
        let mut qc = clean_qc(8);
        set_query_u(&mut qc, 0, 165);
        let (r, _) = run(std::slice::from_ref(&qc));
        assert_eq!(r[1].violations, Some(0));
        set_query_u(&mut qc, 0, 170);
        let (r, flags) = run(std::slice::from_ref(&qc));
        assert_eq!(r[1].violations, Some(1), "{:?}", r[1]);
        assert_eq!(flags[0], vec!["QC2"]);
    }

    fn at_card(card: &str, u_offset: u64) -> QcInput {
        let mut qc = clean_qc(8);
        qc.labels.insert("query".into(), "q1".into());
        qc.labels
            .insert(crate::model::CARDINALITY_LABEL.into(), card.into());
        for i in 0..8 {
            let u = qc.qes[i].processes[0].m.u_ticks.unwrap();
            set_query_u(&mut qc, i, u + u_offset);
        }
        qc
    }

    /// Cardinality 1000 slower than 2000 by 1 tick: a strict violation but
    /// within half an sd each side, so not a relaxed one; by 10 ticks both.
    /// Catches ordering by label text ("1000" vs "200") rather than value.
    #[test]
    fn qc3_qc4_monotonicity() {
        let qcs = vec![at_card("2000", 30), at_card("1000", 0), at_card("200", 0)];
        let (r, _) = run(&qcs);
        // Percent of Q@Cs (Table XII): 3 Q@Cs compared over 2 pairs.
        assert_eq!((r[2].violations, r[2].evaluated), (Some(0), Some(3)));
        let qcs = vec![at_card("2000", 0), at_card("1000", 1), at_card("200", 0)];
        let (r, _) = run(&qcs);
        assert_eq!(r[2].violations, Some(1));
        assert_eq!(r[3].violations, Some(0));
        let qcs = vec![at_card("2000", 0), at_card("1000", 10), at_card("200", 0)];
        let (r, _) = run(&qcs);
        assert_eq!((r[2].violations, r[3].violations), (Some(1), Some(1)));
        assert!(r[2].offenders[0].contains("cardinality=1000"));
    }

    /// Different queries are not compared; no cardinality labels is n/a.
    #[test]
    fn monotonicity_needs_same_query_and_cardinalities() {
        let (r, _) = run(&[clean_qc(8)]);
        assert!(r[2].is_na() && r[3].is_na());
        let mut other = at_card("2000", 0);
        other.labels.insert("query".into(), "q2".into());
        let (r, _) = run(&[at_card("1000", 10), other]);
        assert!(r[2].is_na());
    }
}
