//! The built function one invocation at a time, as on classic Lambda, under
//! lambda-host's stand-in Runtime API (`runtime_fake.rs`), envelope by
//! envelope, against DynamoDB Local. `concurrency.rs` does the same with
//! several at once; lambda-host's own tests hold the loop itself.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::helpers::{
    Event, assert_item, built_function, client_for, create_table, dynamodb_local_endpoint, function,
    unique_name,
};
use crate::runtime_fake::{FakeRuntimeApi, Invocation, Posted};

pub(crate) fn http_event(body: &str) -> Value {
    let mut event: Value = serde_json::from_str(
        &std::fs::read_to_string(Event::path("create-http-api.json")).expect("the sample event"),
    )
    .expect("JSON");
    event["body"] = json!(body);
    event
}

/// The built function under the stand-in Runtime API, with JSON logs.
/// Returns what it posted (in order) and its log lines, once it has ended.
fn run_function(invocations: Vec<Invocation>, table: &str) -> (Vec<Posted>, Vec<Value>) {
    let count = invocations.len();
    let api = FakeRuntimeApi::start(invocations);
    let mut command = function(&api.address, dynamodb_local_endpoint());
    command.env("TABLE_NAME", table);
    run_to_the_end(&api, count, command)
}

/// Runs `command` (the built function under `api`) with JSON logs until it
/// ends, which it does once `api` has no invocation left; checks that it
/// answered `count` of them. Returns the answers in order of arrival and its
/// stdout lines (log lines and EMF documents), parsed.
pub(crate) fn run_to_the_end(
    api: &FakeRuntimeApi,
    count: usize,
    mut command: Command,
) -> (Vec<Posted>, Vec<Value>) {
    let output = command
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .stdin(Stdio::null())
        .output()
        .expect("the function binary runs");
    let posted: Vec<Posted> = api.posted.try_iter().collect();
    assert_eq!(
        posted.len(),
        count,
        "{posted:?}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|err| panic!("a JSON log line ({err}): {line}"))
        })
        .collect();
    (posted, lines)
}

pub(crate) fn lines_of<'a>(lines: &'a [Value], request_id: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|line| line["request_id"] == request_id)
        .collect()
}

#[tokio::test]
async fn every_envelope_gets_its_answer_from_the_built_function_with_one_log_line_each() {
    let client = client_for(dynamodb_local_endpoint());
    let table = unique_name("plants");
    create_table(&client, &table).await;
    let create = |id: i64| format!(r#"{{"id":{id},"name":"Fern"}}"#);
    let mut not_base64 = http_event(&create(1));
    not_base64["isBase64Encoded"] = json!(true);
    not_base64["body"] = json!("not base64!");
    let mut odd_host = http_event(&create(2));
    odd_host["headers"]["host"] = json!("exa mple.com");
    odd_host["headers"]["x-forwarded-proto"] = json!("not a scheme");
    odd_host["requestContext"]["domainName"] = json!("exa mple.com");
    let sqs = json!({ "Records": [{ "messageId": "1", "eventSource": "aws:sqs", "body": "{}" }] });
    let read = |file: &str| std::fs::read_to_string(Event::path(file)).expect("a sample event");
    let invocations = vec![
        Invocation::new("req-not-base64", not_base64),
        Invocation::new("req-odd-host", odd_host),
        Invocation::new("req-sqs", sqs),
        Invocation::new("req-http-api-domain", read("create-http-api-custom-domain.json")),
        Invocation::new("req-rest-api-domain", read("create-rest-api-custom-domain.json")),
    ];
    let table_for_function = table.clone();
    let invocations_for_function = invocations.clone();

    let (posted, lines) =
        tokio::task::spawn_blocking(move || run_function(invocations_for_function, &table_for_function))
            .await
            .expect("the function ran");

    let response = |index: usize| {
        let post = &posted[index];
        assert_eq!(
            post.path,
            format!(
                "/2018-06-01/runtime/invocation/{}/response",
                invocations[index].id
            )
        );
        let body: Value = serde_json::from_str(post.body["body"].as_str().expect("a body")).expect("JSON");
        // REST API answers carry their headers as multiValueHeaders.
        let request_id = match &post.body["multiValueHeaders"]["x-request-id"] {
            Value::Array(values) => values[0].clone(),
            _ => post.body["headers"]["x-request-id"].clone(),
        };
        assert_eq!(request_id, invocations[index].id, "{:?}", post.body);
        (post.body["statusCode"].as_u64().expect("a status"), body)
    };
    assert_eq!(
        response(0),
        (
            400,
            json!({ "error": 40001, "message": "request body is flagged isBase64Encoded but is not valid base64" })
        )
    );
    assert_eq!(response(1), (200, json!({ "name": "Fern" })));
    assert_eq!(posted[2].path, "/2018-06-01/runtime/invocation/req-sqs/error");
    assert_eq!(posted[2].body["errorType"], "UnsupportedEvent");
    assert!(
        posted[2].body["errorMessage"]
            .as_str()
            .is_some_and(|message| message.starts_with(
                "unsupported event: this function expects a JSON payload from Amazon API Gateway"
            )),
        "{:?}",
        posted[2].body
    );
    assert_eq!(
        response(3),
        (
            200,
            json!({ "name": "Strelitzia nicolai", "tag": "bird of paradise" })
        )
    );
    assert_eq!(
        response(4),
        (
            200,
            json!({ "name": "Zamioculcas zamiifolia", "tag": "zz plant" })
        )
    );

    for invocation in &invocations {
        let mine = lines_of(&lines, &invocation.id);
        assert_eq!(mine.len(), 1, "{}: {mine:#?}", invocation.id);
        if invocation.id != "req-sqs" {
            // The root of the trace header: the id X-Ray shows.
            let root = invocation.trace_id.trim_start_matches("Root=").split(';').next();
            assert_eq!(mine[0]["xray_trace_id"].as_str(), root, "{:#?}", mine[0]);
        }
    }
    assert_eq!(
        lines_of(&lines, "req-not-base64")[0]["envelope"],
        "body flagged isBase64Encoded is not base64"
    );
    assert_eq!(
        lines_of(&lines, "req-odd-host")[0]["envelope"],
        "Host or X-Forwarded-Proto does not form a URL"
    );
    assert_eq!(lines_of(&lines, "req-sqs")[0]["level"], "ERROR");
    assert!(
        !lines.iter().any(|line| line.to_string().contains("panicked")),
        "{lines:#?}"
    );

    let stored = |id: i64| {
        let client = client.clone();
        let table = table.clone();
        async move {
            client
                .get_item()
                .table_name(table)
                .key("id", aws_sdk_dynamodb::types::AttributeValue::N(id.to_string()))
                .send()
                .await
                .expect("GetItem")
                .item
        }
    };
    assert_eq!(stored(1).await, None, "a 400 writes nothing");
    assert_item(&stored(2).await.expect("stored"), 2, "Fern", None);
    assert_item(
        &stored(1017).await.expect("stored"),
        1017,
        "Strelitzia nicolai",
        Some("bird of paradise"),
    );
    assert_item(
        &stored(1018).await.expect("stored"),
        1018,
        "Zamioculcas zamiifolia",
        Some("zz plant"),
    );
}

#[test]
fn a_function_that_cannot_start_tells_the_runtime_api_why() {
    let api = FakeRuntimeApi::start(Vec::new());

    let output = built_function()
        .env_clear()
        .envs([
            ("AWS_LAMBDA_RUNTIME_API", api.address.as_str()),
            ("AWS_LAMBDA_FUNCTION_NAME", "plants"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
            ("AWS_LAMBDA_FUNCTION_VERSION", "1"),
            ("TABLE_NAME", "plants"),
        ])
        .output()
        .expect("the function binary runs");

    assert_eq!(output.status.code(), Some(1));
    let posted = api.next_post();
    assert_eq!(posted.path, "/2018-06-01/runtime/init/error");
    assert_eq!(posted.body["errorType"], "Runtime.InitError");
    let message = posted.body["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("refusing to start: no way to verify bearer tokens"),
        "{message}"
    );
}
