//! The AWS SDK's part: an interceptor that puts the invocation's trace
//! header on each request, and one that has each call of a traced
//! invocation recorded as a CLIENT span (`DynamoDB.PutItem`, `call.rs`),
//! as ADOT's botocore instrumentation records boto3's calls. What only one
//! service's calls say (a DynamoDB table) comes from that service's
//! enrichment module, behind a cargo feature of its name.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
    FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::{Intercept, OverriddenHooks, SharedInterceptor};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use lambda_http::http::HeaderName;

use self::call::InFlight;
use super::invocation::{self, Here, current};
use super::layer;

mod call;
#[cfg(feature = "dynamodb")]
mod dynamodb;

/// The header the SDK's recursion-detection interceptor sets: a name,
/// which the SDK takes as it is; a string it would parse and copy.
const HEADER: HeaderName = HeaderName::from_static("x-amzn-trace-id");

/// The two interceptors, in the order an SDK client takes them.
pub(super) fn interceptors() -> [SharedInterceptor; 2] {
    [TraceHeader::shared(), AwsSpans::shared()]
}

/// Sets `X-Amzn-Trace-Id` on each request from the invocation's scope.
#[derive(Debug, Clone, Copy, Default)]
struct TraceHeader;

impl TraceHeader {
    /// Permanent, as [`AwsSpans`] is: with the one hook below, the SDK then
    /// calls it once per attempt and never looks it up in the config bag
    /// (without both, it looked it up and called it for every hook of an
    /// operation, about 6 K instructions a `PutItem`).
    fn shared() -> SharedInterceptor {
        SharedInterceptor::permanent(Self)
    }
}

impl Intercept for TraceHeader {
    fn name(&self) -> &'static str {
        "TraceHeader"
    }

    /// Only this hook is called; the SDK skips the others.
    fn overridden_hooks(&self) -> OverriddenHooks {
        OverriddenHooks::MODIFY_BEFORE_TRANSMIT
    }

    /// After signing, where the SDK's own interceptor sets it before: SigV4
    /// leaves `X-Amzn-Trace-Id` out of the signature (proxies rewrite it),
    /// so the signed request is the same, and the signer does not copy,
    /// lowercase and parse one header more (about 4.5 K instructions a
    /// `PutItem`). The invocation's header replaces any other: the SDK's
    /// interceptor would have taken one from the environment, which is not
    /// this invocation's.
    fn modify_before_transmit(
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
        call::open(context.input(), cfg, &spans, parent);
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
        // An untraced invocation opened no call: no lookup in the config
        // bag, which walks its layers.
        if invocation::untraced() {
            return Ok(());
        }
        let Some(call) = cfg
            .get_mut_from_interceptor_state::<InFlight>()
            .and_then(|in_flight| in_flight.0.take())
        else {
            return Ok(());
        };
        call::close(context, cfg, call);
        Ok(())
    }
}
