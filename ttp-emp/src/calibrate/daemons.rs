//! Sec. 4.5.1 Steps 4–6: daemon process times in the central cluster, the
//! long-running daemon executions in the L-samples, and which of those
//! daemons recur periodically.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::pairs::{ClassifiedRun, RunClass};
use crate::{
    input::{EmpRun, daemon_key},
    stats::{mean, median, sample_sd},
};

/// Step 4: one daemon's process time over its executions in the central
/// cluster (cf. Table VIII).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CentralDaemon {
    pub executions: usize,
    pub runs: usize,
    pub max_pt_ns: u64,
    pub mean_pt_ns: f64,
    /// Sample standard deviation; 0 for a single execution (the paper's
    /// Table VIII lists 0 for such daemons).
    pub sd_pt_ns: f64,
}

impl CentralDaemon {
    /// Step 5's threshold: "over two standard deviations above the maximum".
    pub(crate) fn long_threshold_ns(&self, k: f64) -> f64 {
        self.max_pt_ns as f64 + k * self.sd_pt_ns
    }
}

/// Step 5: one daemon execution in an L-sample identified as long-running
/// (cf. Table X), or (Step 6) an execution of a daemon never seen in the
/// central cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LongExecution {
    pub run_index: u32,
    pub name: String,
    pub pid: u32,
    pub pt_ns: u64,
    /// Central max + 2σ; `None` when the daemon is absent from the central
    /// cluster (then every execution counts, Step 6).
    pub threshold_ns: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeriodKind {
    /// Three or more occurrences at consistent gaps.
    Regular,
    /// Exactly two occurrences: one gap, "perhaps" periodic (Table XI "?").
    Tentative,
}

/// Step 6's periodicity heuristic: "the daemon must occur regularly in a
/// sequence of samples" (rhn_check every ~112 runs of INC128 ≈ 4 hours).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Periodicity {
    pub kind: PeriodKind,
    /// Median gap between occurrences, in runs.
    pub period_runs: f64,
    /// The same in time: median gap of the runs' start offsets when the run
    /// loop recorded them, else period_runs × mean ET.
    pub period_ns: u64,
}

/// Step 6: an infrequent daemon with its long-running executions (cf.
/// Table XI).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InfrequentDaemon {
    pub name: String,
    /// Step 4's statistics if the daemon also ran in the central cluster.
    pub central: Option<CentralDaemon>,
    pub executions: usize,
    pub min_pt_ns: u64,
    pub mean_pt_ns: f64,
    pub max_pt_ns: u64,
    /// Runs in which its identified executions occurred.
    pub run_indices: Vec<u32>,
    pub periodicity: Option<Periodicity>,
}

/// Step 4 over the central runs.
pub(crate) fn central_daemons(
    runs: &BTreeMap<u32, &EmpRun>,
    classes: &[ClassifiedRun],
) -> BTreeMap<String, CentralDaemon> {
    let mut pts: BTreeMap<String, (Vec<u64>, std::collections::BTreeSet<u32>)> = BTreeMap::new();
    for c in classes.iter().filter(|c| c.class == RunClass::Central) {
        let Some(run) = runs.get(&c.index) else {
            continue;
        };
        for d in &run.daemons {
            let e = pts.entry(daemon_key(&d.name).to_string()).or_default();
            e.0.push(d.pt_ns);
            e.1.insert(c.index);
        }
    }
    pts.into_iter()
        .map(|(name, (v, rs))| {
            let f = v.iter().map(|&x| x as f64);
            let stats = CentralDaemon {
                executions: v.len(),
                runs: rs.len(),
                max_pt_ns: v.iter().copied().max().unwrap_or(0),
                mean_pt_ns: mean(f.clone()),
                sd_pt_ns: sample_sd(f).unwrap_or(0.0),
            };
            (name, stats)
        })
        .collect()
}

/// Step 5 (and Step 6's L-only daemons) over the L-samples.
pub(crate) fn long_executions(
    runs: &BTreeMap<u32, &EmpRun>,
    classes: &[ClassifiedRun],
    central: &BTreeMap<String, CentralDaemon>,
    k: f64,
) -> Vec<LongExecution> {
    let mut out = Vec::new();
    for c in classes.iter().filter(|c| c.class == RunClass::LSample) {
        let Some(run) = runs.get(&c.index) else {
            continue;
        };
        for d in &run.daemons {
            let key = daemon_key(&d.name);
            let threshold = central.get(key).map(|s| s.long_threshold_ns(k));
            // Strictly "over" the threshold; daemons absent from the central
            // cluster are gathered whatever their PT (Step 6).
            if threshold.is_none_or(|t| d.pt_ns as f64 > t) {
                out.push(LongExecution {
                    run_index: c.index,
                    name: key.to_string(),
                    pid: d.pid,
                    pt_ns: d.pt_ns,
                    threshold_ns: threshold,
                });
            }
        }
    }
    out
}

/// Step 6: groups the identified executions by daemon, with periodicity.
pub(crate) fn infrequent_daemons(
    long: &[LongExecution],
    central: &BTreeMap<String, CentralDaemon>,
    runs: &BTreeMap<u32, &EmpRun>,
    mean_et_ns: f64,
    tolerance: f64,
) -> BTreeMap<String, InfrequentDaemon> {
    let mut by_name: BTreeMap<&str, Vec<&LongExecution>> = BTreeMap::new();
    for e in long {
        by_name.entry(&e.name).or_default().push(e);
    }
    by_name
        .into_iter()
        .map(|(name, execs)| {
            let mut idx: Vec<u32> = execs.iter().map(|e| e.run_index).collect();
            idx.sort_unstable();
            idx.dedup();
            let pts: Vec<u64> = execs.iter().map(|e| e.pt_ns).collect();
            let starts: Option<Vec<u64>> = idx
                .iter()
                .map(|i| runs.get(i).and_then(|r| r.start_offset_ns))
                .collect();
            let d = InfrequentDaemon {
                name: name.to_string(),
                central: central.get(name).copied(),
                executions: execs.len(),
                min_pt_ns: pts.iter().copied().min().unwrap_or(0),
                mean_pt_ns: mean(pts.iter().map(|&p| p as f64)),
                max_pt_ns: pts.iter().copied().max().unwrap_or(0),
                periodicity: periodicity(&idx, starts.as_deref(), mean_et_ns, tolerance),
                run_indices: idx,
            };
            (name.to_string(), d)
        })
        .collect()
}

/// Periodicity of occurrences at sorted run indices: gaps within
/// max(1 run, tolerance × median gap) of the median gap.
pub fn periodicity(
    indices: &[u32],
    starts_ns: Option<&[u64]>,
    mean_et_ns: f64,
    tolerance: f64,
) -> Option<Periodicity> {
    if indices.len() < 2 {
        return None;
    }
    let gaps: Vec<f64> = indices.windows(2).map(|w| f64::from(w[1] - w[0])).collect();
    let period_runs = median(&gaps)?;
    let slack = (tolerance * period_runs).max(1.0);
    if gaps.iter().any(|g| (g - period_runs).abs() > slack) {
        return None;
    }
    let period_ns = match starts_ns {
        Some(s) if s.len() == indices.len() => {
            let tg: Vec<f64> = s
                .windows(2)
                .map(|w| w[1].saturating_sub(w[0]) as f64)
                .collect();
            median(&tg)?
        }
        _ => period_runs * mean_et_ns,
    };
    Some(Periodicity {
        kind: if indices.len() == 2 {
            PeriodKind::Tentative
        } else {
            PeriodKind::Regular
        },
        period_runs,
        period_ns: period_ns.round() as u64,
    })
}
