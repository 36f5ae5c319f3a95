//! An experiment (TTPv2 Fig. 2) measured into its study file: the study
//! created or resumed (the seed it recorded, the Q@Cs it finished), the
//! maximal table generated, then at each cardinality the variable table
//! populated and each query's Q@C measured and appended as it finishes,
//! so that an experiment interrupted, paused or killed resumes where it
//! stopped. `experiment` calls [`measure`] and analyses the study after.
use std::{collections::BTreeSet, path::Path};

use anyhow::Context;

use super::{
    Pg, QcEnd, Runner, RunnerOptions,
    error::pg_error,
    experiment::{Spec, build_max_table, max_table_ready, populate_table},
    qc::QcError,
    restart::Restart,
};
use ttp_sys::{error::usage, sys::signals::StopFlag};
use ttp_ttpv2::{
    model::Labels,
    study::{STUDY_SCHEMA, Study, StudyHeader, StudyQc},
};

/// Who shows an experiment's progress, counted in QEs of the whole study.
pub(crate) trait Shows {
    /// A resumed study: the QEs of the Q@Cs it had finished.
    fn resumed(&self, qes: u64);
    /// The QEs of the study measured so far.
    fn position(&self, qes: u64);
    /// What is being done (generating, populating, which Q@C).
    fn message(&self, m: String);
    /// What the user must read (retries, plan restarts).
    fn notice(&self, m: String);
}

/// How an experiment ended.
pub(crate) struct Ended {
    /// Q@Cs the study holds finished.
    pub done: usize,
    /// Q@Cs of the specification.
    pub total: usize,
    /// Why it stopped before every Q@C was finished (interrupted, paused).
    pub stopped: Option<String>,
}

/// Measures every Q@C of `spec` that the study at `study_path` has not
/// finished (creating the study when there is none), appending each to it
/// as it finishes. Connects before touching the study: a server that is
/// down or a wrong connection string change nothing.
pub fn measure(
    spec: &mut Spec,
    study_path: &Path,
    stop: &StopFlag,
    shows: &dyn Shows,
) -> anyhow::Result<Ended> {
    ttp_sys::sys::privileges::require_bpf()?;
    let pg = Pg::new(&spec.connection).map_err(pg_error)?;
    let mut runner = Runner::start(&pg, runner_options(spec), stop.clone()).map_err(pg_error)?;
    let (mut session, machine) = super::open_session(spec.cold_cache)?;
    let (mut study, seed, mut done) = open_study(study_path, spec, &machine)?;
    let spec = &*spec;
    let n = spec.n;
    let total_qcs = spec.cardinalities.len() * spec.queries.len();
    shows.resumed(done.len() as u64 * u64::from(n));
    if done.len() < total_qcs {
        // A study started before holds the table unless it was lost.
        ensure_max_table(&mut runner, spec, seed, done.is_empty(), shows)?;
    }
    let mut paused = None;
    'cards: for &card in &spec.cardinalities {
        let todo: Vec<_> = spec
            .queries
            .iter()
            .filter(|q| !done.contains(&(q.name.clone(), card)))
            .collect();
        if todo.is_empty() {
            continue;
        }
        shows.message(format!("populating {} with {card} rows", spec.data.table));
        let s = runner.session_mut().map_err(pg_error)?;
        let rows = populate_table(s, spec, card).map_err(pg_error)?;
        if rows != card {
            return usage(format!(
                "data.populate made {rows} rows at cardinality {card}; it must make exactly {{cardinality}}"
            ));
        }
        for q in todo {
            let k = done.len() + 1;
            shows.message(format!("Q@C {k}/{total_qcs}: {} @ {card}", q.name));
            let base = done.len() as u64 * u64::from(n);
            let labels: Labels = [
                ("query".to_string(), q.name.clone()),
                ("cardinality".to_string(), card.to_string()),
            ]
            .into_iter()
            .collect();
            let mut ctx = session.qe_context(ttp_sys::sys::spawn::RunAs::Current);
            let run = runner.run_qc(
                &mut ctx,
                &q.sql,
                n,
                labels,
                &mut |qc, _| shows.position(base + qc.qes.len() as u64),
                &|m| shows.notice(m),
            );
            drop(ctx);
            let run = match run {
                Ok(r) => r,
                Err(QcError::Pg(e)) if !e.is_transient() => {
                    return Err(pg_error(e)).with_context(|| {
                        format!(
                            "query {} at cardinality {card}; the study {} keeps the {} finished Q@C(s)",
                            q.name,
                            study_path.display(),
                            done.len()
                        )
                    });
                }
                Err(e) => return Err(e.into()),
            };
            match run.end {
                QcEnd::Complete => {
                    let facts = serde_json::to_value(&run.facts)?;
                    study.append(&StudyQc::new(run.qc, Some(facts)))?;
                    done.insert((q.name.clone(), card));
                }
                QcEnd::Interrupted => {
                    paused = Some("interrupted".to_string());
                    break 'cards;
                }
                QcEnd::Paused(why) => {
                    paused = Some(format!("paused: {why}"));
                    break 'cards;
                }
            }
        }
    }
    drop(session);
    Ok(Ended {
        done: done.len(),
        total: total_qcs,
        stopped: paused,
    })
}

/// (query name, cardinality) of the Q@Cs a study has finished.
type Done = BTreeSet<(String, u64)>;

fn seed_from_clock() -> u64 {
    ttp_sys::sys::clock::realtime_ns() % (1 << 31)
}

/// Opens the study to resume, or creates it. Returns it with its seed and
/// the Q@Cs already finished, as (query, cardinality).
fn open_study(
    path: &Path,
    spec: &mut Spec,
    machine: &ttp_ledger::collect::machine::MachineFacts,
) -> anyhow::Result<(Study, u64, Done)> {
    if path.exists() {
        let (study, header, done) = Study::open(path).map_err(|e| {
            ttp_sys::error::UsageError::new(format!("{e}; give another --study FILE to start anew"))
        })?;
        let seed = header.spec["data"]["seed"].as_u64();
        let recorded = spec.data.seed.or(seed);
        if spec.data.seed.is_some() && seed.is_some() && spec.data.seed != seed {
            return usage(format!(
                "{} was made with data.seed = {}, the specification says {}; give another --study FILE to start anew",
                path.display(),
                seed.unwrap_or(0),
                spec.data.seed.unwrap_or(0)
            ));
        }
        spec.data.seed = recorded;
        let stored = serde_json::from_value::<Spec>(header.spec.clone())
            .map(|s| s.identity())
            .ok();
        if stored.as_ref() != Some(&spec.identity()) {
            return usage(format!(
                "{} was made by a different specification (data, cardinalities, queries, n or cold_cache changed); give another --study FILE to start anew",
                path.display()
            ));
        }
        let done = done
            .iter()
            .filter_map(|l| {
                Some((
                    l.qc.labels.get("query")?.clone(),
                    l.qc.labels.get("cardinality")?.parse().ok()?,
                ))
            })
            .collect();
        return Ok((study, recorded.unwrap_or(0), done));
    }
    let seed = *spec.data.seed.get_or_insert_with(seed_from_clock);
    // The study records where the server was, not its password.
    let mut recorded = spec.clone();
    recorded.connection = crate::pg::session::parse_config(&spec.connection)
        .map(|c| crate::pg::session::describe(&c))
        .unwrap_or_default();
    let header = StudyHeader {
        schema: STUDY_SCHEMA.into(),
        kind: "header".into(),
        spec: serde_json::to_value(&recorded)?,
        machine: Some(machine.clone()),
        created_unix_ns: ttp_sys::sys::clock::realtime_ns(),
    };
    let study = Study::create(path, &header)?;
    Ok((study, seed, Done::new()))
}

/// The runner's options from the spec (TTPv2 Fig. 2: restart, cold cache,
/// back-off and statement timeout).
fn runner_options(spec: &Spec) -> RunnerOptions {
    let dur = |v: &Option<String>, d: &str| {
        humantime::parse_duration(v.as_deref().unwrap_or(d)).unwrap_or_default()
    };
    RunnerOptions {
        cpu: None,
        // The study's QEs as the specification asks (no warm-up option).
        warmup: 0,
        cold_cache: spec.cold_cache,
        restart: spec.restart_cmd.clone().map(Restart::Command),
        backoff: dur(&spec.backoff, "100ms"),
        statement_timeout: Some(dur(&spec.timeout, "20m")),
    }
}

/// Generates the largest table (`data.generate`) when the study is new or
/// the table is not there; a generator that makes too few rows is a
/// usage error.
fn ensure_max_table(
    runner: &mut Runner,
    spec: &Spec,
    seed: u64,
    new_study: bool,
    shows: &dyn Shows,
) -> anyhow::Result<()> {
    let s = runner.session_mut().map_err(pg_error)?;
    if !new_study && max_table_ready(s, spec).map_err(pg_error)? {
        return Ok(());
    }
    shows.message(format!("generating {} (seed {seed})", spec.data.max_table));
    let rows = build_max_table(s, spec, seed).map_err(pg_error)?;
    if rows < spec.max_cardinality() {
        return usage(format!(
            "data.generate made {rows} rows, fewer than the {} needed; use {{max_cardinality}} in it",
            spec.max_cardinality()
        ));
    }
    Ok(())
}
