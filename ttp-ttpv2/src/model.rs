//! The measured data of one Q@C (query at cardinality): how it was run
//! ([`Setup`]), its labels and one [`QeRecord`] per query execution (QE).
//! The QE record itself — per-process measures (Sec. 3.5), overall
//! /proc/stat measures (Sec. 3.6), the process sets of App. B — is defined
//! in `ttp_window::window::record`, where the Fig. 5 sequence that fills it
//! lives, and is imported from there by every crate that reads it.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Free-text `key=value` labels of a Q@C (`--label cardinality=1000`).
pub type Labels = BTreeMap<String, String>;

/// The label whose numeric value orders the Q@Cs of one query for the
/// monotonicity checks (QC3/QC4, POST2/POST3).
pub(crate) const CARDINALITY_LABEL: &str = "cardinality";

/// The label that names the command of a Q@C when one run measures several
/// (`run --command-name`).
pub const NAME_LABEL: &str = "name";

use ttp_window::window::record::QeRecord;

/// How the Q@C was run; what the checks need to know beyond the records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// QEs the run was asked for (X1 counts the ones not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qes_requested: Option<u32>,
    /// Ticks per second of the /proc counters (USER_HZ).
    pub user_hz: u32,
    /// Online CPUs: overall /proc/stat ticks are summed over them.
    pub cpus: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `--query-process NAME`, when the query process was chosen by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_process: Option<String>,
    /// `--utility NAME` values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub utilities: Vec<String>,
    /// `run --parameter-scan NAME` / `-L NAME=…`: the label whose value
    /// plays the cardinality in the monotonicity checks (QC3/QC4,
    /// POST2/POST3) in place of `cardinality`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
    /// Restarts for a changed plan and retried transient failures
    /// (Sec. 3.2.3; [`super::recovery`]).
    #[serde(default, skip_serializing_if = "super::recovery::Recovery::is_empty")]
    pub recovery: super::recovery::Recovery,
    /// `run --warmup N`: executions run before QE 1 under the same
    /// conditions (the same steps before each), measured and shown, and
    /// not part of the Q@C: no check or statistic reads them
    /// (docs/ttpv2.md, "Warm-up executions").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmup: Vec<WarmUp>,
}

/// One warm-up execution as measured: what it cost, shown beside the QEs
/// so the one-time cost it absorbed can be seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WarmUp {
    /// Time_meas, ms.
    pub time_meas_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The query process's user and system ticks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_ticks: Option<u64>,
    /// The exact time: the query's on-CPU time plus its own-I/O wait
    /// (the ledger's), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_exact_ms: Option<f64>,
}

impl WarmUp {
    /// The summary of a measured execution.
    pub fn of(r: &QeRecord) -> Self {
        let q = r.query();
        let exact = q
            .as_ref()
            .and_then(|q| Some((q.ledger.on_cpu_ns? + q.ledger.iowait_own_ns?) as f64 / 1e6));
        WarmUp {
            time_meas_ms: r.time_meas_ms,
            exit_code: r.exit_code,
            u_ticks: q.as_ref().and_then(|q| q.u_ticks),
            s_ticks: q.as_ref().and_then(|q| q.s_ticks),
            time_exact_ms: exact,
        }
    }
}

impl Default for Setup {
    /// The paper's setting: USER_HZ 100 (10 ms ticks), one core.
    fn default() -> Self {
        Setup {
            qes_requested: None,
            user_hz: 100,
            cpus: 1,
            timeout_ms: None,
            query_process: None,
            utilities: Vec::new(),
            parameter: None,
            recovery: Default::default(),
            warmup: Vec::new(),
        }
    }
}

impl Setup {
    /// Length of one /proc tick in ms (10 ms in the paper, Sec. 3.7).
    pub(crate) fn tick_ms(&self) -> f64 {
        1000.0 / f64::from(self.user_hz.max(1))
    }

    /// The label that orders this Q@C among the others of its query:
    /// the scanned parameter, else `cardinality`.
    pub fn cardinality_label(&self) -> &str {
        self.parameter.as_deref().unwrap_or(CARDINALITY_LABEL)
    }
}

/// One Q@C as measured: the input of the protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QcInput {
    #[serde(default)]
    pub labels: Labels,
    /// Where the data came from (a file name), for messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The measured command and its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default)]
    pub setup: Setup,
    pub qes: Vec<QeRecord>,
}

impl QcInput {
    /// A short name for messages and reports.
    pub fn name(&self) -> String {
        qc_name(&self.labels, self.source.as_deref())
    }
}

/// How a report or chart titles a Q@C: the measured command (shortened to
/// [`TITLE_COMMAND_CHARS`]) and its labels, else its source, else "Q@C".
pub(crate) fn qc_title(labels: &Labels, source: Option<&str>, command: &[String]) -> String {
    let mut parts = Vec::new();
    if !command.is_empty() {
        let full = command.join(" ");
        let short: String = if full.chars().count() > TITLE_COMMAND_CHARS {
            let head: String = full.chars().take(TITLE_COMMAND_CHARS - 1).collect();
            format!("{head}…")
        } else {
            full
        };
        parts.push(format!("`{short}`"));
    }
    if !labels.is_empty() || parts.is_empty() {
        parts.push(qc_name(labels, source));
    }
    parts.join(" ")
}

/// Longest command shown in a title.
pub(crate) const TITLE_COMMAND_CHARS: usize = 60;

/// How a Q@C is named: its labels (`cardinality=1000 query=q1`), else its
/// source file, else "Q@C".
pub fn qc_name(labels: &Labels, source: Option<&str>) -> String {
    if labels.is_empty() {
        source.unwrap_or("Q@C").to_string()
    } else {
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::proc_of;
    use ttp_window::window::record::{Measures, ProcessClass};

    /// Catches a class sum that treats an unknown measure as zero.
    #[test]
    fn class_totals_sum_known_and_propagate_unknown() {
        let mut qe = QeRecord::new(1, 100.0);
        qe.processes.push(proc_of(ProcessClass::Daemon, 1, 3, 1, 0));
        let mut b = proc_of(ProcessClass::Daemon, 2, 4, 2, 0);
        b.m.vol_cs = None;
        qe.processes.push(b);
        let t = qe.class_totals(ProcessClass::Daemon);
        assert_eq!(t.u_ticks, Some(7));
        assert_eq!(t.su_ticks(), Some(10));
        assert_eq!(
            t.vol_cs, None,
            "one process lacks vol_cs, so the sum is unknown"
        );
        assert_eq!(qe.class_totals(ProcessClass::Utility).u_ticks, Some(0));
        assert!(qe.query().is_none());
    }

    /// Catches a sum that loses U+S when one side only knows the sum.
    #[test]
    fn su_only_measures_add_up() {
        let a = Measures {
            su_ticks: Some(19),
            ..Measures::default()
        };
        let b = Measures {
            u_ticks: Some(3),
            s_ticks: Some(1),
            ..Measures::default()
        };
        assert_eq!(a.plus(&b).su_ticks(), Some(23));
        assert_eq!(Measures::zero().plus(&b).su_ticks(), Some(4));
    }

    /// Catches X1 counting a timed-out QE (killed by our signal) as missing.
    #[test]
    fn missing_means_not_run_or_failed() {
        let mut qe = QeRecord::new(1, 1.0);
        qe.exit_code = Some(0);
        assert!(!qe.missing());
        qe.exit_code = Some(2);
        assert!(qe.missing());
        let mut t = QeRecord::new(2, 1.0);
        t.signal = Some(9);
        t.timed_out = Some(true);
        assert!(!t.missing());
        t.timed_out = Some(false);
        assert!(t.missing());
        let mut s = QeRecord::new(3, 0.0);
        s.spawn_error = Some("No such file".into());
        assert!(s.missing());
    }
}
