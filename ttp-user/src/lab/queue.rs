//! The lab as a job queue: submitting an experiment, claiming a task
//! (`FOR NO KEY UPDATE SKIP LOCKED`, so workers never wait on each other's
//! claims), recording QEs and the Q@C result in transactions, and the
//! status counts (docs/lab.md, "Queue").
use serde::Serialize;

use super::{Lab, spec::LabSpec};
use ttp_sys::error::UsageError;

/// What `submit` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Submitted {
    /// A new experiment with this many tasks.
    New(usize),
    /// The same spec was already there: nothing changed.
    Unchanged,
}

/// Registers `spec` and its tasks in one transaction. The same spec again
/// changes nothing; a different spec under an existing name is refused
/// (usage error) and nothing is written.
pub fn submit(lab: &mut Lab, spec: &LabSpec) -> anyhow::Result<Submitted> {
    let json = spec.canonical_json();
    let hash = spec.hash();
    let tasks = spec.tasks();
    let target = lab.target.clone();
    let rt = &lab.rt;
    let tx = rt
        .block_on(lab.client.transaction())
        .map_err(|e| err(&target, "BEGIN", e))?;
    let ins = "INSERT INTO ttp_lab_experiments (name, spec, spec_hash) VALUES ($1, $2::text::jsonb, $3) ON CONFLICT (name) DO NOTHING";
    let n = rt
        .block_on(tx.execute(ins, &[&spec.name, &json, &hash]))
        .map_err(|e| err(&target, ins, e))?;
    if n == 0 {
        let q = "SELECT spec_hash FROM ttp_lab_experiments WHERE name = $1";
        let have: String = rt
            .block_on(tx.query_one(q, &[&spec.name]))
            .map_err(|e| err(&target, q, e))?
            .get(0);
        return if have == hash {
            Ok(Submitted::Unchanged)
        } else {
            Err(UsageError::new(format!(
                "experiment {:?} is already in the lab with a different spec (sha256 {}…, this one {}…): give the changed spec a new name",
                spec.name,
                &have[..12.min(have.len())],
                &hash[..12]
            ))
            .into())
        };
    }
    let ins = "INSERT INTO ttp_lab_tasks (experiment, key, host_label, payload, no_run) VALUES ($1, $2, $3, $4::text::jsonb, $5)";
    for t in &tasks {
        let payload = serde_json::to_string(&t.payload)?;
        rt.block_on(tx.execute(
            ins,
            &[&spec.name, &t.key, &t.host_label, &payload, &spec.no_run],
        ))
        .map_err(|e| err(&target, ins, e))?;
    }
    rt.block_on(tx.commit())
        .map_err(|e| err(&target, "COMMIT", e))?;
    Ok(Submitted::New(tasks.len()))
}

pub(super) fn err(target: &str, statement: &str, e: tokio_postgres::Error) -> super::LabError {
    super::LabError {
        target: target.to_string(),
        statement: statement.split_whitespace().collect::<Vec<_>>().join(" "),
        reason: super::one_line(&e),
        transient: super::transient(&e),
    }
}

/// A task this worker holds.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: i64,
    pub experiment: String,
    pub key: String,
    pub attempt: i32,
    /// What the task runs (`spec::Payload` as JSON).
    pub payload: String,
    /// Set when the task was taken over from a worker whose lease expired.
    pub taken_over: Option<Takeover>,
}

/// A task claimed from a worker that stopped renewing its lease (killed,
/// host down, cut off from the lab).
#[derive(Debug, Clone, PartialEq)]
pub struct Takeover {
    pub from_worker: String,
    /// Seconds from the previous attempt's claim to this one.
    pub after_s: f64,
    /// Seconds the previous lease had been expired.
    pub expired_s: f64,
}

/// Records this worker (one row per worker name) with its host label and
/// machine facts; `last_seen` moves on every call.
pub(crate) fn register_host(
    lab: &mut Lab,
    worker: &str,
    label: &str,
    hostname: &str,
    facts: &str,
) -> anyhow::Result<()> {
    let q = "INSERT INTO ttp_lab_hosts (worker, host_label, hostname, facts) VALUES ($1, $2, $3, $4::text::jsonb) \
             ON CONFLICT (worker) DO UPDATE SET host_label = $2, hostname = $3, facts = $4::text::jsonb, last_seen = now()";
    lab.block_on(lab.client.execute(q, &[&worker, &label, &hostname, &facts]))
        .map_err(|e| lab.err(q, e))?;
    Ok(())
}

/// Marks this worker as seen now.
pub(crate) fn touch_host(lab: &mut Lab, worker: &str) -> anyhow::Result<()> {
    let q = "UPDATE ttp_lab_hosts SET last_seen = now() WHERE worker = $1";
    lab.block_on(lab.client.execute(q, &[&worker]))
        .map_err(|e| lab.err(q, e))?;
    Ok(())
}

/// Claims the oldest task of `label` that is pending or whose lease
/// expired (its worker stopped renewing it: killed, host down), if any:
/// one single-row update whose subquery skips rows other workers hold
/// locked, so two workers never claim the same task and never wait for
/// each other. A takeover is recorded in `ttp_lab_takeovers` in the same
/// statement, with the worker it was taken from. A `no_run` claim (`lab
/// worker --no-run`) takes only tasks of experiments submitted with
/// `no_run = true`, any other claim only tasks of the others: a worker
/// that runs nothing can never end a task that was meant to be measured.
pub fn claim(
    lab: &mut Lab,
    label: &str,
    worker: &str,
    lease_s: f64,
    no_run: bool,
) -> anyhow::Result<Option<Claimed>> {
    // A task's `no_run` is its spec's, set by `submit` (migration 3).
    let q = "WITH old AS ( \
               SELECT id, state, claimed_by, started_at, lease_until FROM ttp_lab_tasks \
               WHERE host_label = $1 AND (state = 'pending' OR (state = 'running' AND lease_until < now())) \
                 AND no_run = $4 \
               ORDER BY id FOR NO KEY UPDATE SKIP LOCKED LIMIT 1), \
             claimed AS ( \
               UPDATE ttp_lab_tasks t SET state = 'running', attempts = t.attempts + 1, claimed_by = $2, \
                 lease_until = now() + make_interval(secs => $3), started_at = now() \
               FROM old WHERE t.id = old.id \
               RETURNING t.id, t.experiment, t.key, t.attempts, t.payload::text, old.state AS was, \
                 old.claimed_by AS from_worker, old.started_at AS from_started_at, old.lease_until AS old_lease), \
             took AS ( \
               INSERT INTO ttp_lab_takeovers (task_id, attempt, from_worker, by_worker, from_started_at, lease_until) \
               SELECT id, attempts, coalesce(from_worker, ''), $2, from_started_at, old_lease \
               FROM claimed WHERE was = 'running') \
             SELECT id, experiment, key, attempts, payload, was = 'running', coalesce(from_worker, ''), \
               coalesce(extract(epoch FROM now() - from_started_at)::float8, 0), \
               coalesce(extract(epoch FROM now() - old_lease)::float8, 0) \
             FROM claimed";
    let rows = lab
        .block_on(lab.client.query(q, &[&label, &worker, &lease_s, &no_run]))
        .map_err(|e| lab.err(q, e))?;
    Ok(rows.first().map(|r| Claimed {
        id: r.get(0),
        experiment: r.get(1),
        key: r.get(2),
        attempt: r.get(3),
        payload: r.get(4),
        taken_over: r.get::<_, bool>(5).then(|| Takeover {
            from_worker: r.get(6),
            after_s: r.get(7),
            expired_s: r.get(8),
        }),
    }))
}

/// The heartbeat: moves the lease of a task this worker holds to `lease_s`
/// from now. Returns false when the task is no longer this attempt's (it
/// was taken over after the lease expired).
pub(crate) fn renew(
    lab: &mut Lab,
    task: &Claimed,
    worker: &str,
    lease_s: f64,
) -> anyhow::Result<bool> {
    let q = "UPDATE ttp_lab_tasks SET lease_until = now() + make_interval(secs => $4) \
             WHERE id = $1 AND claimed_by = $2 AND attempts = $3 AND state = 'running'";
    let n = lab
        .block_on(
            lab.client
                .execute(q, &[&task.id, &worker, &task.attempt, &lease_s]),
        )
        .map_err(|e| lab.err(q, e))?;
    Ok(n == 1)
}

/// Inserts the QEs of the task's attempt that are not there yet (each
/// `(qe number, record JSON)`), in one transaction; returns how many were
/// new.
pub(crate) fn record_qes(
    lab: &mut Lab,
    task: &Claimed,
    qes: &[(i32, String)],
) -> anyhow::Result<u64> {
    let target = lab.target.clone();
    let rt = &lab.rt;
    let tx = rt
        .block_on(lab.client.transaction())
        .map_err(|e| err(&target, "BEGIN", e))?;
    let q = "INSERT INTO ttp_lab_qes (task_id, attempt, qe, record) VALUES ($1, $2, $3, $4::text::jsonb) ON CONFLICT DO NOTHING";
    let mut new = 0;
    for (qe, rec) in qes {
        new += rt
            .block_on(tx.execute(q, &[&task.id, &task.attempt, qe, rec]))
            .map_err(|e| err(&target, q, e))?;
    }
    rt.block_on(tx.commit())
        .map_err(|e| err(&target, "COMMIT", e))?;
    Ok(new)
}

/// Ends the task: its remaining QEs, the Q@C result (`result` = the run
/// JSON, `None` when it failed) and the state, in one transaction, and
/// only while this worker still holds the task (a task taken over is
/// never counted twice). Returns false when the task was no longer ours;
/// true, writing nothing, when this attempt already ended it so (a finish
/// retried after its commit's answer was lost).
pub fn finish(
    lab: &mut Lab,
    task: &Claimed,
    worker: &str,
    qes: &[(i32, String)],
    result: Result<&str, &str>,
) -> anyhow::Result<bool> {
    let target = lab.target.clone();
    let rt = &lab.rt;
    let tx = rt
        .block_on(lab.client.transaction())
        .map_err(|e| err(&target, "BEGIN", e))?;
    let (state, error) = match result {
        Ok(_) => ("done", None),
        Err(e) => ("failed", Some(e)),
    };
    let q = "UPDATE ttp_lab_tasks SET state = $3, finished_at = now(), lease_until = NULL, error = $4 \
             WHERE id = $1 AND claimed_by = $2 AND attempts = $5 AND state = 'running'";
    let held = rt
        .block_on(tx.execute(q, &[&task.id, &worker, &state, &error, &task.attempt]))
        .map_err(|e| err(&target, q, e))?;
    if held != 1 {
        // A finish retried after its commit was lost with the connection
        // (the lab restarted just then) finds its own ending recorded:
        // that is this worker's result, not a task taken from it.
        let q = "SELECT EXISTS (SELECT 1 FROM ttp_lab_tasks WHERE id = $1 AND claimed_by = $2 AND attempts = $3 AND state = $4)";
        let mine: bool = rt
            .block_on(tx.query_one(q, &[&task.id, &worker, &task.attempt, &state]))
            .map_err(|e| err(&target, q, e))?
            .get(0);
        return Ok(mine);
    }
    let q = "INSERT INTO ttp_lab_qes (task_id, attempt, qe, record) VALUES ($1, $2, $3, $4::text::jsonb) ON CONFLICT DO NOTHING";
    for (qe, rec) in qes {
        rt.block_on(tx.execute(q, &[&task.id, &task.attempt, qe, rec]))
            .map_err(|e| err(&target, q, e))?;
    }
    if let Ok(doc) = result {
        let q = "INSERT INTO ttp_lab_qc_results (task_id, attempt, worker, result) VALUES ($1, $2, $3, $4::text::jsonb)";
        rt.block_on(tx.execute(q, &[&task.id, &task.attempt, &worker, &doc]))
            .map_err(|e| err(&target, q, e))?;
    }
    rt.block_on(tx.commit())
        .map_err(|e| err(&target, "COMMIT", e))?;
    Ok(true)
}

/// Tasks and QEs of one experiment on one host label.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StatusRow {
    pub experiment: String,
    pub host_label: String,
    pub pending: i64,
    pub running: i64,
    pub done: i64,
    pub failed: i64,
    /// QE rows recorded (every attempt).
    pub qes_measured: i64,
    /// Median time from claim to finish of the done tasks, in seconds.
    pub median_qc_s: Option<f64>,
    /// Seconds until the label's pending and running tasks are done: the
    /// median Q@C time × those tasks ÷ the workers running now (0 when
    /// nothing is left; unknown with no done task or no worker running).
    pub eta_s: Option<f64>,
    /// Attempts that did not finish their task: released by a stopped
    /// worker or lost with a worker whose lease expired.
    pub abandoned_attempts: i64,
    /// Tasks claimed after the lease of their previous worker expired.
    pub taken_over: i64,
    /// A queue benchmark (`no_run = true`): its done tasks were finished
    /// by `lab worker --no-run` without being measured, and are no
    /// results.
    pub no_run: bool,
}

/// Per experiment and host label, the tasks in each state and the QEs
/// measured, optionally for one experiment.
pub(crate) fn status(lab: &mut Lab, experiment: Option<&str>) -> anyhow::Result<Vec<StatusRow>> {
    let q = "SELECT t.experiment, t.host_label, \
               count(*) FILTER (WHERE t.state = 'pending'), count(*) FILTER (WHERE t.state = 'running'), \
               count(*) FILTER (WHERE t.state = 'done'), count(*) FILTER (WHERE t.state = 'failed'), \
               coalesce(sum(q.n), 0)::bigint, \
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM t.finished_at - t.started_at)::float8) \
                 FILTER (WHERE t.state = 'done'), \
               count(DISTINCT t.claimed_by) FILTER (WHERE t.state = 'running'), \
               (coalesce(sum(t.attempts), 0) - count(*) FILTER (WHERE t.state <> 'pending'))::bigint, \
               (SELECT count(*) FROM ttp_lab_takeovers k JOIN ttp_lab_tasks u ON u.id = k.task_id \
                WHERE u.experiment = t.experiment AND u.host_label = t.host_label), \
               bool_or(t.no_run) \
             FROM ttp_lab_tasks t \
             LEFT JOIN (SELECT task_id, count(*) AS n FROM ttp_lab_qes GROUP BY task_id) q ON q.task_id = t.id \
             WHERE $1::text IS NULL OR t.experiment = $1 \
             GROUP BY t.experiment, t.host_label ORDER BY t.experiment, t.host_label";
    let rows = lab
        .block_on(lab.client.query(q, &[&experiment]))
        .map_err(|e| lab.err(q, e))?;
    Ok(rows
        .iter()
        .map(|r| {
            let (pending, running): (i64, i64) = (r.get(2), r.get(3));
            let median_qc_s: Option<f64> = r.get(7);
            let workers: i64 = r.get(8);
            let left = pending + running;
            let eta_s = if left == 0 {
                Some(0.0)
            } else if workers == 0 {
                None
            } else {
                median_qc_s.map(|m| m * left as f64 / workers as f64)
            };
            StatusRow {
                experiment: r.get(0),
                host_label: r.get(1),
                pending,
                running,
                done: r.get(4),
                failed: r.get(5),
                qes_measured: r.get(6),
                median_qc_s,
                eta_s,
                abandoned_attempts: r.get(9),
                taken_over: r.get(10),
                no_run: r.get(11),
            }
        })
        .collect())
}

/// Whether the lab has an experiment of this name.
pub(crate) fn has_experiment(lab: &mut Lab, name: &str) -> anyhow::Result<bool> {
    let q = "SELECT EXISTS (SELECT 1 FROM ttp_lab_experiments WHERE name = $1)";
    Ok(lab
        .block_on(lab.client.query_one(q, &[&name]))
        .map_err(|e| lab.err(q, e))?
        .get(0))
}

/// Gives a task this worker holds back to the queue (the worker was
/// stopped): it is pending again, its QEs stay recorded under the
/// abandoned attempt's number and are not part of any result.
pub fn release(lab: &mut Lab, task: &Claimed, worker: &str) -> anyhow::Result<bool> {
    let q = "UPDATE ttp_lab_tasks SET state = 'pending', claimed_by = NULL, lease_until = NULL, started_at = NULL \
             WHERE id = $1 AND claimed_by = $2 AND attempts = $3 AND state = 'running'";
    let n = lab
        .block_on(lab.client.execute(q, &[&task.id, &worker, &task.attempt]))
        .map_err(|e| lab.err(q, e))?;
    Ok(n == 1)
}

/// A task being measured now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunningTask {
    pub task: i64,
    pub experiment: String,
    pub key: String,
    pub host_label: String,
    pub attempt: i32,
    pub claimed_by: String,
    /// Seconds since the claim.
    pub running_s: f64,
    /// Seconds the lease still runs (negative: expired).
    pub lease_left_s: f64,
}

/// The tasks in state running, by whom and for how long.
pub(crate) fn running(lab: &mut Lab, experiment: Option<&str>) -> anyhow::Result<Vec<RunningTask>> {
    let q = "SELECT id, experiment, key, host_label, attempts, coalesce(claimed_by, ''), \
               extract(epoch FROM now() - started_at)::float8, extract(epoch FROM lease_until - now())::float8 \
             FROM ttp_lab_tasks WHERE state = 'running' AND ($1::text IS NULL OR experiment = $1) ORDER BY id";
    let rows = lab
        .block_on(lab.client.query(q, &[&experiment]))
        .map_err(|e| lab.err(q, e))?;
    Ok(rows
        .iter()
        .map(|r| RunningTask {
            task: r.get(0),
            experiment: r.get(1),
            key: r.get(2),
            host_label: r.get(3),
            attempt: r.get(4),
            claimed_by: r.get(5),
            running_s: r.get(6),
            lease_left_s: r.get(7),
        })
        .collect())
}
