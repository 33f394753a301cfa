//! The function's side of the Lambda Runtime API: `next`, the answer (or
//! the error report) of each invocation, and the init error; each call
//! tried again after a short pause when it fails at the transport level or
//! with a 5xx.

use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Bytes;
use lambda_http::http::header::{CONTENT_TYPE, TRAILER, TRANSFER_ENCODING, USER_AGENT};
use lambda_http::http::request::Builder;
use lambda_http::http::{
    Error as HttpError, HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri,
};
use lambda_http::lambda_runtime::Diagnostic;
use lambda_http::{Error, tracing};
use lambda_runtime_api_client::body::Body as ApiBody;
use lambda_runtime_api_client::{PooledClient, build_request};

use crate::env::Concurrency;

const API_PREFIX: &str = "/2018-06-01/runtime";
/// `API_PREFIX`'s next invocation: a static URI, neither formatted nor
/// copied for each.
const NEXT: &str = "/2018-06-01/runtime/invocation/next";
#[cfg(feature = "graceful-shutdown")]
const EXTENSION_PREFIX: &str = "/2020-01-01/extension";
// Names, not strings: a lookup by a string parses it into a name first.
pub(super) const REQUEST_ID: HeaderName = HeaderName::from_static("lambda-runtime-aws-request-id");
pub(super) const DEADLINE_MS: HeaderName = HeaderName::from_static("lambda-runtime-deadline-ms");
pub(super) const INVOCATION_ID: HeaderName = HeaderName::from_static("lambda-runtime-invocation-id");
pub(super) const TRACE_ID: HeaderName = HeaderName::from_static("lambda-runtime-trace-id");
pub(super) const INVOKED_FUNCTION_ARN: HeaderName =
    HeaderName::from_static("lambda-runtime-invoked-function-arn");
pub(super) const CLIENT_CONTEXT: HeaderName = HeaderName::from_static("lambda-runtime-client-context");
pub(super) const COGNITO_IDENTITY: HeaderName = HeaderName::from_static("lambda-runtime-cognito-identity");
/// Lambda's tenant isolation mode: the tenant the invocation is for.
pub(super) const TENANT_ID: HeaderName = HeaderName::from_static("lambda-runtime-aws-tenant-id");
pub(super) const ERROR_TYPE: &str = "lambda-runtime-function-error-type";
/// The trailer that carries a streamed answer's error, base64.
pub(super) const ERROR_BODY: &str = "lambda-runtime-function-error-body";
const RESPONSE_MODE: &str = "lambda-runtime-function-response-mode";
/// A streamed answer's body: the HTTP integration's prelude, eight NUL
/// bytes, then the response body.
const STREAMED_CONTENT_TYPE: &str = "application/vnd.awslambda.http-integration-response";

/// The function's side of the Lambda Runtime API.
#[derive(Debug)]
pub(crate) struct RuntimeApi {
    /// `lambda_runtime`'s own client. Its `call` rebuilds each request's
    /// URI from text, about 2 K instructions a request
    /// (docs/upstream/lambda-runtime-api-client-set-origin.md): kept, as
    /// the pool and its connections are its to manage.
    client: PooledClient,
    /// The `User-Agent` `build_request` sets, taken from it once: set as a
    /// value, it is neither parsed nor checked nor copied again for each
    /// request (about 650 instructions a request).
    user_agent: Option<HeaderValue>,
    /// [`NEXT`], parsed once: a clone of a URI of static text is a copy of
    /// its parts, where `Uri::from_static` parses it (about 500
    /// instructions an invocation).
    next: Uri,
}

impl RuntimeApi {
    /// Each worker keeps one connection busy in its long-polling `next`, and
    /// its answer needs one too: the pool keeps as many idle as there are
    /// workers, so that no answer waits for a connection to be opened.
    pub(crate) fn new(endpoint: Uri, concurrency: Concurrency) -> Self {
        let pool_size = usize::try_from(concurrency.get()).unwrap_or(usize::MAX);
        Self {
            client: PooledClient::builder()
                .with_endpoint(endpoint)
                .with_pool_size(pool_size)
                .build(),
            user_agent: build_request()
                .headers_ref()
                .and_then(|headers| headers.get(USER_AGENT))
                .cloned(),
            next: Uri::from_static(NEXT),
        }
    }

    /// A request to the Runtime API, with the headers `build_request` gives
    /// every request.
    fn request(&self) -> Builder {
        match &self.user_agent {
            Some(user_agent) => Request::builder().header(USER_AGENT, user_agent.clone()),
            None => build_request(),
        }
    }

    /// [`request`](Self::request) for `next` and the answers, made as a
    /// `Request` rather than through its `Builder`, which moves the
    /// request's parts at each step.
    fn request_to(&self, method: Method, uri: Uri, body: ApiBody) -> Result<Request<ApiBody>, HttpError> {
        let Some(user_agent) = &self.user_agent else {
            return build_request().method(method).uri(uri).body(body);
        };
        let mut request = Request::new(body);
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        request.headers_mut().insert(USER_AGENT, user_agent.clone());
        Ok(request)
    }

    /// Tells Lambda that init failed, so that the invoke that started this
    /// execution environment fails with `message` rather than a timeout.
    pub(crate) async fn init_error(&self, message: &str) -> Result<(), Error> {
        let diagnostic = Diagnostic {
            error_type: "Runtime.InitError".to_owned(),
            error_message: message.to_owned(),
        };
        self.post(
            format!("{API_PREFIX}/init/error"),
            Some(&diagnostic.error_type),
            None,
            diagnostic_json(&diagnostic),
        )
        .await
    }

    /// The next invocation: its headers and payload. A transport failure or
    /// a 5xx is tried again (see [`RETRY_PAUSES`]); any other answer but 200
    /// is final.
    pub(super) async fn next(&self) -> Result<(HeaderMap, Bytes), Error> {
        retrying("next", || async {
            let request = self
                .request_to(Method::GET, self.next.clone(), ApiBody::empty())
                .map_err(|err| Attempt::Final(err.into()))?;
            let response = self.client.call(request).await.map_err(Attempt::Again)?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|err| Attempt::Again(err.into()))?
                .to_bytes();
            match parts.status {
                StatusCode::OK => Ok((parts.headers, body)),
                status => Err(Attempt::after(status, "next")),
            }
        })
        .await
    }

    /// The invocation's answer: the front door's JSON. Not an `async fn`,
    /// nor is [`fail`](Self::fail): `post`'s own future, not held and
    /// moved by one more layer.
    pub(super) fn answer(
        &self,
        request_id: &str,
        invocation_id: Option<&HeaderValue>,
        body: Vec<u8>,
    ) -> impl Future<Output = Result<(), Error>> {
        let path = invocation_path(request_id, "/response");
        self.post(path, None, invocation_id, body)
    }

    /// The invocation failed: no answer, and why.
    pub(super) fn fail(
        &self,
        request_id: &str,
        invocation_id: Option<&HeaderValue>,
        diagnostic: &Diagnostic,
    ) -> impl Future<Output = Result<(), Error>> {
        let path = invocation_path(request_id, "/error");
        let body = diagnostic_json(diagnostic);
        self.post(path, Some(&diagnostic.error_type), invocation_id, body)
    }

    /// The invocation's answer in Lambda's streaming mode: `body` is posted
    /// chunked, each frame as it comes, with the error trailers announced
    /// (`stream.rs` writes the body). Posted once, never tried again: a
    /// stream cannot be replayed. The Runtime API's status once it has
    /// read the stream, or why the stream did not reach it.
    pub(super) async fn stream(
        &self,
        request_id: &str,
        invocation_id: Option<&HeaderValue>,
        body: ApiBody,
    ) -> Result<StatusCode, Error> {
        let mut request = self
            .request()
            .method(Method::POST)
            .uri(invocation_path(request_id, "/response"))
            .header(TRANSFER_ENCODING, "chunked")
            .header(RESPONSE_MODE, "streaming")
            .header(CONTENT_TYPE, STREAMED_CONTENT_TYPE)
            .header(TRAILER, ERROR_TYPE)
            .header(TRAILER, ERROR_BODY);
        if let Some(invocation_id) = invocation_id {
            request = request.header(INVOCATION_ID, invocation_id);
        }
        let response = self.client.call(request.body(body)?).await?;
        let status = response.status();
        // As `post` does: the connection goes back to the pool.
        response.into_body().collect().await?;
        if status == StatusCode::GONE {
            tracing::warn!("the Runtime API no longer takes an answer for this invocation (410 Gone)");
        } else if !status.is_success() {
            tracing::error!(
                status = status.as_u16(),
                "the Runtime API refused the invocation's streamed answer"
            );
        }
        Ok(status)
    }

    /// Registers an extension named `name` that takes no events (what has
    /// Lambda send SIGTERM before a shutdown): its identifier.
    #[cfg(feature = "graceful-shutdown")]
    pub(super) async fn register_extension(&self, name: &str) -> Result<String, Error> {
        let request = self
            .request()
            .method(Method::POST)
            .uri(format!("{EXTENSION_PREFIX}/register"))
            .header("lambda-extension-name", name)
            .body(ApiBody::from(r#"{"events":[]}"#))?;
        let response = self.client.call(request).await?;
        let status = response.status();
        let id = response
            .headers()
            .get("lambda-extension-identifier")
            .and_then(|id| id.to_str().ok())
            .map(str::to_owned);
        response.into_body().collect().await?;
        match (status, id) {
            (StatusCode::OK, Some(id)) => Ok(id),
            (status, _) => Err(format!("the Extensions API answered {status} to the registration").into()),
        }
    }

    /// The registered extension's wait for its next event, which, for an
    /// extension that takes none, lasts for the life of the environment.
    #[cfg(feature = "graceful-shutdown")]
    pub(super) async fn extension_next(&self, id: &str) -> Result<(), Error> {
        let request = self
            .request()
            .method(Method::GET)
            .uri(format!("{EXTENSION_PREFIX}/event/next"))
            .header("lambda-extension-identifier", id)
            .body(ApiBody::empty())?;
        let response = self.client.call(request).await?;
        response.into_body().collect().await?;
        Ok(())
    }

    /// An answer's (or an error report's) request, with its error type and
    /// the invocation id it echoes.
    fn answer_request(
        &self,
        path: &str,
        error_type: Option<&str>,
        invocation_id: Option<&HeaderValue>,
        body: Bytes,
    ) -> Result<Request<ApiBody>, HttpError> {
        let mut request = self.request_to(Method::POST, Uri::try_from(path)?, ApiBody::from(body))?;
        let headers = request.headers_mut();
        if let Some(error_type) = error_type {
            headers.append(
                HeaderName::from_static(ERROR_TYPE),
                HeaderValue::from_str(error_type)?,
            );
        }
        if let Some(invocation_id) = invocation_id {
            headers.append(INVOCATION_ID, invocation_id.clone());
        }
        Ok(request)
    }

    /// Posts an answer (or an error report). A transport failure or a 5xx
    /// is tried again; a refusal (4xx) is logged and not: Lambda has decided
    /// about this invocation, and the worker serves on.
    async fn post(
        &self,
        path: String,
        error_type: Option<&str>,
        invocation_id: Option<&HeaderValue>,
        body: Vec<u8>,
    ) -> Result<(), Error> {
        let body = Bytes::from(body);
        let status = retrying("an answer", || async {
            let request = self
                .answer_request(&path, error_type, invocation_id, body.clone())
                .map_err(|err| Attempt::Final(err.into()))?;
            let response = self.client.call(request).await.map_err(Attempt::Again)?;
            let status = response.status();
            // Read the (small) answer to the end, so the connection goes
            // back to the pool instead of being closed and opened again.
            response
                .into_body()
                .collect()
                .await
                .map_err(|err| Attempt::Again(err.into()))?;
            if status.is_server_error() {
                return Err(Attempt::after(status, "an answer"));
            }
            Ok(status)
        })
        .await?;
        if status == StatusCode::GONE {
            // The invocation is over for Lambda (it timed out, or was
            // answered already): nothing to do but take the next one.
            tracing::warn!("the Runtime API no longer takes an answer for this invocation (410 Gone)");
        } else if !status.is_success() {
            // 400 / 403 / 413: Lambda refused this answer; the next `next`
            // tells whether the environment is still usable.
            tracing::error!(
                status = status.as_u16(),
                "the Runtime API refused the invocation's answer"
            );
        }
        Ok(())
    }
}

/// `{API_PREFIX}/invocation/{request_id}{tail}`, put together rather than
/// formatted: `format!` took about 1 K instructions an answer.
fn invocation_path(request_id: &str, tail: &str) -> String {
    const INVOCATION: &str = "/2018-06-01/runtime/invocation/";
    let mut path = String::with_capacity(INVOCATION.len() + request_id.len() + tail.len());
    path.push_str(INVOCATION);
    path.push_str(request_id);
    path.push_str(tail);
    path
}

/// How long a worker waits before each new try of a Runtime API call that
/// failed at the transport level or with a 5xx: 0.8 s in all. Lambda's
/// Runtime API is on the same host; a failure that lasts longer is not a
/// passing one, and the process exits so that Lambda replaces the
/// environment (on Managed Instances nothing else would).
const RETRY_PAUSES: [Duration; 5] = [
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
];

/// One try of a Runtime API call that did not succeed.
enum Attempt {
    /// A transport failure or a 5xx: worth another try.
    Again(Error),
    /// Nothing another try could change.
    Final(Error),
}

impl Attempt {
    fn after(status: StatusCode, call: &str) -> Self {
        let cause = format!("the Runtime API answered {status} to {call}").into();
        if status.is_server_error() {
            Self::Again(cause)
        } else {
            Self::Final(cause)
        }
    }
}

/// Runs `call` until it succeeds, fails for good, or has failed
/// `RETRY_PAUSES.len() + 1` times.
async fn retrying<T, C, F>(what: &str, mut call: C) -> Result<T, Error>
where
    C: FnMut() -> F,
    F: Future<Output = Result<T, Attempt>>,
{
    for pause in RETRY_PAUSES {
        match call().await {
            Ok(value) => return Ok(value),
            Err(Attempt::Final(cause)) => return Err(cause),
            Err(Attempt::Again(cause)) => {
                tracing::warn!(cause = %cause, retry_in_ms = pause.as_millis(), "a Runtime API call ({what}) failed");
                tokio::time::sleep(pause).await;
            }
        }
    }
    call()
        .await
        .map_err(|(Attempt::Again(cause) | Attempt::Final(cause))| cause)
}

/// A diagnostic is two strings, which cannot fail to serialize; the
/// fallback keeps this path free of panics regardless.
fn diagnostic_json(diagnostic: &Diagnostic) -> Vec<u8> {
    serde_json::to_vec(diagnostic).unwrap_or_else(|_| br#"{"errorType":"Runtime.Unknown"}"#.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_request_carries_the_headers_build_request_gives() {
        let api = RuntimeApi::new(Uri::from_static("http://127.0.0.1:9001"), Concurrency::ONE);
        let ours = api.request().body(()).unwrap();
        let theirs = build_request().body(()).unwrap();
        assert_eq!(ours.headers(), theirs.headers());
        assert!(ours.headers().contains_key(USER_AGENT), "{:?}", ours.headers());
    }

    #[test]
    fn an_invocations_path_is_the_one_format_gives() {
        for (request_id, tail) in [
            ("8476a536-e9f4-11e8-9739-2dfe598c3fcd", "/response"),
            ("req-1", "/error"),
            ("", "/response"),
        ] {
            assert_eq!(
                invocation_path(request_id, tail),
                format!("{API_PREFIX}/invocation/{request_id}{tail}")
            );
        }
    }
}
