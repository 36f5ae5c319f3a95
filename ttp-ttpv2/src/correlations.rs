//! The causal model (Sec. 5, Fig. 3): the 25 model measures, the 73
//! predicted correlations of Table IV, and their observed Pearson
//! correlations after the per-experiment (x − min)/(max − min) feature
//! scaling of Sec. 6.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::QcInput;
use super::stats::pearson;
use ttp_window::window::record::{ProcessClass, QeRecord};

/// A per-type measure of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    UTicks,
    STicks,
    ReadSysCalls,
    WriteSysCalls,
    BlockIoDelay,
    VolCs,
    InvolCs,
}

/// One of the 25 variables of Fig. 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    Of(ProcessClass, Kind),
    OverallUTicks,
    OverallSTicks,
    OverallIoWait,
    OverallSoftIrq,
}

use Kind::*;
use Measure::*;
use ProcessClass::{Daemon, Query, Utility};

impl Measure {
    pub fn name(self) -> String {
        match self {
            Of(c, k) => format!(
                "{} {}",
                c.name(),
                match k {
                    UTicks => "UTicks",
                    STicks => "STicks",
                    ReadSysCalls => "Read SysCalls",
                    WriteSysCalls => "Write SysCalls",
                    BlockIoDelay => "BlockIO Delay",
                    VolCs => "Vol. Con. Sw",
                    InvolCs => "Invol. Con. Sw",
                }
            ),
            OverallUTicks => "overall UTicks".into(),
            OverallSTicks => "overall STicks".into(),
            OverallIoWait => "overall IOWait Ticks".into(),
            OverallSoftIrq => "overall SoftIRQ Ticks".into(),
        }
    }

    /// The value in one QE; per-type measures are summed over the class.
    /// Overall user ticks include low-priority (nice) ticks, as App. E (5).
    pub(crate) fn value(self, qe: &QeRecord) -> Option<f64> {
        let v = match self {
            Of(c, k) => {
                let t = qe.class_totals(c);
                match k {
                    UTicks => t.u_ticks,
                    STicks => t.s_ticks,
                    ReadSysCalls => t.read_syscalls,
                    WriteSysCalls => t.write_syscalls,
                    BlockIoDelay => t.blkio_ticks,
                    VolCs => t.vol_cs,
                    InvolCs => t.invol_cs,
                }
            }
            OverallUTicks => qe.overall.user_all_ticks(),
            OverallSTicks => qe.overall.system_ticks,
            OverallIoWait => qe.overall.iowait_ticks,
            OverallSoftIrq => qe.overall.softirq_ticks,
        };
        v.map(|v| v as f64)
    }
}

/// The 25 measures of the model (Sec. 5.1): seven per type for query,
/// utility and daemon processes, four overall.
pub(crate) fn model_measures() -> Vec<Measure> {
    let kinds = [
        UTicks,
        STicks,
        ReadSysCalls,
        WriteSysCalls,
        BlockIoDelay,
        VolCs,
        InvolCs,
    ];
    let mut v: Vec<Measure> = [Query, Utility, Daemon]
        .iter()
        .flat_map(|&c| kinds.iter().map(move |&k| Of(c, k)))
        .collect();
    v.extend([OverallUTicks, OverallSTicks, OverallIoWait, OverallSoftIrq]);
    v
}

/// The levels of Sec. 5.3: high ≥ 0.7, medium 0.3–0.7, low < 0.3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Low,
    Med,
    High,
}

impl Level {
    pub fn of(r: f64) -> Level {
        if r >= 0.7 {
            Level::High
        } else if r >= 0.3 {
            Level::Med
        } else {
            Level::Low
        }
    }
}

/// One predicted correlation of Table IV.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Relationship {
    pub id: &'static str,
    pub x: Measure,
    pub y: Measure,
    pub predicted: Level,
}

const fn rel(id: &'static str, x: Measure, y: Measure, predicted: Level) -> Relationship {
    Relationship {
        id,
        x,
        y,
        predicted,
    }
}

const Q: ProcessClass = Query;
const UT: ProcessClass = Utility;
const D: ProcessClass = Daemon;
const H: Level = Level::High;
const M: Level = Level::Med;
const L: Level = Level::Low;

/// Table IV, all 73 relationships as printed.
pub(crate) const TABLE_IV: &[Relationship] = &[
    rel("Ia", Of(Q, UTicks), Of(Q, STicks), H),
    rel("Ib", Of(Q, UTicks), Of(Q, ReadSysCalls), H),
    rel("Ic", Of(Q, UTicks), Of(Q, WriteSysCalls), H),
    rel("Id", Of(Q, ReadSysCalls), Of(Q, BlockIoDelay), H),
    rel("Ie", Of(Q, ReadSysCalls), Of(Q, VolCs), H),
    rel("If", Of(Q, ReadSysCalls), Of(Q, STicks), H),
    rel("Ig", Of(Q, WriteSysCalls), Of(Q, VolCs), H),
    rel("IIa", Of(Q, WriteSysCalls), Of(Q, STicks), H),
    rel("IIb", Of(Q, WriteSysCalls), Of(Q, BlockIoDelay), H),
    rel("IIc", Of(Q, VolCs), Of(Q, STicks), H),
    rel("IId", Of(Q, InvolCs), Of(Q, UTicks), H),
    rel("IIIa", Of(UT, UTicks), Of(UT, STicks), M),
    rel("IIId", Of(UT, ReadSysCalls), Of(UT, BlockIoDelay), M),
    rel("IIIe", Of(UT, ReadSysCalls), Of(UT, VolCs), M),
    rel("IIIf", Of(UT, ReadSysCalls), Of(UT, STicks), M),
    rel("IIIg", Of(UT, WriteSysCalls), Of(UT, VolCs), M),
    rel("IVa", Of(UT, WriteSysCalls), Of(UT, STicks), M),
    rel("IVb", Of(UT, WriteSysCalls), Of(UT, BlockIoDelay), M),
    rel("IVc", Of(UT, VolCs), Of(UT, STicks), M),
    rel("IVd", Of(UT, InvolCs), Of(UT, UTicks), M),
    rel("IVe", Of(UT, VolCs), Of(UT, UTicks), M),
    rel("Va", Of(D, UTicks), Of(D, STicks), M),
    rel("Vd", Of(D, ReadSysCalls), Of(D, BlockIoDelay), M),
    rel("Ve", Of(D, ReadSysCalls), Of(D, VolCs), M),
    rel("Vf", Of(D, ReadSysCalls), Of(D, STicks), M),
    rel("Vg", Of(D, WriteSysCalls), Of(D, VolCs), M),
    rel("VIa", Of(D, WriteSysCalls), Of(D, STicks), M),
    rel("VIb", Of(D, WriteSysCalls), Of(D, BlockIoDelay), M),
    rel("VIc", Of(D, VolCs), Of(D, STicks), M),
    rel("VId", Of(D, InvolCs), Of(D, UTicks), M),
    rel("VIe", Of(D, VolCs), Of(D, UTicks), M),
    rel("VIIa", Of(Q, ReadSysCalls), OverallIoWait, M),
    rel("VIIb", Of(UT, ReadSysCalls), OverallIoWait, L),
    rel("VIIc", Of(D, ReadSysCalls), OverallIoWait, L),
    rel("VIId", Of(Q, WriteSysCalls), OverallSoftIrq, M),
    rel("VIIe", Of(UT, WriteSysCalls), OverallSoftIrq, L),
    rel("VIIf", Of(D, WriteSysCalls), OverallSoftIrq, L),
    rel("VIIIa", Of(Q, WriteSysCalls), OverallIoWait, M),
    rel("VIIIb", Of(UT, WriteSysCalls), OverallIoWait, L),
    rel("VIIIc", Of(D, WriteSysCalls), OverallIoWait, L),
    rel("VIIId", Of(Q, ReadSysCalls), OverallSTicks, M),
    rel("VIIIe", Of(UT, ReadSysCalls), OverallSTicks, L),
    rel("VIIIf", Of(D, ReadSysCalls), OverallSTicks, L),
    rel("IXa", Of(Q, ReadSysCalls), OverallSoftIrq, M),
    rel("IXb", Of(UT, ReadSysCalls), OverallSoftIrq, L),
    rel("IXc", Of(D, ReadSysCalls), OverallSoftIrq, L),
    rel("IXd", Of(Q, WriteSysCalls), OverallSTicks, M),
    rel("IXe", Of(UT, WriteSysCalls), OverallSTicks, L),
    rel("IXf", Of(D, WriteSysCalls), OverallSTicks, L),
    rel("Xa", Of(Q, UTicks), OverallSTicks, M),
    rel("Xb", Of(UT, UTicks), OverallSTicks, L),
    rel("Xc", Of(D, UTicks), OverallSTicks, L),
    rel("Xd", Of(Q, VolCs), OverallSTicks, M),
    rel("Xe", Of(UT, VolCs), OverallSTicks, L),
    rel("Xf", Of(D, VolCs), OverallSTicks, M),
    rel("XIa", Of(Q, InvolCs), OverallUTicks, M),
    rel("XIb", Of(UT, InvolCs), OverallUTicks, L),
    rel("XIc", Of(D, InvolCs), OverallUTicks, L),
    rel("XId", Of(Q, VolCs), OverallUTicks, M),
    rel("XIe", Of(UT, VolCs), OverallUTicks, L),
    rel("XIf", Of(D, VolCs), OverallUTicks, L),
    rel("XIIa", Of(Q, UTicks), OverallSoftIrq, M),
    rel("XIIb", Of(UT, UTicks), OverallSoftIrq, L),
    rel("XIIc", Of(D, UTicks), OverallSoftIrq, L),
    rel("XIId", Of(Q, VolCs), OverallSoftIrq, M),
    rel("XIIe", Of(Q, InvolCs), OverallSoftIrq, M),
    rel("XIIIa", OverallUTicks, OverallSTicks, M),
    rel("XIVa", Of(Q, UTicks), OverallUTicks, H),
    rel("XIVb", Of(UT, UTicks), OverallUTicks, L),
    rel("XIVc", Of(D, UTicks), OverallUTicks, L),
    rel("XIVd", Of(Q, STicks), OverallSTicks, H),
    rel("XIVe", Of(UT, STicks), OverallSTicks, L),
    rel("XIVf", Of(D, STicks), OverallSTicks, L),
];

/// One row of the correlation table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CorrelationRow {
    pub id: String,
    pub x: String,
    pub y: String,
    pub predicted: Level,
    /// QEs with both measures.
    pub n: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Level>,
    /// Two-sided p-value of r ≠ 0 (Student's t with n − 2 degrees of
    /// freedom); Sec. 6 reports every relationship significant at p < 0.05.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// `p_value < 0.05` (Sec. 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significant: Option<bool>,
    /// `match`, `close` (one level apart, the paper's yellow) or `far`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<String>,
    /// Why no coefficient (a measure absent or constant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_expressed: Option<String>,
}

/// The experiment a Q@C belongs to for the scaling: Q@Cs sharing their
/// labels apart from the cardinality (Sec. 6 scales per DBMS data set, so
/// that data sets with different ranges pool fairly).
fn experiment_of(qc: &QcInput) -> String {
    qc.labels
        .iter()
        .filter(|(k, _)| k.as_str() != super::model::CARDINALITY_LABEL)
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Sec. 6 feature scaling, (x − min)/(max − min) within one experiment;
/// a constant variable scales to 0.
fn scale(xs: &mut [f64]) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for x in xs.iter_mut() {
        *x = if max > min {
            (*x - min) / (max - min)
        } else {
            0.0
        };
    }
}

/// The significance level of Sec. 6 ("All the relationships were
/// significant (having p < 0.05)").
pub(crate) const SIGNIFICANCE: f64 = 0.05;

/// Two-sided p-value of the null hypothesis ρ = 0 for a Pearson r over `n`
/// pairs: t = r √((n − 2)/(1 − r²)) has Student's t distribution with n − 2
/// degrees of freedom under it. `None` below 3 pairs; |r| = 1 gives 0.
pub(crate) fn p_value(r: f64, n: usize) -> Option<f64> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    if n < 3 || !r.is_finite() {
        return None;
    }
    let df = (n - 2) as f64;
    let rest = 1.0 - r * r;
    if rest <= 0.0 {
        return Some(0.0);
    }
    let t = r.abs() * (df / rest).sqrt();
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * (1.0 - dist.cdf(t))).clamp(0.0, 1.0))
}

/// Observed correlations for Table IV over the given QEs, each paired with
/// the Q@C it came from (the retained QEs of the retained Q@Cs).
pub fn correlations(qes: &[(&QcInput, &QeRecord)]) -> Vec<CorrelationRow> {
    TABLE_IV
        .iter()
        .map(|rel| {
            let mut by_exp: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
            for (qc, qe) in qes {
                if let (Some(x), Some(y)) = (rel.x.value(qe), rel.y.value(qe)) {
                    let e = by_exp.entry(experiment_of(qc)).or_default();
                    e.0.push(x);
                    e.1.push(y);
                }
            }
            let (mut xs, mut ys) = (Vec::new(), Vec::new());
            for (_, (mut x, mut y)) in by_exp {
                scale(&mut x);
                scale(&mut y);
                xs.extend(x);
                ys.extend(y);
            }
            let r = (xs.len() >= 3).then(|| pearson(&xs, &ys)).flatten();
            let observed = r.map(Level::of);
            let p_value = r.and_then(|r| p_value(r, xs.len()));
            let not_expressed = match (xs.len(), r) {
                (n, _) if n < 3 => Some(format!("{n} QE(s) have both measures; needs 3")),
                (_, None) => Some("a measure does not vary".to_string()),
                _ => None,
            };
            CorrelationRow {
                id: rel.id.into(),
                x: rel.x.name(),
                y: rel.y.name(),
                predicted: rel.predicted,
                n: xs.len(),
                r,
                observed,
                p_value,
                significant: p_value.map(|p| p < SIGNIFICANCE),
                agreement: observed.map(|o| {
                    match (o as i32 - rel.predicted as i32).abs() {
                        0 => "match",
                        1 => "close",
                        _ => "far",
                    }
                    .to_string()
                }),
                not_expressed,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::clean_qc;

    /// Catches a transcription slip: Sec. 5.3 counts 31 same-type, 35
    /// per-type/overall, 1 overall/overall and 6 part-whole relationships,
    /// 73 in all, over 25 measures.
    #[test]
    fn table_iv_has_73_relationships() {
        assert_eq!(TABLE_IV.len(), 73);
        let same_type = TABLE_IV
            .iter()
            .filter(|r| matches!((r.x, r.y), (Of(a, _), Of(b, _)) if a == b))
            .count();
        assert_eq!(same_type, 31);
        assert_eq!(
            TABLE_IV.iter().filter(|r| r.id.starts_with("XIV")).count(),
            6
        );
        assert_eq!(model_measures().len(), 25);
        let mut ids: Vec<_> = TABLE_IV.iter().map(|r| r.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 73);
    }

    /// Catches a one-sided test, the wrong degrees of freedom, or t from r
    /// unscaled: r = 0.6 over 10 pairs gives t = 0.6 √(8 / 0.64) = 2.1213,
    /// two-sided p = 0.066688 (8 df); r = 0.7 over 10 gives
    /// t = 2.7724, p = 0.024206.
    #[test]
    fn p_values_of_pearson_r() {
        let p = p_value(0.6, 10).unwrap();
        assert!((p - 0.066688).abs() < 1e-5, "{p}");
        let p = p_value(-0.7, 10).unwrap();
        assert!((p - 0.024206).abs() < 1e-5, "{p}");
        assert_eq!(p_value(1.0, 5), Some(0.0));
        assert_eq!(p_value(0.5, 2), None);
    }

    #[test]
    fn levels() {
        assert_eq!(Level::of(0.7), Level::High);
        assert_eq!(Level::of(0.69), Level::Med);
        assert_eq!(Level::of(0.3), Level::Med);
        assert_eq!(Level::of(0.29), Level::Low);
    }

    /// Two experiments whose query U and S rise together, at very different
    /// scales and offsets: pooled raw, the correlation is weak; scaled per
    /// experiment (Sec. 6), it is 1. Catches pooling without scaling, or
    /// scaling across all data at once.
    #[test]
    fn per_experiment_scaling() {
        let mut a = clean_qc(4);
        a.labels.insert("dbms".into(), "a".into());
        let mut b = clean_qc(4);
        b.labels.insert("dbms".into(), "b".into());
        for (i, qe) in a.qes.iter_mut().enumerate() {
            qe.processes[0].m.u_ticks = Some(10 + i as u64);
            qe.processes[0].m.s_ticks = Some(1000 + 2 * i as u64);
        }
        for (i, qe) in b.qes.iter_mut().enumerate() {
            qe.processes[0].m.u_ticks = Some(1000 + 100 * i as u64);
            qe.processes[0].m.s_ticks = Some(5 + i as u64);
        }
        let pairs: Vec<(&QcInput, &QeRecord)> = a
            .qes
            .iter()
            .map(|q| (&a, q))
            .chain(b.qes.iter().map(|q| (&b, q)))
            .collect();
        let rows = correlations(&pairs);
        let ia = rows.iter().find(|r| r.id == "Ia").unwrap();
        assert!((ia.r.unwrap() - 1.0).abs() < 1e-12, "{ia:?}");
        assert_eq!(ia.n, 8);
        assert_eq!(ia.agreement.as_deref(), Some("match"));
        // Utility measures: clean data has no utility process, so constant.
        let iiia = rows.iter().find(|r| r.id == "IIIa").unwrap();
        assert!(iiia.r.is_none() && iiia.not_expressed.is_some());
    }
}
