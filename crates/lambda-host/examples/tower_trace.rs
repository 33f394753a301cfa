//! A `tower::ServiceBuilder` stack with tower-http's `TraceLayer`, as the
//! official runtime's `http-tower-trace` example serves it, on a log
//! subscriber of the function's own: the host keeps it, and its
//! [`lambda_host::trace::layer`] on it turns the function's `tracing` spans
//! into the trace's spans (here, `TraceLayer`'s `request` span, at INFO).

use lambda_http::tower::ServiceBuilder;
use lambda_http::tracing::subscriber::layer::SubscriberExt;
use lambda_http::tracing::subscriber::util::SubscriberInitExt;
use lambda_http::tracing::subscriber::{fmt, registry};
use lambda_http::tracing::{self, Level};
use lambda_http::{Error, Request, Response};
use tower_http::trace::{DefaultMakeSpan, DefaultOnRequest, DefaultOnResponse, TraceLayer};

async fn handler(_request: Request) -> Result<Response<String>, Error> {
    tracing::info!("handling a request");
    Ok(Response::new("Success".into()))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    registry()
        .with(fmt::layer().without_time())
        .with(lambda_host::trace::layer())
        .init();

    let layer = TraceLayer::new_for_http()
        .make_span_with(DefaultMakeSpan::new().level(Level::INFO))
        .on_request(DefaultOnRequest::new().level(Level::INFO))
        .on_response(DefaultOnResponse::new().level(Level::INFO));
    let service = ServiceBuilder::new().layer(layer).service_fn(handler);

    lambda_host::run(service).await
}
