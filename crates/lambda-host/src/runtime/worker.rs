//! One worker: takes an invocation, runs the handler inside a panic guard,
//! its trace scope and its deadline, and answers.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use lambda_http::http::HeaderMap;
use lambda_http::lambda_runtime::{Config as FunctionConfig, Context, Diagnostic};
use lambda_http::tracing::{self, Instrument};
use lambda_http::{Error, RequestExt};
use tokio::sync::watch;

use super::api::{DEADLINE_MS, INVOCATION_ID, REQUEST_ID, RuntimeApi, TENANT_ID, TRACE_ID};
use crate::deadline::{self, BACKSTOP_MARGIN};
use crate::{Handler, envelope, trace};

/// One worker: `next`, the handler, the answer, until a Runtime API call
/// fails for good (its cause) or another worker's did (`Ok`, once this
/// worker's invocation in flight, if any, is answered).
/// With `settle`, [`Handler::settled`] is awaited after each answer.
pub(super) async fn serve<H: Handler>(
    api: &RuntimeApi,
    config: &Arc<FunctionConfig>,
    handler: &H,
    settle: bool,
    mut stopped: watch::Receiver<bool>,
) -> Result<(), Error> {
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
            xray_trace_id = trace_id.as_deref().and_then(trace::root),
            tenant_id = tenant_id.as_deref(),
        );
        // Everything the invocation runs is inside the guard: a panic
        // anywhere fails this invocation, and the worker serves on. Its SDK
        // requests carry its trace header and, when sampled, it sends its
        // spans (`trace/`).
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
        let invocation_id = headers.get(INVOCATION_ID);
        match answer {
            Ok(body) => {
                api.answer(request_id, invocation_id, body)
                    .instrument(span.clone())
                    .await?
            }
            Err(diagnostic) => {
                api.fail(request_id, invocation_id, &diagnostic)
                    .instrument(span.clone())
                    .await?;
            }
        }
        if settle {
            let cut = deadline_ms(&headers).and_then(|ms| deadline::before(ms, BACKSTOP_MARGIN));
            if deadline::until(cut, handler.settled()).await.is_none() {
                tracing::warn!(parent: &span, "work started behind the answer was still running at the deadline");
            }
        }
    }
}

/// Set once the process has served an invocation: the next are warm.
static WARM: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One invocation: the front door's JSON response, or why there is none.
async fn invoke<H: Handler>(
    config: &Arc<FunctionConfig>,
    headers: &HeaderMap,
    request_id: &str,
    payload: &[u8],
    handler: &H,
) -> Result<Vec<u8>, Diagnostic> {
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
    let (method, path) = (
        decoded.request.method().clone(),
        decoded.request.uri().path().to_owned(),
    );
    let function_arn = context.invoked_function_arn.clone();
    let request = decoded.request.with_lambda_context(context);
    // The handler keeps to the deadline by itself (it answers 503 before
    // it); this is for one that does not, so that its worker is not held.
    let cut = deadline::before(deadline_ms, BACKSTOP_MARGIN);
    // Boxed: a handler's future (the AWS SDK's inside it) is large, and
    // polled inline it would make every frame of the loop that large too
    // (docs/performance.md, "Smaller stack frames").
    let response = deadline::until(cut, Box::pin(handler.call(request)))
        .await
        .ok_or_else(|| {
            failed(
                "Runtime.DeadlineExceeded",
                "the handler had not answered shortly before the invocation's deadline".to_owned(),
            )
        })?;
    trace::server_answer(&trace::ServerAnswer {
        status: response.status().as_u16(),
        method: method.as_str(),
        path: &path,
        invocation_id: request_id,
        function_arn: Some(&function_arn)
            .filter(|arn| !arn.is_empty())
            .map(String::as_str),
        cold_start: !WARM.swap(true, std::sync::atomic::Ordering::Relaxed),
        details: response.extensions().get::<trace::SpanDetails>(),
    });
    Ok(envelope::encode(decoded.origin, response).await)
}

/// `Lambda-Runtime-Deadline-Ms`, when it is a number.
fn deadline_ms(headers: &HeaderMap) -> Option<u64> {
    headers.get(DEADLINE_MS)?.to_str().ok()?.parse().ok()
}
