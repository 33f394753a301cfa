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
//!
//! `shape`: each span's attributes, status and events, as docs/tracing.md
//! lists them, and the check of a create's spans every other test applies
//! to every create it traces; `delivery`: which invocations send what, and
//! to whom. `key_fetch.rs`, the span of a key fetch a request waits for, is
//! compiled inside `jwt::key_cache`, whose issuer stand-in and tokens it
//! uses, with this module's daemon and checks.

mod delivery;
mod shape;

use std::collections::HashMap;

use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::helpers::function;
use crate::helpers::{client_for, create_table, dynamodb_local_endpoint, unique_name};
use crate::runtime_api::{http_event, run_to_the_end};
use crate::runtime_fake::{FUNCTION_ARN, FakeRuntimeApi, Invocation, Posted};

pub(crate) use lambda_host::test_util::daemon::{Daemon, attributes};
use lambda_host::test_util::daemon::{Datagram, hex};

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
pub(crate) fn status(span: &Span) -> Value {
    span.status
        .as_ref()
        .map_or(Value::Null, |status| json!([status.code, status.message]))
}

pub(crate) fn events(span: &Span) -> Value {
    span.events
        .iter()
        .map(|event| json!({ "name": event.name, "attributes": attributes(&event.attributes) }))
        .collect()
}

/// The datagram of the invocation whose trace header is `trace_header`: its
/// SERVER span (the remote parent the header's `Parent`) and the spans
/// beneath it, all in the one datagram.
pub(crate) fn of_invocation<'a>(
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
/// (`workers` at once), with `env` added to its variables; returns the
/// answers by request id and the log.
pub(crate) async fn serve_traced(
    sent: &[Invocation],
    proxy: &FaultProxy,
    table: &str,
    daemon: &str,
    workers: usize,
    application_signals: bool,
    env: &[(&str, &str)],
) -> (HashMap<String, Posted>, Vec<Value>) {
    let api = FakeRuntimeApi::holding(sent.to_vec(), workers);
    let mut command = function(&api.address, &proxy.url());
    command
        .env("TABLE_NAME", table)
        .env("AWS_XRAY_DAEMON_ADDRESS", daemon)
        .envs(env.iter().copied());
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

pub(crate) fn answer_status(answers: &HashMap<String, Posted>, request_id: &str) -> Value {
    answers[request_id].body["statusCode"].clone()
}

pub(crate) async fn table_behind_a_proxy() -> (String, FaultProxy) {
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
pub(crate) fn server_attributes(
    request_id: &str,
    cold: bool,
    status: u16,
    error: Option<u32>,
    sampled: bool,
) -> Value {
    let mut expected = json!({
        "faas.trigger": "http", "aws.local.service": "plants", "aws.local.operation": "plants/FunctionHandler",
        "aws.span.kind": "LOCAL_ROOT", "aws.trace.flag.sampled": sampled,
        "faas.invocation_id": request_id, "cloud.resource_id": FUNCTION_ARN, "cloud.account.id": "123456789012",
        "faas.coldstart": cold, "http.request.method": "POST", "url.path": "/plants", "http.route": "/plants",
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
        "aws.local.service": "plants", "aws.local.operation": "plants/FunctionHandler",
        "aws.span.kind": "CLIENT", "aws.trace.flag.sampled": sampled,
        "aws.remote.service": "AWS::DynamoDB", "aws.remote.operation": "PutItem",
        "aws.remote.resource.type": "AWS::DynamoDB::Table", "aws.remote.resource.identifier": table,
        "aws.remote.resource.cfn.primary.identifier": table,
    })
}

/// The resource every datagram of the built function carries, under the
/// stand-in Runtime API's Lambda variables.
/// With `POWERTOOLS_SERVICE_NAME` and `OTEL_SERVICE_NAME` unset, the
/// service is the function's name, as ADOT names it.
pub(crate) fn resource() -> Value {
    json!({
        "service.name": "plants", "telemetry.sdk.name": "lambda-host", "telemetry.sdk.language": "rust",
        "telemetry.sdk.version": host_version(), "cloud.provider": "aws",
        "cloud.platform": "aws_lambda", "cloud.region": "us-east-1", "faas.name": "plants",
        "faas.version": "1", "faas.instance": "test", "aws.log.group.names": "/aws/lambda/plants",
        "aws.local.service": "plants",
    })
}

/// lambda-host's version, which writes the spans: its manifest's.
fn host_version() -> &'static str {
    include_str!("../../../crates/lambda-host/Cargo.toml")
        .lines()
        .find_map(|line| line.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .expect("lambda-host's manifest names its version")
}
