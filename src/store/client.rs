//! The store as the function builds it at init: the DynamoDB client's time
//! budgets and retries, and the pre-warm that opens its connection before
//! the first request.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{Builder, StalledStreamProtectionConfig};
use aws_sdk_dynamodb::error::{BoxError, DisplayErrorContext};

use super::DynamoStore;

/// Budgets that keep every request well inside the function's timeout: an
/// attempt that hangs is abandoned after two seconds, and the whole
/// operation, retries and backoff included, after five.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(5);
pub const MAX_ATTEMPTS: u32 = 3;

/// Applies our timeouts and retry policy to a DynamoDB client configuration.
pub fn with_budgets(builder: Builder) -> Builder {
    builder
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        )
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(MAX_ATTEMPTS)
                .with_initial_backoff(Duration::from_millis(50)),
        )
        // Stalled-stream protection only acts on a stream stalled for its
        // 20 s grace period, which the attempt timeout never lets pass; on
        // by default, it wraps both bodies of every call and arms a 100 ms
        // timer (12 K instructions a create: docs/performance.md;
        // docs/upstream/aws-smithy-runtime-stalled-stream-protection-every-call.md).
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
}

/// The budget of the init-time pre-warm: one attempt, no retries, so that a
/// store that is down delays the start by at most this much.
pub const PREWARM_TIMEOUT: Duration = Duration::from_secs(2);

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Opens the connection to DynamoDB during init, so that the first
    /// request finds it in the pool: DNS, TCP, the TLS handshake (with the
    /// crypto library's one-off seeding) and the credentials are paid for
    /// before the first request arrives rather than on it. `DescribeTable` is
    /// the cheapest signed call on the table (it needs
    /// `dynamodb:DescribeTable`); any answer, even a denial, leaves a warm
    /// connection behind. The caller logs a failure and carries on: this is
    /// an optimisation, never a reason not to start.
    pub async fn prewarm(&self) -> Result<(), BoxError> {
        let budget = aws_sdk_dynamodb::Config::builder()
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT.min(PREWARM_TIMEOUT))
                    .operation_attempt_timeout(PREWARM_TIMEOUT)
                    .operation_timeout(PREWARM_TIMEOUT)
                    .build(),
            );
        self.client
            .describe_table()
            .table_name(&self.table)
            .customize()
            .config_override(budget)
            .send()
            .await
            .map(|_| ())
            .map_err(|err| DisplayErrorContext(err).to_string().into())
    }
}
