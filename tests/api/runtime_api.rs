//! The invocation loop (`src/runtime.rs`) against a stand-in for the Lambda
//! Runtime API, speaking its contract: `GET …/invocation/next` with the
//! request id, deadline, function ARN and trace id headers; `POST
//! …/{id}/response`, `…/{id}/error` and `…/init/error`. First the loop
//! itself, in this process, with a handler that records what it was given;
//! then the built function, envelope by envelope, against DynamoDB Local.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_http::http::Uri;
use lambda_http::lambda_runtime::Config as FunctionConfig;
use lambda_http::{Body, Context, RequestExt, Response};
use plant_store::auth::StaticTokens;
use plant_store::runtime::{self, RuntimeApi};
use serde_json::{Value, json};

use crate::helpers::{
    DEV_TOKEN, Event, assert_item, client_for, create_table, dynamodb_local_endpoint, unique_name,
};

/// The ARN the stand-in gives as the invoked function's.
pub(crate) const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:plants";
/// An X-Ray trace header as Lambda sends it, for tests that need one fixed.
pub(crate) const TRACE_HEADER: &str =
    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";

/// One event as the Runtime API hands it out.
#[derive(Clone)]
struct Invocation {
    id: String,
    event: String,
    trace_id: String,
    deadline_ms: Option<u64>,
}

impl Invocation {
    fn new(id: &str, event: impl ToString) -> Self {
        Self {
            id: id.to_owned(),
            event: event.to_string(),
            trace_id: format!("Root=1-6920aa00-{:024x};Sampled=0", fxhash(id)),
            deadline_ms: Some(4_102_444_800_000),
        }
    }

    fn without_deadline(mut self) -> Self {
        self.deadline_ms = None;
        self
    }
}

fn fxhash(text: &str) -> u128 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u128::from(byte)).wrapping_mul(0x1000_0000_01b3)
    })
}

/// What the function posted: path, headers (lower-case names), JSON body.
#[derive(Debug)]
pub(crate) struct Posted {
    path: String,
    headers: HashMap<String, String>,
    body: Value,
}

/// A Runtime API on loopback. Once its events are all handed out it answers
/// `next` with a 500, which ends the loop (and the function's process).
struct FakeRuntimeApi {
    address: String,
    posted: Receiver<Posted>,
}

impl FakeRuntimeApi {
    fn start(invocations: Vec<Invocation>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the Runtime API");
        let address = listener.local_addr().expect("an address").to_string();
        let queue = Arc::new(Mutex::new(VecDeque::from(invocations)));
        let (sender, posted) = channel();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (queue, sender) = (queue.clone(), sender.clone());
                std::thread::spawn(move || serve(stream, queue, sender));
            }
        });
        Self { address, posted }
    }

    fn uri(&self) -> Uri {
        format!("http://{}", self.address).parse().expect("a URI")
    }

    fn next_post(&self) -> Posted {
        self.posted
            .recv_timeout(Duration::from_secs(30))
            .expect("the function posted within 30 s")
    }
}

fn serve(stream: TcpStream, queue: Arc<Mutex<VecDeque<Invocation>>>, posted: Sender<Posted>) {
    let mut reader = BufReader::new(stream.try_clone().expect("a socket"));
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("a header line");
            if line.trim_end().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let length = headers
            .get("content-length")
            .map_or(0, |value| value.parse().expect("a length"));
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("a body");
        let path = request_line.split(' ').nth(1).unwrap_or_default().to_owned();

        if request_line.starts_with("GET") {
            assert_eq!(path, "/2018-06-01/runtime/invocation/next");
            let next = queue.lock().expect("the queue").pop_front();
            let Some(invocation) = next else {
                let _ = write!(
                    writer,
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"
                );
                return;
            };
            let deadline = invocation
                .deadline_ms
                .map(|ms| format!("Lambda-Runtime-Deadline-Ms: {ms}\r\n"))
                .unwrap_or_default();
            write!(
                writer,
                "HTTP/1.1 200 OK\r\nLambda-Runtime-Aws-Request-Id: {}\r\n{deadline}\
                 Lambda-Runtime-Invoked-Function-Arn: {FUNCTION_ARN}\r\nLambda-Runtime-Trace-Id: {}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
                invocation.id,
                invocation.trace_id,
                invocation.event.len(),
                invocation.event
            )
            .expect("an answer");
        } else {
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let _ = posted.send(Posted { path, headers, body });
            const ACCEPTED: &str = r#"{"status":"OK"}"#;
            write!(
                writer,
                "HTTP/1.1 202 Accepted\r\nContent-Length: {}\r\n\r\n{ACCEPTED}",
                ACCEPTED.len()
            )
            .expect("an answer");
        }
    }
}

/// Starts a stand-in Runtime API that hands out `events` (request id,
/// event JSON) in order, each with `TRACE_HEADER`; returns its address and
/// what the function posts back.
pub(crate) fn runtime_api(events: Vec<(String, String)>) -> (String, Receiver<Posted>) {
    let api = FakeRuntimeApi::start(
        events
            .into_iter()
            .map(|(id, event)| Invocation {
                trace_id: TRACE_HEADER.to_owned(),
                ..Invocation::new(&id, event)
            })
            .collect(),
    );
    (api.address, api.posted)
}

/// The built function as Lambda starts it, under `runtime_api`, its store
/// at `dynamodb`, accepting `DEV_TOKEN`. Nothing but this environment.
pub(crate) fn function(runtime_api: &str, dynamodb: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_plant-store"));
    command.env_clear().envs([
        ("AWS_LAMBDA_RUNTIME_API", runtime_api),
        ("AWS_LAMBDA_FUNCTION_NAME", "plants"),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
        ("AWS_LAMBDA_FUNCTION_VERSION", "1"),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/plants"),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "local"),
        ("AWS_SECRET_ACCESS_KEY", "local"),
        ("AWS_ENDPOINT_URL_DYNAMODB", dynamodb),
        ("TABLE_NAME", "plants"),
        ("PLANTS_TOKEN_SHA256", &StaticTokens::digest_hex(DEV_TOKEN)),
        ("PLANTS_PREWARM", "0"),
    ]);
    command
}

fn function_config() -> FunctionConfig {
    FunctionConfig {
        function_name: "plants".to_owned(),
        memory: 128,
        version: "7".to_owned(),
        ..FunctionConfig::default()
    }
}

fn http_event(body: &str) -> Value {
    let mut event: Value = serde_json::from_str(
        &std::fs::read_to_string(Event::path("create-http-api.json")).expect("the sample event"),
    )
    .expect("JSON");
    event["body"] = json!(body);
    event
}

#[tokio::test]
async fn the_loop_gives_the_handler_each_invocations_context_and_posts_its_answer() {
    let first = Invocation::new("req-1", http_event("one"));
    let second = Invocation::new("req-2", http_event("two"));
    let api = FakeRuntimeApi::start(vec![first.clone(), second.clone()]);
    let seen: Mutex<Vec<(Context, String)>> = Mutex::default();
    let trace_env_before = std::env::var_os("_X_AMZN_TRACE_ID");

    let ended = runtime::run(&RuntimeApi::new(api.uri()), function_config(), async |request| {
        let body = String::from_utf8_lossy(request.body().as_ref()).into_owned();
        seen.lock()
            .expect("seen")
            .push((request.lambda_context(), body.clone()));
        Response::builder()
            .status(201)
            .header("content-type", "text/plain")
            .body(Body::from(format!("got {body}")))
            .expect("a response")
    })
    .await;

    let err = ended.expect_err("the loop ends when next fails");
    assert_eq!(
        err.to_string(),
        "the Runtime API answered 500 Internal Server Error to next"
    );
    let seen = seen.into_inner().expect("seen");
    assert_eq!(seen.len(), 2);
    for ((context, body), (invocation, text)) in seen.iter().zip([(&first, "one"), (&second, "two")]) {
        assert_eq!(context.request_id, invocation.id);
        assert_eq!(context.deadline, 4_102_444_800_000);
        assert_eq!(context.invoked_function_arn, FUNCTION_ARN);
        assert_eq!(
            context.xray_trace_id.as_deref(),
            Some(invocation.trace_id.as_str())
        );
        assert_eq!(context.env_config.function_name, "plants");
        assert_eq!(context.env_config.memory, 128);
        assert_eq!(body, text);
    }
    for (invocation, text) in [(&first, "one"), (&second, "two")] {
        let posted = api.next_post();
        assert_eq!(
            posted.path,
            format!("/2018-06-01/runtime/invocation/{}/response", invocation.id)
        );
        assert_eq!(posted.body["statusCode"], 201, "{:?}", posted.body);
        assert_eq!(posted.body["body"], format!("got {text}"), "{:?}", posted.body);
        assert_eq!(
            posted.body["headers"]["content-type"], "text/plain",
            "{:?}",
            posted.body
        );
    }
    // The point of owning the loop: nothing is written to the environment.
    assert_eq!(std::env::var_os("_X_AMZN_TRACE_ID"), trace_env_before);
}

#[tokio::test]
async fn a_panicking_handler_fails_only_its_own_invocation() {
    let api = FakeRuntimeApi::start(vec![
        Invocation::new("req-panics", http_event("panic")),
        Invocation::new("req-fine", http_event("fine")),
    ]);

    let _ = runtime::run(&RuntimeApi::new(api.uri()), function_config(), async |request| {
        if request.body().as_ref() == b"panic" {
            panic!("a bug");
        }
        Response::new(Body::from("ok"))
    })
    .await;

    let failed = api.next_post();
    assert_eq!(failed.path, "/2018-06-01/runtime/invocation/req-panics/error");
    assert_eq!(
        failed.body,
        json!({ "errorType": "Runtime.HandlerPanicked", "errorMessage": "the handler panicked: a bug" })
    );
    assert_eq!(
        failed
            .headers
            .get("lambda-runtime-function-error-type")
            .map(String::as_str),
        Some("Runtime.HandlerPanicked")
    );
    let fine = api.next_post();
    assert_eq!(fine.path, "/2018-06-01/runtime/invocation/req-fine/response");
    assert_eq!(fine.body["statusCode"], 200);
}

#[tokio::test]
async fn an_invocation_without_a_deadline_is_reported_and_the_next_one_served() {
    let api = FakeRuntimeApi::start(vec![
        Invocation::new("req-no-deadline", http_event("x")).without_deadline(),
        Invocation::new("req-ok", http_event("y")),
    ]);

    let _ = runtime::run(&RuntimeApi::new(api.uri()), function_config(), async |_request| {
        Response::new(Body::from("ok"))
    })
    .await;

    let failed = api.next_post();
    assert_eq!(
        failed.path,
        "/2018-06-01/runtime/invocation/req-no-deadline/error"
    );
    assert_eq!(
        failed.body,
        json!({ "errorType": "Runtime.InvalidInvocation", "errorMessage": "the Runtime API sent no valid deadline" })
    );
    assert_eq!(
        api.next_post().path,
        "/2018-06-01/runtime/invocation/req-ok/response"
    );
}

#[tokio::test]
async fn an_init_error_is_posted_with_its_type() {
    let api = FakeRuntimeApi::start(Vec::new());

    RuntimeApi::new(api.uri())
        .init_error("refusing to start: TABLE_NAME is not set")
        .await
        .expect("posted");

    let posted = api.next_post();
    assert_eq!(posted.path, "/2018-06-01/runtime/init/error");
    assert_eq!(
        posted
            .headers
            .get("lambda-runtime-function-error-type")
            .map(String::as_str),
        Some("Runtime.InitError")
    );
    assert_eq!(
        posted.body,
        json!({ "errorType": "Runtime.InitError", "errorMessage": "refusing to start: TABLE_NAME is not set" })
    );
}

/// The built function under the stand-in Runtime API, with JSON logs.
/// Returns what it posted (in order) and its log lines, once it has ended.
fn run_function(invocations: Vec<Invocation>, table: &str) -> (Vec<Posted>, Vec<Value>) {
    let count = invocations.len();
    let api = FakeRuntimeApi::start(invocations);
    let output = function(&api.address, dynamodb_local_endpoint())
        .env("TABLE_NAME", table)
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

fn lines_of<'a>(lines: &'a [Value], request_id: &str) -> Vec<&'a Value> {
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

    let output = Command::new(env!("CARGO_BIN_EXE_plant-store"))
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
