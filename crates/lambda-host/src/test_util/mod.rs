//! Stand-ins for what Lambda runs beside a function, for tests: the
//! Runtime API ([`runtime_api`]) and the X-Ray daemon's endpoint, whose
//! datagrams are read with OpenTelemetry's own generated messages
//! ([`daemon`]). Behind the `test-util` feature, as tokio's and the AWS
//! SDK's test helpers are: a function enables it in its
//! `[dev-dependencies]` only.
//!
//! Test support: a stand-in that cannot do what a test asked of it
//! panics, which is how a test reports it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod daemon;
pub mod runtime_api;
