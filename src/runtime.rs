//! The Lambda invocation loop: `GET …/invocation/next`, run the handler,
//! `POST …/response` (or `…/error`), for the life of the process.
//!
//! Owned here instead of calling `lambda_http::run`, for one reason:
//! `lambda_runtime` 1.5 sets the `_X_AMZN_TRACE_ID` environment variable
//! with `std::env::set_var` before every invocation, and glibc's `setenv`
//! never frees a value it replaces, so a warm process grew by about 92 bytes
//! per invocation until Lambda killed it (docs/upstream/lambda-runtime-trace-id-leak.md,
//! measured in docs/performance.md). The trace id is not lost: it is in the
//! request's `Context` (`xray_trace_id`), and the request log line carries it.
//!
//! The loop is kept small; everything else is still the runtime's: its
//! Runtime API client, `Context` and `Config`, and `lambda_http`'s event
//! types and conversions (`envelope.rs`). Like `lambda_runtime`, it catches
//! a panic in the handler, reports that invocation as failed and serves on,
//! and it ends (and with it the process) only when the Runtime API cannot
//! be reached. Sequential only: one invocation at a time, as Lambda sends
//! them to a function that does not declare managed concurrency.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::Bytes;
use lambda_http::http::{HeaderMap, Method, StatusCode, Uri};
use lambda_http::lambda_runtime::{Config as FunctionConfig, Context, Diagnostic};
use lambda_http::{Body, Error, Request, RequestExt, Response, tracing};
use lambda_runtime_api_client::body::Body as ApiBody;
use lambda_runtime_api_client::{PooledClient, build_request};

use crate::envelope;

const API_PREFIX: &str = "/2018-06-01/runtime";
const REQUEST_ID: &str = "lambda-runtime-aws-request-id";
const DEADLINE_MS: &str = "lambda-runtime-deadline-ms";
const ERROR_TYPE: &str = "lambda-runtime-function-error-type";

/// What stops the function before it serves anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    Missing(&'static str),
    Invalid(&'static str),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing(name) => write!(
                f,
                "{name} is not set: this binary runs inside AWS Lambda (or under `cargo lambda watch`), which sets it"
            ),
            Self::Invalid(name) => write!(f, "{name} has a value that is not what AWS Lambda sets"),
        }
    }
}

impl std::error::Error for StartError {}

/// The function's side of the Lambda Runtime API.
#[derive(Debug)]
pub struct RuntimeApi {
    client: PooledClient,
}

impl RuntimeApi {
    /// At `AWS_LAMBDA_RUNTIME_API`.
    pub fn from_env() -> Result<Self, StartError> {
        const NAME: &str = "AWS_LAMBDA_RUNTIME_API";
        let address = std::env::var(NAME).map_err(|_| StartError::Missing(NAME))?;
        endpoint(&address).map(Self::new).ok_or(StartError::Invalid(NAME))
    }

    pub fn new(endpoint: Uri) -> Self {
        Self {
            client: PooledClient::builder().with_endpoint(endpoint).build(),
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
            json(&diagnostic),
        )
        .await
    }

    async fn next(&self) -> Result<(HeaderMap, Bytes), Error> {
        let request = build_request()
            .method(Method::GET)
            .uri(format!("{API_PREFIX}/invocation/next"))
            .body(ApiBody::empty())?;
        let response = self.client.call(request).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        if parts.status != StatusCode::OK {
            return Err(format!("the Runtime API answered {} to next", parts.status).into());
        }
        Ok((parts.headers, body))
    }

    async fn post(&self, path: String, error_type: Option<&str>, body: Vec<u8>) -> Result<(), Error> {
        let mut request = build_request().method(Method::POST).uri(path);
        if let Some(error_type) = error_type {
            request = request.header(ERROR_TYPE, error_type);
        }
        let response = self.client.call(request.body(ApiBody::from(body))?).await?;
        let status = response.status();
        // Read the (small) answer to the end, so the connection goes back
        // to the pool instead of being closed and opened again.
        response.into_body().collect().await?;
        if !status.is_success() {
            // 400 / 413 / 500: Lambda refused this answer; the next `next`
            // tells whether the environment is still usable.
            tracing::error!(
                status = status.as_u16(),
                "the Runtime API refused the invocation's answer"
            );
        }
        Ok(())
    }
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

/// Serves invocations one after another until the Runtime API fails.
pub async fn run<H>(api: &RuntimeApi, config: FunctionConfig, handler: H) -> Result<(), Error>
where
    H: AsyncFn(Request) -> Response<Body>,
{
    let config = Arc::new(config);
    loop {
        let (headers, payload) = api.next().await?;
        // Without its id an invocation cannot even be answered: Lambda broke
        // its own contract, and a fresh environment is the way out.
        let request_id = headers
            .get(REQUEST_ID)
            .and_then(|id| id.to_str().ok())
            .filter(|id| !id.is_empty())
            .ok_or("the Runtime API sent an invocation without a request id")?;
        let (path, error_type, body) = match invoke(&config, &headers, request_id, &payload, &handler).await {
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
        api.post(path, error_type.as_deref(), body).await?;
    }
}

/// One invocation: the front door's JSON response, or why there is none.
async fn invoke<H>(
    config: &Arc<FunctionConfig>,
    headers: &HeaderMap,
    request_id: &str,
    payload: &[u8],
    handler: &H,
) -> Result<Vec<u8>, Diagnostic>
where
    H: AsyncFn(Request) -> Response<Body>,
{
    let failed = |error_type: &str, message: String| {
        tracing::error!(request_id, error = %message, "invocation failed");
        Diagnostic {
            error_type: error_type.to_owned(),
            error_message: message,
        }
    };
    // `Context::new` panics without a deadline; check it first.
    if headers
        .get(DEADLINE_MS)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        .is_none()
    {
        return Err(failed(
            "Runtime.InvalidInvocation",
            "the Runtime API sent no valid deadline".to_owned(),
        ));
    }
    let context = Context::new(request_id, config.clone(), headers).map_err(|err| {
        failed(
            "Runtime.InvalidInvocation",
            format!("invalid invocation headers: {err}"),
        )
    })?;
    let decoded = envelope::decode(payload).map_err(|err| failed("UnsupportedEvent", err.to_string()))?;

    let request = decoded.request.with_lambda_context(context);
    let response = AssertUnwindSafe(handler(request))
        .catch_unwind()
        .await
        .map_err(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the handler panicked".to_owned());
            failed(
                "Runtime.HandlerPanicked",
                format!("the handler panicked: {message}"),
            )
        })?;
    Ok(envelope::encode(decoded.origin, response).await)
}

fn json(diagnostic: &Diagnostic) -> Vec<u8> {
    // Two strings cannot fail to serialize; the fallback keeps this panic-free.
    serde_json::to_vec(diagnostic).unwrap_or_else(|_| br#"{"errorType":"Runtime.Unknown"}"#.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

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
