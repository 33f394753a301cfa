//! One request served in process, with no runtime: the handler's future
//! polled to completion on this thread, and its response read as the
//! contract speaks of it.
//!
//! The function's own tests use it too: `tests/hostile.rs` counts this
//! thread's allocations around `block_on`, and the API tests read every
//! response through `JsonResponse`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use lambda_http::http::HeaderMap;
use lambda_http::{Body, Response};
use serde_json::Value;

/// Runs a future that never waits on anything (an in-memory store, static
/// tokens) on the current thread, so that a test can count this thread's
/// allocations and the fuzzer needs no runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    for _ in 0..64 {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
    panic!("the handler waited on something, with an in-memory store and static tokens");
}

/// A response, reduced to what the contract speaks about. Every answer of
/// the function has a JSON body: one that does not fails here.
#[derive(Debug, PartialEq)]
pub struct JsonResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl From<Response<Body>> for JsonResponse {
    fn from(response: Response<Body>) -> Self {
        let (parts, body) = response.into_parts();
        let body = serde_json::from_slice(body.as_ref())
            .unwrap_or_else(|err| panic!("the response body is not JSON ({err}): {:?}", body.as_ref()));
        Self {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    }
}

impl JsonResponse {
    /// The value of the header `name`, which must not appear twice.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.get_all(name).iter();
        let value = values.next()?;
        assert!(
            values.next().is_none(),
            "{name} appears twice: {:?}",
            self.headers
        );
        Some(value.to_str().expect("ASCII header"))
    }
}
