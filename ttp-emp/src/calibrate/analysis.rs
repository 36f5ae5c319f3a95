//! Steps 2–6 of the calibration on one run set: the runs classified and
//! paired, the central, long and infrequent daemons.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    daemons::{self, CentralDaemon, InfrequentDaemon, LongExecution},
    pairs::{self, ClassifiedRun, DualExecution, EtFence, LShape, Symmetry},
};
use crate::{
    error::EmpError,
    input::EmpRun,
    stats::{mean, median},
};

/// Fewest usable runs a calibration accepts (two pairs, and a quartile
/// fence that means something). The paper uses 800 (Step 1).
pub const MIN_RUNS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CalibrationConfig {
    /// Tukey fence width in IQRs that separates the central cluster (Step 3).
    pub fence_k: f64,
    /// Step 5: "over two standard deviations above the maximum".
    pub sigma_k: f64,
    /// Step 6: allowed deviation of a gap from the median gap, as a share.
    pub period_tolerance: f64,
}

impl Default for CalibrationConfig {
    fn default() -> Self {
        Self {
            fence_k: 3.0,
            sigma_k: 2.0,
            period_tolerance: 0.10,
        }
    }
}

/// Steps 2–6 on one calibration run set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationAnalysis {
    pub config: CalibrationConfig,
    /// The command that was run (for the record).
    #[serde(default)]
    pub command: Vec<String>,
    pub usable_runs: usize,
    pub skipped_runs: usize,
    pub median_et_ns: u64,
    pub mean_et_ns: u64,
    pub fence: EtFence,
    pub runs: Vec<ClassifiedRun>,
    /// Step 2: one entry per dual execution.
    pub pairs: Vec<DualExecution>,
    pub l_shape: LShape,
    /// Step 3.
    pub symmetry: Option<Symmetry>,
    /// Step 4 (cf. Table VIII).
    pub central_daemons: BTreeMap<String, CentralDaemon>,
    /// Step 5 (cf. Table X), with Step 6's L-only daemons.
    pub long_executions: Vec<LongExecution>,
    /// Step 6 (cf. Table XI).
    pub infrequent: BTreeMap<String, InfrequentDaemon>,
}

/// Steps 2–6. Flagged runs (warm-up, failed, lost records) are left out;
/// pairs are formed from consecutive indices only.
pub fn analyze(
    command: &[String],
    runs: &[EmpRun],
    cfg: &CalibrationConfig,
) -> Result<CalibrationAnalysis, EmpError> {
    let mut usable: Vec<&EmpRun> = runs
        .iter()
        .filter(|r| !r.flags.warm_up && r.flags.failed.is_none() && r.flags.lost_records == 0)
        .collect();
    usable.sort_by_key(|r| r.index);
    if usable.len() < MIN_RUNS {
        return Err(EmpError::TooFewRuns {
            needed: MIN_RUNS,
            got: usable.len(),
        });
    }
    let by_index: BTreeMap<u32, &EmpRun> = usable.iter().map(|r| (r.index, *r)).collect();
    let ets: Vec<f64> = usable.iter().map(|r| r.et_ns as f64).collect();
    let mean_et = mean(ets.iter().copied());

    let (fence, classes) = pairs::classify(&usable, cfg.fence_k);
    let first_index = runs.iter().map(|r| r.index).min().unwrap_or(0);
    let dual = pairs::pair(&classes, first_index);
    let central = daemons::central_daemons(&by_index, &classes);
    let long = daemons::long_executions(&by_index, &classes, &central, cfg.sigma_k);
    let infrequent =
        daemons::infrequent_daemons(&long, &central, &by_index, mean_et, cfg.period_tolerance);
    Ok(CalibrationAnalysis {
        config: *cfg,
        command: command.to_vec(),
        usable_runs: usable.len(),
        skipped_runs: runs.len() - usable.len(),
        median_et_ns: median(&ets).unwrap_or(0.0).round() as u64,
        mean_et_ns: mean_et.round() as u64,
        fence,
        l_shape: pairs::l_shape(&dual),
        symmetry: pairs::symmetry(&dual),
        runs: classes,
        pairs: dual,
        central_daemons: central,
        long_executions: long,
        infrequent,
    })
}
