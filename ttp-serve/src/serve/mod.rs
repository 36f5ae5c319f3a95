//! `ttp-ebpf serve`: the ledger kept loaded for as long as the command
//! runs, summed per group of processes (fleet.rs), with `--postgres` each
//! PostgreSQL server's statements per fingerprint (postgres.rs,
//! statement_series.rs, pg_metrics.rs), rendered as OpenMetrics
//! (openmetrics.rs) or OTLP (otlp.rs), and served over HTTP for Prometheus
//! to scrape (http.rs, web.rs) or pushed to a collector (push.rs).
//! docs/serve.md.
//!
//! serve is a wing of its own beside the protocols: it reads windows of the
//! ledger (`window::session`) and nothing above them, and the binary only
//! wires its command in (docs/architecture.md, "Crates").
use std::{
    net::{SocketAddr, TcpListener},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use clap::Args;

mod drop;
mod family;
mod fleet;
mod http;
mod openmetrics;
mod otlp;
mod pg_metrics;
mod pg_names;
mod pg_procs;
mod pg_sums;
mod postgres;
mod push;
mod statement_series;
mod web;

use fleet::{Fleet, GroupBy, ProcGroups};
use http::Reply;
use openmetrics::{Exposition, Format, Shared};
use web::WebConfig;

use ttp_ledger::{accounts::Image, probe::probe_error_ctx};
use ttp_sys::{
    error::{parse_duration, usage},
    sys::export::Exporter,
};
use ttp_window::window::session::{MeasurementSession, SessionOptions};

/// The default `--top`: enough for the services of a database host, few
/// enough for a fleet's time-series database (docs/serve.md).
pub const DEFAULT_TOP: usize = 30;

/// The default `--postgres-top`: statement series per server under their
/// own labels. 50 series and `other` make 51 × 23 samples (6 counters and
/// a 17-bucket histogram) ≈ 1 200 time series a server (docs/serve.md,
/// "Cardinality").
pub(crate) const DEFAULT_PG_TOP: usize = 50;

/// How often `--postgres` drains each server's statement records, whatever
/// the `--interval`: the kernel's ring holds about 8 900 records (4 MiB),
/// 0.1 s of 89 000 statements a second.
const POSTGRES_TICK: Duration = Duration::from_millis(100);

/// The exit-record ring serve loads: 1 MiB, 4 096 records, room for 200 ms
/// of 20 000 exits/s while the draining thread is off the CPUs
/// (probe/exits.rs sizes the one of `attach --all` for 1 s at 40 000/s:
/// 16 MiB, mapped twice into the process by the kernel's ring layout).
/// A record that does not fit is counted in
/// `ttp_ledger_lost_events_total{kind="exit_record"}` (docs/serve.md, Cost).
fn serve_exit_ring_bytes() -> u32 {
    ttp_ledger::probe::exits::ring_bytes(20_000, 200)
}

/// Serve the ledger to Prometheus: keep the eBPF programs loaded and
/// answer `GET /metrics` (OpenMetrics, or Prometheus text 0.0.4 when the
/// scraper does not ask for OpenMetrics) with counters per systemd unit,
/// control group, command or user: on-CPU, run-queue wait, sleep, blocked,
/// iowait and its own-I/O part and share, block I/O; per CPU busy, idle
/// and iowait; the ledger's losses and the probes' own cost; with
/// `--postgres`, every statement of the server per database, user and
/// fingerprint (calls, elapsed, on-CPU, run-queue, lock and I/O wait, a
/// latency histogram), followed through restarts. `GET /healthz`
/// says whether the ledger is being read; `GET /metrics.json` gives the
/// same counters as JSON (schema ttp.serve/1). Ctrl-C or SIGTERM detaches the
/// programs and exits 0. See docs/serve.md.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on. Only loopback addresses are
    /// accepted without --listen-public.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9464")]
    pub listen: String,
    /// Allow --listen on an address other than loopback: anyone who can
    /// reach it sees what runs on this machine (docs/serve.md, Security).
    #[arg(long)]
    pub listen_public: bool,
    /// What processes are grouped by.
    #[arg(long, value_enum, default_value_t = GroupBy::Unit)]
    pub group_by: GroupBy,
    /// Keep this many groups, busiest (recent on-CPU) first, under their own
    /// name and fold the rest into `other`; 0 keeps them all.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TOP)]
    pub top: usize,
    /// Read the ledger this often; a scrape returns the last read.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Once the programs are attached, run as this user, with no
    /// capabilities left (when started as root); `root` keeps every
    /// privilege. The ledger is read through the descriptors opened
    /// before (docs/serve.md, Security).
    #[arg(long, value_name = "NAME", default_value = drop::DEFAULT_USER, conflicts_with = "postgres")]
    pub user: String,
    /// Also every statement of the PostgreSQL server of this data
    /// directory, per database, user and fingerprint, followed through
    /// restarts (docs/serve.md, "PostgreSQL statements"). Repeatable; with
    /// no value, every server running now or later. serve then keeps its
    /// privileges: a restarted server's programs are loaded again.
    #[arg(long, value_name = "PGDATA", num_args = 0..=1, default_missing_value = "", action = clap::ArgAction::Append)]
    pub postgres: Vec<String>,
    /// Statement series per server under their own labels, by recent
    /// elapsed time; the rest are summed into `fingerprint="other"`.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PG_TOP, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub postgres_top: usize,
    /// Also push the metrics, after every read of the ledger, to this
    /// OpenTelemetry collector (OTLP/HTTP, protobuf), such as
    /// http://127.0.0.1:4318 (`/v1/metrics` is appended to a URL without
    /// a path). A failed push is counted and retried later, never fatal.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// TLS and basic authentication, in Prometheus' web-config format
    /// (tls_server_config: cert_file, key_file; basic_auth_users: name:
    /// bcrypt hash). Read once at start (docs/serve.md, TLS and basic
    /// auth).
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<std::path::PathBuf>,
}

/// The validated listen address.
fn listen_addr(args: &ServeArgs) -> anyhow::Result<SocketAddr> {
    let Ok(addr) = args.listen.parse::<SocketAddr>() else {
        return usage(format!(
            "bad --listen {:?}: give an address and a port, such as 127.0.0.1:9464 or [::1]:9464",
            args.listen
        ));
    };
    if !addr.ip().is_loopback() && !args.listen_public {
        return usage(format!(
            "--listen {addr} is not a loopback address: add --listen-public to serve the ledger to other machines (docs/serve.md, Security)"
        ));
    }
    Ok(addr)
}

fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).or_else(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => usage(format!(
            "{addr} is in use (another serve or exporter?): choose another port with --listen"
        )),
        _ => usage(format!("cannot listen on {addr}: {e}")),
    })
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let addr = listen_addr(&args)?;
    let otlp_url = args.otlp.as_deref().map(push::endpoint).transpose()?;
    // Read while privileged: the key is usually readable by root only.
    let web = match &args.web_config {
        Some(path) => WebConfig::load(path)?,
        None => WebConfig::default(),
    };
    ttp_sys::sys::privileges::require_bpf()?;
    let user = drop::lookup(&args.user)?;
    let mut servers = (!args.postgres.is_empty())
        .then(|| postgres::Servers::new(&args.postgres, args.postgres_top))
        .transpose()?;
    let listener = bind(addr)?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "ttp: warning: serving on {addr}, which is not loopback: anyone who can reach it sees the processes of this machine"
        );
        if web.users.is_some() && web.tls.is_none() {
            eprintln!(
                "ttp: warning: basic auth without TLS: passwords cross the network in clear (add tls_server_config to the web-config)"
            );
        }
    }
    // One malloc arena per thread would keep each thread's freed memory
    // resident; serve's threads allocate little and rarely contend.
    // SAFETY: mallopt with an integer setting, before serve's threads.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    let mut session = MeasurementSession::open(SessionOptions {
        exit_ring_bytes: Some(serve_exit_ring_bytes()),
        // The statements' iowait is delay accounting's blkio delay.
        delay_accounting: servers.is_some(),
        ..Default::default()
    })?;
    let stop = session.stop_flag()?;
    let mut fleet = Fleet::new((args.top > 0).then_some(args.top));
    let mut groups = ProcGroups::new(args.group_by, "/proc");
    let shared: Shared = Arc::new(RwLock::new(Exposition {
        group_label: args.group_by.label(),
        thread_capacity: u64::from(session.ledger.thread_capacity),
        ..Default::default()
    }));
    let health = Arc::new(RwLock::new(Instant::now()));
    if let Some(s) = &mut servers {
        s.tick();
    }
    refresh(
        &mut session,
        &mut fleet,
        &mut groups,
        servers.as_mut(),
        &shared,
    )?;
    // Loading parsed the kernel's BTF (tens of MiB, all freed by now):
    // hand the freed pages back instead of keeping them resident.
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
    // One sampling window of the kernel's BPF statistics while
    // BPF_ENABLE_STATS is still allowed: without CAP_SYS_ADMIN the later
    // windows are refused, and the probes' ns a run stays this window's
    // (their runs are the ledger's own count throughout; docs/serve.md).
    if let Err(e) = session.ledger.sample_cost_now() {
        log::info!("the probes' cost is not measured: {e}");
    }
    // Everything that needs privilege is done: the programs are attached,
    // the maps and the port are open.
    let dropped = if servers.is_some() {
        drop::Dropped::Kept
    } else {
        drop::drop_privileges(&user)?
    };
    match dropped {
        drop::Dropped::ToUser(name) => {
            eprintln!("ttp: running as {name}, without capabilities")
        }
        drop::Dropped::NotRoot => eprintln!(
            "ttp: started by a user other than root: its capabilities are kept (docs/serve.md, Security)"
        ),
        drop::Dropped::Kept if servers.is_some() => eprintln!(
            "ttp: --postgres keeps serve's privileges: a restarted server's programs are loaded again (docs/serve.md, Security)"
        ),
        drop::Dropped::Kept => {
            eprintln!("ttp: warning: --user root keeps every privilege for serve's whole life")
        }
    }
    // Threads started from here on inherit no_new_privs.
    let pusher = otlp_url
        .clone()
        .map(|url| push::Pusher::start(url, args.interval, Arc::clone(&shared)))
        .transpose()?;
    let scheme = if web.tls.is_some() { "https" } else { "http" };
    let auth = if web.users.is_some() {
        ", basic auth"
    } else {
        ""
    };
    let server = {
        let registry = openmetrics::registry(Arc::clone(&shared));
        let shared = Arc::clone(&shared);
        let health = Arc::clone(&health);
        let stale_after = args.interval * 3;
        http::Server::start(
            listener,
            web,
            Arc::new(move |path: &str, accept: Option<&str>| {
                answer(path, accept, &registry, &shared, &health, stale_after)
            }),
        )?
    };
    if let (Some(url), Some(p)) = (&otlp_url, &pusher) {
        eprintln!("ttp: pushing the metrics to {url} after every read");
        p.after_read();
    }
    if let Some(s) = &servers {
        eprintln!(
            "ttp: following the statements of PostgreSQL: {}",
            s.describe()
        );
    }
    eprintln!(
        "ttp: serving the ledger on {scheme}://{addr}/metrics{auth} (grouped by {}, read every {}); Ctrl-C stops",
        args.group_by.label(),
        humantime::format_duration(args.interval)
    );
    read_until_stopped(&stop, args.interval, &mut servers, |servers| {
        match refresh(&mut session, &mut fleet, &mut groups, servers, &shared) {
            Ok(()) => {
                *health.write().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                if let Some(p) = &pusher {
                    p.after_read();
                }
            }
            // A failed read is said and retried at the next interval; the
            // health endpoint turns unhealthy when reads keep failing.
            Err(e) => eprintln!("ttp: reading the ledger failed: {e:#}"),
        }
    });
    server.stop();
    drop(pusher);
    drop(servers);
    drop(session);
    eprintln!("ttp: serve stopped; programs detached and {addr} released");
    Ok(())
}

/// Calls `read` every `interval` until Ctrl-C or SIGTERM; with
/// `--postgres`, drains the servers' statements every [`POSTGRES_TICK`]
/// between the reads.
fn read_until_stopped(
    stop: &ttp_sys::sys::signals::StopFlag,
    interval: Duration,
    servers: &mut Option<postgres::Servers>,
    mut read: impl FnMut(Option<&mut postgres::Servers>),
) {
    let tick = match servers {
        Some(_) => POSTGRES_TICK.min(interval),
        None => interval,
    };
    let mut next_read = Instant::now() + interval;
    while !stop.raised() {
        stop.sleep(tick.min(next_read.saturating_duration_since(Instant::now())));
        if stop.raised() {
            break;
        }
        if let Some(s) = servers {
            s.tick();
        }
        if Instant::now() < next_read {
            continue;
        }
        next_read = Instant::now() + interval;
        read(servers.as_mut());
    }
}

fn refresh(
    session: &mut MeasurementSession,
    fleet: &mut Fleet,
    groups: &mut ProcGroups,
    servers: Option<&mut postgres::Servers>,
    shared: &Shared,
) -> anyhow::Result<()> {
    let image = Image::from_snapshot(&session.ledger.snapshot().map_err(probe_error_ctx)?);
    // After the image: a thread missing from it has its record queued.
    let mut exits = Vec::new();
    session.ledger.drain_exits(&mut exits);
    fleet.refresh(&image, &exits, groups);
    let programs = session
        .ledger
        .cost_snapshot()
        .map(|c| {
            c.programs
                .into_iter()
                .map(|(name, p)| (name, p.counters()))
                .collect()
        })
        .unwrap_or_default();
    let mut x = shared.write().unwrap_or_else(|p| p.into_inner());
    x.fleet = fleet.view();
    x.programs = programs;
    if let Some(s) = servers {
        x.postgres = s.refresh();
    }
    x.read_unix_ns = push::unix_ns(std::time::SystemTime::now());
    Ok(())
}

/// serve's answer to `GET path` (http.rs has checked the method
/// and the credentials).
fn answer(
    path: &str,
    accept: Option<&str>,
    registry: &prometheus_client::registry::Registry,
    shared: &Shared,
    health: &RwLock<Instant>,
    stale_after: Duration,
) -> Reply {
    const TEXT: &str = "text/plain; charset=utf-8";
    let text = |status, body: String| Reply {
        status,
        content_type: TEXT,
        body: body.into_bytes(),
    };
    match path {
        "/metrics" => {
            let format = Format::from_accept(accept);
            match (openmetrics::Scrape { registry, format }).serialize() {
                Ok(body) => Reply {
                    status: 200,
                    content_type: format.content_type(),
                    body,
                },
                Err(e) => text(500, format!("{e}\n")),
            }
        }
        "/metrics.json" => {
            let x = shared.read().unwrap_or_else(|p| p.into_inner());
            Reply {
                status: 200,
                content_type: "application/json",
                body: openmetrics::json(&x).to_string().into_bytes(),
            }
        }
        "/healthz" => {
            let age = health.read().unwrap_or_else(|p| p.into_inner()).elapsed();
            if age <= stale_after {
                text(200, "ok\n".into())
            } else {
                text(
                    503,
                    format!("the ledger was last read {:.0} s ago\n", age.as_secs_f64()),
                )
            }
        }
        "/" => text(
            200,
            "ttp-ebpf serve: the kernel ledger per group; metrics at /metrics (JSON: /metrics.json), health at /healthz\n".into(),
        ),
        _ => text(404, "not found: try /metrics or /healthz\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(listen: &str, public: bool) -> ServeArgs {
        ServeArgs {
            listen: listen.into(),
            listen_public: public,
            group_by: GroupBy::Unit,
            top: DEFAULT_TOP,
            interval: Duration::from_secs(10),
            user: drop::DEFAULT_USER.into(),
            otlp: None,
            web_config: None,
            postgres: Vec::new(),
            postgres_top: DEFAULT_PG_TOP,
        }
    }

    /// Catches a non-loopback address accepted without the flag, and a
    /// bad address that is not a usage error (exit 2).
    #[test]
    fn listen_is_loopback_unless_asked() {
        assert!(listen_addr(&args("127.0.0.1:9464", false)).is_ok());
        assert!(listen_addr(&args("[::1]:9464", false)).is_ok());
        for bad in ["0.0.0.0:9464", "localhost:9464", "127.0.0.1", "x"] {
            let e = listen_addr(&args(bad, false)).unwrap_err();
            assert_eq!(ttp_sys::error::exit_code(&e), 2, "{bad}");
        }
        assert!(listen_addr(&args("0.0.0.0:9464", true)).is_ok());
    }

    /// Catches a port in use that is not a usage error.
    #[test]
    fn port_in_use_is_a_usage_error() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let e = bind(taken.local_addr().unwrap()).unwrap_err();
        assert_eq!(ttp_sys::error::exit_code(&e), 2);
        assert!(e.to_string().contains("in use"), "{e}");
    }
}
