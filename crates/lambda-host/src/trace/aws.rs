//! The CLIENT span of each AWS call a traced invocation makes, from an SDK
//! interceptor: opened when the operation starts, ended with its answer
//! when it ends, each retry inside it, as ADOT's botocore instrumentation
//! records boto3's calls (`DynamoDB.PutItem`).

use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, Region, RuntimeComponents, SharedInterceptor};
use aws_sdk_dynamodb::error::{BoxError, ProvideErrorMetadata};
use aws_sdk_dynamodb::operation::describe_table::{DescribeTableError, DescribeTableInput};
use aws_sdk_dynamodb::operation::put_item::{PutItemError, PutItemInput};
use aws_smithy_runtime_api::client::interceptors::OverriddenHooks;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::retries::RequestAttempts;
use aws_smithy_types::config_bag::{Storable, StoreReplace};

use super::spans::{Call, Ending, Target};

/// DynamoDB's header with the id of the request it answered.
const REQUEST_ID: &str = "x-amzn-requestid";

/// Registered once on the DynamoDB client beside `TraceHeader`. Outside a
/// traced invocation each hook returns after one task-local lookup.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AwsSpans;

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
    pub fn shared() -> SharedInterceptor {
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
    /// there) and still its input (the table's name).
    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(metadata) = cfg.load::<Metadata>() else {
            return Ok(());
        };
        let input = context.input();
        let call = Call::open(|| Target::Aws {
            metadata: metadata.clone(),
            region: cfg.load::<Region>().cloned(),
            table_name: input
                .downcast_ref::<PutItemInput>()
                .and_then(PutItemInput::table_name)
                .or_else(|| {
                    input
                        .downcast_ref::<DescribeTableInput>()
                        .and_then(DescribeTableInput::table_name)
                })
                .map(str::to_owned),
        });
        if let Some(call) = call {
            cfg.interceptor_state().store_put(InFlight(Some(call)));
        }
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
        let retries = cfg
            .load::<RequestAttempts>()
            .map(|attempts| attempts.attempts().saturating_sub(1));
        let Some(call) = cfg
            .get_mut_from_interceptor_state::<InFlight>()
            .and_then(|in_flight| in_flight.0.take())
        else {
            return Ok(());
        };
        let response = context.response();
        let status = response.map(|response| response.status().as_u16());
        let request_id = response.and_then(|response| response.headers().get(REQUEST_ID));
        let error = context.output_or_error().and_then(Result::err);
        let other = error.map(ToString::to_string);
        let failure = error.map(|error| match error.as_operation_error().map(service_error) {
            // DynamoDB answered with an error: its code (a throttle's is
            // `ProvisionedThroughputExceededException` or
            // `ThrottlingException`, with a 400) is the error's type.
            Some((code, message)) => (code.unwrap_or("ServiceError"), message.unwrap_or_default()),
            // No answer to read: a timeout, a connection that failed, an
            // answer that could not be read.
            None => (
                if error.is_timeout_error() {
                    "TimeoutError"
                } else if error.is_connector_error() {
                    "DispatchFailure"
                } else if error.is_response_error() {
                    "ResponseError"
                } else {
                    "SdkError"
                },
                other.as_deref().unwrap_or_default(),
            ),
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

/// The error code and message DynamoDB answered with, for the operations
/// the function calls.
fn service_error(
    error: &aws_smithy_runtime_api::client::interceptors::context::Error,
) -> (Option<&str>, Option<&str>) {
    if let Some(error) = error.downcast_ref::<PutItemError>() {
        (error.code(), error.message())
    } else if let Some(error) = error.downcast_ref::<DescribeTableError>() {
        (error.code(), error.message())
    } else {
        (None, None)
    }
}
