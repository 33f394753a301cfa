//! Lambda Managed Instances: with `AWS_LAMBDA_MAX_CONCURRENCY` = N the
//! function parks N `next` calls at once and answers each invocation under
//! its own ids, however their answers interleave. First the loop in this
//! process, then the built function against DynamoDB Local behind a proxy
//! that records every request the function makes of it.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};

use crate::fault_proxy::FaultProxy;
use crate::helpers::function;
use crate::helpers::{assert_item, client_for, create_table, dynamodb_local_endpoint, unique_name};
use crate::runtime_api::{http_event, lines_of, run_to_the_end};
use crate::runtime_fake::{FakeRuntimeApi, by_request_id, invocations};

const REFUSAL: &str = "refusing to start: AWS_LAMBDA_MAX_CONCURRENCY must be a positive integer: \
                       how many invocations this execution environment takes at once (unset: one)";

#[test]
fn a_max_concurrency_that_is_not_a_positive_integer_refuses_to_start_and_says_why() {
    for value in ["0", "-4", "+8", " 8", "8.0", "eight", "", "99999999999"] {
        let api = FakeRuntimeApi::start(Vec::new());

        let output = function(&api.address, dynamodb_local_endpoint())
            .env("AWS_LAMBDA_MAX_CONCURRENCY", value)
            .output()
            .expect("the function binary runs");

        assert_eq!(output.status.code(), Some(1), "{value:?}");
        let posted = api.next_post();
        assert_eq!(posted.path, "/2018-06-01/runtime/init/error", "{value:?}");
        assert_eq!(
            posted.body,
            json!({ "errorType": "Runtime.InitError", "errorMessage": REFUSAL }),
            "{value:?}"
        );
        assert!(api.nexts().is_empty(), "{value:?}: no invocation is taken");
    }
}

/// The built function, `workers` at once (unset for one), pre-warm on,
/// DynamoDB Local behind a recording proxy: every invocation's answer, log
/// line, EMF document and DynamoDB request carries that invocation's ids.
async fn check_the_built_function(workers: usize) {
    let client = client_for(dynamodb_local_endpoint());
    let table = unique_name("plants");
    create_table(&client, &table).await;
    let proxy = FaultProxy::start(dynamodb_local_endpoint()).await;
    let sent = invocations(24, |n| {
        http_event(&format!(r#"{{"id":{n},"name":"Fern {n}","tag":"t{}"}}"#, n % 5))
    });
    let api = FakeRuntimeApi::holding(sent.clone(), workers);
    let mut command = function(&api.address, &proxy.url());
    command.env("TABLE_NAME", &table).env("PLANTS_PREWARM", "1");
    if workers > 1 {
        command.env("AWS_LAMBDA_MAX_CONCURRENCY", workers.to_string());
    }

    let (api, (posted, lines)) = tokio::task::spawn_blocking(move || {
        let ran = run_to_the_end(&api, 24, command);
        (api, ran)
    })
    .await
    .expect("the function ran");

    assert_eq!(api.max_parked(), workers, "next calls parked at once");
    let answers = by_request_id(posted);
    for (n, invocation) in (1..).zip(&sent) {
        let posted = &answers[&invocation.id];
        assert!(posted.path.ends_with("/response"), "{}", posted.path);
        assert_eq!(
            posted.header("lambda-runtime-invocation-id"),
            invocation.invocation_id.as_deref()
        );
        assert_eq!(posted.body["statusCode"], 200, "{:?}", posted.body);
        assert_eq!(posted.body["headers"]["x-request-id"], invocation.id);
        let body: Value = serde_json::from_str(posted.body["body"].as_str().expect("a body")).expect("JSON");
        let tag = format!("t{}", n % 5);
        assert_eq!(body, json!({ "name": format!("Fern {n}"), "tag": tag }));
        let stored = client
            .get_item()
            .table_name(&table)
            .key("id", AttributeValue::N(n.to_string()))
            .send()
            .await
            .expect("GetItem")
            .item
            .expect("stored");
        assert_item(&stored, n, &format!("Fern {n}"), Some(&tag));

        let mine = lines_of(&lines, &invocation.id);
        assert_eq!(mine.len(), 1, "{}: {mine:#?}", invocation.id);
        assert_eq!(mine[0]["xray_trace_id"], invocation.trace_root());
        // Written inside the invocation's span, which any other line of it shares.
        assert_eq!(
            mine[0]["span"],
            json!({ "name": "invocation", "request_id": invocation.id, "xray_trace_id": invocation.trace_root() })
        );
        let documents: Vec<&Value> = lines
            .iter()
            .filter(|line| line["_aws"].is_object() && line["function_request_id"] == invocation.id)
            .collect();
        assert_eq!(documents.len(), 1, "{}", invocation.id);
        assert_eq!(documents[0]["xray_trace_id"], invocation.trace_root());
    }
    let cold: Vec<&Value> = lines.iter().filter(|line| line["cold_start"] == true).collect();
    assert_eq!(cold.len(), 1, "one cold start per environment: {cold:#?}");
    let cold_documents = lines
        .iter()
        .filter(|line| line.get("ColdStart").is_some())
        .count();
    assert_eq!(cold_documents, 1);

    // Each PutItem carries the trace header of the invocation that made it;
    // the pre-warm, made for no invocation, carries none.
    let recorded = proxy.recorded();
    let target = |request: &crate::fault_proxy::Recorded| request.header("x-amz-target").map(str::to_owned);
    let (puts, others): (Vec<_>, Vec<_>) = recorded
        .iter()
        .partition(|request| target(request).as_deref() == Some("DynamoDB_20120810.PutItem"));
    assert_eq!(puts.len(), 24, "one PutItem per invocation");
    for put in puts {
        let body: Value = serde_json::from_slice(&put.body).expect("a JSON request");
        let id: usize = body["Item"]["id"]["N"]
            .as_str()
            .and_then(|id| id.parse().ok())
            .expect("an id");
        assert_eq!(
            put.header("x-amzn-trace-id"),
            Some(sent[id - 1].trace_id.as_str()),
            "the PutItem of plant {id}"
        );
        // Set after signing: the signature never covers it.
        let authorization = put.header("authorization").expect("a signed request");
        assert!(
            authorization.contains("SignedHeaders=") && !authorization.contains("x-amzn-trace-id"),
            "{authorization}"
        );
    }
    assert_eq!(others.len(), 1, "the pre-warm: {others:?}");
    assert_eq!(
        target(others[0]).as_deref(),
        Some("DynamoDB_20120810.DescribeTable")
    );
    assert_eq!(others[0].header("x-amzn-trace-id"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_at_a_time_each_dynamodb_request_carries_its_invocations_trace_header() {
    check_the_built_function(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_at_once_each_invocation_keeps_its_own_ids_from_answer_to_log_to_dynamodb() {
    check_the_built_function(8).await;
}
