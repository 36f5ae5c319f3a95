//! serve: the ledger kept loaded for as long as the command runs, summed per
//! group of processes and exported to Prometheus (OpenMetrics over HTTP) and
//! OpenTelemetry (OTLP push). A wing beside the protocols: it builds on
//! `ttp-window` and the crates below it, and only the binary depends on it
//! (docs/architecture.md, "Crates").

pub mod serve;
