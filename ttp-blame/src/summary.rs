//! A compact blame result for one stretch of time, kept inside another
//! report: each QE of `run --blame` carries one (which processes made that
//! execution slow), built from the full [`BlameReport`] of its windows.
//! ttp-user's `report::blame` prints it under its QE.
use super::BlameReport;

use ttp_window::window::blame_record::BlameSummary;

impl BlameReport {
    /// The summary kept per QE: every resource, the `top` culprits and
    /// explanations.
    pub fn summary(&self, top: usize) -> BlameSummary {
        BlameSummary {
            window_ns: self.window_ns,
            windows: self.windows,
            resources: self.resources.clone(),
            culprits: self.culprits.iter().take(top).cloned().collect(),
            explanations: self.explanations.iter().take(top).cloned().collect(),
        }
    }
}
