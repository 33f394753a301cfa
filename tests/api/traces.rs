//! Traces, seen from the daemon's side: the built function under the
//! stand-in Runtime API, DynamoDB Local behind the fault proxy, and a UDP
//! listener where Lambda's X-Ray daemon would be. Every datagram is decoded
//! with OpenTelemetry's own generated messages (`opentelemetry-proto`) and
//! checked span by span against the shape of docs/tracing.md: a traced
//! invocation sends one datagram, its SERVER span and a CLIENT span per
//! DynamoDB call beneath it, each with its own invocation's ids, also eight
//! at once; an unsampled one sends nothing unless Application Signals is on
//! (then `T1U`); a headerless one never; a daemon that is not there changes
//! nothing but one warning.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use plant_store::plant::NewPlant;
use plant_store::store::{DynamoStore, PlantStore, with_budgets};
use plant_store::trace::{self, AwsSubsegments, TraceHeader, Tracer};
use prost::Message as _;
use serde_json::{Map, Value, json};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::helpers::{client_for, create_table, dynamodb_local_endpoint, unique_name};
use crate::runtime_api::{http_event, run_to_the_end};
use crate::runtime_fake::{FUNCTION_ARN, FakeRuntimeApi, Invocation, Posted, function};

/// What the test sends to the listener itself once the function is done:
/// the reader has read everything sent before it when it reads this.
const END: &[u8] = b"end of the test's datagrams";

/// One decoded datagram: its mark (`T1S` or `T1U`), resource and spans.
#[derive(Debug, Clone)]
struct Datagram {
    mark: String,
    resource: Value,
    spans: Vec<Span>,
}

/// A UDP listener standing in for the X-Ray daemon: a thread receives every
/// datagram as it comes (a few hundred would overflow the socket's buffer
/// otherwise) and decodes it.
struct Daemon {
    address: String,
    datagrams: Arc<Mutex<Vec<Datagram>>>,
    thread: Option<JoinHandle<()>>,
}

impl Daemon {
    fn start() -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP port for the daemon");
        // A safety net only: the reader stops at `END`.
        socket
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("a read timeout");
        let address = socket.local_addr().expect("an address").to_string();
        let datagrams = Arc::<Mutex<Vec<Datagram>>>::default();
        let kept = datagrams.clone();
        let thread = std::thread::spawn(move || {
            let mut buffer = vec![0; 65_536];
            loop {
                let length = socket.recv(&mut buffer).expect("the test's end marker in time");
                if &buffer[..length] == END {
                    return;
                }
                assert!(length < 64_000, "a datagram of {length} bytes");
                let datagram = decode(&buffer[..length]);
                kept.lock().unwrap_or_else(PoisonError::into_inner).push(datagram);
            }
        });
        Self {
            address,
            datagrams,
            thread: Some(thread),
        }
    }

    /// Every datagram received, once the sender is done: the sends are
    /// synchronous, so they are in the socket's queue before `END`.
    fn datagrams(mut self) -> Vec<Datagram> {
        let marker = UdpSocket::bind("127.0.0.1:0").expect("a port");
        marker.send_to(END, &self.address).expect("the end marker");
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the daemon's thread");
        }
        std::mem::take(&mut *self.datagrams.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn decode(bytes: &[u8]) -> Datagram {
    let text = std::str::from_utf8(bytes).expect("an ASCII datagram");
    let (header, body) = text.split_once('\n').expect("a header line");
    assert_eq!(header, r#"{"format":"json","version":1}"#);
    let (mark, encoded) = body.split_at(3);
    let protobuf = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    let request =
        ExportTraceServiceRequest::decode(protobuf.as_slice()).expect("an OTLP ExportTraceServiceRequest");
    assert_eq!(request.resource_spans.len(), 1, "{request:#?}");
    let resource_spans = &request.resource_spans[0];
    assert_eq!(resource_spans.scope_spans.len(), 1, "{request:#?}");
    let scope = &resource_spans.scope_spans[0];
    let name = scope.scope.as_ref().map(|scope| scope.name.as_str());
    assert_eq!(name, Some("plant-store"), "{request:#?}");
    Datagram {
        mark: mark.to_owned(),
        resource: attributes(&resource_spans.resource.as_ref().expect("a resource").attributes),
        spans: scope.spans.clone(),
    }
}

fn value(any: Option<&AnyValue>) -> Value {
    match any.and_then(|any| any.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => json!(text),
        Some(any_value::Value::BoolValue(flag)) => json!(flag),
        Some(any_value::Value::IntValue(number)) => json!(number),
        Some(any_value::Value::ArrayValue(array)) => {
            Value::Array(array.values.iter().map(|item| value(Some(item))).collect())
        }
        other => panic!("a value of a kind the function never sends: {other:?}"),
    }
}

/// Attributes as a JSON object; a key twice is a failure.
fn attributes(pairs: &[KeyValue]) -> Value {
    let mut object = Map::new();
    for pair in pairs {
        let previous = object.insert(pair.key.clone(), value(pair.value.as_ref()));
        assert!(previous.is_none(), "{} twice", pair.key);
    }
    Value::Object(object)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The trace id and parent span id a trace header names, as OTLP has them.
fn ids(trace_header: &str) -> (String, String) {
    let part = |name: &str| {
        trace_header
            .split(';')
            .find_map(|part| part.strip_prefix(name))
            .expect("the part")
            .to_owned()
    };
    (
        part("Root=").trim_start_matches("1-").replace('-', ""),
        part("Parent="),
    )
}

/// A span's status as `[code, message]`, `null` when unset.
fn status(span: &Span) -> Value {
    span.status
        .as_ref()
        .map_or(Value::Null, |status| json!([status.code, status.message]))
}

fn events(span: &Span) -> Value {
    span.events
        .iter()
        .map(|event| json!({ "name": event.name, "attributes": attributes(&event.attributes) }))
        .collect()
}

/// The datagram of the invocation whose trace header is `trace_header`: its
/// SERVER span (the remote parent the header's `Parent`) and the spans
/// beneath it, all in the one datagram.
fn of_invocation<'a>(
    datagrams: &'a [Datagram],
    trace_header: &str,
) -> (&'a Datagram, &'a Span, Vec<&'a Span>) {
    let (trace_id, parent) = ids(trace_header);
    let mine: Vec<&Datagram> = datagrams
        .iter()
        .filter(|datagram| datagram.spans.iter().any(|span| hex(&span.trace_id) == trace_id))
        .collect();
    assert_eq!(mine.len(), 1, "one datagram for {trace_header}: {mine:#?}");
    let datagram = mine[0];
    assert!(
        datagram.spans.iter().all(|span| hex(&span.trace_id) == trace_id),
        "no other invocation's span in it: {datagram:#?}"
    );
    let servers: Vec<&Span> = datagram
        .spans
        .iter()
        .filter(|span| hex(&span.parent_span_id) == parent)
        .collect();
    assert_eq!(
        servers.len(),
        1,
        "one SERVER span for {trace_header}: {datagram:#?}"
    );
    let server = servers[0];
    assert_eq!(server.kind, 2, "SERVER");
    let calls: Vec<&Span> = datagram
        .spans
        .iter()
        .filter(|span| span.parent_span_id == server.span_id)
        .collect();
    assert_eq!(
        calls.len() + 1,
        datagram.spans.len(),
        "every span hangs from the SERVER span"
    );
    assert!(
        calls.iter().all(|call| call.kind == 3),
        "CLIENT spans: {calls:#?}"
    );
    for span in &datagram.spans {
        assert_eq!(span.span_id.len(), 8);
        assert!(span.start_time_unix_nano <= span.end_time_unix_nano);
        assert!(
            server.start_time_unix_nano <= span.start_time_unix_nano
                && span.end_time_unix_nano <= server.end_time_unix_nano,
            "inside the SERVER span: {span:#?}"
        );
    }
    (datagram, server, calls)
}

/// The built function, traced, its store behind `proxy`, serving `sent`
/// (`workers` at once); returns the answers by request id and the log.
async fn serve_traced(
    sent: &[Invocation],
    proxy: &FaultProxy,
    table: &str,
    daemon: &str,
    workers: usize,
    application_signals: bool,
) -> (HashMap<String, Posted>, Vec<Value>) {
    let api = FakeRuntimeApi::holding(sent.to_vec(), workers);
    let mut command = function(&api.address, &proxy.url());
    command
        .env("TABLE_NAME", table)
        .env("AWS_XRAY_DAEMON_ADDRESS", daemon);
    if workers > 1 {
        command.env("AWS_LAMBDA_MAX_CONCURRENCY", workers.to_string());
    }
    if application_signals {
        command.env("OTEL_AWS_APPLICATION_SIGNALS_ENABLED", "true");
    }
    let count = sent.len();
    let (posted, lines) = tokio::task::spawn_blocking(move || run_to_the_end(&api, count, command))
        .await
        .expect("the function ran");
    let answers = posted
        .into_iter()
        .map(|post| (post.request_id().to_owned(), post))
        .collect();
    (answers, lines)
}

fn answer_status(answers: &HashMap<String, Posted>, request_id: &str) -> Value {
    answers[request_id].body["statusCode"].clone()
}

async fn table_behind_a_proxy() -> (String, FaultProxy) {
    let table = unique_name("plants");
    create_table(&client_for(dynamodb_local_endpoint()), &table).await;
    (table, FaultProxy::start(dynamodb_local_endpoint()).await)
}

fn create(id: u32, n: usize, name: &str) -> Invocation {
    Invocation::new(
        &format!("req-{n}"),
        http_event(&format!(r#"{{"id":{id},"name":"{name}"}}"#)),
    )
    .sampled()
}

/// `base` with `extra`'s keys added.
fn with(base: &Value, extra: Value) -> Value {
    let mut all = base.clone();
    all.as_object_mut()
        .expect("an object")
        .extend(extra.as_object().expect("an object").clone());
    all
}

/// The SERVER span's attributes for an answer, as docs/tracing.md lists them.
fn server_attributes(request_id: &str, cold: bool, status: u16, error: Option<u32>, sampled: bool) -> Value {
    let mut expected = json!({
        "faas.trigger": "http", "aws.local.service": "plant-store", "aws.local.operation": "plants/FunctionHandler",
        "aws.span.kind": "LOCAL_ROOT", "aws.trace.flag.sampled": sampled,
        "faas.invocation_id": request_id, "cloud.resource_id": FUNCTION_ARN, "cloud.account.id": "123456789012",
        "faas.coldstart": cold, "http.request.method": "POST", "http.route": "/plants",
        "http.response.status_code": status, "ColdStart": cold, "Status": status,
        "aws.xray.annotations": ["ColdStart", "Status"],
    });
    if let Some(code) = error {
        expected = with(
            &expected,
            json!({ "ErrorCode": code, "aws.xray.annotations": ["ColdStart", "Status", "ErrorCode"] }),
        );
    }
    if status >= 500 {
        expected = with(&expected, json!({ "error.type": status.to_string() }));
    }
    expected
}

/// The PutItem's CLIENT span's attributes that do not depend on its answer.
fn put_attributes(table: &str, region: &str, sampled: bool) -> Value {
    json!({
        "rpc.system": "aws-api", "rpc.service": "DynamoDB", "rpc.method": "PutItem", "aws.region": region,
        "db.system": "dynamodb", "db.operation": "PutItem", "aws.dynamodb.table_names": [table],
        "aws.local.service": "plant-store", "aws.local.operation": "plants/FunctionHandler",
        "aws.span.kind": "CLIENT", "aws.trace.flag.sampled": sampled,
        "aws.remote.service": "AWS::DynamoDB", "aws.remote.operation": "PutItem",
        "aws.remote.resource.type": "AWS::DynamoDB::Table", "aws.remote.resource.identifier": table,
        "aws.remote.resource.cfn.primary.identifier": table,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampled_create_and_a_conflict_each_send_one_datagram_the_server_span_and_the_putitem_beneath_it() {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let sent = [create(1, 1, "Fern"), create(1, 2, "Other")];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false).await;

    assert_eq!(
        (answer_status(&answers, "req-1"), answer_status(&answers, "req-2")),
        (json!(200), json!(409))
    );
    let datagrams = daemon.datagrams();
    assert_eq!(datagrams.len(), 2, "one per invocation: {datagrams:#?}");
    let request_ids = proxy.request_ids();
    for (invocation, cold, answered, error) in
        [(&sent[0], true, 200, None), (&sent[1], false, 409, Some(40901))]
    {
        let (datagram, server, calls) = of_invocation(&datagrams, &invocation.trace_id);
        assert_eq!(datagram.mark, "T1S");
        assert_eq!(
            datagram.resource,
            json!({
                "service.name": "plant-store", "telemetry.sdk.name": "plant-store", "telemetry.sdk.language": "rust",
                "telemetry.sdk.version": env!("CARGO_PKG_VERSION"), "cloud.provider": "aws",
                "cloud.platform": "aws_lambda", "cloud.region": "us-east-1", "faas.name": "plants",
                "faas.version": "1", "faas.instance": "test", "aws.log.group.names": "/aws/lambda/plants",
                "aws.local.service": "plant-store",
            })
        );
        assert_eq!((server.name.as_str(), server.flags), ("plants", 0x301));
        assert_eq!(
            attributes(&server.attributes),
            server_attributes(&invocation.id, cold, answered, error, true),
            "{}",
            invocation.id
        );
        assert_eq!(
            status(server),
            Value::Null,
            "a 409 is the client's: {}",
            invocation.id
        );

        assert_eq!(calls.len(), 1, "{calls:#?}");
        let put = calls[0];
        assert_eq!((put.name.as_str(), put.flags), ("DynamoDB.PutItem", 0x101));
        let attributes = attributes(&put.attributes);
        let request_id = attributes["aws.request_id"]
            .as_str()
            .expect("DynamoDB's request id");
        assert!(
            request_ids.iter().any(|id| id == request_id),
            "{request_id} not in {request_ids:?}"
        );
        let put_status = if answered == 200 { 200 } else { 400 };
        let mut expected = with(
            &put_attributes(&table, "us-east-1", true),
            json!({
                "aws.request_id": request_id, "retry_attempts": 0, "http.response.status_code": put_status,
            }),
        );
        if answered == 409 {
            expected = with(
                &expected,
                json!({ "error.type": "ConditionalCheckFailedException" }),
            );
            assert_eq!(
                (status(put), events(put)),
                (
                    json!([
                        2,
                        "ConditionalCheckFailedException: The conditional request failed"
                    ]),
                    json!([{ "name": "exception", "attributes": {
                        "exception.type": "ConditionalCheckFailedException",
                        "exception.message": "The conditional request failed",
                    } }])
                )
            );
        } else {
            assert_eq!((status(put), events(put)), (Value::Null, json!([])));
        }
        assert_eq!(attributes, expected, "{}", invocation.id);
    }
}

/// Every attempt meets `fault`: the client gets 503 (50301), and the
/// PutItem's span is an error whose type names what happened.
async fn put_under(fault: Fault) -> (Value, Value, Value) {
    let (table, proxy) = table_behind_a_proxy().await;
    proxy.set(fault);
    let daemon = Daemon::start();
    let sent = [create(7, 1, "Fern")];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false).await;

    assert_eq!(answer_status(&answers, "req-1"), 503, "{fault:?}");
    let datagrams = daemon.datagrams();
    let (_, server, calls) = of_invocation(&datagrams, &sent[0].trace_id);
    assert_eq!(status(server), json!([2, ""]), "a 503 is the function's fault");
    assert_eq!(
        attributes(&server.attributes),
        server_attributes("req-1", true, 503, Some(50301), true)
    );
    assert_eq!(calls.len(), 1, "{fault:?}: {calls:#?}");
    let put = calls[0];
    (attributes(&put.attributes), status(put), events(put))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_fault_is_an_error_with_dynamodbs_code_and_the_retries() {
    let (attributes, status, events) = put_under(Fault::ServerError).await;

    assert_eq!(attributes["http.response.status_code"], 500);
    assert_eq!(
        attributes["aws.request_id"], "fault-proxy-server-error",
        "the id of the answer DynamoDB (here the proxy) gave"
    );
    assert_eq!(attributes["retry_attempts"], 2, "three attempts");
    assert_eq!(attributes["error.type"], "InternalServerError");
    assert_eq!(status, json!([2, "InternalServerError: Internal server error"]));
    assert_eq!(
        events,
        json!([{ "name": "exception", "attributes": {
            "exception.type": "InternalServerError", "exception.message": "Internal server error",
        } }])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_is_an_error_whose_type_is_dynamodbs_throttling_code() {
    let (attributes, status, events) = put_under(Fault::Throttle).await;

    assert_eq!(attributes["http.response.status_code"], 400);
    assert_eq!(attributes["error.type"], "ProvisionedThroughputExceededException");
    assert_eq!(status[0], 2);
    assert_eq!(
        events[0]["attributes"]["exception.type"],
        "ProvisionedThroughputExceededException"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_timeout_is_an_error_whose_type_is_the_timeout() {
    let (attributes, status, events) = put_under(Fault::BlackHole).await;

    assert_eq!(
        attributes.get("http.response.status_code"),
        None,
        "no answer came"
    );
    assert_eq!(attributes.get("aws.request_id"), None);
    assert_eq!(attributes["error.type"], "TimeoutError");
    assert_eq!(status[0], 2);
    let message = events[0]["attributes"]["exception.message"]
        .as_str()
        .expect("a message");
    assert!(message.contains("timeout"), "{events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsampled_and_headerless_invocations_send_nothing() {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let body = |id: u32| http_event(&format!(r#"{{"id":{id},"name":"Fern"}}"#));
    let sent = [
        Invocation::new("req-unsampled", body(1)),
        Invocation::new("req-headerless", body(2)).without_trace_id(),
        // After a sampled one, a headerless one still has no trace of its own.
        Invocation::new("req-sampled", body(3)).sampled(),
        Invocation::new("req-headerless-after", body(4)).without_trace_id(),
    ];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false).await;

    for invocation in &sent {
        assert_eq!(answer_status(&answers, &invocation.id), 200, "{}", invocation.id);
    }
    assert!(sent[0].trace_id.ends_with(";Sampled=0"), "{}", sent[0].trace_id);
    let datagrams = daemon.datagrams();
    assert_eq!(
        datagrams.len(),
        1,
        "the sampled invocation's only: {datagrams:#?}"
    );
    let (datagram, _, calls) = of_invocation(&datagrams, &sent[2].trace_id);
    assert_eq!((datagram.mark.as_str(), calls.len()), ("T1S", 1));
    assert_eq!(
        proxy.recorded()[3].header("x-amzn-trace-id"),
        None,
        "the headerless invocation after a sampled one"
    );
}

/// A hundred creates, every other one sampled, served `workers` at once;
/// with Application Signals on the unsampled ones send their spans too.
async fn a_hundred_creates(workers: usize, application_signals: bool) {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let sent: Vec<Invocation> = (1..=100)
        .map(|n| {
            let invocation = Invocation::new(
                &format!("req-{n}"),
                http_event(&format!(r#"{{"id":{n},"name":"Fern {n}"}}"#)),
            );
            if n % 2 == 1 {
                invocation.sampled()
            } else {
                invocation
            }
        })
        .collect();

    let (answers, _) = serve_traced(
        &sent,
        &proxy,
        &table,
        &daemon.address,
        workers,
        application_signals,
    )
    .await;

    let datagrams = daemon.datagrams();
    let traced: Vec<&Invocation> = sent
        .iter()
        .filter(|invocation| application_signals || invocation.trace_id.ends_with("Sampled=1"))
        .collect();
    assert_eq!(datagrams.len(), traced.len(), "one per traced invocation");
    let mut request_ids = Vec::new();
    let mut cold = 0;
    for invocation in traced {
        assert_eq!(answer_status(&answers, &invocation.id), 200, "{}", invocation.id);
        let sampled = invocation.trace_id.ends_with("Sampled=1");
        let (datagram, server, calls) = of_invocation(&datagrams, &invocation.trace_id);
        assert_eq!(
            datagram.mark,
            if sampled { "T1S" } else { "T1U" },
            "{}",
            invocation.id
        );
        assert_eq!(server.flags, if sampled { 0x301 } else { 0x300 });
        let server = attributes(&server.attributes);
        cold += usize::from(server["faas.coldstart"] == true);
        assert_eq!(
            (
                &server["faas.invocation_id"],
                &server["Status"],
                &server["aws.trace.flag.sampled"]
            ),
            (&json!(invocation.id), &json!(200), &json!(sampled))
        );
        assert_eq!(calls.len(), 1, "{}: {calls:#?}", invocation.id);
        let put = attributes(&calls[0].attributes);
        assert_eq!(put["rpc.method"], "PutItem");
        request_ids.push(put["aws.request_id"].as_str().expect("a request id").to_owned());
        // The PutItem under this SERVER span is this invocation's: it
        // carried the same trace header to DynamoDB.
        let id = invocation.id.trim_start_matches("req-");
        let recorded = proxy
            .recorded()
            .into_iter()
            .find(|request| {
                serde_json::from_slice::<Value>(&request.body).is_ok_and(|body| body["Item"]["id"]["N"] == id)
            })
            .expect("the PutItem");
        assert_eq!(
            recorded.header("x-amzn-trace-id"),
            Some(invocation.trace_id.as_str())
        );
    }
    request_ids.sort();
    request_ids.dedup();
    assert_eq!(
        request_ids.len(),
        datagrams.len(),
        "each PutItem's own request id, once"
    );
    let answered = proxy.request_ids();
    assert!(
        request_ids.iter().all(|id| answered.contains(id)),
        "ids DynamoDB gave: {request_ids:?}"
    );
    assert!(cold <= 1, "one cold start per environment, if it was traced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_at_a_time_each_sampled_create_sends_its_own_datagram() {
    a_hundred_creates(1, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_at_once_each_sampled_create_sends_its_own_datagram_none_crossed_none_missing() {
    a_hundred_creates(8, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_application_signals_one_at_a_time_unsampled_creates_send_theirs_marked_t1u() {
    a_hundred_creates(1, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_application_signals_eight_at_once_every_create_sends_its_own_none_crossed() {
    a_hundred_creates(8, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_is_not_listening_changes_nothing_but_one_warning() {
    let (table, proxy) = table_behind_a_proxy().await;
    let closed = UdpSocket::bind("127.0.0.1:0").expect("a port");
    let nobody = closed.local_addr().expect("an address").to_string();
    drop(closed);
    let sent: Vec<Invocation> = (1..=4).map(|n| create(n, n as usize, "Fern")).collect();

    let (answers, lines) = serve_traced(&sent, &proxy, &table, &nobody, 1, false).await;

    for invocation in &sent {
        assert_eq!(answer_status(&answers, &invocation.id), 200, "{}", invocation.id);
    }
    let warnings: Vec<&Value> = lines
        .iter()
        .filter(|line| {
            line["message"]
                .as_str()
                .is_some_and(|message| message.contains("X-Ray daemon"))
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0]["level"], "WARN");
}

#[tokio::test]
async fn a_putitem_dropped_before_dynamodb_answered_is_still_sent_as_a_timeout() {
    let (table, proxy) = table_behind_a_proxy().await;
    proxy.set(Fault::BlackHole);
    let daemon = Daemon::start();
    let tracer = Tracer::new(daemon.address.parse().expect("an address"), "plant-store").expect("a tracer");
    let tracer: &'static Tracer = Box::leak(Box::new(tracer));
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("eu-west-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "l", "l", None, None, "t",
        ))
        .endpoint_url(proxy.url());
    let mut config = with_budgets(config).interceptor(TraceHeader);
    config.push_interceptor(AwsSubsegments::shared());
    let client = aws_sdk_dynamodb::Client::from_conf(config.build());
    let store = DynamoStore::new(client, &table);
    let plant = NewPlant::from_json(br#"{"id":1,"name":"Fern"}"#).expect("a plant");
    let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";

    // As the handler does at the invocation's deadline: gives up on the
    // store and answers, dropping the PutItem's future mid-flight.
    let cut = trace::scope_with(Some(tracer), Some(header), async {
        tokio::time::timeout(Duration::from_millis(300), store.create(&plant)).await
    })
    .await;

    assert!(cut.is_err(), "the PutItem was still waiting");
    let datagrams = daemon.datagrams();
    let (_, _, calls) = of_invocation(&datagrams, header);
    assert_eq!(calls.len(), 1);
    let put = calls[0];
    assert_eq!(put.name, "DynamoDB.PutItem");
    let timeout = "abandoned before it finished: the invocation's time ran out first";
    assert_eq!(
        attributes(&put.attributes),
        with(
            &put_attributes(&table, "eu-west-1", true),
            json!({
                "aws.local.operation": "plant-store/FunctionHandler", "error.type": "TimeoutError",
            })
        )
    );
    assert_eq!(status(put), json!([2, format!("TimeoutError: {timeout}")]));
    assert_eq!(
        events(put),
        json!([{ "name": "exception", "attributes": { "exception.type": "TimeoutError", "exception.message": timeout } }])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_daemon_address_turns_tracing_off_with_one_warning_and_the_function_serves() {
    let (table, proxy) = table_behind_a_proxy().await;
    let sent = [create(1, 1, "Fern")];

    let (answers, lines) = serve_traced(&sent, &proxy, &table, "no daemon here", 1, false).await;

    assert_eq!(answer_status(&answers, "req-1"), 200);
    let warnings: Vec<&Value> = lines.iter().filter(|line| line["level"] == "WARN").collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(
        warnings[0]["cause"],
        "AWS_XRAY_DAEMON_ADDRESS is \"no daemon here\", not host:port (or udp:host:port tcp:host:port)"
    );
}

#[tokio::test]
async fn a_jwks_fetch_a_request_waits_for_is_a_client_span_under_its_server_span() {
    let daemon = Daemon::start();
    let tracer: &'static Tracer = Box::leak(Box::new(
        Tracer::new(daemon.address.parse().expect("an address"), "plant-store").expect("a tracer"),
    ));
    let (server, verifier, token) = crate::jwt::verifier_and_token_without_scope().await;
    let authenticator = plant_store::auth::Authenticator::with_jwt(verifier);
    let mut headers = lambda_http::http::HeaderMap::new();
    headers.insert(
        "authorization",
        format!("Bearer {token}").parse().expect("a header value"),
    );
    let header = "Root=1-6920aa00-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1";

    // Nothing cached yet: the request waits for the keys, fetched in a task
    // of their own.
    let verdict = trace::scope_with(Some(tracer), Some(header), async {
        let verdict = authenticator.authenticate(&headers).await;
        trace::answered(trace::Answer {
            cold_start: false,
            status: 403,
            error: Some(40301),
            method: "POST",
            route: Some("/plants"),
            invocation_id: Some("req-1"),
            function_arn: Some(FUNCTION_ARN),
        });
        verdict
    })
    .await;

    assert!(verdict.is_err(), "the token lacks the scope: {verdict:?}");
    drop(server);
    let datagrams = daemon.datagrams();
    let (_, _, calls) = of_invocation(&datagrams, header);
    assert_eq!(calls.len(), 1, "{datagrams:#?}");
    assert_eq!(calls[0].name, "GET");
    let fetch = attributes(&calls[0].attributes);
    assert_eq!(
        (
            &fetch["server.address"],
            &fetch["aws.remote.service"],
            &fetch["http.response.status_code"]
        ),
        (&json!("127.0.0.1"), &json!("127.0.0.1"), &json!(200))
    );
    assert!(
        fetch["url.full"]
            .as_str()
            .is_some_and(|url| url.starts_with("http://127.0.0.1:")),
        "{fetch}"
    );
    assert_eq!(status(calls[0]), Value::Null);
}
