//! `ttp-ebpf analyze --sample-size`: EMPv6 (paper 001, Sec. 4.6) over a long
//! EMP measurement recorded with `--record`.
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use crate::{
    error::UsageError,
    protocol::emp::{Profile, SampleSizeConfig, sample_size},
    report::{atomic::write_json, emp::terminal::render_sample_size},
};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "EMP sample size (EMPv6)")]
pub struct SampleSizeArgs {
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
    let recorded = super::emp_live::read_record(path)?;
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
    print!("{}", render_sample_size(&report));
    if let Some(path) = json {
        write_json(path, &report).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
