//! A function that drains on SIGTERM: `spawn_graceful_shutdown_handler`
//! (the `graceful-shutdown` feature) before `run`, as with
//! `lambda_runtime`'s. When Lambda shuts the environment down, the
//! invocations in flight are answered, then the hook runs, then the
//! process exits 0.
//!
//! `?linger=MS` holds a request that long, as a slow call downstream would.

use std::time::Duration;

use lambda_http::{Body, Error, Request, RequestExt, Response, service_fn, tracing};

async fn linger(request: Request) -> Result<Response<Body>, Error> {
    let linger_ms = request
        .query_string_parameters_ref()
        .and_then(|query| query.first("linger"))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(linger_ms)).await;
    Ok(Response::new(Body::from(format!(
        "answered after {linger_ms} ms"
    ))))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_host::logging::init_default_subscriber();
    lambda_host::spawn_graceful_shutdown_handler(|| async {
        tracing::info!("the shutdown hook ran");
    })
    .await;
    lambda_host::run(service_fn(linger)).await
}
