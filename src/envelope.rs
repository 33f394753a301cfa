//! The event envelope: the JSON a front door hands Lambda, turned into an
//! `http::Request` for the handler, and the handler's `Response` turned
//! back into that front door's JSON.
//!
//! Both conversions are ours, on public API only: the event and response
//! types of `aws_lambda_events` (as `lambda_http` re-exports it, so that
//! they are the very types its `RequestContext` holds) and `lambda_http`'s
//! request extensions (`RequestExt::with_*`). `lambda_http`'s own
//! conversions go through `#[doc(hidden)]` items (`LambdaRequest`,
//! `RequestOrigin`, `TransformResponse`) that any release may change, and
//! its request conversion panics on fields a direct invoke can send
//! (docs/upstream/lambda-http-conversion-panics.md). The request made here
//! is the one `lambda_http::request::from_str` makes of the same event,
//! wherever that one does not panic, and each front door's answer is the
//! JSON `lambda_http` wrote: `tests/api/front_doors.rs` holds both.
//!
//! Where `lambda_http` would panic, [`decode`] sets the field aside and
//! records it in [`Repairs`], a request extension that the handler reads (a
//! body that is not base64 is a 400) and logs. One difference on purpose:
//! `AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH`, which `lambda_http` reads on
//! every request, is not read: the URI keeps the stage in front of the path,
//! as `lambda_http` does by default, and nothing routes on it (`handler.rs`
//! routes on the raw path and the request context).

use std::borrow::Cow;
use std::fmt;

use base64::Engine;
use lambda_http::aws_lambda_events::alb::{AlbTargetGroupRequest, AlbTargetGroupResponse};
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayProxyRequest, ApiGatewayProxyResponse, ApiGatewayV2httpRequest, ApiGatewayV2httpResponse,
};
use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::http::header::{COOKIE, HOST, HeaderMap, HeaderName, HeaderValue, SET_COOKIE};
use lambda_http::http::{Extensions, Method, Uri};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use url::Url;

const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// `http::HeaderMap` holds at most 24,576 names and panics past them, in
/// `aws_lambda_events`' header reader, before any of our code runs: an
/// event with more names in `headers` and `multiValueHeaders` together
/// than this (a direct invoke's) is refused before it is read. No front
/// door comes near: a request's headers are limited to a few tens of KB
/// (an ALB's, the largest, to 64 KB), at 4 bytes or more each.
pub const MAX_HEADER_NAMES: usize = 16_384;

/// What [`decode`] set aside because it does not form a request. Every
/// field is false for an event from a real front door.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repairs {
    /// The body was flagged `isBase64Encoded` but is not base64: dropped,
    /// and the request is answered 400.
    pub body_not_base64: bool,
    /// `Host` (or the context's `domainName`) and `X-Forwarded-Proto` did
    /// not form a URL with the path: removed, and the URI is the path
    /// alone. We never route on them.
    pub host_ignored: bool,
    /// The query string did not form a URI: ignored. We take no query.
    pub query_ignored: bool,
    /// The path (with the stage) did not form a URL: replaced by `/`,
    /// which is not ours, so the request is answered 404.
    pub path_ignored: bool,
}

impl Repairs {
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

/// A request ready for the handler, and where it came from.
#[derive(Debug)]
pub struct Decoded {
    pub request: Request,
    pub origin: FrontDoor,
}

/// Parses an invocation's payload into a request. [`Repairs`] is attached
/// to the request as an extension.
pub fn decode(payload: &[u8]) -> Result<Decoded, UnsupportedEvent> {
    let mut repairs = Repairs::default();
    let (mut request, origin) = match read(payload).map_err(UnsupportedEvent)? {
        Event::RestApi(event) => (rest_api(event, &mut repairs), FrontDoor::RestApi),
        Event::HttpApi(event) => (http_api(event, &mut repairs), FrontDoor::HttpApi),
        Event::Alb(event) => (alb(event, &mut repairs), FrontDoor::Alb),
    };
    request.extensions_mut().insert(repairs);
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
fn http_api(event: ApiGatewayV2httpRequest, repairs: &mut Repairs) -> Request {
    let mut context = event.request_context;
    let mut headers = event.headers;
    let mut raw_path = event.raw_path.unwrap_or_default();
    let raw_query = event.raw_query_string;
    let location = locate(
        &with_stage(context.stage.as_deref(), &raw_path),
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
    repairs.note(&location);
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
fn rest_api(event: ApiGatewayProxyRequest, repairs: &mut Repairs) -> Request {
    let mut context = event.request_context;
    let mut raw_path = event.path.unwrap_or_default();
    let parameters = preferred(
        event.multi_value_query_string_parameters,
        event.query_string_parameters,
    );
    let location = locate(
        &with_stage(context.stage.as_deref(), &raw_path),
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
    repairs.note(&location);
    let body = body(event.body, event.is_base64_encoded, repairs);
    request(event.http_method, location.uri, headers, body, extensions)
}

/// Application Load Balancer: no stage, no domain name, and the query
/// parameters as the client encoded them.
fn alb(event: AlbTargetGroupRequest, repairs: &mut Repairs) -> Request {
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
    repairs.note(&location);
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
fn body(body: Option<String>, is_base64_encoded: bool, repairs: &mut Repairs) -> Body {
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

impl Repairs {
    fn note(&mut self, location: &Location) {
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
    let bare = Url::parse(&format!("{scheme}://{host}")).is_ok_and(|url| {
        url.username().is_empty()
            && url.password().is_none()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
    });
    if !bare {
        return None;
    }
    Url::parse(&format!("{scheme}://{host}{path}"))
        .ok()
        .map(String::from)
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

/// The front door's JSON for `response`, in the shape `lambda_http` gives
/// it. The body goes as it is: text as text, bytes in base64 (flagged
/// `isBase64Encoded`), none as empty text. (`lambda_http` decides between
/// text and base64 by the `Content-Type`; every answer of this function
/// is JSON text.) Never waits: `async` keeps the call site of the runtime
/// loop as it was.
pub async fn encode(origin: FrontDoor, response: Response<Body>) -> Vec<u8> {
    let (parts, body) = response.into_parts();
    let status_code = i64::from(parts.status.as_u16());
    let (body, is_base64_encoded) = match body {
        Body::Text(text) => (Body::Text(text), false),
        Body::Binary(bytes) => (Body::Binary(bytes), true),
        _ => (Body::Text(String::new()), false),
    };
    let mut headers = parts.headers;
    match origin {
        FrontDoor::RestApi => {
            // Only `multiValueHeaders`: API Gateway merges both fields, and
            // would repeat every header.
            let mut answer = ApiGatewayProxyResponse::default();
            answer.status_code = status_code;
            answer.multi_value_headers = headers;
            answer.body = Some(body);
            answer.is_base64_encoded = is_base64_encoded;
            to_json(&answer)
        }
        FrontDoor::HttpApi => {
            let cookies = headers
                .get_all(SET_COOKIE)
                .iter()
                .map(|cookie| cookie.to_str().unwrap_or_default().to_owned())
                .collect();
            headers.remove(SET_COOKIE);
            let mut answer = ApiGatewayV2httpResponse::default();
            answer.status_code = status_code;
            answer.headers = headers;
            answer.cookies = cookies;
            answer.body = Some(body);
            answer.is_base64_encoded = is_base64_encoded;
            to_json(&answer)
        }
        FrontDoor::Alb => {
            // Both forms: the target group's setting decides which one the
            // load balancer reads.
            let mut answer = AlbTargetGroupResponse::default();
            answer.status_code = status_code;
            answer.status_description = Some(format!(
                "{status_code} {}",
                parts.status.canonical_reason().unwrap_or_default()
            ));
            answer.headers = headers.clone();
            answer.multi_value_headers = headers;
            answer.body = Some(body);
            answer.is_base64_encoded = is_base64_encoded;
            to_json(&answer)
        }
    }
}

fn to_json(value: &impl Serialize) -> Vec<u8> {
    // The response types are plain structs of strings, numbers and maps;
    // only a header value that is not UTF-8 fails (the handler sets none),
    // and an empty object keeps this panic-free.
    serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn http_api_event(change: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut event = json!({
            "version": "2.0",
            "routeKey": "POST /plants",
            "rawPath": "/plants",
            "rawQueryString": "",
            "headers": {
                "content-type": "application/json",
                "host": "api.example.com",
                "x-forwarded-proto": "https"
            },
            "requestContext": {
                "domainName": "api.example.com",
                "http": { "method": "POST", "path": "/plants", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1" },
                "routeKey": "POST /plants",
                "stage": "$default",
                "timeEpoch": 0
            },
            "body": "{\"id\":1,\"name\":\"Fern\"}",
            "isBase64Encoded": false
        });
        change(&mut event);
        event.to_string().into_bytes()
    }

    fn repairs(decoded: &Decoded) -> Repairs {
        *decoded
            .request
            .extensions()
            .get::<Repairs>()
            .expect("repairs attached")
    }

    #[test]
    fn an_event_from_a_front_door_is_decoded_with_nothing_set_aside() {
        let decoded = decode(&http_api_event(|_| {})).expect("an HTTP API event");

        assert_eq!(repairs(&decoded), Repairs::default());
        assert_eq!(
            decoded.request.uri().to_string(),
            "https://api.example.com/plants"
        );
        assert_eq!(decoded.request.body().as_ref(), br#"{"id":1,"name":"Fern"}"#);
    }

    #[test]
    fn a_base64_body_is_decoded_and_one_that_is_not_base64_is_set_aside() {
        let good = decode(&http_api_event(|event| {
            event["body"] = json!("eyJpZCI6MX0=");
            event["isBase64Encoded"] = json!(true);
        }))
        .expect("decoded");
        assert_eq!(good.request.body().as_ref(), br#"{"id":1}"#);
        assert!(!repairs(&good).any());

        let bad = decode(&http_api_event(|event| {
            event["body"] = json!("not base64!");
            event["isBase64Encoded"] = json!(true);
        }))
        .expect("decoded");
        assert_eq!(
            repairs(&bad),
            Repairs {
                body_not_base64: true,
                ..Repairs::default()
            }
        );
        assert!(bad.request.body().is_empty());
    }

    #[test]
    fn a_host_or_scheme_that_does_not_form_a_url_is_ignored_and_the_path_kept() {
        for (host, proto) in [
            ("exa mple.com", "https"),
            ("api.example.com:99999", "https"),
            ("user@api.example.com", "https"),
            ("api.example.com/elsewhere", "https"),
            ("api.example.com", "not a scheme"),
            ("api.example.com", ""),
            ("", "https"),
        ] {
            let decoded = decode(&http_api_event(|event| {
                event["headers"]["host"] = json!(host);
                event["headers"]["x-forwarded-proto"] = json!(proto);
                event["requestContext"]["domainName"] = json!(host);
            }))
            .expect("decoded");

            assert_eq!(
                repairs(&decoded),
                Repairs {
                    host_ignored: true,
                    ..Repairs::default()
                },
                "{host:?} {proto:?}"
            );
            assert_eq!(decoded.request.raw_http_path(), "/plants", "{host:?} {proto:?}");
            assert!(decoded.request.headers().get(HOST).is_none());
        }
    }

    #[test]
    fn a_path_or_query_that_does_not_form_a_url_is_set_aside() {
        let decoded = decode(&http_api_event(|event| event["rawPath"] = json!("x:99999"))).expect("decoded");
        assert!(repairs(&decoded).path_ignored, "{:?}", repairs(&decoded));
        assert_eq!(decoded.request.raw_http_path(), "/");

        let decoded =
            decode(&http_api_event(|event| event["rawQueryString"] = json!("a=b c"))).expect("decoded");
        assert_eq!(
            repairs(&decoded),
            Repairs {
                query_ignored: true,
                ..Repairs::default()
            }
        );
        assert_eq!(decoded.request.raw_http_path(), "/plants");
    }

    #[test]
    fn an_event_from_another_service_is_unsupported_with_lambda_https_sentence() {
        let sqs = json!({ "Records": [{ "messageId": "1", "eventSource": "aws:sqs", "body": "{}" }] });

        let err = decode(sqs.to_string().as_bytes()).expect_err("not an HTTP event");

        assert!(
            err.to_string().starts_with(
                "unsupported event: this function expects a JSON payload from Amazon API Gateway"
            ),
            "{err}"
        );
    }

    #[test]
    fn an_event_without_a_host_or_domain_name_is_decoded_with_nothing_set_aside() {
        let decoded = decode(&http_api_event(|event| {
            event["headers"].as_object_mut().expect("headers").remove("host");
            event["requestContext"]["domainName"] = Value::Null;
        }))
        .expect("decoded");

        assert_eq!(repairs(&decoded), Repairs::default());
        assert_eq!(decoded.request.uri().to_string(), "/plants");
        assert_eq!(
            decoded.request.headers().get(X_FORWARDED_PROTO),
            Some(&HeaderValue::from_static("https"))
        );
    }

    /// Each event of docs/upstream/lambda-http-conversion-panics.md, on
    /// which `lambda_http`'s conversion panics, and what is set aside.
    #[test]
    fn every_event_that_panics_lambda_https_conversion_is_decoded_with_what_was_set_aside() {
        let body = Repairs {
            body_not_base64: true,
            ..Repairs::default()
        };
        let host = Repairs {
            host_ignored: true,
            ..Repairs::default()
        };
        let path = Repairs {
            path_ignored: true,
            ..Repairs::default()
        };
        let query = Repairs {
            query_ignored: true,
            ..Repairs::default()
        };
        let context = r#""requestContext": {"domainName": "api.example.com", "http": {"method": "POST", "path": "/plants", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1"}, "routeKey": "POST /plants", "stage": "$default", "timeEpoch": 0}"#;
        let no_domain = r#""requestContext": {"http": {"method": "POST", "path": "/plants", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1"}, "routeKey": "POST /plants", "stage": "$default", "timeEpoch": 0}"#;
        let odd_domain = r#""requestContext": {"domainName": "exa mple.com", "http": {"method": "POST", "path": "/plants", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1"}, "routeKey": "POST /plants", "stage": "$default", "timeEpoch": 0}"#;
        let http_api = |raw_path: &str,
                        query: &str,
                        headers: &str,
                        context: &str,
                        body: &str,
                        base64: bool| {
            format!(
                r#"{{"version": "2.0", "routeKey": "POST /plants", "rawPath": "{raw_path}", "rawQueryString": "{query}", "headers": {{{headers}}}, {context}, "body": "{body}", "isBase64Encoded": {base64}}}"#
            )
        };
        let json = r#""content-type": "application/json""#;
        for (case, event, expected, raw_path) in [
            (
                "HTTP API body not base64",
                http_api("/plants", "", &format!(r#"{json}, "host": "api.example.com""#), context, "not base64!", true),
                body,
                "/plants",
            ),
            (
                "REST API body not base64",
                r#"{"resource": "/plants", "path": "/plants", "httpMethod": "POST", "headers": {"host": "api.example.com"}, "multiValueHeaders": {"host": ["api.example.com"]}, "requestContext": {"stage": "prod", "resourcePath": "/plants", "httpMethod": "POST", "path": "/prod/plants"}, "body": "not base64!", "isBase64Encoded": true}"#.to_owned(),
                body,
                "/plants",
            ),
            (
                "Host with a port out of range",
                http_api("/plants", "", &format!(r#"{json}, "host": "api.example.com:99999""#), context, "{}", false),
                host,
                "/plants",
            ),
            (
                "domainName with a space and no Host",
                http_api("/plants", "", json, odd_domain, "{}", false),
                host,
                "/plants",
            ),
            (
                "ALB Host with a space",
                r#"{"requestContext": {"elb": {"targetGroupArn": "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/plants/0123456789abcdef"}}, "httpMethod": "POST", "path": "/plants", "headers": {"host": "exa mple.com"}, "body": "", "isBase64Encoded": false}"#.to_owned(),
                host,
                "/plants",
            ),
            (
                "X-Forwarded-Proto that is not a scheme",
                http_api("/plants", "", &format!(r#"{json}, "host": "api.example.com", "x-forwarded-proto": "not a scheme""#), context, "{}", false),
                host,
                "/plants",
            ),
            (
                "HTTP API path that is not a path, no host",
                http_api("x:99999", "", json, no_domain, "{}", false),
                path,
                "/",
            ),
            (
                "REST API path that is not a path, no stage",
                r#"{"resource": "/plants", "path": "x:99999", "httpMethod": "POST", "headers": {}, "multiValueHeaders": {}, "requestContext": {"resourcePath": "/plants", "httpMethod": "POST", "path": "/plants"}, "body": null, "isBase64Encoded": false}"#.to_owned(),
                path,
                "/",
            ),
            (
                "raw query string with a space",
                http_api("/plants", "a=b c", &format!(r#"{json}, "host": "api.example.com""#), context, "{}", false),
                query,
                "/plants",
            ),
        ] {
            let decoded = decode(event.as_bytes()).unwrap_or_else(|err| panic!("{case}: {err}"));

            assert_eq!(repairs(&decoded), expected, "{case}");
            assert_eq!(decoded.request.raw_http_path(), raw_path, "{case}");
        }
    }

    fn with_headers(names: usize, multi_value: bool) -> Vec<u8> {
        http_api_event(|event| {
            let key = if multi_value {
                "multiValueHeaders"
            } else {
                "headers"
            };
            let headers = (0..names).map(|n| (format!("x-h{n}"), json!("v"))).collect();
            event[key] = Value::Object(headers);
        })
    }

    #[test]
    fn an_event_with_more_header_names_than_a_request_has_is_unsupported_not_a_panic() {
        let at_the_limit = decode(&with_headers(MAX_HEADER_NAMES, false)).expect("decoded");
        assert_eq!(at_the_limit.request.headers().len(), MAX_HEADER_NAMES);
        // A REST API event's two forms, merged into one map: all distinct.
        let half = MAX_HEADER_NAMES / 2;
        let rest = json!({
            "resource": "/plants", "path": "/plants", "httpMethod": "POST",
            "headers": (0..half).map(|n| (format!("x-a{n}"), json!("v"))).collect::<serde_json::Map<_, _>>(),
            "multiValueHeaders": (0..half).map(|n| (format!("x-b{n}"), json!(["v"]))).collect::<serde_json::Map<_, _>>(),
            "requestContext": { "stage": "prod", "resourcePath": "/plants", "httpMethod": "POST" },
            "body": null, "isBase64Encoded": false
        });
        let merged = decode(rest.to_string().as_bytes()).expect("decoded");
        assert_eq!(merged.request.headers().len(), MAX_HEADER_NAMES);

        for (names, multi_value) in [(MAX_HEADER_NAMES + 1, false), (30_000, false), (30_000, true)] {
            let err = decode(&with_headers(names, multi_value)).expect_err("too many headers");
            // Both forms count, here with the event's own three headers.
            let counted = if multi_value { names + 3 } else { names };
            assert_eq!(
                err.to_string(),
                format!(
                    "unsupported event: {counted} header names, more than the 16384 a front door's request can have"
                ),
                "{names} {multi_value}"
            );
        }
    }

    #[test]
    fn payloads_that_are_no_event_fail_with_one_line_whatever_their_depth_or_size() {
        let deep = "[".repeat(100_000);
        let deep_closed = format!("{deep}{}", "]".repeat(100_000));
        let deep_headers = format!(r#"{{"headers": {deep_closed}}}"#);
        let six_megabytes = http_api_event(|event| event["body"] = json!("x".repeat(6 * 1024 * 1024)));
        let not_a_front_door = UnsupportedEvent(Unsupported::NotAFrontDoor).to_string();
        for (case, payload, expected) in [
            (
                "100,000 [",
                deep.as_bytes(),
                "unsupported event: EOF while parsing a list at line 1 column 100000",
            ),
            (
                "100,000 nested arrays",
                deep_closed.as_bytes(),
                not_a_front_door.as_str(),
            ),
            (
                "headers nested 100,000 deep",
                deep_headers.as_bytes(),
                not_a_front_door.as_str(),
            ),
            (
                "not UTF-8",
                b"{\"headers\": \"\xff\"}",
                "unsupported event: invalid unicode code point at line 1 column 14",
            ),
        ] {
            let err = decode(payload).expect_err(case);
            assert_eq!(err.to_string(), expected, "{case}");
        }
        let decoded = decode(&six_megabytes).expect("a 6 MB event is an event");
        assert_eq!(decoded.request.body().len(), 6 * 1024 * 1024);
    }

    /// Printable ASCII, the characters URLs treat specially, and a few
    /// beyond ASCII: what a hand-made event could put in any field.
    const TEXT: &str = "[ -~\\t\\u{7f}é€\\u{1F331}]{0,24}";
    /// The same, less what a header value cannot hold (an event with such
    /// a header is not an API Gateway event at all: `UnsupportedEvent`).
    const HEADER: &str = "[ -~é€\\u{1F331}]{0,24}";

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn no_field_of_an_event_can_make_decoding_panic(
            host in HEADER, proto in HEADER, path in TEXT, query in TEXT, stage in TEXT,
            domain in TEXT, body in TEXT, base64 in proptest::bool::ANY, door in 0..3,
        ) {
            let event = if door == 0 {
                json!({
                    "resource": "/plants", "path": path, "httpMethod": "POST",
                    "headers": { "host": host, "x-forwarded-proto": proto },
                    "multiValueHeaders": { "host": [host], "x-forwarded-proto": [proto] },
                    "queryStringParameters": { "q": query },
                    "multiValueQueryStringParameters": { "q": [query] },
                    "requestContext": { "stage": stage, "domainName": domain, "resourcePath": "/plants",
                                        "httpMethod": "POST", "path": path },
                    "body": body, "isBase64Encoded": base64
                })
            } else if door == 1 {
                json!({
                    "requestContext": { "elb": { "targetGroupArn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/t/0" } },
                    "httpMethod": "POST", "path": path,
                    "headers": { "host": host, "x-forwarded-proto": proto },
                    "queryStringParameters": { "q": query },
                    "body": body, "isBase64Encoded": base64
                })
            } else {
                serde_json::from_slice(&http_api_event(|event| {
                    event["headers"]["host"] = json!(host);
                    event["headers"]["x-forwarded-proto"] = json!(proto);
                    event["rawPath"] = json!(path);
                    event["rawQueryString"] = json!(query);
                    event["requestContext"]["stage"] = json!(stage);
                    event["requestContext"]["domainName"] = json!(domain);
                    event["body"] = json!(body);
                    event["isBase64Encoded"] = json!(base64);
                })).expect("JSON")
            };

            let decoded = decode(event.to_string().as_bytes());

            let decoded = decoded.expect("an API Gateway event");
            proptest::prop_assert!(decoded.request.extensions().get::<Repairs>().is_some());
        }
    }

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
