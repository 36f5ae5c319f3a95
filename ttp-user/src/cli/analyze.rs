//! `ttp-ebpf analyze`: applies TTPv2 (Steps 1–5) offline to saved run JSONs
//! and to external per-QE measurements in CSV.
use std::path::{Path, PathBuf};

use crate::report::format::{Outputs, json::Json, svg::Svg};
use crate::report::render::Analyze;
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::error::UsageError;
use ttp_ttpv2::analysis::{ANALYZE_SCHEMA, Analysis, AnalyzeDocument, analyse};
use ttp_ttpv2::import::{read_qe_csv, read_run_json};
use ttp_ttpv2::model::{QcInput, Setup};
use ttp_ttpv2::study::{is_study, read_study};
use ttp_ttpv2::{analysis::retained_correlations, correlations::CorrelationRow};

/// Apply the Tucson Timing Protocol v2 to saved runs or external data.
///
/// Each run JSON (from `ttp-ebpf run --json`) is one query at one
/// cardinality (Q@C). Give several runs of the same query labelled
/// `cardinality=N`, or a study file of `ttp-ebpf experiment`, to get the
/// monotonicity checks (QC3/QC4, POST2/POST3).
/// Prints the per-QE table, dropped QEs, the result, every sanity check and
/// the reporting paragraph of the paper's Sec. 9.
#[derive(Debug, clap::Args)]
pub struct Args {
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
        return super::analyze_lab::run(url, &args);
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

/// The Q@Cs of the files given, and the machine they were measured on.
#[derive(Default)]
pub(super) struct Inputs {
    pub qcs: Vec<QcInput>,
    machine: Option<MachineFacts>,
    caches: Vec<Option<bool>>,
}

impl Inputs {
    /// One file's Q@Cs and machine (a run JSON or a study): the first
    /// file's machine speaks for all, but for the cache ([`merge_cache`]).
    pub fn add(&mut self, mut qcs: Vec<QcInput>, machine: Option<MachineFacts>) {
        self.caches
            .push(machine.as_ref().and_then(|m| m.cold_cache));
        if self.machine.is_none() {
            self.machine = machine;
        }
        self.qcs.append(&mut qcs);
    }

    /// TTPv2 Steps 1–5 over every Q@C, as `analyze` shows it.
    pub fn analyse(mut self, correlations: bool) -> Analyze {
        if let Some(m) = self.machine.as_mut() {
            merge_cache(m, &self.caches);
        }
        let analysis = analyse(
            &self.qcs,
            self.machine.as_ref(),
            crate::report::ttpv2::paragraph::text,
        );
        let correlations = correlations.then(|| retained_correlations(&self.qcs, &analysis));
        document(self.machine, analysis, correlations)
    }
}

/// Prints the analysis (as `report` shows the saved document) and writes
/// what `--svg` and `--json` ask for: the chart of every Q@C and the
/// document (schema ttp.analyze/1). Shared with `experiment`.
pub(super) fn show(
    svg: Option<&Path>,
    json: Option<&Path>,
    machine: Option<MachineFacts>,
    analysis: Analysis,
    correlations: Option<Vec<CorrelationRow>>,
) -> anyhow::Result<()> {
    let shown = document(machine, analysis, correlations);
    crate::report::render::print(&shown);
    write_outputs(&shown, svg, json)
}

fn document(
    machine: Option<MachineFacts>,
    analysis: Analysis,
    correlations: Option<Vec<CorrelationRow>>,
) -> Analyze {
    Analyze(AnalyzeDocument {
        schema: ANALYZE_SCHEMA.into(),
        machine,
        qcs: analysis.qcs,
        checks: analysis.checks,
        paragraph: analysis.paragraph,
        correlations,
    })
}

/// Writes the chart of every Q@C (`--svg`) and the document (`--json`,
/// schema ttp.analyze/1), each atomically.
pub(super) fn write_outputs(
    shown: &Analyze,
    svg: Option<&Path>,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let analysis = shown.analysis();
    Outputs::default()
        .add_unannounced(svg, Svg::Ttpv2(&analysis))
        .add_unannounced(json, Json(&shown.0))
        .write()?;
    Ok(())
}

/// The machine facts of the first file speak for every file, except the
/// cache: files measured warm and cold together are neither "with a warm
/// cache" nor "with a cold cache" (Sec. 9 (6)); the paragraph says how many
/// of each instead.
fn merge_cache(m: &mut MachineFacts, caches: &[Option<bool>]) {
    let cold = caches.iter().filter(|c| **c == Some(true)).count();
    let warm = caches.iter().filter(|c| **c == Some(false)).count();
    if cold > 0 && warm > 0 {
        m.cold_cache = None;
        m.deviations.push(format!(
            "the files analysed mix cache states: {cold} measured with a cold cache, {warm} with a warm cache"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warm and a cold run analysed together: the cache is not stated as
    /// warm, and the mix is named; files of one state keep it. Catches
    /// "with a warm cache (2 Q@Cs)" for a warm and a cold run.
    #[test]
    fn a_warm_and_a_cold_file_are_not_called_warm() {
        let mut m = ttp_ledger::collect::machine::MachineFacts {
            cold_cache: Some(false),
            ..Default::default()
        };
        merge_cache(&mut m, &[Some(false), Some(true)]);
        assert_eq!(m.cold_cache, None);
        assert_eq!(
            m.deviations,
            [
                "the files analysed mix cache states: 1 measured with a cold cache, 1 with a warm cache"
            ]
        );
        let mut same = ttp_ledger::collect::machine::MachineFacts {
            cold_cache: Some(true),
            ..Default::default()
        };
        merge_cache(&mut same, &[Some(true), Some(true), None]);
        assert_eq!(same.cold_cache, Some(true));
        assert!(same.deviations.is_empty());
    }
}
