//! The daemon cut-off profile: what calibration (Sec. 4.5.1) produces and
//! what a later `run --protocol emp --cutoffs PROFILE` applies (EMPv5's
//! first sanity check). A JSON file, documented in docs/emp.md; users may
//! edit it (e.g. remove a daemon they judge harmless).
use std::{collections::BTreeMap, path::Path};

use serde::{Deserialize, Serialize};

use super::{calibrate::analysis::CalibrationAnalysis, error::EmpError};

pub(crate) const PROFILE_SCHEMA: &str = "ttp.emp-profile/1";

/// When a cut-off applies, by the length of the program under test.
///
/// Sec. 4.5.1 Step 8 / Table XVI: a periodic daemon's "task time" is 5 % of
/// its period; programs shorter than that use the cut-off from the short
/// calibration, programs at least that long use the larger of the short and
/// long calibrations' cut-offs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "when", rename_all = "snake_case")]
pub enum Applies {
    Always,
    ShorterThan { task_time_ns: u64 },
    AtLeast { task_time_ns: u64 },
}

impl Applies {
    pub(crate) fn matches(&self, program_ns: u64) -> bool {
        match *self {
            Applies::Always => true,
            Applies::ShorterThan { task_time_ns } => program_ns < task_time_ns,
            Applies::AtLeast { task_time_ns } => program_ns >= task_time_ns,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutoffCase {
    #[serde(flatten)]
    pub applies: Applies,
    /// A run is dropped when one execution of this daemon used more process
    /// time than this, in ns.
    pub cutoff_ns: u64,
}

/// How one calibration contributed to a daemon's cut-off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum CutoffBasis {
    /// Step 8 (1)–(2): midpoint between the daemon's maximum PT in the
    /// central cluster (0 if absent) and the minimum PT of its long-running
    /// executions in the L-samples, rounded half up to whole ms and at
    /// least 1 ms (Table XVI).
    Midpoint {
        central_max_ns: Option<u64>,
        l_min_ns: u64,
        cutoff_ns: u64,
    },
    /// Step 8 (4): identified as infrequent in another calibration but
    /// present only in this one's central cluster: its maximum there plus
    /// two standard deviations, rounded half up to whole ms and at least
    /// 1 ms (Table XVI).
    CentralPlusTwoSd {
        central_max_ns: u64,
        central_sd_ns: f64,
        cutoff_ns: u64,
    },
}

impl CutoffBasis {
    pub(crate) fn cutoff_ns(&self) -> u64 {
        match *self {
            CutoffBasis::Midpoint { cutoff_ns, .. }
            | CutoffBasis::CentralPlusTwoSd { cutoff_ns, .. } => cutoff_ns,
        }
    }
}

/// One infrequent, long-running daemon and its cut-off(s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonCutoff {
    pub name: String,
    /// Period of the daemon's long executions, if they recur regularly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<u64>,
    /// 5 % of the period (Step 8 (3)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_time_ns: Option<u64>,
    pub cases: Vec<CutoffCase>,
    /// Basis from the short calibration (the paper's INC128 run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_basis: Option<CutoffBasis>,
    /// Basis from the long calibration (the paper's INC16384 run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_basis: Option<CutoffBasis>,
}

impl DaemonCutoff {
    /// The cut-off for a program of the given length, if one applies.
    pub fn cutoff_for(&self, program_ns: u64) -> Option<u64> {
        self.cases
            .iter()
            .find(|c| c.applies.matches(program_ns))
            .map(|c| c.cutoff_ns)
    }
}

/// The profile file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub schema: String,
    /// ttp version that wrote it.
    pub created_by: String,
    pub daemons: Vec<DaemonCutoff>,
    /// Resolution the cut-offs were rounded to (half up), which is also the
    /// smallest cut-off (Step 8 at the paper's 1 ms PT resolution, see
    /// `calibrate::cutoffs`); absent in profiles written before ttp rounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutoff_resolution_ns: Option<u64>,
    /// The calibration analyses it was computed from (short first, then the
    /// optional long one), kept so that profiles can be merged and audited.
    pub calibrations: Vec<CalibrationAnalysis>,
    /// What the calibration ran against the paper's procedure (800 ×
    /// INC128, then 40 × INC16384); absent in profiles written before ttp
    /// recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub procedure: Option<super::calibrate::procedure::Procedure>,
}

impl Profile {
    /// Reads and checks a profile file.
    pub fn load(path: &Path) -> Result<Self, EmpError> {
        let bytes = std::fs::read(path).map_err(|source| EmpError::ProfileRead {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(path, &bytes)
    }

    pub(crate) fn from_json(path: &Path, bytes: &[u8]) -> Result<Self, EmpError> {
        #[derive(Deserialize)]
        struct Head {
            schema: String,
        }
        let head: Head =
            serde_json::from_slice(bytes).map_err(|source| EmpError::ProfileParse {
                path: path.to_path_buf(),
                source,
            })?;
        if head.schema != PROFILE_SCHEMA {
            return Err(EmpError::ProfileSchema {
                path: path.to_path_buf(),
                found: head.schema,
                expected: PROFILE_SCHEMA,
            });
        }
        serde_json::from_slice(bytes).map_err(|source| EmpError::ProfileParse {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Cut-offs that apply to a program of the given length, by daemon name.
    pub(crate) fn cutoffs_for(&self, program_ns: u64) -> BTreeMap<String, u64> {
        self.daemons
            .iter()
            .filter_map(|d| d.cutoff_for(program_ns).map(|c| (d.name.clone(), c)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn periodic() -> DaemonCutoff {
        let tt = 720_000_000_000;
        DaemonCutoff {
            name: "rhn_check".into(),
            period_ns: Some(20 * tt),
            task_time_ns: Some(tt),
            cases: vec![
                CutoffCase {
                    applies: Applies::ShorterThan { task_time_ns: tt },
                    cutoff_ns: 281_000_000,
                },
                CutoffCase {
                    applies: Applies::AtLeast { task_time_ns: tt },
                    cutoff_ns: 12_828_000_000,
                },
            ],
            short_basis: None,
            long_basis: None,
        }
    }

    /// Catches the two cases of a periodic daemon being swapped or both
    /// matching at the boundary (Table XVI: < 12 min → 281 ms, ≥ 12 min →
    /// 12,828 ms).
    #[test]
    fn periodic_cases_split_at_task_time() {
        let d = periodic();
        assert_eq!(d.cutoff_for(128_000_000_000), Some(281_000_000));
        assert_eq!(d.cutoff_for(720_000_000_000), Some(12_828_000_000));
    }

    /// Catches a profile with another schema being accepted silently.
    #[test]
    fn wrong_schema_is_rejected_with_remedy() {
        let err =
            Profile::from_json(Path::new("p.json"), br#"{"schema":"ttp.emp/1"}"#).unwrap_err();
        assert!(matches!(err, EmpError::ProfileSchema { .. }));
        assert!(err.to_string().contains("calibrate"));
    }

    /// Catches fields that do not survive a JSON round trip.
    #[test]
    fn round_trips_through_json() {
        let p = Profile {
            schema: PROFILE_SCHEMA.into(),
            created_by: "ttp test".into(),
            daemons: vec![periodic()],
            cutoff_resolution_ns: Some(1_000_000),
            calibrations: vec![],
            procedure: None,
        };
        let bytes = serde_json::to_vec(&p).unwrap();
        assert_eq!(Profile::from_json(Path::new("p"), &bytes).unwrap(), p);
    }
}
