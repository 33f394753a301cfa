//! What an operator sees of each invocation, in the conventions of
//! Powertools for AWS Lambda: the request log line with the Powertools
//! Logger keys, and one CloudWatch Embedded Metric Format (EMF) document on
//! stdout, which CloudWatch Logs turns into metrics with no API call.
//!
//! The EMF document is written by hand rather than through a metrics
//! crate: the document is fixed (one namespace, one dimension, eleven
//! metrics), and the crates that format EMF install a global recorder
//! behind the `metrics` facade and flush it per invocation, which is more
//! machinery, and more CPU per invocation, than the document itself. Its
//! fixed parts are written once per process, when the settings build the
//! `Telemetry` (`setup.rs`).

use std::cell::RefCell;
use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lambda_http::{Context, tracing};
use serde::Serialize;

use crate::error::DEADLINE_EXCEEDED;
use crate::store::Created;

mod settings;
mod setup;

pub use self::settings::{DEFAULT_NAMESPACE, DEFAULT_SERVICE, TelemetrySettingError, TelemetrySettings};

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
    /// What the host's envelope decoder set aside, if anything, in words.
    pub envelope: Option<&'a str>,
    /// The trace id X-Ray shows (`1-…-…`), as Powertools logs it: the
    /// `Root` of Lambda's trace header, which the host reads.
    pub xray_trace_id: Option<&'a str>,
}

/// The per-process telemetry state: the settings, the metrics sink, and
/// whether the next invocation is the first.
pub struct Telemetry {
    settings: TelemetrySettings,
    template: Template,
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
    /// Writes the request log line and, unless metrics are off, the EMF
    /// document. The first call of the process is the cold start.
    pub fn record(&self, invocation: &Invocation<'_>) {
        let cold_start = self.cold.swap(false, Ordering::Relaxed);
        let context = invocation.context;
        let request_id = context.map(|context| context.request_id.as_str());
        let trace_id = invocation.xray_trace_id;
        let latency_ms = millis(invocation.latency);
        // The message as a `&str` field, first as a format string's would
        // be: the same bytes in every format, and no `fmt` call to write it.
        tracing::info!(
            message = "request",
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
            tenant_id = context.and_then(|context| context.tenant_id.as_deref()),
            envelope = invocation.envelope,
        );
        if !self.settings.metrics {
            return;
        }
        let timestamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX));
        let metrics = Metrics::of(invocation, cold_start);
        let write = |line: &mut Vec<u8>| {
            line.clear();
            self.template
                .write(line, timestamp_ms, &metrics, request_id, trace_id);
            line.push(b'\n');
            self.sink.write_line(line);
        };
        // The document's buffer is kept per thread, not allocated per line;
        // a sink that wrote a document of its own on this thread would get
        // a buffer of its own.
        LINE.with(|line| match line.try_borrow_mut() {
            Ok(mut line) => write(&mut line),
            Err(_) => write(&mut Vec::with_capacity(1024)),
        });
    }
}

thread_local! {
    static LINE: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(1024));
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

/// One metric of the document.
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
    list: [Option<Metric>; 11],
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
/// dimension, each metric's name and unit) and the `service` member, so
/// that per invocation only the timestamp, the values and the ids are
/// written (docs/performance.md, "A warm create against its floor").
struct Template {
    /// `,"Name":` of each metric, in the order of [`Metrics::list`].
    names: [Vec<u8>; 11],
    /// `,"Name":0` and `,"Name":1` of each metric: a counter's member
    /// whole, as counters are 0 or 1.
    counters: [[Vec<u8>; 2]; 11],
    /// What follows the timestamp, by [`Metrics::shape`]: `,`, the
    /// directive (`"CloudWatchMetrics":[…]`), `},` and `"service":"…"`.
    heads: [Vec<u8>; 4],
}

impl Template {
    /// Appends one invocation's document to `line`, as one JSON object: `_aws`
    /// with the timestamp and the directive, then the dimension and every
    /// metric as top-level members, then the ids that lead to the log line
    /// and the trace (specification: "Embedded metric format" in the
    /// CloudWatch user guide).
    fn write(
        &self,
        line: &mut Vec<u8>,
        timestamp_ms: u64,
        metrics: &Metrics,
        request_id: Option<&str>,
        trace_id: Option<&str>,
    ) {
        line.extend_from_slice(br#"{"_aws":{"Timestamp":"#);
        json(line, &timestamp_ms);
        line.extend_from_slice(self.heads.get(metrics.shape()).map_or(&[][..], Vec::as_slice));
        for ((metric, name), counter) in metrics.list.iter().zip(&self.names).zip(&self.counters) {
            if let Some(metric) = metric {
                match metric.value {
                    Value::Count(count @ 0..=1) => {
                        line.extend_from_slice(
                            counter.get(usize::from(count)).map_or(&[][..], Vec::as_slice),
                        );
                    }
                    Value::Count(count) => {
                        line.extend_from_slice(name);
                        json(line, &count);
                    }
                    Value::Milliseconds(ms) => {
                        line.extend_from_slice(name);
                        json(line, &ms);
                    }
                }
            }
        }
        for (name, id) in [
            (&br#","function_request_id":"#[..], request_id),
            (br#","xray_trace_id":"#, trace_id),
        ] {
            if let Some(id) = id {
                line.extend_from_slice(name);
                crate::json::write_string(line, id);
            }
        }
        line.push(b'}');
    }
}

/// `value` as JSON. Strings, integers and floats (a float that is not
/// finite is `null`) cannot fail to be written into a `Vec`.
fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(out, value);
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl MetricsSink for Lines {
        fn write_line(&self, line: &[u8]) {
            self.0.lock().unwrap().extend_from_slice(line);
        }
    }

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing::subscriber::fmt::MakeWriter<'a> for Lines {
        type Writer = Lines;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
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
            xray_trace_id: None,
        }
    }

    /// What `record` logs through the host's JSON subscriber and through
    /// `tracing-subscriber`'s own JSON format set up as the host's was,
    /// inside a span shaped as the host's invocation span.
    fn request_lines(invocation: &Invocation<'_>, cold: bool, span: bool) -> (String, String) {
        let line = |dispatch: tracing::Dispatch, lines: &Lines| {
            let telemetry = Telemetry::log_only();
            if !cold {
                telemetry.cold.store(false, Ordering::Relaxed);
            }
            tracing::dispatcher::with_default(&dispatch, || {
                let context = invocation.context;
                let invocation_span = span.then(|| {
                    tracing::info_span!(
                        target: "lambda_host",
                        "invocation",
                        request_id = context.map(|context| context.request_id.as_str()),
                        xray_trace_id = invocation.xray_trace_id,
                        tenant_id = context.and_then(|context| context.tenant_id.as_deref()),
                    )
                });
                let _entered = invocation_span.as_ref().map(tracing::Span::enter);
                telemetry.record(invocation);
            });
            String::from_utf8(lines.0.lock().unwrap().clone()).unwrap()
        };
        let ours = Lines::default();
        let theirs = Lines::default();
        let reference = tracing::subscriber::fmt()
            .with_target(false)
            .without_time()
            .with_writer(theirs.clone())
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .finish();
        (
            line(
                tracing::Dispatch::new(lambda_host::logging::json_subscriber(None, ours.clone())),
                &ours,
            ),
            line(tracing::Dispatch::new(reference), &theirs),
        )
    }

    /// The request line as `record` wrote it with `"request"` as the
    /// event's format string.
    fn former_request_line(invocation: &Invocation<'_>) {
        let context = invocation.context;
        let request_id = context.map(|context| context.request_id.as_str());
        tracing::info!(
            request_id,
            method = invocation.method,
            path = invocation.path,
            status = invocation.status,
            error = invocation.error,
            plant_id = invocation.plant_id,
            outcome = invocation.outcome.map(Created::as_str),
            latency_ms = millis(invocation.latency),
            store_latency_ms = invocation.store_latency.map(millis),
            service = TelemetrySettings::default().service.as_str(),
            cold_start = false,
            function_name = context.map(|context| context.env_config.function_name.as_str()),
            function_memory_size = context.map(|context| context.env_config.memory),
            function_arn = context.map(|context| context.invoked_function_arn.as_str()),
            function_request_id = request_id,
            xray_trace_id = invocation.xray_trace_id,
            tenant_id = context.and_then(|context| context.tenant_id.as_deref()),
            envelope = invocation.envelope,
            "request"
        );
    }

    #[test]
    fn the_request_line_is_what_the_format_string_message_wrote_as_text_and_as_json() {
        let mut context = Context::default();
        context.request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678".to_owned();
        context.tenant_id = Some("tenant \"blue\"".to_owned());
        let invocation = Invocation {
            context: Some(&context),
            xray_trace_id: Some("1-5759e988-bd862e3fe1be46a994272793"),
            plant_id: Some(7),
            error: Some(40901),
            envelope: Some("set aside: 1 cookie"),
            ..invocation(409, Some(Created::Replayed), Some(3))
        };
        let text = |lines: &Lines| {
            tracing::Dispatch::new(
                tracing::subscriber::fmt()
                    .with_target(false)
                    .without_time()
                    .with_ansi(false)
                    .with_writer(lines.clone())
                    .finish(),
            )
        };
        let json = |lines: &Lines| {
            tracing::Dispatch::new(lambda_host::logging::json_subscriber(None, lines.clone()))
        };
        for (format, dispatch) in [
            ("text", &text as &dyn Fn(&Lines) -> tracing::Dispatch),
            ("json", &json),
        ] {
            let (ours, theirs) = (Lines::default(), Lines::default());
            tracing::dispatcher::with_default(&dispatch(&ours), || {
                let telemetry = Telemetry::log_only();
                telemetry.cold.store(false, Ordering::Relaxed);
                telemetry.record(&invocation);
            });
            tracing::dispatcher::with_default(&dispatch(&theirs), || former_request_line(&invocation));
            let (ours, theirs) = (ours.0.lock().unwrap().clone(), theirs.0.lock().unwrap().clone());
            assert!(!ours.is_empty(), "{format}");
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(theirs).unwrap(),
                "{format}"
            );
        }
    }

    #[test]
    fn the_request_line_is_byte_for_byte_what_tracing_subscribers_json_format_wrote() {
        let mut context = Context::default();
        context.request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678".to_owned();
        context.invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:plants".to_owned();
        context.env_config = std::sync::Arc::new(lambda_http::lambda_runtime::Config {
            function_name: "plants".to_owned(),
            memory: 128,
            ..lambda_http::lambda_runtime::Config::default()
        });
        let mut tenant = context.clone();
        tenant.tenant_id = Some("tenant \"blue\" ü".to_owned());
        let trace = Some("1-5759e988-bd862e3fe1be46a994272793");
        let created = Invocation {
            context: Some(&context),
            xray_trace_id: trace,
            plant_id: Some(40_000_001),
            latency: Duration::from_nanos(1_234_567),
            ..invocation(200, Some(Created::Inserted), Some(1))
        };
        let cases = [
            ("a create, cold", created, true, true),
            ("a create, warm", created, false, true),
            (
                "a replay with a sub-microsecond store call",
                Invocation {
                    store_latency: Some(Duration::from_nanos(999)),
                    ..invocation(200, Some(Created::Replayed), None)
                },
                false,
                true,
            ),
            (
                "a refusal with its error code, a JWT's tenant",
                Invocation {
                    context: Some(&tenant),
                    error: Some(40103),
                    store_latency: None,
                    ..created
                },
                false,
                true,
            ),
            (
                "the deadline's 503",
                Invocation {
                    error: Some(DEADLINE_EXCEEDED),
                    outcome: None,
                    latency: Duration::from_secs(3),
                    ..created
                },
                false,
                true,
            ),
            (
                "a path and method that need escaping, and unicode",
                Invocation {
                    method: "P\"OST\\",
                    path: "/plants/🌿/\u{1}\n\té",
                    error: Some(40401),
                    envelope: Some("set aside: 2 cookies \"a\", b"),
                    ..created
                },
                false,
                true,
            ),
            (
                "no context, no trace, no span",
                invocation(415, None, None),
                true,
                false,
            ),
        ];
        for (name, invocation, cold, span) in cases {
            let (ours, theirs) = request_lines(&invocation, cold, span);
            assert!(theirs.contains(r#""message":"request""#), "{name}: {theirs}");
            assert_eq!(theirs.contains(r#","span":{"#), span, "{name}: {theirs}");
            assert_eq!(ours, theirs, "{name}");
        }
    }

    /// The document as it was written member by member through serde_json,
    /// each metric's name and value and each id.
    fn reference_document(
        settings: &TelemetrySettings,
        timestamp_ms: u64,
        metrics: &Metrics,
        request_id: Option<&str>,
        trace_id: Option<&str>,
    ) -> Vec<u8> {
        let (directives, service) = Template::declarations(settings);
        let mut line = br#"{"_aws":{"Timestamp":"#.to_vec();
        json(&mut line, &timestamp_ms);
        line.push(b',');
        line.extend_from_slice(&directives[metrics.shape()]);
        line.extend_from_slice(b"},");
        line.extend_from_slice(&service);
        for metric in metrics.iter() {
            line.push(b',');
            json(&mut line, metric.name);
            line.push(b':');
            match metric.value {
                super::Value::Count(count) => json(&mut line, &count),
                super::Value::Milliseconds(ms) => json(&mut line, &ms),
            }
        }
        for (name, id) in [("function_request_id", request_id), ("xray_trace_id", trace_id)] {
            if let Some(id) = id {
                line.push(b',');
                json(&mut line, name);
                line.push(b':');
                json(&mut line, id);
            }
        }
        line.push(b'}');
        line
    }

    #[test]
    fn the_document_is_byte_for_byte_what_the_member_by_member_writer_wrote() {
        let settings = TelemetrySettings {
            service: "plants \"eu\" ü".to_owned(),
            namespace: "Shop/Plants".to_owned(),
            metrics: true,
        };
        let ids = [
            (None, None),
            (
                Some("c6af9ac6-7b61-11e6-9a41-93e812345678"),
                Some("1-5759e988-bd862e3fe1be46a994272793"),
            ),
            (Some("a\"b\\c\u{1}\u{7f}ü🌱"), None),
        ];
        let mut documents = 0;
        for settings in [&TelemetrySettings::default(), &settings] {
            let template = Template::new(settings);
            for cold in [true, false] {
                for store_latency in [
                    None,
                    Some(Duration::from_millis(1)),
                    Some(Duration::from_nanos(999)),
                ] {
                    for status in [200, 401, 409, 415, 500, 503] {
                        for outcome in [None, Some(Created::Inserted), Some(Created::Replayed)] {
                            for error in [None, Some(DEADLINE_EXCEEDED)] {
                                for latency in [Duration::from_nanos(1_234_567), Duration::from_secs(3)] {
                                    for (request_id, trace_id) in ids {
                                        let metrics = Metrics::of(
                                            &Invocation {
                                                error,
                                                latency,
                                                store_latency,
                                                ..invocation(status, outcome, None)
                                            },
                                            cold,
                                        );
                                        let mut ours = Vec::new();
                                        template.write(
                                            &mut ours,
                                            1_764_000_000_123,
                                            &metrics,
                                            request_id,
                                            trace_id,
                                        );
                                        let theirs = reference_document(
                                            settings,
                                            1_764_000_000_123,
                                            &metrics,
                                            request_id,
                                            trace_id,
                                        );
                                        assert_eq!(
                                            String::from_utf8_lossy(&ours),
                                            String::from_utf8_lossy(&theirs)
                                        );
                                        documents += 1;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(documents, 2 * 2 * 3 * 6 * 3 * 2 * 2 * 3);
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
                            count("ServerError"), count("StoreUnavailable"), count("DeadlineExceeded"),
                            ms("Latency"), ms("StoreLatency"),
                        ],
                    }],
                },
                "service": "plant-store",
                "ColdStart": 1, "PlantCreated": 1, "PlantReplayed": 0, "PlantConflict": 0,
                "ClientError": 0, "AuthRejected": 0, "ServerError": 0, "StoreUnavailable": 0,
                "DeadlineExceeded": 0,
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

        telemetry.record(&Invocation {
            context: Some(&context),
            xray_trace_id: Some("1-67891233-abcdef012345678912345678"),
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
