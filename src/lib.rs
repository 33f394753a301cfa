//! plant-store: `POST /plants` on AWS Lambda, backed by DynamoDB.
//!
//! A create goes through [`handler`] (route, then the checks in order),
//! [`auth`] (the bearer token), [`plant`] (the body), [`store`] (one
//! conditional `PutItem`) and [`error`] (every failure's status and `Error`
//! body); [`telemetry`] writes its log line and metrics. The Lambda side,
//! which knows nothing of plants, is the `lambda-host` crate. `main.rs`
//! wires them together, and no code of it runs per request.
//!
//! In [`auth`], [`store`] and [`telemetry`], the module's own file is what a
//! request runs; what runs once at start-up (building, checking, warming),
//! or only in tests, sits in a file beside it.

pub mod auth;
pub mod config;
pub mod error;
pub mod handler;
mod json;
pub mod log;
pub mod plant;
pub mod store;
pub mod telemetry;

#[cfg(feature = "test-util")]
pub mod fuzzing;
