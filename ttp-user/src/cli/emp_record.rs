//! EMP's recorded run sets (`ttp.emp-runs/1`): what `run --protocol emp
//! --record` and `calibrate --record` write, and `analyze` and `calibrate
//! --from` read.

use crate::report::format;
use ttp_emp::EmpRun;
use ttp_sys::error::UsageError;

/// Writes the runs as a recorded run set (`ttp.emp-runs/1`, the layout of
/// [`EmpRuns`](ttp_emp::EmpRuns)) atomically, without copying them.
pub(crate) fn write_record(
    path: &std::path::Path,
    command: &[String],
    runs: &[EmpRun],
) -> anyhow::Result<()> {
    #[derive(serde::Serialize)]
    struct Record<'a> {
        schema: &'static str,
        command: &'a [String],
        runs: &'a [EmpRun],
    }
    Ok(format::write_unannounced_file(
        path,
        &format::json::Json(&Record {
            schema: ttp_emp::input::RUNS_SCHEMA,
            command,
            runs,
        }),
    )?)
}

/// Reads a recorded run set (`ttp.emp-runs/1`).
pub(crate) fn read_record(path: &std::path::Path) -> anyhow::Result<ttp_emp::EmpRuns> {
    let bytes = std::fs::read(path)
        .map_err(|e| UsageError::new(format!("cannot read {}: {e}", path.display())))?;
    let runs: ttp_emp::EmpRuns = serde_json::from_slice(&bytes).map_err(|e| {
        UsageError::new(format!(
            "{} is not a recorded run set ({e}); record one with `ttp-ebpf run --protocol emp --record FILE` or `ttp-ebpf calibrate --record FILE`",
            path.display()
        ))
    })?;
    if runs.schema != ttp_emp::input::RUNS_SCHEMA {
        return Err(UsageError::new(format!(
            "{} has schema {:?}, expected {:?} (written by --record)",
            path.display(),
            runs.schema,
            ttp_emp::input::RUNS_SCHEMA
        ))
        .into());
    }
    Ok(runs)
}
