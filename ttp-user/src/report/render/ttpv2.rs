//! `ttp.run/1` and `ttp.analyze/1` (TTPv2), read back: the protocol's own
//! terminal report and chart (report/ttpv2), and a per-QE table.
use std::path::{Path, PathBuf};

use super::{
    rendered::{RenderError, Rendered, write_plot},
    table::{Table, num},
};
use crate::report::ttpv2::{scan_svg::render_scan_svg, svg::render_svg, text::render};
use ttp_ttpv2::analysis::{Analysis, AnalyzeDocument, QcDocument, RunDocument};
use ttp_window::window::record::QeRecord;

pub struct Run(pub RunDocument);
pub struct Analyze(pub AnalyzeDocument);

/// One row per QE of every Q@C: the measures TTPv2 works from (U, S,
/// BlockIO of the query, machine IOWait, in ticks) and what eq. 1–2 and the
/// ledger make of them.
fn qe_table(qcs: &[QcDocument]) -> Table {
    let mut t = Table::new(&[
        "qc",
        "qe",
        "time_meas_ms",
        "time_calc_ms",
        "time_exact_ms",
        "u_ticks",
        "s_ticks",
        "blkio_ticks",
        "iowait_ticks",
        "io_calc_ticks",
        "dropped_by",
    ]);
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    for d in qcs {
        for e in &d.qes {
            let q = e.calc.query.as_ref();
            t.push(vec![
                d.name(),
                e.record.qe.to_string(),
                num(Some(e.record.time_meas_ms)),
                num(e.calc.time_calc_ms),
                num(e.calc.time_exact_ms),
                opt(q.and_then(|q| q.u_ticks)),
                opt(q.and_then(|q| q.s_ticks)),
                opt(q.and_then(|q| q.blkio_ticks)),
                opt(e.record.overall.iowait_ticks),
                num(e.calc.io_calc_ticks),
                e.dropped_by.join(" "),
            ]);
        }
    }
    t
}

/// The medians of Step 4 under the table.
fn results(qcs: &[QcDocument]) -> String {
    qcs.iter()
        .map(|d| {
            let r = &d.result;
            match &r.dropped_reason {
                Some(why) => format!("- {}: Q@C dropped ({why})\n", d.name()),
                None => format!(
                    "- {}: median Time_calc {} ms, Time_meas {} ms, exact {} ms over {} of {} QEs\n",
                    d.name(),
                    num(r.time_calc_ms),
                    num(r.time_meas_ms),
                    num(r.time_exact_ms),
                    r.retained,
                    r.qes
                ),
            }
        })
        .collect()
}

/// Whether the QEs were measured with `run --blame` (each carries its
/// blame or why it has none).
fn has_blame(qes: &[&QeRecord]) -> bool {
    qes.iter()
        .any(|q| q.blame.is_some() || q.blame_error.is_some())
}

/// `run --blame`: per QE, the command's blocked time and what explains it.
fn blame_section(qes: &[&QeRecord]) -> String {
    let mut s = String::from(
        "Contention blame per QE (iQCAR; the command and its children as the victim):\n",
    );
    for q in qes {
        match (&q.blame, &q.blame_error) {
            (Some(b), _) => s.push_str(&crate::report::blame::summary_text(b, q.qe, 3)),
            (None, Some(e)) => s.push_str(&format!("  QE {}: no blame: {e}\n", q.qe)),
            (None, None) => {}
        }
    }
    s
}

fn svg(a: &Analysis, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
    let text = render_svg(a).map_err(|e| RenderError::Plot {
        what: "ttpv2.svg".into(),
        detail: e.to_string(),
    })?;
    let mut files = vec![write_plot(dir, "ttpv2.svg", &text)?];
    // A parameter scan (`run --parameter-scan`, `-L`): time against it.
    let scan = render_scan_svg(a).map_err(|e| RenderError::Plot {
        what: "ttpv2-scan.svg".into(),
        detail: e.to_string(),
    })?;
    if let Some(text) = scan {
        files.push(write_plot(dir, "ttpv2-scan.svg", &text)?);
    }
    Ok(files)
}

impl Rendered for Run {
    fn title(&self) -> String {
        format!(
            "ttp run (TTPv2): {}, {} QEs",
            self.0.qc.name(),
            self.0.qc.qes.len()
        )
    }
    fn text(&self) -> String {
        let mut s = render(&self.0.to_analysis(), None);
        let records: Vec<&QeRecord> = self.0.qc.qes.iter().map(|q| &q.record).collect();
        if has_blame(&records) {
            s.push('\n');
            s.push_str(&blame_section(&records));
        }
        s
    }
    fn table(&self) -> Table {
        qe_table(std::slice::from_ref(&self.0.qc))
    }
    fn markdown(&self) -> String {
        format!(
            "**{}**\n\n{}\n{}",
            self.title(),
            self.table().markdown(),
            results(std::slice::from_ref(&self.0.qc))
        )
    }
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        svg(&self.0.to_analysis(), dir)
    }
}

impl Analyze {
    /// A `run` of several commands (Q@Cs labelled `name=…`): each command
    /// compared with the first, as `run` printed it (compare's defaults).
    fn comparison(&self) -> Option<ttp_compare::CompareDocument> {
        use ttp_compare::{Config, compare, sides_by_name};
        let d = &self.0;
        let sides = sides_by_name(&d.schema, d.machine.as_ref(), &d.qcs).ok()?;
        if sides.len() < 2 {
            return None;
        }
        compare(&sides, &Config::default()).ok()
    }

    /// The analysis the document holds, for its report and chart.
    pub(crate) fn analysis(&self) -> Analysis {
        Analysis {
            qcs: self.0.qcs.clone(),
            checks: self.0.checks.clone(),
            paragraph: self.0.paragraph.clone(),
        }
    }
}

impl Rendered for Analyze {
    fn title(&self) -> String {
        format!("ttp analyze (TTPv2): {} Q@C(s)", self.0.qcs.len())
    }
    fn text(&self) -> String {
        let mut s = render(&self.analysis(), self.0.correlations.as_deref());
        if let Some(c) = self.comparison() {
            s.push_str("\nComparison of the commands (interleaved QEs, the first command as A):\n");
            s.push_str(&crate::report::compare::text(&c));
        }
        for d in &self.0.qcs {
            let records: Vec<&QeRecord> = d.qes.iter().map(|q| &q.record).collect();
            if has_blame(&records) {
                s.push_str(&format!("{}:\n", d.name()));
                s.push_str(&blame_section(&records));
            }
        }
        s
    }
    fn table(&self) -> Table {
        qe_table(&self.0.qcs)
    }
    fn markdown(&self) -> String {
        let mut s = format!(
            "**{}**\n\n{}\n{}",
            self.title(),
            self.table().markdown(),
            results(&self.0.qcs)
        );
        if let Some(c) = self.comparison() {
            s.push_str("\n**Comparison of the commands**\n\n");
            s.push_str(&crate::report::compare::markdown(&c));
        }
        s
    }
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        svg(&self.analysis(), dir)
    }
}
