//! The smallest function on the host: answers every request with its path.

use std::process::ExitCode;

use lambda_host::handler_fn;
use lambda_http::{Body, Request, Response};

fn main() -> ExitCode {
    lambda_host::run(|| {
        // Read the function's settings here; an `Err` stops it with one line.
        Ok::<_, lambda_http::Error>(async {
            // Build clients here (`lambda_host::sdk::load`), once.
            Ok(handler_fn(|request: Request| async move {
                Response::new(Body::from(format!("hello from {}", request.uri().path())))
            }))
        })
    })
}
