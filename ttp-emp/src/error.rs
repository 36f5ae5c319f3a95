//! Errors of the EMP layer. Each says what to do next.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EmpError {
    #[error(
        "no usable runs among {total}: every run was a warm-up, failed or lost ledger records; rerun the measurement"
    )]
    NoUsableRuns { total: usize },
    #[error(
        "calibration needs at least {needed} usable runs (pairs of consecutive runs), got {got}; use more runs (the paper uses 800, Sec. 4.5.1 Step 1)"
    )]
    TooFewRuns { needed: usize, got: usize },
    #[error("cannot read the EMP profile {path}: {source}")]
    ProfileRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a valid EMP profile ({source}); make one with `ttp-ebpf calibrate --out FILE`"
    )]
    ProfileParse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path} has schema {found:?}, expected {expected:?}; make a new profile with `ttp-ebpf calibrate`"
    )]
    ProfileSchema {
        path: PathBuf,
        found: String,
        expected: &'static str,
    },
    #[error("writing {}", path.display())]
    RunsWrite {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {}: {source}", path.display())]
    RunsRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not a recorded run set ({source}); record one with `ttp-ebpf run --protocol emp --record FILE` or `ttp-ebpf calibrate --record FILE`",
        path.display()
    )]
    RunsParse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{} has schema {found:?}, expected {expected:?} (written by --record)",
        path.display()
    )]
    RunsSchema {
        path: PathBuf,
        found: String,
        expected: &'static str,
    },
    #[error("cannot draw the {what} plot: {detail}")]
    Plot { what: &'static str, detail: String },
    #[error("invalid sample-size request: {detail}")]
    SampleSize { detail: String },
}
