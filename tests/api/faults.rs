//! The function under the faults real deployments meet, injected between
//! it and DynamoDB Local by the fault proxy: a client that got 200 can find
//! its plant, a client that got anything else can retry safely, and the
//! same warm function recovers without a restart. Tables are always read
//! directly from DynamoDB Local, never through the proxy.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use plant_store::plant::NewPlant;
use plant_store::store::client::{ATTEMPT_TIMEOUT, MAX_ATTEMPTS, OPERATION_TIMEOUT};
use plant_store::store::{DynamoStore, PlantStore, StoreError};
use serde_json::json;
use tokio::task::{JoinSet, spawn_blocking};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::helpers::{
    DynamoDbLocal, Event, Stop, Storage, TestApp, TestResponse, assert_item, client_for, create_table,
    dynamodb_local_endpoint, function_client_for, send, unique_name,
};

/// Comfortably under the function's 10 s timeout (template.yaml): a 503
/// that takes longer than this would reach API Gateway as a bare 504.
const WELL_WITHIN_FUNCTION_TIMEOUT: Duration = Duration::from_secs(8);
const _: () = assert!(OPERATION_TIMEOUT.as_millis() < WELL_WITHIN_FUNCTION_TIMEOUT.as_millis());
/// A fault that fails fast must fail the client fast too: on a paused
/// clock, where only timers move time, no attempt waited for its timeout
/// (the SDK's backoffs between them come to under 0.2 s).
const QUICKLY: Duration = ATTEMPT_TIMEOUT;
/// The longest the SDK can wait when every attempt hangs until its own
/// timeout and the operation's budget did not end it first.
const _: () = assert!(
    ATTEMPT_TIMEOUT.as_millis() * MAX_ATTEMPTS as u128 + 1_000 < WELL_WITHIN_FUNCTION_TIMEOUT.as_millis()
);

/// The attempts the SDK makes when each one hangs until its timeout: the
/// third starts about 4.1 s in, under an operation budget of 5 s, so
/// whether it is made at all is the scheduler's call. At least two (it
/// retried), never more than the limit.
fn assert_bounded_retries(attempts: u32) {
    assert!(
        (2..=MAX_ATTEMPTS).contains(&attempts),
        "{attempts} attempts; at most {MAX_ATTEMPTS}, each given up after {ATTEMPT_TIMEOUT:?}"
    );
}

const BODY: &str = r#"{"id":1,"name":"Monstera","tag":"aroid"}"#;

/// A DynamoDB that answers each attempt a second after its timeout.
const SLOW: Fault = Fault::Latency(Duration::from_secs(ATTEMPT_TIMEOUT.as_secs() + 1));

/// What ended the SDK's last attempt when the store gave up under `fault`,
/// writing to a table of its own, and the attempts it made: a fault that
/// only the real clock can show, where DynamoDB applies the write, is told
/// apart by what the SDK saw rather than by how long it took on a machine
/// that may be stalled.
async fn why_the_store_gave_up(
    app: &TestApp,
    proxy: &FaultProxy,
    fault: Fault,
) -> (SdkError<PutItemError, HttpResponse>, u32) {
    let table = unique_name("probe");
    create_table(&app.client, &table).await;
    proxy.set(fault);
    let requests = proxy.requests();
    let store = DynamoStore::new(function_client_for(&proxy.url()), &table);
    let plant = NewPlant::from_json(BODY.as_bytes()).expect("a plant");
    match store.create(&plant).await {
        Err(StoreError::Unavailable(cause)) => {
            let why = cause
                .downcast::<SdkError<PutItemError, HttpResponse>>()
                .expect("the SDK's own error");
            (*why, proxy.requests() - requests)
        }
        other => panic!("the store did not give up: {other:?}"),
    }
}

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

/// `timed_create` on tokio's clock, paused: time moves only by the timers
/// of the SDK (its timeouts and backoffs), never by how busy the machine
/// is. Only for faults where no request reaches DynamoDB Local, another
/// process: while one is waiting for it, the paused clock would jump to
/// the next timeout.
async fn paused_create(app: &TestApp, body: &str) -> (TestResponse, Duration) {
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let response = app.create(body).await;
    let elapsed = started.elapsed();
    tokio::time::resume();
    (response, elapsed)
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

/// `BODY`'s plant, stored exactly.
async fn assert_stored(app: &TestApp) {
    assert_item(
        &app.stored(1).await.expect("stored"),
        1,
        "Monstera",
        Some("aroid"),
    );
}

/// Creates `BODY` with every attempt meeting `fault`: the client gets the
/// contract's 503. Returns the app and its proxy, the fault still on, and
/// how long the 503 took.
async fn unavailable_under(fault: Fault) -> (TestApp, FaultProxy, Duration) {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set(fault);

    // Faults that DynamoDB Local never sees are timed on the paused clock.
    let (response, elapsed) = match fault {
        Fault::BlackHole | Fault::ResetMidRequest | Fault::Throttle | Fault::ServerError => {
            paused_create(&app, BODY).await
        }
        Fault::Pass | Fault::Latency(_) | Fault::CutAfterWrite | Fault::StallMidAnswer => {
            timed_create(&app, BODY).await
        }
    };

    assert_eq!(response.status, 503, "{fault:?}: {}", response.body);
    assert_unavailable(&response);
    (app, proxy, elapsed)
}

/// DynamoDB is healthy again: the client's retry of `BODY` gets 200 and the
/// table holds its one plant.
async fn assert_the_retry_gets_200(app: &TestApp, proxy: &FaultProxy) {
    proxy.set(Fault::Pass);
    assert_created(&app.create(BODY).await);
    assert_eq!(app.items().await.len(), 1);
}

#[tokio::test]
async fn a_dynamodb_slower_than_usual_but_within_the_attempt_timeout_still_gets_200_in_one_attempt() {
    let (app, proxy) = behind_a_proxy().await;
    proxy.set(Fault::Latency(Duration::from_millis(500)));

    let (response, elapsed) = timed_create(&app, BODY).await;

    assert_created(&response);
    assert!(elapsed >= Duration::from_millis(500), "took {elapsed:?}");
    assert_eq!(proxy.requests(), 1, "no retry was needed");
    assert_stored(&app).await;
}

#[tokio::test]
async fn a_slow_dynamodb_gets_bounded_retries_then_a_503_well_within_the_function_timeout() {
    let (app, proxy, elapsed) = unavailable_under(SLOW).await;

    assert_bounded_retries(proxy.requests());
    assert!(elapsed >= 2 * ATTEMPT_TIMEOUT, "took {elapsed:?}");
    // The slow DynamoDB did apply the first attempt: the 503 told the
    // client to retry, and the retry finds the write instead of repeating it.
    let written = app.stored(1).await.expect("the first attempt was applied");
    assert_the_retry_gets_200(&app, &proxy).await;
    assert_eq!(app.stored(1).await, Some(written), "the retry rewrote the item");

    // The SDK's own timers ended the wait, not DynamoDB's late answers:
    // within MAX_ATTEMPTS attempt timeouts, well within the function's.
    let (why, attempts) = why_the_store_gave_up(&app, &proxy, SLOW).await;
    assert!(matches!(why, SdkError::TimeoutError(_)), "{why:?}");
    assert_bounded_retries(attempts);
}

#[tokio::test]
async fn a_black_holed_dynamodb_is_a_503_within_the_operation_timeout_and_writes_nothing() {
    let (app, proxy, elapsed) = unavailable_under(Fault::BlackHole).await;

    assert_bounded_retries(proxy.requests());
    assert_eq!(proxy.forwarded(), 0);
    // On the paused clock: the attempts' timeouts, then the operation's
    // (to the timer's millisecond).
    assert!(
        elapsed >= 2 * ATTEMPT_TIMEOUT && elapsed <= OPERATION_TIMEOUT + Duration::from_millis(5),
        "took {elapsed:?}"
    );
    assert!(app.items().await.is_empty());
    assert_the_retry_gets_200(&app, &proxy).await;
    assert_stored(&app).await;
}

#[tokio::test]
async fn refused_connections_are_a_quick_503_and_the_same_warm_function_serves_200s_once_dynamodb_is_back() {
    let (app, mut proxy) = behind_a_proxy().await;
    assert_eq!(app.create(r#"{"id":1,"name":"before"}"#).await.status, 200);

    proxy.refuse().await;
    for id in [2, 3] {
        let (response, elapsed) = paused_create(&app, &format!(r#"{{"id":{id},"name":"during"}}"#)).await;
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
async fn answers_cut_off_on_every_attempt_give_a_503_and_the_clients_retry_gets_the_idempotent_200() {
    let (app, proxy, _) = unavailable_under(Fault::CutAfterWrite).await;

    assert_eq!(proxy.forwarded(), MAX_ATTEMPTS);
    let written = app.stored(1).await.expect("the first attempt was applied");
    assert_item(&written, 1, "Monstera", Some("aroid"));
    assert_the_retry_gets_200(&app, &proxy).await;
    assert_eq!(app.stored(1).await, Some(written), "the retry rewrote the item");

    // Someone else's plant under the same id is still a conflict.
    let other = app.create(r#"{"id":1,"name":"Monstera"}"#).await;
    assert_eq!((other.status, &other.body["error"]), (409, &json!(40901)));

    // Every attempt ended at its cut, none at its timeout: the 503 came as
    // soon as DynamoDB Local had answered MAX_ATTEMPTS times.
    let (why, attempts) = why_the_store_gave_up(&app, &proxy, Fault::CutAfterWrite).await;
    assert!(matches!(why, SdkError::DispatchFailure(_)), "{why:?}");
    assert_eq!(attempts, MAX_ATTEMPTS);
}

/// What lets the store turn the SDK's stalled-stream protection off
/// (`with_budgets`): the attempt timeout gives up on an answer that stops
/// coming, long before that protection's grace period would.
#[tokio::test]
async fn an_answer_that_stalls_halfway_is_given_up_at_the_attempt_timeout_and_the_clients_retry_gets_the_idempotent_200()
 {
    let (app, proxy, _) = unavailable_under(Fault::StallMidAnswer).await;

    assert_bounded_retries(proxy.forwarded());
    let written = app.stored(1).await.expect("the first attempt was applied");
    assert_item(&written, 1, "Monstera", Some("aroid"));
    assert_the_retry_gets_200(&app, &proxy).await;
    assert_eq!(app.stored(1).await, Some(written), "the retry rewrote the item");

    let (why, attempts) = why_the_store_gave_up(&app, &proxy, Fault::StallMidAnswer).await;
    assert!(matches!(why, SdkError::TimeoutError(_)), "{why:?}");
    assert_bounded_retries(attempts);
}

#[tokio::test]
async fn a_fault_on_the_first_attempt_only_is_absorbed_by_the_sdks_retry_and_writes_once() {
    // (fault, then the proxy's requests and forwarded requests)
    let cases = [
        ("a connection reset mid-request", Fault::ResetMidRequest, (2, 1)),
        // The retry meets the plant the lost attempt wrote, identical, and
        // the idempotent create turns that into the 200 the client expects.
        ("an answer cut off after the write", Fault::CutAfterWrite, (2, 2)),
        ("a throttled attempt", Fault::Throttle, (2, 1)),
    ];
    for (case, fault, attempts) in cases {
        let (app, proxy) = behind_a_proxy().await;
        proxy.set_for(1, fault);

        let response = app.create(BODY).await;

        assert_eq!(response.status, 200, "{case}: {}", response.body);
        assert_created(&response);
        assert_eq!((proxy.requests(), proxy.forwarded()), attempts, "{case}");
        assert_stored(&app).await;
        assert_eq!(app.items().await.len(), 1, "{case}");
    }
}

#[tokio::test]
async fn resets_or_throttling_on_every_attempt_are_a_quick_503_that_wrote_nothing_and_the_clients_retry_gets_200()
 {
    for fault in [Fault::ResetMidRequest, Fault::Throttle] {
        let (app, proxy, elapsed) = unavailable_under(fault).await;

        assert!(elapsed < QUICKLY, "{fault:?} took {elapsed:?}");
        assert_eq!(
            (proxy.requests(), proxy.forwarded()),
            (MAX_ATTEMPTS, 0),
            "{fault:?}"
        );
        assert!(app.items().await.is_empty(), "{fault:?}");
        assert_the_retry_gets_200(&app, &proxy).await;
        assert_stored(&app).await;
    }
}

/// What a client of the kill-and-restart stream sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// A plant under a fresh id.
    New,
    /// The identical body of a plant that already got its 200.
    Retry,
    /// Another plant under the id of one that already got its 200.
    Conflict,
    /// A body with an unknown field, under a fresh id.
    Bad,
}

#[derive(Debug)]
struct Exchange {
    sent: Sent,
    id: i64,
    name: String,
    status: u16,
    started: Instant,
}

/// The stream's clients: a fixed mix of requests, paced, until told to stop.
async fn stream(
    app: Arc<TestApp>,
    stop: Arc<AtomicBool>,
    acknowledged: Arc<Mutex<Vec<(i64, String)>>>,
) -> Vec<Exchange> {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let mut exchanges = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let earlier = {
            let acknowledged = acknowledged.lock().unwrap_or_else(PoisonError::into_inner);
            (!acknowledged.is_empty()).then(|| acknowledged[n as usize % acknowledged.len()].clone())
        };
        let (sent, id, name, body) = match (n % 10, earlier) {
            (6 | 7, Some((id, name))) => (Sent::Retry, id, name.clone(), json!({ "id": id, "name": name })),
            (8, Some((id, _))) => {
                let name = format!("conflict {n}");
                (
                    Sent::Conflict,
                    id,
                    name.clone(),
                    json!({ "id": id, "name": name }),
                )
            }
            (9, _) => {
                let name = format!("bad {n}");
                let body = json!({ "id": n, "name": name, "colour": "green" });
                (Sent::Bad, i64::from(n), name, body)
            }
            _ => {
                let name = format!("plant {n}");
                (
                    Sent::New,
                    i64::from(n),
                    name.clone(),
                    json!({ "id": n, "name": name }),
                )
            }
        };
        let started = Instant::now();
        let request = Event::load("create-http-api.json")
            .body(&body.to_string())
            .request();
        let status = send(&app.app, request).await.status;
        if sent == Sent::New && status == 200 {
            acknowledged
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((id, name.clone()));
        }
        exchanges.push(Exchange {
            sent,
            id,
            name,
            status,
            started,
        });
        // A client backs off after a 503 (Retry-After, shortened here).
        let pause = if status == 503 { 200 } else { 10 };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    exchanges
}

async fn wait_for_200s(acknowledged: &Mutex<Vec<(i64, String)>>, more: usize, what: &str) {
    let target = acknowledged.lock().unwrap_or_else(PoisonError::into_inner).len() + more;
    let deadline = Instant::now() + Duration::from_secs(30);
    while acknowledged.lock().unwrap_or_else(PoisonError::into_inner).len() < target {
        assert!(
            Instant::now() < deadline,
            "no {more} creates got 200 {what} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A well-behaved client: sends each body again after a 503, waiting as
/// `Retry-After` says, a few times at most. The restarted DynamoDB Local
/// is cold and keeps its tables in files, so it may still be slow.
async fn retry_until_answered(app: Arc<TestApp>, bodies: Vec<String>) -> Vec<(String, TestResponse)> {
    let mut answers = Vec::new();
    for body in bodies {
        let mut response = app.create(&body).await;
        for _ in 0..5 {
            if response.status != 503 {
                break;
            }
            let wait: u64 = response
                .header("retry-after")
                .and_then(|seconds| seconds.parse().ok())
                .expect("a 503 says when to retry");
            tokio::time::sleep(Duration::from_secs(wait)).await;
            response = app.create(&body).await;
        }
        answers.push((body, response));
    }
    answers
}

fn text(item: &HashMap<String, AttributeValue>, key: &str) -> String {
    item[key].as_s().expect("a string attribute").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_killed_mid_stream_and_restarted_loses_no_acknowledged_write_and_leaves_no_stray_item() {
    // Arrange: a DynamoDB Local of this test's own whose tables live in
    // files, so they outlive the crash.
    let folder = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique_name("dynamodb-files"));
    let _ = std::fs::remove_dir_all(&folder); // left by an earlier process with the same id
    std::fs::create_dir_all(&folder).expect("a folder for DynamoDB Local's files");
    let storage = Storage::Files(folder.clone());
    let start = move |port| {
        let storage = storage.clone();
        spawn_blocking(move || DynamoDbLocal::start(port, &storage).unwrap_or_else(|err| panic!("{err}")))
    };
    let local = start(0).await.expect("DynamoDB Local started");
    let (port, endpoint) = (local.port(), local.endpoint());
    let direct = client_for(&endpoint);
    let table = unique_name("plants");
    create_table(&direct, &table).await;
    let store = DynamoStore::new(function_client_for(&endpoint), &table);
    let app = Arc::new(TestApp::with_store(direct, store, table));

    // Act: four clients stream requests; DynamoDB is killed (SIGKILL, a
    // crash) in the middle, restarted on the same port and files, and the
    // stream goes on until the same warm function has served 200s again.
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let mut clients = JoinSet::new();
    for _ in 0..4 {
        clients.spawn(stream(
            Arc::clone(&app),
            Arc::clone(&stop),
            Arc::clone(&acknowledged),
        ));
    }
    wait_for_200s(&acknowledged, 30, "before the crash").await;
    spawn_blocking(move || local.stop(Stop::Kill))
        .await
        .expect("DynamoDB Local killed");
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let local = start(port).await.expect("DynamoDB Local restarted");
    let restarted = Instant::now();
    wait_for_200s(&acknowledged, 30, "after the restart").await;
    stop.store(true, Ordering::SeqCst);
    let exchanges: Vec<Exchange> = clients.join_all().await.into_iter().flatten().collect();

    // Assert: every answer is one the contract allows for what was sent...
    let count = |sent: Sent, status: u16| {
        exchanges
            .iter()
            .filter(|exchange| exchange.sent == sent && exchange.status == status)
            .count()
    };
    for exchange in &exchanges {
        let allowed: &[u16] = match exchange.sent {
            Sent::New | Sent::Retry => &[200, 503],
            Sent::Conflict => &[409, 503],
            Sent::Bad => &[400],
        };
        assert!(allowed.contains(&exchange.status), "{exchange:?}");
    }
    let during_outage = exchanges.iter().filter(|exchange| exchange.status == 503).count();
    let served_after_restart = exchanges
        .iter()
        .filter(|exchange| exchange.status == 200 && exchange.started > restarted)
        .count();
    assert!(during_outage > 0, "no request met the outage");
    assert!(served_after_restart > 0, "the function did not recover");

    // ...every plant that got a 200 is stored exactly, and every item is a
    // whole plant that a 200 or an in-doubt 503 of its own create accounts for.
    let names: HashMap<i64, &str> = exchanges
        .iter()
        .filter(|exchange| exchange.sent == Sent::New)
        .map(|exchange| (exchange.id, exchange.name.as_str()))
        .collect();
    let items = app.items().await;
    for item in &items {
        let id: i64 = item["id"]
            .as_n()
            .expect("a number id")
            .parse()
            .expect("an int64 id");
        let name = names
            .get(&id)
            .unwrap_or_else(|| panic!("no create accounts for {item:?}"));
        assert_item(item, id, name, None);
    }
    let stored: HashMap<i64, String> = items
        .iter()
        .map(|item| (item["id"].as_n().unwrap().parse().unwrap(), text(item, "name")))
        .collect();
    for exchange in &exchanges {
        match (exchange.sent, exchange.status) {
            (Sent::New | Sent::Retry, 200) => {
                assert_eq!(stored.get(&exchange.id), Some(&exchange.name), "{exchange:?}");
            }
            (Sent::Conflict, 409) => {
                assert_eq!(
                    stored.get(&exchange.id).map(String::as_str),
                    Some(names[&exchange.id])
                );
            }
            (Sent::Bad, _) => assert!(!stored.contains_key(&exchange.id), "{exchange:?}"),
            _ => {}
        }
    }

    // ...and a client that got 503 can retry safely: the retry gets 200,
    // whether or not the lost attempt had written.
    let in_doubt: HashSet<i64> = exchanges
        .iter()
        .filter(|exchange| exchange.sent == Sent::New && exchange.status == 503)
        .map(|exchange| exchange.id)
        .collect();
    let written_before_retry = in_doubt.iter().filter(|id| stored.contains_key(id)).count();
    let mut retries = JoinSet::new();
    let bodies: Vec<String> = in_doubt
        .iter()
        .map(|id| json!({ "id": id, "name": names[id] }).to_string())
        .collect();
    for client in 0..4 {
        let bodies: Vec<String> = bodies.iter().skip(client).step_by(4).cloned().collect();
        retries.spawn(retry_until_answered(Arc::clone(&app), bodies));
    }
    for (body, response) in retries.join_all().await.into_iter().flatten() {
        assert_eq!(response.status, 200, "retry of {body}: {}", response.body);
    }
    let items = app.items().await;
    assert_eq!(items.len(), names.len(), "one item per plant created");
    for item in &items {
        let id: i64 = item["id"].as_n().unwrap().parse().unwrap();
        assert_item(item, id, names[&id], None);
    }

    eprintln!(
        "kill and restart: {} requests ({} got 200, {} 409, {} 400, {during_outage} 503), \
         {} in doubt of which {written_before_retry} had been written, down {:?}",
        exchanges.len(),
        count(Sent::New, 200) + count(Sent::Retry, 200),
        count(Sent::Conflict, 409),
        count(Sent::Bad, 400),
        in_doubt.len(),
        restarted - killed,
    );
    spawn_blocking(move || local.stop(Stop::Terminate))
        .await
        .expect("DynamoDB Local stopped");
    let _ = std::fs::remove_dir_all(&folder);
}
