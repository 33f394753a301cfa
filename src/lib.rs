//! plant-store: `POST /plants` on AWS Lambda, backed by DynamoDB.
//!
//! `main.rs` only wires these modules together; everything testable lives
//! here so that `tests/` can drive the real handler.

pub mod auth;
pub mod config;
pub mod deadline;
pub mod envelope;
pub mod error;
pub mod handler;
pub mod logging;
pub mod plant;
pub mod runtime;
pub mod sdk;
pub mod store;
pub mod telemetry;
pub mod trace;
