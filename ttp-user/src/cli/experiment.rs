//! `ttp-ebpf experiment SPEC.toml`: the Q@Cs of an experiment (TTPv2
//! Fig. 2) on PostgreSQL, kept in a study file as they finish, then the
//! protocol applied across the whole study.
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use anyhow::Context;

use super::run_pg::pg_error;
use crate::pg::{
    Pg, QcEnd, Runner, RunnerOptions,
    experiment::{Spec, build_max_table, max_table_ready, populate_table},
    restart::Restart,
};
use ttp_sys::{error::usage, sys::signals::StopFlag};
use ttp_ttpv2::{
    analysis::analyse,
    model::Labels,
    study::{STUDY_SCHEMA, Study, StudyHeader, StudyQc, read_study},
};

/// Run an experiment on PostgreSQL: every query at every cardinality of a
/// generated table, N QEs each, timed with TTPv2.
///
/// The specification (TOML; docs/postgres.md) names the connection, how the
/// maximal table is generated (with a recorded random seed), the
/// cardinalities, the queries and N. Every finished Q@C is appended to the
/// study file, so an experiment that was interrupted, paused or killed
/// resumes where it stopped when started again. At the end the protocol is
/// applied across the study (as `ttp-ebpf analyze STUDY` does), with the
/// monotonicity checks across cardinalities.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment specification (TOML).
    #[arg(value_name = "SPEC.toml")]
    pub spec: PathBuf,
    /// The study file (JSON lines); default: SPEC with extension
    /// .study.jsonl. An existing study of the same specification is resumed.
    #[arg(long, value_name = "FILE")]
    pub study: Option<PathBuf>,
    /// Write the analysis of the study as JSON (schema ttp.analyze/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a chart of every Q@C (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

fn study_path(args: &Args) -> PathBuf {
    args.study
        .clone()
        .unwrap_or_else(|| args.spec.with_extension("study.jsonl"))
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

pub fn run(args: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.spec)
        .map_err(|e| ttp_sys::error::UsageError::new(format!("{}: {e}", args.spec.display())))?;
    let mut spec = Spec::parse(&text)
        .map_err(|e| ttp_sys::error::UsageError::new(format!("{}: {e}", args.spec.display())))?;
    let path = study_path(&args);
    ttp_sys::sys::privileges::require_bpf()?;
    let pg = Pg::new(&spec.connection).map_err(pg_error)?;
    let stop = StopFlag::install().context("installing signal handlers")?;
    let opts = runner_options(&spec);
    // Connect before touching the study: a server that is down or a wrong
    // connection string change nothing.
    let mut runner = Runner::start(&pg, opts, stop.clone()).map_err(pg_error)?;
    let (mut session, machine) = crate::pg::open_session(spec.cold_cache)?;
    let (mut study, seed, mut done) = open_study(&path, &mut spec, &machine)?;
    let n = spec.n;
    let total_qcs = spec.cardinalities.len() * spec.queries.len();
    let bar = crate::report::progress::bar((total_qcs as u64) * u64::from(n), "QE");
    bar.set_position(done.len() as u64 * u64::from(n));
    bar.reset_eta();
    if done.len() < total_qcs {
        // A study started before holds the table unless it was lost.
        ensure_max_table(&mut runner, &spec, seed, done.is_empty(), &bar)?;
    }
    let notify = |m: String| bar.println(m);
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
        bar.set_message(format!("populating {} with {card} rows", spec.data.table));
        let s = runner.session_mut().map_err(pg_error)?;
        let rows = populate_table(s, &spec, card).map_err(pg_error)?;
        if rows != card {
            return usage(format!(
                "data.populate made {rows} rows at cardinality {card}; it must make exactly {{cardinality}}"
            ));
        }
        for q in todo {
            let k = done.len() + 1;
            bar.set_message(format!("Q@C {k}/{total_qcs}: {} @ {card}", q.name));
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
                &mut |qc, _| bar.set_position(base + qc.qes.len() as u64),
                &notify,
            );
            drop(ctx);
            let run = match run {
                Ok(r) => r,
                Err(crate::pg::qc::QcError::Pg(e)) if !e.is_transient() => {
                    bar.finish_and_clear();
                    return Err(pg_error(e)).with_context(|| {
                        format!(
                            "query {} at cardinality {card}; the study {} keeps the {} finished Q@C(s)",
                            q.name,
                            path.display(),
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
    bar.finish_and_clear();
    drop(session);
    if let Some(why) = paused {
        anyhow::bail!(
            "{why}; {} of {total_qcs} Q@Cs are finished and kept in {}; run the same command again to resume",
            done.len(),
            path.display()
        );
    }
    eprintln!("{total_qcs} Q@Cs in {}", path.display());
    let (qcs, machine) = read_study(&path)?;
    let analysis = analyse(
        &qcs,
        machine.as_ref(),
        crate::report::ttpv2::paragraph::text,
    );
    super::analyze::show(
        args.svg.as_deref(),
        args.json.as_deref(),
        machine,
        analysis,
        None,
    )
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
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<()> {
    let s = runner.session_mut().map_err(pg_error)?;
    if !new_study && max_table_ready(s, spec).map_err(pg_error)? {
        return Ok(());
    }
    bar.set_message(format!("generating {} (seed {seed})", spec.data.max_table));
    let rows = build_max_table(s, spec, seed).map_err(pg_error)?;
    if rows < spec.max_cardinality() {
        return usage(format!(
            "data.generate made {rows} rows, fewer than the {} needed; use {{max_cardinality}} in it",
            spec.max_cardinality()
        ));
    }
    Ok(())
}
