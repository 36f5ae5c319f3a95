//! Sec. 4.5.1 Steps 2–3: consecutive runs paired into dual executions, and
//! the central cluster separated from the L-samples.
//!
//! The paper separates the two by zooming into the scatter plot until the
//! remaining cluster is symmetric (Step 3, "admittedly a heuristic"). ttp
//! automates the zoom with a fence on ET that outliers cannot move: Tukey's
//! far-out fence Q3 + k·IQR (k = 3 by default) over the ET of all usable
//! runs. A run above the fence is an L-sample (it lies on an arm of the L);
//! a run below Q1 − k·IQR is set aside as `low` (no daemon can make a run
//! faster); every other run belongs to the central cluster. The partner of
//! an L-sample stays in the central cluster, as in the paper (400 − 384 =
//! 16 pairs off the cluster, and "784 remaining" central runs of 800).
use serde::{Deserialize, Serialize};

use crate::{
    input::EmpRun,
    stats::{mean, quantile_sorted, sample_sd},
};

/// Where one run lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunClass {
    Central,
    LSample,
    Low,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassifiedRun {
    pub index: u32,
    pub et_ns: u64,
    pub class: RunClass,
}

/// Where one dual execution lies in the scatter plot (x = first run's ET,
/// y = second run's ET).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairKind {
    /// Both runs in the central cluster.
    Central,
    /// Only the first run is an L-sample: the arm along the x axis.
    FirstHigh,
    /// Only the second run is an L-sample: the arm along the y axis.
    SecondHigh,
    /// Both runs are L-samples: the top-right corner, where an infrequent
    /// daemon does not go (Sec. 4.5.2, set (d)).
    BothHigh,
    /// At least one run below the low fence, none above.
    Low,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DualExecution {
    pub first_index: u32,
    pub second_index: u32,
    pub first_et_ns: u64,
    pub second_et_ns: u64,
    pub kind: PairKind,
}

/// The fence that separates the central cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EtFence {
    pub q1_ns: f64,
    pub q3_ns: f64,
    pub k: f64,
    pub lower_ns: f64,
    pub upper_ns: f64,
}

/// Step 2's check: does the scatter plot show an L?
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LShape {
    pub pairs: usize,
    pub central: usize,
    pub first_high: usize,
    pub second_high: usize,
    pub both_high: usize,
    pub low: usize,
    /// Corner pairs expected if L-samples struck runs independently:
    /// pairs × p², p = share of L-samples among paired runs.
    pub expected_both_high: f64,
    /// Arms present and the corner empty: the evidence for infrequent,
    /// long-running daemons (Sec. 4.5.2).
    pub is_l_shape: bool,
}

/// Step 3's check: is the central cluster roughly circular?
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Symmetry {
    pub pairs: usize,
    pub sd_first_ns: f64,
    pub sd_second_ns: f64,
    /// Pearson correlation of first and second ET in the central pairs.
    pub correlation: f64,
    /// sd ratio within [0.5, 2] and |r| < 0.5.
    pub is_symmetric: bool,
}

/// Classifies runs by the fence (Step 3).
pub fn classify(runs: &[&EmpRun], k: f64) -> (EtFence, Vec<ClassifiedRun>) {
    let mut ets: Vec<f64> = runs.iter().map(|r| r.et_ns as f64).collect();
    ets.sort_by(f64::total_cmp);
    let q1 = quantile_sorted(&ets, 0.25).unwrap_or(0.0);
    let q3 = quantile_sorted(&ets, 0.75).unwrap_or(0.0);
    let iqr = q3 - q1;
    let fence = EtFence {
        q1_ns: q1,
        q3_ns: q3,
        k,
        lower_ns: q1 - k * iqr,
        upper_ns: q3 + k * iqr,
    };
    let classes = runs
        .iter()
        .map(|r| {
            let et = r.et_ns as f64;
            let class = if et > fence.upper_ns {
                RunClass::LSample
            } else if et < fence.lower_ns {
                RunClass::Low
            } else {
                RunClass::Central
            };
            ClassifiedRun {
                index: r.index,
                et_ns: r.et_ns,
                class,
            }
        })
        .collect();
    (fence, classes)
}

/// Step 2: pairs runs (i, i+1) for i = first, first+2, … where `first` is
/// the index of the measurement's first run (usable or not); a pair whose
/// two runs are not both usable is left out. `classes` is sorted by index.
pub(crate) fn pair(classes: &[ClassifiedRun], first: u32) -> Vec<DualExecution> {
    let by_index: std::collections::BTreeMap<u32, &ClassifiedRun> =
        classes.iter().map(|c| (c.index, c)).collect();
    let Some(last) = classes.last().map(|c| c.index) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut i = first;
    while i < last {
        if let (Some(a), Some(b)) = (by_index.get(&i), by_index.get(&(i + 1))) {
            let kind = match (a.class, b.class) {
                (RunClass::LSample, RunClass::LSample) => PairKind::BothHigh,
                (RunClass::LSample, _) => PairKind::FirstHigh,
                (_, RunClass::LSample) => PairKind::SecondHigh,
                (RunClass::Low, _) | (_, RunClass::Low) => PairKind::Low,
                _ => PairKind::Central,
            };
            out.push(DualExecution {
                first_index: a.index,
                second_index: b.index,
                first_et_ns: a.et_ns,
                second_et_ns: b.et_ns,
                kind,
            });
        }
        i += 2;
    }
    out
}

pub(crate) fn l_shape(pairs: &[DualExecution]) -> LShape {
    let count = |k: PairKind| pairs.iter().filter(|p| p.kind == k).count();
    let (first_high, second_high, both_high) = (
        count(PairKind::FirstHigh),
        count(PairKind::SecondHigh),
        count(PairKind::BothHigh),
    );
    let n = pairs.len();
    let high_runs = first_high + second_high + 2 * both_high;
    let p = if n == 0 {
        0.0
    } else {
        high_runs as f64 / (2 * n) as f64
    };
    LShape {
        pairs: n,
        central: count(PairKind::Central),
        first_high,
        second_high,
        both_high,
        low: count(PairKind::Low),
        expected_both_high: n as f64 * p * p,
        is_l_shape: first_high + second_high > 0 && both_high == 0,
    }
}

pub(crate) fn symmetry(pairs: &[DualExecution]) -> Option<Symmetry> {
    let central: Vec<(f64, f64)> = pairs
        .iter()
        .filter(|p| p.kind == PairKind::Central)
        .map(|p| (p.first_et_ns as f64, p.second_et_ns as f64))
        .collect();
    let sx = sample_sd(central.iter().map(|p| p.0))?;
    let sy = sample_sd(central.iter().map(|p| p.1))?;
    let (mx, my) = (
        mean(central.iter().map(|p| p.0)),
        mean(central.iter().map(|p| p.1)),
    );
    let cov = central
        .iter()
        .map(|(x, y)| (x - mx) * (y - my))
        .sum::<f64>()
        / (central.len() as f64 - 1.0);
    let r = if sx > 0.0 && sy > 0.0 {
        cov / (sx * sy)
    } else {
        0.0
    };
    let ratio = if sy > 0.0 {
        sx / sy
    } else if sx > 0.0 {
        f64::INFINITY
    } else {
        1.0
    };
    Some(Symmetry {
        pairs: central.len(),
        sd_first_ns: sx,
        sd_second_ns: sy,
        correlation: r,
        is_symmetric: (0.5..=2.0).contains(&ratio) && r.abs() < 0.5,
    })
}
