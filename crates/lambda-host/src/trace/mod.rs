//! Each invocation's trace: its trace header on every AWS SDK request it
//! makes and, when Lambda sampled it (or Application Signals wants every
//! invocation) and runs its X-Ray daemon, its OpenTelemetry spans, sent
//! as ADOT sends them on Lambda (docs/tracing.md has the shape).
//!
//! The host starts the tracer when Lambda's environment asks for traces,
//! runs each invocation in a scope holding its context, and writes its
//! SERVER span from the answer. A function adds:
//! - `interceptors()` (the `sdk` feature) on each AWS SDK client: the
//!   trace header on every request, and a CLIENT span per call;
//! - [`SpanDetails`] on its response: its route and its own annotations,
//!   read when [`traced()`] is true;
//! - its `tracing` spans, through the [`layer()`] (already on the host's own
//!   subscriber; added to the function's, when it installs one).
//!
//! The rooms: `invocation` reads each invocation's trace header and holds
//! its context; `spans` is the span model and its batch;
//! `conventions` the names and the attributes encoded once; `otlp` the
//! protobuf; `exporter` the socket and the datagrams; `aws` the SDK's
//! interceptors (`aws/dynamodb.rs` with the `dynamodb` feature); `layer`
//! the `tracing` layer.

use lambda_http::tracing;
use lambda_http::tracing::level_filters::LevelFilter;

#[cfg(feature = "sdk")]
mod aws;
mod conventions;
mod details;
mod exporter;
mod invocation;
mod layer;
mod otlp;
mod spans;

pub use self::details::{Annotation, SpanDetails};
pub(crate) use self::exporter::{APPLICATION_SIGNALS, DAEMON_ADDRESS, TraceEnv};
pub use self::invocation::{current, root, traced};
// For the host's `spawn`: work behind an answer keeps its invocation.
use self::exporter::Tracer;
pub(crate) use self::invocation::{Header, scope, server_answer};
pub(crate) use self::invocation::{carried, carry};
pub(crate) use self::layer::recording;
pub use self::layer::{SpansLayer, layer};
pub(crate) use self::spans::ServerAnswer;

/// Starts tracing, once, at start-up: spans are sent from now on when
/// `env` names the X-Ray daemon's address (Lambda's `Tracing: Active`),
/// and the [`layer()`] records `tracing` spans at the logs' level.
/// An address that cannot be used turns tracing off with one warning:
/// tracing is never a reason not to serve. A second call changes nothing.
pub(crate) fn init(env: &TraceEnv) {
    layer::set_level(env.log_level.unwrap_or(LevelFilter::INFO));
    match Tracer::from_env(env) {
        Some(Ok(tracer)) => invocation::start(tracer),
        Some(Err(err)) => tracing::warn!(cause = %err, "traces are off"),
        None => {}
    }
}

/// What an AWS SDK client needs to take part: register both on its config
/// (`config.push_interceptor(…)`). The first puts the invocation's trace
/// header on every request, each retry included; the second reports each
/// call of a traced invocation as a CLIENT span, under the `tracing` span
/// it was made in.
#[cfg(feature = "sdk")]
pub fn interceptors() -> [aws_smithy_runtime_api::client::interceptors::SharedInterceptor; 2] {
    aws::interceptors()
}
