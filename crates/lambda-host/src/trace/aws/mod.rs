//! The AWS SDK's part: an interceptor that puts the invocation's trace
//! header on each request, and one that records each call of a traced
//! invocation as a CLIENT span (`DynamoDB.PutItem`), opened when the
//! operation starts and ended with its answer, each retry inside it, as
//! ADOT's botocore instrumentation records boto3's calls. What only one
//! service's calls say (a DynamoDB table) comes from that service's
//! enrichment module, behind a cargo feature of its name.

use aws_config::Region;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextMut, Error,
    FinalizerInterceptorContextRef, Input,
};
use aws_smithy_runtime_api::client::interceptors::{Intercept, OverriddenHooks, SharedInterceptor};
use aws_smithy_runtime_api::client::orchestrator::{Metadata, OrchestratorError};
use aws_smithy_runtime_api::client::retries::RequestAttempts;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

use super::conventions::CallKey;
use super::invocation::{self, Here, current};
use super::layer;
use super::otlp::Writer;
use super::spans::{Call, Ending};

#[cfg(feature = "dynamodb")]
mod dynamodb;

/// The header the SDK's recursion-detection interceptor sets.
const HEADER: &str = "x-amzn-trace-id";

/// The header AWS services answer with the id of the request.
const REQUEST_ID: &str = "x-amzn-requestid";

/// The header restJson1 services name an error's type in
/// (`ValidationException:http://…`).
const ERROR_TYPE: &str = "x-amzn-errortype";

/// The two interceptors, in the order an SDK client takes them.
pub(super) fn interceptors() -> [SharedInterceptor; 2] {
    [SharedInterceptor::new(TraceHeader), AwsSpans::shared()]
}

/// Sets `X-Amzn-Trace-Id` on each request from the invocation's scope.
#[derive(Debug, Clone, Copy, Default)]
struct TraceHeader;

impl Intercept for TraceHeader {
    fn name(&self) -> &'static str {
        "TraceHeader"
    }

    /// Before signing, as the SDK's own interceptor does. The invocation's
    /// header replaces any other: the SDK's interceptor would have taken one
    /// from the environment, which is not this invocation's.
    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(value) = current() {
            // `encode` leaves only visible ASCII and spaces, which is always a
            // valid header value; `try_insert` keeps that a non-panicking path.
            context.request_mut().headers_mut().try_insert(HEADER, value)?;
        }
        Ok(())
    }
}

/// Registered once on an SDK client beside `TraceHeader`. Outside a traced
/// invocation each hook returns after one task-local lookup.
#[derive(Debug, Clone, Copy, Default)]
struct AwsSpans;

/// The open span, kept in the operation's own config bag: if the
/// operation's future is dropped before it ends, the bag and this with it
/// are dropped, and the span ends as a timeout (`Call`'s `Drop`).
#[derive(Debug)]
struct InFlight(Option<Call>);

impl Storable for InFlight {
    type Storer = StoreReplace<Self>;
}

impl AwsSpans {
    /// Registered with `SharedInterceptor::permanent`: the SDK then skips
    /// the per-hook config-bag lookup that lets an operation disable an
    /// interceptor, which with the two hooks below is all an unsampled
    /// invocation would pay (docs/performance.md, "Traces").
    fn shared() -> SharedInterceptor {
        SharedInterceptor::permanent(Self)
    }
}

impl Intercept for AwsSpans {
    fn name(&self) -> &'static str {
        "AwsSpans"
    }

    /// Only these two hooks are called; the SDK skips the others.
    fn overridden_hooks(&self) -> OverriddenHooks {
        OverriddenHooks::READ_BEFORE_SERIALIZATION | OverriddenHooks::READ_AFTER_EXECUTION
    }

    /// The first hook that sees the operation's configuration (its name is
    /// there) and still its input (a table's name).
    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // Under the `tracing` span the call is made in, if the layer
        // records it; in a task of its own (spawned `.in_current_span()`),
        // found through that span.
        let (spans, parent) = match invocation::here() {
            Here::Untraced => return Ok(()),
            Here::Traced(spans) => {
                let parent = layer::current_parent(&spans);
                (spans, parent)
            }
            Here::Outside => match layer::current() {
                Some((spans, parent)) => (spans, Some(parent)),
                None => return Ok(()),
            },
        };
        let Some(metadata) = cfg.load::<Metadata>() else {
            return Ok(());
        };
        let (service, operation) = (metadata.service(), metadata.name());
        let key = CallKey {
            service,
            operation,
            region: cfg.load::<Region>().map(Region::as_ref),
            resource: resource(service, context.input()),
        };
        let call = spans
            .tracer()
            .conventions
            .aws_call(&key, |writer| enrich(&key, writer));
        let call = Call::open(&spans, parent, call);
        cfg.interceptor_state().store_put(InFlight(Some(call)));
        Ok(())
    }

    /// Runs once per operation, whatever its end: an answer, an error
    /// after the retries, the SDK's attempt or operation timeout.
    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(call) = cfg
            .get_mut_from_interceptor_state::<InFlight>()
            .and_then(|in_flight| in_flight.0.take())
        else {
            return Ok(());
        };
        let retries = cfg
            .load::<RequestAttempts>()
            .map(|attempts| attempts.attempts().saturating_sub(1));
        let response = context.response();
        let status = response.map(|response| response.status().as_u16());
        // Found by walking the few headers: `get` would parse the name
        // against every standard header's, code a traced create otherwise
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
        Ok(())
    }
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
