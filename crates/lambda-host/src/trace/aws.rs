//! The CLIENT span of each AWS call a traced invocation makes, from an SDK
//! interceptor: opened when the operation starts, ended with its answer
//! when it ends, each retry inside it, as ADOT's botocore instrumentation
//! records boto3's calls (`DynamoDB.PutItem`).

use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, Region, RuntimeComponents, SharedInterceptor};
use aws_sdk_dynamodb::error::{BoxError, ProvideErrorMetadata};
use aws_sdk_dynamodb::operation;
use aws_smithy_runtime_api::client::interceptors::OverriddenHooks;
use aws_smithy_runtime_api::client::interceptors::context::{Error, Input};
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
        let call = Call::open(|tracer| {
            Target::Aws(tracer.aws_call(
                metadata.service(),
                metadata.name(),
                cfg.load::<Region>().map(Region::as_ref),
                table_name(context.input()),
            ))
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
        // Found by walking the few headers: `get` would parse the name
        // against every standard header's, code a traced create otherwise
        // never runs (docs/performance.md, "Traces").
        let request_id = response.and_then(|response| {
            let (_, id) = response
                .headers()
                .iter_bytes()
                .find(|(name, _)| *name == REQUEST_ID)?;
            std::str::from_utf8(id).ok()
        });
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

/// Generates `one_table` and `service_error` from DynamoDB's
/// operations: each a downcast, a `TypeId` compare, run only in a sampled
/// invocation (the table) or on an error (the code).
macro_rules! dynamodb_operations {
    (
        names one table: $(($one:ident, $one_input:ident, $one_error:ident)),+ $(,)?;
        the others: $(($other:ident, $other_error:ident)),+ $(,)?
    ) => {
        /// The table named by an operation's input, for the operations that
        /// name one (`table_name()`).
        fn one_table(input: &Input) -> Option<&str> {
            $(
                if let Some(input) = input.downcast_ref::<operation::$one::$one_input>() {
                    return input.table_name();
                }
            )+
            None
        }

        /// The error code and message DynamoDB answered with, for any of
        /// its operations.
        fn service_error(error: &Error) -> (Option<&str>, Option<&str>) {
            $(
                if let Some(error) = error.downcast_ref::<operation::$one::$one_error>() {
                    return (error.code(), error.message());
                }
            )+
            $(
                if let Some(error) = error.downcast_ref::<operation::$other::$other_error>() {
                    return (error.code(), error.message());
                }
            )+
            (None, None)
        }
    };
}

dynamodb_operations! {
    names one table:
        (put_item, PutItemInput, PutItemError),
        (get_item, GetItemInput, GetItemError),
        (update_item, UpdateItemInput, UpdateItemError),
        (delete_item, DeleteItemInput, DeleteItemError),
        (query, QueryInput, QueryError),
        (scan, ScanInput, ScanError),
        (describe_table, DescribeTableInput, DescribeTableError),
        (create_backup, CreateBackupInput, CreateBackupError),
        (create_table, CreateTableInput, CreateTableError),
        (delete_table, DeleteTableInput, DeleteTableError),
        (describe_continuous_backups, DescribeContinuousBackupsInput, DescribeContinuousBackupsError),
        (describe_contributor_insights, DescribeContributorInsightsInput, DescribeContributorInsightsError),
        (describe_kinesis_streaming_destination, DescribeKinesisStreamingDestinationInput, DescribeKinesisStreamingDestinationError),
        (describe_table_replica_auto_scaling, DescribeTableReplicaAutoScalingInput, DescribeTableReplicaAutoScalingError),
        (describe_time_to_live, DescribeTimeToLiveInput, DescribeTimeToLiveError),
        (disable_kinesis_streaming_destination, DisableKinesisStreamingDestinationInput, DisableKinesisStreamingDestinationError),
        (enable_kinesis_streaming_destination, EnableKinesisStreamingDestinationInput, EnableKinesisStreamingDestinationError),
        (list_backups, ListBackupsInput, ListBackupsError),
        (list_contributor_insights, ListContributorInsightsInput, ListContributorInsightsError),
        (search_vectors, SearchVectorsInput, SearchVectorsError),
        (update_continuous_backups, UpdateContinuousBackupsInput, UpdateContinuousBackupsError),
        (update_contributor_insights, UpdateContributorInsightsInput, UpdateContributorInsightsError),
        (update_kinesis_streaming_destination, UpdateKinesisStreamingDestinationInput, UpdateKinesisStreamingDestinationError),
        (update_table, UpdateTableInput, UpdateTableError),
        (update_table_replica_auto_scaling, UpdateTableReplicaAutoScalingInput, UpdateTableReplicaAutoScalingError),
        (update_time_to_live, UpdateTimeToLiveInput, UpdateTimeToLiveError);
    the others:
        (batch_get_item, BatchGetItemError),
        (batch_write_item, BatchWriteItemError),
        (transact_get_items, TransactGetItemsError),
        (transact_write_items, TransactWriteItemsError),
        (batch_execute_statement, BatchExecuteStatementError),
        (create_global_table, CreateGlobalTableError),
        (delete_backup, DeleteBackupError),
        (delete_resource_policy, DeleteResourcePolicyError),
        (describe_backup, DescribeBackupError),
        (describe_endpoints, DescribeEndpointsError),
        (describe_export, DescribeExportError),
        (describe_global_table, DescribeGlobalTableError),
        (describe_global_table_settings, DescribeGlobalTableSettingsError),
        (describe_import, DescribeImportError),
        (describe_limits, DescribeLimitsError),
        (execute_statement, ExecuteStatementError),
        (execute_transaction, ExecuteTransactionError),
        (export_table_to_point_in_time, ExportTableToPointInTimeError),
        (get_resource_policy, GetResourcePolicyError),
        (import_table, ImportTableError),
        (list_exports, ListExportsError),
        (list_global_tables, ListGlobalTablesError),
        (list_imports, ListImportsError),
        (list_tables, ListTablesError),
        (list_tags_of_resource, ListTagsOfResourceError),
        (put_resource_policy, PutResourcePolicyError),
        (restore_table_from_backup, RestoreTableFromBackupError),
        (restore_table_to_point_in_time, RestoreTableToPointInTimeError),
        (tag_resource, TagResourceError),
        (untag_resource, UntagResourceError),
        (update_global_table, UpdateGlobalTableError),
        (update_global_table_settings, UpdateGlobalTableSettingsError),
}

/// The table a DynamoDB call names: its input's own, or the one table all
/// the keys or items of a batch or a transaction name. A batch across
/// several tables names none: the span holds one table, and naming one of
/// them would point its remote resource at the wrong table.
fn table_name(input: &Input) -> Option<&str> {
    if let Some(table) = one_table(input) {
        return Some(table);
    }
    if let Some(input) = input.downcast_ref::<operation::batch_get_item::BatchGetItemInput>() {
        only(input.request_items()?.keys().map(String::as_str))
    } else if let Some(input) = input.downcast_ref::<operation::batch_write_item::BatchWriteItemInput>() {
        only(input.request_items()?.keys().map(String::as_str))
    } else if let Some(input) =
        input.downcast_ref::<operation::transact_write_items::TransactWriteItemsInput>()
    {
        only(input.transact_items().iter().filter_map(|item| {
            item.put()
                .map(|put| put.table_name())
                .or_else(|| item.update().map(|update| update.table_name()))
                .or_else(|| item.delete().map(|delete| delete.table_name()))
                .or_else(|| item.condition_check().map(|check| check.table_name()))
        }))
    } else if let Some(input) = input.downcast_ref::<operation::transact_get_items::TransactGetItemsInput>() {
        only(
            input
                .transact_items()
                .iter()
                .filter_map(|item| Some(item.get()?.table_name())),
        )
    } else {
        None
    }
}

/// The one name among `names`, if they are all the same.
fn only<'a>(mut names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let first = names.next()?;
    names.all(|name| name == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemInput;
    use aws_sdk_dynamodb::operation::get_item::GetItemInput;
    use aws_sdk_dynamodb::operation::list_tables::{ListTablesError, ListTablesInput};
    use aws_sdk_dynamodb::operation::query::QueryError;
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
    use aws_sdk_dynamodb::types::{
        AttributeValue, ConditionCheck, KeysAndAttributes, Put, TransactWriteItem,
    };

    use super::*;

    fn keys() -> KeysAndAttributes {
        KeysAndAttributes::builder()
            .keys([("id".to_owned(), AttributeValue::S("1".to_owned()))].into())
            .build()
            .unwrap()
    }

    fn put(table: &str) -> TransactWriteItem {
        let put = Put::builder()
            .table_name(table)
            .item("id", AttributeValue::S("1".to_owned()))
            .build()
            .unwrap();
        TransactWriteItem::builder().put(put).build()
    }

    fn check(table: &str) -> TransactWriteItem {
        let check = ConditionCheck::builder()
            .table_name(table)
            .key("id", AttributeValue::S("1".to_owned()))
            .condition_expression("attribute_exists(id)")
            .build()
            .unwrap();
        TransactWriteItem::builder().condition_check(check).build()
    }

    #[test]
    fn an_operation_on_one_table_names_it() {
        let input = GetItemInput::builder().table_name("orders").build().unwrap();
        assert_eq!(table_name(&Input::erase(input)), Some("orders"));
    }

    #[test]
    fn a_batch_or_a_transaction_on_one_table_names_it_and_across_several_names_none() {
        let one = BatchGetItemInput::builder()
            .request_items("orders", keys())
            .build()
            .unwrap();
        assert_eq!(table_name(&Input::erase(one)), Some("orders"));
        let several = BatchGetItemInput::builder()
            .request_items("orders", keys())
            .request_items("invoices", keys())
            .build()
            .unwrap();
        assert_eq!(table_name(&Input::erase(several)), None);

        let one = TransactWriteItemsInput::builder()
            .transact_items(put("orders"))
            .transact_items(check("orders"))
            .build()
            .unwrap();
        assert_eq!(table_name(&Input::erase(one)), Some("orders"));
        let several = TransactWriteItemsInput::builder()
            .transact_items(put("orders"))
            .transact_items(check("invoices"))
            .build()
            .unwrap();
        assert_eq!(table_name(&Input::erase(several)), None);
    }

    #[test]
    fn an_operation_that_names_no_table_names_none() {
        let input = ListTablesInput::builder().build().unwrap();
        assert_eq!(table_name(&Input::erase(input)), None);
    }

    #[test]
    fn any_operations_error_gives_its_code_and_message() {
        let meta = || {
            ErrorMetadata::builder()
                .code("ThrottlingException")
                .message("slow down")
                .build()
        };
        let query = Error::erase(QueryError::generic(meta()));
        assert_eq!(
            service_error(&query),
            (Some("ThrottlingException"), Some("slow down"))
        );
        let list = Error::erase(ListTablesError::generic(meta()));
        assert_eq!(
            service_error(&list),
            (Some("ThrottlingException"), Some("slow down"))
        );
    }
}
