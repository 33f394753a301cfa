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

    /// Which of the four directives declares these metrics: with or
    /// without `ColdStart`, with or without `StoreLatency`.
    fn shape(&self) -> usize {
        let present = |metric: Option<&Option<Metric>>| usize::from(metric.is_some_and(Option::is_some));
        present(self.list.first()) << 1 | present(self.list.last())
    }
}

/// What every document of a process shares, written once: the directive of
/// each set of metrics an invocation can have (the namespace, the
/// dimension, each metric's name and unit) and the `service` member. Per
/// invocation only the timestamp, the values and the ids are written: the
/// directive was a third of the document's instructions
/// (docs/performance.md, "A warm create against its floor").
pub(super) struct Template {
    /// `"CloudWatchMetrics":[…]`, by [`Metrics::shape`].
    directives: [Vec<u8>; 4],
    /// `"service":"…"`.
    service: Vec<u8>,
}

impl Template {
    pub(super) fn new(settings: &TelemetrySettings) -> Self {
        let declared = |cold_start: bool, store: bool| {
            let invocation = Invocation {
                context: None,
                method: "",
                path: "",
                status: 0,
                error: None,
                plant_id: None,
                outcome: None,
                latency: Duration::ZERO,
                store_latency: store.then_some(Duration::ZERO),
                envelope: None,
            };
            let metrics = Metrics::of(&invocation, cold_start);
            member(
                "CloudWatchMetrics",
                &[Directive {
                    settings,
                    metrics: &metrics,
                }],
            )
        };
        Self {
            directives: [
                declared(false, false),
                declared(false, true),
                declared(true, false),
                declared(true, true),
            ],
            service: member("service", &settings.service),
        }
    }

    /// Appends one invocation's document to `line`, as one JSON object: `_aws`
    /// with the timestamp and the directive, then the dimension and every
    /// metric as top-level members, then the ids that lead to the log line
    /// and the trace (specification: "Embedded metric format" in the
    /// CloudWatch user guide).
    pub(super) fn write(
        &self,
        line: &mut Vec<u8>,
        timestamp_ms: u64,
        metrics: &Metrics,
        request_id: Option<&str>,
        trace_id: Option<&str>,
    ) {
        line.extend_from_slice(br#"{"_aws":{"Timestamp":"#);
        json(line, &timestamp_ms);
        line.push(b',');
        line.extend_from_slice(
            self.directives
                .get(metrics.shape())
                .map_or(&[][..], Vec::as_slice),
        );
        line.extend_from_slice(b"},");
        line.extend_from_slice(&self.service);
        for metric in metrics.iter() {
            line.push(b',');
            json(line, metric.name);
            line.push(b':');
            match metric.value {
                Value::Count(count) => json(line, &count),
                Value::Milliseconds(ms) => json(line, &ms),
            }
        }
        for (name, id) in [("function_request_id", request_id), ("xray_trace_id", trace_id)] {
            if let Some(id) = id {
                line.push(b',');
                json(line, name);
                line.push(b':');
                json(line, id);
            }
        }
        line.push(b'}');
    }
}

/// `"name":value`.
fn member<T: Serialize + ?Sized>(name: &str, value: &T) -> Vec<u8> {
    let mut bytes = Vec::new();
    json(&mut bytes, name);
    bytes.push(b':');
    json(&mut bytes, value);
    bytes
}

/// `value` as JSON. Strings, integers and floats (a float that is not
/// finite is `null`) cannot fail to be written into a `Vec`.
fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(out, value);
}

/// The metric directive: the namespace, the dimension, each metric's
/// name and unit.
struct Directive<'a> {
    settings: &'a TelemetrySettings,
    metrics: &'a Metrics,
}

impl Serialize for Directive<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("Namespace", &self.settings.namespace)?;
        map.serialize_entry("Dimensions", &[["service"]])?;
        map.serialize_entry("Metrics", &Definitions(self.metrics))?;
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
