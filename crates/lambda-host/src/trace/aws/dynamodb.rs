//! DynamoDB's part of its calls' spans (cargo feature `dynamodb`): the
//! database conventions' `db.system` and `db.operation`, the table a call
//! names (`aws.dynamodb.table_names`, the `aws.remote.resource.*` of
//! Application Signals), and the code and message of DynamoDB's errors.

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation;
use aws_smithy_runtime_api::client::interceptors::context::{Error, Input};

use crate::trace::conventions::CallKey;
use crate::trace::otlp::{Value, Writer};

/// The SDK's name of the service.
const SERVICE: &str = "DynamoDB";

/// The table a DynamoDB call is on, if it names one.
pub(super) fn resource<'a>(service: &str, input: &'a Input) -> Option<&'a str> {
    if service == SERVICE {
        table_name(input)
    } else {
        None
    }
}

/// `db.*`, and the table's attributes when the call names one.
pub(super) fn attributes(key: &CallKey<'_>, writer: &mut Writer<'_>) {
    if key.service != SERVICE {
        return;
    }
    writer.attribute(9, "db.system", Value::Str("dynamodb"));
    writer.attribute(9, "db.operation", Value::Str(key.operation));
    if let Some(table) = key.resource {
        writer.attribute(9, "aws.dynamodb.table_names", Value::Strs(&[table]));
        writer.attribute(9, "aws.remote.resource.type", Value::Str("AWS::DynamoDB::Table"));
        writer.attribute(9, "aws.remote.resource.identifier", Value::Str(table));
        writer.attribute(9, "aws.remote.resource.cfn.primary.identifier", Value::Str(table));
    }
}

/// The error code and message DynamoDB answered with, when `error` is one
/// of its operations' (`None` for another service's).
pub(super) fn service_error(error: &Error) -> Option<(Option<&str>, Option<&str>)> {
    operation_error(error)
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
        fn operation_error(error: &Error) -> Option<(Option<&str>, Option<&str>)> {
            $(
                if let Some(error) = error.downcast_ref::<operation::$one::$one_error>() {
                    return Some((error.code(), error.message()));
                }
            )+
            $(
                if let Some(error) = error.downcast_ref::<operation::$other::$other_error>() {
                    return Some((error.code(), error.message()));
                }
            )+
            None
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
            Some((Some("ThrottlingException"), Some("slow down")))
        );
        let list = Error::erase(ListTablesError::generic(meta()));
        assert_eq!(
            service_error(&list),
            Some((Some("ThrottlingException"), Some("slow down")))
        );
    }
}
