//! The request contexts, read by hand from the event's one reading into
//! the `aws_lambda_events` types that `lambda_http`'s `RequestContext`
//! holds, by each type's serde rules: a string member `Option<String>`
//! (absent or `null` is `None`), a repeated known key refused, an unknown
//! one ignored, every key read into a `str`. What is not a plain string
//! or number there (an authorizer, a context that is not an object) is
//! read by `serde_json` from its slice, as the type reads it.

use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayV2httpRequestContext, ApiGatewayV2httpRequestContextHttpDescription,
};
use lambda_http::http::Method;
use serde::de::DeserializeOwned;

use super::json::{self, Fields, Scanner, Str};
use super::read::{Members, Read, Refused};

/// `ApiGatewayV2httpRequestContext`, which requires `http`.
pub(super) fn http_api(event: &Members<'_>) -> Read<ApiGatewayV2httpRequestContext> {
    let text = event.request_context.required_text()?;
    let mut route_key = None;
    let mut account_id = None;
    let mut stage = None;
    let mut request_id = None;
    let mut authorizer = None;
    let mut api_id = None;
    let mut domain_name = None;
    let mut domain_prefix = None;
    let mut time = None;
    let mut time_epoch = None;
    let mut http = None;
    let mut authentication = None;
    let object = fields(text, Some(&event.context_fields), |key, value| {
        let slot = match key {
            b"routeKey" => &mut route_key,
            b"accountId" => &mut account_id,
            b"stage" => &mut stage,
            b"requestId" => &mut request_id,
            b"authorizer" => &mut authorizer,
            b"apiId" => &mut api_id,
            b"domainName" => &mut domain_name,
            b"domainPrefix" => &mut domain_prefix,
            b"time" => &mut time,
            b"timeEpoch" => &mut time_epoch,
            b"http" => &mut http,
            b"authentication" => &mut authentication,
            _ => return Ok(()),
        };
        once(slot, value)
    })?;
    if !object {
        return by_serde(text);
    }
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.route_key = string(route_key)?;
    context.account_id = string(account_id)?;
    context.stage = string(stage)?;
    context.request_id = string(request_id)?;
    context.authorizer = optional(authorizer)?;
    context.apiid = string(api_id)?;
    context.domain_name = string(domain_name)?;
    context.domain_prefix = string(domain_prefix)?;
    context.time = string(time)?;
    context.time_epoch = time_epoch.map_or(Ok(0), integer)?;
    context.http = http_description(http.ok_or(Refused)?)?;
    context.authentication = optional(authentication)?;
    Ok(context)
}

/// `ApiGatewayV2httpRequestContextHttpDescription`, which requires `method`.
fn http_description(text: &str) -> Read<ApiGatewayV2httpRequestContextHttpDescription> {
    let mut method = None;
    let mut path = None;
    let mut protocol = None;
    let mut source_ip = None;
    let mut user_agent = None;
    let object = fields(text, None, |key, value| {
        let slot = match key {
            b"method" => &mut method,
            b"path" => &mut path,
            b"protocol" => &mut protocol,
            b"sourceIp" => &mut source_ip,
            b"userAgent" => &mut user_agent,
            _ => return Ok(()),
        };
        once(slot, value)
    })?;
    if !object {
        return by_serde(text);
    }
    let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
    http.method = http_method(method.ok_or(Refused)?)?;
    http.path = string(path)?;
    http.protocol = string(protocol)?;
    http.source_ip = string(source_ip)?;
    http.user_agent = string(user_agent)?;
    Ok(http)
}

/// Each member of an object, its key as `serde` matches it against a
/// type's fields; `Ok(false)` if `text` is not an object. `scanned` are
/// its members if the event's scan kept them all.
fn fields<'a>(
    text: &'a str,
    scanned: Option<&Fields<'a>>,
    mut each: impl FnMut(&[u8], &'a str) -> Read<()>,
) -> Read<bool> {
    if let Some(scanned) = scanned.and_then(Fields::all) {
        for (key, value) in scanned {
            field(key, value, &mut each)?;
        }
        return Ok(true);
    }
    let mut scan = Scanner::of_text(text);
    if !scan.object().map_err(|_| Refused)? {
        return Ok(false);
    }
    let mut first = true;
    while let Some(key) = scan.key(&mut first).map_err(|_| Refused)? {
        let value = scan.value().map_err(|_| Refused)?.ok_or(Refused)?;
        field(key, value, &mut each)?;
    }
    Ok(true)
}

fn field<'a>(key: Str<'a>, value: &'a str, each: &mut impl FnMut(&[u8], &'a str) -> Read<()>) -> Read<()> {
    match key.plain() {
        Some(plain) => each(plain, value),
        // A key with escapes, unescaped; one that is no `str` (a lone
        // surrogate) fails the type.
        None => each(key.text().ok_or(Refused)?.as_bytes(), value),
    }
}

/// A known field seen once; twice, the type refuses it.
fn once<'a>(slot: &mut Option<&'a str>, value: &'a str) -> Read<()> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(Refused),
    }
}

/// `#[serde(default)] Option<String>`.
fn string(value: Option<&str>) -> Read<Option<String>> {
    match value {
        None | Some("null") => Ok(None),
        Some(text) => json::string_text(text)
            .map(|text| Some(text.into_owned()))
            .ok_or(Refused),
    }
}

/// `#[serde(default)] i64`: digits alone are read here; anything else
/// (a sign, a fraction, `null`) as `serde_json` reads it.
fn integer(text: &str) -> Read<i64> {
    if text.len() <= 18 && text.bytes().all(|byte| byte.is_ascii_digit()) {
        return text.parse().map_err(|_| Refused);
    }
    by_serde(text)
}

/// `http_method::deserialize`: a string, the empty one GET.
fn http_method(text: &str) -> Read<Method> {
    let text = json::string_text(text).ok_or(Refused)?;
    if text.is_empty() {
        return Ok(Method::GET);
    }
    Method::from_bytes(text.as_bytes()).map_err(|_| Refused)
}

/// An `Option` of a type read by `serde_json`: absent is `None`.
fn optional<T: DeserializeOwned>(value: Option<&str>) -> Read<Option<T>> {
    value.map_or(Ok(None), by_serde)
}

fn by_serde<T: DeserializeOwned>(text: &str) -> Read<T> {
    serde_json::from_str(text).map_err(|_| Refused)
}
