//! `ttp-ebpf lab`: experiments across many hosts in one PostgreSQL lab
//! database (docs/lab.md). `init` creates or migrates the schema,
//! `submit` registers a spec and its tasks, `worker` (cli/lab_worker.rs)
//! claims this host label's tasks and times each with `run` (TTPv2),
//! `status` counts, `export` and `import` (cli/lab_io.rs) write the lab's
//! studies and bring studies in.
use std::{path::PathBuf, time::Duration};

use clap::Subcommand;

use crate::{
    error::usage,
    lab::{
        Lab,
        queue::{self, Submitted},
        schema,
        spec::LabSpec,
    },
};

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
    Status(StatusArgs),
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
/// [[command]] × host label. The same spec again changes nothing; a
/// different spec under an existing name is refused.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The spec (TOML): name, hosts = [..], [[command]] name, argv, n,
    /// cold_cache, labels.
    pub spec: PathBuf,
    #[arg(long, value_name = "URL")]
    pub lab: String,
    #[arg(long)]
    pub json: bool,
}

/// Per experiment and host label: tasks pending, running, done, failed
/// and the QEs measured, the median Q@C time and an ETA; the running
/// tasks by worker, with their age and lease.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// Only this experiment.
    #[arg(long, value_name = "NAME")]
    pub experiment: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        LabCommand::Init(a) => init(a),
        LabCommand::Submit(a) => submit(a),
        LabCommand::Worker(a) => super::lab_worker::worker(a),
        LabCommand::Status(a) => status(a),
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
            })
        );
    } else if new {
        println!(
            "experiment {:?} submitted: {tasks} tasks ({} commands × {} host labels)",
            spec.name,
            spec.command.len(),
            spec.hosts.len()
        );
    } else {
        println!(
            "experiment {:?} is already in the lab with this spec: nothing changed",
            spec.name
        );
    }
    Ok(())
}

fn status(a: StatusArgs) -> anyhow::Result<()> {
    let mut lab = Lab::connect(&a.lab)?;
    schema::require_current(&mut lab)?;
    if let Some(e) = &a.experiment
        && !queue::has_experiment(&mut lab, e)?
    {
        return usage(format!("no experiment {e:?} in the lab ({})", lab.target));
    }
    let rows = queue::status(&mut lab, a.experiment.as_deref())?;
    let running = queue::running(&mut lab, a.experiment.as_deref())?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "schema": "ttp.lab-status/1",
                "lab": lab.target,
                "rows": rows,
                "running": running,
            }))?
        );
        return Ok(());
    }
    println!("lab {}", lab.target);
    println!(
        "{:<24} {:<16} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>9} {:>10}",
        "experiment",
        "host label",
        "pending",
        "running",
        "done",
        "failed",
        "QEs",
        "median Q@C",
        "ETA",
        "abandoned",
        "taken over"
    );
    let secs = |s: Option<f64>| {
        s.map_or("?".to_string(), |s| {
            humantime::format_duration(Duration::from_secs(s.round() as u64)).to_string()
        })
    };
    for r in &rows {
        println!(
            "{:<24} {:<16} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>9} {:>10}",
            r.experiment,
            r.host_label,
            r.pending,
            r.running,
            r.done,
            r.failed,
            r.qes_measured,
            secs(r.median_qc_s),
            secs(r.eta_s),
            r.abandoned_attempts,
            r.taken_over
        );
    }
    if rows.is_empty() {
        println!("(no tasks)");
    }
    for r in &running {
        println!(
            "running: task {} ({} / {} on {}) attempt {} by {} for {:.0} s, lease {:.0} s left",
            r.task,
            r.experiment,
            r.key,
            r.host_label,
            r.attempt,
            r.claimed_by,
            r.running_s,
            r.lease_left_s
        );
    }
    Ok(())
}
