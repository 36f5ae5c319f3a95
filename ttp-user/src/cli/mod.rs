//! Command-line interface: one module per subcommand, each with its clap
//! argument struct (doc comments are the help text) and a `run` function.
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use ttp_serve::serve;

pub(crate) mod analyze;
mod analyze_emp;
mod analyze_inputs;
pub(crate) mod analyze_lab;
pub(crate) mod attach;
pub(crate) mod blame;
pub(crate) mod calibrate;
pub(crate) mod check;
pub(crate) mod compare;
mod dist_assets;
pub mod experiment;
pub(crate) mod inc;
pub mod lab;
pub(crate) mod lab_io;
pub(crate) mod lab_status;
pub(crate) mod lab_task;
pub(crate) mod lab_worker;
pub(crate) mod load;
pub mod report;
pub mod run;
pub(crate) mod run_args;
pub(crate) mod run_emp;
mod run_emp_several;
mod run_emp_start;
pub(crate) mod run_pg;
mod run_plan;
mod run_several;
pub(crate) mod statements;
pub(crate) mod statements_args;
mod statements_sums;
pub(crate) mod vprofile;

/// ttp: how long a program or a database query really took, and why.
///
/// eBPF programs keep an in-kernel ledger of where every thread's time went
/// (on CPU, run-queue wait, sleep, blocked, iowait, disk I/O); the commands
/// below apply measurement protocols to it. Most need root (CAP_BPF and
/// CAP_PERFMON): run them with sudo.
#[derive(Debug, Parser)]
#[command(name = "ttp-ebpf", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    Analyze(analyze::Args),
    Attach(attach::AttachArgs),
    Blame(blame::Args),
    Calibrate(calibrate::Args),
    Check(check::Args),
    Compare(compare::Args),
    #[command(hide = true)]
    DistAssets(dist_assets::Args),
    Experiment(experiment::Args),
    Inc(inc::Args),
    Lab(lab::Args),
    Load(load::LoadArgs),
    Report(report::Args),
    Run(run_args::RunArgs),
    Statements(statements_args::Args),
    Serve(serve::ServeArgs),
    Vprofile(vprofile::Args),
}

/// Parses the command line, runs the command and maps errors to exit codes:
/// 0 success, 1 a failure while measuring, 2 a usage error.
pub fn main() -> ExitCode {
    ExitCode::from(run_from(std::env::args_os()))
}

/// [`main`] on the given command line (program name first): prints what
/// the command prints, and returns the exit code. Tests run commands
/// through it in-process.
pub fn run_from<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // clap's own output and code: help and version 0, errors 2.
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    ttp_sys::sys::logging::init();
    let result: anyhow::Result<()> = match cli.command {
        Command::Analyze(args) => analyze::run(args),
        Command::Attach(a) => attach::run(a),
        Command::Blame(args) => blame::run(args),
        Command::Calibrate(a) => calibrate::run(a),
        Command::Check(a) => check::run(a),
        Command::Compare(a) => compare::run(a),
        Command::DistAssets(a) => dist_assets::run(a, Cli::command()),
        Command::Experiment(a) => experiment::run(a),
        Command::Inc(a) => inc::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Load(args) => load::run(args),
        Command::Report(args) => report::run(args),
        Command::Run(a) => run::run(a),
        Command::Statements(a) => statements::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Vprofile(args) => vprofile::run(args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ttp_sys::error::exit_code(&e)
        }
    }
}
