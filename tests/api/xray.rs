//! X-Ray subsegments, seen from the daemon's side: the built function under
//! the stand-in Runtime API, DynamoDB Local behind the fault proxy, and a
//! UDP listener where Lambda's X-Ray daemon would be. A sampled invocation
//! sends its handler's subsegment and one per DynamoDB call beneath it,
//! each with its own invocation's ids, also eight at once; an unsampled or
//! headerless one sends nothing; a daemon that is not there changes nothing
//! but one warning.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use lambda_host::trace::{self, AwsSubsegments, TraceHeader, Tracer};
use plant_store::plant::NewPlant;
use plant_store::store::{DynamoStore, PlantStore, with_budgets};
use serde_json::{Value, json};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::helpers::function;
use crate::helpers::{client_for, create_table, dynamodb_local_endpoint, unique_name};
use crate::runtime_api::{http_event, run_to_the_end};
use crate::runtime_fake::{FakeRuntimeApi, Invocation, Posted};

/// A UDP listener standing in for the X-Ray daemon: a thread receives every
/// datagram as it comes (a few hundred would overflow the socket's buffer
/// otherwise) and keeps the documents, each checked for the daemon header.
struct Daemon {
    address: String,
    documents: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Daemon {
    fn start() -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP port for the daemon");
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("a read timeout");
        let address = socket.local_addr().expect("an address").to_string();
        let (documents, stop) = (
            Arc::<Mutex<Vec<Value>>>::default(),
            Arc::new(AtomicBool::new(false)),
        );
        let (kept, stopped) = (documents.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buffer = vec![0; 65_536];
            while !stopped.load(Ordering::SeqCst) {
                let Ok(length) = socket.recv(&mut buffer) else {
                    continue;
                };
                let text = std::str::from_utf8(&buffer[..length]).expect("a UTF-8 datagram");
                let (header, document) = text.split_once('\n').expect("a header line");
                assert_eq!(header, r#"{"format":"json","version":1}"#);
                let document = serde_json::from_str(document).expect("one JSON document");
                kept.lock().unwrap_or_else(PoisonError::into_inner).push(document);
            }
        });
        Self {
            address,
            documents,
            stop,
            thread: Some(thread),
        }
    }

    /// Every document received, once the sender is done (its datagrams are
    /// in the socket's buffer by then; a moment lets the thread read them).
    fn documents(mut self) -> Vec<Value> {
        std::thread::sleep(Duration::from_millis(300));
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the daemon's thread");
        }
        std::mem::take(&mut *self.documents.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The parts of a trace header.
fn ids(trace_header: &str) -> (String, String) {
    let part = |name: &str| {
        trace_header
            .split(';')
            .find_map(|part| part.strip_prefix(name))
            .expect("the part")
            .to_owned()
    };
    (part("Root="), part("Parent="))
}

/// A document with its id and times taken out (checked: 16 hex digits, an
/// end no earlier than the start), for comparing the rest exactly.
fn without_ids_and_times(document: &Value) -> (String, Value) {
    let mut document = document.clone();
    let id = document["id"].take().as_str().expect("an id").to_owned();
    assert!(
        id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    let (start, end) = (document["start_time"].take(), document["end_time"].take());
    assert!(
        start.as_f64().expect("a start") <= end.as_f64().expect("an end"),
        "{document}"
    );
    if let Some(exception) = document.pointer_mut("/cause/exceptions/0/id") {
        assert_eq!(exception.take().as_str().map(str::len), Some(16));
    }
    (id, document)
}

/// The documents of the invocation whose trace header is `trace_header`:
/// its handler's subsegment (parented on the header's `Parent`) and the
/// subsegments parented on that one, in the order they were sent.
fn of_invocation<'a>(documents: &'a [Value], trace_header: &str) -> (&'a Value, Vec<&'a Value>) {
    let (root, parent) = ids(trace_header);
    let mine: Vec<&Value> = documents
        .iter()
        .filter(|document| document["trace_id"] == root)
        .collect();
    let handlers: Vec<&&Value> = mine
        .iter()
        .filter(|document| document["parent_id"] == parent)
        .collect();
    assert_eq!(
        handlers.len(),
        1,
        "one handler subsegment for {trace_header}: {mine:#?}"
    );
    let handler = *handlers[0];
    let calls: Vec<&Value> = mine
        .iter()
        .filter(|document| document["parent_id"] == handler["id"])
        .copied()
        .collect();
    assert_eq!(
        calls.len() + 1,
        mine.len(),
        "every document hangs from the handler's: {mine:#?}"
    );
    (handler, calls)
}

/// The built function, traced, its store behind `proxy`, serving `sent`
/// (`workers` at once); returns the answers by request id and the log.
async fn serve_traced(
    sent: &[Invocation],
    proxy: &FaultProxy,
    table: &str,
    daemon: &str,
    workers: usize,
) -> (HashMap<String, Posted>, Vec<Value>) {
    let api = FakeRuntimeApi::holding(sent.to_vec(), workers);
    let mut command = function(&api.address, &proxy.url());
    command
        .env("TABLE_NAME", table)
        .env("AWS_XRAY_DAEMON_ADDRESS", daemon);
    if workers > 1 {
        command.env("AWS_LAMBDA_MAX_CONCURRENCY", workers.to_string());
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

fn status(answers: &HashMap<String, Posted>, request_id: &str) -> Value {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampled_create_and_a_conflict_send_the_handlers_subsegment_with_the_putitem_beneath_it() {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let sent = [create(1, 1, "Fern"), create(1, 2, "Other")];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1).await;

    assert_eq!(
        (status(&answers, "req-1"), status(&answers, "req-2")),
        (json!(200), json!(409))
    );
    let documents = daemon.documents();
    assert_eq!(documents.len(), 4, "{documents:#?}");
    let request_ids = proxy.request_ids();
    for (invocation, cold, status, handler_extra, put_status, put_extra) in [
        (&sent[0], true, 200, json!({}), 200, json!({})),
        (
            &sent[1],
            false,
            409,
            json!({ "error": true }),
            400,
            json!({ "error": true, "cause": { "exceptions": [{
                "id": null, "type": "ConditionalCheckFailedException",
                "message": "The conditional request failed", "remote": true,
            }] } }),
        ),
    ] {
        let (root, parent) = ids(&invocation.trace_id);
        let (handler, calls) = of_invocation(&documents, &invocation.trace_id);
        let (handler_id, handler) = without_ids_and_times(handler);
        let mut expected = json!({
            "type": "subsegment", "id": null, "trace_id": root, "parent_id": parent, "name": "## plant-store",
            "start_time": null, "end_time": null,
            "annotations": { "ColdStart": cold, "Service": "plant-store", "Status": status },
        });
        expected
            .as_object_mut()
            .unwrap()
            .extend(handler_extra.as_object().unwrap().clone());
        if status == 409 {
            expected["annotations"]["ErrorCode"] = json!(40901);
        }
        assert_eq!(handler, expected, "{}", invocation.id);

        assert_eq!(calls.len(), 1, "{calls:#?}");
        let (_, put) = without_ids_and_times(calls[0]);
        let request_id = put["aws"]["request_id"].as_str().expect("DynamoDB's request id");
        assert!(
            request_ids.iter().any(|id| id == request_id),
            "{request_id} not in {request_ids:?}"
        );
        let mut expected = json!({
            "type": "subsegment", "id": null, "trace_id": root, "parent_id": handler_id, "name": "DynamoDB",
            "start_time": null, "end_time": null, "namespace": "aws",
            "aws": { "operation": "PutItem", "region": "us-east-1", "request_id": request_id, "table_name": table },
            "http": { "response": { "status": put_status } },
        });
        expected
            .as_object_mut()
            .unwrap()
            .extend(put_extra.as_object().unwrap().clone());
        assert_eq!(put, expected, "{}", invocation.id);
    }
}

/// Every attempt meets `fault`: the client gets 503 (50301), and the
/// PutItem's subsegment is a fault whose cause names what happened.
async fn documents_under(fault: Fault) -> (Value, Value) {
    let (table, proxy) = table_behind_a_proxy().await;
    proxy.set(fault);
    let daemon = Daemon::start();
    let sent = [create(7, 1, "Fern")];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1).await;

    assert_eq!(status(&answers, "req-1"), 503, "{fault:?}");
    let documents = daemon.documents();
    let (handler, calls) = of_invocation(&documents, &sent[0].trace_id);
    assert_eq!(handler["fault"], true, "{handler}");
    assert_eq!(
        handler["annotations"],
        json!({ "ColdStart": true, "Service": "plant-store", "Status": 503, "ErrorCode": 50301 })
    );
    assert_eq!(calls.len(), 1, "{fault:?}: {calls:#?}");
    let (_, put) = without_ids_and_times(calls[0]);
    (put.clone(), put["cause"]["exceptions"][0].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_fault_is_a_fault_with_dynamodbs_error_and_the_retries() {
    let (put, exception) = documents_under(Fault::ServerError).await;

    assert_eq!((put["fault"].clone(), put.get("error")), (json!(true), None));
    assert_eq!(put["http"], json!({ "response": { "status": 500 } }));
    assert_eq!(
        put["aws"]["request_id"], "fault-proxy-server-error",
        "the id of the answer DynamoDB (here the proxy) gave"
    );
    assert_eq!(put["aws"]["retries"], 2, "three attempts");
    assert_eq!(
        exception,
        json!({ "id": null, "type": "InternalServerError", "message": "Internal server error", "remote": true })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_is_an_error_and_a_throttle() {
    let (put, exception) = documents_under(Fault::Throttle).await;

    assert_eq!(
        (put["error"].clone(), put["throttle"].clone(), put.get("fault")),
        (json!(true), json!(true), None)
    );
    assert_eq!(put["http"]["response"]["status"], 400);
    assert_eq!(exception["type"], "ProvisionedThroughputExceededException");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_timeout_is_a_fault_whose_cause_is_the_timeout() {
    let (put, exception) = documents_under(Fault::BlackHole).await;

    assert_eq!(put["fault"], true);
    assert_eq!(put.get("http"), None, "no answer came");
    assert_eq!(put["aws"].get("request_id"), None);
    assert_eq!(exception["type"], "TimeoutError");
    assert_eq!(exception["remote"], false);
    assert!(
        exception["message"]
            .as_str()
            .is_some_and(|message| message.contains("timeout")),
        "{exception}"
    );
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

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1).await;

    for invocation in &sent {
        assert_eq!(status(&answers, &invocation.id), 200, "{}", invocation.id);
    }
    assert!(sent[0].trace_id.ends_with(";Sampled=0"), "{}", sent[0].trace_id);
    let documents = daemon.documents();
    let (root, _) = ids(&sent[2].trace_id);
    assert_eq!(
        documents.len(),
        2,
        "the sampled invocation's two only: {documents:#?}"
    );
    assert!(
        documents.iter().all(|document| document["trace_id"] == root),
        "{documents:#?}"
    );
    assert_eq!(
        proxy.recorded()[3].header("x-amzn-trace-id"),
        None,
        "the headerless invocation after a sampled one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_creates_eight_at_once_each_send_their_own_subsegments_none_crossed_none_missing() {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let sent: Vec<Invocation> = (1..=200)
        .map(|n| create(n, n as usize, &format!("Fern {n}")))
        .collect();

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 8).await;

    let documents = daemon.documents();
    assert_eq!(documents.len(), 400, "two per invocation");
    let mut request_ids = Vec::new();
    for (n, invocation) in (1..).zip(&sent) {
        assert_eq!(status(&answers, &invocation.id), 200, "{}", invocation.id);
        let (handler, calls) = of_invocation(&documents, &invocation.trace_id);
        assert_eq!(handler["annotations"]["Status"], 200, "{}", invocation.id);
        assert_eq!(calls.len(), 1, "{}: {calls:#?}", invocation.id);
        assert_eq!(calls[0]["aws"]["operation"], "PutItem");
        request_ids.push(
            calls[0]["aws"]["request_id"]
                .as_str()
                .expect("a request id")
                .to_owned(),
        );
        // The PutItem under this subsegment is this invocation's: it carried
        // the same trace header to DynamoDB.
        let id = n.to_string();
        let put = proxy
            .recorded()
            .into_iter()
            .find(|request| {
                serde_json::from_slice::<Value>(&request.body)
                    .is_ok_and(|body| body["Item"]["id"]["N"] == id.as_str())
            })
            .expect("the PutItem");
        assert_eq!(put.header("x-amzn-trace-id"), Some(invocation.trace_id.as_str()));
    }
    request_ids.sort();
    let mut answered = proxy.request_ids();
    answered.sort();
    assert_eq!(request_ids, answered, "each PutItem's own request id, once");
    let cold = documents
        .iter()
        .filter(|document| document["annotations"]["ColdStart"] == true)
        .count();
    assert_eq!(cold, 1, "one cold start per environment");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_is_not_listening_changes_nothing_but_one_warning() {
    let (table, proxy) = table_behind_a_proxy().await;
    let closed = UdpSocket::bind("127.0.0.1:0").expect("a port");
    let nobody = closed.local_addr().expect("an address").to_string();
    drop(closed);
    let sent: Vec<Invocation> = (1..=4).map(|n| create(n, n as usize, "Fern")).collect();

    let (answers, lines) = serve_traced(&sent, &proxy, &table, &nobody, 1).await;

    for invocation in &sent {
        assert_eq!(status(&answers, &invocation.id), 200, "{}", invocation.id);
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
async fn a_putitem_dropped_before_dynamodb_answered_is_sent_as_a_timeout_fault() {
    let (table, proxy) = table_behind_a_proxy().await;
    proxy.set(Fault::BlackHole);
    let listener = UdpSocket::bind("127.0.0.1:0").expect("a port");
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    let tracer = Tracer::new(listener.local_addr().expect("an address"), "plant-store").expect("a tracer");
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
    let mut buffer = [0; 65_536];
    let length = listener.recv(&mut buffer).expect("the PutItem's subsegment");
    let text = std::str::from_utf8(&buffer[..length]).expect("UTF-8");
    let (_, put) = without_ids_and_times(
        &serde_json::from_str(text.split_once('\n').expect("a header").1).expect("JSON"),
    );
    assert_eq!(
        (put["name"].clone(), put["fault"].clone(), put["aws"].clone()),
        (
            json!("DynamoDB"),
            json!(true),
            json!({ "operation": "PutItem", "region": "eu-west-1", "table_name": table })
        )
    );
    assert_eq!(
        put["cause"]["exceptions"][0],
        json!({
            "id": null, "type": "TimeoutError",
            "message": "abandoned before it finished: the invocation's time ran out first", "remote": false,
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_daemon_address_turns_tracing_off_with_one_warning_and_the_function_serves() {
    let (table, proxy) = table_behind_a_proxy().await;
    let sent = [create(1, 1, "Fern")];

    let (answers, lines) = serve_traced(&sent, &proxy, &table, "no daemon here", 1).await;

    assert_eq!(status(&answers, "req-1"), 200);
    let warnings: Vec<&Value> = lines.iter().filter(|line| line["level"] == "WARN").collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0]["message"], "X-Ray subsegments are off");
    assert_eq!(
        warnings[0]["cause"],
        "AWS_XRAY_DAEMON_ADDRESS is \"no daemon here\", not host:port (or udp:host:port tcp:host:port)"
    );
}

#[tokio::test]
async fn a_jwks_fetch_a_request_waits_for_is_a_remote_subsegment_under_its_handler() {
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
        });
        verdict
    })
    .await;

    assert!(verdict.is_err(), "the token lacks the scope: {verdict:?}");
    drop(server);
    let documents = daemon.documents();
    let handler = documents
        .iter()
        .find(|document| document["name"] == "## plant-store")
        .expect("the handler's subsegment");
    let remote: Vec<&Value> = documents
        .iter()
        .filter(|document| document["namespace"] == "remote")
        .collect();
    assert_eq!(remote.len(), 1, "{documents:#?}");
    assert_eq!(remote[0]["name"], "127.0.0.1");
    assert_eq!(remote[0]["trace_id"], "1-6920aa00-0123456789abcdef01234567");
    assert_eq!(remote[0]["parent_id"], handler["id"]);
    assert_eq!(remote[0]["http"]["response"]["status"], 200);
}
