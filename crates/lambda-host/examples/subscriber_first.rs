//! A function as the official runtime's examples write it, with only
//! `lambda_http::run(` changed to `lambda_host::run(`: it installs
//! `lambda_http`'s default subscriber first. The host keeps that
//! subscriber, which has no trace layer, and says so once at start when
//! Lambda asks for traces: a sampled invocation sends its SERVER span, but
//! not the function's own span (`greet`). Replacing the first line of
//! `main` with `lambda_host::logging::init_default_subscriber()` traces it
//! too (as the `borrowed` example does).

use lambda_http::{Body, Error, Request, Response, service_fn, tracing};

#[tracing::instrument(skip_all)]
async fn greet(request: Request) -> Result<Response<Body>, Error> {
    tracing::info!("greeting");
    Ok(Response::new(Body::from(format!(
        "hello from {}",
        request.uri().path()
    ))))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    lambda_host::run(service_fn(greet)).await
}
