//! `ttp.emp/1`, `ttp.emp-profile/1` and `ttp.emp-sample-size/1` (EMP),
//! read back with the protocol's own terminal reports and plots
//! (report/emp), plus a per-run (or per-daemon, per-size) table.
use std::path::{Path, PathBuf};

use super::{
    rendered::{RenderError, Rendered},
    table::{Table, ms3},
};
use crate::report::emp::{terminal, write_calibration_plots, write_run_plots};
use ttp_emp::{EmpOutcome, Profile, SampleSizeReport, Verdict};

pub struct Outcome(pub EmpOutcome);
pub struct Calibration(pub Profile);
pub struct SampleSize(pub SampleSizeReport);

fn plot_err(e: impl std::fmt::Display) -> RenderError {
    RenderError::Plot {
        what: "EMP".into(),
        detail: e.to_string(),
    }
}

fn verdict(v: &Verdict) -> String {
    match v {
        Verdict::Retained => "retained".into(),
        Verdict::WarmUp => "warm-up".into(),
        Verdict::Failed { detail } => format!("failed: {detail}"),
        Verdict::LostRecords { count } => format!("{count} records lost"),
        Verdict::MissingPt => "no process time".into(),
        Verdict::DaemonCutoff { hits } => format!(
            "daemon cut-off: {}",
            hits.iter()
                .map(|h| format!("{}[{}]", h.name, h.pid))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Verdict::TwoSigma { side } => format!("±2σ ({side:?})").to_lowercase(),
    }
}

impl Rendered for Outcome {
    fn title(&self) -> String {
        let o = &self.0;
        format!(
            "ttp run (EMP, {}): {}, {} runs",
            ttp_emp::version_label(o.setup.as_ref()),
            if o.command.is_empty() {
                "command not recorded".to_string()
            } else {
                o.command.join(" ")
            },
            o.runs.len()
        )
    }
    fn text(&self) -> String {
        terminal::render_outcome(&self.0)
    }
    fn table(&self) -> Table {
        let mut t = Table::new(&["run", "et_ms", "pt_ms", "verdict", "et_two_sigma"]);
        for r in &self.0.runs {
            t.push(vec![
                r.index.to_string(),
                ms3(Some(r.et_ns as f64)),
                ms3(r.pt_ns.map(|v| v as f64)),
                verdict(&r.verdict),
                r.et_two_sigma
                    .map_or(String::new(), |s| format!("{s:?}").to_lowercase()),
            ]);
        }
        t
    }
    fn markdown(&self) -> String {
        let headline = match self.0.pt.as_ref().filter(|p| p.n > 0) {
            None => "Process time: no run was retained, so there is no mean (the verdicts above say why).".to_string(),
            Some(p) => format!(
                "Process time (mean of {} retained run{}): {} ms, {}.",
                p.n,
                if p.n == 1 { "" } else { "s" },
                ms3(Some(p.mean_ns)),
                match p.sd_ns {
                    Some(sd) => format!("sd {} ms", ms3(Some(sd))),
                    None => "no sd (one run)".to_string(),
                }
            ),
        };
        format!(
            "**{}**\n\n{}\n{headline}\n",
            self.title(),
            self.table().markdown(),
        )
    }
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        write_run_plots(dir, &self.0).map_err(plot_err)
    }
}

impl Rendered for Calibration {
    fn title(&self) -> String {
        format!(
            "ttp calibrate (EMP profile): {} daemon(s), {} calibration(s)",
            self.0.daemons.len(),
            self.0.calibrations.len()
        )
    }
    fn text(&self) -> String {
        terminal::render_calibration(&self.0)
    }
    fn table(&self) -> Table {
        let mut t = Table::new(&["daemon", "period_ms", "cutoffs_ms"]);
        for d in &self.0.daemons {
            t.push(vec![
                d.name.clone(),
                ms3(d.period_ns.map(|v| v as f64)),
                d.cases
                    .iter()
                    .map(|c| ms3(Some(c.cutoff_ns as f64)))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]);
        }
        t
    }
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        write_calibration_plots(dir, &self.0).map_err(plot_err)
    }
}

impl Rendered for SampleSize {
    fn title(&self) -> String {
        format!(
            "ttp EMPv6 sample size: recommended {}",
            self.0
                .recommended
                .map_or("none".to_string(), |n| n.to_string())
        )
    }
    fn text(&self) -> String {
        terminal::render_sample_size(&self.0)
    }
    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "size",
            "dropped_daemon",
            "dropped_two_sigma",
            "retained",
            "mean_pt_ms",
            "sd_pt_ms",
            "dropped_et_two_sigma",
            "sd_et_ms",
            "keeps_sd",
            "keeps_outliers",
        ]);
        for r in std::iter::once(&self.0.full).chain(&self.0.rows) {
            t.push(vec![
                r.size.to_string(),
                r.dropped_daemon.to_string(),
                r.dropped_two_sigma.to_string(),
                r.retained.to_string(),
                ms3(r.mean_pt_ns),
                ms3(r.sd_pt_ns),
                r.dropped_et_two_sigma.to_string(),
                ms3(r.sd_et_ns),
                r.keeps_sd.to_string(),
                r.keeps_outliers.to_string(),
            ]);
        }
        t
    }
}
