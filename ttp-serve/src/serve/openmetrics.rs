//! The fleet ledger (fleet.rs) as OpenMetrics text, or Prometheus
//! text 0.0.4 for scrapers that do not ask for OpenMetrics, through the
//! `prometheus-client` crate. Metric names and meanings: docs/serve.md.
use std::sync::{Arc, RwLock};

use prometheus_client::{
    collector::Collector,
    encoding::DescriptorEncoder,
    metrics::info::Info,
    registry::{Registry, Unit},
};

use crate::serve::{
    family::{Family, Labels, secs},
    fleet::FleetView,
    pg_metrics,
    postgres::ServerView,
};
use ttp_ledger::{
    accounts::LedgerMeasures,
    probe::{KernelStats, cost::ProgramCounters},
};

/// Everything one scrape shows: the fleet's view and the probes' cost.
#[derive(Debug, Clone, Default)]
pub(crate) struct Exposition {
    /// The label the groups carry (`unit`, `cgroup`, `comm`, `user`).
    pub group_label: &'static str,
    pub fleet: FleetView,
    /// (program, counters since it was loaded); empty when the kernel
    /// does not count them.
    pub programs: Vec<(String, ProgramCounters)>,
    /// Thread accounts the ledger's map holds at most.
    pub thread_capacity: u64,
    /// Whether the ledger has the wake-up hook loaded: without it (the
    /// default) `ttp_wake_latency_seconds_total` is not exposed, the
    /// measure not taken (docs/ledger.md).
    pub wake_latency: bool,
    /// Whether the ledger has the interrupt programs loaded (`--irq-time`
    /// of `run` and `attach`; serve does not load them): without them
    /// `ttp_irq_seconds_total` is not exposed.
    pub irq_time: bool,
    /// When the ledger was last read, ns since the Unix epoch.
    pub read_unix_ns: u64,
    /// The OTLP pushes so far, when serve pushes (`--otlp`).
    pub otlp: Option<PushCounts>,
    /// The PostgreSQL servers of `--postgres` (postgres.rs).
    pub postgres: Vec<ServerView>,
}

/// What `serve --otlp` pushed: requests the collector accepted, and
/// attempts that failed (push.rs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PushCounts {
    pub pushed: u64,
    pub failed: u64,
}

/// The wire formats of `GET /metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    OpenMetrics,
    PrometheusText,
}

impl Format {
    /// The format an HTTP `Accept` header asks for: OpenMetrics when it
    /// names `application/openmetrics-text` (Prometheus ≥ 2.5 does, first),
    /// else Prometheus text 0.0.4 (curl, older scrapers).
    pub(crate) fn from_accept(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::PrometheusText,
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        }
    }
}

/// The registry `serve` answers from; [`Shared`] is replaced at each refresh.
pub(crate) type Shared = Arc<RwLock<Exposition>>;

/// A registry holding the exposition's collector and `ttp_build_info`.
pub(crate) fn registry(shared: Shared) -> Registry {
    let mut r = Registry::default();
    r.register(
        "ttp_build",
        "The ttp-ebpf build that serves these metrics.",
        Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
    );
    r.register_collector(Box::new(LedgerCollector(shared)));
    r
}

/// A scrape of the registry in one wire format: `GET /metrics`'s body,
/// through the one trait every output format of ttp implements.
pub(crate) struct Scrape<'a> {
    pub registry: &'a Registry,
    pub format: Format,
}

impl ttp_sys::sys::export::Exporter for Scrape<'_> {
    fn serialize(&self) -> Result<Vec<u8>, ttp_sys::sys::export::ExportError> {
        Ok(encode(self.registry, self.format).into_bytes())
    }
}

/// The exposition in `format`.
pub(crate) fn encode(registry: &Registry, format: Format) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = match format {
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, registry),
        Format::PrometheusText => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, registry)
        }
    };
    out
}

/// The exposition as JSON (schema `ttp.serve/1`, `GET /metrics.json`):
/// the same counters in the ledger's own units (ns, bytes, counts), for
/// tools that do not speak OpenMetrics.
pub(crate) fn json(x: &Exposition) -> serde_json::Value {
    serde_json::json!({
        "schema": "ttp.serve/1",
        "group_by": x.group_label,
        "groups": x.fleet.groups.iter().map(|(g, m)| serde_json::json!({"group": g, "kernel": m})).collect::<Vec<_>>(),
        "cpus": x.fleet.cpus,
        "lost": x.fleet.stats,
        "vanished_threads": x.fleet.vanished_threads,
        "threads": x.fleet.threads,
        "thread_capacity": x.thread_capacity,
        "refreshes": x.fleet.refreshes,
        "postgres": x.postgres,
        "programs": x.programs.iter().map(|(p, c)| serde_json::json!({
            "program": p,
            "run_count": c.run_count,
            "run_time_ns": c.run_time_ns,
            "recursion_misses": c.recursion_misses,
        })).collect::<Vec<_>>(),
    })
}

#[derive(Debug)]
struct LedgerCollector(Shared);

/// The per-group families: every counter of the ledger, in seconds, bytes
/// or counts.
fn group_families(x: &Exposition) -> Vec<Family> {
    type Pick = fn(&LedgerMeasures) -> Vec<(Option<(&'static str, &'static str)>, f64)>;
    let s = Some(Unit::Seconds);
    let b = Some(Unit::Bytes);
    let defs: Vec<(&'static str, &'static str, Option<Unit>, Pick)> = vec![
        (
            "ttp_on_cpu",
            "Time on a CPU (the kernel's runtime, steal left out).",
            s.clone(),
            |m| vec![(None, secs(m.on_cpu_ns))],
        ),
        (
            "ttp_irq",
            "Part of the on-CPU time spent in hard and soft interrupt handlers, which the kernel charges to the task they interrupt.",
            s.clone(),
            |m| vec![(None, secs(m.irq_ns))],
        ),
        (
            "ttp_runqueue_wait",
            "Time runnable, waiting for a CPU (the kernel's run_delay).",
            s.clone(),
            |m| vec![(None, secs(m.runq_wait_ns))],
        ),
        (
            "ttp_wake_latency",
            "Wall time from a wakeup or preemption to the switch-in.",
            s.clone(),
            |m| vec![(None, secs(m.wake_latency_ns))],
        ),
        (
            "ttp_sleep",
            "Time in interruptible sleep (S), idle kernel threads, stopped.",
            s.clone(),
            |m| vec![(None, secs(m.sleep_ns))],
        ),
        (
            "ttp_blocked",
            "Time in uninterruptible sleep (D) not on block I/O.",
            s.clone(),
            |m| vec![(None, secs(m.blocked_ns))],
        ),
        (
            "ttp_iowait",
            "Time blocked on block I/O (in_iowait): the delay-accounting blkio delay.",
            s.clone(),
            |m| vec![(None, secs(m.iowait_ns))],
        ),
        (
            "ttp_iowait_own",
            "Part of the I/O wait during which the disk served the group's own process's requests.",
            s.clone(),
            |m| vec![(None, secs(m.iowait_own_ns))],
        ),
        (
            "ttp_iowait_share",
            "The group's share of the machine's iowait: idle CPU time while its tasks waited on I/O, split among the waiting tasks.",
            s.clone(),
            |m| vec![(None, secs(m.iowait_share_ns))],
        ),
        (
            "ttp_block_read",
            "Bytes of block read requests issued.",
            b.clone(),
            |m| vec![(None, m.io.read_bytes as f64)],
        ),
        (
            "ttp_block_write",
            "Bytes of block write requests issued.",
            b,
            |m| vec![(None, m.io.write_bytes as f64)],
        ),
        ("ttp_block_requests", "Block requests issued.", None, |m| {
            vec![
                (Some(("op", "read")), m.io.read_requests as f64),
                (Some(("op", "write")), m.io.write_requests as f64),
            ]
        }),
        (
            "ttp_block_device",
            "Time the group's block requests spent on the device (issue to completion).",
            s.clone(),
            |m| vec![(None, secs(m.io.device_ns))],
        ),
        (
            "ttp_block_queue",
            "Time the group's block requests spent queued in the block layer (start to issue).",
            s,
            |m| vec![(None, secs(m.io.queue_ns))],
        ),
        (
            "ttp_switches",
            "Context switches out: voluntary (not runnable) and involuntary (preempted).",
            None,
            |m| {
                vec![
                    (Some(("kind", "voluntary")), m.voluntary_switches as f64),
                    (Some(("kind", "involuntary")), m.involuntary_switches as f64),
                ]
            },
        ),
        (
            "ttp_wakeups",
            "Times the group's threads were woken.",
            None,
            |m| vec![(None, m.wakeups as f64)],
        ),
    ];
    defs.into_iter()
        .filter(|(name, ..)| x.wake_latency || *name != "ttp_wake_latency")
        .filter(|(name, ..)| x.irq_time || *name != "ttp_irq")
        .map(|(name, help, unit, pick)| {
            let mut f = Family::counter(name, help, unit);
            for (group, m) in &x.fleet.groups {
                for (extra, v) in pick(m) {
                    let mut labels: Labels = vec![(x.group_label, group.clone())];
                    labels.extend(extra.map(|(k, v)| (k, v.to_string())));
                    f.push(labels, v);
                }
            }
            f
        })
        .collect()
}

fn machine_families(x: &Exposition) -> Vec<Family> {
    let mut cpu = Family::counter(
        "ttp_cpu",
        "Each CPU's time as /proc/stat splits it: busy, idle, iowait (idle while tasks that slept on it wait for block I/O).",
        Some(Unit::Seconds),
    );
    for (id, t) in &x.fleet.cpus {
        for (mode, ns) in [
            ("busy", t.busy_ns),
            ("idle", t.idle_ns),
            ("iowait", t.iowait_ns),
        ] {
            cpu.push(
                vec![("cpu", id.to_string()), ("mode", mode.into())],
                secs(ns),
            );
        }
    }
    let mut lost = Family::counter(
        "ttp_ledger_lost_events",
        "Events the ledger could not account (each kind names what was lost; docs/serve.md).",
        None,
    );
    let st: &KernelStats = &x.fleet.stats;
    for (kind, n) in [
        ("exit_record", st.exit_records_lost),
        ("thread_map_full", st.thread_map_full),
        ("read_failed", st.read_failed),
        ("request_map_full", st.request_map_full),
        ("proc_disk_map_full", st.proc_disk_map_full),
        ("request_end_at_reuse", st.requests_ended_at_reuse),
        ("irq_capped", st.irq_capped),
        ("cpu_out_of_range", st.cpu_out_of_range),
        ("thread_vanished", x.fleet.vanished_threads),
    ] {
        lost.push(vec![("kind", kind.into())], n as f64);
    }
    let mut gaps = Family::counter(
        "ttp_ledger_recovered_events",
        "Gaps in the tracepoints' view that the ledger recovered from the kernel's own counters, or a lock it did not get.",
        None,
    );
    for (kind, n) in [
        ("lock_contended", st.lock_contended),
        ("wakeup_unseen", st.wakeups_unseen),
        ("switch_unseen", st.switches_unseen),
        ("unreported_switch", st.unreported_switches),
    ] {
        gaps.push(vec![("kind", kind.into())], n as f64);
    }
    let mut switches = Family::counter(
        "ttp_ledger_switches",
        "Context switches the ledger handled.",
        None,
    );
    switches.push(vec![], st.switches as f64);
    let mut exits = Family::counter(
        "ttp_ledger_exit_records",
        "Thread exit records delivered.",
        None,
    );
    exits.push(vec![], st.exit_records as f64);
    let mut runs = Family::counter(
        "ttp_probe_runs",
        "Runs of each eBPF program (the kernel's BPF statistics).",
        None,
    );
    let mut time = Family::counter(
        "ttp_probe",
        "CPU time of each eBPF program (the kernel's BPF statistics): the probes' own cost.",
        Some(Unit::Seconds),
    );
    let mut missed = Family::counter(
        "ttp_probe_recursion_misses",
        "Runs of each program skipped because it was already running on that CPU: events lost.",
        None,
    );
    for (program, c) in &x.programs {
        let l = vec![("program", program.clone())];
        runs.push(l.clone(), c.run_count as f64);
        time.push(l.clone(), secs(c.run_time_ns));
        missed.push(l, c.recursion_misses as f64);
    }
    let mut threads = Family::gauge("ttp_ledger_threads", "Threads the ledger follows now.");
    threads.push(vec![], x.fleet.threads as f64);
    let mut capacity = Family::gauge(
        "ttp_ledger_thread_capacity",
        "Thread accounts the ledger's map can hold.",
    );
    capacity.push(vec![], x.thread_capacity as f64);
    let mut refreshes = Family::counter(
        "ttp_ledger_refreshes",
        "Reads of the ledger since serve started.",
        None,
    );
    refreshes.push(vec![], x.fleet.refreshes as f64);
    let mut all = vec![
        cpu, lost, gaps, switches, exits, runs, time, missed, threads, capacity, refreshes,
    ];
    if let Some(p) = x.otlp {
        let mut pushes = Family::counter(
            "ttp_otlp_pushes",
            "OTLP export requests to the collector: ok (accepted) and failed (not sent, refused or unanswered).",
            None,
        );
        pushes.push(vec![("result", "ok".into())], p.pushed as f64);
        pushes.push(vec![("result", "failed".into())], p.failed as f64);
        all.push(pushes);
    }
    all
}

/// Every family of one exposition but `ttp_build_info`, in the order
/// `/metrics` shows them.
pub(crate) fn families(x: &Exposition) -> Vec<Family> {
    let mut f = group_families(x);
    f.extend(machine_families(x));
    f.extend(pg_metrics::families(&x.postgres));
    f
}

impl Collector for LedgerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let x = self.0.read().unwrap_or_else(|p| p.into_inner()).clone();
        for f in &families(&x) {
            f.encode(&mut encoder)?;
        }
        for h in &pg_metrics::histograms(&x.postgres) {
            h.encode(&mut encoder)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "openmetrics_tests.rs"]
pub(crate) mod tests;
