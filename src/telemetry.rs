//! What an operator sees of each invocation, in the conventions of
//! Powertools for AWS Lambda: the request log line with the Powertools
//! Logger keys, and one CloudWatch Embedded Metric Format (EMF) document on
//! stdout, which CloudWatch Logs turns into metrics with no API call.
//!
//! The EMF document is written by hand (serde_json, one struct) rather than
//! through a metrics crate: the document is fixed (one namespace, one
//! dimension, ten metrics), and the crates that format EMF install a global
//! recorder behind the `metrics` facade and flush it per invocation, which
//! is more machinery, and more CPU per invocation, than the document itself.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lambda_http::{Context, tracing};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::envelope::Repairs;
use crate::store::Created;

/// The `service` key and dimension when `POWERTOOLS_SERVICE_NAME` is unset.
pub const DEFAULT_SERVICE: &str = "plant-store";
/// The metric namespace when `POWERTOOLS_METRICS_NAMESPACE` is unset.
pub const DEFAULT_NAMESPACE: &str = "PlantStore";

/// The Powertools settings, read once at start-up with the rest of
/// [`crate::config::Config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// `POWERTOOLS_SERVICE_NAME`: the `service` log key and metric dimension.
    pub service: String,
    /// `POWERTOOLS_METRICS_NAMESPACE`.
    pub namespace: String,
    /// False when `POWERTOOLS_METRICS_DISABLED` is true.
    pub metrics: bool,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            service: DEFAULT_SERVICE.to_owned(),
            namespace: DEFAULT_NAMESPACE.to_owned(),
            metrics: true,
        }
    }
}

/// Which Powertools variable is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TelemetrySettingError {
    ServiceName,
    Namespace,
    MetricsDisabled,
}

impl TelemetrySettings {
    /// Reads the Powertools variables through `get`, which treats empty
    /// values as unset. CloudWatch would drop, one invocation at a time and
    /// silently, every document whose namespace or dimension value it
    /// refuses, so those are checked here, once.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, TelemetrySettingError> {
        let service = get("POWERTOOLS_SERVICE_NAME")
            .map_or_else(|| DEFAULT_SERVICE.to_owned(), |value| value.trim().to_owned());
        // CloudWatch dimension values: 1 to 1024 ASCII characters, not only
        // blanks; we also refuse control characters, which no log reader wants.
        if service.len() > 1024
            || !service
                .bytes()
                .all(|byte| byte.is_ascii_graphic() || byte == b' ')
        {
            return Err(TelemetrySettingError::ServiceName);
        }
        let namespace = get("POWERTOOLS_METRICS_NAMESPACE")
            .map_or_else(|| DEFAULT_NAMESPACE.to_owned(), |value| value.trim().to_owned());
        // CloudWatch namespaces: up to 255 of these characters, and the
        // `AWS/` prefix belongs to AWS services.
        let allowed = |byte: u8| byte.is_ascii_alphanumeric() || b".-_/#: ".contains(&byte);
        if namespace.len() > 255 || !namespace.bytes().all(allowed) || namespace.starts_with("AWS/") {
            return Err(TelemetrySettingError::Namespace);
        }
        // Powertools reads only "true" as off; anything unreadable is a
        // mistake worth stopping for rather than guessing.
        let metrics = match get("POWERTOOLS_METRICS_DISABLED").map(|value| value.trim().to_ascii_lowercase())
        {
            None => true,
            Some(value) if ["true", "1", "yes", "on"].contains(&value.as_str()) => false,
            Some(value) if ["false", "0", "no", "off"].contains(&value.as_str()) => true,
            Some(_) => return Err(TelemetrySettingError::MetricsDisabled),
        };
        Ok(Self {
            service,
            namespace,
            metrics,
        })
    }
}

/// Where EMF documents go: one complete line per call.
pub trait MetricsSink: Send + Sync {
    fn write_line(&self, line: &[u8]);
}

/// The function's stdout, which Lambda sends to CloudWatch Logs line by
/// line. Written directly, not through `tracing`, so that the document is
/// the whole line whatever `AWS_LAMBDA_LOG_FORMAT` says: EMF is only read
/// from a log event that is one JSON object and nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stdout;

impl MetricsSink for Stdout {
    fn write_line(&self, line: &[u8]) {
        // One write of the whole line under the lock, so no other output
        // can land inside it. A failed write to stdout loses one document;
        // there is nowhere better to report it.
        let _ = std::io::stdout().lock().write_all(line);
    }
}

/// What the handler knows about one invocation when it answers.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    pub context: Option<&'a Context>,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub error: Option<u32>,
    pub plant_id: Option<i64>,
    pub outcome: Option<Created>,
    /// The whole handler.
    pub latency: Duration,
    /// The DynamoDB call, when one was made.
    pub store_latency: Option<Duration>,
    /// What the envelope decoder set aside, if anything (`envelope.rs`).
    pub envelope: Option<&'a Repairs>,
}

/// The per-process telemetry state: the settings, the metrics sink, and
/// whether the next invocation is the first.
pub struct Telemetry {
    settings: TelemetrySettings,
    sink: Box<dyn MetricsSink>,
    cold: AtomicBool,
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry")
            .field("settings", &self.settings)
            .field("cold", &self.cold)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    pub fn new(settings: TelemetrySettings, sink: impl MetricsSink + 'static) -> Self {
        Self {
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

    /// Writes the request log line and, unless metrics are off, the EMF
    /// document. The first call of the process is the cold start.
    pub fn record(&self, invocation: &Invocation<'_>) {
        let cold_start = self.cold.swap(false, Ordering::Relaxed);
        let context = invocation.context;
        let request_id = context.map(|context| context.request_id.as_str());
        let trace_id = context.and_then(|context| trace_root(context.xray_trace_id.as_deref()?));
        let latency_ms = millis(invocation.latency);
        tracing::info!(
            request_id,
            method = invocation.method,
            path = invocation.path,
            status = invocation.status,
            error = invocation.error,
            plant_id = invocation.plant_id,
            outcome = invocation.outcome.map(Created::as_str),
            latency_ms,
            store_latency_ms = invocation.store_latency.map(millis),
            service = self.settings.service.as_str(),
            cold_start,
            function_name = context.map(|context| context.env_config.function_name.as_str()),
            function_memory_size = context.map(|context| context.env_config.memory),
            function_arn = context.map(|context| context.invoked_function_arn.as_str()),
            function_request_id = request_id,
            xray_trace_id = trace_id,
            envelope = invocation.envelope.map(tracing::field::display),
            "request"
        );
        if !self.settings.metrics {
            return;
        }
        let document = Document {
            settings: &self.settings,
            timestamp_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX)),
            metrics: &Metrics::of(invocation, cold_start),
            request_id,
            trace_id,
        };
        let mut line = Vec::with_capacity(1024);
        // Serializing strings and numbers into a Vec cannot fail; if it
        // somehow did, a partial line must not reach CloudWatch.
        if serde_json::to_writer(&mut line, &document).is_ok() {
            line.push(b'\n');
            self.sink.write_line(&line);
        }
    }
}

/// The id X-Ray shows (`1-…-…`) from Lambda's trace header
/// (`Root=1-…-…;Parent=…;Sampled=…`), as Powertools logs it.
pub(crate) fn trace_root(header: &str) -> Option<&str> {
    header
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Root="))
        .filter(|root| !root.is_empty())
}

fn millis(duration: Duration) -> f64 {
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
struct Metrics {
    list: [Option<Metric>; 10],
}

impl Metrics {
    fn of(invocation: &Invocation<'_>, cold_start: bool) -> Self {
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
struct Document<'a> {
    settings: &'a TelemetrySettings,
    timestamp_ms: u64,
    metrics: &'a Metrics,
    request_id: Option<&'a str>,
    trace_id: Option<&'a str>,
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};

    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<TelemetrySettings, TelemetrySettingError> {
        TelemetrySettings::from_lookup(&|name: &str| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn unset_powertools_variables_give_the_documented_defaults() {
        assert_eq!(
            settings(&[]),
            Ok(TelemetrySettings {
                service: "plant-store".to_owned(),
                namespace: "PlantStore".to_owned(),
                metrics: true,
            })
        );
    }

    #[test]
    fn the_service_namespace_and_switch_come_from_the_powertools_variables() {
        let read = settings(&[
            ("POWERTOOLS_SERVICE_NAME", " plants-eu "),
            ("POWERTOOLS_METRICS_NAMESPACE", "Shop/Plants"),
            ("POWERTOOLS_METRICS_DISABLED", "TRUE"),
        ]);
        assert_eq!(
            read,
            Ok(TelemetrySettings {
                service: "plants-eu".to_owned(),
                namespace: "Shop/Plants".to_owned(),
                metrics: false,
            })
        );
        for off in ["false", "0", "No"] {
            let read = settings(&[("POWERTOOLS_METRICS_DISABLED", off)]).map(|read| read.metrics);
            assert_eq!(read, Ok(true), "{off}");
        }
    }

    #[test]
    fn values_cloudwatch_would_refuse_stop_the_function_at_start() {
        let long = "n".repeat(256);
        let cases = [
            (
                "POWERTOOLS_METRICS_NAMESPACE",
                "AWS/Lambda",
                TelemetrySettingError::Namespace,
            ),
            (
                "POWERTOOLS_METRICS_NAMESPACE",
                "Plänts",
                TelemetrySettingError::Namespace,
            ),
            (
                "POWERTOOLS_METRICS_NAMESPACE",
                long.as_str(),
                TelemetrySettingError::Namespace,
            ),
            (
                "POWERTOOLS_SERVICE_NAME",
                "plant\u{7}store",
                TelemetrySettingError::ServiceName,
            ),
            (
                "POWERTOOLS_SERVICE_NAME",
                "plänt-store",
                TelemetrySettingError::ServiceName,
            ),
            (
                "POWERTOOLS_METRICS_DISABLED",
                "maybe",
                TelemetrySettingError::MetricsDisabled,
            ),
        ];
        for (name, value, error) in cases {
            assert_eq!(settings(&[(name, value)]), Err(error), "{name}={value}");
        }
    }

    #[test]
    fn the_trace_id_is_the_root_of_lambdas_trace_header() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(trace_root(header), Some("1-5759e988-bd862e3fe1be46a994272793"));
        assert_eq!(trace_root("Sampled=0;Root=1-a-b"), Some("1-a-b"));
        assert_eq!(trace_root("Parent=1;Sampled=0"), None);
        assert_eq!(trace_root("Root="), None);
    }

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl MetricsSink for Lines {
        fn write_line(&self, line: &[u8]) {
            self.0.lock().unwrap().extend_from_slice(line);
        }
    }

    impl Lines {
        fn documents(&self) -> Vec<Value> {
            let bytes = self.0.lock().unwrap().clone();
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.is_empty() || text.ends_with('\n'), "{text}");
            text.lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect()
        }
    }

    fn invocation(status: u16, outcome: Option<Created>, store_ms: Option<u64>) -> Invocation<'static> {
        Invocation {
            context: None,
            method: "POST",
            path: "/plants",
            status,
            error: None,
            plant_id: None,
            outcome,
            latency: Duration::from_micros(1500),
            store_latency: store_ms.map(Duration::from_millis),
            envelope: None,
        }
    }

    #[test]
    fn an_insert_is_one_emf_document_with_every_counter_declared_and_valued() {
        let lines = Lines::default();
        let telemetry = Telemetry::new(TelemetrySettings::default(), lines.clone());

        telemetry.record(&invocation(200, Some(Created::Inserted), Some(2)));

        let documents = lines.documents();
        assert_eq!(documents.len(), 1);
        let mut document = documents[0].clone();
        let timestamp = document["_aws"]["Timestamp"].take();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
        let age = now - u128::from(timestamp.as_u64().expect("an integer timestamp in ms"));
        assert!(age < 60_000, "{age} ms old");
        let count = |name: &str| json!({ "Name": name, "Unit": "Count" });
        let ms = |name: &str| json!({ "Name": name, "Unit": "Milliseconds" });
        assert_eq!(
            document,
            json!({
                "_aws": {
                    "Timestamp": null,
                    "CloudWatchMetrics": [{
                        "Namespace": "PlantStore",
                        "Dimensions": [["service"]],
                        "Metrics": [
                            count("ColdStart"), count("PlantCreated"), count("PlantReplayed"),
                            count("PlantConflict"), count("ClientError"), count("AuthRejected"),
                            count("ServerError"), count("StoreUnavailable"), ms("Latency"), ms("StoreLatency"),
                        ],
                    }],
                },
                "service": "plant-store",
                "ColdStart": 1, "PlantCreated": 1, "PlantReplayed": 0, "PlantConflict": 0,
                "ClientError": 0, "AuthRejected": 0, "ServerError": 0, "StoreUnavailable": 0,
                "Latency": 1.5, "StoreLatency": 2.0,
            })
        );
    }

    #[test]
    fn cold_start_is_counted_on_the_first_invocation_only_and_store_latency_only_with_a_store_call() {
        let lines = Lines::default();
        let telemetry = Telemetry::new(TelemetrySettings::default(), lines.clone());

        telemetry.record(&invocation(404, None, None));
        telemetry.record(&invocation(404, None, None));
        telemetry.record(&invocation(503, None, Some(5000)));

        let documents = lines.documents();
        let names = |document: &Value| -> Vec<String> {
            document["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .unwrap()
                .iter()
                .map(|metric| metric["Name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(documents[0]["ColdStart"], 1);
        assert!(names(&documents[0]).contains(&"ColdStart".to_owned()));
        for document in &documents[1..] {
            assert_eq!(document.get("ColdStart"), None, "{document}");
            assert!(!names(document).contains(&"ColdStart".to_owned()), "{document}");
        }
        assert_eq!(documents[1].get("StoreLatency"), None);
        assert_eq!(documents[2]["StoreLatency"], 5000.0);
        assert_eq!(
            (
                documents[2]["ServerError"].clone(),
                documents[2]["StoreUnavailable"].clone()
            ),
            (json!(1), json!(1))
        );
    }

    #[test]
    fn metrics_switched_off_write_nothing() {
        let lines = Lines::default();
        let settings = TelemetrySettings {
            metrics: false,
            ..TelemetrySettings::default()
        };
        let telemetry = Telemetry::new(settings, lines.clone());

        telemetry.record(&invocation(200, Some(Created::Inserted), Some(1)));

        assert!(lines.documents().is_empty());
    }

    #[test]
    fn the_namespace_and_service_are_the_configured_ones_and_the_ids_lead_to_the_log_and_trace() {
        let lines = Lines::default();
        let settings = TelemetrySettings {
            service: "plants-eu".to_owned(),
            namespace: "Shop/Plants".to_owned(),
            metrics: true,
        };
        let telemetry = Telemetry::new(settings, lines.clone());
        let mut context = Context::default();
        context.request_id = "req-1".to_owned();
        context.xray_trace_id = Some("Root=1-67891233-abcdef012345678912345678;Sampled=1".to_owned());

        telemetry.record(&Invocation {
            context: Some(&context),
            ..invocation(401, None, None)
        });

        let document = &lines.documents()[0];
        assert_eq!(
            document["_aws"]["CloudWatchMetrics"][0]["Namespace"],
            "Shop/Plants"
        );
        assert_eq!(document["service"], "plants-eu");
        assert_eq!(document["function_request_id"], "req-1");
        assert_eq!(document["xray_trace_id"], "1-67891233-abcdef012345678912345678");
        assert_eq!(
            (document["ClientError"].clone(), document["AuthRejected"].clone()),
            (json!(1), json!(1))
        );
    }
}
