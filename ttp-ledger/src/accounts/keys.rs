//! Keys that tell a thread or a process apart from a later one that
//! reuses its id, and an account's command name.
use serde::{Deserialize, Serialize};
use ttp_common::ThreadAccount;

/// A thread, told apart from a later thread that reuses its tid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadKey {
    pub tid: u32,
    pub start: u64,
}

impl ThreadKey {
    pub fn of(a: &ThreadAccount) -> Self {
        Self {
            tid: a.tid,
            start: a.start_time_ns,
        }
    }
}

/// A process instance: its tgid and its leader's start time as the ledger
/// keys threads (CLOCK_MONOTONIC ns; /proc starttime ticks for a leader
/// older than the probes, seeded from /proc; 0 when its leader was never
/// seen, e.g. one that exited before the window while other threads ran
/// on). Only its order matters: a later process of a tgid has a larger key.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct ProcKey {
    pub tgid: u32,
    pub start_ns: u64,
}

/// The comm bytes of an account as text.
pub fn comm(a: &ThreadAccount) -> String {
    let end = a.comm.iter().position(|&b| b == 0).unwrap_or(a.comm.len());
    String::from_utf8_lossy(&a.comm[..end]).into_owned()
}
