//! An invocation's payload, as API Gateway (REST and HTTP APIs), an
//! Application Load Balancer, a function URL or VPC Lattice sends it,
//! into the `http::Request` the handler takes. The event is read once
//! (`read.rs`); each front door then takes what its request needs from
//! borrowed slices of the payload, copying only what the request keeps.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use base64::Engine;
use bytes::Bytes;
use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::aws_lambda_events::vpc_lattice::VpcLatticeRequestV2Context;
use lambda_http::http::header::{COOKIE, HOST, HeaderMap, HeaderName, HeaderValue};
use lambda_http::http::uri::{Authority, Parts, PathAndQuery, Scheme};
use lambda_http::http::{Extensions, Method, Uri};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt};
use url::Url;

use super::context;
use super::irregular::{MAX_HEADER_NAMES, Unsupported, UnsupportedEvent, bare};
use super::read::{self, First, Firsts, Members, QueryStyle, Read, Refused, Text};
use super::{ApiPath, Decoded, RequestOrigin, SetAside};

const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// Parses an invocation's payload into a request, its URI's path with the
/// stage in it (`lambda_http`'s default). [`SetAside`] and [`ApiPath`] are
/// attached to the request as extensions. A function's tests call it to
/// build, from a front door's event, the very request their handler will
/// be given.
pub fn decode(payload: &[u8]) -> Result<Decoded, UnsupportedEvent> {
    decode_with(payload, Stage::InPath)
}

/// Whether a REST API's stage goes into the URI's path, as
/// `AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH` decides for `lambda_http`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    InPath,
    Ignored,
}

/// [`decode`], with the stage as the environment asked: what the loop calls
/// on every event.
pub(crate) fn decode_with(payload: &[u8], stage: Stage) -> Result<Decoded, UnsupportedEvent> {
    let mut members = Members::default();
    read::members(payload, &mut members).map_err(UnsupportedEvent)?;
    let (mut request, origin, repairs) = front_door(&members, stage).map_err(UnsupportedEvent)?;
    let path = ApiPath::of(&request);
    let extensions = request.extensions_mut();
    extensions.insert(repairs);
    extensions.insert(path);
    Ok(Decoded { request, origin })
}

/// The event's type, tried in `lambda_http`'s order (REST API, HTTP API,
/// ALB, VPC Lattice), each with its own type's rules. The REST API's and
/// the ALB's events require a top-level `httpMethod`, which no other
/// front door sends: without it they are not tried. VPC Lattice's payload
/// 1.0, which `lambda_http` does not read and whose type takes any object,
/// is tried last, and only with its own `raw_path` and `method`.
fn front_door(
    members: &Members<'_>,
    stage: Stage,
) -> Result<(Request, RequestOrigin, SetAside), Unsupported> {
    let names = members
        .headers
        .names()
        .saturating_add(members.multi_value_headers.names());
    if names > MAX_HEADER_NAMES {
        return Err(Unsupported::TooManyHeaders(names));
    }
    let has_method = members.http_method.given();
    // Each door its own function, so that this one holds the HTTP API's
    // way and little else; a door that refuses leaves no repair behind.
    if has_method {
        let mut repairs = SetAside::default();
        if let Ok(request) = rest_api(members, stage, &mut repairs) {
            return Ok((request, RequestOrigin::ApiGatewayV1, repairs));
        }
    }
    let mut repairs = SetAside::default();
    if let Ok(request) = http_api(members, stage, &mut repairs) {
        return Ok((request, RequestOrigin::ApiGatewayV2, repairs));
    }
    other_doors(members, has_method)
}

/// The doors after the HTTP API's: ALB, VPC Lattice's payloads 2.0 and
/// 1.0.
#[inline(never)]
fn other_doors(
    members: &Members<'_>,
    has_method: bool,
) -> Result<(Request, RequestOrigin, SetAside), Unsupported> {
    if has_method {
        let mut repairs = SetAside::default();
        if let Ok(request) = alb(members, &mut repairs) {
            return Ok((request, RequestOrigin::Alb, repairs));
        }
    }
    let mut repairs = SetAside::default();
    if let Ok(request) = lattice_v2(members, &mut repairs) {
        return Ok((request, RequestOrigin::VpcLattice, repairs));
    }
    if members.raw_path_snake.present() && members.method.present() {
        let mut repairs = SetAside::default();
        if let Ok(request) = lattice_v1(members, &mut repairs) {
            return Ok((request, RequestOrigin::VpcLattice, repairs));
        }
    }
    Err(Unsupported::NotAFrontDoor)
}

/// API Gateway HTTP API (payload 2.0) and function URLs: the raw query
/// string as the client sent it, cookies apart. Read as
/// `ApiGatewayV2httpRequest` reads it.
fn http_api(event: &Members<'_>, stage: Stage, repairs: &mut SetAside) -> Read<Request> {
    // First: the member that tells the types apart.
    let mut context = context::http_api(event)?;
    for member in [
        &event.kind,
        &event.method_arn,
        &event.identity_source,
        &event.authorization_token,
        &event.resource,
        &event.version,
        &event.route_key,
    ] {
        // Absent, as most are, it is `None`.
        if member.present() {
            member.string_or_null()?;
        }
    }
    if event.http_method.present() {
        event.http_method.method()?;
    }
    // `path` is an alias of `rawPath` there: both are one field twice.
    let raw_path = match (event.raw_path.present(), event.path.present()) {
        (true, true) => return Err(Refused),
        (false, true) => event.path.text_or_null()?,
        _ => event.raw_path.text_or_null()?,
    };
    let raw_query = event.raw_query_string.text_or_null()?;
    let cookies = event.cookies.optional::<Vec<Text<'_>>>()?;
    let (mut headers, firsts) = event.headers.map_noting(false)?;
    // Absent, it is an empty map: made only if the raw string is not used.
    let event_query = if event.query_string_parameters.present() {
        Some(event.query_string_parameters.query(QueryStyle::HttpApi)?)
    } else {
        None
    };
    let path_parameters = event.path_parameters.string_map()?;
    let stage_variables = event.stage_variables.string_map()?;
    let body = event.body.text_or_null()?;
    let is_base64_encoded = event.is_base64_encoded.flag_or_default()?;

    let mut raw_path = raw_path.map(Text::into_owned).unwrap_or_default();
    let location = locate(
        &with_stage(
            context.stage.as_deref().filter(|_| stage == Stage::InPath),
            &raw_path,
        ),
        origin(&firsts, &headers, context.domain_name.as_deref()),
        &firsts,
        raw_query.as_ref().map_or("", Text::as_str),
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
        // An empty one has no parameters: no map is made.
        Some(query) if !location.query_ignored && query.as_str().is_empty() => None,
        // Read from the raw string, as `lambda_http` does: the event's own
        // map is not decoded the way browsers encode.
        Some(query) if !location.query_ignored => {
            let Ok(parameters) = query.as_str().parse::<QueryMap>();
            Some(parameters)
        }
        _ => event_query,
    };
    if let Some(cookies) = cookies
        && let Ok(value) = HeaderValue::from_str(&joined(&cookies))
    {
        headers.insert(COOKIE, value);
    }
    let extensions = with_api_maps(
        with_parameters(extensions().with_raw_http_path(raw_path), query_string_parameters),
        path_parameters,
        stage_variables,
    );
    let method = context.http.method.clone();
    repairs.note(&location);
    let body = body_of(body, is_base64_encoded, repairs);
    Ok(request(
        method,
        location.uri,
        headers,
        body,
        extensions.with_request_context(RequestContext::ApiGatewayV2(context)),
    ))
}

/// Empty extensions with room for a request's: a clone of [`ROOM`].
fn extensions() -> Extensions {
    ROOM.clone()
}

/// An empty `Extensions` whose table has room for seven, where a new
/// one's grows at the fourth insert and a decoded request has four or
/// more. `Extensions` cannot reserve, but its table keeps its room when
/// cleared, and a clone of it has the same.
static ROOM: LazyLock<Extensions> = LazyLock::new(|| {
    let mut room = Extensions::new();
    room.insert(0_u8);
    room.insert(0_u16);
    room.insert(0_u32);
    room.insert(0_u64);
    room.clear();
    room
});

/// API Gateway's path parameters and stage variables. An empty map is
/// left out: `lambda_http`'s accessors read one as absent
/// (`path_parameters_ref` is `None`, `path_parameters` empty) and its
/// extension types are private to it, so a request reads the same and
/// saves two boxed maps.
fn with_api_maps(
    extensions: Extensions,
    path_parameters: HashMap<String, String>,
    stage_variables: HashMap<String, String>,
) -> Extensions {
    let mut extensions = extensions;
    if !path_parameters.is_empty() {
        extensions = extensions.with_path_parameters(path_parameters);
    }
    if !stage_variables.is_empty() {
        extensions = extensions.with_stage_variables(stage_variables);
    }
    extensions
}

/// The query parameters, left out when there are none, as
/// [`with_api_maps`] leaves out its empty maps and for the same reason:
/// `query_string_parameters_ref` reads an empty map as absent.
fn with_parameters(extensions: Extensions, parameters: Option<QueryMap>) -> Extensions {
    match parameters {
        Some(parameters) if !parameters.is_empty() => extensions.with_query_string_parameters(parameters),
        _ => extensions,
    }
}

/// The cookies as one `Cookie` header, as `lambda_http` joins them.
fn joined(cookies: &[Text<'_>]) -> String {
    let mut line = String::with_capacity(cookies.iter().map(|cookie| cookie.as_str().len() + 2).sum());
    for (n, cookie) in cookies.iter().enumerate() {
        if n > 0 {
            line.push_str("; ");
        }
        line.push_str(cookie.as_str());
    }
    line
}

/// API Gateway REST API (payload 1.0), read as `ApiGatewayProxyRequest`
/// reads it.
#[inline(never)]
fn rest_api(event: &Members<'_>, stage: Stage, repairs: &mut SetAside) -> Read<Request> {
    // First: the member that tells the types apart.
    let mut context = context::rest_api(event)?;
    event.resource.string_or_null()?;
    let raw_path = event.path.text_or_null()?;
    let method = event.http_method.method()?.ok_or(Refused)?;
    let (single_headers, firsts, multi_headers) = both_headers(event)?;
    let single_query = event.query_string_parameters.query(QueryStyle::Standard)?;
    let multi_query = event
        .multi_value_query_string_parameters
        .query(QueryStyle::Standard)?;
    let path_parameters = event.path_parameters.string_map()?;
    let stage_variables = event.stage_variables.string_map()?;
    let body = event.body.text_or_null()?;
    let is_base64_encoded = event.is_base64_encoded.flag_nullish()?;

    let mut raw_path = raw_path.map(Text::into_owned).unwrap_or_default();
    let parameters = preferred(multi_query, single_query);
    let location = locate(
        &with_stage(
            context.stage.as_deref().filter(|_| stage == Stage::InPath),
            &raw_path,
        ),
        origin(&firsts, &single_headers, context.domain_name.as_deref()),
        &firsts,
        &parameters.to_query_string(),
    );
    let mut headers = merged(multi_headers, single_headers);
    if location.path_ignored {
        raw_path = "/".to_owned();
        context.stage = None;
    }
    if location.host_ignored {
        forget_host(&mut headers);
        context.domain_name = None;
    }
    let extensions = with_api_maps(
        with_parameters(extensions().with_raw_http_path(raw_path), Some(parameters)),
        path_parameters,
        stage_variables,
    )
    .with_request_context(RequestContext::ApiGatewayV1(context));
    repairs.note(&location);
    let body = body_of(body, is_base64_encoded, repairs);
    Ok(request(method, location.uri, headers, body, extensions))
}

/// Application Load Balancer, read as `AlbTargetGroupRequest` reads it:
/// no stage, no domain name, and the query parameters as the client
/// encoded them.
fn alb(event: &Members<'_>, repairs: &mut SetAside) -> Read<Request> {
    // First: the member that tells the types apart.
    let context = context::alb(event)?;
    let method = event.http_method.method()?.ok_or(Refused)?;
    let raw_path = event.path.text_or_null()?;
    let single_query = event.query_string_parameters.query(QueryStyle::Map)?;
    let multi_query = event.multi_value_query_string_parameters.query(QueryStyle::Map)?;
    let (single_headers, firsts, multi_headers) = both_headers(event)?;
    let is_base64_encoded = event.is_base64_encoded.flag_nullish()?;
    let body = event.body.text_or_null()?;

    let mut raw_path = raw_path.map(Text::into_owned).unwrap_or_default();
    let parameters = preferred(alb_query(multi_query), alb_query(single_query));
    let location = locate(
        &raw_path,
        origin(&firsts, &single_headers, None),
        &firsts,
        &parameters.to_query_string(),
    );
    let mut headers = merged(multi_headers, single_headers);
    if location.path_ignored {
        raw_path = "/".to_owned();
    }
    if location.host_ignored {
        forget_host(&mut headers);
    }
    let extensions = with_parameters(extensions().with_raw_http_path(raw_path), Some(parameters))
        .with_request_context(RequestContext::Alb(context));
    repairs.note(&location);
    let body = body_of(body, is_base64_encoded, repairs);
    Ok(request(method, location.uri, headers, body, extensions))
}

/// VPC Lattice, payload 2.0, read as `VpcLatticeRequestV2` reads it and
/// made into a request as `lambda_http` makes one: no stage, the host and
/// scheme from the headers, the query decoded as an ALB's.
fn lattice_v2(event: &Members<'_>, repairs: &mut SetAside) -> Read<Request> {
    // First: the member that tells the types apart.
    let context: VpcLatticeRequestV2Context = event.request_context.owned()?;
    event.version.string_or_null()?;
    let raw_path = event.path.text_or_null()?;
    let method = event.method.optional_method()?;
    let headers = event.headers.map_noting(false)?;
    let query = event.query_string_parameters.query(QueryStyle::Map)?;
    let body = event.body.text_or_null()?;
    let is_base64_encoded = event.is_base64_encoded.flag_nullish()?;
    lattice(
        method,
        raw_path,
        headers,
        query,
        body,
        is_base64_encoded,
        Some(RequestContext::VpcLattice(context)),
        repairs,
    )
}

/// VPC Lattice, payload 1.0, read as `VpcLatticeRequestV1` reads it
/// (snake-case members, a header's values in one comma-separated string).
/// `lambda_http` 1.3 reads only payload 2.0: this is its request made the
/// same way, without a request context, since the event carries none.
fn lattice_v1(event: &Members<'_>, repairs: &mut SetAside) -> Read<Request> {
    let raw_path = event.raw_path_snake.text_or_null()?;
    let method = event.method.optional_method()?;
    let headers = event.headers.map_noting(true)?;
    let query = event.query_string_parameters_snake.query(QueryStyle::Map)?;
    let body = event.body.text_or_null()?;
    let is_base64_encoded = event.is_base64_encoded_snake.flag_nullish()?;
    lattice(
        method,
        raw_path,
        headers,
        query,
        body,
        is_base64_encoded,
        None,
        repairs,
    )
}

#[allow(clippy::too_many_arguments)]
fn lattice(
    method: Option<Method>,
    raw_path: Option<Text<'_>>,
    (mut headers, firsts): (HeaderMap, Firsts<'_>),
    query: QueryMap,
    body: Option<Text<'_>>,
    is_base64_encoded: bool,
    context: Option<RequestContext>,
    repairs: &mut SetAside,
) -> Read<Request> {
    let mut raw_path = raw_path.map(Text::into_owned).unwrap_or_default();
    let parameters = alb_query(query);
    let location = locate(
        &raw_path,
        origin(&firsts, &headers, None),
        &firsts,
        &parameters.to_query_string(),
    );
    if location.path_ignored {
        raw_path = "/".to_owned();
    }
    if location.host_ignored {
        forget_host(&mut headers);
    }
    let mut extensions = with_parameters(extensions().with_raw_http_path(raw_path), Some(parameters));
    if let Some(context) = context {
        extensions = extensions.with_request_context(context);
    }
    repairs.note(&location);
    let body = body_of(body, is_base64_encoded, repairs);
    Ok(request(
        method.unwrap_or(Method::GET),
        location.uri,
        headers,
        body,
        extensions,
    ))
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

/// The `headers` and `multiValueHeaders` maps; when one mirrors the
/// other, the map once and an empty one to merge into it.
fn both_headers<'h>(event: &'h Members<'_>) -> Read<(HeaderMap, Firsts<'h>, HeaderMap)> {
    let (single, firsts) = event.headers.map_noting(false)?;
    if event.headers.mirrors(&event.multi_value_headers) {
        return Ok((single, firsts, HeaderMap::new()));
    }
    Ok((single, firsts, event.multi_value_headers.map(false)?))
}

/// The multi-value headers, and the single-value ones over them: one map,
/// as `lambda_http` makes it. [`MAX_HEADER_NAMES`] keeps it within what a
/// `HeaderMap` holds.
fn merged(mut multi: HeaderMap, single: HeaderMap) -> HeaderMap {
    if multi.is_empty() {
        return single;
    }
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
    let mut raw = String::new();
    for (n, (key, value)) in parameters.iter().enumerate() {
        if n > 0 {
            raw.push('&');
        }
        raw.push_str(key);
        raw.push('=');
        raw.push_str(value);
    }
    let Ok(decoded) = raw.parse::<QueryMap>();
    decoded
}

/// The scheme and host the URI is built with, as `lambda_http` picks them:
/// `Host` (or API Gateway's `domainName`) and `X-Forwarded-Proto`, `https`
/// when absent.
/// `firsts` are their values as the map was built from the event.
fn origin<'a>(
    firsts: &Firsts<'a>,
    headers: &'a HeaderMap,
    domain_name: Option<&'a str>,
) -> Option<(&'a str, &'a str)> {
    let first = |first: First<'a>, name: HeaderName| match first {
        First::Absent => None,
        First::Text(text) => visible_text(text),
        First::InMap => headers.get(name).and_then(visible_ascii),
    };
    let host = first(firsts.host, HOST).or(domain_name)?;
    let scheme = first(firsts.proto, X_FORWARDED_PROTO).unwrap_or("https");
    Some((scheme, host))
}

/// [`visible_ascii`] of a value's text.
fn visible_text(text: &str) -> Option<&str> {
    text.is_ascii().then_some(text)
}

/// `HeaderValue::to_str`, a word at a time: a header value has no control
/// character but a tab, so what is left to check is that it is ASCII.
fn visible_ascii(value: &HeaderValue) -> Option<&str> {
    let bytes = value.as_bytes();
    // The scheme every front door sends, without a check of its text.
    if bytes == b"https" {
        return Some("https");
    }
    if !bytes.is_ascii() {
        return None;
    }
    std::str::from_utf8(bytes).ok()
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
        Some(stage) => {
            let mut with_stage = String::with_capacity(1 + stage.len() + path.len());
            with_stage.push('/');
            with_stage.push_str(stage);
            with_stage.push_str(path);
            Cow::Owned(with_stage)
        }
    }
}

/// The body, decoded from base64 when the event says it is; a body that
/// is not base64 is dropped and noted.
fn body_of(body: Option<Text<'_>>, is_base64_encoded: bool, repairs: &mut SetAside) -> Body {
    match body {
        None => Body::Empty,
        Some(text) if !is_base64_encoded => Body::Text(text.into_owned()),
        Some(encoded) => match base64::engine::general_purpose::STANDARD.decode(encoded.as_str()) {
            Ok(bytes) => Body::Binary(bytes),
            Err(_) => {
                repairs.body_not_base64 = true;
                Body::Empty
            }
        },
    }
}

impl SetAside {
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
/// event from a front door is done by [`from_parts`], without a URL
/// parse; `firsts` hold the `Host` header's bytes.
fn locate(path: &str, origin: Option<(&str, &str)>, firsts: &Firsts<'_>, query: &str) -> Location {
    if let Some(uri) = origin.and_then(|(scheme, host)| from_parts(scheme, host, firsts, path, query)) {
        return Location {
            uri,
            path_ignored: false,
            host_ignored: false,
            query_ignored: false,
        };
    }
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

/// `http`'s longest URI.
const MAX_URI: usize = u16::MAX as usize - 1;

/// [`absolute`]'s URL with the query, when `url` writes the host and
/// path back as they are, made of its parts: the authority shares the
/// `Host` header's bytes, and only the path and query are copied and
/// parsed. The same URI as the whole text parsed, as long as it is no
/// longer than `http` takes.
fn from_parts(scheme: &str, host: &str, firsts: &Firsts<'_>, path: &str, query: &str) -> Option<Uri> {
    let scheme = match scheme {
        "https" => Scheme::HTTPS,
        "http" => Scheme::HTTP,
        _ => return None,
    };
    if !url_as_is(scheme.as_str(), host, path) {
        return None;
    }
    let path = if path.is_empty() { "/" } else { path };
    let len = path.len() + if query.is_empty() { 0 } else { 1 + query.len() };
    if scheme.as_str().len() + 3 + host.len() + len > MAX_URI {
        return None;
    }
    let mut path_and_query = Vec::with_capacity(len);
    path_and_query.extend_from_slice(path.as_bytes());
    if !query.is_empty() {
        path_and_query.push(b'?');
        path_and_query.extend_from_slice(query.as_bytes());
    }
    let mut parts = Parts::default();
    parts.scheme = Some(scheme);
    parts.authority = Some(Authority::from_maybe_shared(firsts.bytes_of(host)).ok()?);
    parts.path_and_query = Some(PathAndQuery::from_maybe_shared(Bytes::from(path_and_query)).ok()?);
    Uri::from_parts(parts).ok()
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
    if url_as_is(scheme, host, path) {
        let mut url = String::with_capacity(scheme.len() + host.len() + path.len() + 4);
        url.push_str(scheme);
        url.push_str("://");
        url.push_str(host);
        url.push_str(if path.is_empty() { "/" } else { path });
        return Some(url);
    }
    if !(plain(scheme, host, path) || bare(scheme, host)) {
        return None;
    }
    Url::parse(&format!("{scheme}://{host}{path}"))
        .ok()
        .map(String::from)
}

/// Whether `url` writes `{scheme}://{host}{path}` back as it is (an
/// empty path as `/`).
fn url_as_is(scheme: &str, host: &str, path: &str) -> bool {
    (host_as_is(scheme, host) || plain(scheme, host, path) && written_as_is(scheme, host))
        && (path.is_empty() || path.starts_with('/'))
        && path_as_is(path)
}

/// A plain host that `url` writes back unchanged: lower case, labels
/// that are not empty, not punycode and not a number at the end (an IPv4
/// address, which `url` rewrites), and a port that is not the scheme's
/// default, which `url` leaves out.
fn written_as_is(scheme: &str, host: &str) -> bool {
    let (name, port_as_is) = port_as_is(scheme, host);
    let labels_as_is = name
        .split('.')
        .all(|label| !label.is_empty() && !label.starts_with("xn--"));
    let last_is_a_name = name
        .rsplit('.')
        .next()
        .and_then(|label| label.bytes().next())
        .is_some_and(|first| first.is_ascii_lowercase());
    port_as_is && labels_as_is && last_is_a_name && !name.bytes().any(|byte| byte.is_ascii_uppercase())
}

/// `host` without its port, and whether the port, if there is one, is
/// written back by `url` as it is.
fn port_as_is<'h>(scheme: &str, host: &'h str) -> (&'h str, bool) {
    match host.rsplit_once(':') {
        Some((name, port)) => (name, port_written_as_is(scheme, port)),
        None => (host, true),
    }
}

/// Digits without a leading zero, a `u16`, not the scheme's default
/// (which `url` leaves out).
fn port_written_as_is(scheme: &str, port: &str) -> bool {
    let default_port = if scheme == "https" { "443" } else { "80" };
    !port.is_empty()
        && !port.starts_with('0')
        && port.len() <= 5
        && port.bytes().all(|byte| byte.is_ascii_digit())
        && port.parse::<u16>().is_ok()
        && port != default_port
}

/// [`plain`]'s host and [`written_as_is`] in one pass over the host, for
/// what every front door sends: lower-case labels, a last one that starts
/// with a letter, perhaps a port. `false` leaves the answer to those two.
fn host_as_is(scheme: &str, host: &str) -> bool {
    let bytes = host.as_bytes();
    let mut label_from = 0;
    let mut end = bytes.len();
    let mut port_as_is = true;
    // A label's bytes are most of a host: one test each.
    for (at, &byte) in bytes.iter().enumerate() {
        match HOST_BYTES.get(usize::from(byte)).copied().unwrap_or(0) {
            LABEL => {}
            b'.' => {
                if !label_as_is(bytes.get(label_from..at)) {
                    return false;
                }
                label_from = at + 1;
            }
            // The port: digits only, so a second colon fails it.
            b':' => {
                port_as_is = port_written_as_is(scheme, host.get(at + 1..).unwrap_or_default());
                end = at;
                break;
            }
            _ => return false,
        }
    }
    let last = bytes.get(label_from..end);
    matches!(scheme, "https" | "http")
        && port_as_is
        && label_as_is(last)
        && last.and_then(<[u8]>::first).is_some_and(u8::is_ascii_lowercase)
}

/// A label that `url` writes back: not empty, not punycode.
fn label_as_is(label: Option<&[u8]>) -> bool {
    label.is_some_and(|label| !label.is_empty() && !label.starts_with(b"xn--"))
}

/// [`host_as_is`]'s class of a byte: a label's (a lower-case letter, a
/// digit, a hyphen), `.` and `:` as themselves, anything else 0.
const LABEL: u8 = 1;

const fn host_byte(byte: u8) -> u8 {
    match byte {
        b'a'..=b'z' | b'0'..=b'9' | b'-' => LABEL,
        b'.' | b':' => byte,
        _ => 0,
    }
}

/// [`host_byte`] of every byte: one look-up a byte, where the match is a
/// chain of tests.
const HOST_BYTES: [u8; 256] = {
    let mut table = [0; 256];
    let mut rest: &mut [u8] = &mut table;
    let mut byte: u8 = 0;
    while let [slot, tail @ ..] = rest {
        *slot = host_byte(byte);
        rest = tail;
        byte = byte.wrapping_add(1);
    }
    table
};

/// A path that `url` writes back unchanged: nothing it percent-encodes,
/// no `\`, `?` or `#`, and no dot segment, plain or percent-encoded.
fn path_as_is(path: &str) -> bool {
    // Without a dot or a percent sign, no segment is a dot segment.
    let mut dots = false;
    for byte in path.bytes() {
        match byte {
            b'a'..=b'z'
            | b'A'..=b'Z'
            | b'0'..=b'9'
            | b'/'
            | b'-'
            | b'_'
            | b'~'
            | b'!'
            | b'$'
            | b'&'
            | b'\''
            | b'('
            | b')'
            | b'*'
            | b'+'
            | b','
            | b';'
            | b'='
            | b':'
            | b'@' => {}
            b'.' | b'%' => dots = true,
            _ => return false,
        }
    }
    !dots || path.split('/').all(|segment| !is_dot_segment(segment))
}

/// `.` or `..`, each dot perhaps written `%2e`.
fn is_dot_segment(segment: &str) -> bool {
    if segment.len() > 6 || !(segment.starts_with('.') || segment.starts_with('%')) {
        return false;
    }
    let dots = segment.replace("%2e", ".").replace("%2E", ".");
    dots == "." || dots == ".."
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
    if path.starts_with('/') && path_as_is(path) {
        return Some(path.to_owned());
    }
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
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
