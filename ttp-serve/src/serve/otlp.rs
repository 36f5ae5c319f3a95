//! The fleet ledger as an OTLP metrics export request (protobuf, the
//! messages of the `opentelemetry-proto` crate), for `serve --otlp`: the
//! same families, sample names, labels and values as `/metrics`
//! (openmetrics.rs), counters as cumulative monotonic sums.
//! docs/serve.md, "OpenTelemetry".
use opentelemetry_proto::tonic::{
    collector::metrics::v1::ExportMetricsServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    metrics::v1::{
        AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
        ResourceMetrics, ScopeMetrics, Sum, metric::Data, number_data_point,
    },
    resource::v1::Resource,
};
use prometheus_client::registry::Unit;

use super::{
    openmetrics::{Exposition, families},
    pg_metrics::histograms,
};

/// An export request as OTLP/HTTP's binary protobuf body (`serve --otlp`
/// pushes it), through the one trait every output format of ttp implements.
pub(crate) struct Otlp(pub ExportMetricsServiceRequest);

impl ttp_sys::sys::export::Exporter for Otlp {
    fn serialize(&self) -> Result<Vec<u8>, ttp_sys::sys::export::ExportError> {
        use prost::Message;
        Ok(self.0.encode_to_vec())
    }
}

/// The OTLP content type of a protobuf-encoded request (OTLP/HTTP spec,
/// "Binary Protobuf Encoding").
pub(crate) const CONTENT_TYPE: &str = "application/x-protobuf";

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_string())),
        }),
        ..Default::default()
    }
}

/// The UCUM unit OpenTelemetry names for a Prometheus unit ("s", "By";
/// the collector's Prometheus exporter maps them back to `_seconds`,
/// `_bytes`). Counts carry none: "1" would read as a ratio.
fn ucum(unit: Option<&Unit>) -> String {
    match unit {
        Some(Unit::Seconds) => "s".into(),
        Some(Unit::Bytes) => "By".into(),
        Some(u) => u.as_str().into(),
        None => String::new(),
    }
}

/// The unit's word in a Prometheus name (`seconds`): a histogram's OTLP
/// name is its family's name with it, as `/metrics` shows it before the
/// `_bucket`, `_sum` and `_count` suffixes.
fn histogram_name(name: &str, unit: Option<&Unit>) -> String {
    match unit {
        Some(u) => format!("{name}_{}", u.as_str()),
        None => name.to_string(),
    }
}

/// Times of one export: when serve started counting (every cumulative
/// series counts from then, docs/serve.md, "Metrics") and when the
/// ledger was read, both in ns since the Unix epoch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamps {
    pub start_unix_ns: u64,
    pub read_unix_ns: u64,
}

/// The export request for one read of the ledger. Metric names are the
/// sample names of `/metrics` (`ttp_on_cpu_seconds_total`), so the same
/// PromQL works on what a collector forwards to Prometheus; its
/// translator adds no second unit or `_total` to a name that has them.
pub(crate) fn request(x: &Exposition, host: &str, at: Stamps) -> ExportMetricsServiceRequest {
    let point = |labels: &[(&'static str, String)], value: f64| NumberDataPoint {
        attributes: labels.iter().map(|(k, v)| kv(k, v)).collect(),
        start_time_unix_nano: at.start_unix_ns,
        time_unix_nano: at.read_unix_ns,
        value: Some(number_data_point::Value::AsDouble(value)),
        ..Default::default()
    };
    let mut metrics: Vec<Metric> = families(x)
        .iter()
        .map(|f| {
            let data_points = f.samples.iter().map(|(l, v)| point(l, *v)).collect();
            Metric {
                name: f.sample_name(),
                description: f.help.to_string(),
                unit: ucum(f.unit.as_ref()),
                data: Some(if f.gauge {
                    Data::Gauge(Gauge { data_points })
                } else {
                    Data::Sum(Sum {
                        data_points,
                        aggregation_temporality: AggregationTemporality::Cumulative as i32,
                        is_monotonic: true,
                    })
                }),
                ..Default::default()
            }
        })
        .collect();
    // Histograms as cumulative explicit-bucket histograms: the bounds
    // without +Inf, a count per bucket (not cumulative) with +Inf's last.
    metrics.extend(histograms(&x.postgres).iter().map(|h| {
        let data_points = h
            .samples
            .iter()
            .map(|(labels, sum, count, buckets)| HistogramDataPoint {
                attributes: labels.iter().map(|(k, v)| kv(k, v)).collect(),
                start_time_unix_nano: at.start_unix_ns,
                time_unix_nano: at.read_unix_ns,
                count: *count,
                sum: Some(*sum),
                bucket_counts: buckets.iter().map(|(_, n)| *n).collect(),
                explicit_bounds: buckets
                    .iter()
                    .map(|(b, _)| *b)
                    .filter(|b| b.is_finite())
                    .collect(),
                ..Default::default()
            })
            .collect();
        Metric {
            name: histogram_name(h.name, h.unit.as_ref()),
            description: h.help.to_string(),
            unit: ucum(h.unit.as_ref()),
            data: Some(Data::Histogram(Histogram {
                data_points,
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            })),
            ..Default::default()
        }
    }));
    // `ttp_build_info` as an info metric becomes in OTLP: a gauge of 1
    // with the version as its label (the Prometheus compatibility spec,
    // "Info").
    metrics.insert(
        0,
        Metric {
            name: "ttp_build_info".into(),
            description: "The ttp-ebpf build that serves these metrics.".into(),
            data: Some(Data::Gauge(Gauge {
                data_points: vec![point(
                    &[("version", env!("CARGO_PKG_VERSION").to_string())],
                    1.0,
                )],
            })),
            ..Default::default()
        },
    );
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![
                    kv("service.name", "ttp-ebpf"),
                    kv("service.version", env!("CARGO_PKG_VERSION")),
                    kv("host.name", host),
                ],
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "ttp-ebpf serve".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[cfg(test)]
#[path = "otlp_tests.rs"]
mod tests;
