//! The metric families of `serve --postgres` (postgres.rs): per server and
//! statement series, counters in seconds and a latency histogram; per
//! server, whether it is followed, its restarts, the time it ran
//! unobserved and what was lost. Names and PromQL: docs/serve.md,
//! "PostgreSQL statements".
use prometheus_client::{
    encoding::{DescriptorEncoder, NoLabelSet},
    metrics::MetricType,
    registry::Unit,
};

use crate::serve::{
    family::{Family, Labels, secs},
    postgres::{SeriesView, ServerView},
    statement_series::{LATENCY_BOUNDS_NS, StatementTotals},
};

/// A series' labels; `queryid` only where the server computes query ids
/// (pg_stat_statements' `queryid`, to join on).
fn series_labels(server: &ServerView, s: &SeriesView) -> Labels {
    let mut l = vec![
        ("data_directory", server.data_directory.clone()),
        ("database", s.database.clone()),
        ("user", s.user.clone()),
        ("fingerprint", s.fingerprint.clone()),
        ("query", s.query.clone()),
    ];
    if let Some(q) = s.queryid {
        l.push(("queryid", q.to_string()));
    }
    l
}

/// The counter and gauge families of the servers.
pub(crate) fn families(servers: &[ServerView]) -> Vec<Family> {
    if servers.is_empty() {
        return Vec::new();
    }
    type Pick = fn(&StatementTotals) -> f64;
    let s = Some(Unit::Seconds);
    let defs: [(&'static str, &'static str, Option<Unit>, Pick); 6] = [
        (
            "ttp_pg_statement_calls",
            "Statements finished (the backend's reply with ReadyForQuery).",
            None,
            |t| t.calls as f64,
        ),
        (
            "ttp_pg_statement_elapsed",
            "Wall time from the backend's read of the request to its reply.",
            s.clone(),
            |t| secs(t.elapsed_ns),
        ),
        (
            "ttp_pg_statement_on_cpu",
            "The backend's time on a CPU during its statements (schedstat runtime).",
            s.clone(),
            |t| secs(t.on_cpu_ns),
        ),
        (
            "ttp_pg_statement_runqueue_wait",
            "The backend's time runnable, waiting for a CPU, during its statements (schedstat run_delay).",
            s.clone(),
            |t| secs(t.runq_wait_ns),
        ),
        (
            "ttp_pg_statement_lock_wait",
            "Time waiting for heavyweight locks (the lock__wait USDT pair; 0 on a server without USDT probes).",
            s.clone(),
            |t| secs(t.lock_wait_ns),
        ),
        (
            "ttp_pg_statement_iowait",
            "The backend's block-I/O wait during its statements (delay accounting's blkio delay).",
            s,
            |t| secs(t.iowait_ns),
        ),
    ];
    let mut out: Vec<Family> = defs
        .into_iter()
        .map(|(name, help, unit, pick)| {
            let mut f = Family::counter(name, help, unit);
            for server in servers {
                for st in &server.statements {
                    f.push(series_labels(server, st), pick(&st.totals));
                }
            }
            f
        })
        .collect();
    let mut up = Family::gauge(
        "ttp_pg_server_up",
        "1 while the server's postmaster runs and its statements are followed, else 0.",
    );
    let mut restarts = Family::counter(
        "ttp_pg_server_restarts",
        "Server restarts followed: restart (a new postmaster) or crash (the postmaster reinitialised after a backend crashed).",
        None,
    );
    let mut unobserved = Family::counter(
        "ttp_pg_server_unobserved",
        "Time a server ran before its statements were followed: from its start (or serve's) to the attach; its statements are not counted.",
        Some(Unit::Seconds),
    );
    let mut interrupted = Family::counter(
        "ttp_pg_statements_interrupted",
        "Statements whose backend was killed by a signal before they ended (not in the calls).",
        None,
    );
    let mut lost = Family::counter(
        "ttp_pg_statement_records_lost",
        "Statement records the kernel's ring could not take (serve read too seldom): not counted anywhere.",
        None,
    );
    let mut layout = Family::gauge(
        "ttp_pg_server_status_entry",
        "1 per server followed with its status entries read (statement text, query id): version is the server's major version, layout the one whose PgBackendStatus layout reads it (older than version: the server is newer than ttp knows, and a backend vouched for the layout).",
    );
    for sv in servers {
        let l = || vec![("data_directory", sv.data_directory.clone())];
        if let Some((version, read_as)) = sv.status_entry {
            let mut v = l();
            v.push(("version", version.to_string()));
            v.push(("layout", read_as.to_string()));
            layout.push(v, 1.0);
        }
        up.push(l(), f64::from(u8::from(sv.up)));
        let mut r = l();
        r.push(("kind", "restart".into()));
        restarts.push(r, sv.restarts as f64);
        let mut c = l();
        c.push(("kind", "crash".into()));
        restarts.push(c, sv.crash_restarts as f64);
        unobserved.push(l(), secs(sv.unobserved_ns));
        interrupted.push(l(), sv.interrupted as f64);
        lost.push(l(), sv.lost_records as f64);
    }
    out.extend([up, restarts, unobserved, interrupted, lost, layout]);
    out
}

/// One label set's histogram: sum, count, and (upper bound, statements)
/// per bucket, not cumulative, the last bucket +Inf.
pub(crate) type HistogramSample = (Labels, f64, u64, Vec<(f64, u64)>);

/// One histogram family.
pub(crate) struct HistogramFamily {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
    pub(crate) unit: Option<Unit>,
    pub(crate) samples: Vec<HistogramSample>,
}

impl HistogramFamily {
    pub(crate) fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut metric = encoder.encode_descriptor(
            self.name,
            self.help,
            self.unit.as_ref(),
            MetricType::Histogram,
        )?;
        for (labels, sum, count, buckets) in &self.samples {
            metric
                .encode_family(labels)?
                .encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)?;
        }
        Ok(())
    }
}

/// The latency histogram of every statement series.
pub(crate) fn histograms(servers: &[ServerView]) -> Vec<HistogramFamily> {
    if servers.is_empty() {
        return Vec::new();
    }
    let mut h = HistogramFamily {
        name: "ttp_pg_statement_latency",
        help: "Statements by elapsed time (the backend's read of the request to its reply).",
        unit: Some(Unit::Seconds),
        samples: Vec::new(),
    };
    for server in servers {
        for st in &server.statements {
            let t = &st.totals;
            let buckets = LATENCY_BOUNDS_NS
                .iter()
                .map(|b| secs(*b))
                .chain([f64::INFINITY])
                .zip(t.buckets)
                .collect();
            h.samples.push((
                series_labels(server, st),
                secs(t.elapsed_ns),
                t.calls,
                buckets,
            ));
        }
    }
    vec![h]
}
