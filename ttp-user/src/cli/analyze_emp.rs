//! `ttp-ebpf analyze --sample-size`: EMPv6 (paper 001, Sec. 4.6) over a long
//! EMP measurement recorded with `--record`.
use std::path::{Path, PathBuf};

use clap::Args;

use ttp_emp::{Profile, SampleSizeConfig, sample_size};
use ttp_sys::error::UsageError;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "EMP sample size (EMPv6)")]
pub(crate) struct SampleSizeArgs {
    /// Choose the number of runs (EMPv6, Sec. 4.6) from a long EMP
    /// measurement recorded with `run --protocol emp --record FILE`
    /// (schema ttp.emp-runs/1): outliers and standard deviation of PT for
    /// the first n/2, n/4, … runs, and the smallest size that keeps them.
    #[arg(long, value_name = "RUNS.json", conflicts_with_all = ["files", "qe_csv", "svg", "correlations"])]
    pub sample_size: Option<PathBuf>,
    /// With --sample-size: the daemon cut-off profile (from `calibrate`).
    #[arg(long, value_name = "PROFILE", requires = "sample_size")]
    pub cutoffs: Option<PathBuf>,
    /// With --sample-size: these subset sizes instead of halving, e.g.
    /// 400,200,100,40,30,20,10 (the paper's).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "N,N,…",
        requires = "sample_size"
    )]
    pub sizes: Vec<usize>,
}

pub fn run(path: &Path, args: &SampleSizeArgs, json: Option<&Path>) -> anyhow::Result<()> {
    let recorded = ttp_emp::EmpRuns::load(path).map_err(|e| UsageError::new(e.to_string()))?;
    let profile = match &args.cutoffs {
        Some(p) => Some(Profile::load(p).map_err(|e| UsageError::new(e.to_string()))?),
        None => None,
    };
    let cfg = SampleSizeConfig {
        sizes: (!args.sizes.is_empty()).then(|| args.sizes.clone()),
        ..SampleSizeConfig::default()
    };
    let report = sample_size(&recorded.runs, profile.as_ref(), &cfg)
        .map_err(|e| UsageError::new(e.to_string()))?;
    let shown = crate::report::render::SampleSize(report);
    crate::report::render::print(&shown);
    let report = shown.0;
    if let Some(path) = json {
        crate::report::format::write_unannounced_file(
            path,
            &crate::report::format::json::Json(&report),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_emp::{EmpRun, ProgramTime, RunFlags};

    /// 40 runs, PT 100 ms ± 1 ms alternating, one 150 ms outlier (run 5).
    fn runs() -> Vec<EmpRun> {
        (0u32..40)
            .map(|i| EmpRun {
                index: i,
                et_ns: 110_000_000,
                start_offset_ns: None,
                pt: ProgramTime {
                    ledger_on_cpu_ns: Some(if i == 5 {
                        150_000_000
                    } else {
                        100_000_000 + u64::from(i % 2) * 2_000_000
                    }),
                    ..ProgramTime::default()
                },
                daemons: vec![],
                flags: RunFlags::default(),
            })
            .collect()
    }

    /// `analyze --sample-size` reads a record and writes the EMPv6 report
    /// over the halving subsets 20, 10, 5. Catches the wiring dropping runs
    /// or the sizes.
    #[test]
    fn sample_size_reads_a_record_and_writes_the_report() {
        let dir = std::env::temp_dir().join(format!("ttp-ss-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rec = dir.join("runs.json");
        let out = dir.join("ss.json");
        ttp_emp::EmpRuns::write(&rec, &["prog".into()], &runs()).unwrap();
        let a = SampleSizeArgs {
            sample_size: Some(rec.clone()),
            cutoffs: None,
            sizes: vec![],
        };
        run(&rec, &a, Some(&out)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(v["schema"], "ttp.emp-sample-size/1");
        assert_eq!(v["full"]["size"], 40);
        // The 150 ms run is the whole set's one ±2σ outlier.
        assert_eq!(v["full"]["dropped_two_sigma"], 1);
        let sizes: Vec<u64> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["size"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, [20, 10, 5]);
        // Never fewer than 10 runs (Sec. 4.6.2), whatever the subsets show.
        assert!(v["recommended"].as_u64().is_none_or(|n| n >= 10), "{v}");
        assert_eq!(v["min_runs"], 10);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
