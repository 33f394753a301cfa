//! A streamed answer, as Lambda's Runtime API takes it for function URLs in
//! `RESPONSE_STREAM` mode and API Gateway's `STREAM` mode: the HTTP
//! integration's prelude (status, headers, cookies) as JSON, eight NUL
//! bytes, then the response body's frames as the service yields them.
//!
//! The frames go through a channel of one, so that the service's body is
//! polled no faster than the Runtime API reads (memory stays flat however
//! long the stream), and on the invocation's own task, inside its trace
//! scope and its `tracing` span. What ends a stream early costs that
//! invocation alone: a body error, a panic in the body, or the deadline
//! ends it with the error trailers Lambda reads
//! (`Lambda-Runtime-Function-Error-Type` and `-Body`, as real HTTP
//! trailers); the Runtime API closing the connection ends the feeding.

use std::any::Any;
use std::convert::Infallible;
use std::fmt::Debug;
use std::panic::AssertUnwindSafe;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Bytes, Frame};
use lambda_http::http::header::{CONTENT_TYPE, GetAll, SET_COOKIE};
use lambda_http::http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use lambda_http::lambda_runtime::Diagnostic;
use lambda_http::{Error, tracing};
use lambda_runtime_api_client::body::Body as ApiBody;
use serde::ser::{Serialize, SerializeStruct, Serializer};
use tokio::sync::{mpsc, oneshot};

use super::api::{ERROR_BODY, ERROR_TYPE, RuntimeApi};
use crate::deadline;

/// Between the prelude and the body.
const DELIMITER: [u8; 8] = [0; 8];

/// `Content-Type` when the response names none, as `lambda_runtime` sets it
/// for a streamed answer.
const DEFAULT_CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/octet-stream");

/// How a streamed answer ended.
#[derive(Debug)]
pub(super) enum Ended {
    /// The body's last frame went to the Runtime API, and it took the answer.
    Whole,
    /// Ended early with the error trailers: the body failed or panicked, or
    /// the deadline came.
    Failed(Diagnostic),
    /// The Runtime API closed the stream before its end, or refused it.
    Lost,
}

/// Streams `response` as the invocation's answer: its prelude, then its
/// body until the end, an error, a panic, the Runtime API going away, or
/// `cut`, whichever comes first; then waits for the Runtime API's status,
/// as a buffered answer's post does.
pub(super) async fn answer<B>(
    api: &RuntimeApi,
    request_id: &str,
    invocation_id: Option<&HeaderValue>,
    response: Response<B>,
    cut: Option<Instant>,
) -> Ended
where
    B: HttpBody + Unpin,
    B::Data: Into<Bytes>,
    B::Error: Into<Error>,
{
    let (parts, body) = response.into_parts();
    let prelude = prelude(parts.status, parts.headers);
    let (data, frames) = mpsc::channel(1);
    let (trailers, trailer) = oneshot::channel();
    let streamed = Streamed {
        frames,
        trailer: Some(trailer),
    };
    let mut posted = pin!(api.stream(request_id, invocation_id, ApiBody::new(streamed)));
    let fed = tokio::select! {
        fed = feed(prelude, body, data, trailers, cut) => fed,
        // Answered before the stream ended (refused, or the invocation is
        // over for Lambda), or gone: nothing more of it is read, and the
        // body is dropped here.
        early = &mut posted => return lost(early),
    };
    match (posted.await, fed) {
        (Ok(status), Fed::Whole) if status.is_success() => Ended::Whole,
        (_, Fed::Failed(diagnostic)) => Ended::Failed(diagnostic),
        (posted, _) => lost(posted),
    }
}

/// A stream that did not reach the Runtime API whole, and why.
fn lost(posted: Result<StatusCode, Error>) -> Ended {
    match posted {
        Ok(status) if status.is_success() => {
            tracing::warn!("the Runtime API took a streamed answer that had not ended")
        }
        // Logged where the status was read.
        Ok(_) => {}
        Err(cause) => {
            tracing::warn!(cause = %cause, "the streamed answer did not reach the Runtime API whole")
        }
    }
    Ended::Lost
}

/// The HTTP integration's prelude:
/// `{"statusCode":…,"headers":{…},"cookies":[…]}`, byte for byte as
/// `lambda_http` writes it. `Set-Cookie` goes to `cookies`; a header with
/// several values is a list of them; a value that is not text is left out.
pub(super) fn prelude(status: StatusCode, mut headers: HeaderMap) -> Bytes {
    let cookies = headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|cookie| String::from_utf8_lossy(cookie.as_bytes()).into_owned())
        .collect();
    headers.remove(SET_COOKIE);
    headers.entry(CONTENT_TYPE).or_insert(DEFAULT_CONTENT_TYPE);
    let prelude = Prelude {
        status,
        headers: &headers,
        cookies,
    };
    // A map of strings cannot fail to serialize; the fallback keeps the
    // path free of panics regardless.
    let bytes = serde_json::to_vec(&prelude)
        .unwrap_or_else(|_| format!(r#"{{"statusCode":{}}}"#, status.as_u16()).into_bytes());
    Bytes::from(bytes)
}

struct Prelude<'a> {
    status: StatusCode,
    headers: &'a HeaderMap,
    cookies: Vec<String>,
}

impl Serialize for Prelude<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut prelude = serializer.serialize_struct("Prelude", 3)?;
        prelude.serialize_field("statusCode", &self.status.as_u16())?;
        prelude.serialize_field("headers", &Headers(self.headers))?;
        prelude.serialize_field("cookies", &self.cookies)?;
        prelude.end()
    }
}

struct Headers<'a>(&'a HeaderMap);

impl Serialize for Headers<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            self.0
                .keys()
                .map(|name| (name.as_str(), Values(self.0.get_all(name)))),
        )
    }
}

struct Values<'a>(GetAll<'a, HeaderValue>);

impl Serialize for Values<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut values = self.0.iter();
        if let (Some(only), None) = (values.next(), values.next())
            && let Ok(text) = only.to_str()
        {
            return serializer.serialize_str(text);
        }
        serializer.collect_seq(self.0.iter().filter_map(|value| value.to_str().ok()))
    }
}

/// How the feeding of a stream ended.
enum Fed {
    Whole,
    Failed(Diagnostic),
    /// The Runtime API's side of the channel went away.
    Closed,
}

/// Sends the prelude, then each frame of `body`, one at a time; on a body
/// error, a panic or the cut, the error trailers instead of the rest.
async fn feed<B>(
    prelude: Bytes,
    body: B,
    data: mpsc::Sender<Bytes>,
    trailers: oneshot::Sender<HeaderMap>,
    cut: Option<Instant>,
) -> Fed
where
    B: HttpBody + Unpin,
    B::Data: Into<Bytes>,
    B::Error: Into<Error>,
{
    let forwarded = AssertUnwindSafe(forward(prelude, body, &data)).catch_unwind();
    let diagnostic = match deadline::until(cut, forwarded).await {
        Some(Ok(Fed::Failed(diagnostic))) => diagnostic,
        Some(Ok(fed)) => return fed,
        Some(Err(panic)) => diagnostic(
            "Runtime.HandlerPanicked",
            format!("the response body panicked: {}", panic_message(panic.as_ref())),
        ),
        None => diagnostic(
            "Runtime.DeadlineExceeded",
            "the response body had not ended shortly before the invocation's deadline".to_owned(),
        ),
    };
    tracing::error!(error_type = %diagnostic.error_type, error = %diagnostic.error_message, "the streamed answer ends with an error");
    // The frame already in the channel goes first, then the trailers.
    drop(data);
    let _ = trailers.send(error_trailers(&diagnostic));
    Fed::Failed(diagnostic)
}

async fn forward<B>(prelude: Bytes, mut body: B, data: &mpsc::Sender<Bytes>) -> Fed
where
    B: HttpBody + Unpin,
    B::Data: Into<Bytes>,
    B::Error: Into<Error>,
{
    // The delimiter in a chunk of its own, as `lambda_runtime` sends it:
    // `cargo lambda watch` reads the prelude and the delimiter as the first
    // two chunks, whatever their bytes.
    for head in [prelude, Bytes::from_static(&DELIMITER)] {
        if data.send(head).await.is_err() {
            return Fed::Closed;
        }
    }
    loop {
        // Waiting for the body's next frame (an event that comes once a
        // minute), the stream still ends when the Runtime API goes.
        let frame = tokio::select! {
            frame = body.frame() => frame,
            () = data.closed() => return Fed::Closed,
        };
        let bytes: Bytes = match frame {
            None => return Fed::Whole,
            Some(Err(err)) => {
                let err: Error = err.into();
                return Fed::Failed(diagnostic("Runtime.StreamError", err.to_string()));
            }
            // The body's own trailers are not the client's: Lambda's
            // trailers are for the runtime's errors.
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data.into(),
                Err(_) => continue,
            },
        };
        // An empty chunk would end a chunked body early.
        if !bytes.is_empty() && data.send(bytes).await.is_err() {
            return Fed::Closed;
        }
    }
}

fn diagnostic(error_type: &str, error_message: String) -> Diagnostic {
    Diagnostic {
        error_type: error_type.to_owned(),
        error_message,
    }
}

/// `Lambda-Runtime-Function-Error-Type` and `-Body` (the diagnostic's
/// JSON, base64), as Lambda reads them.
fn error_trailers(diagnostic: &Diagnostic) -> HeaderMap {
    let json = serde_json::to_vec(diagnostic).unwrap_or_default();
    let body = base64_simd::STANDARD.encode_to_string(json);
    let mut trailers = HeaderMap::with_capacity(2);
    let error_type = HeaderValue::from_str(&diagnostic.error_type)
        .unwrap_or_else(|_| HeaderValue::from_static("Runtime.StreamError"));
    trailers.insert(HeaderName::from_static(ERROR_TYPE), error_type);
    if let Ok(body) = HeaderValue::from_str(&body) {
        trailers.insert(HeaderName::from_static(ERROR_BODY), body);
    }
    trailers
}

/// What a panic said, when it said it with a string.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// The body posted to the Runtime API: the frames as [`feed`] hands them
/// over, then the error trailers if it sent any.
struct Streamed {
    frames: mpsc::Receiver<Bytes>,
    trailer: Option<oneshot::Receiver<HeaderMap>>,
}

impl HttpBody for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(bytes) = ready!(this.frames.poll_recv(cx)) {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        let Some(trailer) = this.trailer.as_mut() else {
            return Poll::Ready(None);
        };
        let trailers = ready!(Pin::new(trailer).poll(cx));
        this.trailer = None;
        Poll::Ready(trailers.ok().map(|trailers| Ok(Frame::trailers(trailers))))
    }
}

#[cfg(test)]
mod tests;
