//! `ttp.compare/1` (`compare --json`), read back: the comparison's own
//! terminal report, Markdown and strip plots (report/compare), and one row
//! per candidate and measure.
use std::path::{Path, PathBuf};

use super::{
    rendered::{RenderError, Rendered},
    table::Table,
};
use crate::report::compare::{markdown, svg::write_svgs, text};
use ttp_compare::CompareDocument;

pub struct Compared(pub CompareDocument);

impl Rendered for Compared {
    fn title(&self) -> String {
        format!(
            "ttp compare ({}): {} file(s) against {}",
            self.0.kind,
            self.0.files.len().saturating_sub(1),
            self.0.files.first().map_or("?", |f| f.path.as_str())
        )
    }
    fn text(&self) -> String {
        text(&self.0)
    }
    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "candidate",
            "measure",
            "centre",
            "baseline",
            "candidate_centre",
            "ratio",
            "ci_lower",
            "ci_upper",
            "p",
            "p_holm",
            "verdict",
        ]);
        for c in &self.0.comparisons {
            if let Some(v) = &c.vprofile {
                let s = |x: Option<f64>| x.map_or(String::new(), |x| x.to_string());
                let ci = |x: Option<[f64; 2]>, i: usize| s(x.map(|c| c[i]));
                t.push(vec![
                    c.candidate.clone(),
                    "root_mean_ns".into(),
                    "mean".into(),
                    v.mean_baseline_ns.to_string(),
                    v.mean_candidate_ns.to_string(),
                    s(v.mean_ratio),
                    ci(v.mean_ratio_ci, 0),
                    ci(v.mean_ratio_ci, 1),
                    s(v.welch.as_ref().map(|w| w.p)),
                    v.p_mean_holm.to_string(),
                    v.mean_verdict.clone(),
                ]);
                let f = v.f_test.as_ref();
                t.push(vec![
                    c.candidate.clone(),
                    "root_variance_ns2".into(),
                    "variance".into(),
                    v.variance_baseline_ns2.to_string(),
                    v.variance_candidate_ns2.to_string(),
                    s(f.map(|f| f.f)),
                    ci(f.map(|f| f.ratio_ci), 0),
                    ci(f.map(|f| f.ratio_ci), 1),
                    s(f.map(|f| f.p)),
                    v.p_variance_holm.to_string(),
                    v.variance_verdict.clone(),
                ]);
            }
            for m in &c.measures {
                let ci = m.ci.as_ref();
                t.push(vec![
                    c.candidate.clone(),
                    m.measure.clone(),
                    m.centre.name().into(),
                    m.baseline.centre.to_string(),
                    m.candidate.centre.to_string(),
                    m.ratio.map_or(String::new(), |r| r.to_string()),
                    ci.map_or(String::new(), |c| c.lower.to_string()),
                    ci.map_or(String::new(), |c| c.upper.to_string()),
                    m.p.to_string(),
                    m.p_holm.to_string(),
                    m.verdict.text.clone(),
                ]);
            }
        }
        t
    }
    fn markdown(&self) -> String {
        markdown(&self.0)
    }
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        write_svgs(&self.0, dir)
    }
}
