//! The `statements` result, JSON `ttp.statements/1`.
use serde::{Deserialize, Serialize};

use super::{Group, GroupBy};

/// Probe counters over the window (losses are shown, never hidden). A
/// count read from the programs' counters is `None` (null) when they could
/// not be read (`counters_unread`), never 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeCounts {
    /// Probe program runs (every site, every process of the binary).
    pub hits: Option<u64>,
    /// Statement records the kernel sent.
    pub records: Option<u64>,
    /// Statement records lost (ring buffer full): those statements are
    /// missing from the groups.
    pub records_lost: Option<u64>,
    /// `query__done` without its start (statements under way at attach).
    pub done_without_start: Option<u64>,
    /// Statements started in processes that are not this server's
    /// backends (other servers running the same binary), left out.
    pub other_processes: Option<u64>,
    /// Backend threads that got no state (map full): their statements are
    /// missing.
    pub no_state: Option<u64>,
    pub text_unread: Option<u64>,
    /// Statements ended by an error (no `query__done`): not counted.
    pub restarted: Option<u64>,
    /// Mean time inside the probe program per hit, ns.
    pub mean_probe_ns: Option<f64>,
    /// Parallel workers' shares the kernel sent (docs/statements.md).
    #[serde(default)]
    pub worker_shares: Option<u64>,
    /// Socket boundaries: socket events in the backends, connection
    /// start-ups seen (not statements), statements open when their backend
    /// exited (not in the groups), of them killed by a signal.
    #[serde(default)]
    pub socket_events: Option<u64>,
    #[serde(default)]
    pub connections: Option<u64>,
    #[serde(default)]
    pub exited_open: Option<u64>,
    #[serde(default)]
    pub killed_open: Option<u64>,
    /// Requests that executed nothing (a bare Parse or Describe and Sync,
    /// as `-M prepared` sends once per statement and connection): not
    /// statements.
    #[serde(default)]
    pub prepares: Option<u64>,
    /// Shares joined to no statement (their leader's statement began before
    /// the probes or ended after the window): left out of the groups.
    #[serde(default)]
    pub worker_shares_unjoined: Option<u64>,
    /// Summed in the kernel (the default at the socket): statement keys
    /// in its map at the end (the `other` key included); `None` with a
    /// record a statement (`--each`, `--usdt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<u64>,
    /// Statements of new keys the kernel's map had no room for: summed
    /// under the `other` group, never lost.
    #[serde(default)]
    pub summed_other: Option<u64>,
    /// Key texts the text ring could not take at once (sent again at the
    /// key's next statement on that CPU).
    #[serde(default)]
    pub texts_lost: Option<u64>,
    /// Summed: key reads of the kernel's map that failed (the key's
    /// statements are missing from that read; a later read has them).
    #[serde(default)]
    pub sums_unread: u64,
    /// Reads of the programs' counters that failed while the document
    /// was built (then every count above that they give is null, not
    /// measured), and the error.
    #[serde(default)]
    pub counters_unread: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters_error: Option<String>,
}

/// One probe name's sites in the binary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAvailability {
    pub name: String,
    /// Sites in the binary.
    pub sites: usize,
    /// Whether the binary has the probe.
    pub available: bool,
    /// For an opt-in probe in the binary that was not attached: the
    /// `--detail` value that measures it (its wait is then absent from the
    /// groups, never 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured_without: Option<String>,
}

/// LWLock waits of one tranche over the window (all statements).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrancheRow {
    pub tranche: String,
    pub waits: u64,
    pub wait_ns: u64,
}

/// pg_stat_statements' view of one fingerprint over the same window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCheckRow {
    pub key: String,
    pub ttp_calls: u64,
    pub pgss_calls: u64,
    /// ttp's summed `execute` probe time, ns; with socket boundaries
    /// (`ttp_time_is_elapsed`) the statements' elapsed time, which
    /// contains the execution.
    pub ttp_execute_ns: u64,
    #[serde(default)]
    pub ttp_time_is_elapsed: bool,
    /// `total_exec_time` delta, ns.
    pub pgss_exec_ns: u64,
    /// Calls differ by more than the statements that can straddle the
    /// window's edges, or times by more than 5 %.
    pub disagrees: bool,
}

fn usdt() -> String {
    "usdt".into()
}

fn yes() -> bool {
    true
}

/// The whole result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementsReport {
    pub schema: String,
    pub postmaster: u32,
    pub binary: String,
    /// Where the statements' boundaries came from: `socket` (the client
    /// socket's reads and writes, wire.rs) or `usdt` (the server's
    /// query__start/done and executor probes). Results saved before the
    /// socket boundaries read `usdt`.
    #[serde(default = "usdt")]
    pub boundaries: String,
    /// Socket boundaries: where the text, query id and idle state came
    /// from (the backends' status entries), or why they were not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_entry: Option<String>,
    /// Whether the ledger ran beside the statements (its sleep, blocked
    /// and own/others' iowait): always with USDT boundaries, with
    /// `--ledger` at the socket.
    #[serde(default = "yes")]
    pub ledger: bool,
    /// How the probes' semaphores were enabled.
    pub semaphores: String,
    pub by: GroupBy,
    /// CLOCK_MONOTONIC ns: probes attached, and read for the last time.
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    /// Backend processes seen; `None` (null) where the programs' counters
    /// give it and could not be read (`counts.counters_unread`).
    pub backends: Option<usize>,
    pub statements: u64,
    /// Of them, statements of the extended query protocol (extended.rs);
    /// `None` when it was not seen (`--simple-only`, or the binary lacks
    /// the executor pair).
    #[serde(default)]
    pub extended_statements: Option<u64>,
    pub probes: Vec<ProbeAvailability>,
    pub counts: ProbeCounts,
    /// Every group (the text report shows the top N).
    pub groups: Vec<Group>,
    pub tranches: Vec<TrancheRow>,
    /// Present when pg_stat_statements was read.
    #[serde(default)]
    pub cross_check: Option<Vec<CrossCheckRow>>,
    /// Why the cross-check is absent, when it is.
    #[serde(default)]
    pub cross_check_note: Option<String>,
}
