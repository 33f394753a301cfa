//! A host for Rust HTTP functions on AWS Lambda, built on `lambda_http`'s
//! types: the request is an `http::Request`, the answer an
//! `http::Response`, whatever front door sent the event (API Gateway REST
//! and HTTP APIs, Application Load Balancers, function URLs).
//!
//! What it adds to `lambda_http::run`, for a function that must not lose
//! an answer or a process:
//! - an invocation loop that keeps a warm process's memory flat, serves
//!   Lambda Managed Instances' concurrent invocations, and contains every
//!   fault to the invocation it hits ([`Lambda::serve`]);
//! - front-door events decoded without the panics of `lambda_http`'s own
//!   conversion ([`envelope`]);
//! - each invocation's deadline, kept by the handler and, as a backstop, by
//!   the loop ([`deadline`]);
//! - each invocation's trace header on every AWS SDK request it makes, and
//!   its spans when Lambda samples it ([`trace`]);
//! - Lambda's logging controls, without ever writing a raw event
//!   ([`logging`]), and the AWS SDK's configuration built as a cold start
//!   wants it ([`sdk`]).
//!
//! It knows nothing of the function it hosts. A whole function:
//!
//! ```no_run
#![doc = include_str!("../examples/hello.rs")]
//! ```

#![warn(missing_docs)]

mod env;
mod handler;
mod json;
mod runtime;
mod start;

pub mod deadline;
pub mod envelope;
pub mod logging;
pub mod sdk;
pub mod trace;

pub use self::env::{Concurrency, StartError};
pub use self::handler::{Handler, HandlerFn, handler_fn};
pub use self::json::{append as append_json, to_string as to_json};
pub use self::runtime::Lambda;
pub use self::start::run;
