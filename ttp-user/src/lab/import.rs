//! `lab import`: an existing `ttp.study/1` study brought into the lab as a
//! done experiment, so that studies measured before the lab (or exported
//! from another lab) are analysed with the rest (docs/lab.md, "Analysis,
//! export and import"). Each Q@C becomes a done task of the study's host
//! label, attempt 1 by the worker `import`, with its QE rows and a
//! `ttp.run/1` result; all in one transaction. Importing the same study
//! again changes nothing; a study whose Q@Cs differ from the lab's, or
//! whose spec differs from the experiment's of that name, is refused and
//! nothing is written.
use sha2::{Digest, Sha256};

use super::study::HOST_LABEL;
use super::{Lab, queue::err, spec::LabSpec};
use ttp_sys::error::UsageError;
use ttp_ttpv2::model::qc_name;
use ttp_ttpv2::study::{StudyHeader, StudyQc};
use ttp_window::window::record::QeRecord;

/// The worker name imported Q@Cs are recorded under.
pub(crate) const IMPORT_WORKER: &str = "import";

/// What `import` did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Imported {
    /// This many Q@Cs were new (and the experiment, when `created`).
    New { qcs: usize, created: bool },
    /// Every Q@C was already in the lab, with the same QEs.
    Unchanged,
}

/// The hash an experiment's spec is known by: a lab command spec's own
/// (`lab submit`'s, so a spec imported and then submitted is the same
/// experiment), else SHA-256 of the spec's JSON.
pub(crate) fn spec_hash(spec: &serde_json::Value) -> String {
    if let Ok(s) = serde_json::from_value::<LabSpec>(spec.clone()) {
        return s.hash();
    }
    Sha256::digest(spec.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A Q@C's task key: the name of the lab command it measured (as `lab
/// submit` keys its tasks), else its labels other than the host label
/// (`cardinality=1000 query=q1`).
pub(crate) fn task_key(spec: Option<&LabSpec>, qc: &StudyQc) -> String {
    if let Some(c) = spec.and_then(|s| s.command_of(&qc.qc.labels, &qc.qc.command)) {
        return c.name.clone();
    }
    let mut labels = qc.qc.labels.clone();
    labels.remove(HOST_LABEL);
    qc_name(&labels, None)
}

/// Brings the study (`header`, `qcs`, read from `source`) into the lab as
/// experiment `name` on `host_label`.
pub(crate) fn import(
    lab: &mut Lab,
    header: &StudyHeader,
    qcs: &[StudyQc],
    name: &str,
    host_label: &str,
    source: &str,
) -> anyhow::Result<Imported> {
    let refuse = |msg: String| -> anyhow::Result<Imported> { Err(UsageError::new(msg).into()) };
    let lab_spec = serde_json::from_value::<LabSpec>(header.spec.clone()).ok();
    if header.spec.get(super::spec::NO_RUN_KEY) == Some(&serde_json::Value::Bool(true)) {
        // A queue benchmark holds no measured Q@C, imported or not.
        return refuse(format!(
            "{source}: its spec is a queue benchmark's (no_run = true), whose tasks are never measured; nothing imported"
        ));
    }
    let mut keys = std::collections::BTreeSet::new();
    for qc in qcs {
        let key = task_key(lab_spec.as_ref(), qc);
        if !keys.insert(key.clone()) {
            return refuse(format!(
                "{source}: two Q@Cs are labelled {key:?}; nothing imported"
            ));
        }
    }
    let hash = spec_hash(&header.spec);
    let spec = header.spec.to_string();
    let created_us = i64::try_from(header.created_unix_ns / 1000).unwrap_or(0);
    let target = lab.target.clone();
    let rt = &lab.rt;
    let tx = rt
        .block_on(lab.client.transaction())
        .map_err(|e| err(&target, "BEGIN", e))?;
    let q = "INSERT INTO ttp_lab_experiments (name, spec, spec_hash, submitted_at) \
             VALUES ($1, $2::text::jsonb, $3, CASE WHEN $4::bigint > 0 \
               THEN timestamptz 'epoch' + $4::bigint::float8 * interval '1 microsecond' ELSE now() END) \
             ON CONFLICT (name) DO NOTHING";
    let created = rt
        .block_on(tx.execute(q, &[&name, &spec, &hash, &created_us]))
        .map_err(|e| err(&target, q, e))?
        == 1;
    if !created {
        let q = "SELECT spec_hash FROM ttp_lab_experiments WHERE name = $1";
        let have: String = rt
            .block_on(tx.query_one(q, &[&name]))
            .map_err(|e| err(&target, q, e))?
            .get(0);
        if have != hash {
            return refuse(format!(
                "experiment {name:?} is already in the lab with a different spec than {source}'s (sha256 {}…, the study's {}…); import it under another --experiment NAME",
                &have[..12.min(have.len())],
                &hash[..12]
            ));
        }
    }
    let mut new = 0;
    for qc in qcs {
        let key = task_key(lab_spec.as_ref(), qc);
        let q = "SELECT t.state, r.attempt FROM ttp_lab_tasks t LEFT JOIN ttp_lab_qc_results r ON r.task_id = t.id \
                 WHERE t.experiment = $1 AND t.key = $2 AND t.host_label = $3";
        let have = rt
            .block_on(tx.query_opt(q, &[&name, &key, &host_label]))
            .map_err(|e| err(&target, q, e))?;
        if let Some(row) = have {
            let (state, attempt): (String, Option<i32>) = (row.get(0), row.get(1));
            let same = match attempt {
                Some(a) if state == "done" => {
                    let q = "SELECT coalesce(json_agg(q.record ORDER BY q.qe), '[]'::json)::text FROM ttp_lab_qes q \
                             JOIN ttp_lab_tasks t ON t.id = q.task_id \
                             WHERE t.experiment = $1 AND t.key = $2 AND t.host_label = $3 AND q.attempt = $4";
                    let text: String = rt
                        .block_on(tx.query_one(q, &[&name, &key, &host_label, &a]))
                        .map_err(|e| err(&target, q, e))?
                        .get(0);
                    serde_json::from_str::<Vec<QeRecord>>(&text).ok().as_ref() == Some(&qc.qc.qes)
                }
                _ => false,
            };
            if !same {
                return refuse(format!(
                    "experiment {name:?} already has Q@C {key:?} on host label {host_label} ({state}) with other measurements than {source}'s; nothing imported"
                ));
            }
            continue;
        }
        let mut labels = qc.qc.labels.clone();
        labels.insert(HOST_LABEL.into(), host_label.to_string());
        let cardinality: Option<i64> = labels
            .get(qc.qc.setup.cardinality_label())
            .and_then(|c| c.parse().ok());
        let payload = serde_json::json!({ "imported_from": source, "command": qc.qc.command });
        let mut result = serde_json::json!({
            "schema": ttp_ttpv2::analysis::RUN_SCHEMA,
            "labels": labels,
            "command": qc.qc.command,
            "setup": qc.qc.setup,
            "machine": header.machine,
            "qes": qc.qc.qes,
            "imported_from": source,
        });
        if let Some(p) = &qc.postgres {
            result["postgres"] = p.clone();
        }
        let q = "INSERT INTO ttp_lab_tasks (experiment, key, cardinality, host_label, payload, state, attempts, \
                   claimed_by, started_at, finished_at) \
                 VALUES ($1, $2, $3, $4, $5::text::jsonb, 'done', 1, $6, now(), now()) RETURNING id";
        let id: i64 = rt
            .block_on(tx.query_one(
                q,
                &[
                    &name,
                    &key,
                    &cardinality,
                    &host_label,
                    &payload.to_string(),
                    &IMPORT_WORKER,
                ],
            ))
            .map_err(|e| err(&target, q, e))?
            .get(0);
        let q = "INSERT INTO ttp_lab_qes (task_id, attempt, qe, record) VALUES ($1, 1, $2, $3::text::jsonb)";
        for qe in &qc.qc.qes {
            let n = i32::try_from(qe.qe).unwrap_or(i32::MAX);
            let record = serde_json::to_string(qe)?;
            rt.block_on(tx.execute(q, &[&id, &n, &record]))
                .map_err(|e| err(&target, q, e))?;
        }
        let q = "INSERT INTO ttp_lab_qc_results (task_id, attempt, worker, result) VALUES ($1, 1, $2, $3::text::jsonb)";
        rt.block_on(tx.execute(q, &[&id, &IMPORT_WORKER, &result.to_string()]))
            .map_err(|e| err(&target, q, e))?;
        new += 1;
    }
    if new == 0 && !created {
        return Ok(Imported::Unchanged);
    }
    rt.block_on(tx.commit())
        .map_err(|e| err(&target, "COMMIT", e))?;
    Ok(Imported::New { qcs: new, created })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_ttpv2::model::{QcInput, Setup};

    fn labelled(pairs: &[(&str, &str)]) -> StudyQc {
        let qc = QcInput {
            labels: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            source: None,
            command: vec!["/bin/true".into()],
            setup: Setup::default(),
            qes: Vec::new(),
        };
        StudyQc::new(qc, None)
    }

    /// Catches an imported lab study keyed apart from `lab submit`'s tasks
    /// (its import would then add the Q@Cs again instead of finding them),
    /// and an `experiment` study's key carrying the host label.
    #[test]
    fn imported_qcs_are_keyed_as_submitted_tasks() {
        let spec = LabSpec::parse(
            "name = \"x\"\nhosts = [\"a\"]\n[[command]]\nname = \"c1\"\nargv = [\"/bin/true\"]\n",
        )
        .unwrap();
        let value = serde_json::from_str::<serde_json::Value>(&spec.canonical_json()).unwrap();
        assert_eq!(spec_hash(&value), spec.hash());
        let lab = labelled(&[("command", "c1"), ("host_label", "a")]);
        assert_eq!(task_key(Some(&spec), &lab), "c1");
        let study = labelled(&[
            ("query", "q1"),
            ("cardinality", "1000"),
            ("host_label", "a"),
        ]);
        assert_eq!(task_key(None, &study), "cardinality=1000 query=q1");
        let other = serde_json::json!({"name": "x", "n": 6});
        assert_eq!(spec_hash(&other).len(), 64);
        assert_ne!(spec_hash(&other), spec.hash());
    }
}
