//! A body flagged `isBase64Encoded` that is not base64 can only come from a
//! hand-made direct invoke: every HTTP front door encodes bodies itself. It
//! never reaches our handler: `lambda_http` panics while converting the
//! event. This proves, with the built function against a stand-in for the
//! Lambda Runtime API, that the runtime catches that panic, reports only
//! that invocation as failed, and goes on serving the next one.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plant_store::auth::StaticTokens;
use serde_json::Value;

use crate::helpers::{DEV_TOKEN, Event};

/// What the function posted back: the path and the JSON body.
pub(crate) type Posted = (String, Value);

/// The X-Ray trace header the stand-in sends with every event.
pub(crate) const TRACE_HEADER: &str =
    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
/// The ARN the stand-in gives as the invoked function's.
pub(crate) const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:plants";

/// Serves `GET …/invocation/next` from `events` (then holds the request
/// open, as Lambda does while no event is waiting) and reports every POST.
fn serve(stream: TcpStream, events: Arc<Mutex<VecDeque<(String, String)>>>, posted: Sender<Posted>) {
    let mut reader = BufReader::new(stream.try_clone().expect("a socket"));
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("a header line");
            if line.trim_end().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().expect("a length");
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("a body");
        let path = request_line.split(' ').nth(1).unwrap_or_default().to_owned();

        if request_line.starts_with("GET") {
            let Some((id, event)) = events.lock().expect("events").pop_front() else {
                std::thread::sleep(Duration::from_secs(600));
                return;
            };
            let deadline = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("a clock after 1970")
                .as_millis()
                + 30_000;
            write!(
                writer,
                "HTTP/1.1 200 OK\r\nLambda-Runtime-Aws-Request-Id: {id}\r\nLambda-Runtime-Deadline-Ms: {deadline}\r\n\
                 Lambda-Runtime-Invoked-Function-Arn: {FUNCTION_ARN}\r\nLambda-Runtime-Trace-Id: {TRACE_HEADER}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{event}",
                event.len()
            )
            .expect("an answer");
        } else {
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let _ = posted.send((path, body));
            write!(writer, "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n").expect("an answer");
        }
    }
}

/// Starts a stand-in for the Lambda Runtime API on loopback that hands
/// out `events` (request id, event JSON) in order; returns its address and
/// what the function posts back.
pub(crate) fn runtime_api(events: Vec<(String, String)>) -> (String, Receiver<Posted>) {
    let events = Arc::new(Mutex::new(VecDeque::from(events)));
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the Runtime API");
    let address = listener.local_addr().expect("an address").to_string();
    let (posted, received) = channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (events, posted) = (events.clone(), posted.clone());
            std::thread::spawn(move || serve(stream, events, posted));
        }
    });
    (address, received)
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

#[test]
fn an_invalid_base64_body_fails_only_its_own_invocation_and_the_function_serves_on() {
    let event = |body: &str, base64: bool| {
        let path = Event::path("create-http-api.json");
        let text = std::fs::read_to_string(&path).expect("the sample event");
        let mut event: Value = serde_json::from_str(&text).expect("a JSON event");
        event["body"] = Value::from(body);
        event["isBase64Encoded"] = Value::from(base64);
        event
    };
    let bad = event("not base64!", true);
    let good = event(r#"{"id":1,"name":"Fern"}"#, false);
    let (runtime_api, received) = runtime_api(vec![
        ("req-bad".to_owned(), bad.to_string()),
        ("req-good".to_owned(), good.to_string()),
    ]);
    // Nothing listens there: the valid create gets its 503 quickly.
    let dead_store = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");

    let mut function = function(&runtime_api, &format!("http://{dead_store}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the function binary starts");
    let answers: Vec<Posted> = (0..2)
        .map_while(|_| received.recv_timeout(Duration::from_secs(30)).ok())
        .collect();
    let _ = function.kill();
    let _ = function.wait();

    assert_eq!(answers.len(), 2, "{answers:?}");
    let (path, error) = &answers[0];
    assert_eq!(path, "/2018-06-01/runtime/invocation/req-bad/error");
    let message = error["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Lambda panicked: failed to decode aws base64 encoded body"),
        "{error}"
    );
    let (path, response) = &answers[1];
    assert_eq!(path, "/2018-06-01/runtime/invocation/req-good/response");
    assert_eq!(response["statusCode"], 503, "{response}");
}
