use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use http_body_util::StreamBody;
use lambda_http::http::HeaderValue;
use lambda_http::lambda_runtime::MetadataPrelude;
use serde_json::json;

use super::*;
use crate::env::Concurrency;
use crate::test_util::runtime_api::{FakeRuntimeApi, Fault, Posted};

/// `lambda_runtime`'s own prelude for the same response.
fn upstream_prelude(status: StatusCode, headers: &HeaderMap) -> Vec<u8> {
    let mut headers = headers.clone();
    let cookies = headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|cookie| String::from_utf8_lossy(cookie.as_bytes()).into_owned())
        .collect();
    headers.remove(SET_COOKIE);
    headers
        .entry(CONTENT_TYPE)
        .or_insert(HeaderValue::from_static("application/octet-stream"));
    serde_json::to_vec(&MetadataPrelude {
        status_code: status,
        headers,
        cookies,
    })
    .unwrap()
}

#[test]
fn the_prelude_is_byte_for_byte_the_one_lambda_http_streams() {
    let header = |name: &'static str, value: &'static [u8]| {
        (
            HeaderName::from_static(name),
            HeaderValue::from_bytes(value).unwrap(),
        )
    };
    type Header = (HeaderName, HeaderValue);
    let cases: Vec<(&str, StatusCode, Vec<Header>)> = vec![
        ("no headers", StatusCode::OK, vec![]),
        (
            "a content type of its own",
            StatusCode::CREATED,
            vec![header("content-type", b"text/event-stream"), header("x-a", b"1")],
        ),
        (
            "cookies and a header with two values",
            StatusCode::NOT_FOUND,
            vec![
                header("set-cookie", b"a=1; Path=/"),
                header("x-many", b"one"),
                header("set-cookie", b"b=2"),
                header("x-many", b"two"),
            ],
        ),
        (
            "a value that is not text",
            StatusCode::OK,
            vec![header("x-bytes", b"caf\xe9"), header("x-bytes", b"ok")],
        ),
        (
            "a lone value that is not text",
            StatusCode::OK,
            vec![header("x-bytes", b"\xff")],
        ),
    ];
    for (case, status, pairs) in cases {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name, value);
        }
        let ours = prelude(status, headers.clone());
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&upstream_prelude(status, &headers)),
            "{case}"
        );
    }
}

#[test]
fn the_prelude_puts_cookies_apart_and_defaults_the_content_type() {
    let mut headers = HeaderMap::new();
    headers.append(SET_COOKIE, HeaderValue::from_static("a=1"));
    headers.append("x-many", HeaderValue::from_static("one"));
    headers.append("x-many", HeaderValue::from_static("two"));
    let bytes = prelude(StatusCode::ACCEPTED, headers);
    let prelude: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        prelude,
        json!({
            "statusCode": 202,
            "headers": { "x-many": ["one", "two"], "content-type": "application/octet-stream" },
            "cookies": ["a=1"],
        })
    );
}

type Chunk = Result<Frame<Bytes>, Error>;

/// A body of `frames`, `every` apart, then `end` (an error, a panic or
/// nothing more); `dropped` is set when the body is dropped.
fn timed_body(
    frames: Vec<&'static str>,
    every: Duration,
    end: End,
    dropped: Arc<AtomicBool>,
) -> impl HttpBody<Data = Bytes, Error = Error> + Unpin {
    struct OnDrop(Arc<AtomicBool>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let guard = OnDrop(dropped);
    let frames = stream::iter(frames).then(move |frame| async move {
        tokio::time::sleep(every).await;
        Ok::<_, Error>(Frame::data(Bytes::from_static(frame.as_bytes())))
    });
    let end = stream::once(async move {
        let _guard = guard;
        match end {
            End::Whole => None,
            End::Error => Some(Err::<Frame<Bytes>, Error>("the upstream feed broke".into())),
            End::Panic => panic!("a bug in the body"),
            End::Never => std::future::pending().await,
        }
    })
    .filter_map(|chunk: Option<Chunk>| async move { chunk });
    StreamBody::new(Box::pin(frames.chain(end)))
}

#[derive(Clone, Copy)]
enum End {
    Whole,
    Error,
    Panic,
    Never,
}

/// Streams `body` to a stand-in with `fault` queued: how it ended, and
/// what the stand-in read.
async fn stream_to_stand_in<B>(
    body: B,
    fault: Option<Fault>,
    cut: Option<Instant>,
) -> (Ended, Posted, Instant)
where
    B: HttpBody + Unpin,
    B::Data: Into<Bytes>,
    B::Error: Into<Error>,
{
    let stand_in = FakeRuntimeApi::start(vec![]);
    if let Some(fault) = fault {
        stand_in.fail_answer(fault);
    }
    let api = RuntimeApi::new(stand_in.uri(), Concurrency::ONE);
    let response = Response::builder()
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, "text/event-stream")
        .body(body)
        .unwrap();
    let invocation_id = HeaderValue::from_static("inv-1");
    let ended = answer(&api, "req-1", Some(&invocation_id), response, cut).await;
    let ended_at = Instant::now();
    let posted = tokio::task::spawn_blocking(move || stand_in.next_post())
        .await
        .unwrap();
    (ended, posted, ended_at)
}

#[tokio::test]
async fn a_whole_stream_is_posted_as_it_comes_prelude_first_and_without_trailers() {
    let dropped = Arc::new(AtomicBool::new(false));
    let body = timed_body(
        vec!["data: 1\n\n", "data: 2\n\n", "data: 3\n\n"],
        Duration::from_millis(150),
        End::Whole,
        dropped,
    );
    let (ended, posted, _) = stream_to_stand_in(body, None, None).await;

    assert!(matches!(ended, Ended::Whole), "{ended:?}");
    assert_eq!(posted.path, "/2018-06-01/runtime/invocation/req-1/response");
    for (name, value) in [
        ("lambda-runtime-function-response-mode", "streaming"),
        ("transfer-encoding", "chunked"),
        (
            "content-type",
            "application/vnd.awslambda.http-integration-response",
        ),
        ("lambda-runtime-invocation-id", "inv-1"),
    ] {
        assert_eq!(posted.header(name), Some(value), "{name}");
    }
    let trailer = posted.header("trailer").unwrap().to_ascii_lowercase();
    assert!(
        trailer.contains("lambda-runtime-function-error-type")
            && trailer.contains("lambda-runtime-function-error-body"),
        "{trailer}"
    );
    let stream = posted.stream.unwrap();
    assert_eq!(
        stream.prelude,
        json!({ "statusCode": 200, "headers": { "content-type": "text/event-stream" }, "cookies": [] })
    );
    assert_eq!(stream.text(), "data: 1\n\ndata: 2\n\ndata: 3\n\n");
    assert!(stream.ended && stream.trailers.is_empty(), "{stream:?}");
    // The prelude, the delimiter, then each frame in its own chunk, as it
    // was made.
    assert_eq!(stream.chunks.len(), 5, "{:?}", stream.chunks);
    assert_eq!(stream.chunks[1].1, 8, "the delimiter alone");
    let first_frame = stream.chunks[2].0;
    let last_frame = stream.chunks[4].0;
    assert!(
        last_frame - first_frame >= Duration::from_millis(250),
        "frames spread over {:?}",
        last_frame - first_frame
    );
}

#[tokio::test]
async fn a_body_error_mid_stream_ends_it_with_the_error_trailers() {
    let dropped = Arc::new(AtomicBool::new(false));
    let body = timed_body(vec!["one", "two"], Duration::from_millis(10), End::Error, dropped);
    let (ended, posted, _) = stream_to_stand_in(body, None, None).await;

    assert!(
        matches!(&ended, Ended::Failed(diagnostic) if diagnostic.error_type == "Runtime.StreamError"),
        "{ended:?}"
    );
    let stream = posted.stream.unwrap();
    assert_eq!(stream.text(), "onetwo");
    assert!(stream.ended, "{stream:?}");
    assert_eq!(
        stream.trailer("lambda-runtime-function-error-type"),
        Some("Runtime.StreamError")
    );
    assert_eq!(
        stream.error_body(),
        Some(json!({ "errorType": "Runtime.StreamError", "errorMessage": "the upstream feed broke" }))
    );
}

#[tokio::test]
async fn a_panic_in_the_body_ends_the_stream_with_the_error_trailers() {
    let dropped = Arc::new(AtomicBool::new(false));
    let body = timed_body(
        vec!["one"],
        Duration::from_millis(10),
        End::Panic,
        dropped.clone(),
    );
    let (ended, posted, _) = stream_to_stand_in(body, None, None).await;

    assert!(matches!(ended, Ended::Failed(_)), "{ended:?}");
    let stream = posted.stream.unwrap();
    assert_eq!(stream.text(), "one");
    assert_eq!(
        stream.trailer("lambda-runtime-function-error-type"),
        Some("Runtime.HandlerPanicked")
    );
    assert_eq!(
        stream.error_body().unwrap()["errorMessage"],
        "the response body panicked: a bug in the body"
    );
    assert!(dropped.load(Ordering::SeqCst), "the body was dropped");
}

#[tokio::test]
async fn a_stream_still_running_at_the_cut_ends_there_with_the_error_trailers() {
    let dropped = Arc::new(AtomicBool::new(false));
    let body = timed_body(
        vec!["one"],
        Duration::from_millis(10),
        End::Never,
        dropped.clone(),
    );
    let cut = Instant::now() + Duration::from_millis(300);
    let (ended, posted, ended_at) =
        tokio::time::timeout(Duration::from_secs(10), stream_to_stand_in(body, None, Some(cut)))
            .await
            .expect("the stream ended by the cut");

    assert!(
        matches!(&ended, Ended::Failed(diagnostic) if diagnostic.error_type == "Runtime.DeadlineExceeded"),
        "{ended:?}"
    );
    // A timer never fires early; a busy machine only makes it later.
    assert!(
        ended_at >= cut && ended_at - cut < Duration::from_secs(5),
        "ended {:?} after the cut",
        ended_at.saturating_duration_since(cut)
    );
    let stream = posted.stream.unwrap();
    assert_eq!(stream.text(), "one");
    assert_eq!(
        stream.trailer("lambda-runtime-function-error-type"),
        Some("Runtime.DeadlineExceeded")
    );
    assert!(dropped.load(Ordering::SeqCst), "the body was dropped at the cut");
}

#[tokio::test]
async fn the_runtime_api_closing_the_stream_ends_it_at_once_and_drops_the_body() {
    let dropped = Arc::new(AtomicBool::new(false));
    // A body waiting for its first event, which never comes; the
    // stand-in goes once it has read the prelude.
    let body = timed_body(vec![], Duration::ZERO, End::Never, dropped.clone());
    let stand_in = FakeRuntimeApi::start(vec![]);
    stand_in.fail_answer(Fault::DropAfter(1));
    let api = RuntimeApi::new(stand_in.uri(), Concurrency::ONE);
    let response = Response::new(body);
    let ended = tokio::time::timeout(
        Duration::from_secs(10),
        answer(&api, "req-1", None, response, None),
    )
    .await
    .expect("the stream ended when the Runtime API went");

    assert!(matches!(ended, Ended::Lost), "{ended:?}");
    assert!(dropped.load(Ordering::SeqCst), "the body was dropped");
    assert!(
        matches!(stand_in.refused().as_slice(), [(_, Fault::DropAfter(1))]),
        "{:?}",
        stand_in.refused()
    );
}

#[tokio::test]
async fn a_stream_the_runtime_api_refuses_at_once_ends_at_once_and_drops_the_body() {
    let dropped = Arc::new(AtomicBool::new(false));
    let body = timed_body(vec![], Duration::ZERO, End::Never, dropped.clone());
    let stand_in = FakeRuntimeApi::start(vec![]);
    stand_in.fail_answer(Fault::Status(413));
    let api = RuntimeApi::new(stand_in.uri(), Concurrency::ONE);
    let ended = tokio::time::timeout(
        Duration::from_secs(10),
        answer(&api, "req-1", None, Response::new(body), None),
    )
    .await
    .expect("the stream ended when the Runtime API refused it");

    assert!(matches!(ended, Ended::Lost), "{ended:?}");
    assert!(dropped.load(Ordering::SeqCst), "the body was dropped");
}
