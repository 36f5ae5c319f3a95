//! serve: the ledger kept loaded for as long as the command runs, summed per
//! group of processes and exported to Prometheus (OpenMetrics over HTTP) and
//! OpenTelemetry (OTLP push). A wing beside the protocols: it builds on
//! `ttp-window` and the crates below it, and only the binary depends on it
//! (docs/architecture.md, "Crates").
pub use ttp_ledger::{accounts, collect, probe};
pub use ttp_protocol::protocol;
pub use ttp_sys::{error, sys};
pub use ttp_window::window;

pub mod serve;
