//! `ttp-ebpf run --postgres CONNSTR --sql "…"`: TTPv2 on a statement
//! executed by a PostgreSQL server of this machine. The query process is
//! the backend serving ttp's connection (`pg_backend_pid()`); the
//! postmaster and its other children are utilities; the rest are daemons.
use std::path::Path;

use anyhow::Context;

use super::run_args::{RunArgs, cpu_list, parse_labels};
use crate::{
    pg::{
        PgFacts, QcEnd, QcRun, RunnerOptions,
        restart::Restart,
        statement::{self, StatementPlan, run_json},
    },
    report::{format, progress::Progress},
};
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::{error::usage, sys::signals::StopFlag};
use ttp_ttpv2::model::{Labels, QcInput};

/// One line per fact a reader of the report needs about the server.
pub(crate) fn header(facts: &PgFacts, qc: &QcInput) -> String {
    let mut pids = facts.backend_pids.clone();
    pids.dedup();
    let plans: std::collections::BTreeSet<&str> =
        qc.qes.iter().filter_map(|q| q.plan.as_deref()).collect();
    let mut s = format!(
        "PostgreSQL {} ({}): {}\n  query process: backend pid {}\n  plan: captured before each of {} QE(s), {} distinct{}\n",
        facts.server_version,
        facts.target,
        crate::pg::error::short(&facts.sql),
        pids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        qc.qes.len(),
        plans.len(),
        if qc.setup.recovery.plan_restarts > 0 {
            format!(
                "; the Q@C was restarted {} time(s) for a changed plan",
                qc.setup.recovery.plan_restarts
            )
        } else {
            String::new()
        }
    );
    if let Some(r) = &facts.restart {
        s += &format!(
            "  cold cache: `{r}`, then sync and drop_caches, before each QE; the cold start is somewhat artificially cold (Sec. 3.1)\n"
        );
    }
    if !qc.setup.recovery.retried_errors.is_empty() {
        s += &format!(
            "  {} transient error(s) retried after a back-off\n",
            qc.setup.recovery.retried_errors.len()
        );
    }
    s
}

/// The command line of a `run --postgres`, validated once into the plan
/// that `pg::statement::measure` runs.
pub(crate) fn plan(args: &RunArgs, conninfo: &str) -> anyhow::Result<StatementPlan> {
    let Some(sql) = args.sql.as_deref().filter(|s| !s.trim().is_empty()) else {
        return usage("--postgres needs --sql \"SELECT …\" (the statement to measure)");
    };
    if !args.command.is_empty() {
        return usage(
            "--postgres measures --sql, not a command; drop the command after the options",
        );
    }
    if args.prepare.is_some() || args.plan_cmd.is_some() || args.query_process.is_some() {
        return usage(
            "--prepare, --plan-cmd and --query-process do not apply to --postgres (use --restart-cmd; the plan and the backend are found by ttp)",
        );
    }
    if args.restart_cmd.is_some() && !args.cold_cache {
        return usage("--restart-cmd restarts the server for a cold cache; add --cold-cache");
    }
    let labels: Labels = parse_labels(&args.labels)?;
    let pin = match &args.cpu {
        Some(list) => Some(cpu_list(list)?),
        None => None,
    };
    Ok(StatementPlan {
        conninfo: conninfo.to_string(),
        sql: sql.to_string(),
        n: args.n,
        labels,
        runner: RunnerOptions {
            cold_cache: args.cold_cache,
            restart: args.restart_cmd.clone().map(Restart::Command),
            backoff: args.backoff,
            statement_timeout: Some(args.timeout),
            cpu: pin,
            warmup: args.warmup(),
        },
    })
}

pub fn run(args: RunArgs, conninfo: &str) -> anyhow::Result<()> {
    let plan = plan(&args, conninfo)?;
    let stop = StopFlag::install().context("installing signal handlers")?;
    let bar = Progress::new(u64::from(args.n), "QE");
    let json = args.json.clone();
    let mut write_err: Option<anyhow::Error> = None;
    let mut on_qe = |qc: &QcInput, facts: &PgFacts, machine: &MachineFacts| {
        if let Some(path) = &json
            && write_err.is_none()
            && let Err(e) = run_json(qc, facts, machine, crate::report::ttpv2::paragraph::text)
                .with_context(|| format!("writing {}", path.display()))
                .and_then(|(_, v)| {
                    Ok(format::write_unannounced_file(
                        path,
                        &format::json::Json(&v),
                    )?)
                })
        {
            write_err = Some(e);
        }
        if let Some(r) = qc.qes.last() {
            bar.set_message(format!("QE {}: {:.1} ms", r.qe, r.time_meas_ms));
        }
        bar.set_position(qc.qes.len() as u64);
    };
    let outcome = statement::measure(&plan, &stop, &mut on_qe, &|m| bar.notice(m));
    bar.finish_and_clear();
    if let Some(e) = write_err {
        return Err(e);
    }
    let (run, machine) = outcome?;
    nothing_measured(&run)?;
    let (doc, value) = run_json(
        &run.qc,
        &run.facts,
        &machine,
        crate::report::ttpv2::paragraph::text,
    )?;
    if let Some(path) = &args.json {
        format::write(path, &format::json::Json(&value))?;
    }
    // The session facts, then the report `report` shows for the saved file.
    print!("{}", header(&run.facts, &run.qc));
    let shown = crate::report::render::Run(doc);
    crate::report::render::print(&shown);
    println!();
    let analysis = shown.0.to_analysis();
    if let Some(path) = &args.svg {
        format::write(path, &format::svg::Svg::Ttpv2(&analysis))?;
    }
    ended(&run, args.json.as_deref())
}

/// A Q@C that ended before its first QE: what stopped it, as the error.
pub(crate) fn nothing_measured(run: &QcRun) -> anyhow::Result<()> {
    if !run.qc.qes.is_empty() {
        return Ok(());
    }
    match &run.end {
        QcEnd::Paused(why) => anyhow::bail!("paused before the first QE was measured: {why}"),
        _ => usage("interrupted before the first execution: nothing measured"),
    }
}

/// How the Q@C ended, said: a pause is the error (the QEs kept in
/// `json`), an interruption a line on stderr.
pub(crate) fn ended(run: &QcRun, json: Option<&Path>) -> anyhow::Result<()> {
    match &run.end {
        QcEnd::Paused(why) => Err(anyhow::anyhow!(
            "paused: {why}; the {} QE(s) measured are kept{}",
            run.qc.qes.len(),
            json.map(|p| format!(" in {}", p.display()))
                .unwrap_or_default()
        )),
        QcEnd::Interrupted => {
            eprintln!(
                "interrupted: the {} QE(s) measured are kept",
                run.qc.qes.len()
            );
            Ok(())
        }
        QcEnd::Complete => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<super::RunArgs, clap::Error> {
        let mut argv = vec!["ttp-ebpf", "run"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).map(|c| match c.command {
            Command::Run(a) => a,
            other => panic!("parsed as {other:?}"),
        })
    }

    /// Catches options that do not apply to --postgres being silently
    /// ignored (a run the user did not ask for) instead of a usage error
    /// (exit 2), checked before anything touches the machine.
    #[test]
    fn postgres_option_misuse_is_a_usage_error() {
        let c = "host=/tmp port=1";
        let cases: &[&[&str]] = &[
            &["--postgres", c],
            &["--postgres", c, "--sql", " "],
            &["--postgres", c, "--sql", "SELECT 1", "--", "ls"],
            &["--postgres", c, "--sql", "SELECT 1", "--plan-cmd", "x"],
            &["--postgres", c, "--sql", "SELECT 1", "--restart-cmd", "x"],
            &["--postgres", c, "--sql", "SELECT 1", "-n", "0"],
            &["--postgres", c, "--sql", "SELECT 1", "--protocol", "emp"],
        ];
        for args in cases {
            let a = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let err = crate::cli::run::run(a).expect_err("accepted");
            assert_eq!(ttp_sys::error::exit_code(&err), 2, "{args:?}: {err:#}");
        }
        // clap: --sql and --restart-cmd need --postgres; a run needs a
        // command or --postgres.
        assert!(parse(&["--sql", "SELECT 1", "--", "ls"]).is_err());
        assert!(parse(&["--restart-cmd", "x", "--", "ls"]).is_err());
        assert!(parse(&[]).is_err());
    }

    /// Catches a PostgreSQL problem the user can fix reported as a
    /// measurement failure (exit 1) or the reverse.
    #[test]
    fn pg_errors_map_to_exit_codes() {
        use crate::pg::PgError;
        let usage = PgError::Sql {
            statement: "SELEC".into(),
            code: "42601".into(),
            message: "syntax error".into(),
            detail: String::new(),
        };
        assert_eq!(
            ttp_sys::error::exit_code(&crate::pg::error::pg_error(usage)),
            2
        );
        let lost = PgError::Lost {
            statement: "x".into(),
            reason: "closed".into(),
        };
        assert_eq!(
            ttp_sys::error::exit_code(&crate::pg::error::pg_error(lost)),
            1
        );
    }
}
