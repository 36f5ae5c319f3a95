//! Benchmarks. Each prints its figures and the exact command behind them;
//! docs/benchmarks.md records them. The machines are shared and noisy, so
//! every comparison is made side by side in one run: interleaved rounds, and
//! the median of the per-round ratios.
use std::time::Duration;

use clap::Subcommand;

mod cost;
mod floor;
mod lab;
mod overhead;
mod paired;
mod pg;
mod procs;
mod serve;
mod soak;
mod statements;
mod statements_memory;
mod uprobe_floor;
mod vprofile;

#[derive(Subcommand)]
pub enum Which {
    /// Cost of `attach --all` on a context-switch-heavy load: `perf bench
    /// sched pipe` with both ends pinned to one CPU, with and without ttp,
    /// interleaved rounds; also attach-to-ready latency, RSS and CPU use.
    Overhead {
        /// Interleaved rounds (each: one run without ttp, one with).
        #[arg(long, default_value_t = 9)]
        rounds: u32,
        /// Messages per `perf bench sched pipe` run.
        #[arg(long, default_value_t = 100_000)]
        loops: u32,
        /// Also measure bpftrace summing on-CPU time per pid on sched_switch.
        #[arg(long)]
        bpftrace: bool,
        /// Also measure the floor: an empty tp_btf program at each
        /// tracepoint the default ledger hooks, alone and with the kernel's
        /// BPF statistics on (then their per-program table too). Builds
        /// them with clang and libbpf.
        #[arg(long)]
        floor: bool,
        /// Also measure `attach --pid P --trace FILE` on an unrelated
        /// sleeping process P: the cost of tracing for everything else.
        #[arg(long)]
        trace_one: bool,
        /// Also measure `attach --all` of another ttp-ebpf binary (e.g. a
        /// release build of an earlier commit) in the same rounds, so a
        /// change's effect is compared side by side on this noisy machine.
        #[arg(long, value_name = "TTP_EBPF")]
        baseline: Option<std::path::PathBuf>,
        /// More arguments for the baseline's `attach --all` (e.g.
        /// `--baseline target/release/ttp-ebpf --baseline-args=--wake-latency`
        /// compares this build with and without the wake-up hook).
        #[arg(
            long,
            value_name = "ARGS",
            requires = "baseline",
            allow_hyphen_values = true
        )]
        baseline_args: Option<String>,
    },
    /// Cost of `vprofile`'s uprobes to the measured program, beside a
    /// bpftrace script recording the same durations: slowdown and ns per
    /// probe hit, interleaved rounds.
    Vprofile {
        /// Interleaved rounds (each: bare, ttp, bpftrace).
        #[arg(long, default_value_t = 9)]
        rounds: u32,
        /// Root invocations per run.
        #[arg(long, default_value_t = 200_000)]
        invocations: u64,
    },
    /// Cost of `statements` to a PostgreSQL server under `pgbench -S` (or,
    /// with --tpcb, pgbench's TPC-B-like default script): CPU per
    /// transaction (server + pgbench) and TPS without a tracer, with
    /// pg_stat_statements preloaded (a second cluster with the same data),
    /// with bpftrace's bare uprobes at query__start/done (the floor), with
    /// `statements` (its default: boundaries at the client socket), with
    /// `statements --usdt` and with `statements --usdt --simple-only`,
    /// interleaved rounds.
    Statements {
        /// Interleaved rounds (each: without, pg_stat_statements, floor,
        /// socket floor, delay accounting alone, default, --usdt, --usdt
        /// --simple-only; --detail all with --detail-all).
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        /// Seconds per pgbench run.
        #[arg(long, default_value_t = 10)]
        seconds: u32,
        /// pgbench clients.
        #[arg(long, default_value_t = 4)]
        clients: u32,
        /// Run pgbench's TPC-B-like default script (BEGIN, three UPDATEs, a
        /// SELECT, an INSERT, END) instead of -S (select only).
        #[arg(long)]
        tpcb: bool,
        /// Also measure `statements --detail all` (socket boundaries and
        /// every wait probe, the per-page and per-lock ones included).
        #[arg(long)]
        detail_all: bool,
        /// Only these variants besides the run without a tracer, by their
        /// names in the table (e.g. `pgss,sock-floor,socket`): more rounds
        /// in the same time for the figures that decide.
        #[arg(long, value_delimiter = ',')]
        only: Vec<statements::Variant>,
        /// Instead of variants taking turns: pairs of clusters loaded at
        /// the same time, one with the variant and one without (two plain
        /// clusters; pg_stat_statements against a plain one; the default
        /// `statements` on one of two plain ones), so the machine's noise
        /// falls on both sides of each round's ratio (bench/paired.rs).
        #[arg(long, conflicts_with_all = ["only", "detail_all"])]
        paired: bool,
    },
    /// ttp's resident memory while `statements` (summed in the kernel)
    /// measures a server under `pgbench -S -M prepared` at full rate:
    /// after 10⁵ statements, at 10 s, at 40 s and after `--statements`.
    StatementsMemory {
        /// Statements the server runs before ttp is stopped.
        #[arg(long, default_value_t = 10_000_000)]
        statements: u64,
        /// pgbench clients.
        #[arg(long, default_value_t = 4)]
        clients: u32,
    },
    /// `serve --group-by unit --interval 10s`, scraped every 10 s for a
    /// while: its userspace CPU share, peak RSS and scrape size.
    Serve {
        /// How long to run (e.g. 10m); with --postgres, each variant of
        /// each round.
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        duration: Duration,
        /// Under `pgbench -n -S -c 4` on a throw-away server, in
        /// interleaved rounds: no serve, `serve`, `serve --postgres
        /// PGDATA`; serve's CPU and memory and the server's TPS.
        #[arg(long)]
        postgres: bool,
        /// Rounds with --postgres.
        #[arg(long, default_value_t = 2)]
        rounds: u32,
    },
    /// The lab's queue: N `lab worker` processes with a trivial executor
    /// (`--no-run`: claim and finish, no `run`) against one local
    /// PostgreSQL lab server, 2 000 tasks per N: claims per second, claim
    /// round-trip percentiles, every task checked done exactly once.
    Lab {
        /// Worker counts, one run each on a fresh lab database.
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        workers: Vec<usize>,
    },
    /// A long run of `attach --all --interval 1s`: ttp's RSS, CPU use and
    /// thread-map occupancy over time, as figures and an SVG plot
    /// (target/soak/).
    Soak {
        /// How long to run (e.g. 15m, 1h).
        #[arg(long, default_value = "15m", value_parser = parse_duration)]
        duration: Duration,
        /// Sample every this long.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        every: Duration,
        /// Start this many short processes a second beside attach (0:
        /// none), so the rows of ended processes fill up.
        #[arg(long, default_value_t = 20)]
        churn: u32,
        /// Passed to `attach --keep-exited` (default: attach's own).
        #[arg(long)]
        keep_exited: Option<u64>,
        /// Every this long (from 30 s in), a fork storm beside attach:
        /// 5 000 processes of 4 threads (tests' fixture-forkstorm, 8 alive
        /// at once), 25 000 thread exits in a few seconds.
        #[arg(long, value_parser = parse_duration)]
        storm_every: Option<Duration>,
    },
}

/// `90s`, `15m`, `1h`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("not a duration: {s}"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("unknown unit in {s} (s, m or h)")),
    };
    Ok(Duration::from_secs(secs))
}

pub fn run(which: Which) -> anyhow::Result<()> {
    match which {
        Which::Overhead {
            rounds,
            loops,
            bpftrace,
            floor,
            trace_one,
            baseline,
            baseline_args,
        } => overhead::overhead(
            rounds,
            loops,
            bpftrace,
            floor,
            trace_one,
            baseline.as_deref(),
            baseline_args.as_deref().unwrap_or(""),
        ),
        Which::Vprofile {
            rounds,
            invocations,
        } => vprofile::bench(rounds, invocations),
        Which::Soak {
            duration,
            every,
            churn,
            keep_exited,
            storm_every,
        } => soak::bench(duration, every, churn, keep_exited, storm_every),
        Which::Serve {
            duration,
            postgres: false,
            ..
        } => serve::bench(duration),
        Which::Serve {
            duration,
            postgres: true,
            rounds,
        } => serve::bench_postgres(duration, rounds),
        Which::Statements {
            rounds,
            seconds,
            clients,
            tpcb,
            paired: true,
            ..
        } => paired::bench(
            rounds,
            statements::Load {
                tpcb,
                seconds,
                clients,
            },
        ),
        Which::Statements {
            rounds,
            seconds,
            clients,
            tpcb,
            detail_all,
            only,
            paired: false,
        } => statements::bench(
            rounds,
            statements::Load {
                tpcb,
                seconds,
                clients,
            },
            detail_all,
            &only,
        ),
        Which::StatementsMemory {
            statements,
            clients,
        } => statements_memory::bench(statements, clients),
        Which::Lab { workers } => lab::bench(&workers),
    }
}
