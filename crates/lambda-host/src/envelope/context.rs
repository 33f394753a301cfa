//! The request contexts, read by hand from the event's one reading into
//! the `aws_lambda_events` types that `lambda_http`'s `RequestContext`
//! holds, by each type's serde rules: a string member `Option<String>`
//! (absent or `null` is `None`), a repeated known key refused, an unknown
//! one ignored, every key read into a `str`. What is not a plain string
//! or number there (an authorizer, a context that is not an object) is
//! read by `serde_json` from its slice, as the type reads it.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;

use lambda_http::aws_lambda_events::alb::AlbTargetGroupRequestContext;
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayProxyRequestContext, ApiGatewayRequestAuthorizer, ApiGatewayRequestIdentity,
    ApiGatewayV2httpRequestContext, ApiGatewayV2httpRequestContextHttpDescription,
};
use lambda_http::http::Method;
use serde::de::{self, DeserializeOwned, DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::json::{self, Fields, Scanner, Str, Value};
use super::read::{Members, Read, Refused};

/// `ApiGatewayV2httpRequestContext`, which requires `http`.
pub(super) fn http_api(event: &Members<'_>) -> Read<ApiGatewayV2httpRequestContext> {
    if let Some(bytes) = event.request_context.garbled() {
        return by_serde(bytes, CONTEXT);
    }
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
    let scanned = event.context_fields.all().is_some();
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
        return by_serde(text.as_bytes(), CONTEXT);
    }
    // The required member first: without it (another front door's
    // context), nothing is copied.
    let http = http.ok_or(Refused)?;
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.route_key = string(route_key)?;
    context.account_id = string(account_id)?;
    context.stage = string(stage)?;
    context.request_id = string(request_id)?;
    optional(&mut context.authorizer, authorizer)?;
    context.apiid = string(api_id)?;
    context.domain_name = string(domain_name)?;
    context.domain_prefix = string(domain_prefix)?;
    context.time = string(time)?;
    context.time_epoch = integer(time_epoch)?;
    // Kept by the event's scan if it is the context's own `http`.
    let kept = scanned.then_some(&event.context_fields);
    context.http = http_description(http.text, kept)?;
    optional(&mut context.authentication, authentication)?;
    Ok(context)
}

/// `ApiGatewayV2httpRequestContextHttpDescription`, which requires `method`.
fn http_description(
    text: &str,
    kept: Option<&Fields<'_>>,
) -> Read<ApiGatewayV2httpRequestContextHttpDescription> {
    let mut method = None;
    let mut path = None;
    let mut protocol = None;
    let mut source_ip = None;
    let mut user_agent = None;
    let object = fields_of(text, kept.and_then(|kept| kept.nested(b"http")), |key, value| {
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
        return by_serde(text.as_bytes(), IN_CONTEXT);
    }
    let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
    http.method = http_method(method.ok_or(Refused)?)?;
    http.path = string(path)?;
    http.protocol = string(protocol)?;
    http.source_ip = string(source_ip)?;
    http.user_agent = string(user_agent)?;
    Ok(http)
}

/// `ApiGatewayProxyRequestContext`, which requires `httpMethod`.
pub(super) fn rest_api(event: &Members<'_>) -> Read<ApiGatewayProxyRequestContext> {
    if let Some(bytes) = event.request_context.garbled() {
        return by_serde(bytes, CONTEXT);
    }
    let text = event.request_context.required_text()?;
    let mut account_id = None;
    let mut resource_id = None;
    let mut operation_name = None;
    let mut stage = None;
    let mut domain_name = None;
    let mut domain_prefix = None;
    let mut request_id = None;
    let mut protocol = None;
    let mut identity = None;
    let mut resource_path = None;
    let mut path = None;
    let mut authorizer = None;
    let mut http_method_field = None;
    let mut request_time = None;
    let mut request_time_epoch = None;
    let mut api_id = None;
    let scanned = event.context_fields.all().is_some();
    let object = fields(text, Some(&event.context_fields), |key, value| {
        let slot = match key {
            b"accountId" => &mut account_id,
            b"resourceId" => &mut resource_id,
            b"operationName" => &mut operation_name,
            b"stage" => &mut stage,
            b"domainName" => &mut domain_name,
            b"domainPrefix" => &mut domain_prefix,
            b"requestId" => &mut request_id,
            b"protocol" => &mut protocol,
            b"identity" => &mut identity,
            b"resourcePath" => &mut resource_path,
            b"path" => &mut path,
            b"authorizer" => &mut authorizer,
            b"httpMethod" => &mut http_method_field,
            b"requestTime" => &mut request_time,
            b"requestTimeEpoch" => &mut request_time_epoch,
            b"apiId" => &mut api_id,
            _ => return Ok(()),
        };
        once(slot, value)
    })?;
    if !object {
        return by_serde(text.as_bytes(), CONTEXT);
    }
    let http_method_field = http_method_field.ok_or(Refused)?;
    let mut context = ApiGatewayProxyRequestContext::default();
    context.account_id = string(account_id)?;
    context.resource_id = string(resource_id)?;
    context.operation_name = string(operation_name)?;
    context.stage = string(stage)?;
    context.domain_name = string(domain_name)?;
    context.domain_prefix = string(domain_prefix)?;
    context.request_id = string(request_id)?;
    context.protocol = string(protocol)?;
    let kept = scanned.then_some(&event.context_fields);
    context.identity = match identity {
        None => ApiGatewayRequestIdentity::default(),
        Some(identity) => rest_identity(identity, kept)?,
    };
    context.resource_path = string(resource_path)?;
    context.path = string(path)?;
    context.authorizer = rest_authorizer(authorizer)?;
    context.http_method = http_method(http_method_field)?;
    context.request_time = string(request_time)?;
    context.request_time_epoch = integer(request_time_epoch)?;
    context.apiid = string(api_id)?;
    Ok(context)
}

/// `AlbTargetGroupRequestContext`, which requires `elb`, an
/// `ElbContext` of one optional string. An `elb` that is not an object
/// (serde reads a struct from a list too) is read by `serde_json`.
pub(super) fn alb(event: &Members<'_>) -> Read<AlbTargetGroupRequestContext> {
    if let Some(bytes) = event.request_context.garbled() {
        return by_serde(bytes, CONTEXT);
    }
    let text = event.request_context.required_text()?;
    let mut elb = None;
    let object = fields(text, Some(&event.context_fields), |key, value| match key {
        b"elb" => once(&mut elb, value),
        _ => Ok(()),
    })?;
    if !object {
        return by_serde(text.as_bytes(), CONTEXT);
    }
    let elb = elb.ok_or(Refused)?;
    let mut target_group_arn = None;
    let not_kept = None::<std::iter::Empty<(Str<'_>, Value<'_>)>>;
    let elb_object = fields_of(elb.text, not_kept, |key, value| match key {
        b"targetGroupArn" => once(&mut target_group_arn, value),
        _ => Ok(()),
    })?;
    if !elb_object {
        return by_serde(text.as_bytes(), CONTEXT);
    }
    let mut context = AlbTargetGroupRequestContext::default();
    context.elb.target_group_arn = string(target_group_arn)?;
    Ok(context)
}

/// `ApiGatewayRequestIdentity`: strings only. `kept`: the context's
/// members as the event's scan kept them.
fn rest_identity<'a>(value: Value<'a>, kept: Option<&Fields<'a>>) -> Read<ApiGatewayRequestIdentity> {
    let mut slots: [Option<Value<'_>>; 13] = [None; 13];
    let scanned = kept.and_then(|kept| kept.nested(b"identity"));
    let object = fields_of(value.text, scanned, |key, value| {
        let at = match key {
            b"cognitoIdentityPoolId" => 0,
            b"accountId" => 1,
            b"cognitoIdentityId" => 2,
            b"caller" => 3,
            b"apiKey" => 4,
            b"apiKeyId" => 5,
            b"accessKey" => 6,
            b"sourceIp" => 7,
            b"cognitoAuthenticationType" => 8,
            b"cognitoAuthenticationProvider" => 9,
            b"userArn" => 10,
            b"userAgent" => 11,
            b"user" => 12,
            _ => return Ok(()),
        };
        slots.get_mut(at).map_or(Ok(()), |slot| once(slot, value))
    })?;
    if !object {
        return by_serde(value.text.as_bytes(), IN_CONTEXT);
    }
    let [
        cognito_identity_pool_id,
        account_id,
        cognito_identity_id,
        caller,
        api_key,
        api_key_id,
        access_key,
        source_ip,
        cognito_authentication_type,
        cognito_authentication_provider,
        user_arn,
        user_agent,
        user,
    ] = slots;
    let mut identity = ApiGatewayRequestIdentity::default();
    identity.cognito_identity_pool_id = string(cognito_identity_pool_id)?;
    identity.account_id = string(account_id)?;
    identity.cognito_identity_id = string(cognito_identity_id)?;
    identity.caller = string(caller)?;
    identity.api_key = string(api_key)?;
    identity.api_key_id = string(api_key_id)?;
    identity.access_key = string(access_key)?;
    identity.source_ip = string(source_ip)?;
    identity.cognito_authentication_type = string(cognito_authentication_type)?;
    identity.cognito_authentication_provider = string(cognito_authentication_provider)?;
    identity.user_arn = string(user_arn)?;
    identity.user_agent = string(user_agent)?;
    identity.user = string(user)?;
    Ok(identity)
}

/// `deserialize_authorizer_fields`: an optional map, whose members are
/// the authorizer's fields.
fn rest_authorizer(value: Option<Value<'_>>) -> Read<ApiGatewayRequestAuthorizer> {
    let mut authorizer = ApiGatewayRequestAuthorizer::default();
    let mut fields = None::<HashMap<String, serde_json::Value>>;
    optional(&mut fields, value)?;
    if let Some(fields) = fields {
        authorizer.fields = fields;
    }
    Ok(authorizer)
}

/// Each member of an object, its key as `serde` matches it against a
/// type's fields; `Ok(false)` if `text` is not an object. `scanned` are
/// its members if the event's scan kept them all.
fn fields<'a>(
    text: &'a str,
    scanned: Option<&Fields<'a>>,
    each: impl FnMut(&[u8], Value<'a>) -> Read<()>,
) -> Read<bool> {
    fields_of(text, scanned.and_then(Fields::all), each)
}

fn fields_of<'a>(
    text: &'a str,
    scanned: Option<impl Iterator<Item = (Str<'a>, Value<'a>)>>,
    mut each: impl FnMut(&[u8], Value<'a>) -> Read<()>,
) -> Read<bool> {
    if let Some(scanned) = scanned {
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
        let value = scan.field().map_err(|_| Refused)?.ok_or(Refused)?;
        field(key, value, &mut each)?;
    }
    Ok(true)
}

#[inline(always)]
fn field<'a>(
    key: Str<'a>,
    value: Value<'a>,
    each: &mut impl FnMut(&[u8], Value<'a>) -> Read<()>,
) -> Read<()> {
    match key.plain() {
        Some(plain) => each(plain, value),
        // A key with escapes, unescaped; one that is no `str` (a lone
        // surrogate) fails the type.
        None => each(key.text().ok_or(Refused)?.as_bytes(), value),
    }
}

/// A known field seen once; twice, the type refuses it.
fn once<'a>(slot: &mut Option<Value<'a>>, value: Value<'a>) -> Read<()> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(Refused),
    }
}

/// `#[serde(default)] Option<String>`.
fn string(value: Option<Value<'_>>) -> Read<Option<String>> {
    match value {
        None => Ok(None),
        Some(Value {
            text,
            plain_string: true,
        }) => Ok(text.get(1..text.len().saturating_sub(1)).map(str::to_owned)),
        Some(Value { text: "null", .. }) => Ok(None),
        Some(Value { text, .. }) => json::string_text(text)
            .map(|text| Some(text.into_owned()))
            .ok_or(Refused),
    }
}

/// `#[serde(default)] i64`: digits alone are read here and a string
/// refused; anything else (a sign, a fraction, `null`) as `serde_json`
/// reads it.
fn integer(value: Option<Value<'_>>) -> Read<i64> {
    let Some(Value { text, .. }) = value else {
        return Ok(0);
    };
    // Another front door's context has a string here: no error is
    // written for it.
    if text.starts_with('"') {
        return Err(Refused);
    }
    if !text.is_empty() && text.len() <= 18 {
        // Eighteen digits fit an `i64`.
        let digits = text.bytes().try_fold(0_i64, |number, byte| {
            byte.is_ascii_digit()
                .then(|| number * 10 + i64::from(byte - b'0'))
        });
        if let Some(number) = digits {
            return Ok(number);
        }
    }
    by_serde(text.as_bytes(), 0)
}

/// `http_method::deserialize`: a string, the empty one GET.
fn http_method(value: Value<'_>) -> Read<Method> {
    let text = json::string_text(value.text).ok_or(Refused)?;
    if text.is_empty() {
        return Ok(Method::GET);
    }
    Method::from_bytes(text.as_bytes()).map_err(|_| Refused)
}

/// An `Option` of a type read by `serde_json`: absent is `None`. Its
/// value is a member of the request context's.
fn optional<T: DeserializeOwned>(slot: &mut Option<T>, value: Option<Value<'_>>) -> Read<()> {
    // Absent, the slot keeps its `None`: no large `Option` is built and moved.
    if let Some(value) = value {
        *slot = by_serde(value.text.as_bytes(), IN_CONTEXT)?;
    }
    Ok(())
}

/// How many containers the type's own reading of the event has entered
/// when it reads the request context, and a member of it: `serde_json`
/// counts them towards its recursion limit.
const CONTEXT: usize = 1;
const IN_CONTEXT: usize = 2;

/// A value read by `serde_json` as the type reads it inside the event:
/// within `enclosing` containers, so that its recursion limit is met at
/// the same depth. `bytes` need not be UTF-8 (no front door sends such):
/// `serde_json` checks only the strings the type reads.
fn by_serde<T: DeserializeOwned>(bytes: &[u8], enclosing: usize) -> Read<T> {
    let mut within = Vec::with_capacity(bytes.len() + 2 * enclosing);
    within.resize(enclosing, b'[');
    within.extend_from_slice(bytes);
    within.resize(within.len() + enclosing, b']');
    let mut deserializer = serde_json::Deserializer::from_slice(&within);
    let value = Within::<T> {
        levels: enclosing,
        value: PhantomData,
    }
    .deserialize(&mut deserializer)
    .map_err(|_| Refused)?;
    deserializer.end().map_err(|_| Refused)?;
    Ok(value)
}

/// `T` inside `levels` one-element arrays.
struct Within<T> {
    levels: usize,
    value: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Within<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        match self.levels {
            0 => T::deserialize(deserializer),
            _ => deserializer.deserialize_seq(self),
        }
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Within<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value in an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        let inner = Within {
            levels: self.levels.saturating_sub(1),
            value: PhantomData,
        };
        seq.next_element_seed(inner)?
            .ok_or_else(|| de::Error::invalid_length(0, &"one element"))
    }
}
