//! The lab's tables and their versioned migrations. `ttp_lab_migrations`
//! holds one row per applied migration; `lab init` applies the missing
//! ones in one transaction under an advisory lock, and every other lab
//! command refuses a schema that is missing, older or newer than this
//! binary's (docs/lab.md, "Schema").
use super::Lab;
use ttp_sys::error::UsageError;

/// The migrations, in order; a migration is never edited once released,
/// a change is a new entry.
pub(crate) const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "experiments, tasks, hosts, QEs and Q@C results",
        r#"
CREATE TABLE ttp_lab_experiments (
    name        text PRIMARY KEY,
    spec        jsonb NOT NULL,
    spec_hash   text NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ttp_lab_tasks (
    id          bigserial PRIMARY KEY,
    experiment  text NOT NULL REFERENCES ttp_lab_experiments(name),
    key         text NOT NULL,
    cardinality bigint,
    host_label  text NOT NULL,
    payload     jsonb NOT NULL,
    state       text NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'running', 'done', 'failed')),
    attempts    integer NOT NULL DEFAULT 0,
    claimed_by  text,
    lease_until timestamptz,
    started_at  timestamptz,
    finished_at timestamptz,
    error       text,
    UNIQUE (experiment, key, host_label)
);
CREATE INDEX ttp_lab_tasks_pending ON ttp_lab_tasks (host_label, id) WHERE state = 'pending';
CREATE TABLE ttp_lab_hosts (
    worker      text PRIMARY KEY,
    host_label  text NOT NULL,
    hostname    text NOT NULL,
    facts       jsonb NOT NULL,
    first_seen  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ttp_lab_qes (
    task_id     bigint NOT NULL REFERENCES ttp_lab_tasks(id),
    attempt     integer NOT NULL,
    qe          integer NOT NULL,
    record      jsonb NOT NULL,
    measured_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, attempt, qe)
);
CREATE TABLE ttp_lab_qc_results (
    task_id     bigint PRIMARY KEY REFERENCES ttp_lab_tasks(id),
    attempt     integer NOT NULL,
    worker      text NOT NULL,
    result      jsonb NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now()
);
"#,
    ),
    (
        2,
        "takeovers of tasks whose lease expired",
        r#"
CREATE TABLE ttp_lab_takeovers (
    task_id     bigint NOT NULL REFERENCES ttp_lab_tasks(id),
    attempt     integer NOT NULL,
    from_worker text NOT NULL,
    by_worker   text NOT NULL,
    from_started_at timestamptz,
    lease_until timestamptz NOT NULL,
    taken_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, attempt)
);
CREATE INDEX ttp_lab_tasks_leased ON ttp_lab_tasks (host_label, lease_until) WHERE state = 'running';
"#,
    ),
    (
        3,
        "tasks of queue benchmarks (no_run), claimed only by no-run workers",
        // A version of its own so that a binary that does not know the
        // rule (its `--no-run` worker would end any task) refuses the lab.
        r#"
ALTER TABLE ttp_lab_tasks ADD COLUMN no_run boolean NOT NULL DEFAULT false;
"#,
    ),
];

/// The schema version this binary reads and writes.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Creates the lab schema or migrates it to [`latest`]; returns the
/// versions applied (empty: it was up to date). A schema newer than this
/// binary is refused and left as it is.
pub fn init(lab: &mut Lab) -> anyhow::Result<Vec<i32>> {
    let tx_sql = "BEGIN; SELECT pg_advisory_xact_lock(hashtext('ttp_lab_migrations')); \
                  CREATE TABLE IF NOT EXISTS ttp_lab_migrations (version integer PRIMARY KEY, \
                  description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())";
    lab.block_on(lab.client.batch_execute(tx_sql))
        .map_err(|e| lab.err(tx_sql, e))?;
    let result = apply(lab);
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = lab.block_on(lab.client.batch_execute(end));
    let applied = result?;
    ended.map_err(|e| lab.err(end, e))?;
    Ok(applied)
}

fn apply(lab: &mut Lab) -> anyhow::Result<Vec<i32>> {
    let have = current(lab)?;
    refuse_newer(have)?;
    let mut applied = Vec::new();
    for (v, what, sql) in MIGRATIONS.iter().filter(|m| m.0 > have) {
        lab.block_on(lab.client.batch_execute(sql))
            .map_err(|e| lab.err(&format!("migration {v} ({what})"), e))?;
        let ins = "INSERT INTO ttp_lab_migrations (version, description) VALUES ($1, $2)";
        lab.block_on(lab.client.execute(ins, &[v, what]))
            .map_err(|e| lab.err(ins, e))?;
        applied.push(*v);
    }
    Ok(applied)
}

/// The applied schema version (0: the migrations table is empty).
fn current(lab: &mut Lab) -> anyhow::Result<i32> {
    let q = "SELECT coalesce(max(version), 0) FROM ttp_lab_migrations";
    let row = lab
        .block_on(lab.client.query_one(q, &[]))
        .map_err(|e| lab.err(q, e))?;
    Ok(row.get(0))
}

fn refuse_newer(have: i32) -> anyhow::Result<()> {
    if have > latest() {
        return Err(UsageError::new(format!(
            "the lab schema is at version {have}, newer than this ttp-ebpf's {}: use a newer ttp-ebpf",
            latest()
        ))
        .into());
    }
    Ok(())
}

/// Refuses, with one line, a lab whose schema this binary cannot use:
/// never initialised, older (run `lab init`), or newer (upgrade ttp-ebpf).
pub(crate) fn require_current(lab: &mut Lab) -> anyhow::Result<()> {
    let q = "SELECT to_regclass('ttp_lab_migrations') IS NOT NULL";
    let exists: bool = lab
        .block_on(lab.client.query_one(q, &[]))
        .map_err(|e| lab.err(q, e))?
        .get(0);
    let have = if exists { current(lab)? } else { 0 };
    refuse_newer(have)?;
    if have < latest() {
        return Err(UsageError::new(format!(
            "the lab database ({}) has schema version {have}, this ttp-ebpf needs {}: run `ttp-ebpf lab init --lab URL` first",
            lab.target,
            latest()
        ))
        .into());
    }
    Ok(())
}
