//! The streaming example (`examples/axum_streaming.rs`, on
//! `lambda_host::run_with_streaming_response`) run as Lambda runs a
//! function, under the stand-in Runtime API: the prelude, the body's
//! frames as they are made, the error trailers after a body error, a panic
//! and a cut at the deadline, a stream the Runtime API closes, N streams
//! at once on Managed Instances, and the process's memory however long the
//! stream.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::stream::{self, Stream, StreamExt};
use http_body_util::StreamBody;
use hyper::body::{Bytes, Frame};
use lambda_host::test_util::daemon::{Daemon, Datagram, attributes};
use lambda_host::{Concurrency, Lambda};
use lambda_http::lambda_runtime::Config as FunctionConfig;
use lambda_http::{Request, Response, service_fn};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use serde_json::json;

use crate::examples::{example, get, named, server_of, spans_of};
use crate::runtime_fake::{FakeRuntimeApi, Fault, Invocation, Posted, Streamed, by_request_id};

/// The example's process, killed if a test fails while it runs.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts the streaming example under `api` and a daemon of its own, with
/// `env` added. The example is built first: the daemon's read timeout
/// runs from its start, and the first test to ask builds every example.
fn launch(api: &FakeRuntimeApi, env: &[(&str, &str)]) -> (Running, Daemon) {
    let program = example("axum_streaming");
    let daemon = Daemon::start();
    let child = Command::new(program)
        .env("AWS_LAMBDA_RUNTIME_API", &api.address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "events")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_XRAY_DAEMON_ADDRESS", &daemon.address)
        .env("AWS_REGION", "us-east-1")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    (Running(child), daemon)
}

/// Runs the example until `api` ends its loop: its answers by request id
/// (`answered` of them) and its datagrams.
fn run(
    api: &FakeRuntimeApi,
    answered: usize,
    env: &[(&str, &str)],
) -> (HashMap<String, Posted>, Vec<Datagram>) {
    let (mut child, daemon) = launch(api, env);
    let started = Instant::now();
    while child.0.try_wait().expect("its status").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            panic!("the example was still running after a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let answers = by_request_id(api.posted.try_iter().collect());
    assert_eq!(answers.len(), answered, "{answers:#?}");
    (answers, daemon.datagrams())
}

fn stream<'a>(answers: &'a HashMap<String, Posted>, id: &str) -> &'a Streamed {
    let posted = &answers[id];
    assert_eq!(
        posted.header("lambda-runtime-function-response-mode"),
        Some("streaming"),
        "{id}"
    );
    posted.stream.as_ref().expect("a streamed answer")
}

/// `data: 1` … `data: count`, as the example sends them.
fn events(count: u64) -> String {
    (1..=count).map(|number| format!("data: {number}\n\n")).collect()
}

#[test]
fn the_events_arrive_one_by_one_after_the_prelude_and_the_server_span_ends_with_the_stream() {
    let sampled = Invocation::new("events-1", get("/events/5/100")).sampled();
    let unsampled = Invocation::new("events-2", get("/events/2/0"));
    let api = FakeRuntimeApi::start(vec![sampled.clone(), unsampled]);

    let (answers, datagrams) = run(&api, 2, &[]);

    let streamed = stream(&answers, "events-1");
    assert_eq!(
        streamed.prelude,
        json!({
            "statusCode": 200,
            "headers": { "content-type": "text/event-stream", "cache-control": "no-cache" },
            "cookies": [],
        })
    );
    assert_eq!(streamed.text(), events(5));
    assert!(streamed.ended && streamed.trailers.is_empty(), "{streamed:?}");
    // The prelude, the delimiter, then each event in a chunk of its own,
    // as it was made.
    assert_eq!(streamed.chunks.len(), 7, "{:?}", streamed.chunks);
    let spread = streamed.chunks[6].0 - streamed.chunks[2].0;
    assert!(
        spread >= Duration::from_millis(350),
        "events spread over {spread:?}"
    );
    assert_eq!(stream(&answers, "events-2").text(), events(2));

    assert_eq!(datagrams.len(), 1, "only the sampled one: {datagrams:#?}");
    let spans = spans_of(&datagrams, &sampled);
    let server = server_of(&spans);
    let events: Vec<_> = spans.iter().filter(|span| span.name == "event").collect();
    assert_eq!(events.len(), 5, "{spans:#?}");
    for event in &events {
        assert_eq!(
            event.parent_span_id, server.span_id,
            "an event beneath the SERVER span"
        );
        assert!(
            event.end_time_unix_nano <= server.end_time_unix_nano,
            "the SERVER span ends after the stream's last event"
        );
    }
    let server_attributes = attributes(&server.attributes);
    assert_eq!(server_attributes["http.response.status_code"], 200);
    assert_eq!(server_attributes["url.path"], "/events/5/100");
    assert_ne!(
        server.status.as_ref().map(|status| status.code),
        Some(StatusCode::Error as i32)
    );
}

#[test]
fn a_body_error_and_a_panic_end_their_streams_with_the_error_trailers_and_the_next_is_served() {
    let fails = Invocation::new("fails", get("/fails/2")).sampled();
    let panics = Invocation::new("panics", get("/panics"));
    let after = Invocation::new("after", get("/events/1/0"));
    let api = FakeRuntimeApi::start(vec![fails.clone(), panics, after]);

    let (answers, datagrams) = run(&api, 3, &[]);

    let failed = stream(&answers, "fails");
    assert_eq!(failed.text(), events(2));
    assert!(failed.ended, "{failed:?}");
    assert_eq!(
        failed.trailer("lambda-runtime-function-error-type"),
        Some("Runtime.StreamError")
    );
    let error_body = failed.error_body().expect("an error body");
    assert_eq!(error_body["errorType"], "Runtime.StreamError");
    assert!(
        error_body["errorMessage"]
            .as_str()
            .is_some_and(|message| message.contains("the feed behind the events broke")),
        "{error_body}"
    );

    let panicked = stream(&answers, "panics");
    assert_eq!(panicked.text(), events(1));
    assert_eq!(
        panicked.trailer("lambda-runtime-function-error-type"),
        Some("Runtime.HandlerPanicked")
    );
    assert_eq!(stream(&answers, "after").text(), events(1));

    let spans = spans_of(&datagrams, &fails);
    let server = server_of(&spans);
    let status = server.status.as_ref().expect("a status");
    assert_eq!(status.code, StatusCode::Error as i32, "{server:#?}");
    assert_eq!(
        attributes(&server.attributes)["error.type"],
        "Runtime.StreamError"
    );
    assert_eq!(named(&spans, "event").parent_span_id, server.span_id);
}

#[test]
fn a_stream_still_running_near_its_deadline_is_cut_before_it_with_the_error_trailers() {
    let forever = Invocation::new("forever", get("/forever")).due_in(Duration::from_millis(1_500));
    let after = Invocation::new("after", get("/events/1/0"));
    let api = FakeRuntimeApi::start(vec![forever.clone(), after]);

    let (answers, _) = run(&api, 2, &[]);

    let cut = stream(&answers, "forever");
    assert_eq!(
        cut.trailer("lambda-runtime-function-error-type"),
        Some("Runtime.DeadlineExceeded"),
        "{cut:?}"
    );
    assert!(cut.text().starts_with(&events(5)), "{}", cut.text());
    // Whole, trailers included, before the deadline: a timer never fires
    // early, and a busy machine only makes it later.
    let ahead_ms = answers["forever"].ahead_of_deadline_ms(&forever);
    assert!(ahead_ms > 0, "the stream ended {ahead_ms} ms before its deadline");
    assert_eq!(stream(&answers, "after").text(), events(1));
}

#[test]
fn the_runtime_api_closing_a_stream_ends_that_invocation_and_the_next_is_served() {
    let closed = Invocation::new("closed", get("/forever"));
    let after = Invocation::new("after", get("/events/1/0"));
    let api = FakeRuntimeApi::start(vec![closed, after]);
    // The prelude and two events, then the connection goes.
    api.fail_answer(Fault::DropAfter(200));

    let (answers, _) = run(&api, 1, &[]);

    assert_eq!(stream(&answers, "after").text(), events(1));
    let refused = api.refused();
    assert!(
        matches!(refused.as_slice(), [(path, Fault::DropAfter(200))] if path.contains("/closed/")),
        "{refused:?}"
    );
}

#[test]
fn on_managed_instances_eight_streams_run_at_once() {
    let invocations: Vec<Invocation> = (1..=8)
        .map(|n| Invocation::new(&format!("stream-{n}"), get("/events/4/200")))
        .collect();
    let api = FakeRuntimeApi::holding(invocations, 8);

    let (answers, _) = run(&api, 8, &[("AWS_LAMBDA_MAX_CONCURRENCY", "8")]);

    let streams: Vec<&Streamed> = (1..=8)
        .map(|n| stream(&answers, &format!("stream-{n}")))
        .collect();
    for streamed in &streams {
        assert_eq!(streamed.text(), events(4));
    }
    // Every stream had begun before any had ended.
    let last_begun = streams.iter().map(|s| s.chunks[2].0).max().unwrap();
    let first_ended = streams.iter().map(|s| s.chunks[5].0).min().unwrap();
    assert!(
        last_begun < first_ended,
        "the eight streams overlapped: the last began {:?} after the first ended",
        last_begun.saturating_duration_since(first_ended)
    );
}

/// The process's resident set now and at its peak, in kB.
fn memory_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Streams `invocations` through an open stand-in, `at_once` at a time:
/// each answer's streamed length.
fn stream_all(
    api: &FakeRuntimeApi,
    invocations: impl IntoIterator<Item = Invocation>,
    at_once: usize,
) -> Vec<u64> {
    let invocations: Vec<Invocation> = invocations.into_iter().collect();
    let mut lengths = Vec::new();
    for batch in invocations.chunks(at_once) {
        for invocation in batch {
            api.push(invocation.clone());
        }
        for _ in batch {
            let posted = api.next_post();
            lengths.push(posted.stream.expect("a streamed answer").length);
        }
    }
    lengths
}

/// A 200 MB stream, and one that runs until its deadline, hold the
/// process's peak within a few MB of a 1 MB stream's, and many streams
/// leave its resident set where it was.
fn memory_stays_flat(at_once: usize) {
    const MB: u64 = 1 << 20;
    let concurrency = at_once.to_string();
    let api = FakeRuntimeApi::open(vec![]);
    let (mut child, _daemon) = launch(&api, &[("AWS_LAMBDA_MAX_CONCURRENCY", concurrency.as_str())]);
    let pid = child.0.id();
    let small = |n: usize| Invocation::new(&format!("small-{n}"), get("/bytes/1"));

    // Warm: every worker has streamed.
    let lengths = stream_all(&api, (0..4 * at_once).map(small), at_once);
    assert!(lengths.iter().all(|length| *length == MB), "{lengths:?}");
    let (_, warm_peak) = memory_kb(pid);

    let big = (0..at_once).map(|n| Invocation::new(&format!("big-{n}"), get("/bytes/200")));
    let lengths = stream_all(&api, big, at_once);
    assert!(lengths.iter().all(|length| *length == 200 * MB), "{lengths:?}");
    let endless = (0..at_once).map(|n| {
        Invocation::new(&format!("endless-{n}"), get("/bytes/1000000")).due_in(Duration::from_secs(2))
    });
    let lengths = stream_all(&api, endless, at_once);
    assert!(lengths.iter().all(|length| *length > MB), "{lengths:?}");
    let (_, big_peak) = memory_kb(pid);

    let (soak_start, _) = memory_kb(pid);
    let soak = (0..200 * at_once).map(|n| small(1_000 + n));
    let lengths = stream_all(&api, soak, at_once);
    assert!(lengths.iter().all(|length| *length == MB));
    let (soak_end, _) = memory_kb(pid);
    api.close();
    let _ = child.0.wait();

    assert!(
        big_peak.saturating_sub(warm_peak) < 4 * 1024,
        "{at_once} at once: peak {warm_peak} kB after 1 MB streams, {big_peak} kB after 200 MB and endless ones"
    );
    assert!(
        soak_end.saturating_sub(soak_start) < 1024,
        "{at_once} at once: resident {soak_start} kB before {} streams, {soak_end} kB after",
        200 * at_once
    );
}

#[test]
fn memory_stays_flat_however_long_the_stream_one_at_a_time() {
    memory_stays_flat(1);
}

#[test]
fn memory_stays_flat_however_long_the_stream_eight_at_once() {
    memory_stays_flat(8);
}

#[test]
fn on_managed_instances_each_fault_ends_its_own_stream_while_the_others_run_on() {
    let invocations = vec![
        Invocation::new("fails", get("/fails/2")),
        Invocation::new("panics", get("/panics")),
        Invocation::new("forever", get("/forever")).due_in(Duration::from_millis(1_500)),
        Invocation::new("events", get("/events/8/100")),
    ];
    let api = FakeRuntimeApi::holding(invocations, 4);

    let (answers, _) = run(&api, 4, &[("AWS_LAMBDA_MAX_CONCURRENCY", "4")]);

    for (id, error_type) in [
        ("fails", Some("Runtime.StreamError")),
        ("panics", Some("Runtime.HandlerPanicked")),
        ("forever", Some("Runtime.DeadlineExceeded")),
        ("events", None),
    ] {
        let streamed = stream(&answers, id);
        assert!(streamed.ended, "{id}: {streamed:?}");
        assert_eq!(
            streamed.trailer("lambda-runtime-function-error-type"),
            error_type,
            "{id}"
        );
    }
    assert_eq!(stream(&answers, "events").text(), events(8));
}

/// A body of frames, one after another, made on demand.
type Frames = StreamBody<Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, lambda_http::Error>> + Send>>>;

/// A body of `count` frames, `every` apart, then an error when `fails`.
fn frames(count: u64, every: Duration, fails: bool) -> Frames {
    let frames = stream::iter(1..=count).then(move |number| async move {
        tokio::time::sleep(every).await;
        Ok(Frame::data(Bytes::from(format!("data: {number}\n\n"))))
    });
    let end = stream::iter(fails.then(|| Err("the frames ran out".into())));
    StreamBody::new(Box::pin(frames.chain(end)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_streaming_concurrent_streams_from_a_task_per_worker_and_contains_a_failing_body() {
    let mut sent: Vec<Invocation> = (1..=4)
        .map(|n| Invocation::new(&format!("stream-{n}"), get("/events")))
        .collect();
    sent.push(Invocation::new("fails", get("/fails")));
    let api = FakeRuntimeApi::holding(sent, 4);
    let service = service_fn(|request: Request| async move {
        let fails = request.uri().path() == "/fails";
        Ok::<_, lambda_http::Error>(Response::new(frames(3, Duration::from_millis(200), fails)))
    });
    let concurrency = Concurrency::new(NonZeroU32::new(4).unwrap());

    let ended = Lambda::new(api.uri(), FunctionConfig::default())
        .with_concurrency(concurrency)
        .serve_streaming_concurrent(service)
        .await;

    assert!(ended.is_err(), "the loop ends when the stand-in does");
    let answers = by_request_id(api.posted.try_iter().collect());
    assert_eq!(answers.len(), 5, "{answers:#?}");
    let streams: Vec<&Streamed> = (1..=4)
        .map(|n| stream(&answers, &format!("stream-{n}")))
        .collect();
    for streamed in &streams {
        assert_eq!(streamed.text(), events(3));
        assert!(streamed.trailers.is_empty(), "{streamed:?}");
    }
    let last_begun = streams.iter().map(|s| s.chunks[2].0).max().unwrap();
    let first_ended = streams.iter().map(|s| s.chunks[4].0).min().unwrap();
    assert!(last_begun < first_ended, "the four streams overlapped");
    assert_eq!(
        stream(&answers, "fails").trailer("lambda-runtime-function-error-type"),
        Some("Runtime.StreamError")
    );
}

/// A stream's cut lies where a buffered answer's does, 100 ms before the
/// deadline: a body that ends 150 ms before it ends whole, one that would
/// end 50 ms before it and one that never ends are cut with the error
/// trailers, and the next invocation is served. On a paused clock the
/// timers fire in their order whatever the load.
#[tokio::test(start_paused = true)]
async fn a_stream_is_cut_between_the_handlers_margin_and_the_deadline_and_the_next_is_served() {
    // Deadlines apart, as the paused clock runs past each in turn.
    let due =
        |id: &str, path: &str, secs: u64| Invocation::new(id, get(path)).due_in(Duration::from_secs(secs));
    let sent = vec![
        due("in-time", "/150", 30),
        due("late", "/50", 60),
        due("stuck", "/stuck", 90),
        Invocation::new("after", get("/0")),
    ];
    let api = FakeRuntimeApi::start(sent);
    let service = service_fn(|request: Request| async move {
        let path = request.uri().path().trim_start_matches('/').to_owned();
        let end = match path.parse::<u64>() {
            Ok(0) => None,
            Ok(ms) => Some(crate::invocations::before_deadline(
                &request,
                Duration::from_millis(ms),
            )),
            Err(_) => Some(tokio::time::Instant::now() + Duration::from_secs(3_600)),
        };
        let frames = stream::iter([Bytes::from("first\n"), Bytes::from("last\n")])
            .enumerate()
            .then(move |(index, bytes)| async move {
                if index == 1
                    && let Some(end) = end
                {
                    tokio::time::sleep_until(end).await;
                }
                Ok::<_, lambda_http::Error>(Frame::data(bytes))
            });
        Ok::<_, lambda_http::Error>(Response::new(StreamBody::new(Box::pin(frames))))
    });

    let ended = Lambda::new(api.uri(), FunctionConfig::default())
        .serve_streaming(service)
        .await;

    assert!(ended.is_err(), "the stand-in ends the loop");
    let answers = by_request_id(api.posted.try_iter().collect());
    assert_eq!(answers.len(), 4, "{answers:#?}");
    for (id, body, error_type) in [
        ("in-time", "first\nlast\n", None),
        ("late", "first\n", Some("Runtime.DeadlineExceeded")),
        ("stuck", "first\n", Some("Runtime.DeadlineExceeded")),
        ("after", "first\nlast\n", None),
    ] {
        let streamed = stream(&answers, id);
        assert_eq!(streamed.text(), body, "{id}");
        assert_eq!(
            streamed.trailer("lambda-runtime-function-error-type"),
            error_type,
            "{id}"
        );
    }
}
