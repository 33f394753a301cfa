//! The function under the faults real deployments meet, injected between
//! it and DynamoDB Local by the fault proxy: a client that got 200 can find
//! its plant, a client that got anything else can retry safely, and the
//! same warm function recovers without a restart. Tables are always read
//! directly from DynamoDB Local, never through the proxy.

use std::time::{Duration, Instant};

use plant_store::store::{ATTEMPT_TIMEOUT, DynamoStore, MAX_ATTEMPTS, OPERATION_TIMEOUT};
use serde_json::json;

use crate::fault_proxy::{Fault, FaultProxy};
use crate::helpers::{TestApp, TestResponse, assert_item, dynamodb_local_endpoint, function_client_for};

/// Comfortably under the function's 10 s timeout (template.yaml): a 503
/// that takes longer than this would reach API Gateway as a bare 504.
const WELL_WITHIN_FUNCTION_TIMEOUT: Duration = Duration::from_secs(8);
/// A fault that fails fast must fail the client fast too.
const QUICKLY: Duration = Duration::from_secs(3);

const BODY: &str = r#"{"id":1,"name":"Monstera","tag":"aroid"}"#;

/// The real handler over a fresh table, its DynamoDB client going through a
/// fault proxy of its own.
async fn behind_a_proxy() -> (TestApp, FaultProxy) {
    let direct = TestApp::new().await;
    let proxy = FaultProxy::start(dynamodb_local_endpoint()).await;
    let store = DynamoStore::new(function_client_for(&proxy.url()), &direct.table);
    (TestApp::with_store(direct.client, store, direct.table), proxy)
}

async fn timed_create(app: &TestApp, body: &str) -> (TestResponse, Duration) {
    let started = Instant::now();
    let response = app.create(body).await;
    (response, started.elapsed())
}

/// The contract's answer when the store is unavailable after the retries.
fn assert_unavailable(response: &TestResponse) {
    assert_eq!(
        (response.status, &response.body),
        (
            503,
            &json!({ "error": 50301, "message": "the store is temporarily unavailable; retry later" })
        )
    );
    assert_eq!(response.header("retry-after"), Some("1"));
    response.assert_standard_headers();
}

fn assert_created(response: &TestResponse) {
    assert_eq!(
        (response.status, &response.body),
        (200, &json!({ "name": "Monstera", "tag": "aroid" }))
    );
    response.assert_standard_headers();
}

#[tokio::test]
async fn a_dynamodb_slower_than_usual_but_within_the_attempt_timeout_still_gets_200_in_one_attempt() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set(Fault::Latency(Duration::from_millis(500)));

    let (response, elapsed) = timed_create(&app, BODY).await;

    assert_created(&response);
    assert!(elapsed >= Duration::from_millis(500), "took {elapsed:?}");
    assert_eq!(proxy.requests(), 1, "no retry was needed");
    assert_item(
        &app.stored(1).await.expect("stored"),
        1,
        "Monstera",
        Some("aroid"),
    );
}

#[tokio::test]
async fn a_slow_dynamodb_gets_bounded_retries_then_a_503_well_within_the_function_timeout() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set(Fault::Latency(ATTEMPT_TIMEOUT + Duration::from_secs(1)));

    let (response, elapsed) = timed_create(&app, BODY).await;

    assert_unavailable(&response);
    assert_eq!(proxy.requests(), MAX_ATTEMPTS);
    assert!(
        elapsed >= 2 * ATTEMPT_TIMEOUT && elapsed < WELL_WITHIN_FUNCTION_TIMEOUT,
        "took {elapsed:?}; the whole operation is capped at {OPERATION_TIMEOUT:?}"
    );
    // The slow DynamoDB did apply the first attempt: the 503 told the
    // client to retry, and the retry finds the write instead of repeating it.
    let written = app.stored(1).await.expect("the first attempt was applied");
    proxy.set(Fault::Pass);
    assert_created(&app.create(BODY).await);
    assert_eq!(app.stored(1).await, Some(written), "the retry rewrote the item");
    assert_eq!(app.items().await.len(), 1);
}

#[tokio::test]
async fn a_black_holed_dynamodb_is_a_503_within_the_operation_timeout_and_writes_nothing() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set(Fault::BlackHole);

    let (response, elapsed) = timed_create(&app, BODY).await;

    assert_unavailable(&response);
    assert_eq!((proxy.requests(), proxy.forwarded()), (MAX_ATTEMPTS, 0));
    assert!(
        elapsed >= 2 * ATTEMPT_TIMEOUT && elapsed < WELL_WITHIN_FUNCTION_TIMEOUT,
        "took {elapsed:?}"
    );
    assert!(app.items().await.is_empty());

    proxy.set(Fault::Pass);
    assert_created(&app.create(BODY).await);
    assert_item(
        &app.stored(1).await.expect("stored"),
        1,
        "Monstera",
        Some("aroid"),
    );
}

#[tokio::test]
async fn refused_connections_are_a_quick_503_and_the_same_warm_function_serves_200s_once_dynamodb_is_back() {
    let (app, mut proxy) = behind_a_proxy().await;
    assert_eq!(app.create(r#"{"id":1,"name":"before"}"#).await.status, 200);

    proxy.refuse().await;
    for id in [2, 3] {
        let (response, elapsed) = timed_create(&app, &format!(r#"{{"id":{id},"name":"during"}}"#)).await;
        assert_unavailable(&response);
        assert!(elapsed < QUICKLY, "id {id} took {elapsed:?}");
    }
    assert_eq!(app.items().await.len(), 1, "a refused request wrote an item");

    let connections = proxy.connections();
    proxy.restore().await;
    for id in [2, 3, 4] {
        let response = app.create(&format!(r#"{{"id":{id},"name":"after"}}"#)).await;
        assert_eq!(response.status, 200, "id {id}: {}", response.body);
        assert_item(&app.stored(id).await.expect("stored"), id, "after", None);
    }
    assert_eq!(app.items().await.len(), 4);
    assert!(
        proxy.connections() > connections,
        "the warm client never reconnected"
    );
}

#[tokio::test]
async fn a_connection_reset_mid_request_is_retried_by_the_sdk_and_writes_once() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set_for(1, Fault::ResetMidRequest);

    let response = app.create(BODY).await;

    assert_created(&response);
    assert_eq!((proxy.requests(), proxy.forwarded()), (2, 1));
    assert_item(
        &app.stored(1).await.expect("stored"),
        1,
        "Monstera",
        Some("aroid"),
    );
    assert_eq!(app.items().await.len(), 1);
}

#[tokio::test]
async fn resets_on_every_attempt_are_a_quick_503_that_wrote_nothing_and_the_clients_retry_gets_200() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set(Fault::ResetMidRequest);

    let (response, elapsed) = timed_create(&app, BODY).await;

    assert_unavailable(&response);
    assert!(elapsed < QUICKLY, "took {elapsed:?}");
    assert_eq!((proxy.requests(), proxy.forwarded()), (MAX_ATTEMPTS, 0));
    assert!(app.items().await.is_empty());

    proxy.set(Fault::Pass);
    assert_created(&app.create(BODY).await);
    assert_eq!(app.items().await.len(), 1);
}

#[tokio::test]
async fn an_answer_cut_off_after_the_write_is_recovered_by_the_sdks_retry_as_an_idempotent_200() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set_for(1, Fault::CutAfterWrite);

    let response = app.create(BODY).await;

    // The retry met the plant the lost attempt had written, identical, and
    // the idempotent create turned that into the 200 the client expects.
    assert_created(&response);
    assert_eq!(proxy.forwarded(), 2);
    assert_item(
        &app.stored(1).await.expect("stored"),
        1,
        "Monstera",
        Some("aroid"),
    );
    assert_eq!(app.items().await.len(), 1);
}

#[tokio::test]
async fn answers_cut_off_on_every_attempt_give_a_503_and_the_clients_retry_gets_the_idempotent_200() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set(Fault::CutAfterWrite);

    let (response, elapsed) = timed_create(&app, BODY).await;

    assert_unavailable(&response);
    assert!(elapsed < QUICKLY, "took {elapsed:?}");
    assert_eq!(proxy.forwarded(), MAX_ATTEMPTS);
    let written = app.stored(1).await.expect("the first attempt was applied");
    assert_item(&written, 1, "Monstera", Some("aroid"));

    proxy.set(Fault::Pass);
    assert_created(&app.create(BODY).await);
    assert_eq!(app.stored(1).await, Some(written), "the retry rewrote the item");
    assert_eq!(app.items().await.len(), 1);

    // Someone else's plant under the same id is still a conflict.
    let other = app.create(r#"{"id":1,"name":"Monstera"}"#).await;
    assert_eq!((other.status, &other.body["error"]), (409, &json!(40901)));
}

#[tokio::test]
async fn throttling_gets_the_sdks_bounded_retries_then_a_503_with_retry_after() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set(Fault::Throttle);

    let (response, elapsed) = timed_create(&app, BODY).await;

    assert_unavailable(&response);
    assert!(elapsed < QUICKLY, "took {elapsed:?}");
    assert_eq!((proxy.requests(), proxy.forwarded()), (MAX_ATTEMPTS, 0));
    assert!(app.items().await.is_empty());

    proxy.set(Fault::Pass);
    assert_created(&app.create(BODY).await);
    assert_eq!(app.items().await.len(), 1);
}

#[tokio::test]
async fn a_single_throttled_attempt_is_absorbed_by_the_sdks_retry() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set_for(1, Fault::Throttle);

    let response = app.create(BODY).await;

    assert_created(&response);
    assert_eq!((proxy.requests(), proxy.forwarded()), (2, 1));
    assert_eq!(app.items().await.len(), 1);
}
