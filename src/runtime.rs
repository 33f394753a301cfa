//! The Lambda invocation loop: `GET …/invocation/next`, run the handler,
//! `POST …/response` (or `…/error`), for the life of the process; on Lambda
//! Managed Instances, several of these loops at once.
//!
//! Owned here instead of calling `lambda_http::run`, for one reason:
//! `lambda_runtime` 1.5 sets the `_X_AMZN_TRACE_ID` environment variable
//! with `std::env::set_var` before every invocation, and glibc's `setenv`
//! never frees a value it replaces, so a warm process grew by about 92 bytes
//! per invocation until Lambda killed it (docs/upstream/lambda-runtime-trace-id-leak.md,
//! measured in docs/performance.md). The trace id is not lost: it is in the
//! request's `Context` (`xray_trace_id`), the invocation's log lines carry
//! it, and `trace/` puts it on every DynamoDB request the invocation makes.
//!
//! The loop is kept small; everything else is still the runtime's: its
//! Runtime API client, `Context` and `Config`, and the front doors' event
//! types (`envelope.rs` converts them). A fault costs at most the invocation it hits:
//! - a panic anywhere in an invocation (decoding its event, the handler,
//!   encoding its answer) fails that invocation with an `/error`, and the
//!   worker serves on;
//! - a handler still running shortly before the invocation's deadline is
//!   dropped and the invocation failed, so that its worker is free again
//!   (ours answers 503 by itself before that: `handler.rs`, `deadline.rs`);
//! - a Runtime API call that fails at the transport level or with a 5xx is
//!   tried again after a short pause ([`RETRY_PAUSES`], 0.8 s in all); an
//!   answer refused with 410 (the invocation is over for Lambda) or another
//!   4xx is logged and the worker serves on;
//! - a Runtime API that stays unreachable stops every worker; those with an
//!   invocation answer it first; then the process exits non-zero and Lambda
//!   replaces the environment. It never serves on with fewer workers than
//!   it announced.
//!
//! Each answer echoes its invocation's `Lambda-Runtime-Invocation-Id`, so
//! that a late answer to an invocation that timed out can never be taken
//! for another's, and each invocation's log lines carry its request id,
//! trace id and, in Lambda's tenant isolation mode, its `tenant_id`.
//!
//! `AWS_LAMBDA_MAX_CONCURRENCY`, which Lambda sets on Managed Instances,
//! says how many invocations the environment takes at once: that many
//! workers each poll `next` and answer their own invocation, over a
//! connection pool of that size. Unset, one invocation at a time.

use std::num::NonZeroU32;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::Bytes;
use lambda_http::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use lambda_http::lambda_runtime::{Config as FunctionConfig, Context, Diagnostic};
use lambda_http::tracing::{self, Instrument};
use lambda_http::{Body, Error, Request, RequestExt, Response};
use lambda_runtime_api_client::body::Body as ApiBody;
use lambda_runtime_api_client::{PooledClient, build_request};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::deadline::{self, BACKSTOP_MARGIN};
use crate::{envelope, telemetry, trace};

const API_PREFIX: &str = "/2018-06-01/runtime";
const REQUEST_ID: &str = "lambda-runtime-aws-request-id";
const DEADLINE_MS: &str = "lambda-runtime-deadline-ms";
const ERROR_TYPE: &str = "lambda-runtime-function-error-type";
const INVOCATION_ID: &str = "lambda-runtime-invocation-id";
const TRACE_ID: &str = "lambda-runtime-trace-id";
/// Lambda's tenant isolation mode: the tenant the invocation is for.
const TENANT_ID: &str = "lambda-runtime-aws-tenant-id";
/// Set by Lambda on Managed Instances: invocations one environment takes at once.
pub const MAX_CONCURRENCY: &str = "AWS_LAMBDA_MAX_CONCURRENCY";

/// What stops the function before it serves anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    Missing(&'static str),
    Invalid(&'static str),
    NotPositiveInteger(&'static str),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing(name) => write!(
                f,
                "{name} is not set: this binary runs inside AWS Lambda (or under `cargo lambda watch`), which sets it"
            ),
            Self::Invalid(name) => write!(f, "{name} has a value that is not what AWS Lambda sets"),
            Self::NotPositiveInteger(name) => write!(
                f,
                "{name} must be a positive integer: how many invocations this execution environment takes at once (unset: one)"
            ),
        }
    }
}

impl std::error::Error for StartError {}

/// How many invocations Lambda gives this execution environment at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency(NonZeroU32);

impl Concurrency {
    /// Classic Lambda: one invocation at a time.
    pub const ONE: Self = Self(NonZeroU32::MIN);

    /// From `AWS_LAMBDA_MAX_CONCURRENCY`: unset is one; anything but a
    /// positive integer (Lambda sets 1 to 1600 today) is a reason not to
    /// start, rather than a guess that would serve fewer invocations than
    /// Lambda sends, or more.
    pub fn from_env() -> Result<Self, StartError> {
        match std::env::var(MAX_CONCURRENCY) {
            Err(std::env::VarError::NotPresent) => Ok(Self::ONE),
            Err(std::env::VarError::NotUnicode(_)) => Err(StartError::NotPositiveInteger(MAX_CONCURRENCY)),
            Ok(value) => Self::parse(&value),
        }
    }

    /// Digits only: no sign, no blanks, not zero.
    pub fn parse(value: &str) -> Result<Self, StartError> {
        value
            .bytes()
            .all(|byte| byte.is_ascii_digit())
            .then(|| value.parse().ok())
            .flatten()
            .map(Self)
            .ok_or(StartError::NotPositiveInteger(MAX_CONCURRENCY))
    }

    pub fn get(self) -> u32 {
        self.0.get()
    }

    pub fn is_concurrent(self) -> bool {
        self.get() > 1
    }
}

/// The function's side of the Lambda Runtime API.
#[derive(Debug)]
pub struct RuntimeApi {
    client: PooledClient,
}

impl RuntimeApi {
    /// At `AWS_LAMBDA_RUNTIME_API`, with a connection for each invocation
    /// that may be in flight at once.
    pub fn from_env(concurrency: Concurrency) -> Result<Self, StartError> {
        const NAME: &str = "AWS_LAMBDA_RUNTIME_API";
        let address = std::env::var(NAME).map_err(|_| StartError::Missing(NAME))?;
        let endpoint = endpoint(&address).ok_or(StartError::Invalid(NAME))?;
        Ok(Self::with_concurrency(endpoint, concurrency))
    }

    pub fn new(endpoint: Uri) -> Self {
        Self::with_concurrency(endpoint, Concurrency::ONE)
    }

    /// Each worker keeps one connection busy in its long-polling `next`, and
    /// its answer needs one too: the pool keeps as many idle as there are
    /// workers, so that no answer waits for a connection to be opened.
    pub fn with_concurrency(endpoint: Uri, concurrency: Concurrency) -> Self {
        let pool_size = usize::try_from(concurrency.get()).unwrap_or(usize::MAX);
        Self {
            client: PooledClient::builder()
                .with_endpoint(endpoint)
                .with_pool_size(pool_size)
                .build(),
        }
    }

    /// Tells Lambda that init failed, so that the invoke that started this
    /// execution environment fails with `message` rather than a timeout.
    pub async fn init_error(&self, message: &str) -> Result<(), Error> {
        let diagnostic = Diagnostic {
            error_type: "Runtime.InitError".to_owned(),
            error_message: message.to_owned(),
        };
        self.post(
            format!("{API_PREFIX}/init/error"),
            Some(&diagnostic.error_type),
            None,
            json(&diagnostic),
        )
        .await
    }

    /// The next invocation: its headers and payload. A transport failure or
    /// a 5xx is tried again (see [`RETRY_PAUSES`]); any other answer but 200
    /// is final.
    async fn next(&self) -> Result<(HeaderMap, Bytes), Error> {
        retrying("next", || async {
            let request = build_request()
                .method(Method::GET)
                .uri(format!("{API_PREFIX}/invocation/next"))
                .body(ApiBody::empty())
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
            let mut request = build_request().method(Method::POST).uri(&path);
            if let Some(error_type) = error_type {
                request = request.header(ERROR_TYPE, error_type);
            }
            if let Some(invocation_id) = invocation_id {
                request = request.header(INVOCATION_ID, invocation_id);
            }
            let request = request
                .body(ApiBody::from(body.clone()))
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

/// How long a worker waits before each new try of a Runtime API call that
/// failed at the transport level or with a 5xx: 0.8 s in all. Lambda's
/// Runtime API is on the same host; a failure that lasts longer is not a
/// passing one, and the process exits so that Lambda replaces the
/// environment (on Managed Instances nothing else would).
pub const RETRY_PAUSES: [Duration; 5] = [
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

/// Lambda sets `host:port`; emulators such as `cargo lambda watch` set a
/// whole URL with a base path (`http://127.0.0.1:9000/.rt`), which the
/// runtime's client also accepts.
fn endpoint(address: &str) -> Option<Uri> {
    let url = if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    Uri::try_from(url)
        .ok()
        .filter(|uri| uri.host().is_some_and(|host| !host.is_empty()))
}

/// The contract of the function's environment, read once (`lambda_runtime`'s
/// own `Config::from_env` panics where this returns an error).
pub fn function_config_from_env() -> Result<FunctionConfig, StartError> {
    let var = |name: &'static str| std::env::var(name).map_err(|_| StartError::Missing(name));
    Ok(FunctionConfig {
        function_name: var("AWS_LAMBDA_FUNCTION_NAME")?,
        memory: var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")?
            .parse()
            .map_err(|_| StartError::Invalid("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))?,
        version: var("AWS_LAMBDA_FUNCTION_VERSION")?,
        log_stream: std::env::var("AWS_LAMBDA_LOG_STREAM_NAME").unwrap_or_default(),
        log_group: std::env::var("AWS_LAMBDA_LOG_GROUP_NAME").unwrap_or_default(),
    })
}

/// Serves invocations until the Runtime API fails for good:
/// `concurrency` workers, each taking one invocation at a time. A single
/// worker runs on the calling task; several are spawned as tasks, so that a
/// multi-threaded runtime spreads them over its threads.
///
/// When one worker cannot reach the Runtime API any more (after
/// [`RETRY_PAUSES`]), every worker stops taking invocations, those in
/// flight are finished and answered (each by its deadline), and `run`
/// returns the cause: `main` then exits non-zero, and Lambda replaces the
/// environment. An environment never serves on with fewer workers than it
/// announced.
pub async fn run<H, F>(
    api: RuntimeApi,
    config: FunctionConfig,
    concurrency: Concurrency,
    handler: H,
) -> Result<(), Error>
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    run_settling(api, config, concurrency, handler, || std::future::ready(())).await
}

/// [`run`], and with one worker (classic Lambda), `settle` awaited after
/// each answer and before the next `next`, within the invocation's
/// deadline: on classic Lambda the environment is frozen once the runtime
/// asks for the next invocation, so work that a request started behind its
/// answer (a refresh of the issuer's keys) ends now, rather than time out
/// at the next thaw. The client already has its answer. With several
/// workers (Managed Instances) nothing is frozen and `settle` is not used.
pub async fn run_settling<H, F, S, SF>(
    api: RuntimeApi,
    config: FunctionConfig,
    concurrency: Concurrency,
    handler: H,
    settle: S,
) -> Result<(), Error>
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
    S: Fn() -> SF,
    SF: Future<Output = ()>,
{
    let api = Arc::new(api);
    let config = Arc::new(config);
    let (stop, stopped) = watch::channel(false);
    if !concurrency.is_concurrent() {
        return serve(&api, &config, &handler, Some(&settle), stopped).await;
    }
    let mut workers = JoinSet::new();
    for _ in 0..concurrency.get() {
        let (api, config, handler, stopped) = (api.clone(), config.clone(), handler.clone(), stopped.clone());
        workers.spawn(async move {
            serve(
                &api,
                &config,
                &handler,
                None::<&fn() -> std::future::Ready<()>>,
                stopped,
            )
            .await
        });
    }
    tracing::debug!(workers = concurrency.get(), "serving invocations concurrently");
    let mut first = None;
    while let Some(ended) = workers.join_next().await {
        let cause: Error = match ended {
            Ok(Ok(())) => continue,
            Ok(Err(cause)) => cause,
            // Everything a worker runs for an invocation is inside its
            // guard; this is the loop's own code failing.
            Err(join) => format!("a worker stopped: {join}").into(),
        };
        if first.is_none() {
            tracing::error!(cause = %cause, "a worker cannot serve on; finishing the invocations in flight, then exiting");
            stop.send_replace(true);
            first = Some(cause);
        }
    }
    Err(first.unwrap_or_else(|| "no worker was started".into()))
}

/// One worker: `next`, the handler, the answer, until a Runtime API call
/// fails for good (its cause) or another worker's did (`Ok`, once this
/// worker's invocation in flight, if any, is answered).
async fn serve<H, F, S, SF>(
    api: &RuntimeApi,
    config: &Arc<FunctionConfig>,
    handler: &H,
    settle: Option<&S>,
    mut stopped: watch::Receiver<bool>,
) -> Result<(), Error>
where
    H: Fn(Request) -> F,
    F: Future<Output = Response<Body>>,
    S: Fn() -> SF,
    SF: Future<Output = ()>,
{
    loop {
        // A worker that waits for an invocation when another has failed for
        // good stops waiting. Should Lambda hand it one in that very instant,
        // that invocation times out; a retry of the same create is idempotent.
        let (headers, payload) = tokio::select! {
            biased;
            next = api.next() => next?,
            _ = stopped.wait_for(|stopped| *stopped) => return Ok(()),
        };
        // Without its id an invocation cannot even be answered: Lambda broke
        // its own contract, and a fresh environment is the way out.
        let Some(request_id) = headers
            .get(REQUEST_ID)
            .and_then(|id| id.to_str().ok())
            .filter(|id| !id.is_empty())
        else {
            return Err("the Runtime API sent an invocation without a request id".into());
        };
        let text = |name| {
            headers
                .get(name)
                .map(|value| String::from_utf8_lossy(value.as_bytes()))
        };
        let trace_id = text(TRACE_ID);
        let tenant_id = text(TENANT_ID);
        // Lines written while this invocation is served and answered carry
        // its ids, as its request line does (the trace id's root, the id
        // X-Ray shows).
        let span = tracing::info_span!(
            "invocation",
            request_id,
            xray_trace_id = trace_id.as_deref().and_then(telemetry::trace_root),
            tenant_id = tenant_id.as_deref(),
        );
        // Everything the invocation runs is inside the guard: a panic
        // anywhere fails this invocation, and the worker serves on. Its SDK
        // requests carry its trace header and, when sampled, it sends its
        // subsegments (`trace/`).
        let invocation = trace::scope(
            trace_id.as_deref(),
            invoke(config, &headers, request_id, &payload, handler),
        );
        let answer = AssertUnwindSafe(invocation)
            .catch_unwind()
            .instrument(span.clone())
            .await
            .unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|text| (*text).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                tracing::error!(request_id, error = %message, "invocation failed: it panicked");
                Err(Diagnostic {
                    error_type: "Runtime.HandlerPanicked".to_owned(),
                    error_message: format!("the invocation panicked: {message}"),
                })
            });
        let (path, error_type, body) = match answer {
            Ok(response) => (
                format!("{API_PREFIX}/invocation/{request_id}/response"),
                None,
                response,
            ),
            Err(diagnostic) => (
                format!("{API_PREFIX}/invocation/{request_id}/error"),
                Some(diagnostic.error_type.clone()),
                json(&diagnostic),
            ),
        };
        api.post(path, error_type.as_deref(), headers.get(INVOCATION_ID), body)
            .instrument(span.clone())
            .await?;
        if let Some(settle) = settle {
            let cut = deadline_ms(&headers).and_then(|ms| deadline::before(ms, BACKSTOP_MARGIN));
            if deadline::until(cut, settle()).await.is_none() {
                tracing::warn!(parent: &span, "work started behind the answer was still running at the deadline");
            }
        }
    }
}

/// One invocation: the front door's JSON response, or why there is none.
async fn invoke<H, F>(
    config: &Arc<FunctionConfig>,
    headers: &HeaderMap,
    request_id: &str,
    payload: &[u8],
    handler: &H,
) -> Result<Vec<u8>, Diagnostic>
where
    H: Fn(Request) -> F,
    F: Future<Output = Response<Body>>,
{
    let failed = |error_type: &str, message: String| {
        tracing::error!(request_id, error = %message, "invocation failed");
        Diagnostic {
            error_type: error_type.to_owned(),
            error_message: message,
        }
    };
    // `Context::new` panics without a deadline; check it first.
    let Some(deadline_ms) = deadline_ms(headers) else {
        return Err(failed(
            "Runtime.InvalidInvocation",
            "the Runtime API sent no valid deadline".to_owned(),
        ));
    };
    let context = Context::new(request_id, config.clone(), headers).map_err(|err| {
        failed(
            "Runtime.InvalidInvocation",
            format!("invalid invocation headers: {err}"),
        )
    })?;
    let decoded = envelope::decode(payload).map_err(|err| failed("UnsupportedEvent", err.to_string()))?;
    let request = decoded.request.with_lambda_context(context);
    // The handler keeps to the deadline by itself (it answers 503 before
    // it); this is for one that does not, so that its worker is not held.
    let cut = deadline::before(deadline_ms, BACKSTOP_MARGIN);
    let response = deadline::until(cut, handler(request)).await.ok_or_else(|| {
        failed(
            "Runtime.DeadlineExceeded",
            "the handler had not answered shortly before the invocation's deadline".to_owned(),
        )
    })?;
    Ok(envelope::encode(decoded.origin, response).await)
}

/// `Lambda-Runtime-Deadline-Ms`, when it is a number.
fn deadline_ms(headers: &HeaderMap) -> Option<u64> {
    headers.get(DEADLINE_MS)?.to_str().ok()?.parse().ok()
}

fn json(diagnostic: &Diagnostic) -> Vec<u8> {
    // Two strings cannot fail to serialize; the fallback keeps this panic-free.
    serde_json::to_vec(diagnostic).unwrap_or_else(|_| br#"{"errorType":"Runtime.Unknown"}"#.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_concurrency_is_a_positive_integer_and_nothing_else() {
        for (value, expected) in [
            ("1", Some(1)),
            ("8", Some(8)),
            ("1600", Some(1600)),
            ("0", None),
            ("", None),
            ("-1", None),
            ("+8", None),
            (" 8", None),
            ("8 ", None),
            ("8.0", None),
            ("eight", None),
            ("4294967296", None),
        ] {
            assert_eq!(
                Concurrency::parse(value).map(Concurrency::get).ok(),
                expected,
                "{value:?}"
            );
        }
        assert_eq!(
            Concurrency::parse("x"),
            Err(StartError::NotPositiveInteger(MAX_CONCURRENCY))
        );
    }

    #[test]
    fn the_runtime_api_is_found_as_lambda_and_as_emulators_name_it() {
        for (address, expected) in [
            ("127.0.0.1:9001", Some("http://127.0.0.1:9001/")),
            ("169.254.100.1:9001", Some("http://169.254.100.1:9001/")),
            ("http://127.0.0.1:9000/.rt", Some("http://127.0.0.1:9000/.rt")),
            ("", None),
            ("http://", None),
            ("not a host", None),
        ] {
            assert_eq!(
                endpoint(address).map(|uri| uri.to_string()).as_deref(),
                expected,
                "{address:?}"
            );
        }
    }
}
