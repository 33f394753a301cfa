//! Black-box tests of the function: the real handler, the real event
//! envelopes and Amazon's DynamoDB Local. One binary, so one DynamoDB Local.

// A test crate: a failing unwrap, expect, panic or index is how it reports.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod concurrency;
mod create;
mod events;
mod fault_proxy;
mod faults;
mod fuzz_corpus;
mod helpers;
mod jwt;
mod prewarm;
mod properties;
mod resilience;
mod runtime_api;
mod startup;
mod telemetry;
mod traces;

/// The host's stand-in Runtime API (its `test-util` feature).
use lambda_host::test_util::runtime_api as runtime_fake;
/// The fuzz targets' bodies, for the corpus replay, and their in-process
/// reading of a response, for the harness (the `test-util` feature).
use plant_store::fuzzing as fuzz_targets;
