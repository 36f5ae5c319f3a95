//! Steps 1–5 of Sec. 8 over one or more Q@Cs, and the JSON documents that
//! carry the result (`ttp.run/1` for one measured Q@C, `ttp.analyze/1` for
//! an offline analysis).
use serde::{Deserialize, Serialize};

use super::calc::{QeCalc, calc_qe};
use super::checks::experiment::experiment_checks;
use super::checks::qc::qc_checks;
use super::checks::qe::{literal_checks, qe_checks};
use super::checks::{CheckResult, LiteralResult, aggregate};
use super::correlations::{CorrelationRow, correlations};
use super::drops::{Step3Drop, step2, step3};
use super::model::{Labels, QcInput, Setup};
use super::paragraph::{Paragraph, ParagraphInput, Wording};
use super::post::{Refined, post_checks};
use super::stats::Summary;
use ttp_ledger::collect::machine::MachineFacts;
use ttp_window::window::record::QeRecord;

pub const RUN_SCHEMA: &str = "ttp.run/1";
pub const ANALYZE_SCHEMA: &str = "ttp.analyze/1";

/// Summaries over the QEs kept by Step 2.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultStats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_calc_ms: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_meas_ms: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_exact_ms: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_calc_eq3_ms: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_calc_share_ms: Option<Summary>,
    /// S + U of the query (the CPU part, Sec. 10: "1620 ± 11 msec").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub su_query_ticks: Option<Summary>,
    /// IO_calc (the I/O part, Sec. 10: "370 ± 39 msec").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_calc_ticks: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_fraction_measured: Option<Summary>,
    /// Time_meas over every QE that ran, dropped or not: what was measured
    /// even when TTPv2 gives no result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_meas_all_ms: Option<Summary>,
    /// The exact time (ledger) over every QE that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_exact_all_ms: Option<Summary>,
}

/// The Q@C's result (Step 4). The times are `None` when Step 3 dropped the
/// Q@C; `stats` still describes the QEs Step 2 kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QcResult {
    /// Median Time_calc (eq. 2) over the retained QEs: the TTPv2 result.
    pub time_calc_ms: Option<f64>,
    /// Median exact time (ledger) over the same QEs.
    pub time_exact_ms: Option<f64>,
    /// Median Time_meas over the same QEs.
    pub time_meas_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_calc_eq3_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_calc_share_ms: Option<f64>,
    /// time_exact_ms − time_calc_ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_minus_calc_ms: Option<f64>,
    /// QEs retained (kept by Step 2 in a Q@C kept by Step 3).
    pub retained: usize,
    pub qes: usize,
    /// First Step 3 reason, when the Q@C was dropped.
    pub dropped_reason: Option<String>,
    /// When the Q@C was dropped: which Step 2 checks removed its QEs, in
    /// one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_result_why: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_by: Vec<Step3Drop>,
    pub stats: ResultStats,
}

/// One QE in the JSON: the record as measured, what Step 4 derived from it,
/// and the checks that dropped it in Step 2.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QeEntry {
    #[serde(flatten)]
    pub record: QeRecord,
    #[serde(flatten)]
    pub calc: QeCalc,
    pub dropped_by: Vec<String>,
}

/// One analysed Q@C.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QcDocument {
    #[serde(default)]
    pub labels: Labels,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    pub setup: Setup,
    pub qes: Vec<QeEntry>,
    pub result: QcResult,
}

impl QcDocument {
    /// How reports name the Q@C ([`super::model::qc_name`]).
    pub fn name(&self) -> String {
        super::model::qc_name(&self.labels, self.source.as_deref())
    }

    /// How reports and charts title the Q@C: the command and its labels
    /// ([`super::model::qc_title`]).
    pub fn title(&self) -> String {
        super::model::qc_title(&self.labels, self.source.as_deref(), &self.command)
    }
}

/// The outcome of Steps 1–5.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    pub qcs: Vec<QcDocument>,
    pub checks: Vec<CheckResult>,
    /// Sec. 9's paragraph, as the wording given to [`analyse`] put it.
    pub paragraph: String,
}

fn summary(xs: impl Iterator<Item = Option<f64>>) -> Option<Summary> {
    let v: Vec<f64> = xs.flatten().collect();
    Summary::of(&v)
}

fn result_of(
    qc: &QcInput,
    calcs: &[QeCalc],
    dropped_by: &[Vec<String>],
    drops: Vec<Step3Drop>,
) -> QcResult {
    let kept: Vec<(&QeRecord, &QeCalc)> = qc
        .qes
        .iter()
        .zip(calcs)
        .zip(dropped_by)
        .filter(|(_, d)| d.is_empty())
        .map(|(x, _)| x)
        .collect();
    let stats = ResultStats {
        time_calc_ms: summary(kept.iter().map(|(_, c)| c.time_calc_ms)),
        time_meas_ms: summary(kept.iter().map(|(q, _)| Some(q.time_meas_ms))),
        time_exact_ms: summary(kept.iter().map(|(_, c)| c.time_exact_ms)),
        time_calc_eq3_ms: summary(kept.iter().map(|(_, c)| c.time_calc_eq3_ms)),
        time_calc_share_ms: summary(kept.iter().map(|(_, c)| c.time_calc_share_ms)),
        su_query_ticks: summary(kept.iter().map(|(_, c)| {
            c.query
                .as_ref()
                .and_then(|q| q.su_ticks())
                .map(|v| v as f64)
        })),
        io_calc_ticks: summary(kept.iter().map(|(_, c)| c.io_calc_ticks)),
        others_fraction_measured: summary(kept.iter().map(|(_, c)| c.others_fraction_measured)),
        time_meas_all_ms: summary(
            qc.qes
                .iter()
                .filter(|q| q.spawn_error.is_none())
                .map(|q| Some(q.time_meas_ms)),
        ),
        time_exact_all_ms: summary(calcs.iter().map(|c| c.time_exact_ms)),
    };
    let dropped = !drops.is_empty();
    // Sec. 8.5: the Q@C's time is the median over the retained QEs.
    let med = |s: &Option<Summary>| {
        if dropped {
            None
        } else {
            s.as_ref().map(|s| s.median)
        }
    };
    let time_calc_ms = med(&stats.time_calc_ms);
    let time_exact_ms = med(&stats.time_exact_ms);
    QcResult {
        time_calc_ms,
        time_exact_ms,
        time_meas_ms: med(&stats.time_meas_ms),
        time_calc_eq3_ms: med(&stats.time_calc_eq3_ms),
        time_calc_share_ms: med(&stats.time_calc_share_ms),
        exact_minus_calc_ms: time_exact_ms.zip(time_calc_ms).map(|(e, c)| e - c),
        retained: if dropped { 0 } else { kept.len() },
        qes: qc.qes.len(),
        dropped_reason: drops.first().map(|d| d.reason.clone()),
        no_result_why: dropped.then(|| why_no_result(dropped_by)).flatten(),
        dropped_by: drops,
        stats,
    }
}

/// The Step 2 checks that dropped QEs, most frequent first, in one line
/// ("QE3 Zero Query Time dropped 10 of 10 QEs: …"); `None` when Step 2
/// dropped nothing (Step 3 alone decided).
fn why_no_result(dropped_by: &[Vec<String>]) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for id in dropped_by.iter().flatten() {
        match counts.iter_mut().find(|(i, _)| i == id) {
            Some((_, n)) => *n += 1,
            None => counts.push((id.clone(), 1)),
        }
    }
    // Most frequent first; QE3 leads when it fired: with zero query ticks
    // the other checks compare nothing measurable.
    counts.sort_by_key(|(id, k)| (id != "QE3", std::cmp::Reverse(*k)));
    let n = dropped_by.len();
    let parts: Vec<String> = counts
        .iter()
        .map(|(id, k)| {
            let name = super::checks::SPECS
                .iter()
                .find(|s| s.id == id)
                .map(|s| s.name.trim_start_matches("Percentage of ").trim_end_matches(" Violations"))
                .unwrap_or("");
            let why = match id.as_str() {
                "QE3" => " (the command used less than one tick of CPU and I/O wait; /proc ticks cannot time it)",
                _ => "",
            };
            format!("{id} {name}{why} dropped {k} of {n} QEs")
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Applies Steps 1–5 of TTPv2 to the Q@Cs of one experiment; the Sec. 9
/// paragraph's facts are worded by `wording` (ttp-user's report layer).
pub fn analyse(qcs: &[QcInput], machine: Option<&MachineFacts>, wording: Wording) -> Analysis {
    // Step 4's per-QE values are needed by the checks of Step 1.
    let calcs: Vec<Vec<QeCalc>> = qcs
        .iter()
        .map(|qc| qc.qes.iter().map(|q| calc_qe(q, &qc.setup)).collect())
        .collect();

    // Step 1.
    let mut checks = experiment_checks(qcs, &calcs);
    let qe_verdicts: Vec<_> = qcs
        .iter()
        .zip(&calcs)
        .map(|(qc, c)| qe_checks(qc, c))
        .collect();
    let literal: Vec<_> = qcs
        .iter()
        .zip(&calcs)
        .map(|(qc, c)| literal_checks(qc, c))
        .collect();
    let several = qcs.len() > 1;
    let qe_name = |qc: &QcInput, qe: &QeRecord| {
        if several {
            format!("{} qe {}", qc.name(), qe.qe)
        } else {
            format!("qe {}", qe.qe)
        }
    };
    for (k, id) in super::checks::qe::QE_IDS.iter().enumerate() {
        let mut items = Vec::new();
        for (qc, verdicts) in qcs.iter().zip(&qe_verdicts) {
            for (qe, v) in qc.qes.iter().zip(&verdicts[k].1) {
                items.push((qe_name(qc, qe), v));
            }
        }
        let mut result = aggregate(id, items);
        let mut lit_items = Vec::new();
        let mut rule = "";
        for (qc, lits) in qcs.iter().zip(&literal) {
            for (_, r, verdicts) in lits.iter().filter(|(lid, _, _)| lid == id) {
                rule = r;
                for (qe, v) in qc.qes.iter().zip(verdicts) {
                    lit_items.push((qe_name(qc, qe), v));
                }
            }
        }
        if !rule.is_empty() {
            result.paper_literal = LiteralResult::of(rule, lit_items);
        }
        checks.push(result);
    }
    let (qc_results, qc_flags) = qc_checks(qcs, &calcs);
    checks.extend(qc_results);

    // Steps 2 and 3.
    let dropped_by: Vec<Vec<Vec<String>>> = qcs
        .iter()
        .zip(&qe_verdicts)
        .map(|(qc, v)| step2(v, qc.qes.len()))
        .collect();
    let drops: Vec<Vec<Step3Drop>> = qcs
        .iter()
        .zip(&qc_flags)
        .zip(&dropped_by)
        .map(|((qc, f), d)| step3(qc, f, d))
        .collect();
    let qc_dropped: Vec<bool> = drops.iter().map(|d| !d.is_empty()).collect();

    // Step 5.
    checks.extend(post_checks(&Refined {
        qcs,
        calcs: &calcs,
        dropped_by: &dropped_by,
        qc_dropped: &qc_dropped,
    }));

    // Step 4 and the documents.
    let docs: Vec<QcDocument> = qcs
        .iter()
        .zip(calcs)
        .zip(dropped_by)
        .zip(drops)
        .map(|(((qc, calcs), dropped_by), drops)| {
            let result = result_of(qc, &calcs, &dropped_by, drops);
            QcDocument {
                labels: qc.labels.clone(),
                source: qc.source.clone(),
                command: qc.command.clone(),
                setup: qc.setup.clone(),
                qes: qc
                    .qes
                    .iter()
                    .cloned()
                    .zip(calcs)
                    .zip(dropped_by)
                    .map(|((record, calc), dropped_by)| QeEntry {
                        record,
                        calc,
                        dropped_by,
                    })
                    .collect(),
                result,
            }
        })
        .collect();

    let qes_total = docs.iter().map(|d| d.qes.len()).sum();
    let qes_dropped = docs
        .iter()
        .flat_map(|d| &d.qes)
        .filter(|q| !q.dropped_by.is_empty())
        .count();
    let facts = Paragraph::of(&ParagraphInput {
        machine,
        qcs,
        checks: &checks,
        qes_total,
        qes_dropped,
        qcs_dropped: qc_dropped.iter().filter(|d| **d).count(),
        exact_reported: docs.iter().any(|d| d.result.time_exact_ms.is_some()),
    });
    Analysis {
        qcs: docs,
        checks,
        paragraph: wording(&facts),
    }
}

/// The `--json` document of `ttp-ebpf run`: one Q@C with every measure of
/// every QE, what the protocol derived, its checks and the paragraph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDocument {
    pub schema: String,
    #[serde(flatten)]
    pub qc: QcDocument,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineFacts>,
    pub checks: Vec<CheckResult>,
    pub paragraph: String,
}

impl RunDocument {
    /// Applies the protocol to the Q@C measured so far. Call it after every
    /// QE and write the result, so an interrupted run keeps its QEs.
    pub fn new(qc: &QcInput, machine: Option<&MachineFacts>, wording: Wording) -> RunDocument {
        let mut a = analyse(std::slice::from_ref(qc), machine, wording);
        RunDocument {
            schema: RUN_SCHEMA.into(),
            qc: a.qcs.remove(0),
            machine: machine.cloned(),
            checks: a.checks,
            paragraph: a.paragraph,
        }
    }
}

impl RunDocument {
    /// The analysis this document holds, for the terminal report
    /// (ttp-user, `report::ttpv2::text`).
    pub fn to_analysis(&self) -> Analysis {
        Analysis {
            qcs: vec![self.qc.clone()],
            checks: self.checks.clone(),
            paragraph: self.paragraph.clone(),
        }
    }
}

/// The raw part of a saved run JSON: what `analyze` re-reads. Derived
/// fields in the file are ignored and recomputed.
#[derive(Clone, Debug, Deserialize)]
pub struct SavedRun {
    pub schema: String,
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub setup: Setup,
    #[serde(default)]
    pub machine: Option<MachineFacts>,
    pub qes: Vec<QeRecord>,
}

impl SavedRun {
    pub fn into_input(self) -> (QcInput, Option<MachineFacts>) {
        (
            QcInput {
                labels: self.labels,
                source: self.source,
                command: self.command,
                setup: self.setup,
                qes: self.qes,
            },
            self.machine,
        )
    }
}

/// The `--json` document of `ttp-ebpf analyze`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnalyzeDocument {
    pub schema: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineFacts>,
    pub qcs: Vec<QcDocument>,
    pub checks: Vec<CheckResult>,
    pub paragraph: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlations: Option<Vec<CorrelationRow>>,
}

/// Correlations over the QEs the protocol retained: kept by Step 2, in a
/// Q@C kept by Step 3. `qcs` and `analysis.qcs` are in the same order.
pub fn retained_correlations(qcs: &[QcInput], analysis: &Analysis) -> Vec<CorrelationRow> {
    let pairs: Vec<(&QcInput, &QeRecord)> = qcs
        .iter()
        .zip(&analysis.qcs)
        .filter(|(_, d)| d.result.dropped_reason.is_none())
        .flat_map(|(qc, d)| {
            qc.qes
                .iter()
                .zip(&d.qes)
                .filter(|(_, e)| e.dropped_by.is_empty())
                .map(move |(qe, _)| (qc, qe))
        })
        .collect();
    correlations(&pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{clean_qc, facts_json, proc_of};
    use ttp_window::window::record::{ProcKey, ProcessClass, ProcessSets};

    /// A run JSON written and read back is the same document, and `analyze`
    /// recovers exactly the measured records from it. Catches a field that
    /// serde flattening loses or renames.
    #[test]
    fn run_document_round_trip() {
        let mut qc = clean_qc(7);
        qc.labels.insert("cardinality".into(), "1000".into());
        qc.qes[0].plan = Some("Seq Scan on t".into());
        qc.qes[0].time_meas_ns = Some(2_500_000_000);
        qc.qes[1].processes[0].m.ledger.on_cpu_ns = Some(1_600_000_000);
        qc.qes[1].processes[0].m.ledger.iowait_own_ns = Some(300_000_000);
        qc.qes[1].processes[0].m.ledger.iowait_share_ns = Some(100_000_000);
        qc.qes[1].overall.iowait_ns = Some(200_000_000);
        qc.qes[2].overall.iowait_ticks = Some(45); // dropped by QE9
        qc.qes[3].process_sets = Some(ProcessSets {
            m1: vec![ProcKey {
                pid: 1,
                start_time_ns: 1001,
            }],
            m2: vec![],
            stopped: vec![],
            continuing: Some(vec![]),
        });
        qc.qes[4]
            .processes
            .push(proc_of(ProcessClass::Utility, 77, 1, 1, 0));
        let machine = MachineFacts {
            cores: Some(2),
            ..MachineFacts::default()
        };
        let doc = RunDocument::new(&qc, Some(&machine), facts_json);
        assert_eq!(doc.qc.qes[2].dropped_by, vec!["QE9".to_string()]);
        assert_eq!(doc.qc.qes[3].dropped_by, vec!["QE1".to_string()]);
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let back: RunDocument = serde_json::from_str(&text).unwrap();
        assert_eq!(back, doc);
        let saved: SavedRun = serde_json::from_str(&text).unwrap();
        assert_eq!(saved.schema, RUN_SCHEMA);
        let (input, m) = saved.into_input();
        assert_eq!(input, qc);
        assert_eq!(m, Some(machine));
        // The documented field names are where docs/ttpv2.md says.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in [
            "qe",
            "time_meas_ms",
            "query",
            "io_calc_ticks",
            "time_calc_ms",
            "time_exact_ms",
            "dropped_by",
        ] {
            assert!(v["qes"][1].get(key).is_some(), "qes[1].{key} missing");
        }
        for key in [
            "time_calc_ms",
            "time_exact_ms",
            "time_meas_ms",
            "retained",
            "dropped_reason",
        ] {
            assert!(v["result"].get(key).is_some(), "result.{key} missing");
        }
        assert!(v["checks"][0].get("violations").is_some());
        assert_eq!(v["schema"], "ttp.run/1");
    }

    /// Five good QEs of seven: Step 3 (iv) drops the Q@C; no result time,
    /// but the stats of the kept QEs remain. Catches a result reported for
    /// a dropped Q@C.
    #[test]
    fn dropped_qc_has_no_result() {
        let mut qc = clean_qc(7);
        qc.qes[0].timed_out = Some(true);
        qc.qes[1].timed_out = Some(true);
        let a = analyse(&[qc], None, facts_json);
        let r = &a.qcs[0].result;
        assert_eq!(r.time_calc_ms, None);
        assert_eq!(r.retained, 0);
        assert!(r.dropped_reason.as_ref().unwrap().contains("(iv)"));
        assert_eq!(r.stats.time_calc_ms.as_ref().unwrap().n, 5);
        assert!(a.paragraph.contains(r#""qcs":1,"#), "{}", a.paragraph);
        assert!(
            a.paragraph.contains(r#""qcs_dropped":1,"#),
            "{}",
            a.paragraph
        );
    }

    /// Hand-computed: clean QEs 1..8 have Time_calc (U + 40) × 10 with
    /// U = 151,152,153,150,151,152,153,150 → median 1915 ms.
    #[test]
    fn clean_qc_result() {
        let a = analyse(&[clean_qc(8)], None, facts_json);
        let r = &a.qcs[0].result;
        assert_eq!(r.time_calc_ms, Some(1915.0));
        assert_eq!(r.time_meas_ms, Some(2500.0));
        assert_eq!(r.retained, 8);
        assert_eq!(r.dropped_reason, None);
        assert!(
            a.checks
                .iter()
                .filter(|c| c.id.starts_with("QE"))
                .all(|c| !c.violated())
        );
    }
}
