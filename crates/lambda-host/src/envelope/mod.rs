//! The event envelope: the JSON a front door hands Lambda, turned into an
//! `http::Request` for the handler, and the handler's `Response` turned
//! back into that front door's JSON.
//!
//! Both conversions are ours, on `lambda_http`'s public API only: its own
//! go through `#[doc(hidden)]` items and panic on what a direct invoke can
//! send (docs/upstream/lambda-http-conversion-panics.md). The request is the
//! one `lambda_http::request::from_str` makes of the same event, the answer
//! the JSON `lambda_http` writes (`tests/host/front_doors.rs` holds both);
//! where `lambda_http` would panic, [`decode`] sets the field aside and
//! records it in [`Repairs`], for the handler to answer with its own error.
//! The URI keeps a REST API's stage, as `lambda_http` does unless
//! `AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH` is set (read once, at start);
//! the path the client asked of the API, without stage or mapping key, is
//! the request's [`ApiPath`].

use std::fmt;

use lambda_http::Request;

mod decode;
mod encode;
mod path;

pub use self::decode::decode;
pub(crate) use self::decode::{Stage, decode_with};
pub use self::encode::encode;
pub use self::path::ApiPath;

/// `http::HeaderMap` holds at most 24,576 names and panics past them, in
/// `aws_lambda_events`' header reader, before any of our code runs: an
/// event with more names in `headers` and `multiValueHeaders` together
/// than this (a direct invoke's) is refused before it is read, and the
/// invocation fails without the handler seeing it. No front door comes
/// near: a request's headers are limited to a few tens of KB (an ALB's,
/// the largest, to 64 KB), at 4 bytes or more each.
pub const MAX_HEADER_NAMES: usize = 16_384;

/// What [`decode`] set aside because it does not form a request. Every
/// field is false for an event from a real front door.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repairs {
    /// The body was flagged `isBase64Encoded` but is not base64: dropped,
    /// and the request has no body.
    pub body_not_base64: bool,
    /// `Host` (or the context's `domainName`) and `X-Forwarded-Proto` did
    /// not form a URL with the path: removed, and the URI is the path
    /// alone.
    pub host_ignored: bool,
    /// The query string did not form a URI: dropped.
    pub query_ignored: bool,
    /// The path (with the stage) did not form a URL: replaced by `/`.
    pub path_ignored: bool,
}

impl Repairs {
    /// Whether anything was set aside.
    pub fn any(&self) -> bool {
        *self != Self::default()
    }
}

/// For the log line: what was set aside, in words.
impl fmt::Display for Repairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            (self.body_not_base64, "body flagged isBase64Encoded is not base64"),
            (self.host_ignored, "Host or X-Forwarded-Proto does not form a URL"),
            (self.query_ignored, "query string does not form a URL"),
            (self.path_ignored, "path does not form a URL"),
        ];
        let mut first = true;
        for (_, text) in parts.iter().filter(|(set, _)| *set) {
            if !first {
                f.write_str("; ")?;
            }
            f.write_str(text)?;
            first = false;
        }
        Ok(())
    }
}

/// An event that is not from a front door we serve (an SQS record sent by
/// mistake, a test event from the console): the invocation fails with this
/// one line, and no handler runs.
#[derive(Debug)]
pub struct UnsupportedEvent(Unsupported);

#[derive(Debug)]
enum Unsupported {
    NotJson(serde_json::Error),
    NotAFrontDoor,
    TooManyHeaders(usize),
}

impl fmt::Display for UnsupportedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unsupported event: ")?;
        match &self.0 {
            Unsupported::NotJson(err) => write!(f, "{err}"),
            // `lambda_http`'s sentence, which operators may already search for.
            Unsupported::NotAFrontDoor => f.write_str(
                "this function expects a JSON payload from Amazon API Gateway, Amazon Elastic Load \
                 Balancer, or AWS Lambda Function URLs, but the data doesn't match any of those services' events",
            ),
            Unsupported::TooManyHeaders(names) => write!(
                f,
                "{names} header names, more than the {MAX_HEADER_NAMES} a front door's request can have"
            ),
        }
    }
}

impl std::error::Error for UnsupportedEvent {}

/// The front door an event came through, which decides the shape of the
/// answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontDoor {
    /// API Gateway REST API (payload 1.0): headers in `multiValueHeaders`.
    RestApi,
    /// API Gateway HTTP API (payload 2.0) and Lambda function URLs:
    /// `Set-Cookie` in `cookies`.
    HttpApi,
    /// Application Load Balancer: both header forms, and a status line.
    Alb,
}

/// A request ready for the handler, and where it came from: what a
/// function's tests hand their handler, from the front doors' real events.
#[derive(Debug)]
pub struct Decoded {
    /// The request, with [`Repairs`] among its extensions.
    pub request: Request,
    /// The front door, whose shape the answer takes ([`encode`]).
    pub origin: FrontDoor,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_read_as_one_line() {
        let repairs = Repairs {
            body_not_base64: true,
            host_ignored: true,
            ..Repairs::default()
        };
        assert_eq!(
            repairs.to_string(),
            "body flagged isBase64Encoded is not base64; Host or X-Forwarded-Proto does not form a URL"
        );
    }
}
