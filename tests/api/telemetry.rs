//! What an operator reads of every outcome: the request log line with the
//! Powertools Logger keys, and the CloudWatch EMF document, each parsed as
//! CloudWatch would and checked value by value. In process through the real
//! handler for every status, then through the built binary under a stand-in
//! Lambda Runtime API, where stdout is what CloudWatch Logs receives.

use std::io;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use lambda_http::lambda_runtime::Config as LambdaConfig;
use lambda_http::{Context, Request, RequestExt, tracing};
use plant_store::auth::Authenticator;
use plant_store::handler::App;
use plant_store::plant::NewPlant;
use plant_store::store::{Created, DynamoStore, MemoryStore, PlantStore, StoreError};
use plant_store::telemetry::{MetricsSink, Telemetry, TelemetrySettings};
use serde_json::{Value, json};

use crate::helpers::function;
use crate::helpers::{
    Captured, DEV_TOKEN, Event, client_for, create_table, dynamodb_local_endpoint, unique_name,
};
use crate::jwt::verifier_and_token_without_scope;
use crate::runtime_fake::{FUNCTION_ARN, TRACE_HEADER, runtime_api};

/// The root of `TRACE_HEADER`: the id X-Ray shows, and Powertools logs.
const TRACE_ID: &str = "1-5759e988-bd862e3fe1be46a994272793";

/// The outcome counters, in the order the document declares them.
const COUNTERS: [&str; 8] = [
    "PlantCreated",
    "PlantReplayed",
    "PlantConflict",
    "ClientError",
    "AuthRejected",
    "ServerError",
    "StoreUnavailable",
    "DeadlineExceeded",
];

impl MetricsSink for Captured {
    fn write_line(&self, line: &[u8]) {
        self.append(line);
    }
}

/// A store that fails as DynamoDB can: id 503 as throttled after the
/// retries, any other id as a missing table.
struct FailingStore;

impl PlantStore for FailingStore {
    async fn create(&self, plant: &NewPlant) -> Result<Created, StoreError> {
        Err(match plant.id.get() {
            503 => StoreError::Unavailable("ThrottlingException after 3 attempts".into()),
            _ => StoreError::Internal("ResourceNotFoundException: no such table".into()),
        })
    }
}

/// The Lambda context the runtime attaches to every request in production.
fn lambda_context(request_id: &str) -> Context {
    let mut context = Context::default();
    context.request_id = request_id.to_owned();
    context.invoked_function_arn = FUNCTION_ARN.to_owned();
    context.xray_trace_id = Some(TRACE_HEADER.to_owned());
    context.env_config = Arc::new(LambdaConfig {
        function_name: "plants".to_owned(),
        memory: 128,
        version: "1".to_owned(),
        log_stream: "test".to_owned(),
        log_group: "/aws/lambda/plants".to_owned(),
    });
    context
}

/// One request, and what it should leave behind.
struct Case {
    name: String,
    request: Request,
    status: u16,
    error: Option<u32>,
    outcome: Option<&'static str>,
    /// The counters that must be 1; every other counter must be 0.
    ones: &'static [&'static str],
    /// Whether DynamoDB was called, i.e. whether `StoreLatency` is present.
    store_call: bool,
}

/// The counters of most refusals.
const CLIENT_ERROR: &[&str] = &["ClientError"];

impl Case {
    /// A 200 whose plant was `outcome` (inserted or replayed) in DynamoDB.
    fn created(request: Event, outcome: &'static str, ones: &'static [&'static str]) -> Self {
        Self {
            name: format!("200 {outcome}"),
            request: request.request(),
            status: 200,
            error: None,
            outcome: Some(outcome),
            ones,
            store_call: true,
        }
    }

    /// The `error` answer (its status is the code's first three digits),
    /// decided before DynamoDB was called.
    fn refused(error: u32, request: Event, ones: &'static [&'static str]) -> Self {
        let status = u16::try_from(error / 100).expect("an HTTP status");
        Self {
            name: status.to_string(),
            request: request.request(),
            status,
            error: Some(error),
            outcome: None,
            ones,
            store_call: false,
        }
    }

    /// The `error` answer, after DynamoDB was called.
    fn after_the_store(error: u32, request: Event, ones: &'static [&'static str]) -> Self {
        Self {
            store_call: true,
            ..Self::refused(error, request, ones)
        }
    }
}

fn create(body: &str) -> Event {
    Event::load("create-http-api.json").body(body)
}

/// Sends every case in order through `app`, whose first request is the
/// cold start, and checks the one log line and the one EMF document each
/// one leaves.
async fn assert_observed<S: PlantStore>(app: &App<S>, log: &Captured, metrics: &Captured, cases: Vec<Case>) {
    for (position, mut case) in cases.into_iter().enumerate() {
        let name = std::mem::take(&mut case.name);
        let name = name.as_str();
        let request_id = unique_name("request");
        let sent = (
            case.request.method().to_string(),
            case.request.raw_http_path().to_owned(),
        );
        let request = std::mem::take(&mut case.request);
        let response = app
            .handle(request.with_lambda_context(lambda_context(&request_id)))
            .await;
        assert_eq!(response.status().as_u16(), case.status, "{name}: status");

        let lines: Vec<Value> = log
            .take_json_lines()
            .into_iter()
            .filter(|line| line["message"] == "request")
            .collect();
        let [line] = lines.as_slice() else {
            panic!("{name}: one request log line expected: {lines:?}")
        };
        let documents = metrics.take_json_lines();
        let [document] = documents.as_slice() else {
            panic!("{name}: one EMF document expected: {documents:?}")
        };
        let cold = position == 0;
        assert_log_line(name, line, &case, &request_id, &sent, cold);
        assert_document(name, document, &case, &request_id, cold);
        // The same measurement, in both.
        assert_eq!(document["Latency"], line["latency_ms"], "{name}: latency");
        assert_eq!(
            document.get("StoreLatency"),
            line.get("store_latency_ms"),
            "{name}: store latency"
        );
    }
}

fn assert_log_line(
    name: &str,
    line: &Value,
    case: &Case,
    request_id: &str,
    sent: &(String, String),
    cold: bool,
) {
    let mut expected = json!({
        "level": "INFO",
        "message": "request",
        "request_id": request_id,
        "method": sent.0,
        "path": sent.1,
        "status": case.status,
        "service": "plant-store",
        "cold_start": cold,
        "function_name": "plants",
        "function_memory_size": 128,
        "function_arn": FUNCTION_ARN,
        "function_request_id": request_id,
        "xray_trace_id": TRACE_ID,
    });
    if let Some(error) = case.error {
        expected["error"] = json!(error);
    }
    if let Some(outcome) = case.outcome {
        expected["outcome"] = json!(outcome);
    }
    let mut line = line.clone();
    let object = line.as_object_mut().expect("a JSON object");
    // Measured values: present, of the right type, then compared as a whole.
    let latency = object.remove("latency_ms");
    assert!(
        latency
            .as_ref()
            .and_then(Value::as_f64)
            .is_some_and(|ms| ms >= 0.0),
        "{name}: {latency:?}"
    );
    let store_latency = object.remove("store_latency_ms");
    assert_eq!(
        store_latency.is_some(),
        case.store_call,
        "{name}: store_latency_ms {store_latency:?}"
    );
    if let Some(plant_id) = object.remove("plant_id") {
        assert!(plant_id.is_i64(), "{name}: plant_id {plant_id}");
    }
    // Span fields of the runtime, if any, are not ours to check.
    object.remove("span");
    object.remove("spans");
    assert_eq!(line, expected, "{name}: the request log line");
}

fn assert_document(name: &str, document: &Value, case: &Case, request_id: &str, cold: bool) {
    let timestamp = document["_aws"]["Timestamp"].as_u64();
    assert!(timestamp.is_some(), "{name}: Timestamp in ms: {document}");
    let mut declared = Vec::new();
    if cold {
        declared.push(("ColdStart", "Count"));
    }
    declared.extend(COUNTERS.iter().map(|counter| (*counter, "Count")));
    declared.push(("Latency", "Milliseconds"));
    if case.store_call {
        declared.push(("StoreLatency", "Milliseconds"));
    }
    let mut expected = json!({
        "_aws": {
            "Timestamp": timestamp,
            "CloudWatchMetrics": [{
                "Namespace": "PlantStore",
                "Dimensions": [["service"]],
                "Metrics": declared
                    .iter()
                    .map(|(metric, unit)| json!({ "Name": metric, "Unit": unit }))
                    .collect::<Vec<_>>(),
            }],
        },
        "service": "plant-store",
        "function_request_id": request_id,
        "xray_trace_id": TRACE_ID,
        "Latency": document["Latency"],
    });
    for counter in COUNTERS {
        expected[counter] = json!(u8::from(case.ones.contains(&counter)));
    }
    if cold {
        expected["ColdStart"] = json!(1);
    }
    if case.store_call {
        expected["StoreLatency"] = document["StoreLatency"].clone();
        assert!(document["StoreLatency"].is_f64(), "{name}: {document}");
    }
    assert!(document["Latency"].is_f64(), "{name}: {document}");
    assert_eq!(*document, expected, "{name}: the EMF document");
}

fn with_telemetry<S: PlantStore>(app: App<S>, metrics: &Captured) -> App<S> {
    app.with_telemetry(Telemetry::new(TelemetrySettings::default(), metrics.clone()))
}

#[tokio::test]
async fn every_outcome_leaves_one_log_line_with_the_powertools_keys_and_one_emf_document_with_its_metric() {
    let log = Captured::default();
    let subscriber = lambda_host::logging::json_subscriber(None, log.clone());
    let _guard = tracing::dispatcher::set_default(&tracing::Dispatch::new(subscriber));
    // As in jwt/configuration.rs: with a second dispatcher registered, tracing-core asks
    // every dispatcher about each callsite instead of caching the answer of
    // whichever thread (another test's, with none) hit it first.
    let _second = tracing::Dispatch::new(tracing::subscriber::fmt().with_writer(io::sink).finish());

    // The store outcomes and every 4xx a static token can meet.
    let metrics = Captured::default();
    let client = client_for(dynamodb_local_endpoint());
    let table = unique_name("plants");
    create_table(&client, &table).await;
    let app = with_telemetry(
        App::new(
            DynamoStore::new(client, &table),
            Authenticator::with_static_tokens(&[DEV_TOKEN]),
        ),
        &metrics,
    );
    let monstera = r#"{"id":1,"name":"Monstera","tag":"aroid"}"#;
    let oversized = format!(r#"{{"id":3,"name":"{}"}}"#, "x".repeat(16 * 1024));
    let cases = vec![
        Case::created(create(monstera), "inserted", &["PlantCreated"]),
        Case::created(create(monstera), "replayed", &["PlantReplayed"]),
        Case::after_the_store(
            40901,
            create(r#"{"id":1,"name":"Fern"}"#),
            &["PlantConflict", "ClientError"],
        ),
        Case::refused(40002, create(r#"{"id":2}"#), CLIENT_ERROR),
        Case::refused(
            40101,
            create(monstera).header("authorization", None),
            &["ClientError", "AuthRejected"],
        ),
        Case::refused(40401, create(monstera).raw_path("/plants/1"), CLIENT_ERROR),
        Case::refused(40501, create(monstera).method("PUT"), CLIENT_ERROR),
        Case::refused(41301, create(&oversized), CLIENT_ERROR),
        Case::refused(
            41501,
            create(monstera).header("content-type", Some("text/plain")),
            CLIENT_ERROR,
        ),
    ];
    assert_observed(&app, &log, &metrics, cases).await;

    // 403: a valid JWT without the scope. A process of its own, so its
    // first request is a cold start again.
    let metrics = Captured::default();
    let (_server, verifier, token) = verifier_and_token_without_scope().await;
    let app = with_telemetry(
        App::new(MemoryStore::default(), Authenticator::with_jwt(verifier)),
        &metrics,
    );
    let with_token = create(monstera).header("authorization", Some(&format!("Bearer {token}")));
    let cases = vec![Case::refused(40301, with_token, &["ClientError", "AuthRejected"])];
    assert_observed(&app, &log, &metrics, cases).await;

    // 503 and 500: the store fails after it was called.
    let metrics = Captured::default();
    let app = with_telemetry(
        App::new(FailingStore, Authenticator::with_static_tokens(&[DEV_TOKEN])),
        &metrics,
    );
    let cases = vec![
        Case::after_the_store(
            50301,
            create(r#"{"id":503,"name":"Fern"}"#),
            &["ServerError", "StoreUnavailable"],
        ),
        Case::after_the_store(50001, create(r#"{"id":500,"name":"Fern"}"#), &["ServerError"]),
    ];
    assert_observed(&app, &log, &metrics, cases).await;
}

/// Runs the built function on `events` with `env` added, until it has
/// answered them all; returns its stdout, line by line.
fn run_function(events: &[(&str, Event)], env: &[(&str, &str)]) -> Vec<String> {
    let table = unique_name("plants");
    let endpoint = dynamodb_local_endpoint();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async { create_table(&client_for(endpoint), &table).await });
    let (runtime_api, received) = runtime_api(
        events
            .iter()
            .map(|(id, event)| ((*id).to_owned(), event.text()))
            .collect(),
    );
    let function = function(&runtime_api, endpoint)
        .env("TABLE_NAME", &table)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the function binary starts");
    let answered = (0..events.len())
        .map_while(|_| received.recv_timeout(Duration::from_secs(30)).ok())
        .count();
    // Everything is written before the answer is posted.
    let mut function = function;
    let _ = function.kill();
    let output = function.wait_with_output().expect("the function's stdout");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 stdout");
    assert_eq!(answered, events.len(), "answers; stdout:\n{stdout}");
    stdout.lines().map(str::to_owned).collect()
}

/// The stdout lines that are EMF documents, parsed.
fn documents(stdout: &[String]) -> Vec<Value> {
    stdout
        .iter()
        .filter(|line| line.contains("\"_aws\""))
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("an EMF line that is not JSON ({err}): {line}"))
        })
        .collect()
}

#[test]
fn the_built_function_logs_the_powertools_keys_and_one_cold_start_per_process() {
    let first = create(r#"{"id":1,"name":"Fern"}"#);
    let events = [
        ("req-1", first.clone()),
        ("req-2", first.clone()),
        ("req-3", first.header("authorization", None)),
    ];

    let stdout = run_function(&events, &[("AWS_LAMBDA_LOG_FORMAT", "JSON")]);

    let lines: Vec<Value> = stdout
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}")))
        .collect();
    let requests: Vec<&Value> = lines.iter().filter(|line| line["message"] == "request").collect();
    let keys = |key: &str| requests.iter().map(|line| line[key].clone()).collect::<Vec<_>>();
    assert_eq!(
        keys("cold_start"),
        [json!(true), json!(false), json!(false)],
        "{stdout:#?}"
    );
    assert_eq!(
        keys("function_request_id"),
        [json!("req-1"), json!("req-2"), json!("req-3")]
    );
    assert_eq!(keys("status"), [json!(200), json!(200), json!(401)]);
    for line in &requests {
        assert_eq!(line["service"], "plant-store", "{line}");
        assert_eq!(line["function_name"], "plants", "{line}");
        assert_eq!(line["function_memory_size"], 128, "{line}");
        assert_eq!(line["function_arn"], FUNCTION_ARN, "{line}");
        assert_eq!(line["xray_trace_id"], TRACE_ID, "{line}");
    }

    let documents = documents(&stdout);
    let values = |metric: &str| {
        documents
            .iter()
            .map(|doc| doc[metric].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        values("ColdStart"),
        [json!(1), Value::Null, Value::Null],
        "{stdout:#?}"
    );
    assert_eq!(values("PlantCreated"), [json!(1), json!(0), json!(0)]);
    assert_eq!(values("PlantReplayed"), [json!(0), json!(1), json!(0)]);
    assert_eq!(values("AuthRejected"), [json!(0), json!(0), json!(1)]);
    assert_eq!(
        values("function_request_id"),
        [json!("req-1"), json!("req-2"), json!("req-3")]
    );
}

#[test]
fn in_text_log_mode_the_emf_document_is_still_one_json_line_with_the_configured_names() {
    let events = [
        ("req-1", create(r#"{"id":1,"name":"Fern"}"#)),
        ("req-2", create(r#"{"id":2,"name":"Fern"}"#)),
    ];

    let stdout = run_function(
        &events,
        &[
            ("POWERTOOLS_SERVICE_NAME", "plants-eu"),
            ("POWERTOOLS_METRICS_NAMESPACE", "Shop/Plants"),
        ],
    );

    let documents = documents(&stdout);
    assert_eq!(documents.len(), 2, "{stdout:#?}");
    for document in &documents {
        assert_eq!(
            document["_aws"]["CloudWatchMetrics"][0]["Namespace"],
            "Shop/Plants"
        );
        assert_eq!(document["service"], "plants-eu");
        assert_eq!(document["PlantCreated"], 1);
    }
    assert_eq!(
        documents
            .iter()
            .filter(|doc| doc.get("ColdStart").is_some())
            .count(),
        1
    );
    // The text request line names the same service and cold start.
    let requests: Vec<&String> = stdout.iter().filter(|line| line.contains(" request ")).collect();
    assert_eq!(requests.len(), 2, "{stdout:#?}");
    assert!(
        requests[0].contains("service=\"plants-eu\"") && requests[0].contains("cold_start=true"),
        "{}",
        requests[0]
    );
    assert!(requests[1].contains("cold_start=false"), "{}", requests[1]);
}

#[test]
fn powertools_metrics_disabled_writes_no_emf_document() {
    let events = [("req-1", create(r#"{"id":1,"name":"Fern"}"#))];

    let stdout = run_function(
        &events,
        &[
            ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
            ("POWERTOOLS_METRICS_DISABLED", "true"),
        ],
    );

    assert!(documents(&stdout).is_empty(), "{stdout:#?}");
    assert_eq!(
        stdout
            .iter()
            .filter(|line| line.contains("\"function_request_id\":\"req-1\""))
            .count(),
        1,
        "{stdout:#?}"
    );
}
