//! Each invocation's trace context: its trace header on every AWS SDK
//! request the handler makes and, when Lambda sampled it (or Application
//! Signals wants every invocation) and runs its X-Ray daemon, the
//! OpenTelemetry spans of its work, sent as ADOT sends them on Lambda
//! (docs/tracing.md has the shape).
//!
//! The loop runs each handler in a scope (a tokio task-local) holding its
//! own invocation's header and, when traced, its spans, parsed once. The
//! first of [`interceptors`] puts the header on each request made in that
//! scope, retries included, and nothing outside any scope. The loop never
//! writes the process-wide `_X_AMZN_TRACE_ID`
//! (docs/upstream/lambda-runtime-trace-id-leak.md), which could not name
//! several invocations at once anyway. CLIENT spans come from
//! the second of [`interceptors`] and from [`remote_call`]; when the scope
//! ends, the SERVER span ends with what [`answered`] recorded, and the
//! invocation's spans go out as one datagram.

use std::fmt::Write as _;
use std::sync::OnceLock;

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents, SharedInterceptor};
use aws_sdk_dynamodb::error::BoxError;
use lambda_http::tracing;

mod aws;
mod daemon;
mod otlp;
mod spans;

use self::aws::AwsSpans;
pub(crate) use self::daemon::{Environment, Tracer};
pub use self::spans::{Annotation, SpanDetails, remote_call};
use self::spans::{Server, Spans};
pub(crate) use self::spans::{ServerAnswer, server_answer};

/// The header the SDK's recursion-detection interceptor sets.
const HEADER: &str = "x-amzn-trace-id";

/// The process's tracer, when `main` enabled one. Beside the task-local
/// rather than in it: it is one socket for the life of the process, like
/// stdout, and the places that send (the SDK interceptor, a
/// [`remote_call`]) are reached through code that must not know about
/// tracing.
static TRACER: OnceLock<Tracer> = OnceLock::new();

/// Sends the spans of traced invocations from now on, when Lambda runs its
/// X-Ray daemon beside the function (`Tracing: Active` sets
/// `AWS_XRAY_DAEMON_ADDRESS`). An address that cannot be used turns
/// tracing off with one warning: tracing is never a reason not to serve.
/// A second call changes nothing.
pub(crate) fn init(environment: &Environment) {
    match Tracer::from_env(environment) {
        Some(Ok(tracer)) => {
            let _ = TRACER.set(tracer);
        }
        Some(Err(err)) => tracing::warn!(cause = %err, "traces are off"),
        None => {}
    }
}

/// What an AWS SDK client needs to take part: register both on its config
/// (`config.push_interceptor(…)`). The first puts the invocation's trace
/// header on every request, each retry included; the second reports each
/// call of a traced invocation as a CLIENT span.
pub fn interceptors() -> [SharedInterceptor; 2] {
    [SharedInterceptor::new(TraceHeader), AwsSpans::shared()]
}

/// The fields of Lambda's trace header (`Root=1-…-…;Parent=…;Sampled=1`),
/// unchecked: the one reading of it.
#[derive(Debug, Default, Clone, Copy)]
struct Fields<'a> {
    root: Option<&'a str>,
    parent: Option<&'a str>,
    sampled: bool,
}

impl<'a> Fields<'a> {
    fn of(header: &'a str) -> Self {
        let mut fields = Self::default();
        for part in header.split(';') {
            match part.trim().split_once('=') {
                Some(("Root", value)) => fields.root = Some(value),
                Some(("Parent", value)) => fields.parent = Some(value),
                Some(("Sampled", value)) => fields.sampled = value == "1",
                _ => {}
            }
        }
        fields
    }
}

/// The trace id X-Ray shows (`1-…-…`), from Lambda's trace header, as
/// Powertools logs it.
pub fn root(header: &str) -> Option<&str> {
    Fields::of(header).root.filter(|root| !root.is_empty())
}

tokio::task_local! {
    static CURRENT: Invocation;
}

/// One invocation's trace context, in the task that serves it or in a task
/// it waits for ([`carried`]).
struct Invocation {
    /// The trace header as the SDK's requests carry it.
    header: Option<String>,
    /// Present only for a traced invocation with a tracer enabled.
    spans: Option<Spans>,
    /// The SERVER span: only in the invocation's own task, which ends it.
    server: Option<Server>,
}

/// `1-` then 8 and 24 hex digits, what X-Ray writes as a trace id: the 32
/// hex digits of the W3C trace id.
fn trace_id(root: &str) -> Option<[u8; 16]> {
    let mut parts = root.split('-');
    let (Some("1"), Some(time), Some(random), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if time.len() != 8 || random.len() != 24 {
        return None;
    }
    let mut id = [0; 16];
    hex_into(time, &mut id[..4])?;
    hex_into(random, &mut id[4..])?;
    Some(id)
}

/// 16 hex digits: a segment or span id.
fn span_id(id: &str) -> Option<[u8; 8]> {
    let mut bytes = [0; 8];
    (id.len() == 16).then_some(())?;
    hex_into(id, &mut bytes)?;
    Some(bytes)
}

fn hex_into(hex: &str, out: &mut [u8]) -> Option<()> {
    let digit = |byte: u8| match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    };
    for (pair, byte) in hex.as_bytes().chunks_exact(2).zip(out.iter_mut()) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(())
}

/// Runs `future` with `trace_id` (the invocation's `Lambda-Runtime-Trace-Id`)
/// as the trace header of every SDK request it makes and, when traced, as
/// the trace of the spans it sends.
pub(crate) async fn scope<F: Future>(trace_id: Option<&str>, future: F) -> F::Output {
    scope_with(TRACER.get(), trace_id, future).await
}

/// [`scope`] with `tracer` instead of the process's.
async fn scope_with<F: Future>(
    tracer: Option<&'static Tracer>,
    trace_id: Option<&str>,
    future: F,
) -> F::Output {
    let (spans, server) = match (trace_id, tracer) {
        (Some(header), Some(tracer)) => Spans::parse(header, tracer).unzip(),
        _ => (None, None),
    };
    let invocation = Invocation {
        header: trace_id.map(encode),
        spans,
        server,
    };
    CURRENT.scope(invocation, future).await
}

/// The calling task's traced invocation, to be continued in another task
/// with [`carried`]: a fetch that a request waits for may run in a task of
/// its own (one that outlives a request dropped at its deadline), and its
/// span still hangs under that request's SERVER span. Empty outside a
/// traced invocation.
pub struct Carried(Option<Spans>);

/// The calling task's traced invocation, for [`carried`].
pub fn carry() -> Carried {
    Carried(
        CURRENT
            .try_with(|invocation| invocation.spans.clone())
            .ok()
            .flatten(),
    )
}

/// Runs `future` in the invocation `carried` from another task: the spans
/// of its calls hang under that invocation's SERVER span, in its batch
/// while it has not been sent. Its trace header is not carried; nothing
/// run this way calls AWS.
pub async fn carried<F: Future>(carried: Carried, future: F) -> F::Output {
    match carried.0 {
        None => future.await,
        Some(spans) => {
            let invocation = Invocation {
                header: None,
                spans: Some(spans),
                server: None,
            };
            CURRENT.scope(invocation, future).await
        }
    }
}

/// The trace header of the invocation being served by the calling task, for
/// a handler to forward on a request the AWS SDK does not make (the SDK's
/// own carry it already). `None` outside an invocation, or without a header.
pub fn current() -> Option<String> {
    CURRENT
        .try_with(|invocation| invocation.header.clone())
        .ok()
        .flatten()
}

/// Sets `X-Amzn-Trace-Id` on each request from the task-local of [`scope`].
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
    fn the_trace_id_is_the_root_of_lambdas_trace_header() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(root(header), Some("1-5759e988-bd862e3fe1be46a994272793"));
        assert_eq!(root("Sampled=0;Root=1-a-b"), Some("1-a-b"));
        assert_eq!(root("Parent=1;Sampled=0"), None);
        assert_eq!(root("Root="), None);
    }

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
