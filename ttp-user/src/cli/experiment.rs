//! `ttp-ebpf experiment SPEC.toml`: the Q@Cs of an experiment (TTPv2
//! Fig. 2) on PostgreSQL, kept in a study file as they finish, then the
//! protocol applied across the whole study.
use std::path::PathBuf;

use anyhow::Context;

use crate::{
    pg::{experiment::Spec, study},
    report::progress::Progress,
};
use ttp_sys::sys::signals::StopFlag;
use ttp_ttpv2::{analysis::analyse, study::read_study};

/// Run an experiment on PostgreSQL: every query at every cardinality of a
/// generated table, N QEs each, timed with TTPv2.
///
/// The specification (TOML; docs/postgres.md) names the connection, how the
/// maximal table is generated (with a recorded random seed), the
/// cardinalities, the queries and N. Every finished Q@C is appended to the
/// study file, so an experiment that was interrupted, paused or killed
/// resumes where it stopped when started again. At the end the protocol is
/// applied across the study (as `ttp-ebpf analyze STUDY` does), with the
/// monotonicity checks across cardinalities.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment specification (TOML).
    #[arg(value_name = "SPEC.toml")]
    pub spec: PathBuf,
    /// The study file (JSON lines); default: SPEC with extension
    /// .study.jsonl. An existing study of the same specification is resumed.
    #[arg(long, value_name = "FILE")]
    pub study: Option<PathBuf>,
    /// Write the analysis of the study as JSON (schema ttp.analyze/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a chart of every Q@C (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

fn study_path(args: &Args) -> PathBuf {
    args.study
        .clone()
        .unwrap_or_else(|| args.spec.with_extension("study.jsonl"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.spec)
        .map_err(|e| ttp_sys::error::UsageError::new(format!("{}: {e}", args.spec.display())))?;
    let mut spec = Spec::parse(&text)
        .map_err(|e| ttp_sys::error::UsageError::new(format!("{}: {e}", args.spec.display())))?;
    let path = study_path(&args);
    let stop = StopFlag::install().context("installing signal handlers")?;
    let total_qcs = spec.cardinalities.len() * spec.queries.len();
    let bar = Progress::new((total_qcs as u64) * u64::from(spec.n), "QE");
    let ended = study::measure(&mut spec, &path, &stop, &bar);
    bar.finish_and_clear();
    let ended = ended?;
    if let Some(why) = ended.stopped {
        anyhow::bail!(
            "{why}; {} of {} Q@Cs are finished and kept in {}; run the same command again to resume",
            ended.done,
            ended.total,
            path.display()
        );
    }
    eprintln!("{} Q@Cs in {}", ended.total, path.display());
    let (qcs, machine) = read_study(&path)?;
    let analysis = analyse(
        &qcs,
        machine.as_ref(),
        crate::report::ttpv2::paragraph::text,
    );
    super::analyze_inputs::show(
        args.svg.as_deref(),
        args.json.as_deref(),
        machine,
        analysis,
        None,
    )
}

/// The progress bar shows the study's QEs.
impl study::Shows for Progress {
    fn resumed(&self, qes: u64) {
        self.set_position(qes);
        self.reset_eta();
    }
    fn position(&self, qes: u64) {
        self.set_position(qes);
    }
    fn message(&self, m: String) {
        self.set_message(m);
    }
    fn notice(&self, m: String) {
        Progress::notice(self, m);
    }
}
