//! EMP output: the terminal report and the SVG plots. The JSON documents
//! are the protocol's own result types serialised (`ttp.emp/1`,
//! `ttp.emp-profile/1`, `ttp.emp-sample-size/1`).
pub(crate) mod plot;
pub(crate) mod terminal;

use std::path::Path;

use ttp_emp::{EmpError, EmpOutcome, Profile};

fn write_svg(dir: &Path, name: &str, svg: &str) -> Result<std::path::PathBuf, EmpError> {
    let path = dir.join(name);
    ttp_sys::sys::atomic::create_dir_all(dir)
        .and_then(|_| ttp_sys::sys::atomic::write(&path, svg.as_bytes()))
        .map_err(|e| EmpError::Plot {
            what: "file",
            detail: format!("cannot write {}: {e}", path.display()),
        })?;
    Ok(path)
}

/// `--plot DIR` of `run --protocol emp`: `emp_series.svg`.
pub(crate) fn write_run_plots(
    dir: &Path,
    o: &EmpOutcome,
) -> Result<Vec<std::path::PathBuf>, EmpError> {
    Ok(vec![write_svg(
        dir,
        "emp_series.svg",
        &plot::series_svg(o)?,
    )?])
}

/// `--plot DIR` of `calibrate`: for each calibration in the profile,
/// `dual_execution[_long].svg` (every pair) and
/// `dual_execution[_long]_central.svg` (the central cluster zoomed).
pub(crate) fn write_calibration_plots(
    dir: &Path,
    p: &Profile,
) -> Result<Vec<std::path::PathBuf>, EmpError> {
    let mut out = Vec::new();
    for (i, a) in p.calibrations.iter().enumerate() {
        let tag = if i == 0 { "" } else { "_long" };
        out.push(write_svg(
            dir,
            &format!("dual_execution{tag}.svg"),
            &plot::dual_execution_svg(a, plot::Zoom::All)?,
        )?);
        out.push(write_svg(
            dir,
            &format!("dual_execution{tag}_central.svg"),
            &plot::dual_execution_svg(a, plot::Zoom::Central)?,
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_emp::{
        EmpConfig, apply,
        calibrate::{CalibrationConfig, analyze, build_profile, tests::synthetic_runs},
    };

    fn outcome_and_profile() -> (EmpOutcome, Profile) {
        let runs = synthetic_runs();
        let p = build_profile(
            analyze(&[], &runs, &CalibrationConfig::default()).unwrap(),
            None,
            2.0,
        );
        (apply(&runs, Some(&p), &EmpConfig::default()).unwrap(), p)
    }

    /// The terminal report names each dropped run, its rule and daemon, and
    /// gives the result. Catches a report that hides why a run was dropped.
    #[test]
    fn terminal_report_says_why_runs_were_dropped() {
        let (o, p) = outcome_and_profile();
        let t = terminal::render_outcome(&o);
        assert!(t.contains("Runs not retained"));
        assert!(
            t.contains("dropped (daemon cut-off): rhn_check[1077] 450.000 ms > 225.000 ms"),
            "{t}"
        );
        assert!(t.contains("first check, daemon cut-offs (4 daemon(s)"));
        assert!(t.contains("6 dropped"));
        assert!(t.contains("process time (PT)      mean 999.520 ms"), "{t}");
        let c = terminal::render_calibration(&p);
        assert!(c.contains("L shape: arms present, corner empty"));
        let step8 = &c[c.find("Step 8").unwrap()..];
        assert!(
            step8
                .lines()
                .any(|l| l.trim_start().starts_with("rhn_check") && l.contains(" 225.000 ")),
            "{c}"
        );
    }

    /// JSON carries the schema and tagged verdicts. Catches an untagged
    /// enum that readers could not tell apart.
    #[test]
    fn json_has_schema_and_tagged_verdicts() {
        let (o, _) = outcome_and_profile();
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["schema"], "ttp.emp/1");
        let run10 = v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["index"] == 10)
            .unwrap();
        assert_eq!(run10["verdict"], "daemon_cutoff");
        assert_eq!(run10["hits"][0]["name"], "bash");
        assert_eq!(v["pt_source"], "taskstats");
    }

    /// Files land where `--plot DIR` says, one per plot.
    #[test]
    fn plots_are_written_to_the_directory() {
        let (o, p) = outcome_and_profile();
        let dir = std::env::temp_dir().join(format!("ttp-emp-plots-{}", std::process::id()));
        let a = write_run_plots(&dir, &o).unwrap();
        let b = write_calibration_plots(&dir, &p).unwrap();
        let names: Vec<String> = a
            .iter()
            .chain(&b)
            .map(|p| p.file_name().unwrap().to_string_lossy().into())
            .collect();
        assert_eq!(
            names,
            [
                "emp_series.svg",
                "dual_execution.svg",
                "dual_execution_central.svg"
            ]
        );
        assert!(b.iter().all(|p| p.exists()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
