//! The path the client asked of the API, whatever the front door did to it.

use std::fmt;

use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};

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
