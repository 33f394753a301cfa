//! The decoder that read an event three times (a first pass, then each
//! type tried), kept as it was: the reference the decoder is held to
//! (`tests.rs`).

use std::borrow::Cow;
use std::fmt;

use base64::Engine;
use lambda_http::aws_lambda_events::alb::AlbTargetGroupRequest;
use lambda_http::aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayV2httpRequest};
use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::http::header::{COOKIE, HOST, HeaderMap, HeaderName, HeaderValue};
use lambda_http::http::{Extensions, Method, Uri};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt};
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use url::Url;

use super::super::irregular::{MAX_HEADER_NAMES, Unsupported, UnsupportedEvent, bare};
use super::super::{ApiPath, Decoded, RequestOrigin, SetAside};
use super::Stage;

const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// `decode_with` as it was: a first pass for the type and the header
/// count, then each candidate type's own typed pass.
pub(super) fn decode_with(payload: &[u8], stage: Stage) -> Result<Decoded, UnsupportedEvent> {
    let mut repairs = SetAside::default();
    let (mut request, origin) = match read(payload).map_err(UnsupportedEvent)? {
        Event::RestApi(event) => (rest_api(event, stage, &mut repairs), RequestOrigin::ApiGatewayV1),
        Event::HttpApi(event) => (http_api(event, stage, &mut repairs), RequestOrigin::ApiGatewayV2),
        Event::Alb(event) => (alb(event, &mut repairs), RequestOrigin::Alb),
    };
    let path = ApiPath::of(&request);
    let extensions = request.extensions_mut();
    extensions.insert(repairs);
    extensions.insert(path);
    Ok(Decoded { request, origin })
}

enum Event {
    RestApi(ApiGatewayProxyRequest),
    HttpApi(ApiGatewayV2httpRequest),
    Alb(AlbTargetGroupRequest),
}

/// The top-level members [`read`] looks at before it picks a type.
#[derive(Deserialize)]
struct Shape {
    #[serde(rename = "httpMethod")]
    http_method: Option<IgnoredAny>,
    #[serde(default)]
    headers: Names,
    #[serde(default, rename = "multiValueHeaders")]
    multi_value_headers: Names,
}

/// The event's type, tried in `lambda_http`'s order (REST API, HTTP API,
/// ALB). The REST API's and the ALB's events require a top-level
/// `httpMethod`, and no HTTP API or function URL event has one: without
/// it, only the HTTP API's type is tried, so that the event of the front
/// door with the most traffic is read once, not after a failed REST parse.
fn read(payload: &[u8]) -> Result<Event, Unsupported> {
    let shape: Shape = match serde_json::from_slice(payload) {
        Ok(shape) => shape,
        // JSON, but not an object (serde would read a struct from an array
        // of its fields in order: no front door sends one).
        Err(err) if err.is_data() => return Err(Unsupported::NotAFrontDoor),
        Err(err) => return Err(Unsupported::NotJson(err)),
    };
    let names = shape.headers.0.saturating_add(shape.multi_value_headers.0);
    if names > MAX_HEADER_NAMES {
        return Err(Unsupported::TooManyHeaders(names));
    }
    let has_method = shape.http_method.is_some();
    if has_method && let Ok(event) = serde_json::from_slice(payload) {
        return Ok(Event::RestApi(event));
    }
    if let Ok(event) = serde_json::from_slice(payload) {
        return Ok(Event::HttpApi(event));
    }
    if has_method && let Ok(event) = serde_json::from_slice(payload) {
        return Ok(Event::Alb(event));
    }
    Err(Unsupported::NotAFrontDoor)
}

/// How many members a JSON object has. Any other value counts none: the
/// event's own type decides whether it may be there.
#[derive(Default)]
struct Names(usize);

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CountNames).map(Names)
    }
}

struct CountNames;

impl<'de> Visitor<'de> for CountNames {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let mut names = 0_usize;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
            names = names.saturating_add(1);
        }
        Ok(names)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(0)
    }

    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_bool<E>(self, _: bool) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_i64<E>(self, _: i64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_u64<E>(self, _: u64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_f64<E>(self, _: f64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_str<E>(self, _: &str) -> Result<usize, E> {
        Ok(0)
    }
}

/// API Gateway HTTP API (payload 2.0) and function URLs: the raw query
/// string as the client sent it, cookies apart.
fn http_api(event: ApiGatewayV2httpRequest, stage: Stage, repairs: &mut SetAside) -> Request {
    let mut context = event.request_context;
    let mut headers = event.headers;
    let mut raw_path = event.raw_path.unwrap_or_default();
    let raw_query = event.raw_query_string;
    let location = locate(
        &with_stage(
            context.stage.as_deref().filter(|_| stage == Stage::InPath),
            &raw_path,
        ),
        origin(&headers, context.domain_name.as_deref()),
        raw_query.as_deref().unwrap_or_default(),
    );
    if location.path_ignored {
        raw_path = "/".to_owned();
        context.stage = None;
    }
    if location.host_ignored {
        forget_host(&mut headers);
        context.domain_name = None;
    }
    let query_string_parameters = match raw_query {
        // Read from the raw string, as `lambda_http` does: the event's own
        // map is not decoded the way browsers encode.
        Some(query) if !location.query_ignored => {
            let Ok(parameters) = query.parse::<QueryMap>();
            parameters
        }
        _ => event.query_string_parameters,
    };
    if let Some(cookies) = event.cookies
        && let Ok(value) = HeaderValue::from_str(&cookies.join("; "))
    {
        headers.insert(COOKIE, value);
    }
    let extensions = Extensions::new()
        .with_raw_http_path(raw_path)
        .with_query_string_parameters(query_string_parameters)
        .with_path_parameters(event.path_parameters)
        .with_stage_variables(event.stage_variables);
    let method = context.http.method.clone();
    repairs.note_reference(&location);
    let body = body(event.body, event.is_base64_encoded, repairs);
    request(
        method,
        location.uri,
        headers,
        body,
        extensions.with_request_context(RequestContext::ApiGatewayV2(context)),
    )
}

/// API Gateway REST API (payload 1.0).
fn rest_api(event: ApiGatewayProxyRequest, stage: Stage, repairs: &mut SetAside) -> Request {
    let mut context = event.request_context;
    let mut raw_path = event.path.unwrap_or_default();
    let parameters = preferred(
        event.multi_value_query_string_parameters,
        event.query_string_parameters,
    );
    let location = locate(
        &with_stage(
            context.stage.as_deref().filter(|_| stage == Stage::InPath),
            &raw_path,
        ),
        origin(&event.headers, context.domain_name.as_deref()),
        &parameters.to_query_string(),
    );
    let mut headers = merged(event.multi_value_headers, event.headers);
    if location.path_ignored {
        raw_path = "/".to_owned();
        context.stage = None;
    }
    if location.host_ignored {
        forget_host(&mut headers);
        context.domain_name = None;
    }
    let extensions = Extensions::new()
        .with_raw_http_path(raw_path)
        .with_query_string_parameters(parameters)
        .with_path_parameters(event.path_parameters)
        .with_stage_variables(event.stage_variables)
        .with_request_context(RequestContext::ApiGatewayV1(context));
    repairs.note_reference(&location);
    let body = body(event.body, event.is_base64_encoded, repairs);
    request(event.http_method, location.uri, headers, body, extensions)
}

/// Application Load Balancer: no stage, no domain name, and the query
/// parameters as the client encoded them.
fn alb(event: AlbTargetGroupRequest, repairs: &mut SetAside) -> Request {
    let mut raw_path = event.path.unwrap_or_default();
    let parameters = preferred(
        alb_query(event.multi_value_query_string_parameters),
        alb_query(event.query_string_parameters),
    );
    let location = locate(
        &raw_path,
        origin(&event.headers, None),
        &parameters.to_query_string(),
    );
    let mut headers = merged(event.multi_value_headers, event.headers);
    if location.path_ignored {
        raw_path = "/".to_owned();
    }
    if location.host_ignored {
        forget_host(&mut headers);
    }
    let extensions = Extensions::new()
        .with_raw_http_path(raw_path)
        .with_query_string_parameters(parameters)
        .with_request_context(RequestContext::Alb(event.request_context));
    repairs.note_reference(&location);
    let body = body(event.body, event.is_base64_encoded, repairs);
    request(event.http_method, location.uri, headers, body, extensions)
}

fn request(method: Method, uri: Uri, headers: HeaderMap, body: Body, extensions: Extensions) -> Request {
    let mut request = Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    *request.extensions_mut() = extensions;
    request
}

/// The multi-value parameters hold the single-value ones too, when present.
fn preferred(multi: QueryMap, single: QueryMap) -> QueryMap {
    if multi.is_empty() { single } else { multi }
}

/// The multi-value headers, and the single-value ones over them: one map,
/// as `lambda_http` makes it. [`MAX_HEADER_NAMES`] keeps it within what a
/// `HeaderMap` holds.
fn merged(mut multi: HeaderMap, single: HeaderMap) -> HeaderMap {
    multi.extend(single);
    multi
}

/// An ALB passes the query on still percent-encoded: the `key=value` pairs
/// are joined and decoded once, as `lambda_http` decodes them (so an
/// encoded `&` or `=` separates there too).
fn alb_query(parameters: QueryMap) -> QueryMap {
    if parameters.is_empty() {
        return parameters;
    }
    let raw = parameters
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join("&");
    let Ok(decoded) = raw.parse::<QueryMap>();
    decoded
}

/// The scheme and host the URI is built with, as `lambda_http` picks them:
/// `Host` (or API Gateway's `domainName`) and `X-Forwarded-Proto`, `https`
/// when absent.
fn origin<'a>(headers: &'a HeaderMap, domain_name: Option<&'a str>) -> Option<(&'a str, &'a str)> {
    let host = headers
        .get(HOST)
        .and_then(|host| host.to_str().ok())
        .or(domain_name)?;
    let scheme = headers
        .get(X_FORWARDED_PROTO)
        .and_then(|scheme| scheme.to_str().ok())
        .unwrap_or("https");
    Some((scheme, host))
}

fn forget_host(headers: &mut HeaderMap) {
    headers.remove(HOST);
    headers.remove(X_FORWARDED_PROTO);
}

/// `lambda_http`'s `apigw_path_with_stage`: the URI's path starts with the
/// stage, unless it already does or the stage is `$default`.
fn with_stage<'a>(stage: Option<&str>, path: &'a str) -> Cow<'a, str> {
    match stage {
        None | Some("$default") => Cow::Borrowed(path),
        Some(stage)
            if path
                .strip_prefix('/')
                .and_then(|rest| rest.strip_prefix(stage))
                .is_some_and(|rest| rest.starts_with('/')) =>
        {
            Cow::Borrowed(path)
        }
        Some(stage) => Cow::Owned(format!("/{stage}{path}")),
    }
}

/// The body, decoded from base64 when the event says it is; a body that
/// is not base64 is dropped and noted.
fn body(body: Option<String>, is_base64_encoded: bool, repairs: &mut SetAside) -> Body {
    match body {
        None => Body::Empty,
        Some(text) if !is_base64_encoded => Body::Text(text),
        Some(encoded) => match base64::engine::general_purpose::STANDARD.decode(encoded) {
            Ok(bytes) => Body::Binary(bytes),
            Err(_) => {
                repairs.body_not_base64 = true;
                Body::Empty
            }
        },
    }
}

impl SetAside {
    fn note_reference(&mut self, location: &Location) {
        self.host_ignored = location.host_ignored;
        self.query_ignored = location.query_ignored;
        self.path_ignored = location.path_ignored;
    }
}

/// The request's URI, as `lambda_http` writes it, or as much of it as
/// forms a URI, and what had to be left out.
struct Location {
    uri: Uri,
    path_ignored: bool,
    host_ignored: bool,
    query_ignored: bool,
}

/// `{scheme}://{host}{path}?{query}`, or `{path}?{query}` without a host,
/// with the path written back by `url`, as `lambda_http` writes it. An
/// event from a front door is done after the first try: two URL parses
/// (the host alone, then with the path) and one URI parse.
fn locate(path: &str, origin: Option<(&str, &str)>, query: &str) -> Location {
    let base = match origin {
        Some((scheme, host)) => absolute(scheme, host, path),
        None => relative(path),
    };
    if let Some(uri) = base.and_then(|base| Uri::try_from(with_query(base, query)).ok()) {
        return Location {
            uri,
            path_ignored: false,
            host_ignored: false,
            query_ignored: false,
        };
    }
    set_aside(path, origin, query)
}

/// What [`locate`] leaves out when the whole does not form a URI, in this
/// order: the path (then `/`), the host and scheme, the query.
fn set_aside(path: &str, origin: Option<(&str, &str)>, query: &str) -> Location {
    let forms = |text: String| Uri::try_from(text.as_str()).is_ok().then_some(text);
    let absolute_at = |path: &str| {
        origin
            .and_then(|(scheme, host)| absolute(scheme, host, path))
            .and_then(forms)
    };
    let relative_base = relative(path).and_then(forms);
    let path_ignored = relative_base.is_none();
    let (base, host_ignored) = match absolute_at(if path_ignored { "/" } else { path }) {
        Some(base) => (base, false),
        None => (relative_base.unwrap_or_else(|| "/".to_owned()), origin.is_some()),
    };
    let (uri, query_ignored) = match Uri::try_from(with_query(base.clone(), query)) {
        Ok(uri) => (uri, false),
        Err(_) => (
            Uri::try_from(base).unwrap_or_else(|_| Uri::from_static("/")),
            true,
        ),
    };
    Location {
        uri,
        path_ignored,
        host_ignored,
        query_ignored,
    }
}

/// The URL with a host, if the host is only a host: one with a path,
/// query or credentials of its own would parse, but would change what the
/// request means.
fn absolute(scheme: &str, host: &str, path: &str) -> Option<String> {
    if !(plain(scheme, host, path) || bare(scheme, host)) {
        return None;
    }
    Url::parse(&format!("{scheme}://{host}{path}"))
        .ok()
        .map(String::from)
}

/// A host that cannot carry credentials, a path, a query or a fragment
/// (letters, digits, dots and hyphens, then perhaps a port), before a path
/// that ends it, under a scheme whose URLs always have a path: the whole
/// URL parses exactly when the host alone does, so [`bare`]'s own parse,
/// a tenth of an event's decoding, is not needed. What every front door
/// sends takes this way.
fn plain(scheme: &str, host: &str, path: &str) -> bool {
    let (name, port) = host.rsplit_once(':').unwrap_or((host, ""));
    matches!(scheme, "https" | "http")
        && (path.is_empty() || path.starts_with('/'))
        && !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'-')
        && port.bytes().all(|byte| byte.is_ascii_digit())
}

/// Without a host: the path alone, as `url` reads it.
fn relative(path: &str) -> Option<String> {
    Url::parse(&format!("http://localhost{path}"))
        .ok()
        .map(|url| url.path().to_owned())
}

/// `lambda_http` appends the query to the URL's text, after a fragment if
/// the path made one; `http` then drops the fragment and what follows.
fn with_query(mut base: String, query: &str) -> String {
    if !query.is_empty() {
        base.push('?');
        base.push_str(query);
    }
    base
}
