//! The choices of the analysis left to the user.
use serde::{Deserialize, Serialize};

use super::cause::GroupBy;

/// How disk consumption δr is counted (Sec. 5.2 uses bytes read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiskMeasure {
    Bytes,
    Requests,
}

/// Choices left to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub disk_by: DiskMeasure,
    pub group_by: GroupBy,
    /// Process-name prefixes treated as known causes (Sec. 5.1), besides
    /// kernel threads.
    pub known_comms: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            disk_by: DiskMeasure::Bytes,
            group_by: GroupBy::Unit,
            known_comms: Vec::new(),
        }
    }
}
