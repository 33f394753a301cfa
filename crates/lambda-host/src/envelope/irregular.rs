//! Events no front door sends (a direct invoke's, a console test's): what
//! [`decode()`](fn@super::decode) sets aside to make a request of one, in words
//! ([`SetAside`]), and what it refuses ([`UnsupportedEvent`]). An event from
//! API Gateway, an ALB, a function URL or VPC Lattice needs none of it.

use std::fmt;

use url::Url;

use super::SetAside;

/// `http::HeaderMap` holds at most 24,576 names and panics past them, in
/// `aws_lambda_events`' header reader, before any of our code runs: an
/// event with more names in `headers` and `multiValueHeaders` together
/// than this (a direct invoke's) is refused before it is read, and the
/// invocation fails without the handler seeing it. No front door comes
/// near: a request's headers are limited to a few tens of KB (an ALB's,
/// the largest, to 64 KB), at 4 bytes or more each.
pub const MAX_HEADER_NAMES: usize = 16_384;

/// For the log line: what was set aside, in words.
impl fmt::Display for SetAside {
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
pub struct UnsupportedEvent(pub(super) Unsupported);

#[derive(Debug)]
pub(super) enum Unsupported {
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

/// Whether `host` parses as a host and nothing more.
pub(super) fn bare(scheme: &str, host: &str) -> bool {
    Url::parse(&format!("{scheme}://{host}")).is_ok_and(|url| {
        url.username().is_empty()
            && url.password().is_none()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_read_as_one_line() {
        let repairs = SetAside {
            body_not_base64: true,
            host_ignored: true,
            ..SetAside::default()
        };
        assert_eq!(
            repairs.to_string(),
            "body flagged isBase64Encoded is not base64; Host or X-Forwarded-Proto does not form a URL"
        );
    }
}
