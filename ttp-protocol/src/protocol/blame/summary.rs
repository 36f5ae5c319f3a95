//! A compact blame result for one stretch of time, kept inside another
//! report: each QE of `run --blame` carries one (which processes made that
//! execution slow), built from the full [`BlameReport`] of its windows.
use std::fmt::Write;

use super::{BlameReport, fmt_ns};

pub use crate::window::blame_record::BlameSummary;

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

/// Lines for the run report: blocked time per resource, then the
/// explanations, each indented under a `QE n` heading.
pub fn summary_text(b: &BlameSummary, qe: u32, top: usize) -> String {
    let mut s = String::new();
    let per_resource: Vec<String> = b
        .resources
        .iter()
        .filter(|r| r.blocked_measured && r.blocked_ns > 0)
        .map(|r| format!("{} {}", r.resource.name(), fmt_ns(r.blocked_ns as f64)))
        .collect();
    let _ = writeln!(
        s,
        "  QE {qe}: blocked {}{}",
        fmt_ns(b.blocked_ns() as f64),
        if per_resource.is_empty() {
            String::new()
        } else {
            format!(" ({})", per_resource.join(", "))
        }
    );
    for e in b.explanations.iter().take(top) {
        let _ = writeln!(s, "    {}. {}", e.rank, e.text);
    }
    s
}
