//! `ttp-ebpf lab`: experiments across many hosts in one PostgreSQL lab
//! database (docs/lab.md). `init` creates or migrates the schema,
//! `submit` registers a spec and its tasks, `worker` (cli/lab_worker.rs)
//! claims this host label's tasks and times each with `run` (TTPv2;
//! cli/lab_task.rs), `status` counts, `export` and `import`
//! (cli/lab_io.rs) write the lab's studies and bring studies in.
use std::path::PathBuf;

use clap::Subcommand;

use crate::lab::{
    Lab,
    queue::{self, Submitted},
    schema,
    spec::LabSpec,
};
use ttp_sys::error::usage;

/// Experiments across many hosts, with one PostgreSQL database as the job
/// queue and the system of record (docs/lab.md).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    Init(InitArgs),
    Submit(SubmitArgs),
    Worker(super::lab_worker::WorkerArgs),
    Status(super::lab_status::StatusArgs),
    Export(super::lab_io::ExportArgs),
    Import(super::lab_io::ImportArgs),
}

/// Create the lab's tables, or migrate them to this version.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The lab database: key=value pairs or a postgresql:// URL (password
    /// from the URL or PGPASSWORD; never printed).
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Register an experiment spec and expand it into tasks: one per
/// [[command]] × host label, or per query × cardinality × host label for
/// `experiment`'s PostgreSQL spec. The same spec again changes nothing; a
/// different spec under an existing name is refused.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The spec (TOML): name, hosts = [..], and [[command]] name, argv, n,
    /// cold_cache, labels; or `experiment`'s keys (connection, n,
    /// cardinalities, [data], [[query]] name, sql).
    pub spec: PathBuf,
    #[arg(long, value_name = "URL")]
    pub lab: String,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        LabCommand::Init(a) => init(a),
        LabCommand::Submit(a) => submit(a),
        LabCommand::Worker(a) => super::lab_worker::worker(a),
        LabCommand::Status(a) => super::lab_status::status(a),
        LabCommand::Export(a) => super::lab_io::export(a),
        LabCommand::Import(a) => super::lab_io::import_study(a),
    }
}

fn init(a: InitArgs) -> anyhow::Result<()> {
    let mut lab = Lab::connect(&a.lab)?;
    let applied = schema::init(&mut lab)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "schema": "ttp.lab-init/1",
                "lab": lab.target,
                "version": schema::latest(),
                "applied": applied,
            })
        );
    } else if applied.is_empty() {
        println!(
            "lab {}: schema already at version {}, nothing to do",
            lab.target,
            schema::latest()
        );
    } else {
        println!(
            "lab {}: schema at version {} (applied migrations {applied:?})",
            lab.target,
            schema::latest()
        );
    }
    Ok(())
}

fn submit(a: SubmitArgs) -> anyhow::Result<()> {
    let text = match std::fs::read_to_string(&a.spec) {
        Ok(t) => t,
        Err(e) => return usage(format!("cannot read spec {}: {e}", a.spec.display())),
    };
    let spec = match LabSpec::parse(&text) {
        Ok(s) => s,
        Err(e) => return usage(format!("spec {}: {e}", a.spec.display())),
    };
    let mut lab = Lab::connect(&a.lab)?;
    schema::require_current(&mut lab)?;
    let done = queue::submit(&mut lab, &spec)?;
    let (new, tasks) = match done {
        Submitted::New(n) => (true, n),
        Submitted::Unchanged => (false, 0),
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "schema": "ttp.lab-submit/1",
                "experiment": spec.name,
                "spec_sha256": spec.hash(),
                "submitted": new,
                "tasks": tasks,
                "no_run": spec.no_run,
            })
        );
    } else if new {
        let what = match &spec.postgres {
            Some(pg) => format!(
                "{} queries × {} cardinalities",
                pg.queries.len(),
                pg.cardinalities.len()
            ),
            None => format!("{} commands", spec.command.len()),
        };
        println!(
            "experiment {:?} submitted: {tasks} tasks ({what} × {} host labels)",
            spec.name,
            spec.hosts.len()
        );
        if spec.no_run {
            println!(
                "experiment {:?} is a queue benchmark (no_run = true): only `lab worker --no-run` claims its tasks, and finishes them without running anything",
                spec.name
            );
        }
    } else {
        println!(
            "experiment {:?} is already in the lab with this spec: nothing changed",
            spec.name
        );
    }
    Ok(())
}
