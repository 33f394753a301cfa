//! Stand-ins for what Lambda runs beside a function, for tests: the
//! Runtime API ([`runtime_api`]) and the X-Ray daemon's endpoint, whose
//! datagrams are read with OpenTelemetry's own generated messages
//! ([`daemon`]); and a decoded request as one comparable value
//! ([`request_parts()`]). Behind the `test-util` feature, as tokio's and the AWS
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
mod request_parts;
pub mod runtime_api;

#[cfg(test)]
pub(crate) use self::request_parts::query_pairs;
pub use self::request_parts::request_parts;
