//! Who a cause is: the paper's three categories of slowdown (Sec. 3.2,
//! eq. 5) — concurrent tasks, known processes, unknown — plus the victim's
//! own other threads, and the group a culprit process belongs to (the
//! top level of the graph, Sec. 4.1 Level-6).
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::input::TaskInfo;

use ttp_window::window::blame_record::CauseKind;

/// What the top level of the graph groups culprit processes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// systemd unit, else the cgroup path, else the user.
    Unit,
    /// cgroup path, else the user.
    Cgroup,
    /// User name, else uid.
    User,
}

/// Group label of the victim's own threads.
pub(crate) const GROUP_VICTIM: &str = "[victim]";
/// Group label of kernel threads.
pub(crate) const GROUP_KERNEL: &str = "[kernel threads]";
/// Label of the unknown cause.
pub(crate) const UNKNOWN: &str = "[unknown]";

/// Classifies the threads of one recording.
#[derive(Debug, Clone)]
pub struct Classifier {
    victim: BTreeSet<u32>,
    known_comms: Vec<String>,
    group_by: GroupBy,
    tasks: BTreeMap<u32, TaskInfo>,
}

impl Classifier {
    /// `victim` holds task ids; `known_comms` are name prefixes of processes
    /// treated as known causes besides kernel threads.
    pub fn new(
        tasks: &[TaskInfo],
        victim: BTreeSet<u32>,
        known_comms: &[String],
        group_by: GroupBy,
    ) -> Self {
        Self {
            victim,
            known_comms: known_comms.to_vec(),
            group_by,
            tasks: tasks.iter().map(|t| (t.id, t.clone())).collect(),
        }
    }

    pub(crate) fn task(&self, id: u32) -> Option<&TaskInfo> {
        self.tasks.get(&id)
    }

    pub(crate) fn is_victim(&self, id: u32) -> bool {
        self.victim.contains(&id)
    }

    pub(crate) fn victim_ids(&self) -> &BTreeSet<u32> {
        &self.victim
    }

    pub(crate) fn tasks(&self) -> impl Iterator<Item = &TaskInfo> {
        self.tasks.values()
    }

    /// The main thread of process `pid` (tid = pid), else any of its threads.
    pub(crate) fn process_task(&self, pid: u32) -> Option<&TaskInfo> {
        let mut threads = self.tasks.values().filter(|t| t.pid == pid);
        let first = threads.next()?;
        Some(
            std::iter::once(first)
                .chain(threads)
                .find(|t| t.tid == pid)
                .unwrap_or(first),
        )
    }

    /// Category of task `id` as a cause of the victim's blocked time.
    pub fn kind(&self, id: u32) -> CauseKind {
        let Some(t) = self.tasks.get(&id) else {
            return CauseKind::Unknown;
        };
        if self.victim.contains(&id) {
            CauseKind::Own
        } else if t.kernel_thread
            || self
                .known_comms
                .iter()
                .any(|k| t.process_name().starts_with(k.as_str()) || t.comm.starts_with(k.as_str()))
        {
            CauseKind::Known
        } else {
            CauseKind::Concurrent
        }
    }

    /// The group (graph top level) of task `id`.
    pub fn group(&self, id: u32) -> String {
        let Some(t) = self.tasks.get(&id) else {
            return UNKNOWN.to_string();
        };
        if self.victim.contains(&id) {
            return GROUP_VICTIM.to_string();
        }
        if t.kernel_thread {
            return GROUP_KERNEL.to_string();
        }
        let user = || match (&t.user, t.uid) {
            (Some(u), _) => format!("user {u}"),
            (None, Some(uid)) => format!("uid {uid}"),
            (None, None) => "[no group]".to_string(),
        };
        let cgroup = || t.cgroup.as_ref().map(|c| format!("cgroup {c}"));
        match self.group_by {
            GroupBy::Unit => t.unit.clone().or_else(cgroup).unwrap_or_else(user),
            GroupBy::Cgroup => cgroup().unwrap_or_else(user),
            GroupBy::User => user(),
        }
    }
}
