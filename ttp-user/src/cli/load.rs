//! `ttp-ebpf load`: latency under load without coordinated omission.
use std::{
    io::IsTerminal,
    path::PathBuf,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use clap::ArgGroup;

use crate::report::format;
use ttp_load::{
    LoadError, Model, PhasePlan,
    analytic::expected_open_latencies_ns,
    clock::ClockKind,
    driver::{PhaseHooks, run_phase},
    ledger::LedgerSampler,
    output::{LoadReport, OutputFiles},
    schedule::Arrivals,
    simulator::{Hiccup, SimParams, SimulateFactory},
    targets::{ExecFactory, TargetError, TargetFactory},
};
use ttp_sys::{
    error::{UsageError, usage},
    sys::invoker::Invoker,
};

/// Which load models to run; `all` runs the open model, then the closed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ModelChoice {
    /// Open system model: each request sent at its intended time.
    Open,
    /// Closed system model: YCSB's loop of N connections.
    Closed,
    /// Both, one after the other, reported side by side.
    All,
}

/// Measure latency under load without coordinated omission.
///
/// Requests are scheduled at a fixed rate and each one's latency is measured
/// from the time it was meant to start (the open model), so a stall of the
/// target shows in the percentiles instead of pausing the load. The closed
/// model (YCSB's loop, with its intended-latency correction) can be run for
/// comparison. Needs no privileges.
///
/// Targets: --simulate (the SickStore queue model, whose latencies are known),
/// --exec -- CMD… (one process per request; exit status 0 is success) or
/// --postgres CONNSTR --sql "…" or -f SCRIPT (a pool of connections, the
/// statements prepared once on each) or --tcp HOST:PORT (a line answered by a line). With --attach-pid PID (needs root) the kernel
/// ledger of that process and its descendants is sampled every second
/// beside the latency timeline.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("target").required(true).args(["simulate", "exec", "postgres", "tcp"])))]
#[command(group(ArgGroup::new("statements").args(["sql", "file"])))]
pub(crate) struct LoadArgs {
    /// Requests per second to send (the open model's arrival rate, the
    /// closed model's target throughput).
    #[arg(long, value_name = "R")]
    pub rate: f64,

    /// Inter-arrival times: uniform (request i at i/R) or poisson
    /// (exponential gaps, seeded).
    #[arg(long, value_enum, default_value = "uniform")]
    pub arrivals: Arrivals,

    /// Seed of the Poisson schedule (default: taken from the clock; 0 for
    /// uniform arrivals). Always recorded in the output so a run can be
    /// repeated.
    #[arg(long)]
    pub seed: Option<u64>,

    /// Measured duration, e.g. 30s or 2m.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Duration,

    /// Load sent before the measured duration and left out of the results.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    pub warmup: Duration,

    /// After the schedule ends, how long the run still sends requests that
    /// were due (late) and waits for responses. Then unsent requests count
    /// as `not_sent` errors (closed model: omitted), those in flight as
    /// `unfinished` errors. The run never lasts longer than warm-up +
    /// duration + grace per model.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    pub grace: Duration,

    /// Per-request timeout: a request without a response by then is
    /// abandoned and counted as a `timeout` error. Default: none.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,

    /// Open model: most requests in flight at once. A request over the bound
    /// waits in a queue, its latency still counting from its intended time.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub max_in_flight: usize,

    /// Open model: run the sender thread under SCHED_FIFO (priority 1), so
    /// that ordinary tasks on a busy machine cannot delay its sends. Needs
    /// root (CAP_SYS_NICE); the kernel's real-time throttling
    /// (kernel.sched_rt_runtime_us) still leaves other tasks their share.
    #[arg(long)]
    pub realtime_sender: bool,

    /// Load model(s) to run.
    #[arg(long, value_enum, default_value = "open")]
    pub model: ModelChoice,

    /// Closed model: number of connections (YCSB client threads), each
    /// sending its next request only after the previous response.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub connections: usize,

    /// Target: the SickStore queue model (Friedrich et al., Sec. 4) in process.
    #[arg(long, requires = "capacity")]
    pub simulate: bool,

    /// --simulate: requests per second the simulated server can serve.
    #[arg(long, value_name = "C")]
    pub capacity: Option<f64>,

    /// --simulate: when the hiccup starts, from the start of each phase.
    #[arg(long, value_parser = humantime::parse_duration, requires = "hiccup_for")]
    pub hiccup_at: Option<Duration>,

    /// --simulate: how long the hiccup lasts.
    #[arg(long, value_parser = humantime::parse_duration, requires = "hiccup_at")]
    pub hiccup_for: Option<Duration>,

    /// --simulate: latency of every response on top of its queueing wait.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub service_latency: Option<Duration>,

    /// Clock to run on: virtual (simulated time; exact, instant; the default
    /// for --simulate) or real (the default, and the only choice, for --exec).
    #[arg(long, value_enum)]
    pub clock: Option<ClockKind>,

    /// Target: run the command given after `--` once per request.
    #[arg(long)]
    pub exec: bool,

    /// Target: PostgreSQL (key=value pairs or a postgresql:// URL); each
    /// request executes --sql, or the script of -f, on a connection of the
    /// pool.
    #[arg(long, value_name = "CONNSTR", requires = "statements")]
    pub postgres: Option<String>,

    /// --postgres: a transaction script in pgbench's format (the subset of
    /// docs/load.md: one statement per line, `\set NAME random(LO, HI)`,
    /// `:NAME`, BEGIN;/END;); each request runs it whole on one connection,
    /// so latencies are per transaction.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "SCRIPT",
        requires = "postgres",
        conflicts_with_all = ["sql", "param"]
    )]
    pub file: Option<PathBuf>,

    /// --postgres: the statement each request executes (prepared once per
    /// connection; its rows are read and dropped).
    #[arg(long, value_name = "SQL", requires = "postgres")]
    pub sql: Option<String>,

    /// --postgres: the value of the statement's next `$n` (one option per
    /// parameter, in order), drawn per request: NAME=uniform:LO:HI (integers,
    /// both ends included), from a generator seeded by --seed (recorded).
    #[arg(long, value_name = "NAME=uniform:LO:HI", requires = "postgres")]
    pub param: Vec<String>,

    /// As pgbench's --latency-limit: requests whose latency from their
    /// intended start exceeds LIMIT are counted late; in the open model a
    /// request already later than LIMIT when it is due is skipped (not
    /// sent) and counted.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "LIMIT")]
    pub latency_limit: Option<Duration>,

    /// --postgres, --tcp: most connections in the pool (default 16; the
    /// pool is the phase's concurrency when that is smaller).
    #[arg(long, value_name = "N")]
    pub pool_size: Option<usize>,

    /// Target: a TCP server that answers a line with a line (an echo
    /// server, Redis PING); each request writes --send on a pooled
    /// connection and waits for the answer line.
    #[arg(long, value_name = "HOST:PORT")]
    pub tcp: Option<String>,

    /// --tcp: the line each request writes (default `ping`).
    #[arg(long, value_name = "LINE", requires = "tcp")]
    pub send: Option<String>,

    /// Sample the kernel ledger of process PID and its descendants every
    /// second (on-CPU, run-queue wait, iowait, I/O bytes) beside the
    /// latency timeline, e.g. the PostgreSQL postmaster or one backend.
    /// Needs root.
    #[arg(long, value_name = "PID")]
    pub attach_pid: Option<u32>,

    /// Run the --exec command as root instead of the invoking user
    /// (SUDO_UID) when ttp runs under sudo.
    #[arg(long, requires = "exec")]
    pub as_root: bool,

    /// The command for --exec, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,

    /// Write the results as JSON (schema "ttp.load/1").
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write HdrHistogram percentile distributions: FILE gets the headline
    /// latency, FILE's stem + .<series>.hgrm every distribution.
    #[arg(long, value_name = "FILE")]
    pub hgrm: Option<PathBuf>,

    /// Write the percentile spectrum of every distribution as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// The options, checked once.
pub(crate) struct LoadConfig {
    pub plan: PhasePlan,
    pub models: Vec<Model>,
    pub clock: ClockKind,
    pub factory: Arc<dyn TargetFactory>,
    pub sim: Option<SimParams>,
    /// `--attach-pid`: the process whose ledger is sampled per second.
    pub attach_pid: Option<u32>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

const MAX_RATE_PER_S: f64 = 1e8;

impl LoadArgs {
    pub(crate) fn validate(&self) -> anyhow::Result<LoadConfig> {
        self.check_limits()?;
        let seed = self.seed_or_clock();
        let (factory, sim, clock) = if self.simulate {
            self.simulate_target()?
        } else if let Some(addr) = &self.tcp {
            self.tcp_target(addr)?
        } else if let Some(conninfo) = &self.postgres {
            self.postgres_target(conninfo, seed)?
        } else {
            self.exec_target()?
        };
        Ok(LoadConfig {
            plan: PhasePlan {
                rate_per_s: self.rate,
                arrivals: self.arrivals,
                seed,
                warmup_ns: nanos(self.warmup),
                duration_ns: nanos(self.duration),
                grace_ns: nanos(self.grace),
                timeout_ns: self.timeout.map(nanos),
                max_in_flight: self.max_in_flight,
                connections: self.connections,
                latency_limit_ns: self.latency_limit.map(nanos),
                realtime_sender: self.realtime_sender,
            },
            models: match self.model {
                ModelChoice::Open => vec![Model::Open],
                ModelChoice::Closed => vec![Model::Closed],
                ModelChoice::All => vec![Model::Open, Model::Closed],
            },
            clock,
            factory,
            sim,
            attach_pid: match self.attach_pid {
                Some(pid) if clock == ClockKind::Virtual => {
                    return usage(format!(
                        "--attach-pid {pid} samples a real process each second; it needs the real clock (--clock real)"
                    ));
                }
                Some(pid) if !std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                    return usage(format!("--attach-pid {pid}: no such process"));
                }
                other => other,
            },
        })
    }

    /// The bounds of the numbers and the options that go together.
    fn check_limits(&self) -> anyhow::Result<()> {
        if !(self.rate.is_finite() && self.rate > 0.0 && self.rate <= MAX_RATE_PER_S) {
            return usage(format!(
                "--rate must be a number of requests per second in (0, {MAX_RATE_PER_S:e}], got {}",
                self.rate
            ));
        }
        if self.duration.is_zero() {
            return usage("--duration must be positive, e.g. --duration 30s");
        }
        if self.max_in_flight == 0 || self.connections == 0 {
            return usage("--max-in-flight and --connections must be at least 1");
        }
        if self.realtime_sender && !ttp_sys::sys::privileges::may_use_realtime() {
            return usage(
                "--realtime-sender needs CAP_SYS_NICE (root) to make the sender thread SCHED_FIFO: run under sudo, or leave it out",
            );
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return usage("--timeout must be positive (leave it out for no timeout)");
        }
        if self.latency_limit.is_some_and(|l| l.is_zero()) {
            return usage("--latency-limit must be positive, e.g. --latency-limit 5ms");
        }
        if self.pool_size.is_some() && self.postgres.is_none() && self.tcp.is_none() {
            return usage("--pool-size applies only to --postgres and --tcp");
        }
        Ok(())
    }

    /// Whether an option of `--simulate` alone is given.
    fn sim_only(&self) -> bool {
        self.capacity.is_some() || self.hiccup_at.is_some() || self.service_latency.is_some()
    }

    /// The schedule's seed: given, 0 where nothing is random, else the
    /// clock's (recorded, so that the run can be repeated).
    fn seed_or_clock(&self) -> u64 {
        match self.seed {
            Some(s) => s,
            None if self.arrivals == Arrivals::Uniform
                && self.param.is_empty()
                && self.file.is_none() =>
            {
                0
            }
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
        }
    }

    /// `--simulate`: the simulated server of Sec. 2.
    fn simulate_target(&self) -> anyhow::Result<Destination> {
        if !self.command.is_empty() {
            return usage("a command after `--` needs --exec, not --simulate");
        }
        let capacity = self.capacity.unwrap_or(0.0);
        if !(capacity.is_finite() && capacity > 0.0) {
            return usage("--capacity must be a positive number of requests per second");
        }
        let params = SimParams {
            capacity_per_s: capacity,
            hiccup: match (self.hiccup_at, self.hiccup_for) {
                (Some(at), Some(f)) => Some(Hiccup {
                    at_ns: nanos(at),
                    for_ns: nanos(f),
                }),
                _ => None,
            },
            // Sec. 2: the paper's SickStore requests took < 50 µs.
            service_latency_ns: nanos(self.service_latency.unwrap_or(Duration::from_micros(50))),
        };
        let clock = self.clock.unwrap_or(ClockKind::Virtual);
        Ok((Arc::new(SimulateFactory { params }), Some(params), clock))
    }

    /// `--tcp ADDR`: lines sent over TCP.
    fn tcp_target(&self, addr: &str) -> anyhow::Result<Destination> {
        if self.sim_only() || !self.command.is_empty() {
            return usage(
                "--tcp sends --send lines; drop the --simulate options and the command after `--`",
            );
        }
        if self.clock == Some(ClockKind::Virtual) {
            return usage("--tcp needs the real clock; drop --clock virtual");
        }
        let f = ttp_load::tcp::TcpFactory::new(addr, self.send.as_deref(), self.pool_size)
            .or_else(usage)?;
        Ok((Arc::new(f), None, ClockKind::Real))
    }

    /// `--postgres CONNINFO`: `--sql` or a pgbench-style script.
    fn postgres_target(&self, conninfo: &str, seed: u64) -> anyhow::Result<Destination> {
        if self.sim_only() || !self.command.is_empty() {
            return usage(
                "--postgres runs --sql; drop the --simulate options and the command after `--`",
            );
        }
        if self.clock == Some(ClockKind::Virtual) {
            return usage("--postgres needs the real clock; drop --clock virtual");
        }
        let f = match &self.file {
            Some(path) => {
                let text = std::fs::read_to_string(path).or_else(|e| {
                    usage(format!(
                        "-f {}: {e}; give a readable pgbench-style script",
                        path.display()
                    ))
                })?;
                let name = path.display().to_string();
                let script = crate::pg::script::Script::parse(&name, &text).or_else(usage)?;
                crate::pg::load::PgFactory::new(conninfo, &script.text(), self.pool_size)
                    .or_else(usage)?
                    .with_script(script, &name, seed)
            }
            None => {
                let params = self
                    .param
                    .iter()
                    .map(|p| crate::pg::script::ParamSpec::parse(p))
                    .collect::<Result<Vec<_>, _>>()
                    .or_else(usage)?;
                crate::pg::load::PgFactory::new(
                    conninfo,
                    self.sql.as_deref().unwrap_or(""),
                    self.pool_size,
                )
                .or_else(usage)?
                .with_params(params, seed)
            }
        };
        Ok((Arc::new(f), None, ClockKind::Real))
    }

    /// `--exec -- CMD`: a process per request, as the invoking user.
    fn exec_target(&self) -> anyhow::Result<Destination> {
        if self.sim_only() {
            return usage(
                "--capacity, --hiccup-at/--hiccup-for and --service-latency apply only to --simulate",
            );
        }
        if self.clock == Some(ClockKind::Virtual) {
            return usage(
                "--exec runs real processes and needs the real clock; drop --clock virtual",
            );
        }
        let mut f = ExecFactory::new(self.command.clone()).or_else(usage)?;
        // Under sudo (for --attach-pid), requests run as the invoking
        // user unless --as-root.
        let invoker = Invoker::detect().map_err(|e| UsageError::new(e.to_string()))?;
        if !self.as_root && !invoker.is_effective_user() {
            f = f.run_as(invoker.uid, invoker.gid);
        }
        Ok((Arc::new(f), None, ClockKind::Real))
    }
}

/// What a request goes to: its factory, the simulated server's
/// parameters (`--simulate` only) and the clock the run keeps.
type Destination = (Arc<dyn TargetFactory>, Option<SimParams>, ClockKind);

fn progress_bar(plan: &PhasePlan, model: Model) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new((plan.warmup_ns + plan.duration_ns) / 1_000_000);
    let style = indicatif::ProgressStyle::with_template(&format!(
        "{:<6} model {{bar:40}} {{pos}}/{{len}} ms",
        match model {
            Model::Open => "open",
            Model::Closed => "closed",
        }
    ))
    .ok()?;
    bar.set_style(style);
    Some(bar)
}

/// Runs every phase and assembles the report.
pub fn measure(cfg: &LoadConfig) -> anyhow::Result<LoadReport> {
    let ledger = match cfg.attach_pid {
        Some(_) => {
            let session =
                ttp_window::window::session::MeasurementSession::open(Default::default())?;
            Some(Arc::new(std::sync::Mutex::new(session.ledger)))
        }
        None => None,
    };
    let mut phases = Vec::new();
    for &model in &cfg.models {
        let samplers: Vec<Box<dyn ttp_load::driver::TimelineSampler>> =
            match (&ledger, cfg.attach_pid) {
                (Some(l), Some(pid)) => vec![Box::new(LedgerSampler::new(l.clone(), pid))],
                _ => Vec::new(),
            };
        let hooks = PhaseHooks {
            samplers,
            progress: match cfg.clock {
                ClockKind::Real => progress_bar(&cfg.plan, model),
                ClockKind::Virtual => None,
            },
        };
        let phase = match run_phase(model, cfg.plan, cfg.clock, cfg.factory.clone(), hooks) {
            Ok(p) => p,
            // A target that cannot be reached or refuses the statements is
            // the user's to fix (as for `run --postgres`): exit 2.
            Err(e @ LoadError::Target(TargetError::Connect { .. })) => {
                return usage(format!("{model:?} model phase: {e}"));
            }
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!("{model:?} model phase failed")));
            }
        };
        phases.push(phase);
    }
    Ok(LoadReport {
        target: cfg.factory.describe(),
        target_summary: cfg.factory.summary(),
        clock: cfg.clock,
        plan: cfg.plan,
        expected_ns: cfg
            .sim
            .filter(|_| cfg.models.contains(&Model::Open))
            .and_then(|p| expected_open_latencies_ns(&p, &cfg.plan)),
        phases,
    })
}

pub fn run(args: LoadArgs) -> anyhow::Result<()> {
    let cfg = args.validate()?;
    let report = measure(&cfg)?;
    // One document: printed through the renderer `report` shows the saved
    // file with (report/render/load_report.rs), then written with the
    // files beside it.
    let mut doc = report.document(OutputFiles::default());
    crate::report::render::print(&doc);
    let mut files = OutputFiles::default();
    if let Some(path) = &args.hgrm {
        files.hgrm = format::hgrm::write_all(&report, path)?;
    }
    if let Some(path) = &args.svg {
        match format::write_unannounced_file(path, &format::svg::Svg::Load(&report)) {
            Ok(()) => files.svg = Some(path.clone()),
            Err(format::OutputError::Export(e)) => {
                log::warn!("{} not written: {e}", path.display())
            }
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(path) = &args.json {
        doc.files = files;
        format::write_unannounced_file(path, &format::json::Json(&doc))?;
    }
    Ok(())
}

#[cfg(test)]
mod report_tests;
#[cfg(test)]
mod tests;
