//! The event envelope: the JSON a front door hands Lambda, turned into an
//! `http::Request` for the handler, and the handler's `Response` turned
//! back into that front door's JSON.
//!
//! Both conversions are ours, on `lambda_http`'s public API only: its own
//! go through `#[doc(hidden)]` items and panic on what a direct invoke can
//! send (docs/upstream/lambda-http-conversion-panics.md). The request is the
//! one `lambda_http::request::from_str` makes of the same event, the answer
//! the JSON `lambda_http` writes (`tests/host/front_doors.rs` holds both);
//! where `lambda_http` would panic, [`decode()`] sets the field aside and
//! records it in [`SetAside`], for the handler to answer with its own error.
//! The URI keeps a REST API's stage, as `lambda_http` does unless
//! `AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH` is set (read once, at start);
//! the path the client asked of the API, without stage or mapping key, is
//! the request's [`ApiPath`].

use std::fmt;

use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};

mod context;
mod decode;
mod encode;
mod irregular;
mod json;
mod read;

pub use self::decode::decode;
pub(crate) use self::decode::{Stage, decode_with};
pub use self::encode::{InvalidResponse, encode};
pub use self::irregular::{MAX_HEADER_NAMES, UnsupportedEvent};

/// What [`decode()`] set aside because it does not form a request, from an
/// event no front door sends (`irregular.rs` words it for the log). Every
/// field is false for an event from a real front door.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetAside {
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

impl SetAside {
    /// Whether anything was set aside.
    pub fn any(&self) -> bool {
        *self != Self::default()
    }
}

/// The front door an event came through, which decides the shape of the
/// answer: `lambda_http`'s name and variants for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestOrigin {
    /// API Gateway REST API (payload 1.0): headers in `multiValueHeaders`.
    ApiGatewayV1,
    /// API Gateway HTTP API (payload 2.0) and Lambda function URLs:
    /// `Set-Cookie` in `cookies`.
    ApiGatewayV2,
    /// Application Load Balancer: both header forms, and a status line.
    Alb,
    /// VPC Lattice (payloads 1.0 and 2.0): one value per header name.
    VpcLattice,
}

/// A request ready for the handler, and where it came from: what a
/// function's tests hand their handler, from the front doors' real events.
#[derive(Debug)]
#[non_exhaustive]
pub struct Decoded {
    /// The request, with [`SetAside`] among its extensions.
    pub request: Request,
    /// The front door, whose shape the answer takes ([`encode()`]).
    pub origin: RequestOrigin,
}

/// The path the client asked of the API: without a REST or HTTP API's
/// stage, and without the API mapping key of a custom domain. The host
/// sets it on every request it decodes (a request extension), so that a
/// function routes on it rather than on the URI, whose path keeps the
/// stage as `lambda_http` keeps it; the SERVER span's `url.path` is this.
///
/// ```
/// # use lambda_host::ApiPath;
/// # fn route(request: &lambda_http::Request) -> bool {
/// let path = request.extensions().get::<ApiPath>().map_or("/", ApiPath::as_str);
/// path == "/orders"
/// # }
/// ```
///
/// The front doors leave these in or take them out each their own way:
/// - REST APIs give the path without the stage, but HTTP APIs on a named
///   stage put the stage in `rawPath`: it is stripped, so `/prod/orders`
///   is `/orders`.
/// - Behind a custom domain, API Gateway leaves the API mapping key in the
///   path (`/v1/orders`, `/orders/v1/orders`) and says nowhere what the
///   key was, but it names the route that matched (`routeKey`
///   `POST /orders`, `resource` `/orders`). When that route is a literal
///   path and the request's path is whole segments followed by it, the
///   route is what the client asked for. A `$default` route or a
///   `{proxy+}` resource names no path: behind those the path is kept as
///   it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPath(String);

impl ApiPath {
    /// The path, starting with `/`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Works the path out from a request as the front door's event made it.
    pub(crate) fn of(request: &Request) -> Self {
        Self(api_path(request).to_owned())
    }
}

impl AsRef<str> for ApiPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ApiPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn api_path(request: &Request) -> &str {
    let raw = match request.raw_http_path() {
        "" => request.uri().path(),
        raw => raw,
    };
    let (stage, route) = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => (
            context.stage.as_deref(),
            context
                .route_key
                .as_deref()
                .and_then(|key| key.split_once(' '))
                .map(|(_method, path)| path),
        ),
        Some(RequestContext::ApiGatewayV1(context)) => {
            (context.stage.as_deref(), context.resource_path.as_deref())
        }
        _ => (None, None),
    };
    let path = match stage {
        Some(stage) if stage != "$default" => raw
            .strip_prefix('/')
            .and_then(|rest| rest.strip_prefix(stage))
            .filter(|rest| rest.starts_with('/'))
            .unwrap_or(raw),
        _ => raw,
    };
    match route {
        Some(route) if is_literal_route(route) => match path.strip_suffix(route) {
            Some(mapping_key) if is_whole_segments(mapping_key) => route,
            _ => path,
        },
        _ => path,
    }
}

/// A route with no path parameter, greedy or not.
fn is_literal_route(route: &str) -> bool {
    route.starts_with('/') && !route.contains('{')
}

/// `/v1`, `/orders/v1`: one or more non-empty segments.
fn is_whole_segments(prefix: &str) -> bool {
    prefix
        .strip_prefix('/')
        .is_some_and(|rest| rest.split('/').all(|segment| !segment.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_key_is_whole_segments_before_a_literal_route() {
        assert!(is_whole_segments("/v1"));
        assert!(is_whole_segments("/orders/v1"));
        assert!(!is_whole_segments(""));
        assert!(!is_whole_segments("/"));
        assert!(!is_whole_segments("/v1/"));
        assert!(!is_whole_segments("v1"));
        assert!(is_literal_route("/orders"));
        assert!(!is_literal_route("/{proxy+}"));
        assert!(!is_literal_route("$default"));
    }
}
