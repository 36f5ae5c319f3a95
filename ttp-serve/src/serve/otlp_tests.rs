use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

use prost::Message;

use super::*;
use crate::serve::openmetrics::{Format, encode, registry, tests::exposition};

const AT: Stamps = Stamps {
    start_unix_ns: 1_000,
    read_unix_ns: 2_000,
};

/// `name{k="v",...}` with OpenMetrics' label escaping, from one OTLP point.
fn series(name: &str, p: &NumberDataPoint) -> String {
    let labels: Vec<String> = p
        .attributes
        .iter()
        .map(|a| {
            let Some(any_value::Value::StringValue(v)) =
                a.value.as_ref().and_then(|v| v.value.clone())
            else {
                panic!("label {} is not a string", a.key)
            };
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{}=\"{v}\"", a.key)
        })
        .collect();
    if labels.is_empty() {
        name.to_string()
    } else {
        format!("{name}{{{}}}", labels.join(","))
    }
}

/// Catches an OTLP export that differs from `/metrics`: a series of the
/// OpenMetrics text (as prometheus-client writes it, the independent
/// naming) missing from the request or with another value, an extra one,
/// a counter that is not a cumulative monotonic sum, a unit not in UCUM,
/// and a request that does not survive protobuf encoding.
/// The sample lines `/metrics` shows for an OTLP histogram: `_sum`,
/// `_count` and cumulative `_bucket`s with `le` first.
fn histogram_samples(
    name: &str,
    h: &opentelemetry_proto::tonic::metrics::v1::Histogram,
    got: &mut BTreeMap<String, f64>,
) {
    assert_eq!(
        h.aggregation_temporality,
        AggregationTemporality::Cumulative as i32
    );
    for p in &h.data_points {
        assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (1_000, 2_000));
        let labels: Vec<String> = p
            .attributes
            .iter()
            .map(|a| {
                let Some(any_value::Value::StringValue(v)) =
                    a.value.as_ref().and_then(|v| v.value.as_ref())
                else {
                    panic!("{name}: not a string")
                };
                format!(
                    "{}=\"{}\"",
                    a.key,
                    v.replace('\\', "\\\\").replace('"', "\\\"")
                )
            })
            .collect();
        let labels = labels.join(",");
        got.insert(format!("{name}_sum{{{labels}}}"), p.sum.unwrap());
        got.insert(format!("{name}_count{{{labels}}}"), p.count as f64);
        assert_eq!(p.bucket_counts.len(), p.explicit_bounds.len() + 1);
        let mut cumulative = 0;
        for (i, n) in p.bucket_counts.iter().enumerate() {
            cumulative += n;
            let le = match p.explicit_bounds.get(i) {
                Some(b) => {
                    let mut s = format!("{b}");
                    if !s.contains('.') {
                        s.push_str(".0");
                    }
                    s
                }
                None => "+Inf".into(),
            };
            got.insert(
                format!("{name}_bucket{{le=\"{le}\",{labels}}}"),
                cumulative as f64,
            );
        }
    }
}

#[test]
fn otlp_request_carries_the_exposition_series_for_series() {
    let x = exposition();
    let text = encode(
        &registry(Arc::new(RwLock::new(x.clone()))),
        Format::OpenMetrics,
    );
    let want: BTreeMap<String, f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (s, v) = l.rsplit_once(' ').expect("sample line");
            (s.to_string(), v.parse().expect("value"))
        })
        .collect();
    let req = request(&x, "host-a", AT);
    let bytes = req.encode_to_vec();
    let req = ExportMetricsServiceRequest::decode(bytes.as_slice()).expect("decodes");
    let rm = &req.resource_metrics[0];
    let attrs: Vec<_> = rm
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|a| a.key.as_str())
        .collect();
    assert_eq!(attrs, ["service.name", "service.version", "host.name"]);
    let mut got = BTreeMap::new();
    for m in &rm.scope_metrics[0].metrics {
        if let Some(Data::Histogram(h)) = &m.data {
            assert_eq!(m.unit, "s");
            histogram_samples(&m.name, h, &mut got);
            continue;
        }
        let points = match m.data.as_ref().expect("data") {
            Data::Sum(s) => {
                assert!(s.is_monotonic, "{}", m.name);
                assert_eq!(
                    s.aggregation_temporality,
                    AggregationTemporality::Cumulative as i32,
                    "{}",
                    m.name
                );
                assert!(m.name.ends_with("_total"), "{}", m.name);
                &s.data_points
            }
            Data::Gauge(g) => &g.data_points,
            other => panic!("{}: {other:?}", m.name),
        };
        let unit = match m.name.as_str() {
            n if n.contains("_seconds") => "s",
            n if n.contains("_bytes") => "By",
            _ => "",
        };
        assert_eq!(m.unit, unit, "{}", m.name);
        for p in points {
            assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (1_000, 2_000));
            let Some(number_data_point::Value::AsDouble(v)) = p.value else {
                panic!("{}: not a double", m.name)
            };
            assert!(
                got.insert(series(&m.name, p), v).is_none(),
                "{} twice",
                m.name
            );
        }
    }
    assert_eq!(got, want);
    assert!(got.contains_key("ttp_on_cpu_seconds_total{unit=\"a \\\"b\\\".service\"}"));
    assert!(got.contains_key("ttp_otlp_pushes_total{result=\"ok\"}"));
    assert!(
        got.keys()
            .any(|k| k.starts_with("ttp_pg_statement_latency_seconds_bucket"))
    );
}
