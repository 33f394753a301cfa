//! What the settings build once per process: the `Telemetry`, and the EMF
//! document's fixed parts (each directive, the `service` member), so that a
//! create writes only its own values. Nothing here runs per request; this
//! file imports the module, and nothing imports it.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::{
    Invocation, Metric, Metrics, MetricsSink, Stdout, Telemetry, TelemetrySettings, Template, Value, json,
};

impl Telemetry {
    pub fn new(settings: TelemetrySettings, sink: impl MetricsSink + 'static) -> Self {
        Self {
            template: Template::new(&settings),
            settings,
            sink: Box::new(sink),
            cold: AtomicBool::new(true),
        }
    }

    /// The log line with the default settings, and no metrics: what an
    /// `App` has until `main` (or a test) gives it the configured telemetry,
    /// so that tests and tools that build an `App` write nothing to stdout.
    pub fn log_only() -> Self {
        let settings = TelemetrySettings {
            metrics: false,
            ..TelemetrySettings::default()
        };
        Self::new(settings, Stdout)
    }
}

impl Template {
    pub(super) fn new(settings: &TelemetrySettings) -> Self {
        // Every metric is present on a cold start that called the store.
        let all = Metrics::of(&shaped(true), true);
        let names = all.list.map(|metric| {
            let mut name = vec![b','];
            if let Some(metric) = metric {
                json(&mut name, metric.name);
            }
            name.push(b':');
            name
        });
        let counters = names
            .clone()
            .map(|name| [b'0', b'1'].map(|digit| [&name[..], &[digit]].concat()));
        let (directives, service) = Self::declarations(settings);
        let heads = directives.map(|directive| [&b","[..], &directive, b"},", &service].concat());
        Self {
            names,
            counters,
            heads,
        }
    }

    /// The directive of each shape of metrics, by [`Metrics::shape`], and
    /// the `service` member. Each directive is written from the metrics of
    /// an invocation of its shape, so that it declares exactly what
    /// [`Metrics::of`] writes.
    pub(super) fn declarations(settings: &TelemetrySettings) -> ([Vec<u8>; 4], Vec<u8>) {
        let declared = |cold_start: bool, store: bool| {
            let metrics = Metrics::of(&shaped(store), cold_start);
            member(
                "CloudWatchMetrics",
                &[Directive {
                    settings,
                    metrics: &metrics,
                }],
            )
        };
        (
            [
                declared(false, false),
                declared(false, true),
                declared(true, false),
                declared(true, true),
            ],
            member("service", &settings.service),
        )
    }
}

/// An invocation that called the store or not, for the shape of its metrics.
fn shaped(store: bool) -> Invocation<'static> {
    Invocation {
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
        xray_trace_id: None,
    }
}

impl Value {
    fn unit(self) -> &'static str {
        match self {
            Self::Count(_) => "Count",
            Self::Milliseconds(_) => "Milliseconds",
        }
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
