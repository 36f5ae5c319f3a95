//! `serve --otlp URL`: after every read of the ledger, the same metrics as
//! `/metrics` pushed to an OpenTelemetry collector over OTLP/HTTP with
//! protobuf encoding (otlp.rs builds the request). A push that
//! fails is counted (`ttp_otlp_pushes_total{result="failed"}`), said on
//! stderr, and retried after a growing pause; it never stops serve.
//! docs/serve.md, "OpenTelemetry".
use std::{
    sync::mpsc,
    thread::JoinHandle,
    time::{Duration, Instant, SystemTime},
};

use super::{
    openmetrics::{PushCounts, Shared},
    otlp::{self, Stamps},
};
use ttp_sys::{error::usage, sys::export::Exporter};

/// The path of the metrics signal under a collector's base URL (OTLP/HTTP
/// spec, "OTLP/HTTP Request").
const METRICS_PATH: &str = "/v1/metrics";

/// The longest pause between two attempts while pushes keep failing.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The endpoint requests go to: `url` as given when it names a path,
/// else the collector's base URL with `/v1/metrics` appended (what the
/// OpenTelemetry SDKs do with `OTEL_EXPORTER_OTLP_ENDPOINT`). Only
/// `http` and `https` with a host are accepted: anything else is a usage
/// error (exit 2) before anything is loaded.
pub(crate) fn endpoint(url: &str) -> anyhow::Result<String> {
    let bad = |why: &str| {
        usage(format!(
            "bad --otlp {url:?}: {why}; give the collector's OTLP/HTTP URL, such as http://127.0.0.1:4318"
        ))
    };
    let Ok(uri) = url.parse::<ureq::http::Uri>() else {
        return bad("not a URL");
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(s) => return bad(&format!("scheme {s} is not http or https")),
        None => return bad("no http:// or https://"),
    }
    if uri.host().is_none_or(str::is_empty) {
        return bad("no host");
    }
    Ok(match uri.path() {
        "" | "/" => format!("{}{METRICS_PATH}", url.trim_end_matches('/')),
        _ => url.to_string(),
    })
}

/// The pause before the next attempt after `failures` failures in a row:
/// the interval, doubled at each further failure, at most five minutes.
pub(crate) fn backoff(interval: Duration, failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(16);
    interval
        .saturating_mul(factor)
        .min(MAX_BACKOFF.max(interval))
}

/// The pushing thread; [`Pusher::after_read`] wakes it after each read of
/// the ledger, dropping the pusher ends it.
pub(crate) struct Pusher {
    wake: Option<mpsc::SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Pusher {
    pub(crate) fn start(url: String, interval: Duration, shared: Shared) -> anyhow::Result<Self> {
        let start_unix_ns = unix_ns(SystemTime::now());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        // Answers later than the interval (at least 2 s, at most 10 s) are
        // failures: the next read has newer values anyway.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(
                interval.clamp(Duration::from_secs(2), Duration::from_secs(10)),
            ))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("ttp-ebpf/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        shared.write().unwrap_or_else(|p| p.into_inner()).otlp = Some(PushCounts::default());
        // One pending wake-up at most: while a push is slow, later reads
        // are pushed by the next attempt, which sends the latest values.
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("ttp-otlp".into())
            .spawn(move || {
                let mut failures = 0u32;
                let mut next_try = Instant::now();
                for () in woken {
                    if Instant::now() < next_try {
                        continue;
                    }
                    let (body, counts) = {
                        let x = shared.read().unwrap_or_else(|p| p.into_inner());
                        let at = Stamps {
                            start_unix_ns,
                            read_unix_ns: x.read_unix_ns,
                        };
                        (otlp::Otlp(otlp::request(&x, &host, at)).serialize(), x.otlp)
                    };
                    let outcome = body
                        .map_err(|e| e.to_string())
                        .and_then(|body| push(&agent, &url, &body));
                    let mut counts = counts.unwrap_or_default();
                    match outcome {
                        Ok(()) => {
                            if failures > 0 {
                                eprintln!(
                                    "ttp: OTLP push to {url} works again after {failures} failed"
                                );
                            }
                            failures = 0;
                            counts.pushed += 1;
                        }
                        Err(e) => {
                            failures += 1;
                            counts.failed += 1;
                            let pause = backoff(interval, failures);
                            next_try = Instant::now() + pause;
                            eprintln!(
                                "ttp: OTLP push to {url} failed ({failures} in a row): {e}; next try in {}",
                                humantime::format_duration(pause)
                            );
                        }
                    }
                    shared.write().unwrap_or_else(|p| p.into_inner()).otlp = Some(counts);
                }
            })?;
        Ok(Self {
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    /// Asks for a push of the ledger just read (skipped while one is in
    /// flight or while backing off).
    pub(crate) fn after_read(&self) {
        if let Some(w) = &self.wake {
            let _ = w.try_send(());
        }
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// One export request; Err says why it did not count as accepted.
fn push(agent: &ureq::Agent, url: &str, body: &[u8]) -> Result<(), String> {
    let mut response = agent
        .post(url)
        .header("Content-Type", otlp::CONTENT_TYPE)
        .send(body)
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response
        .body_mut()
        .with_config()
        .limit(512)
        .read_to_string()
        .unwrap_or_default();
    let text = text.trim();
    Err(if text.is_empty() {
        format!("the collector answered {status}")
    } else {
        format!("the collector answered {status}: {text}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a base URL without the signal's path, a full URL changed,
    /// and a bad URL that is not a usage error (exit 2).
    #[test]
    fn endpoints_and_bad_urls() {
        assert_eq!(
            endpoint("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/metrics"
        );
        assert_eq!(
            endpoint("https://otel.example:4318/").unwrap(),
            "https://otel.example:4318/v1/metrics"
        );
        assert_eq!(
            endpoint("http://c:4318/otlp/v1/metrics").unwrap(),
            "http://c:4318/otlp/v1/metrics"
        );
        for bad in [
            "",
            "127.0.0.1:4318",
            "ftp://c/x",
            "http://",
            "http://[::1",
            "x y",
        ] {
            let e = endpoint(bad).unwrap_err();
            assert_eq!(ttp_sys::error::exit_code(&e), 2, "{bad}");
            assert_eq!(e.to_string().lines().count(), 1, "{e}");
        }
    }

    /// Catches a pause that does not grow, grows past five minutes, or
    /// starts above one interval.
    #[test]
    fn backoff_doubles_up_to_five_minutes() {
        let s = Duration::from_secs;
        let i = s(10);
        assert_eq!(backoff(i, 1), s(10));
        assert_eq!(backoff(i, 2), s(20));
        assert_eq!(backoff(i, 5), s(160));
        assert_eq!(backoff(i, 6), s(300));
        assert_eq!(backoff(i, 1000), s(300));
        assert_eq!(backoff(s(600), 3), s(600));
    }
}
