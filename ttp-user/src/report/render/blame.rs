//! `ttp.blame/1` (iQCAR contention blame), read back: the protocol's
//! terminal report, a per-culprit table, and its graph in DOT.
use std::path::{Path, PathBuf};

use super::{
    rendered::{RenderError, Rendered, write_plot},
    table::{Table, ms3},
};
use crate::report::blame::{blame_text, dot};
use ttp_blame::BlameReport;

pub struct Blame {
    pub report: BlameReport,
    /// Explanations and culprits listed in the text (`blame --top`).
    pub top: usize,
}

/// Culprits and explanations shown, as `blame --top` defaults to.
pub(crate) const TOP: usize = 10;

impl Blame {
    /// A saved report, shown with the default `--top`.
    pub(crate) fn new(report: BlameReport) -> Self {
        Self { report, top: TOP }
    }
}

impl Rendered for Blame {
    fn title(&self) -> String {
        format!(
            "ttp blame: pid {} {}, {} culprit(s)",
            self.report.victim.pid,
            self.report.victim.comm,
            self.report.culprits.len()
        )
    }
    fn text(&self) -> String {
        blame_text(&self.report, self.top)
    }
    /// Per culprit: ttp's blame (iQCAR eq. 7–8 with blocked time) beside
    /// the overlap baseline's, and its Degree of Responsibility (Sec. 4.2).
    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "pid",
            "process",
            "group",
            "kind",
            "blame_ms",
            "dor",
            "overlap_blame_ms",
        ]);
        for c in &self.report.culprits {
            t.push(vec![
                c.pid.map(|p| p.to_string()).unwrap_or_default(),
                c.process.clone(),
                c.group.clone(),
                c.kind.name().to_string(),
                ms3(Some(c.blame_ns)),
                format!("{:.3}", c.dor),
                ms3(Some(c.overlap_blame_ns)),
            ]);
        }
        t
    }
    /// The blame graph in Graphviz DOT (`dot -Tsvg blame.dot`), as
    /// `blame --dot` writes it.
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        let title = format!(
            "ttp blame: pid {} {}",
            self.report.victim.pid, self.report.victim.comm
        );
        Ok(vec![write_plot(
            dir,
            "blame.dot",
            &dot::render(&self.report.graph, &title),
        )?])
    }
}
