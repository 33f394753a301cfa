//! Properties of the two parsers every request goes through, over generated
//! inputs: the `Authorization` parser and the body parser never panic and
//! agree with the contract on any input, valid documents round-trip through
//! the parser, the handler and the `Plant` response, and every bound holds
//! exactly at its edge, on both sides.
//!
//! Case counts are bounded so that the whole file runs in seconds; a failure
//! is shrunk to a minimal input and its seed saved under
//! `tests/proptest-regressions/properties/<file>.txt` (commit it: it is replayed first).

use std::fmt::Write as _;

use lambda_http::http::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use plant_store::auth::{AuthError, Authenticator, bearer_token};
use plant_store::handler::App;
use plant_store::plant::{BodyError, Bound, NAME_MAX_CHARS, NewPlant, Plant, TAG_MAX_CHARS};
use plant_store::store::MemoryStore;
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::helpers::Event;

mod authorization;
mod body;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
}
