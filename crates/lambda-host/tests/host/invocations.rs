//! The invocation loop under the stand-in Runtime API (`test_util::runtime_api`),
//! in this process, with services that record what they were given: one
//! invocation at a time as on classic Lambda, and several at once as on
//! Lambda Managed Instances.

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::FutureExt;
use lambda_host::{Concurrency, Lambda};
use lambda_http::lambda_runtime::{Config as FunctionConfig, Diagnostic};
use lambda_http::tower::Service;
use lambda_http::tracing::subscriber::fmt::MakeWriter;
use lambda_http::{Body, Context, IntoResponse, Request, RequestExt, Response, service_fn};
use serde_json::{Value, json};

use crate::runtime_fake::{
    FUNCTION_ARN, FakeRuntimeApi, Invocation, Posted, answer_for, by_request_id, invocations,
};

/// What a handler was given: its context, its body, and the trace header its
/// SDK requests would carry.
type Seen = (Context, String, Option<String>);

/// Runs the loop one invocation at a time under `api` until it ends, with
/// `handler` as a service that never fails.
async fn serve<H, F>(api: &FakeRuntimeApi, handler: H) -> Result<(), lambda_http::Error>
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    Lambda::new(api.uri(), function_config())
        .serve(infallible(handler))
        .await
}

/// `handler` as a tower service whose error never happens.
fn infallible<H, F>(
    handler: H,
) -> impl lambda_http::Service<Request, Response = Response<Body>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    service_fn(move |request| handler(request).map(Ok::<_, Infallible>))
}

pub(crate) async fn ok(_request: Request) -> Response<Body> {
    Response::new(Body::from("ok"))
}

fn function_config() -> FunctionConfig {
    FunctionConfig {
        function_name: "orders".to_owned(),
        memory: 128,
        version: "7".to_owned(),
        ..FunctionConfig::default()
    }
}

fn http_event(body: &str) -> Value {
    let mut event: Value = serde_json::from_str(&crate::data("http-api.json")).expect("JSON");
    event["body"] = json!(body);
    event
}

#[tokio::test]
async fn the_loop_gives_the_handler_each_invocations_context_and_posts_its_answer() {
    let first = Invocation::new("req-1", http_event("one"));
    let second = Invocation::new("req-2", http_event("two"));
    let api = FakeRuntimeApi::start(vec![first.clone(), second.clone()]);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let trace_env_before = std::env::var_os("_X_AMZN_TRACE_ID");

    let recorder = seen.clone();
    let ended = serve(&api, move |request: Request| {
        let body = String::from_utf8_lossy(request.body().as_ref()).into_owned();
        recorder.lock().expect("seen").push((
            request.lambda_context(),
            body.clone(),
            lambda_host::trace::current(),
        ));
        async move {
            Response::builder()
                .status(201)
                .header("content-type", "text/plain")
                .body(Body::from(format!("got {body}")))
                .expect("a response")
        }
    })
    .await;

    let err = ended.expect_err("the loop ends when next fails for good");
    assert_eq!(err.to_string(), "the Runtime API answered 403 Forbidden to next");
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 2);
    for ((context, body, trace_header), (invocation, text)) in
        seen.iter().zip([(&first, "one"), (&second, "two")])
    {
        // What the handler's AWS SDK requests would carry (`trace::interceptors`).
        assert_eq!(trace_header.as_deref(), Some(invocation.trace_id.as_str()));
        assert_eq!(context.request_id, invocation.id);
        assert_eq!(context.deadline, 4_102_444_800_000);
        assert_eq!(context.invoked_function_arn, FUNCTION_ARN);
        assert_eq!(
            context.xray_trace_id.as_deref(),
            Some(invocation.trace_id.as_str())
        );
        assert_eq!(context.env_config.function_name, "orders");
        assert_eq!(context.env_config.memory, 128);
        assert_eq!(body, text);
    }
    for (invocation, text) in [(&first, "one"), (&second, "two")] {
        let posted = api.next_post();
        assert_eq!(
            posted.path,
            format!("/2018-06-01/runtime/invocation/{}/response", invocation.id)
        );
        assert_eq!(
            posted.header("lambda-runtime-invocation-id"),
            invocation.invocation_id.as_deref(),
            "the answer echoes its invocation's id"
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
    let panics = Invocation::new("req-panics", http_event("panic"));
    let api = FakeRuntimeApi::start(vec![
        panics.clone(),
        Invocation::new("req-fine", http_event("fine")),
    ]);

    let _ = serve(&api, |request: Request| async move {
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
        json!({ "errorType": "Runtime.HandlerPanicked", "errorMessage": "the invocation panicked: a bug" })
    );
    assert_eq!(
        failed
            .headers
            .get("lambda-runtime-function-error-type")
            .map(String::as_str),
        Some("Runtime.HandlerPanicked")
    );
    assert_eq!(
        failed.header("lambda-runtime-invocation-id"),
        panics.invocation_id.as_deref()
    );
    let fine = api.next_post();
    assert_eq!(fine.path, "/2018-06-01/runtime/invocation/req-fine/response");
    assert_eq!(fine.body["statusCode"], 200);
}

#[tokio::test]
async fn a_service_that_returns_an_err_fails_only_its_own_invocation_with_that_error() {
    let fails = Invocation::new("req-err", http_event("fail"));
    let api = FakeRuntimeApi::start(vec![
        fails.clone(),
        Invocation::new("req-fine", http_event("fine")),
    ]);

    let _ = Lambda::new(api.uri(), function_config())
        .serve(service_fn(|request: Request| async move {
            if request.body().as_ref() == b"fail" {
                return Err(lambda_http::Error::from("the store is gone"));
            }
            Ok(Response::new(Body::from("ok")))
        }))
        .await;

    let failed = api.next_post();
    assert_eq!(failed.path, "/2018-06-01/runtime/invocation/req-err/error");
    assert_eq!(
        failed.body["errorMessage"], "the store is gone",
        "{:?}",
        failed.body
    );
    assert_eq!(
        failed.header("lambda-runtime-invocation-id"),
        fails.invocation_id.as_deref()
    );
    let fine = api.next_post();
    assert_eq!(fine.path, "/2018-06-01/runtime/invocation/req-fine/response");
    assert_eq!(fine.body["statusCode"], 200);
}

#[tokio::test]
async fn an_answer_with_a_header_value_that_is_not_utf8_fails_its_invocation_and_the_next_is_served() {
    let invalid = Invocation::new("req-invalid", http_event("invalid"));
    let api = FakeRuntimeApi::start(vec![
        invalid.clone(),
        Invocation::new("req-fine", http_event("fine")),
    ]);

    let _ = serve(&api, |request: Request| async move {
        let mut response = Response::new(Body::from("the real answer"));
        if request.body().as_ref() == b"invalid" {
            let value = lambda_http::http::HeaderValue::from_bytes(b"caf\xe9").unwrap();
            response.headers_mut().insert("x-bytes", value);
        }
        response
    })
    .await;

    let failed = api.next_post();
    assert_eq!(failed.path, "/2018-06-01/runtime/invocation/req-invalid/error");
    assert_eq!(
        failed.body,
        json!({
            "errorType": "Runtime.InvalidResponse",
            "errorMessage": "the response header x-bytes has a value that is not UTF-8, which the front door's JSON cannot carry",
        })
    );
    assert_eq!(
        failed.header("lambda-runtime-function-error-type"),
        Some("Runtime.InvalidResponse")
    );
    assert_eq!(
        failed.header("lambda-runtime-invocation-id"),
        invalid.invocation_id.as_deref()
    );
    let fine = api.next_post();
    assert_eq!(fine.path, "/2018-06-01/runtime/invocation/req-fine/response");
    assert_eq!(fine.body["body"], "the real answer");
}

#[tokio::test]
async fn an_invocation_without_a_deadline_is_reported_and_the_next_one_served() {
    let api = FakeRuntimeApi::start(vec![
        Invocation::new("req-no-deadline", http_event("x")).without_deadline(),
        Invocation::new("req-ok", http_event("y")),
    ]);

    let _ = serve(&api, ok).await;

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
async fn the_invocation_id_is_echoed_exactly_on_its_own_answer_and_nowhere_else() {
    let mut odd = Invocation::new("req-odd-id", http_event("a"));
    odd.invocation_id = Some("9f2c-Odd.Case_id~with+chars=/x".to_owned());
    let without = Invocation::new("req-without-id", http_event("b")).without_invocation_id();
    let fails = Invocation::new("req-fails", http_event("c")).without_deadline();
    let api = FakeRuntimeApi::start(vec![odd.clone(), without.clone(), fails.clone()]);

    let _ = serve(&api, ok).await;

    for invocation in [&odd, &without, &fails] {
        let posted = api.next_post();
        assert_eq!(posted.request_id(), invocation.id);
        assert_eq!(
            posted.header("lambda-runtime-invocation-id"),
            invocation.invocation_id.as_deref(),
            "{}",
            posted.path
        );
    }
    let nexts = api.nexts();
    assert_eq!(
        nexts.len(),
        4,
        "three invocations, then the 403 that ends the loop"
    );
    assert!(
        nexts
            .iter()
            .all(|headers| !headers.contains_key("lambda-runtime-invocation-id")),
        "{nexts:?}"
    );
    assert_eq!(api.max_parked(), 1, "one invocation at a time");
}

#[tokio::test]
async fn an_init_error_is_posted_with_its_type() {
    let api = FakeRuntimeApi::start(Vec::new());

    Lambda::new(api.uri(), function_config())
        .init_error("refusing to start: GREETING is not set")
        .await
        .expect("posted");

    let posted = api.next_post();
    assert_eq!(posted.path, "/2018-06-01/runtime/init/error");
    assert_eq!(posted.header("lambda-runtime-invocation-id"), None);
    assert_eq!(
        posted
            .headers
            .get("lambda-runtime-function-error-type")
            .map(String::as_str),
        Some("Runtime.InitError")
    );
    assert_eq!(
        posted.body,
        json!({ "errorType": "Runtime.InitError", "errorMessage": "refusing to start: GREETING is not set" })
    );
}

async fn serve_concurrently<H, F>(
    api: &FakeRuntimeApi,
    workers: u32,
    handler: H,
) -> Result<(), lambda_http::Error>
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let concurrency = Concurrency::new(NonZeroU32::new(workers).expect("a positive integer"));
    Lambda::new(api.uri(), function_config())
        .with_concurrency(concurrency)
        .serve(infallible(handler))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_park_eight_nexts_and_answer_each_invocation_under_its_own_ids() {
    let sent = invocations(40, |n| http_event(&n.to_string()));
    let api = FakeRuntimeApi::holding(sent.clone(), 8);

    let ended = serve_concurrently(&api, 8, |request: Request| async move {
        let n: u64 = String::from_utf8_lossy(request.body().as_ref())
            .parse()
            .expect("a number");
        // Later invocations finish first now and then, so answers interleave.
        tokio::time::sleep(Duration::from_millis((n * 7) % 23)).await;
        let seen = json!({
            "request_id": request.lambda_context_ref().map(|context| context.request_id.clone()),
            "trace_header": lambda_host::trace::current(),
            "body": n,
        });
        Response::new(Body::from(seen.to_string()))
    })
    .await;

    assert_eq!(
        ended
            .expect_err("every worker stops once next fails for good")
            .to_string(),
        "the Runtime API answered 403 Forbidden to next"
    );
    assert_eq!(api.max_parked(), 8, "eight next calls parked at once");
    // Every invocation, then the 403 that stops every worker: at most one
    // more `next` per worker (a worker stopped while it waited sends none).
    assert!(
        (40 + 1..=40 + 8).contains(&api.nexts().len()),
        "{}",
        api.nexts().len()
    );
    let answers = by_request_id(api.posted.try_iter().collect());
    assert_eq!(answers.len(), 40);
    for (n, invocation) in sent.iter().enumerate() {
        let posted = &answers[&invocation.id];
        assert!(posted.path.ends_with("/response"), "{}", posted.path);
        assert_eq!(
            posted.header("lambda-runtime-invocation-id"),
            invocation.invocation_id.as_deref()
        );
        let seen: Value = serde_json::from_str(posted.body["body"].as_str().expect("a body")).expect("JSON");
        assert_eq!(
            seen,
            json!({ "request_id": invocation.id, "trace_header": invocation.trace_id, "body": n + 1 })
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_fails_only_its_own_invocation_and_every_worker_serves_on() {
    let sent = invocations(16, |n| http_event(if n % 4 == 0 { "panic" } else { "fine" }));
    let api = FakeRuntimeApi::holding(sent.clone(), 4);

    let _ = serve_concurrently(&api, 4, |request: Request| async move {
        tokio::task::yield_now().await;
        if request.body().as_ref() == b"panic" {
            panic!("a bug");
        }
        Response::new(Body::from("ok"))
    })
    .await;

    // Every invocation, then the 403 that stops every worker: a panic
    // ended no worker (the answers below are all there).
    assert!(
        (16 + 1..=16 + 4).contains(&api.nexts().len()),
        "{}",
        api.nexts().len()
    );
    let answers = by_request_id(api.posted.try_iter().collect());
    for (n, invocation) in sent.iter().enumerate() {
        let posted = &answers[&invocation.id];
        if (n + 1) % 4 == 0 {
            assert!(posted.path.ends_with("/error"), "{}", posted.path);
            assert_eq!(
                posted.body,
                json!({ "errorType": "Runtime.HandlerPanicked", "errorMessage": "the invocation panicked: a bug" })
            );
        } else {
            assert!(posted.path.ends_with("/response"), "{}", posted.path);
            assert_eq!(posted.body["statusCode"], 200);
        }
        assert_eq!(
            posted.header("lambda-runtime-invocation-id"),
            invocation.invocation_id.as_deref()
        );
    }
}

/// `margin` before the deadline of the request's invocation, on tokio's
/// clock (paused in the tests that use it, so that only the order of the
/// timers counts, not how busy the machine is).
pub(crate) fn before_deadline(request: &Request, margin: Duration) -> tokio::time::Instant {
    let deadline_ms = request.lambda_context_ref().expect("a context").deadline;
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline_ms);
    let left = deadline
        .duration_since(SystemTime::now())
        .expect("a deadline ahead");
    tokio::time::Instant::from_std(std::time::Instant::now() + left - margin)
}

/// The loop's cut lies between the handler's margin (250 ms before the
/// deadline) and the deadline, at 100 ms before it: a service that answers
/// 150 ms before its deadline is answered, one that would answer 50 ms
/// before it is failed by the loop, and one that never answers too. On a
/// paused clock the timers fire in their order whatever the load, so a
/// cut at the deadline or after it, or with no margin, answers the second
/// (and a cut too early fails the first).
#[tokio::test(start_paused = true)]
async fn the_loop_cuts_a_service_between_its_own_margin_and_the_deadline_and_serves_on() {
    let in_time = Invocation::new("in-time", http_event("150")).due_in(Duration::from_secs(30));
    let late = Invocation::new("late", http_event("50")).due_in(Duration::from_secs(30));
    let stuck = Invocation::new("stuck", http_event("stuck")).due_in(Duration::from_secs(30));
    let next = Invocation::new("after-stuck", http_event("fine"));
    let api = FakeRuntimeApi::start(vec![in_time.clone(), late.clone(), stuck.clone(), next.clone()]);

    let ended = serve(&api, |request: Request| async move {
        let body = String::from_utf8_lossy(request.body().as_ref()).into_owned();
        match body.parse::<u64>() {
            Ok(ms) => tokio::time::sleep_until(before_deadline(&request, Duration::from_millis(ms))).await,
            Err(_) if body == "stuck" => std::future::pending::<()>().await,
            Err(_) => {}
        }
        Response::new(Body::from(body))
    })
    .await;

    assert_eq!(
        ended.expect_err("the stand-in ends the loop").to_string(),
        "the Runtime API answered 403 Forbidden to next"
    );
    let answered: Vec<Posted> = api.posted.try_iter().collect();
    let cut = json!({ "errorType": "Runtime.DeadlineExceeded", "errorMessage": "the service had not answered shortly before the invocation's deadline" });
    let answer = answer_for(&answered, &in_time);
    assert!(answer.path.ends_with("/response"), "150 ms before: {answer:?}");
    assert_eq!(answer.body["body"], "150");
    for cut_short in [&late, &stuck] {
        let failed = answer_for(&answered, cut_short);
        assert!(failed.path.ends_with("/error"), "{}: {failed:?}", cut_short.id);
        assert_eq!(failed.body, cut, "{}", cut_short.id);
    }
    assert_eq!(answer_for(&answered, &next).body["statusCode"], 200);
}

/// A body that sends `fine` and ends, or never sends anything.
struct Eventually {
    stuck: bool,
    sent: bool,
}

impl hyper::body::Body for Eventually {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Infallible>>> {
        if self.stuck {
            return std::task::Poll::Pending;
        }
        if std::mem::replace(&mut self.sent, true) {
            return std::task::Poll::Ready(None);
        }
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data("fine".into()))))
    }
}

/// A response that `lambda_http` converts first (its body read to the end,
/// as an axum body is) and whose body never ends is cut as a service that
/// never answers is, and the next invocation is served: through `serve`'s
/// lent service and through `serve_concurrent`'s own clone.
///
/// On the real clock: a paused one would run the test's own timeout
/// while the stand-in API's thread answers.
#[tokio::test]
async fn a_response_whose_body_never_ends_is_cut_before_the_deadline_and_the_next_is_served() {
    for concurrent in [false, true] {
        let stuck = Invocation::new("stuck-body", http_event("stuck")).due_in(Duration::from_secs(1));
        let next = Invocation::new("after-stuck-body", http_event("fine"));
        let api = FakeRuntimeApi::start(vec![stuck.clone(), next.clone()]);
        let service = service_fn(|request: Request| async move {
            let stuck = request.body().as_ref() == b"stuck";
            Ok::<_, Infallible>(Response::new(Eventually { stuck, sent: false }))
        });
        let lambda = Lambda::new(api.uri(), function_config());
        let serving = if concurrent {
            lambda.serve_concurrent(service).boxed()
        } else {
            lambda.serve(service).boxed()
        };

        let ended = tokio::time::timeout(Duration::from_secs(20), serving)
            .await
            .expect("the stuck body is cut, not waited for");

        assert_eq!(
            ended.expect_err("the stand-in ends the loop").to_string(),
            "the Runtime API answered 403 Forbidden to next"
        );
        let answered: Vec<Posted> = api.posted.try_iter().collect();
        let failed = answer_for(&answered, &stuck);
        assert!(
            failed.path.ends_with("/error"),
            "concurrent: {concurrent}: {failed:?}"
        );
        assert_eq!(
            failed.body["errorType"], "Runtime.DeadlineExceeded",
            "concurrent: {concurrent}"
        );
        assert_eq!(
            answer_for(&answered, &next).body["body"],
            "fine",
            "concurrent: {concurrent}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_worker_the_work_spawned_behind_an_answer_ends_before_the_next_next() {
    let sent: Vec<Invocation> = (0..3)
        .map(|n| Invocation::new(&format!("settle-{n}"), http_event("fine")))
        .collect();
    // Shared with the work behind each answer (the stand-in is not `Sync`).
    let api = Arc::new(Mutex::new(FakeRuntimeApi::start(sent)));
    let uri = api.lock().expect("api").uri();
    // How many `next` calls the stand-in had seen when each work ended.
    let seen: Arc<Mutex<Vec<usize>>> = Arc::default();
    let work: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
    let service = {
        let (api, seen, work) = (api.clone(), seen.clone(), work.clone());
        service_fn(move |_request: Request| {
            let (api, seen) = (api.clone(), seen.clone());
            let behind = lambda_host::spawn(async move {
                // Longer than the stand-in takes to see the answer and the
                // next `next` (tens of milliseconds): without the wait, that
                // `next` would come first.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let nexts = api.lock().expect("api").nexts().len();
                seen.lock().expect("seen").push(nexts);
            });
            work.lock().expect("work").push(behind);
            std::future::ready(Ok::<_, Infallible>(Response::new(Body::from("fine"))))
        })
    };

    let _ = Lambda::new(uri, function_config()).serve(service).await;
    let behind: Vec<_> = work.lock().expect("work").drain(..).collect();
    for work in behind {
        work.await.expect("the work ended");
    }

    // Each work ended before the `next` after its answer.
    assert_eq!(*seen.lock().expect("seen"), [1, 2, 3]);
}

/// The work behind an answer is awaited until the invocation's cut, not
/// past it: a worker whose work outlives the deadline takes its next
/// invocation while that work still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_worker_the_work_behind_an_answer_is_awaited_no_later_than_its_deadline() {
    let sent = vec![
        Invocation::new("short", http_event("fine")).due_in(Duration::from_millis(400)),
        Invocation::new("next", http_event("fine")),
    ];
    let api = Arc::new(Mutex::new(FakeRuntimeApi::start(sent)));
    let uri = api.lock().expect("api").uri();
    // How many `next` calls the stand-in had seen when the work ended.
    let seen: Arc<Mutex<Option<usize>>> = Arc::default();
    let work: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
    let service = {
        let (api, seen, work) = (api.clone(), seen.clone(), work.clone());
        service_fn(move |request: Request| {
            let (api, seen) = (api.clone(), seen.clone());
            if request
                .lambda_context_ref()
                .is_some_and(|context| context.request_id == "short")
            {
                let behind = lambda_host::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    *seen.lock().expect("seen") = Some(api.lock().expect("api").nexts().len());
                });
                work.lock().expect("work").push(behind);
            }
            std::future::ready(Ok::<_, Infallible>(Response::new(Body::from("fine"))))
        })
    };

    let _ = Lambda::new(uri, function_config()).serve(service).await;
    let behind: Vec<_> = work.lock().expect("work").drain(..).collect();
    for work in behind {
        work.await.expect("the work ended");
    }

    // The second `next` went out at the first invocation's cut, while the
    // work (1.5 s) still ran.
    assert_eq!(*seen.lock().expect("seen"), Some(2));
}

/// The lines `lambda_host::logging::json_subscriber` writes, kept.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lines").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl MakeWriter<'_> for Lines {
    type Writer = Self;

    fn make_writer(&self) -> Self {
        self.clone()
    }
}

impl Lines {
    fn parsed(&self) -> Vec<Value> {
        let bytes = self.0.lock().expect("lines").clone();
        String::from_utf8(bytes)
            .expect("UTF-8")
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }
}

/// The JSON lines `lambda_host::logging::json_subscriber` writes while
/// `service` serves `api`'s invocations on one thread, so that the
/// subscriber set for it is every task's.
fn logged_lines<S, R, E>(api: &FakeRuntimeApi, service: S) -> Vec<Value>
where
    S: Service<Request, Response = R, Error = E>,
    R: IntoResponse,
    E: std::fmt::Debug + Into<Diagnostic>,
{
    let lines = Lines::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let subscriber = lambda_host::logging::json_subscriber(None, lines.clone());
    lambda_http::tracing::dispatcher::with_default(&lambda_http::tracing::Dispatch::new(subscriber), || {
        let _ = runtime.block_on(Lambda::new(api.uri(), function_config()).serve(service));
    });
    lines.parsed()
}

/// Work still running at the cut is said so, in a JSON line of the
/// invocation that spawned it (its ids, not the next one's); the next
/// invocation, due far later, waits for that work to end.
#[test]
fn work_behind_an_answer_still_running_at_the_deadline_is_logged_with_its_invocations_ids() {
    let short = Invocation::new("short", http_event("fine")).due_in(Duration::from_millis(600));
    let api = FakeRuntimeApi::start(vec![short.clone(), Invocation::new("next", http_event("fine"))]);
    let service = service_fn(move |request: Request| {
        if request
            .lambda_context_ref()
            .is_some_and(|context| context.request_id == "short")
        {
            lambda_host::spawn(tokio::time::sleep(Duration::from_millis(1200)));
        }
        std::future::ready(Ok::<_, Infallible>(Response::new(Body::from("fine"))))
    });
    let lines = logged_lines(&api, service);
    let warned: Vec<&Value> = lines.iter().filter(|line| line["level"] == "WARN").collect();
    assert_eq!(
        warned,
        [&json!({
            "level": "WARN",
            "message": "work started behind the answer was still running at the deadline",
            "span": {
                "name": "invocation",
                "request_id": "short",
                "xray_trace_id": short.trace_root(),
            },
        })],
        "{lines:#?}"
    );
}

/// A handler's lines, before and after it yields, carry its invocation's
/// ids: the service is polled in the invocation's span at every poll.
#[test]
fn a_handlers_lines_carry_its_invocations_ids_at_every_poll() {
    let invocation = Invocation::new("polled", http_event("fine"));
    let api = FakeRuntimeApi::start(vec![invocation.clone()]);
    let service = service_fn(|_request: Request| async {
        lambda_http::tracing::info!("before the yield");
        tokio::task::yield_now().await;
        lambda_http::tracing::info!("after the yield");
        Ok::<_, Infallible>(Response::new(Body::from("fine")))
    });
    let lines = logged_lines(&api, service);
    let spans: Vec<(&Value, &Value)> = lines
        .iter()
        .filter(|line| {
            line["message"]
                .as_str()
                .is_some_and(|message| message.ends_with("the yield"))
        })
        .map(|line| (&line["message"], &line["span"]))
        .collect();
    let span = json!({
        "name": "invocation",
        "request_id": "polled",
        "xray_trace_id": invocation.trace_root(),
    });
    assert_eq!(
        spans,
        [
            (&json!("before the yield"), &span),
            (&json!("after the yield"), &span)
        ],
        "{lines:#?}"
    );
}

/// On Managed Instances nothing is frozen, so a worker takes its next
/// invocation while the work spawned behind its answer still runs: the
/// work ends only once it has seen its worker's `next` parked beside the
/// seven others. A worker that awaited it would never park, and the work
/// gives up (after 10 s) and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_eight_workers_the_work_spawned_behind_an_answer_is_not_awaited() {
    let api = Arc::new(Mutex::new(FakeRuntimeApi::open(Vec::new())));
    let uri = api.lock().expect("api").uri();
    let parked = {
        let api = api.clone();
        move || api.lock().expect("api").parked()
    };
    let (saw, seen) = tokio::sync::oneshot::channel::<bool>();
    let saw = Arc::new(Mutex::new(Some(saw)));
    let service = {
        let (parked, saw) = (parked.clone(), saw.clone());
        service_fn(move |_request: Request| {
            let (parked, saw) = (parked.clone(), saw.clone());
            lambda_host::spawn(async move {
                let parked_again = async {
                    while parked() < 8 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                };
                let parked = tokio::time::timeout(Duration::from_secs(10), parked_again)
                    .await
                    .is_ok();
                if let Some(saw) = saw.lock().expect("saw").take() {
                    let _ = saw.send(parked);
                }
            });
            std::future::ready(Ok::<_, Infallible>(Response::new(Body::from("fine"))))
        })
    };
    let serving = tokio::spawn(
        Lambda::new(uri, function_config())
            .with_concurrency(Concurrency::new(NonZeroU32::new(8).expect("eight")))
            .serve(service),
    );
    let started = std::time::Instant::now();
    while parked() < 8 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "eight workers park their next"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    api.lock()
        .expect("api")
        .push(Invocation::new("behind", http_event("fine")));
    let parked_while_the_work_ran = seen.await.expect("the work ran");
    api.lock().expect("api").close();
    let _ = serving.await.expect("the loop ended");

    assert!(
        parked_while_the_work_ran,
        "the worker waited for the work spawned behind its answer before its next"
    );
    let answered = api.lock().expect("api").next_post();
    assert_eq!(answered.request_id(), "behind");
    assert!(answered.path.ends_with("/response"), "{}", answered.path);
}
