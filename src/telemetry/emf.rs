//! One invocation's CloudWatch Embedded Metric Format document: the
//! metrics, their units and the directive that declares them.

use std::time::Duration;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::{Invocation, TelemetrySettings};
use crate::error::DEADLINE_EXCEEDED;
use crate::store::Created;

pub(super) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// A metric's value, which also decides its unit.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    /// Written as an integer, as Powertools does.
    Count(u8),
    Milliseconds(f64),
}

impl Value {
    fn unit(self) -> &'static str {
        match self {
            Self::Count(_) => "Count",
            Self::Milliseconds(_) => "Milliseconds",
        }
    }
}

/// One metric of the document: its name and value.
#[derive(Debug, Clone, Copy)]
struct Metric {
    name: &'static str,
    value: Value,
}

/// The metrics of one invocation. The outcome counters are always present,
/// 0 or 1, so that their Average is a rate and their SampleCount the number
/// of requests; `ColdStart` is present on the first invocation only and
/// `StoreLatency` only when DynamoDB was called, as Powertools would emit them.
pub(super) struct Metrics {
    list: [Option<Metric>; 11],
}

impl Metrics {
    pub(super) fn of(invocation: &Invocation<'_>, cold_start: bool) -> Self {
        let status = invocation.status;
        let count = |name, yes: bool| {
            Some(Metric {
                name,
                value: Value::Count(u8::from(yes)),
            })
        };
        let ms = |name, duration: Duration| {
            Some(Metric {
                name,
                value: Value::Milliseconds(millis(duration)),
            })
        };
        Self {
            list: [
                if cold_start {
                    count("ColdStart", true)
                } else {
                    None
                },
                count("PlantCreated", invocation.outcome == Some(Created::Inserted)),
                count("PlantReplayed", invocation.outcome == Some(Created::Replayed)),
                count("PlantConflict", status == 409),
                count("ClientError", (400..500).contains(&status)),
                count("AuthRejected", matches!(status, 401 | 403)),
                count("ServerError", (500..600).contains(&status)),
                count("StoreUnavailable", status == 503),
                count("DeadlineExceeded", invocation.error == Some(DEADLINE_EXCEEDED)),
                ms("Latency", invocation.latency),
                invocation
                    .store_latency
                    .and_then(|latency| ms("StoreLatency", latency)),
            ],
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Metric> {
        self.list.iter().flatten()
    }
}

/// The EMF document (specification: "Embedded metric format" in the
/// CloudWatch user guide): `_aws` with the timestamp and one metric
/// directive, then the dimension and every metric as top-level members,
/// then the ids that lead to the log line and the trace.
pub(super) struct Document<'a> {
    pub settings: &'a TelemetrySettings,
    pub timestamp_ms: u64,
    pub metrics: &'a Metrics,
    pub request_id: Option<&'a str>,
    pub trace_id: Option<&'a str>,
}

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("_aws", &Metadata { document: self })?;
        map.serialize_entry("service", &self.settings.service)?;
        for metric in self.metrics.iter() {
            match metric.value {
                Value::Count(count) => map.serialize_entry(metric.name, &count)?,
                Value::Milliseconds(ms) => map.serialize_entry(metric.name, &ms)?,
            }
        }
        if let Some(request_id) = self.request_id {
            map.serialize_entry("function_request_id", request_id)?;
        }
        if let Some(trace_id) = self.trace_id {
            map.serialize_entry("xray_trace_id", trace_id)?;
        }
        map.end()
    }
}

struct Metadata<'a> {
    document: &'a Document<'a>,
}

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("Timestamp", &self.document.timestamp_ms)?;
        map.serialize_entry(
            "CloudWatchMetrics",
            &[Directive {
                document: self.document,
            }],
        )?;
        map.end()
    }
}

struct Directive<'a> {
    document: &'a Document<'a>,
}

impl Serialize for Directive<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("Namespace", &self.document.settings.namespace)?;
        map.serialize_entry("Dimensions", &[["service"]])?;
        map.serialize_entry("Metrics", &Definitions(self.document.metrics))?;
        map.end()
    }
}

struct Definitions<'a>(&'a Metrics);

impl Serialize for Definitions<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for metric in self.0.iter() {
            seq.serialize_element(&Definition(metric))?;
        }
        seq.end()
    }
}

struct Definition<'a>(&'a Metric);

impl Serialize for Definition<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("Name", self.0.name)?;
        map.serialize_entry("Unit", self.0.value.unit())?;
        map.end()
    }
}
