//! The examples, built by `cargo test` and run as Lambda runs a function:
//! their own process, under the stand-in Runtime API, with the X-Ray
//! daemon's stand-in listening and, for the axum one, a stand-in DynamoDB
//! answering its SDK call. Each must answer every invocation and, for
//! those Lambda sampled, send its SERVER span with the answer's status and
//! its `tracing` spans beneath it; nothing for the others.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lambda_host::test_util::daemon::{Daemon, Datagram, attributes, hex};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use serde_json::{Value, json};

use crate::runtime_fake::{FUNCTION_ARN, FakeRuntimeApi, Invocation, Posted, by_request_id};

/// An example's binary, as `cargo build --examples` makes it (`cargo test
/// --all-targets` builds examples as test harnesses, which run no `main`).
/// The first call builds them all, once, with the cargo running these
/// tests, into its target directory and profile: `cargo test` alone is
/// enough, with no build step before it.
pub(crate) fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let tests = std::env::current_exe().expect("the test binary's path");
    let profile = tests
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let built = BUILT.get_or_init(|| build_examples(profile));
    if let Err(err) = built {
        panic!("the examples did not build: {err}");
    }
    profile.join("examples").join(name)
}

/// `cargo build -p lambda-host --examples` into the target directory and
/// profile of `profile` (`target/debug`, `target/release`, ...).
fn build_examples(profile: &Path) -> Result<(), String> {
    let target_dir = profile.parent().ok_or("no target directory")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut command = Command::new(cargo);
    command
        .args([
            "build",
            "--quiet",
            "-p",
            "lambda-host",
            "--examples",
            "--target-dir",
        ])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    match profile.file_name().and_then(|name| name.to_str()) {
        Some("debug") => {}
        Some(other) => {
            command.args(["--profile", other]);
        }
        None => return Err(format!("{} names no profile", profile.display())),
    }
    let status = command.status().map_err(|err| err.to_string())?;
    status.success().then_some(()).ok_or_else(|| status.to_string())
}

/// An HTTP API event for `GET path`.
pub(crate) fn get(path: &str) -> Value {
    let mut event: Value = serde_json::from_str(&crate::data("http-api.json")).expect("JSON");
    event["rawPath"] = json!(path);
    event["routeKey"] = json!("$default");
    event["requestContext"]["http"]["method"] = json!("GET");
    event["requestContext"]["http"]["path"] = json!(path);
    event["body"] = Value::Null;
    event
}

/// An HTTP API event for `GET path?query`.
fn get_with(path: &str, query: &[(&str, &str)]) -> Value {
    let mut event = get(path);
    let pairs: Vec<String> = query
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    event["rawQueryString"] = json!(pairs.join("&"));
    event["queryStringParameters"] = query
        .iter()
        .map(|(name, value)| (name.to_string(), json!(value)))
        .collect();
    event
}

/// Runs `name` under the stand-ins until the Runtime API ends its loop
/// (after the last invocation), with `env` added: its answers by request
/// id, and every datagram it sent.
fn run(
    name: &str,
    invocations: Vec<Invocation>,
    env: &[(&str, &str)],
) -> (HashMap<String, Posted>, Vec<Datagram>) {
    let (answers, datagrams, _) = run_reading(name, invocations, env);
    (answers, datagrams)
}

/// [`run`], with what it wrote to stdout; on Managed Instances when `env`
/// sets `AWS_LAMBDA_MAX_CONCURRENCY`, whose count of `next` calls the
/// stand-in waits for before it hands out the first invocation.
fn run_reading(
    name: &str,
    invocations: Vec<Invocation>,
    env: &[(&str, &str)],
) -> (HashMap<String, Posted>, Vec<Datagram>, String) {
    let count = invocations.len();
    let parked = env
        .iter()
        .find(|(variable, _)| *variable == "AWS_LAMBDA_MAX_CONCURRENCY")
        .map_or(1, |(_, value)| value.parse().expect("a count"));
    // Built first: the daemon's read timeout runs from its start, and the
    // first test to ask builds every example.
    let program = example(name);
    let api = FakeRuntimeApi::holding(invocations, parked);
    let daemon = Daemon::start();
    let mut child = Command::new(program)
        .env("AWS_LAMBDA_RUNTIME_API", &api.address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "orders")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_XRAY_DAEMON_ADDRESS", &daemon.address)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the example starts");
    let mut stdout = child.stdout.take().expect("its stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    while child.try_wait().expect("its status").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{name} was still running after a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let answers = by_request_id(api.posted.try_iter().collect());
    assert_eq!(
        answers.len(),
        count,
        "{name} answered every invocation: {answers:#?}"
    );
    let stdout = reader.join().expect("its stdout read");
    (answers, daemon.datagrams(), stdout)
}

/// The spans of the datagram of the trace `invocation` belongs to.
pub(crate) fn spans_of<'a>(datagrams: &'a [Datagram], invocation: &Invocation) -> Vec<&'a Span> {
    let root = invocation.trace_root().trim_start_matches("1-").replace('-', "");
    let spans: Vec<&Span> = datagrams
        .iter()
        .flat_map(|datagram| &datagram.spans)
        .filter(|span| hex(&span.trace_id) == root)
        .collect();
    assert!(!spans.is_empty(), "no span of {}: {datagrams:#?}", invocation.id);
    spans
}

pub(crate) fn named<'a>(spans: &[&'a Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|span| span.name == name)
        .copied()
        .unwrap_or_else(|| panic!("no span named {name}: {spans:#?}"))
}

pub(crate) fn server_of<'a>(spans: &[&'a Span]) -> &'a Span {
    spans
        .iter()
        .find(|span| span.kind == SpanKind::Server as i32)
        .copied()
        .unwrap_or_else(|| panic!("no SERVER span: {spans:#?}"))
}

/// A stand-in DynamoDB that answers every request with the same list of
/// tables, on a thread of its own; its endpoint URL.
fn dynamodb() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = listener.local_addr().expect("an address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("a clone"));
                let mut stream = stream;
                loop {
                    let mut length = 0;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = r#"{"TableNames":["orders","orders-archive","users"]}"#;
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n\
                         x-amzn-requestid: DDB-REQUEST-1\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{address}")
}

#[test]
fn the_hello_service_fn_answers_with_the_path_and_a_sampled_request_sends_its_server_span() {
    let sampled = Invocation::new("hello-1", get("/greeting")).sampled();
    let unsampled = Invocation::new("hello-2", get("/other"));

    let (answers, datagrams) = run("hello", vec![sampled.clone(), unsampled.clone()], &[]);

    assert_eq!(answers["hello-1"].body["body"], "hello from /greeting");
    assert_eq!(answers["hello-2"].body["body"], "hello from /other");
    assert_eq!(datagrams.len(), 1, "only the sampled one: {datagrams:#?}");
    let spans = spans_of(&datagrams, &sampled);
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let server = attributes(&server_of(&spans).attributes);
    assert_eq!(server["http.response.status_code"], 200);
    assert_eq!(server["url.path"], "/greeting");
    assert_eq!(server["faas.invocation_id"], "hello-1");
}

#[test]
fn the_axum_router_answers_and_its_instrumented_span_and_sdk_call_hang_beneath_the_server_span() {
    let endpoint = dynamodb();
    let sampled = Invocation::new("axum-1", get("/tables/orders")).sampled();
    let missing = Invocation::new("axum-2", get("/nowhere")).sampled();
    let unsampled = Invocation::new("axum-3", get("/tables/users"));

    let (answers, datagrams) = run(
        "axum",
        vec![sampled.clone(), missing.clone(), unsampled],
        &[("AWS_ENDPOINT_URL_DYNAMODB", endpoint.as_str())],
    );

    let body = |id: &str| -> Value {
        serde_json::from_str(answers[id].body["body"].as_str().expect("a body")).expect("JSON")
    };
    assert_eq!(answers["axum-1"].body["statusCode"], 200);
    assert_eq!(body("axum-1"), json!({ "tables": ["orders", "orders-archive"] }));
    assert_eq!(body("axum-3"), json!({ "tables": ["users"] }));
    assert_eq!(answers["axum-2"].body["statusCode"], 404);
    assert_eq!(datagrams.len(), 2, "the two sampled ones: {datagrams:#?}");

    let spans = spans_of(&datagrams, &sampled);
    let server = server_of(&spans);
    let tables = named(&spans, "tables");
    let call = named(&spans, "DynamoDB.ListTables");
    assert_eq!(spans.len(), 3, "{spans:#?}");
    assert_eq!(
        tables.parent_span_id, server.span_id,
        "tables beneath the SERVER span"
    );
    assert_eq!(
        call.parent_span_id, tables.span_id,
        "the SDK's call beneath tables"
    );
    assert_eq!(call.kind, SpanKind::Client as i32);
    let server_attributes = attributes(&server.attributes);
    assert_eq!(server_attributes["http.response.status_code"], 200);
    assert_eq!(server_attributes["http.route"], "/tables/{prefix}");
    assert_eq!(server_attributes["cloud.resource_id"], FUNCTION_ARN);
    let tables_attributes = attributes(&tables.attributes);
    assert_eq!(tables_attributes["prefix"], "\"orders\"");
    assert_eq!(tables_attributes["count"], 2);
    assert!(tables.start_time_unix_nano <= call.start_time_unix_nano);
    assert!(call.end_time_unix_nano <= tables.end_time_unix_nano);
    assert_eq!(attributes(&call.attributes)["aws.request_id"], "DDB-REQUEST-1");

    let spans = spans_of(&datagrams, &missing);
    assert_eq!(spans.len(), 1, "no handler ran: {spans:#?}");
    let missing_attributes = attributes(&server_of(&spans).attributes);
    assert_eq!(missing_attributes["http.response.status_code"], 404);
    assert_eq!(missing_attributes.get("http.route"), None);
}

#[test]
fn the_tower_http_trace_layer_on_the_functions_own_subscriber_sends_its_request_span_beneath_the_server_span()
{
    let sampled = Invocation::new("tower-1", get("/anything")).sampled();
    let unsampled = Invocation::new("tower-2", get("/anything"));

    let (answers, datagrams) = run("tower_trace", vec![sampled.clone(), unsampled], &[]);

    assert_eq!(answers["tower-1"].body["body"], "Success");
    assert_eq!(answers["tower-2"].body["body"], "Success");
    assert_eq!(datagrams.len(), 1, "only the sampled one: {datagrams:#?}");
    let spans = spans_of(&datagrams, &sampled);
    let server = server_of(&spans);
    let request = named(&spans, "request");
    assert_eq!(spans.len(), 2, "{spans:#?}");
    assert_eq!(request.parent_span_id, server.span_id);
    let request_attributes = attributes(&request.attributes);
    assert_eq!(request_attributes["method"], "GET");
    assert_eq!(
        request_attributes["uri"],
        "https://p7x2k9qw3m.execute-api.us-east-1.amazonaws.com/anything"
    );
    assert_eq!(attributes(&server.attributes)["http.response.status_code"], 200);
}

/// The answer's body, as JSON.
fn json_body(posted: &Posted) -> Value {
    serde_json::from_str(posted.body["body"].as_str().expect("a body")).expect("JSON")
}

/// Classic Lambda, then Managed Instances with eight at once.
const CLASSIC_AND_MANAGED: [&[(&str, &str)]; 2] = [&[], &[("AWS_LAMBDA_MAX_CONCURRENCY", "8")]];

#[test]
fn the_service_borrowing_from_main_serves_one_at_a_time_or_eight_at_once_and_traces_its_own_span() {
    for env in CLASSIC_AND_MANAGED {
        let managed = !env.is_empty();
        // Each invocation lingers long enough for the other seven to arrive
        // while it is in flight, when they are served together.
        let sent: Vec<Invocation> = (1..=8)
            .map(|n| {
                Invocation::new(
                    &format!("borrowed-{n}"),
                    get_with("/count", &[("linger", "1000")]),
                )
            })
            .map(|invocation| {
                if invocation.id == "borrowed-1" {
                    invocation.sampled()
                } else {
                    invocation
                }
            })
            .collect();

        let (answers, datagrams, _) = run_reading("borrowed", sent.clone(), env);

        let mut served: Vec<u64> = answers
            .values()
            .map(|posted| json_body(posted)["served"].as_u64().expect("a count"))
            .collect();
        served.sort_unstable();
        assert_eq!(served, (1..=8).collect::<Vec<u64>>(), "{env:?}");
        let most = answers
            .values()
            .map(|posted| json_body(posted)["most_in_flight"].as_u64().expect("a count"))
            .max();
        assert_eq!(most, Some(if managed { 8 } else { 1 }), "{env:?}");
        let spans = spans_of(&datagrams, &sent[0]);
        let server = server_of(&spans);
        let count = named(&spans, "count");
        assert_eq!(count.parent_span_id, server.span_id, "{env:?}");
        assert_eq!(attributes(&count.attributes)["linger_ms"], 1000);
    }
}

#[test]
fn the_service_that_is_not_clone_numbers_each_request_once_and_has_eight_pending_on_managed_instances() {
    for env in CLASSIC_AND_MANAGED {
        let managed = !env.is_empty();
        let sent: Vec<Invocation> = (1..=8)
            .map(|n| Invocation::new(&format!("numbered-{n}"), get_with("/", &[("linger", "1000")])))
            .collect();

        let (answers, _, _) = run_reading("not_clone", sent, env);

        let mut numbers: Vec<u64> = answers
            .values()
            .map(|posted| json_body(posted)["number"].as_u64().expect("a number"))
            .collect();
        numbers.sort_unstable();
        assert_eq!(numbers, (1..=8).collect::<Vec<u64>>(), "{env:?}");
        let most = answers
            .values()
            .map(|posted| json_body(posted)["most_pending"].as_u64().expect("a count"))
            .max();
        assert_eq!(most, Some(if managed { 8 } else { 1 }), "{env:?}");
    }
}

#[test]
fn a_subscriber_installed_first_is_kept_its_spans_are_not_traced_and_the_host_says_so_once() {
    for env in CLASSIC_AND_MANAGED {
        let sampled = Invocation::new("first-1", get("/greeting")).sampled();
        let other = Invocation::new("first-2", get("/other"));

        let (answers, datagrams, stdout) = run_reading("subscriber_first", vec![sampled.clone(), other], env);

        assert_eq!(answers["first-1"].body["body"], "hello from /greeting");
        assert_eq!(answers["first-2"].body["body"], "hello from /other");
        // Lines of lambda_http's default subscriber: its text format.
        assert!(stdout.contains("greet: greeting"), "{stdout}");
        let told: Vec<&str> = stdout
            .lines()
            .filter(|line| line.contains("Replace `lambda_http::tracing::init_default_subscriber()` with `lambda_host::logging::init_default_subscriber()`"))
            .collect();
        assert_eq!(told.len(), 1, "{env:?}: {stdout}");
        assert!(told[0].contains("WARN"), "{}", told[0]);
        let spans = spans_of(&datagrams, &sampled);
        assert_eq!(spans.len(), 1, "the SERVER span alone: {spans:#?}");
        assert_eq!(
            attributes(&server_of(&spans).attributes)["http.response.status_code"],
            200
        );
    }
}

#[test]
fn sigterm_with_eight_invocations_in_flight_answers_all_eight_then_runs_the_hook_and_exits_0() {
    let sent: Vec<Invocation> = (1..=8)
        .map(|n| Invocation::new(&format!("draining-{n}"), get_with("/", &[("linger", "250")])))
        .collect();
    let api = FakeRuntimeApi::holding(sent.clone(), 8);
    let mut child = Command::new(example("graceful"))
        .env("AWS_LAMBDA_RUNTIME_API", &api.address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "orders")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_MAX_CONCURRENCY", "8")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the example starts");
    let mut stdout = child.stdout.take().expect("its stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    while api.outstanding() < 8 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "eight invocations were never in flight"
        );
        std::thread::sleep(Duration::from_millis(2));
    }

    let signalled = std::time::SystemTime::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = loop {
        if let Some(status) = child.try_wait().expect("its status") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the example was still running a minute after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = reader.join().expect("its stdout read");

    assert_eq!(status.code(), Some(0), "{stdout}");
    let posted: Vec<Posted> = api.posted.try_iter().collect();
    let registration = posted
        .iter()
        .find(|posted| posted.path == lambda_host::test_util::runtime_api::EXTENSION_REGISTER)
        .expect("an extension registered, so that Lambda sends SIGTERM");
    assert_eq!(registration.body, json!({ "events": [] }));
    assert!(registration.header("lambda-extension-name").is_some());
    let answers = by_request_id(
        posted
            .into_iter()
            .filter(|posted| posted.path.contains("/invocation/"))
            .collect(),
    );
    for invocation in &sent {
        let answer = &answers[&invocation.id];
        assert!(answer.path.ends_with("/response"), "{answer:?}");
        assert_eq!(answer.body["body"], "answered after 250 ms");
        assert!(
            answer.arrived > signalled,
            "{} was answered before SIGTERM",
            invocation.id
        );
    }
    assert_eq!(api.nexts().len(), 8, "no next after SIGTERM");
    let drained = stdout.find("shutting down").expect("the shutdown logged");
    let hook = stdout.find("the shutdown hook ran").expect("the hook ran");
    assert!(drained < hook, "{stdout}");
}
