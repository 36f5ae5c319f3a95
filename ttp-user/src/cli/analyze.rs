//! `ttp-ebpf analyze`: applies TTPv2 (Steps 1–5) offline to saved run JSONs
//! and to external per-QE measurements in CSV.
use std::path::PathBuf;

use super::analyze_inputs::{Inputs, write_outputs};
use ttp_sys::error::UsageError;
use ttp_ttpv2::import::{read_qe_csv, read_run_json};
use ttp_ttpv2::model::Setup;
use ttp_ttpv2::study::{is_study, read_study};

/// Apply the Tucson Timing Protocol v2 to saved runs or external data.
///
/// Each run JSON (from `ttp-ebpf run --json`) is one query at one
/// cardinality (Q@C). Give several runs of the same query labelled
/// `cardinality=N`, or a study file of `ttp-ebpf experiment`, to get the
/// monotonicity checks (QC3/QC4, POST2/POST3).
/// Prints the per-QE table, dropped QEs, the result, every sanity check and
/// the reporting paragraph of the paper's Sec. 9.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Run JSON files written by `ttp-ebpf run --json`, or study files
    /// (JSON lines) written by `ttp-ebpf experiment`.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// External measurements: a CSV with one row per QE and columns
    /// qe,time_meas_ms,u_ticks,s_ticks,blkio_ticks,iowait_ticks (optional
    /// further columns in docs/ttpv2.md). May be given more than once.
    #[arg(long = "qe-csv", value_name = "FILE")]
    pub qe_csv: Vec<PathBuf>,
    /// Write the analysis as JSON (schema ttp.analyze/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a chart of every Q@C as SVG: per QE, Time_meas, Time_calc and
    /// the exact time, with dropped QEs marked.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also report the Pearson correlations of the causal model (Table IV)
    /// over the retained QEs, after per-experiment min-max scaling.
    #[arg(long)]
    pub correlations: bool,
    /// USER_HZ of the machine the CSV data was measured on (ticks per second).
    #[arg(long, default_value_t = 100, value_name = "HZ")]
    pub user_hz: u32,
    /// Online CPUs of the machine the CSV data was measured on.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub cpus: u32,
    #[command(flatten)]
    pub emp: super::analyze_emp::SampleSizeArgs,
    #[command(flatten)]
    pub lab: super::analyze_lab::LabArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(runs) = &args.emp.sample_size {
        return super::analyze_emp::run(runs, &args.emp, args.json.as_deref());
    }
    if let Some(url) = &args.lab.lab {
        if !args.files.is_empty() || !args.qe_csv.is_empty() {
            return ttp_sys::error::usage(
                "give either --lab or files (run JSONs, studies, --qe-csv), not both; `lab export` writes the lab's studies to files",
            );
        }
        return super::analyze_lab::run(
            url,
            &args.lab,
            args.correlations,
            args.svg.as_deref(),
            args.json.as_deref(),
        );
    }
    if args.files.is_empty() && args.qe_csv.is_empty() {
        return ttp_sys::error::usage(
            "nothing to analyze: give run JSON files (from `ttp-ebpf run --json`), a study file (from `ttp-ebpf experiment`) or --qe-csv FILE",
        );
    }
    if args.user_hz == 0 || args.cpus == 0 {
        return ttp_sys::error::usage("--user-hz and --cpus must be at least 1");
    }
    let mut inputs = Inputs::default();
    for path in &args.files {
        let (read, m) = if is_study(path) {
            read_study(path).map_err(|e| UsageError::new(e.to_string()))?
        } else {
            let (qc, m) = read_run_json(path).map_err(|e| UsageError::new(e.to_string()))?;
            (vec![qc], m)
        };
        inputs.add(read, m);
    }
    let setup = Setup {
        user_hz: args.user_hz,
        cpus: args.cpus,
        ..Setup::default()
    };
    for path in &args.qe_csv {
        let read = read_qe_csv(path, &setup).map_err(|e| UsageError::new(e.to_string()))?;
        inputs.qcs.extend(read);
    }
    let shown = inputs.analyse(args.correlations);
    crate::report::render::print(&shown);
    write_outputs(&shown, args.svg.as_deref(), args.json.as_deref())
}
