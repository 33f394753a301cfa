//! Where plants are kept: the one operation the service needs (`create`)
//! and its DynamoDB adapter. The client's budgets and the pre-warm, which
//! run at init, are in [`client`]; the in-memory store for tests and
//! benchmarks is behind the `test-util` feature.

pub mod client;
#[cfg(feature = "test-util")]
mod memory;

use std::collections::HashMap;
use std::fmt;
use std::time::SystemTime;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{BoxError, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::primitives::{DateTime, DateTimeFormat};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};

#[cfg(feature = "test-util")]
pub use self::memory::MemoryStore;
use crate::plant::{NewPlant, PlantId};

/// How a successful `create` came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// The plant was written now.
    Inserted,
    /// The same plant was already stored (a client retry); nothing written.
    Replayed,
}

impl Created {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inserted => "inserted",
            Self::Replayed => "replayed",
        }
    }
}

#[derive(Debug)]
pub enum StoreError {
    /// A different plant already has this id; it was left unchanged.
    Conflict(PlantId),
    /// Throttled, unreachable or timed out after the bounded retries: the
    /// write did not happen, or happened and a retry will find it.
    Unavailable(BoxError),
    /// Anything else, e.g. a missing table or denied permission.
    Internal(BoxError),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Conflict(id) => write!(f, "a different plant with id {id} already exists"),
            Self::Unavailable(_) => f.write_str("the store is unavailable"),
            Self::Internal(_) => f.write_str("the store failed"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Conflict(_) => None,
            Self::Unavailable(source) | Self::Internal(source) => Some(source.as_ref()),
        }
    }
}

/// The narrow seam between the handler and storage.
pub trait PlantStore: Send + Sync {
    /// Stores `plant` unless its id is taken. Storing the identical plant
    /// again is `Ok(Created::Replayed)`; a different plant under the same id
    /// is `Err(StoreError::Conflict)`.
    fn create(&self, plant: &NewPlant) -> impl Future<Output = Result<Created, StoreError>> + Send;
}

/// Plants in a DynamoDB table with partition key `id` (Number). Built,
/// and its connection opened, at init ([`client`]).
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

impl PlantStore for DynamoStore {
    /// One conditional `PutItem`. When the id is taken, DynamoDB returns the
    /// stored item in the same round trip (`ALL_OLD`), and its content
    /// decides between an idempotent replay and a conflict.
    async fn create(&self, plant: &NewPlant) -> Result<Created, StoreError> {
        let created_at = DateTime::from(SystemTime::now())
            .fmt(DateTimeFormat::DateTime)
            .map_err(|err| StoreError::Internal(err.into()))?;
        // Room for all four from the start: the table grows at the fourth.
        let mut item = HashMap::with_capacity(4);
        item.insert("id".to_owned(), AttributeValue::N(plant.id.to_string()));
        item.insert(
            "name".to_owned(),
            AttributeValue::S(plant.name.as_str().to_owned()),
        );
        item.insert("created_at".to_owned(), AttributeValue::S(created_at));
        if let Some(tag) = &plant.tag {
            item.insert("tag".to_owned(), AttributeValue::S(tag.as_str().to_owned()));
        }

        // Boxed: the SDK's operation future is 6 KB, and inline it would grow
        // every frame that polls an invocation (docs/performance.md,
        // "Smaller stack frames").
        let result = Box::pin(
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(id)")
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send(),
        )
        .await;

        match result {
            Ok(_) => Ok(Created::Inserted),
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failure)) => match failure.item() {
                    Some(stored) if stores_same_plant(stored, plant) => Ok(Created::Replayed),
                    Some(_) => Err(StoreError::Conflict(plant.id)),
                    None => Err(StoreError::Internal(
                        "the condition failed but DynamoDB returned no item".into(),
                    )),
                },
                _ => Err(classify(err)),
            },
        }
    }
}

fn stores_same_plant(stored: &HashMap<String, AttributeValue>, plant: &NewPlant) -> bool {
    let text = |key: &str| {
        stored
            .get(key)
            .and_then(|value| value.as_s().ok())
            .map(String::as_str)
    };
    text("name") == Some(plant.name.as_str()) && text("tag") == plant.tag.as_ref().map(|tag| tag.as_str())
}

/// Sorts failures into "retry later" (503) and "our fault" (500). Everything
/// that is about capacity or reachability is worth a retry by the client;
/// the write is idempotent, so a retry is always safe.
fn classify<R: fmt::Debug + Send + Sync + 'static>(err: SdkError<PutItemError, R>) -> StoreError {
    let transient = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => true,
        SdkError::ServiceError(service) => {
            matches!(
                service.err(),
                PutItemError::InternalServerError(_)
                    | PutItemError::TransactionConflictException(_)
                    | PutItemError::ReplicatedWriteConflictException(_)
            ) || is_transient_code(aws_sdk_dynamodb::error::ProvideErrorMetadata::code(service.err()))
        }
        _ => false,
    };
    if transient {
        StoreError::Unavailable(err.into())
    } else {
        StoreError::Internal(err.into())
    }
}

/// Error codes that say "retry later", modeled by the generated enum or
/// not: throttling (DynamoDB's comes with a 400, not a 429; the others are
/// the SDKs' generic codes), and the service's own unavailability.
fn is_transient_code(code: Option<&str>) -> bool {
    code.is_some_and(|code| {
        matches!(
            code,
            "ProvisionedThroughputExceededException"
                | "RequestLimitExceeded"
                | "Throttling"
                | "ThrottlingException"
                | "ServiceUnavailable"
                | "ServiceUnavailableException"
                | "InternalFailure"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(id: i64, name: &str, tag: Option<&str>) -> NewPlant {
        let body = match tag {
            Some(tag) => format!(r#"{{"id":{id},"name":"{name}","tag":"{tag}"}}"#),
            None => format!(r#"{{"id":{id},"name":"{name}"}}"#),
        };
        NewPlant::from_json(body.as_bytes()).unwrap()
    }

    fn item(name: &str, tag: Option<&str>) -> HashMap<String, AttributeValue> {
        let mut item = HashMap::from([
            ("id".to_owned(), AttributeValue::N("1".into())),
            ("name".to_owned(), AttributeValue::S(name.into())),
            (
                "created_at".to_owned(),
                AttributeValue::S("2026-01-01T00:00:00Z".into()),
            ),
        ]);
        if let Some(tag) = tag {
            item.insert("tag".to_owned(), AttributeValue::S(tag.into()));
        }
        item
    }

    #[test]
    fn a_stored_item_is_the_same_plant_only_when_name_and_tag_both_match() {
        let cases = [
            (item("Fern", None), plant(1, "Fern", None), true),
            (item("Fern", Some("x")), plant(1, "Fern", Some("x")), true),
            (item("Fern", Some("x")), plant(1, "Fern", None), false),
            (item("Fern", None), plant(1, "Fern", Some("x")), false),
            (item("Fern", Some("x")), plant(1, "Fern", Some("y")), false),
            (item("fern", None), plant(1, "Fern", None), false),
        ];
        for (stored, new, same) in cases {
            assert_eq!(stores_same_plant(&stored, &new), same, "{stored:?} vs {new:?}");
        }
    }

    #[test]
    fn unmodelled_throttling_and_unavailability_codes_are_transient() {
        for code in [
            "ProvisionedThroughputExceededException",
            "RequestLimitExceeded",
            "ThrottlingException",
            "Throttling",
            "ServiceUnavailable",
            "ServiceUnavailableException",
            "InternalFailure",
        ] {
            assert!(is_transient_code(Some(code)), "{code}");
        }
        for code in [None, Some("ValidationException"), Some("AccessDeniedException")] {
            assert!(!is_transient_code(code), "{code:?}");
        }
    }
}
