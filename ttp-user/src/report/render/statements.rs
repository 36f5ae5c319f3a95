//! `ttp.statements/1`, read back: the command's own text report and chart,
//! and one row per statement group.
use std::path::{Path, PathBuf};

use super::{
    rendered::{RenderError, Rendered, write_plot},
    table::Table,
};
use crate::report::statements::{svg::stacked, text};
use ttp_statements::document::StatementsReport;

/// Groups shown in the text and the chart.
pub(crate) const TOP: usize = 20;

pub(crate) struct Statements(pub StatementsReport, pub usize);

impl Rendered for Statements {
    fn title(&self) -> String {
        format!(
            "ttp statements: postmaster {}, {} statements",
            self.0.postmaster, self.0.statements
        )
    }
    fn text(&self) -> String {
        text(&self.0, self.1)
    }
    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "key",
            "calls",
            "elapsed_ns",
            "on_cpu_ns",
            "runq_wait_ns",
            "iowait_ns",
            "iowait_own_ns",
            "lock_wait_ns",
            "p50_ns",
            "p99_ns",
            "explained_by",
        ]);
        for g in &self.0.groups {
            t.push(vec![
                g.key.clone(),
                g.calls.to_string(),
                g.elapsed_ns.to_string(),
                g.on_cpu_ns.to_string(),
                g.runq_wait_ns.to_string(),
                g.iowait_ns.to_string(),
                g.iowait_own_ns.map_or_else(String::new, |v| v.to_string()),
                g.waits
                    .get("lock_wait")
                    .map_or_else(String::new, |w| w.wait_ns.to_string()),
                g.latency.p50_ns.to_string(),
                g.latency.p99_ns.to_string(),
                g.variance
                    .as_ref()
                    .map_or_else(String::new, |v| v.explained_by.clone()),
            ]);
        }
        t
    }
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        let svg = stacked(&self.0, self.1).map_err(|detail| RenderError::Plot {
            what: "statements.svg".into(),
            detail,
        })?;
        Ok(vec![write_plot(dir, "statements.svg", &svg)?])
    }
}
