//! A service that borrows what `main` built, as the official runtime's
//! `http-shared-resource` and `http-dynamodb` examples lend their client:
//! no `Arc`, no `Clone`. `lambda_host::run` serves it one invocation at a
//! time, or every invocation Lambda Managed Instances send at once,
//! together on `main`'s task.
//!
//! It answers with the requests it has served and the most it has had in
//! flight at once; `?linger=MS` holds a request that long first, as a slow
//! call downstream would. Its log subscriber is the host's, installed
//! before `run` where the official examples call
//! `lambda_http::tracing::init_default_subscriber()`, so that its span
//! (`count`) reaches a sampled invocation's trace.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lambda_http::{Body, Error, Request, RequestExt, Response, service_fn, tracing};
use serde_json::json;

/// What the function counts, for the life of the process.
#[derive(Default)]
struct Counter {
    served: AtomicU64,
    in_flight: AtomicU64,
    most_in_flight: AtomicU64,
}

#[tracing::instrument(skip_all, fields(linger_ms))]
async fn count(counter: &Counter, request: Request) -> Result<Response<Body>, Error> {
    let in_flight = counter.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    counter.most_in_flight.fetch_max(in_flight, Ordering::SeqCst);
    let linger_ms = request
        .query_string_parameters_ref()
        .and_then(|query| query.first("linger"))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(0);
    tracing::Span::current().record("linger_ms", linger_ms);
    tokio::time::sleep(Duration::from_millis(linger_ms)).await;
    counter.in_flight.fetch_sub(1, Ordering::SeqCst);
    let served = counter.served.fetch_add(1, Ordering::SeqCst) + 1;
    let answer = json!({
        "served": served,
        "most_in_flight": counter.most_in_flight.load(Ordering::SeqCst),
    });
    Ok(Response::new(Body::from(answer.to_string())))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_host::logging::init_default_subscriber();
    let counter = Counter::default();
    tracing::info!("counter ready");
    lambda_host::run(service_fn(|request: Request| async {
        count(&counter, request).await
    }))
    .await
}
