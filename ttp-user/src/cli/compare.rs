//! `ttp-ebpf compare A B [C …]`: is B faster than A, or is it noise?
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::report::{compare as show, format};
use ttp_compare::{Config, Side};
use ttp_sys::error::{UsageError, usage};
use ttp_ttpv2::{
    analysis::{ANALYZE_SCHEMA, AnalyzeDocument, analyse},
    study::{is_study, read_study},
};

/// Compare saved results of one kind: the first file (A) is the baseline,
/// every further file is compared with it. One file of a `run` of several
/// commands (`-- CMD1 ::: CMD2`) compares its commands, the first as A.
///
/// Reads `run --json` files (TTPv2: Time_calc, the exact time and
/// Time_meas over the retained QEs, compared by their medians),
/// `analyze --json` and `experiment` study files (the same, per Q@C matched
/// by labels), `run --protocol emp --json` files (PT and ET of the
/// retained runs, compared by their means) and `load --json` files (the
/// per-second mean and max latency, compared by their medians; whole-run
/// percentiles side by side) and `vprofile --json` files (the root's mean
/// by Welch's t-test and Fieller's interval from the summaries, its
/// variance by the F-test, the factor shares side by side, descriptively:
/// the file holds no per-invocation samples). For each measure: both sides' samples, the
/// ratio B/A with a seeded percentile-bootstrap interval, Mann–Whitney U
/// and Welch's t p-values, Holm's correction when several files are
/// compared with A, Cliff's delta, and a verdict in words — or, when no
/// difference is detectable, how many runs would detect one. Results whose
/// set-up differs (machine, cold or warm cache, protocol settings) are
/// compared with a warning. Needs no privileges. docs/compare.md explains
/// every number.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Result files: the baseline first, then one or more candidates; or
    /// one `run --json` file of several commands.
    #[arg(value_name = "FILE", num_args = 1.., required = true)]
    pub files: Vec<PathBuf>,
    /// Print Markdown instead of the terminal report.
    #[arg(long)]
    pub markdown: bool,
    /// Write the comparison as JSON (schema ttp.compare/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw, per measure, every file's samples as a strip with its
    /// centre and each candidate's interval: DIR/compare-MEASURE.svg.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Seed of the bootstrap's random numbers (reported; the same seed and
    /// files give the same interval).
    #[arg(long, default_value_t = Config::default().seed)]
    pub seed: u64,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = Config::default().resamples, value_name = "N")]
    pub resamples: usize,
    /// Confidence level of the interval, in %.
    #[arg(long, default_value_t = 95.0, value_name = "PERCENT")]
    pub confidence: f64,
    /// The difference, in %, the power estimate asks runs for.
    #[arg(long, default_value_t = 2.0, value_name = "PERCENT")]
    pub detect: f64,
    /// Compare vprofile results whose root functions differ (refused
    /// otherwise: their factors cannot be matched).
    #[arg(long)]
    pub any_root: bool,
}

impl Args {
    /// The options as one checked configuration.
    fn config(&self) -> Result<Config, UsageError> {
        if !(self.confidence > 0.0 && self.confidence < 100.0) {
            return Err(UsageError::new(format!(
                "--confidence {} is not a level: give a percentage between 0 and 100, e.g. 95",
                self.confidence
            )));
        }
        if !(self.detect > 0.0 && self.detect.is_finite()) {
            return Err(UsageError::new(format!(
                "--detect {} is not a difference: give a positive percentage, e.g. 2",
                self.detect
            )));
        }
        if self.resamples < 100 {
            return Err(UsageError::new(format!(
                "--resamples {} is too few for a bootstrap interval: give at least 100 (10000 is the default)",
                self.resamples
            )));
        }
        Ok(Config {
            level: self.confidence / 100.0,
            resamples: self.resamples,
            seed: self.seed,
            detect_rel: self.detect / 100.0,
            any_root: self.any_root,
            ..Config::default()
        })
    }
}

/// A study file of `experiment` (JSON lines), analysed as `analyze` does:
/// its Q@Cs become one `ttp.analyze/1` document.
fn analysed_study(path: &Path) -> anyhow::Result<serde_json::Value> {
    let (qcs, machine) =
        read_study(path).map_err(|e| UsageError::new(format!("{}: {e}", path.display())))?;
    let a = analyse(
        &qcs,
        machine.as_ref(),
        crate::report::ttpv2::paragraph::text,
    );
    Ok(serde_json::to_value(AnalyzeDocument {
        schema: ANALYZE_SCHEMA.into(),
        machine,
        qcs: a.qcs,
        checks: a.checks,
        paragraph: a.paragraph,
        correlations: None,
    })?)
}

/// Reads one file; every problem is a usage error naming the file.
fn read_side(path: &Path) -> anyhow::Result<Side> {
    ttp_compare::side_of(read_value(path)?)
        .map_err(|e| UsageError::new(format!("{}: {e}", path.display())).into())
}

/// One file of a `run` of several commands: one side per command.
fn commands_of(path: &Path) -> anyhow::Result<Vec<(String, Side)>> {
    let value = read_value(path)?;
    let bad = |e: String| UsageError::new(format!("{}: {e}", path.display()));
    let doc = match value.get("schema").and_then(serde_json::Value::as_str) {
        Some(ANALYZE_SCHEMA) => serde_json::from_value::<AnalyzeDocument>(value)
            .map_err(|e| bad(format!("not a valid {ANALYZE_SCHEMA} document: {e}")))?,
        _ => {
            return Err(bad(
                "compare needs two files, or one file of a run of several commands (run -- CMD1 ::: CMD2)".into(),
            )
            .into());
        }
    };
    let sides = ttp_compare::sides_by_name(&doc.schema, doc.machine.as_ref(), &doc.qcs)
        .map_err(|e| bad(e.to_string()))?;
    if sides.len() < 2 {
        return Err(bad(
            "its Q@Cs are not of several named commands: compare needs two files, or one file of a run of several commands (run -- CMD1 ::: CMD2)".into(),
        )
        .into());
    }
    Ok(sides)
}

/// A file as JSON (a study file analysed first).
fn read_value(path: &Path) -> anyhow::Result<serde_json::Value> {
    if is_study(path) {
        return analysed_study(path);
    }
    let bytes = std::fs::read(path)
        .map_err(|e| UsageError::new(format!("cannot read {}: {e}", path.display())))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        UsageError::new(format!(
            "{} is not JSON ({e}): give files written by `ttp-ebpf run --json`",
            path.display()
        ))
    })?;
    Ok(value)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = args.config()?;
    let mut sides = Vec::with_capacity(args.files.len());
    if let [one] = &args.files[..] {
        for (name, side) in commands_of(one)? {
            sides.push((format!("{}: {name}", one.display()), side));
        }
    }
    for path in args.files.iter().filter(|_| args.files.len() > 1) {
        sides.push((path.display().to_string(), read_side(path)?));
    }
    let doc = match ttp_compare::compare(&sides, &cfg) {
        Ok(d) => d,
        Err(e) => return usage(e.to_string()),
    };
    let shown = crate::report::render::Compared(doc);
    if args.markdown {
        print!("{}", crate::report::render::Rendered::markdown(&shown));
    } else {
        crate::report::render::print(&shown);
    }
    let doc = shown.0;
    if let Some(path) = &args.json {
        format::write(path, &format::json::Json(&doc))
            .with_context(|| "the comparison is printed above")?;
    }
    if let Some(dir) = &args.svg {
        let written = show::svg::write_svgs(&doc, dir)?;
        if written.is_empty() {
            eprintln!(
                "no plot written to {}: no measure with samples was compared (vprofile files hold summaries only)",
                dir.display()
            );
        }
        for f in written {
            crate::report::atomic::announce(&f);
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "compare_vprofile_tests.rs"]
mod vprofile_tests;
