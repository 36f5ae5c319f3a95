//! `ttp.vprofile/1` (VProfiler's variance breakdown), read back: the
//! command's own text report and icicle chart (report/vprofile/), and one
//! row per ranked factor.
use std::path::{Path, PathBuf};

use super::{
    rendered::{RenderError, Rendered, write_plot},
    table::Table,
};
use crate::report::vprofile::{icicle, vprofile_text};
use ttp_vprofile::document::VprofileReport;

pub struct Vprofile(pub VprofileReport);

/// Tree nodes below this share of Var(root) are folded, as `vprofile`
/// prints them.
const MIN_SHARE: f64 = 0.01;

impl Rendered for Vprofile {
    fn title(&self) -> String {
        format!(
            "ttp vprofile: {} in {}, {} invocations",
            self.0.root, self.0.binary.path, self.0.invocations
        )
    }
    fn text(&self) -> String {
        vprofile_text(&self.0, MIN_SHARE)
    }
    /// Every factor, ranked by responsibility (VProfiler Algorithm 1,
    /// line 14): its share of Var(root), height and specificity (eq. 2).
    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "rank",
            "factor",
            "selected",
            "kept",
            "share",
            "contribution_ns2",
            "height",
            "specificity",
            "responsibility",
        ]);
        for f in &self.0.factors {
            t.push(vec![
                f.rank.to_string(),
                f.factor.clone(),
                f.selected.to_string(),
                f.kept.to_string(),
                format!("{:.4}", f.share),
                format!("{:.0}", f.contribution_ns2),
                f.height.to_string(),
                format!("{:.3}", f.specificity),
                format!("{:.4}", f.responsibility),
            ]);
        }
        t
    }
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        let svg = icicle(&self.0).map_err(|e| RenderError::Plot {
            what: "vprofile.svg".into(),
            detail: e.to_string(),
        })?;
        Ok(vec![write_plot(dir, "vprofile.svg", &svg)?])
    }
}
