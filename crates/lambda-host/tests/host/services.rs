//! What `Lambda::serve` (and so `run`) takes, as `lambda_http::run` takes
//! it: a service that borrows from its caller, one that is not `Clone`, a
//! `BoxService`; each served one at a time and, on Managed Instances, with
//! its invocations in flight together. And `serve_concurrent`, whose
//! workers each hold a clone of a `Clone + Send + 'static` service.

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use lambda_host::{Concurrency, Lambda};
use lambda_http::lambda_runtime::Config as FunctionConfig;
use lambda_http::tower::util::BoxService;
use lambda_http::{Body, Request, Response, Service, service_fn};
use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::runtime_fake::{FakeRuntimeApi, Invocation, by_request_id, invocations};

fn lambda(api: &FakeRuntimeApi, workers: u32) -> Lambda {
    let concurrency = Concurrency::new(NonZeroU32::new(workers).expect("a positive integer"));
    Lambda::new(api.uri(), FunctionConfig::default()).with_concurrency(concurrency)
}

fn http_event(body: &str) -> Value {
    let mut event: Value = serde_json::from_str(&crate::data("http-api.json")).expect("JSON");
    event["body"] = json!(body);
    event
}

/// Each invocation's answered body, in the order they were sent.
fn bodies(api: &FakeRuntimeApi, sent: &[Invocation]) -> Vec<String> {
    let answers = by_request_id(api.posted.try_iter().collect());
    sent.iter()
        .map(|invocation| {
            let posted = &answers[&invocation.id];
            assert!(
                posted.path.ends_with("/response"),
                "{}: {posted:?}",
                invocation.id
            );
            posted.body["body"].as_str().expect("a body").to_owned()
        })
        .collect()
}

/// State a function builds in `main` and lends to its service.
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl InFlight {
    fn new() -> Self {
        Self {
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        }
    }

    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_service_that_borrows_from_its_caller_answers_one_invocation_at_a_time() {
    let sent = invocations(3, |n| http_event(&format!("plant {n}")));
    let api = FakeRuntimeApi::start(sent.clone());
    let greeting = String::from("hello");
    let in_flight = InFlight::new();

    let _ = lambda(&api, 1)
        .serve(service_fn(|request: Request| {
            let (greeting, in_flight) = (&greeting, &in_flight);
            async move {
                in_flight.enter();
                tokio::task::yield_now().await;
                in_flight.leave();
                let body = String::from_utf8_lossy(request.body().as_ref()).into_owned();
                Ok::<_, Infallible>(format!("{greeting}, {body}"))
            }
        }))
        .await;

    assert_eq!(
        bodies(&api, &sent),
        ["hello, plant 1", "hello, plant 2", "hello, plant 3"]
    );
    assert_eq!(in_flight.most.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_service_that_borrows_from_its_caller_has_eight_invocations_in_flight_at_once_on_one_task() {
    let sent = invocations(16, |n| http_event(&n.to_string()));
    let api = FakeRuntimeApi::holding(sent.clone(), 8);
    // Eight calls meet here, or none goes on: the answers below prove that
    // eight were in the service together.
    let met = Barrier::new(8);
    let in_flight = InFlight::new();

    let ended = lambda(&api, 8)
        .serve(service_fn(|request: Request| {
            let (met, in_flight) = (&met, &in_flight);
            async move {
                in_flight.enter();
                met.wait().await;
                in_flight.leave();
                Ok::<_, Infallible>(Response::new(request.into_body()))
            }
        }))
        .await;

    assert_eq!(
        ended.expect_err("the stand-in ends the loop").to_string(),
        "the Runtime API answered 403 Forbidden to next"
    );
    let expected: Vec<String> = (1..=16).map(|n| n.to_string()).collect();
    assert_eq!(bodies(&api, &sent), expected);
    assert_eq!(in_flight.most.load(Ordering::SeqCst), 8);
}

/// A service with state of its own that is not `Clone`: it numbers the
/// requests it is called with.
struct Numbering {
    called: u64,
}

impl Service<Request> for Numbering {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: Request) -> Self::Future {
        self.called += 1;
        let number = self.called;
        Box::pin(async move {
            tokio::task::yield_now().await;
            Ok(Response::new(Body::from(number.to_string())))
        })
    }
}

#[tokio::test]
async fn a_service_that_is_not_clone_is_called_once_per_invocation_classic_and_eight_at_once() {
    for workers in [1, 8] {
        let sent = invocations(24, |n| http_event(&n.to_string()));
        let api = FakeRuntimeApi::holding(sent.clone(), workers);

        let _ = lambda(&api, u32::try_from(workers).expect("a few"))
            .serve(Numbering { called: 0 })
            .await;

        let mut numbers: Vec<u64> = bodies(&api, &sent)
            .iter()
            .map(|body| body.parse().expect("a number"))
            .collect();
        numbers.sort_unstable();
        assert_eq!(
            numbers,
            (1..=24).collect::<Vec<u64>>(),
            "one call each with {workers} workers"
        );
        assert_eq!(api.max_parked(), workers);
    }
}

#[tokio::test]
async fn a_box_service_is_served_as_any_other() {
    let sent = invocations(2, |n| http_event(&format!("box {n}")));
    let api = FakeRuntimeApi::start(sent.clone());
    let service = BoxService::new(service_fn(|request: Request| async move {
        Ok::<_, Infallible>(Response::new(request.into_body()))
    }));

    let _ = lambda(&api, 1).serve(service).await;

    assert_eq!(bodies(&api, &sent), ["box 1", "box 2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_concurrent_gives_each_of_eight_workers_its_own_clone_and_has_eight_in_flight() {
    static CLONES: AtomicUsize = AtomicUsize::new(0);

    #[derive(Debug)]
    struct Counted;
    impl Clone for Counted {
        fn clone(&self) -> Self {
            CLONES.fetch_add(1, Ordering::SeqCst);
            Self
        }
    }

    let sent = invocations(16, |n| http_event(&n.to_string()));
    let api = FakeRuntimeApi::holding(sent.clone(), 8);
    let (counted, met) = (Counted, Arc::new(Barrier::new(8)));

    let _ = lambda(&api, 8)
        .serve_concurrent(service_fn(move |request: Request| {
            let _ = &counted;
            let met = met.clone();
            async move {
                met.wait().await;
                Ok::<_, Infallible>(Response::new(request.into_body()))
            }
        }))
        .await;

    let expected: Vec<String> = (1..=16).map(|n| n.to_string()).collect();
    assert_eq!(bodies(&api, &sent), expected);
    assert_eq!(CLONES.load(Ordering::SeqCst), 8, "one clone per worker");
    assert_eq!(api.max_parked(), 8);
}

#[tokio::test]
async fn the_request_carries_the_invocations_trace_id_as_x_amzn_trace_id_as_lambda_http_sets_it() {
    let mut event = http_event("traced");
    event["headers"]["x-amzn-trace-id"] = json!("Root=1-00000000-000000000000000000000000");
    let sent = vec![Invocation::new("traced", event)];
    let api = FakeRuntimeApi::start(sent.clone());

    let _ = lambda(&api, 1)
        .serve(service_fn(|request: Request| async move {
            let header = request.headers().get("x-amzn-trace-id").cloned();
            Ok::<_, Infallible>(Response::new(Body::from(
                header.map(|value| value.as_bytes().to_vec()).unwrap_or_default(),
            )))
        }))
        .await;

    assert_eq!(bodies(&api, &sent), [sent[0].trace_id.clone()]);
}
