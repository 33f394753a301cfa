//! A host for Rust HTTP functions on AWS Lambda, in `lambda_http`'s terms:
//! the function is a `tower::Service` of `lambda_http::Request`s (an axum
//! `Router`, a `service_fn`, a `ServiceBuilder` stack), whatever front door
//! sent the event (API Gateway REST and HTTP APIs, Application Load
//! Balancers, function URLs, VPC Lattice). A function that runs with
//! `lambda_http::run(service).await` runs here with
//! `lambda_host::run(service).await`, with the same bounds, and
//! `run_concurrent` likewise. A function that installs
//! `lambda_http::tracing::init_default_subscriber()` first has its own spans
//! traced once that line reads `lambda_host::logging::init_default_subscriber()`.
//!
//! What it adds to `lambda_http::run`, for a function that must not lose
//! an answer or a process:
//! - an invocation loop that keeps a warm process's memory flat, serves
//!   Lambda Managed Instances' concurrent invocations (any service together
//!   on one task, [`run`]; a `Clone` one, an axum `Router` among them,
//!   across the vCPUs, [`run_concurrent`]), and contains every fault (a
//!   panic, an `Err`) to the invocation it hits ([`Lambda::serve`]);
//! - front-door events decoded without the panics of `lambda_http`'s own
//!   conversion ([`envelope`]), and the path the client asked of the API,
//!   without stage or mapping key ([`ApiPath`]);
//! - each invocation's deadline, kept by the loop as a backstop
//!   ([`deadline`]), and work behind an answer that ends before the
//!   environment is frozen ([`spawn`]);
//! - OpenTelemetry traces as ADOT sends them on Lambda, with nothing to
//!   set up: the SERVER span of each sampled invocation, a CLIENT span per
//!   AWS SDK call, and the function's own `tracing` spans ([`trace`]);
//! - Lambda's logging controls and `RUST_LOG`, as `lambda_http` reads
//!   them, never writing a raw event ([`logging`]), and, with the `sdk`
//!   feature, the AWS SDK's configuration built as a cold start wants it
//!   (the `sdk` module).
//!
//! Features: none by default, which is all a function that makes no AWS
//! SDK call needs, and links no SDK, TLS stack or crypto library. `sdk`
//! adds the `sdk` module and `trace::interceptors` (aws-config, the
//! smithy client on rustls and aws-lc-rs); `dynamodb` adds DynamoDB's
//! attributes to its calls' spans (`sdk` and aws-sdk-dynamodb);
//! `graceful-shutdown` adds `spawn_graceful_shutdown_handler` (tokio's
//! signal handling); `test-util` the stand-ins of `test_util`, for a
//! function's tests.
//!
//! It knows nothing of the function it hosts. A whole function:
//!
//! ```no_run
#![doc = include_str!("../examples/hello.rs")]
//! ```
//!
//! # Streamed answers
//!
//! A function that streams its answer (a function URL with
//! `InvokeMode: RESPONSE_STREAM`, an API Gateway REST API in its `STREAM`
//! mode: server-sent events, a slow answer, one past the 6 MB of a
//! buffered one) changes one line, as for `run`:
//!
//! ```text
//! - lambda_http::run_with_streaming_response(app).await
//! + lambda_host::run_with_streaming_response(app).await
//! ```
//!
//! [`run_with_streaming_response`] takes the same services (any response
//! whose body is an `http_body::Body`, an axum `Body::from_stream` among
//! them) and streams the same prelude and frames, with backpressure. A
//! body error, a panic in the body and the deadline end that stream with
//! Lambda's error trailers rather than bytes in the body or a lost
//! process; on Managed Instances, N streams run at once. The crate's
//! `examples/axum_streaming.rs` streams server-sent events; Lambda's
//! limits, the settings and a local try are in the repository's
//! docs/streaming.md.

#![warn(missing_docs)]

// The crate README's examples compile, as the crate's own do.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod env;
mod json_string;
mod runtime;
mod words;

pub mod deadline;
pub mod envelope;
pub mod logging;
#[cfg(feature = "sdk")]
pub mod sdk;
pub mod trace;

#[cfg(any(test, feature = "test-util"))]
pub mod test_util;

pub use self::env::{Concurrency, StartError};
pub use self::envelope::ApiPath;
#[cfg(feature = "graceful-shutdown")]
pub use self::runtime::spawn_graceful_shutdown_handler;
pub use self::runtime::{
    Lambda, run, run_concurrent, run_with_streaming_response, run_with_streaming_response_concurrent, spawn,
    start,
};
/// The `lambda_http` the host is built on: its `Request`, `Response`,
/// `Body`, `service_fn`, `tracing` and `tower`, one version of them for the
/// function and the host.
pub use lambda_http;
