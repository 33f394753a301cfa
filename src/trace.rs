//! The invocation's X-Ray trace header on every AWS SDK request made for it.
//!
//! The SDK's recursion-detection interceptor copies `_X_AMZN_TRACE_ID` from
//! the process environment onto each request as `X-Amzn-Trace-Id`, and
//! `lambda_runtime`'s sequential loop sets that variable before every
//! invocation. Our loop never writes the environment (`runtime.rs` says
//! why), and with several invocations in flight at once one variable could
//! not name them all anyway. Instead the loop runs each handler inside
//! [`scope`] with its own invocation's trace header, a tokio task-local, and
//! [`TraceHeader`], registered once on the DynamoDB client, puts it on every
//! request that handler makes, each retry included. Outside any scope (the
//! pre-warm during init) it adds nothing.

use std::fmt::Write as _;

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;

/// The header the SDK's recursion-detection interceptor sets.
pub const HEADER: &str = "x-amzn-trace-id";

tokio::task_local! {
    static CURRENT: Option<String>;
}

/// Runs `future` with `trace_id` (the invocation's `Lambda-Runtime-Trace-Id`)
/// as the trace header of every SDK request it makes.
pub async fn scope<F: Future>(trace_id: Option<&str>, future: F) -> F::Output {
    CURRENT.scope(trace_id.map(encode), future).await
}

/// The trace header of the invocation being served by the calling task.
pub fn current() -> Option<String> {
    CURRENT.try_with(Clone::clone).ok().flatten()
}

/// Sets `X-Amzn-Trace-Id` on each request from the task-local of [`scope`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceHeader;

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

/// Percent-encodes control characters and non-ASCII bytes, the set the
/// SDK's recursion-detection interceptor encodes (`percent_encoding::CONTROLS`),
/// so that any trace header Lambda sends becomes a valid header value.
fn encode(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        if (0x20..0x7f).contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_header_as_lambda_sends_it_is_kept_as_it_is() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(encode(header), header);
    }

    #[test]
    fn control_characters_and_non_ascii_are_percent_encoded_as_the_sdk_does() {
        assert_eq!(encode("a\tb\u{7f}c\u{e9}d %"), "a%09b%7Fc%C3%A9d %");
    }

    #[tokio::test]
    async fn the_header_is_seen_inside_its_scope_only() {
        assert_eq!(current(), None);
        let inside = scope(Some("Root=1-a"), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("Root=1-a"));
        assert_eq!(scope(None, async { current() }).await, None);
        assert_eq!(current(), None);
    }

    #[tokio::test]
    async fn concurrent_scopes_each_see_their_own_header() {
        let one = scope(Some("Root=1-one"), async {
            tokio::task::yield_now().await;
            current()
        });
        let two = scope(Some("Root=1-two"), async {
            tokio::task::yield_now().await;
            current()
        });
        let (one, two) = tokio::join!(one, two);
        assert_eq!(one.as_deref(), Some("Root=1-one"));
        assert_eq!(two.as_deref(), Some("Root=1-two"));
    }
}
