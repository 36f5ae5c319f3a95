//! An experiment of the lab as `ttp.study/1` studies, one per host label:
//! what `analyze --lab` analyses and `lab export` writes (docs/lab.md,
//! "Analysis, export and import"). A Q@C is a done task: its QEs are the
//! rows of `ttp_lab_qes` of the attempt `ttp_lab_qc_results` names (never
//! an abandoned attempt's), its labels, command and setup those of the run
//! JSON of that result, with the label `host_label` added so Q@Cs of one
//! command on two host labels stay two Q@Cs. The study's machine is the
//! machine of the label's first Q@C (TTPv2 Sec. 9 describes one machine
//! per study).
use std::collections::BTreeSet;

use serde::Deserialize;

use super::Lab;
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::error::UsageError;
use ttp_ttpv2::model::{Labels, QcInput, Setup};
use ttp_ttpv2::study::{STUDY_SCHEMA, StudyHeader, StudyQc};
use ttp_window::window::record::QeRecord;

/// The label a lab Q@C carries its host label in.
pub(crate) const HOST_LABEL: &str = "host_label";

/// The Q@Cs of one host label of an experiment.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LabStudy {
    pub host_label: String,
    pub header: StudyHeader,
    pub qcs: Vec<StudyQc>,
}

impl LabStudy {
    /// The Q@Cs and machine as `analyze` reads a study file
    /// (`read_study`): each Q@C named after where it came from.
    pub(crate) fn for_analysis(&self, source: &str) -> (Vec<QcInput>, Option<MachineFacts>) {
        let qcs = self
            .qcs
            .iter()
            .map(|l| {
                let mut qc = l.qc.clone();
                qc.source.get_or_insert_with(|| source.to_string());
                qc
            })
            .collect();
        (qcs, self.header.machine.clone())
    }
}

/// What a Q@C result (a `ttp.run/1` document) contributes besides its QEs.
#[derive(Deserialize)]
struct ResultDoc {
    #[serde(default)]
    labels: Labels,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    setup: Setup,
    #[serde(default)]
    machine: Option<MachineFacts>,
    #[serde(default)]
    postgres: Option<serde_json::Value>,
}

/// The experiment `name` as one study per host label (ordered by label,
/// Q@Cs by task), from its done tasks. An unknown experiment is a usage
/// error that names the experiments there are.
pub(crate) fn read_experiment(lab: &mut Lab, name: &str) -> anyhow::Result<Vec<LabStudy>> {
    let q = "SELECT spec::text, ((extract(epoch FROM submitted_at) * 1000000)::bigint * 1000)::bigint \
             FROM ttp_lab_experiments WHERE name = $1";
    let rows = lab
        .block_on(lab.client.query(q, &[&name]))
        .map_err(|e| lab.err(q, e))?;
    let Some(row) = rows.first() else {
        let q =
            "SELECT coalesce(string_agg(name, ', ' ORDER BY name), '') FROM ttp_lab_experiments";
        let names: String = lab
            .block_on(lab.client.query_one(q, &[]))
            .map_err(|e| lab.err(q, e))?
            .get(0);
        let there = if names.is_empty() {
            "the lab has none".to_string()
        } else {
            format!("it has: {names}")
        };
        return Err(UsageError::new(format!(
            "no experiment {name:?} in the lab ({}); {there}",
            lab.target
        ))
        .into());
    };
    let spec: serde_json::Value = serde_json::from_str(row.get::<_, &str>(0))?;
    if spec.get(super::spec::NO_RUN_KEY) == Some(&serde_json::Value::Bool(true)) {
        return Err(UsageError::new(format!(
            "experiment {name:?} is a queue benchmark (no_run = true): its tasks were finished by `lab worker --no-run` without being run, so it has no measured Q@C"
        ))
        .into());
    }
    let created_unix_ns = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
    let q = "SELECT t.host_label, r.worker, r.result::text, \
               (SELECT coalesce(json_agg(q.record ORDER BY q.qe), '[]'::json)::text FROM ttp_lab_qes q \
                WHERE q.task_id = t.id AND q.attempt = r.attempt) \
             FROM ttp_lab_tasks t JOIN ttp_lab_qc_results r ON r.task_id = t.id \
             WHERE t.experiment = $1 AND t.state = 'done' ORDER BY t.host_label, t.id";
    let rows = lab
        .block_on(lab.client.query(q, &[&name]))
        .map_err(|e| lab.err(q, e))?;
    let mut studies: Vec<LabStudy> = Vec::new();
    let mut workers: Vec<BTreeSet<String>> = Vec::new();
    for r in &rows {
        let label: String = r.get(0);
        let worker: String = r.get(1);
        let doc: ResultDoc = serde_json::from_str(r.get::<_, &str>(2))
            .map_err(|e| anyhow::anyhow!("a Q@C result of {name:?} on {label}: {e}"))?;
        let qes: Vec<QeRecord> = serde_json::from_str(r.get::<_, &str>(3))
            .map_err(|e| anyhow::anyhow!("a QE of {name:?} on {label}: {e}"))?;
        if studies.last().is_none_or(|s| s.host_label != label) {
            studies.push(LabStudy {
                host_label: label.clone(),
                header: StudyHeader {
                    schema: STUDY_SCHEMA.into(),
                    kind: "header".into(),
                    spec: spec.clone(),
                    machine: doc.machine.clone(),
                    created_unix_ns,
                },
                qcs: Vec::new(),
            });
            workers.push(BTreeSet::new());
        }
        let mut labels = doc.labels;
        labels.insert(HOST_LABEL.into(), label.clone());
        let qc = QcInput {
            labels,
            source: None,
            command: doc.command,
            setup: doc.setup,
            qes,
        };
        studies
            .last_mut()
            .expect("pushed above")
            .qcs
            .push(StudyQc::new(qc, doc.postgres));
        workers.last_mut().expect("pushed above").insert(worker);
    }
    // Tasks not done are not Q@Cs of the analysis; the paragraph says how
    // many there were, so a partial experiment is not read as a whole one.
    let q = "SELECT host_label, count(*) FILTER (WHERE state = 'failed'), \
               count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'running'), count(*) \
             FROM ttp_lab_tasks WHERE experiment = $1 GROUP BY host_label";
    let rows = lab
        .block_on(lab.client.query(q, &[&name]))
        .map_err(|e| lab.err(q, e))?;
    for r in &rows {
        let label: String = r.get(0);
        let (failed, pending, running, all): (i64, i64, i64, i64) =
            (r.get(1), r.get(2), r.get(3), r.get(4));
        let left = failed + pending + running;
        if left == 0 {
            continue;
        }
        if let Some(m) = studies
            .iter_mut()
            .find(|s| s.host_label == label)
            .and_then(|s| s.header.machine.as_mut())
        {
            m.deviations.push(format!(
                "{left} of the {all} tasks of host label {label} are not done ({failed} failed, {pending} pending, {running} running); their Q@Cs are not part of this analysis"
            ));
        }
    }
    for (s, w) in studies.iter_mut().zip(workers) {
        if w.len() > 1
            && let Some(m) = s.header.machine.as_mut()
        {
            // Sec. 9 describes one machine; say that several measured.
            m.deviations.push(format!(
                "the Q@Cs of host label {} were measured by {} workers ({}); the machine facts are those of the first Q@C's",
                s.host_label,
                w.len(),
                w.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(studies)
}
