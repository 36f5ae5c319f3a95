//! What `compare` takes from a saved result: the retained samples of each
//! measure, and the facts of its set-up that must agree for the comparison
//! to mean what it says.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stats::Centre;

/// A measure of one kind of result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MeasureSpec {
    /// Name in reports and JSON, with its unit.
    pub name: &'static str,
    /// What it is, in one line.
    pub what: &'static str,
    pub centre: Centre,
}

/// TTPv2 (Sec. 8.5, Step 4): medians over the QEs Steps 2–3 retained.
pub(crate) const TTPV2_MEASURES: &[MeasureSpec] = &[
    MeasureSpec {
        name: "time_calc_ms",
        what: "Time_calc, (U + S + IO_calc) × tick (TTPv2 eq. 2)",
        centre: Centre::Median,
    },
    MeasureSpec {
        name: "time_exact_ms",
        what: "exact time: the query's on-CPU and own I/O wait, from the ledger",
        centre: Centre::Median,
    },
    MeasureSpec {
        name: "time_meas_ms",
        what: "Time_meas, the elapsed time of the QE (TTPv2 Sec. 8.5)",
        centre: Centre::Median,
    },
    MeasureSpec {
        name: "time_exact_all_ms",
        what: "exact time over every QE that ran to its end, Steps 2-3 not applied (not a TTPv2 result)",
        centre: Centre::Median,
    },
];

/// EMP (paper 001, Sec. 4.5): means over the runs EMPv5 retained.
pub(crate) const EMP_MEASURES: &[MeasureSpec] = &[
    MeasureSpec {
        name: "pt_ms",
        what: "PT, process time of the retained runs (EMP Sec. 4.5)",
        centre: Centre::Mean,
    },
    MeasureSpec {
        name: "et_ms",
        what: "ET, elapsed time of the same runs (EMP Sec. 4.5)",
        centre: Centre::Mean,
    },
];

/// Kinds of result `compare` reads.
pub(crate) const COMPARABLE: &[&str] = &[
    "ttp.run/1",
    "ttp.analyze/1",
    "ttp.emp/1",
    "ttp.load/1",
    "ttp.vprofile/1",
];

/// A measure of one file: what it is and its retained samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    /// Name in reports and JSON, ending in its unit; measures of two files
    /// are matched by it.
    pub name: String,
    pub what: String,
    pub centre: Centre,
    pub samples: Vec<f64>,
    /// What one sample is: "QEs", "runs", "seconds".
    pub sample_unit: &'static str,
}

impl Measure {
    pub(super) fn of(spec: &MeasureSpec, samples: Vec<f64>, sample_unit: &'static str) -> Self {
        Measure {
            name: spec.name.into(),
            what: spec.what.into(),
            centre: spec.centre,
            samples,
            sample_unit,
        }
    }
}

/// One saved result, reduced to what is compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// The file's schema, e.g. "ttp.run/1".
    pub schema: String,
    /// What was measured (the command and its labels).
    pub title: String,
    /// Retained QEs, runs or seconds.
    pub retained: usize,
    /// The measures with their samples; a value a QE did not record is
    /// left out of that measure's samples.
    pub measures: Vec<Measure>,
    /// Numbers the file holds once for the whole measurement (no samples,
    /// so no interval): shown side by side only.
    pub whole_run: Vec<(String, f64)>,
    /// Facts of the set-up, by name; two sides that differ in one are
    /// compared only with a note.
    pub setup: BTreeMap<&'static str, String>,
    /// A vprofile result's summaries (it has no samples); `None` for
    /// every other kind.
    pub vprofile: Option<Summary>,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the file has no \"schema\" field: it is not a ttp result")]
    NoSchema,
    #[error(
        "a {schema} result cannot be compared: compare reads {}",
        COMPARABLE.join(" and ")
    )]
    NotComparable { schema: String },
    #[error("not a valid {schema} document: {source}")]
    Invalid {
        schema: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{retained} retained {unit}{why}; compare needs at least 2 on each side: measure more of them"
    )]
    TooFew {
        retained: usize,
        unit: &'static str,
        why: String,
    },
}

/// A factor of one file: its share of Var(root).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    pub factor: String,
    pub share: f64,
}

/// What a vprofile file holds once, reduced to what is compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub root: String,
    pub binary: String,
    /// Invocations of the root in the last round: n of the tests.
    pub invocations: usize,
    pub mean_ns: f64,
    /// Sample variance (n − 1) of the root's duration, ns².
    pub variance_ns2: f64,
    pub factors: Vec<Factor>,
    /// Records the kernel could not deliver, all rounds.
    pub lost_records: Option<u64>,
}
