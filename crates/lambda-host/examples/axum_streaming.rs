//! An axum function whose answers are streamed: server-sent events, one
//! every few milliseconds, each made inside a span of its own. With
//! `lambda_http::run_with_streaming_response` in place of
//! `lambda_host::run_with_streaming_response`, it runs on the official
//! runtime unchanged. Deployed behind a function URL with
//! `InvokeMode: RESPONSE_STREAM` (or an API Gateway REST API in its
//! `STREAM` mode), a client reads each event as it is sent.
//!
//! - `GET /events/{count}/{every_ms}`: `count` events, `every_ms` apart;
//! - `GET /fails/{count}`: `count` events, then the body fails;
//! - `GET /panics`: one event, then the body panics;
//! - `GET /forever`: an event every 100 ms until the deadline;
//! - `GET /bytes/{mb}`: `mb` MB of bytes, 64 KB at a time, as fast as they
//!   are read.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::Response;
use axum::routing::get;
use futures_util::stream::{self, StreamExt};
use lambda_http::{Error, tracing};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let app = Router::new()
        .route("/events/{count}/{every_ms}", get(events))
        .route("/fails/{count}", get(fails))
        .route("/panics", get(panics))
        .route("/forever", get(forever))
        .route("/bytes/{mb}", get(bytes));
    lambda_host::run_with_streaming_response(app).await
}

fn event_stream(body: Body) -> Response {
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap_or_default()
}

/// One event, made in a span of its own, after `pause`.
#[tracing::instrument(skip(pause))]
async fn event(number: u64, pause: Duration) -> Bytes {
    tokio::time::sleep(pause).await;
    tracing::info!("event sent");
    Bytes::from(format!("data: {number}\n\n"))
}

async fn events(Path((count, every_ms)): Path<(u64, u64)>) -> Response {
    let pause = Duration::from_millis(every_ms);
    let events = stream::iter(1..=count)
        .then(move |number| async move { Ok::<_, Infallible>(event(number, pause).await) });
    event_stream(Body::from_stream(events))
}

async fn fails(Path(count): Path<u64>) -> Response {
    let events = stream::iter(1..=count)
        .then(|number| async move { Ok(event(number, Duration::from_millis(10)).await) })
        .chain(stream::once(async {
            Err::<Bytes, Error>("the feed behind the events broke".into())
        }));
    event_stream(Body::from_stream(events))
}

#[expect(clippy::panic, reason = "a bug on purpose: it costs this stream alone")]
async fn panics() -> Response {
    let events = stream::iter(1..=2_u64).then(|number| async move {
        if number == 2 {
            panic!("a bug in the second event");
        }
        Ok::<_, Infallible>(event(number, Duration::from_millis(10)).await)
    });
    event_stream(Body::from_stream(events))
}

async fn forever() -> Response {
    let events = stream::iter(1_u64..)
        .then(|number| async move { Ok::<_, Infallible>(event(number, Duration::from_millis(100)).await) });
    event_stream(Body::from_stream(events))
}

async fn bytes(Path(mb): Path<usize>) -> Response {
    const CHUNK: usize = 64 << 10;
    let chunk = Bytes::from(vec![b'x'; CHUNK]);
    let chunks = stream::repeat(chunk)
        .take(mb * (1 << 20) / CHUNK)
        .map(Ok::<_, Infallible>);
    Response::builder()
        .header(CONTENT_TYPE, "application/octet-stream")
        .body(Body::from_stream(chunks))
        .unwrap_or_default()
}
