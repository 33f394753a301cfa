//! A traced invocation's AWS SDK call as a CLIENT span: opened when the
//! operation starts, under the span it was made in, and ended with its
//! answer, its retries counted, its error read as the service wrote it.
//! The interceptors in `mod.rs` decide whether a call is traced at all.

use aws_config::Region;
use aws_smithy_runtime_api::client::interceptors::context::{Error, FinalizerInterceptorContextRef, Input};
use aws_smithy_runtime_api::client::orchestrator::{Metadata, OrchestratorError};
use aws_smithy_runtime_api::client::retries::RequestAttempts;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

#[cfg(feature = "dynamodb")]
use super::dynamodb;
use crate::trace::conventions::CallKey;
use crate::trace::otlp::Writer;
use crate::trace::spans::{Call, Ending, Spans};

/// The header AWS services answer with the id of the request.
const REQUEST_ID: &str = "x-amzn-requestid";

/// The header restJson1 services name an error's type in
/// (`ValidationException:http://…`).
const ERROR_TYPE: &str = "x-amzn-errortype";

/// The open span, kept in the operation's own config bag: if the
/// operation's future is dropped before it ends, the bag and this with it
/// are dropped, and the span ends as a timeout (`Call`'s `Drop`).
#[derive(Debug)]
pub(super) struct InFlight(pub(super) Option<Call>);

impl Storable for InFlight {
    type Storer = StoreReplace<Self>;
}

/// Opens the span of the call about to be made with `input`, under
/// `parent`, and keeps it in the operation's config bag.
pub(super) fn open(input: &Input, cfg: &mut ConfigBag, spans: &Spans, parent: Option<[u8; 8]>) {
    let Some(metadata) = cfg.load::<Metadata>() else {
        return;
    };
    let (service, operation) = (metadata.service(), metadata.name());
    let key = CallKey {
        service,
        operation,
        region: cfg.load::<Region>().map(Region::as_ref),
        resource: resource(service, input),
    };
    let call = spans
        .tracer()
        .conventions
        .aws_call(&key, |writer| enrich(&key, writer));
    let call = Call::open(spans, parent, call);
    cfg.interceptor_state().store_put(InFlight(Some(call)));
}

/// Ends the call's span with what the operation came to.
pub(super) fn close(context: &FinalizerInterceptorContextRef<'_>, cfg: &ConfigBag, call: Call) {
    let retries = cfg
        .load::<RequestAttempts>()
        .map(|attempts| attempts.attempts().saturating_sub(1));
    let response = context.response();
    let status = response.map(|response| response.status().as_u16());
    // Found by walking the few headers: `get` would parse the name
    // against every standard header's, code a traced invocation otherwise
    // never runs (docs/performance.md, "Traces").
    let header = |wanted: &str| {
        let (_, value) = response?
            .headers()
            .iter_bytes()
            .find(|(name, _)| name.eq_ignore_ascii_case(wanted))?;
        std::str::from_utf8(value).ok()
    };
    let request_id = header(REQUEST_ID);
    let error = context.output_or_error().and_then(Result::err);
    let other = error.map(ToString::to_string);
    let failure = error.map(|error| match error.as_operation_error() {
        // The service answered with an error: its code (a throttle's
        // is `ThrottlingException`, with a 400) is the error's type.
        Some(operation) => {
            let (code, message) = service_error(operation);
            let code = code
                .or_else(|| header(ERROR_TYPE).map(|kind| kind.split(':').next().unwrap_or(kind)))
                .unwrap_or("ServiceError");
            (code, message.or(other.as_deref()).unwrap_or_default())
        }
        // No answer to read: a timeout, a connection that failed, an
        // answer that could not be read.
        None => (kind(error), other.as_deref().unwrap_or_default()),
    });
    call.close(&Ending {
        status,
        request_id,
        retries,
        error: failure,
    });
}

/// What happened to a call that got no error answer to read.
fn kind(error: &OrchestratorError<Error>) -> &'static str {
    if error.is_timeout_error() {
        "TimeoutError"
    } else if error.is_connector_error() {
        "DispatchFailure"
    } else if error.is_response_error() {
        "ResponseError"
    } else {
        "SdkError"
    }
}

/// The resource a call is on, as its service's enrichment names it.
#[cfg_attr(not(feature = "dynamodb"), allow(unused_variables))]
fn resource<'a>(service: &str, input: &'a Input) -> Option<&'a str> {
    #[cfg(feature = "dynamodb")]
    if let Some(table) = dynamodb::resource(service, input) {
        return Some(table);
    }
    None
}

/// The attributes only the call's service gives.
#[cfg_attr(not(feature = "dynamodb"), allow(unused_variables))]
fn enrich(key: &CallKey<'_>, writer: &mut Writer<'_>) {
    #[cfg(feature = "dynamodb")]
    dynamodb::attributes(key, writer);
}

/// The error code and message an operation's error holds, when its
/// service's enrichment can read them.
#[cfg_attr(not(feature = "dynamodb"), allow(unused_variables))]
fn service_error(error: &Error) -> (Option<&str>, Option<&str>) {
    #[cfg(feature = "dynamodb")]
    if let Some(found) = dynamodb::service_error(error) {
        return found;
    }
    (None, None)
}
