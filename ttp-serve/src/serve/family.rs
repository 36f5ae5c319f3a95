//! One metric family (name, help, unit, type, samples) as the OpenMetrics
//! exposition (openmetrics.rs) and the PostgreSQL families (pg_metrics.rs)
//! build it, and its encoding through `prometheus-client`.
use prometheus_client::{
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Unit,
};

pub(crate) type Labels = Vec<(&'static str, String)>;

/// One metric: its name (without unit and `_total`), help, unit, type and
/// samples.
pub(crate) struct Family {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
    pub(crate) unit: Option<Unit>,
    pub(crate) samples: Vec<(Labels, f64)>,
    pub(crate) gauge: bool,
}

impl Family {
    pub(crate) fn counter(name: &'static str, help: &'static str, unit: Option<Unit>) -> Self {
        Self {
            name,
            help,
            unit,
            samples: Vec::new(),
            gauge: false,
        }
    }

    pub(crate) fn gauge(name: &'static str, help: &'static str) -> Self {
        Self {
            gauge: true,
            ..Self::counter(name, help, None)
        }
    }

    /// The sample name Prometheus shows: the name, the unit, `_total` for
    /// a counter (OpenMetrics 1.0, "Counter" and "Unit").
    pub(crate) fn sample_name(&self) -> String {
        let mut n = self.name.to_string();
        if let Some(u) = &self.unit {
            n.push('_');
            n.push_str(u.as_str());
        }
        if !self.gauge {
            n.push_str("_total");
        }
        n
    }

    pub(crate) fn push(&mut self, labels: Labels, value: f64) {
        self.samples.push((labels, value));
    }

    pub(crate) fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let kind = if self.gauge {
            MetricType::Gauge
        } else {
            MetricType::Counter
        };
        let mut metric =
            encoder.encode_descriptor(self.name, self.help, self.unit.as_ref(), kind)?;
        for (labels, value) in &self.samples {
            let e = metric.encode_family(labels)?;
            if self.gauge {
                ConstGauge::new(*value).encode(e)?;
            } else {
                ConstCounter::new(*value).encode(e)?;
            }
        }
        Ok(())
    }
}

pub(crate) fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}
