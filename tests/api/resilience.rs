//! The built function under faults, one invocation at a time and eight at
//! once (Lambda Managed Instances): a store that hangs past the deadline, a
//! Runtime API that fails a call or cannot be reached, hostile envelopes.
//! Each fault costs at most the invocation it hits: every other invocation
//! is answered, and every worker is back on `next` soon after; or, when the
//! Runtime API stays unreachable, the process exits non-zero so that Lambda
//! replaces the environment.
//!
//! The tests wait for what the stand-in Runtime API sees (an answer, a
//! refusal, workers parked on `next`, the process's exit), each bounded by
//! a limit only a hang comes near. That an answer came before its deadline
//! is not judged by the clock of a machine that may be busy, which can
//! only make an answer later: what is checked is what a stall cannot
//! change. The answer is the handler's 503 (50302), not the loop's
//! backstop, so the handler's cut came first; and it reached the Runtime
//! API no earlier than [`RESPONSE_MARGIN`] before the deadline, so the
//! handler waited for the store as long as its margin allows. That the
//! handler's cut comes before the loop's, and the loop's before the
//! deadline, is lambda-host's deadline.rs's to hold (at compile time, and
//! on an injected clock).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lambda_host::deadline::RESPONSE_MARGIN;
use serde_json::{Value, json};

use crate::helpers::{Event, client_for, create_table, dynamodb_local_endpoint, unique_name};
use crate::helpers::{NOBODY, function};
use crate::runtime_api::http_event;
use crate::runtime_fake::{FakeRuntimeApi, Fault, Invocation, Posted, answer_for};

/// How long a test waits for what must happen by itself before it fails:
/// only a hang comes near it.
const HANG: Duration = Duration::from_secs(30);

/// The built function under `api`, `workers` at once, with JSON logs.
fn start(api: &FakeRuntimeApi, dynamodb: &str, table: &str, workers: usize) -> Child {
    let mut command = function(&api.address, dynamodb);
    command
        .env("TABLE_NAME", table)
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("AWS_LAMBDA_MAX_CONCURRENCY", workers.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.spawn().expect("the function binary runs")
}

/// Closes the stand-in, which ends the function; its exit and its lines.
fn finish(api: &FakeRuntimeApi, function: Child) -> (Output, Vec<Value>) {
    api.close();
    let output = wait_at_most(function, HANG);
    let lines = json_lines(&output);
    (output, lines)
}

/// The process's output once it has exited, which must be `within`.
fn wait_at_most(mut function: Child, within: Duration) -> Output {
    let started = Instant::now();
    while function.try_wait().expect("the function's status").is_none() {
        if started.elapsed() > within {
            let _ = function.kill();
            panic!("the function was still running after {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    function.wait_with_output().expect("the function's output")
}

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("a JSON line ({err}): {line}")))
        .collect()
}

/// The next `count` answers, whatever their order.
fn answers(api: &FakeRuntimeApi, count: usize) -> Vec<Posted> {
    (0..count).map(|_| api.next_post()).collect()
}

/// The next answer posted, or `None` once an answer is refused with a 4xx
/// (Lambda is done with that invocation: it is never sent again) beyond the
/// `refused_before` refusals there were.
fn answer_or_final_refusal(api: &FakeRuntimeApi, refused_before: usize) -> Option<Posted> {
    let started = Instant::now();
    loop {
        if let Ok(posted) = api.posted.try_recv() {
            return Some(posted);
        }
        let refused = api.refused();
        if refused[refused_before..]
            .iter()
            .any(|(_, fault)| matches!(fault, Fault::Status(400..500)))
        {
            return None;
        }
        assert!(
            started.elapsed() < HANG,
            "neither an answer nor a refusal after {HANG:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The `Error` body of a front door response.
fn error_body(posted: &Posted) -> Value {
    serde_json::from_str(posted.body["body"].as_str().expect("a body")).expect("a JSON body")
}

fn create(id: i64) -> Value {
    http_event(&format!(r#"{{"id":{id},"name":"Fern {id}"}}"#))
}

/// A DynamoDB that takes connections and requests and never answers.
struct HangingStore {
    url: String,
    _held: Arc<Mutex<Vec<TcpStream>>>,
}

impl HangingStore {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let held = Arc::new(Mutex::new(Vec::new()));
        let keep = held.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                keep.lock().expect("the held connections").push(stream);
            }
        });
        Self { url, _held: held }
    }
}

fn a_store_that_hangs_past_the_deadline_gets_the_handlers_503_at_its_cut_and_frees_every_worker(
    workers: usize,
) {
    let store = HangingStore::start();
    let api = FakeRuntimeApi::open(Vec::new());
    let function = start(&api, &store.url, "plants", workers);
    assert!(
        api.wait_until_parked(workers, HANG).is_some(),
        "{workers} workers on next"
    );

    let sent: Vec<Invocation> = (0..workers)
        .map(|n| {
            Invocation::new(&format!("hang-{workers}-{n}"), create(7000 + n as i64))
                .due_in(Duration::from_millis(500))
        })
        .collect();
    for invocation in &sent {
        api.push(invocation.clone());
    }
    let answered = answers(&api, workers);
    let back = api.wait_until_parked(workers, HANG);
    let (_, lines) = finish(&api, function);

    for invocation in &sent {
        let posted = answer_for(&answered, invocation);
        // The handler's own answer, not the loop's backstop.
        assert!(posted.path.ends_with("/response"), "{}", posted.path);
        // Not before the handler's cut: a timer never ends early.
        let ahead_ms = posted.ahead_of_deadline_ms(invocation);
        assert!(
            ahead_ms <= i128::try_from(RESPONSE_MARGIN.as_millis()).expect("fits"),
            "{}: answered {ahead_ms} ms before its deadline, more than the handler's margin",
            invocation.id
        );
        assert_eq!(posted.body["statusCode"], 503);
        assert_eq!(posted.body["headers"]["retry-after"], "1");
        assert_eq!(posted.body["headers"]["x-request-id"], invocation.id);
        assert_eq!(
            error_body(posted),
            json!({ "error": 50302, "message": "the request could not be completed in time; retry it (a retry of the same create is safe)" })
        );
        let logged: Vec<&Value> = lines
            .iter()
            .filter(|line| {
                line["span"]["request_id"] == invocation.id.as_str()
                    || line["request_id"] == invocation.id.as_str()
            })
            .collect();
        assert!(
            logged
                .iter()
                .any(|line| line["message"] == "request" && line["status"] == 503 && line["error"] == 50302),
            "{logged:?}"
        );
        assert!(
            logged.iter().any(|line| line["message"] == "request failed"
                && line["cause"] == "the invocation's deadline came before DynamoDB answered"),
            "{logged:?}"
        );
        assert!(
            lines
                .iter()
                .any(|line| line["function_request_id"] == invocation.id.as_str()
                    && line["DeadlineExceeded"] == 1),
            "an EMF document counts it"
        );
    }
    assert!(back.is_some(), "all {workers} workers back on next");
}

#[test]
fn one_at_a_time_a_store_that_hangs_past_the_deadline_gets_the_handlers_503_at_its_cut_and_frees_the_worker()
{
    a_store_that_hangs_past_the_deadline_gets_the_handlers_503_at_its_cut_and_frees_every_worker(1);
}

#[test]
fn eight_at_once_a_store_that_hangs_past_the_deadline_gets_the_handlers_503s_at_their_cut_and_frees_every_worker()
 {
    a_store_that_hangs_past_the_deadline_gets_the_handlers_503_at_its_cut_and_frees_every_worker(8);
}

async fn runtime_api_faults_cost_at_most_one_answer_and_every_worker_serves_on(workers: usize) {
    let client = client_for(dynamodb_local_endpoint());
    let table = unique_name("plants");
    create_table(&client, &table).await;
    let api = FakeRuntimeApi::open(Vec::new());
    // The first two `next` calls fail, then the first invocation's answer
    // (500) and the second's (410).
    api.fail_next(Fault::Status(500));
    api.fail_next(Fault::Drop);
    api.fail_answer(Fault::Status(500));
    let function = start(&api, dynamodb_local_endpoint(), &table, workers);

    let sent: Vec<Invocation> = (0..8)
        .map(|n| Invocation::new(&format!("faults-{workers}-{n}"), create(8000 + n)))
        .collect();
    // One at a time, so that the two answer faults hit the first two: each
    // is pushed once the one before has its answer, or its final refusal.
    let mut answered = Vec::new();
    let mut unanswered = Vec::new();
    for (n, invocation) in sent.iter().enumerate() {
        if n == 1 {
            api.fail_answer(Fault::Status(410));
        }
        let refused_before = api.refused().len();
        api.push(invocation.clone());
        match answer_or_final_refusal(&api, refused_before) {
            Some(posted) => answered.push(posted),
            None => unanswered.push(invocation.id.clone()),
        }
    }
    let back = api.wait_until_parked(workers, HANG);
    let (output, lines) = finish(&api, function);
    // Whatever it posted before it exited: a refused answer sent again
    // would be here.
    answered.extend(api.posted.try_iter());

    let refused = api.refused();
    assert_eq!(
        refused.iter().map(|(_, fault)| *fault).collect::<Vec<_>>(),
        [Fault::Status(500), Fault::Status(410)],
        "{refused:?}"
    );
    // The answer refused with 500 was sent again; the one refused with 410
    // was not, and the worker took the next invocation.
    assert!(refused[0].0.contains(&sent[0].id), "{refused:?}");
    assert!(refused[1].0.contains(&sent[1].id), "{refused:?}");
    assert_eq!(unanswered, [sent[1].id.clone()]);
    assert!(
        answered.iter().all(|posted| posted.request_id() != sent[1].id),
        "the answer refused with 410 was sent again"
    );
    assert!(
        lines
            .iter()
            .any(|line| line["level"] == "WARN" && line["span"]["request_id"] == sent[1].id.as_str()),
        "the 410 is logged with its invocation"
    );
    for invocation in sent.iter().filter(|invocation| invocation.id != sent[1].id) {
        let posted = answer_for(&answered, invocation);
        assert_eq!(posted.body["statusCode"], 200, "{posted:?}");
    }
    assert!(back.is_some(), "all {workers} workers back on next");
    // Closed, the stand-in answers every `next` 403: not retried, the end.
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn one_at_a_time_runtime_api_faults_cost_at_most_one_answer_and_the_worker_serves_on() {
    runtime_api_faults_cost_at_most_one_answer_and_every_worker_serves_on(1).await;
}

#[tokio::test]
async fn eight_at_once_runtime_api_faults_cost_at_most_one_answer_and_every_worker_serves_on() {
    runtime_api_faults_cost_at_most_one_answer_and_every_worker_serves_on(8).await;
}

fn an_unreachable_runtime_api_ends_the_process_non_zero_promptly(workers: usize) {
    let mut command = function(NOBODY, "http://127.0.0.1:9");
    command
        .env("AWS_LAMBDA_MAX_CONCURRENCY", workers.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let function = command.spawn().expect("the function runs");

    assert_exits_non_zero(function, "Error:");
}

/// The calls one worker makes before it gives up on the Runtime API: the
/// first and its five retries (lambda-host's `RETRY_PAUSES`, 0.8 s in all).
const CALLS_BEFORE_GIVING_UP: usize = 6;

/// The process ends on its own (a process that kept retrying would still
/// be running at `HANG`, and be killed), non-zero, and its standard error
/// says why (`cause`).
fn assert_exits_non_zero(function: Child, cause: &str) {
    let output = wait_at_most(function, HANG);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(cause), "the cause is written: {stderr}");
}

#[test]
fn one_at_a_time_an_unreachable_runtime_api_ends_the_process_non_zero_promptly() {
    an_unreachable_runtime_api_ends_the_process_non_zero_promptly(1);
}

#[test]
fn eight_at_once_an_unreachable_runtime_api_ends_the_process_non_zero_promptly() {
    an_unreachable_runtime_api_ends_the_process_non_zero_promptly(8);
}

fn a_runtime_api_that_keeps_failing_next_ends_the_process_non_zero_promptly(workers: usize) {
    let api = FakeRuntimeApi::open(Vec::new());
    for _ in 0..10 * workers {
        api.fail_next(Fault::Status(500));
    }
    let function = start(&api, "http://127.0.0.1:9", "plants", workers);

    assert_exits_non_zero(function, "the Runtime API answered 500");
    // It gave up after its retries, not because a clock ran out: the first
    // worker to give up made all its calls, and no worker made more.
    let nexts = api.nexts().len();
    assert!(
        (CALLS_BEFORE_GIVING_UP..=CALLS_BEFORE_GIVING_UP * workers).contains(&nexts),
        "{nexts} calls of next from {workers} workers, of the {} failures queued",
        10 * workers
    );
}

#[test]
fn one_at_a_time_a_runtime_api_that_keeps_failing_next_ends_the_process_non_zero_promptly() {
    a_runtime_api_that_keeps_failing_next_ends_the_process_non_zero_promptly(1);
}

#[test]
fn eight_at_once_a_runtime_api_that_keeps_failing_next_ends_the_process_non_zero_promptly() {
    a_runtime_api_that_keeps_failing_next_ends_the_process_non_zero_promptly(8);
}

/// The events of docs/upstream/lambda-http-conversion-panics.md, which made
/// `lambda_http`'s conversion panic: every JSON block of that page.
fn documented_hostile_envelopes() -> Vec<String> {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/upstream/lambda-http-conversion-panics.md"
    ))
    .expect("the upstream report");
    let blocks: Vec<String> = page
        .split("```json")
        .skip(1)
        .map(|block| block.split("```").next().unwrap_or_default().trim().to_owned())
        .collect();
    assert!(blocks.len() >= 8, "the report's events: {}", blocks.len());
    blocks
}

/// An HTTP API event with one header name more than lambda-host's envelope
/// takes (past 24,576, `aws_lambda_events`' header reader panics).
fn too_many_headers() -> String {
    let mut event = create(9001);
    let headers = event["headers"].as_object_mut().expect("headers");
    for n in 0..=lambda_host::envelope::MAX_HEADER_NAMES {
        headers.insert(format!("x-h{n}"), json!("v"));
    }
    event.to_string()
}

async fn hostile_envelopes_cost_only_their_own_invocation(workers: usize) {
    let client = client_for(dynamodb_local_endpoint());
    let table = unique_name("plants");
    create_table(&client, &table).await;
    let mut payloads: Vec<(String, String)> = documented_hostile_envelopes()
        .into_iter()
        .enumerate()
        .map(|(n, event)| (format!("documented {n}"), event))
        .collect();
    payloads.extend([
        ("not JSON".to_owned(), "this is not JSON".to_owned()),
        ("empty".to_owned(), String::new()),
        (
            "6 MB body".to_owned(),
            Event::load("create-http-api.json")
                .body(&"x".repeat(6 * 1024 * 1024))
                .text(),
        ),
        ("100,000 nested [".to_owned(), "[".repeat(100_000)),
        ("16,385 header names".to_owned(), too_many_headers()),
    ]);
    let hostile: Vec<(String, Invocation)> = payloads
        .into_iter()
        .enumerate()
        .map(|(n, (name, payload))| (name, Invocation::new(&format!("hostile-{workers}-{n}"), payload)))
        .collect();
    let valid = Invocation::new(&format!("valid-{workers}"), create(9000));
    let api = FakeRuntimeApi::open(hostile.iter().map(|(_, invocation)| invocation.clone()).collect());
    let function = start(&api, dynamodb_local_endpoint(), &table, workers);

    let answered = answers(&api, hostile.len());
    api.push(valid.clone());
    let created = api.next_post();
    let back = api.wait_until_parked(workers, HANG);
    let (output, _) = finish(&api, function);

    let mut outcomes = Vec::new();
    for (name, invocation) in &hostile {
        let posted = answer_for(&answered, invocation);
        let outcome = if posted.path.ends_with("/error") {
            posted.body["errorType"]
                .as_str()
                .expect("an error type")
                .to_owned()
        } else {
            format!("{} {}", posted.body["statusCode"], error_body(posted)["error"])
        };
        outcomes.push((name.as_str(), outcome));
    }
    assert_eq!(
        outcomes,
        [
            ("documented 0", "401 40101".to_owned()),
            ("documented 1", "401 40101".to_owned()),
            ("documented 2", "401 40101".to_owned()),
            ("documented 3", "401 40101".to_owned()),
            ("documented 4", "401 40101".to_owned()),
            ("documented 5", "401 40101".to_owned()),
            ("documented 6", "404 40401".to_owned()),
            ("documented 7", "404 40401".to_owned()),
            ("documented 8", "401 40101".to_owned()),
            ("not JSON", "UnsupportedEvent".to_owned()),
            ("empty", "UnsupportedEvent".to_owned()),
            ("6 MB body", "413 41301".to_owned()),
            ("100,000 nested [", "UnsupportedEvent".to_owned()),
            ("16,385 header names", "UnsupportedEvent".to_owned()),
        ]
    );
    assert_eq!(answer_for(&[created], &valid).body["statusCode"], 200);
    assert!(back.is_some(), "all {workers} workers back on next");
    assert_eq!(output.status.code(), Some(1), "alive until the stand-in closed");
}

#[tokio::test]
async fn one_at_a_time_hostile_envelopes_cost_only_their_own_invocation() {
    hostile_envelopes_cost_only_their_own_invocation(1).await;
}

#[tokio::test]
async fn eight_at_once_hostile_envelopes_cost_only_their_own_invocation() {
    hostile_envelopes_cost_only_their_own_invocation(8).await;
}

#[test]
fn the_tenant_id_is_on_every_log_record_of_its_invocation_and_no_other() {
    let tenant = Invocation::new("for-a-tenant", http_event("not json")).for_tenant("tenant-42");
    let other = Invocation::new("for-no-tenant", http_event("not json"));
    let api = FakeRuntimeApi::open(vec![tenant.clone(), other.clone()]);
    let function = start(&api, "http://127.0.0.1:9", "plants", 1);
    answers(&api, 2);
    let (_, lines) = finish(&api, function);

    let of = |id: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|line| line["request_id"] == id || line["span"]["request_id"] == id)
            .collect()
    };
    let tenant_lines = of(&tenant.id);
    assert!(!tenant_lines.is_empty());
    for line in &tenant_lines {
        assert_eq!(line["span"]["tenant_id"], "tenant-42", "{line}");
    }
    let request_line = tenant_lines
        .iter()
        .find(|line| line["message"] == "request")
        .expect("the request line");
    assert_eq!(request_line["tenant_id"], "tenant-42");
    for line in of(&other.id) {
        assert_eq!(line.get("tenant_id"), None, "{line}");
        assert_eq!(line["span"].get("tenant_id"), None, "{line}");
    }
}
