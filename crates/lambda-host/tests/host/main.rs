//! The host's own tests, on its public API only: the front doors' events
//! both ways, and the invocation loop under a stand-in Runtime API.

// A test crate: a failing unwrap, expect, panic or index is how it reports.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod examples;
mod front_doors;
mod invocations;
mod services;
mod streaming;

use lambda_host::test_util::runtime_api as runtime_fake;

/// A sample event from `tests/data/`.
fn data(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}
