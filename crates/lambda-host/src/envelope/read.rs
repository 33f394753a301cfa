//! An event read once into borrowed views of its JSON: the top-level
//! members as their raw text, the headers as name and value slices. Each
//! front door's reading then takes from these the members its
//! `aws_lambda_events` type has, with that type's rules for each (what is
//! required, what `null` means, which values are refused), so that an
//! event is accepted or refused as `lambda_http` would try it, type after
//! type, without reading it again for each type.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use bytes::Bytes;

use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::http::Method;
use lambda_http::http::header::{HeaderMap, HeaderName, HeaderValue};
use serde::de::{self, DeserializeOwned, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A top-level member: its raw JSON text, and whether the key came more
/// than once (serde refuses a repeated field of a type, and ignores a
/// repeated unknown one: only the types that read it refuse the event).
#[derive(Clone, Copy, Default)]
pub(super) struct Member<'a> {
    raw: Option<&'a RawValue>,
    repeated: bool,
}

/// The members any front door reads, keyed as the events spell them.
#[derive(Default)]
pub(super) struct Members<'a> {
    pub(super) http_method: Member<'a>,
    pub(super) method: Member<'a>,
    pub(super) resource: Member<'a>,
    pub(super) path: Member<'a>,
    pub(super) raw_path: Member<'a>,
    pub(super) raw_path_snake: Member<'a>,
    pub(super) raw_query_string: Member<'a>,
    pub(super) version: Member<'a>,
    pub(super) route_key: Member<'a>,
    pub(super) kind: Member<'a>,
    pub(super) method_arn: Member<'a>,
    pub(super) identity_source: Member<'a>,
    pub(super) authorization_token: Member<'a>,
    pub(super) cookies: Member<'a>,
    pub(super) query_string_parameters: Member<'a>,
    pub(super) query_string_parameters_snake: Member<'a>,
    pub(super) multi_value_query_string_parameters: Member<'a>,
    pub(super) path_parameters: Member<'a>,
    pub(super) stage_variables: Member<'a>,
    pub(super) request_context: Member<'a>,
    pub(super) body: Member<'a>,
    pub(super) is_base64_encoded: Member<'a>,
    pub(super) is_base64_encoded_snake: Member<'a>,
    pub(super) headers: Headers<'a>,
    pub(super) multi_value_headers: Headers<'a>,
}

/// A member's value is not what the type reading it takes: that type
/// refuses the event.
#[derive(Debug)]
pub(super) struct Refused;

pub(super) type Read<T> = Result<T, Refused>;

impl<'a> Member<'a> {
    fn text(self) -> Read<Option<&'a str>> {
        if self.repeated {
            return Err(Refused);
        }
        Ok(self.raw.map(RawValue::get))
    }

    /// Whether the key came more than once.
    pub(super) fn repeated(self) -> bool {
        self.repeated
    }

    /// Whether the key is there, whatever its value (`null` too).
    pub(super) fn present(self) -> bool {
        self.raw.is_some()
    }

    /// Whether the key is there with a value other than `null`.
    pub(super) fn given(self) -> bool {
        self.raw.is_some_and(|raw| raw.get() != "null")
    }

    /// A string member as `Option<String>` reads it, borrowed from the
    /// event unless it has escapes.
    pub(super) fn text_or_null(self) -> Read<Option<Text<'a>>> {
        match self.text()? {
            None | Some("null") => Ok(None),
            // Already read as JSON: a string without a backslash is the
            // text between its quotes.
            Some(text) if text.starts_with('"') && !text.contains('\\') => Ok(text
                .get(1..text.len().saturating_sub(1))
                .map(|inner| Text(Cow::Borrowed(inner)))),
            Some(text) if text.starts_with('"') => {
                match text.get(1..text.len().saturating_sub(1)).and_then(unescaped) {
                    Some(unescaped) => Ok(Some(Text(Cow::Owned(unescaped)))),
                    None => self.optional(),
                }
            }
            Some(_) => self.optional(),
        }
    }

    /// The value as `T`, or `None` without the key.
    pub(super) fn parse<T: Deserialize<'a>>(self) -> Read<Option<T>> {
        match self.text()? {
            None => Ok(None),
            Some(text) => serde_json::from_str(text).map(Some).map_err(|_| Refused),
        }
    }

    /// A field that may be absent or `null`: `Option<String>` and the like.
    pub(super) fn optional<T: Deserialize<'a>>(self) -> Read<Option<T>> {
        Ok(self.parse::<Option<T>>()?.flatten())
    }

    /// What `Option<String>` takes, when only that matters: absent,
    /// `null` or a string (the text is JSON already read: a string is
    /// whatever starts with a quote).
    pub(super) fn string_or_null(self) -> Read<()> {
        match self.text()? {
            None | Some("null") => Ok(()),
            Some(text) if text.starts_with('"') => Ok(()),
            Some(_) => Err(Refused),
        }
    }

    /// A field the type requires.
    pub(super) fn required<T: Deserialize<'a>>(self) -> Read<T> {
        self.parse()?.ok_or(Refused)
    }

    /// `#[serde(default)]` over `T`: absent is the default, `null` is
    /// refused unless `T` takes it.
    pub(super) fn or_default<T: Deserialize<'a> + Default>(self) -> Read<T> {
        Ok(self.parse()?.unwrap_or_default())
    }

    /// `deserialize_nullish`: absent and `null` are the default.
    pub(super) fn nullish<T: Deserialize<'a> + Default>(self) -> Read<T> {
        Ok(self.optional()?.unwrap_or_default())
    }

    /// An owned value of `aws_lambda_events` (a request context) that the
    /// request keeps.
    pub(super) fn owned<T: DeserializeOwned>(self) -> Read<T> {
        self.required()
    }

    /// `aws_lambda_events`' `http_method`: a string, the empty one GET.
    pub(super) fn method(self) -> Read<Option<Method>> {
        match self.parse::<Text<'a>>()?.map(|text| text.0) {
            None => Ok(None),
            Some(text) if text.is_empty() => Ok(Some(Method::GET)),
            Some(text) => Method::from_bytes(text.as_bytes()).map(Some).map_err(|_| Refused),
        }
    }

    /// `http_method::deserialize_optional`: absent or `null` is `None`.
    pub(super) fn optional_method(self) -> Read<Option<Method>> {
        match self.optional::<Text<'a>>()?.map(|text| text.0) {
            None => Ok(None),
            Some(text) if text.is_empty() => Ok(Some(Method::GET)),
            Some(text) => Method::from_bytes(text.as_bytes()).map(Some).map_err(|_| Refused),
        }
    }

    /// A query map read by one of `query_map`'s deserializers, less the
    /// names given an empty list of values: `QueryMap` panics when it
    /// iterates over one (its `to_query_string`, which the URI is written
    /// with), and no front door sends one.
    pub(super) fn query(self, style: QueryStyle) -> Read<QueryMap> {
        let Some(text) = self.text()? else {
            return Ok(QueryMap::default());
        };
        let map = query_map(text, style)?;
        if !may_have_an_empty_list(text) {
            return Ok(map);
        }
        match without_empty_lists(text) {
            Some(text) => query_map(&text, style),
            None => Ok(map),
        }
    }

    /// Path parameters and stage variables.
    pub(super) fn string_map(self) -> Read<HashMap<String, String>> {
        self.nullish()
    }
}

/// The text between a JSON string's quotes, which the event's one reading
/// found valid, unescaped into one `String` of its length; `None` on a
/// `\u` escape, left to `serde_json` (which refuses a lone surrogate).
fn unescaped(inner: &str) -> Option<String> {
    let mut text = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some((plain, after)) = rest.split_once('\\') {
        text.push_str(plain);
        let mut chars = after.chars();
        text.push(match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            _ => return None,
        });
        rest = chars.as_str();
    }
    text.push_str(rest);
    Some(text)
}

fn query_map(text: &str, style: QueryStyle) -> Read<QueryMap> {
    use lambda_http::aws_lambda_events::query_map::serde::{aws_api_gateway_v2, standard};
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let read = match style {
        QueryStyle::Standard => standard::deserialize_empty(&mut deserializer),
        QueryStyle::HttpApi => aws_api_gateway_v2::deserialize_empty(&mut deserializer),
        QueryStyle::Map => QueryMap::deserialize(&mut deserializer),
    };
    read.map_err(|_| Refused)
}

/// Whether `[`, blanks and `]` follow each other somewhere (in a string
/// too: then the exact reading finds no empty list).
fn may_have_an_empty_list(text: &str) -> bool {
    text.split('[')
        .skip(1)
        .any(|after| after.trim_start_matches([' ', '\t', '\n', '\r']).starts_with(']'))
}

/// The query object without its members whose value is an empty list,
/// or `None` if it has none.
fn without_empty_lists(text: &str) -> Option<String> {
    let members: Vec<(Cow<'_, str>, &RawValue)> = serde_json::from_str::<RawMembers<'_>>(text).ok()?.0;
    let empty =
        |raw: &RawValue| serde_json::from_str::<Vec<IgnoredAny>>(raw.get()).is_ok_and(|list| list.is_empty());
    // A repeated name keeps its last value, as the map is read.
    let mut last_empty = HashMap::new();
    for (name, raw) in &members {
        last_empty.insert(name.as_ref(), empty(raw));
    }
    if !last_empty.values().any(|empty| *empty) {
        return None;
    }
    let mut kept = String::from("{");
    for (name, raw) in members
        .iter()
        .filter(|(name, _)| last_empty.get(name.as_ref()) == Some(&false))
    {
        if kept.len() > 1 {
            kept.push(',');
        }
        kept.push_str(&serde_json::to_string(name).ok()?);
        kept.push(':');
        kept.push_str(raw.get());
    }
    kept.push('}');
    Some(kept)
}

/// An object's members in order, repeated names kept, values as raw text.
struct RawMembers<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for RawMembers<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RawMembersVisitor)
    }
}

struct RawMembersVisitor;

impl<'de> Visitor<'de> for RawMembersVisitor {
    type Value = RawMembers<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawMembers<'de>, A::Error> {
        let mut members = Vec::new();
        while let Some(Text(name)) = map.next_key::<Text<'de>>()? {
            members.push((name, map.next_value::<&'de RawValue>()?));
        }
        Ok(RawMembers(members))
    }
}

/// Which of `query_map`'s deserializers the event's type uses.
#[derive(Clone, Copy)]
pub(super) enum QueryStyle {
    /// `standard::deserialize_empty`: `null` is empty.
    Standard,
    /// `aws_api_gateway_v2::deserialize_empty`: comma-separated values.
    HttpApi,
    /// `QueryMap`'s own: an object only.
    Map,
}

/// Reads the top-level object once: a syntax error anywhere is the same
/// error `serde_json` gives for the whole payload.
pub(super) fn members(payload: &[u8]) -> Result<Members<'_>, serde_json::Error> {
    // UTF-8 checked once for the whole payload rather than string by
    // string; a payload that is not UTF-8 (no front door sends one) is
    // read as bytes, to be refused where the byte-wise reading refuses it.
    match std::str::from_utf8(payload) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(payload),
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct("Event", &[], MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
        let mut members = Members::default();
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            let slot = match key.as_ref() {
                "headers" => {
                    take_headers(&mut members.headers, map.next_value()?);
                    continue;
                }
                "multiValueHeaders" => {
                    take_headers(&mut members.multi_value_headers, map.next_value()?);
                    continue;
                }
                "httpMethod" => &mut members.http_method,
                "method" => &mut members.method,
                "resource" => &mut members.resource,
                "path" => &mut members.path,
                "rawPath" => &mut members.raw_path,
                "raw_path" => &mut members.raw_path_snake,
                "rawQueryString" => &mut members.raw_query_string,
                "version" => &mut members.version,
                "routeKey" => &mut members.route_key,
                "type" => &mut members.kind,
                "methodArn" => &mut members.method_arn,
                "identitySource" => &mut members.identity_source,
                "authorizationToken" => &mut members.authorization_token,
                "cookies" => &mut members.cookies,
                "queryStringParameters" => &mut members.query_string_parameters,
                "query_string_parameters" => &mut members.query_string_parameters_snake,
                "multiValueQueryStringParameters" => &mut members.multi_value_query_string_parameters,
                "pathParameters" => &mut members.path_parameters,
                "stageVariables" => &mut members.stage_variables,
                "requestContext" => &mut members.request_context,
                "body" => &mut members.body,
                "isBase64Encoded" => &mut members.is_base64_encoded,
                "is_base64_encoded" => &mut members.is_base64_encoded_snake,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let raw: &'de RawValue = map.next_value()?;
            slot.repeated |= slot.raw.is_some();
            slot.raw = Some(raw);
        }
        Ok(members)
    }

    /// An array, which no front door sends: read as serde reads a struct
    /// of three fields from one (the first reading took the method and
    /// the two header members), so that it is refused with the same error.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Members<'de>, A::Error> {
        for read in 0..3 {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(de::Error::invalid_length(read, &self));
            }
        }
        Ok(Members::default())
    }
}

fn take_headers<'a>(slot: &mut Headers<'a>, headers: Headers<'a>) {
    slot.repeated |= slot.present;
    slot.present = true;
    slot.names = headers.names;
    slot.value = headers.value;
}

/// A `headers` or `multiValueHeaders` member: its names and values as
/// slices of the event, whatever they hold, so that they are counted
/// before any map is built.
#[derive(Default)]
pub(super) struct Headers<'a> {
    present: bool,
    repeated: bool,
    names: usize,
    value: HeadersValue<'a>,
}

#[derive(Default)]
enum HeadersValue<'a> {
    /// Absent or `null`: no headers.
    #[default]
    Null,
    Object(Vec<(Cow<'a, str>, HeaderItem<'a>)>),
    /// A string, a number, an array: no header map.
    Other,
}

/// One member's value, as `aws_lambda_events`' header reader takes it: a
/// string, an array of strings, or an array of arrays of bytes.
enum HeaderItem<'a> {
    One(Cow<'a, str>),
    /// A list of one string, as a REST API's `multiValueHeaders` mostly
    /// have: kept without a `Vec` of its own.
    OneOfList(Cow<'a, str>),
    /// A list of strings, other than one.
    Strings(Vec<Cow<'a, str>>),
    Bytes(Vec<Vec<u8>>),
    Other,
}

impl<'a> Headers<'a> {
    /// Names in the member if it is an object (`MAX_HEADER_NAMES`).
    pub(super) fn names(&self) -> usize {
        self.names
    }

    /// Whether the key came more than once.
    pub(super) fn repeated(&self) -> bool {
        self.repeated
    }

    /// Whether `self`, a `headers` member, holds one by one the names and
    /// values of `multi`, a `multiValueHeaders` member: then merging the
    /// two maps gives the map of `self` (a name's last value, in the order
    /// the names first came), and `multi`'s values, being the same, are
    /// as valid. A REST API's events are so.
    pub(super) fn mirrors(&self, multi: &Headers<'_>) -> bool {
        let (HeadersValue::Object(single), HeadersValue::Object(multi)) = (&self.value, &multi.value) else {
            return false;
        };
        single.len() == multi.len()
            && single
                .iter()
                .zip(multi)
                .all(|((name, item), (multi_name, multi_item))| {
                    name == multi_name
                        && matches!((item, multi_item), (HeaderItem::One(value), HeaderItem::OneOfList(only))
                        if only == value)
                })
    }

    /// The header map `aws_lambda_events` builds of the member: a
    /// single value replaces the name's earlier ones, a list appends;
    /// `split` is VPC Lattice v1's comma-separated values.
    pub(super) fn map(&self, split: bool) -> Read<HeaderMap> {
        if self.repeated {
            return Err(Refused);
        }
        let pairs = match &self.value {
            HeadersValue::Null => return Ok(HeaderMap::new()),
            HeadersValue::Other => return Err(Refused),
            HeadersValue::Object(pairs) => pairs,
        };
        let mut map = HeaderMap::with_capacity(pairs.len());
        let mut shared = SharedValues::of(pairs);
        for (name, item) in pairs {
            let name = header_name(name)?;
            match item {
                HeaderItem::One(value) if split && value.contains(',') => {
                    append_split(&mut map, &name, value, shared.next(value))?
                }
                HeaderItem::One(value) => {
                    map.insert(name, header_value(shared.next(value))?);
                }
                HeaderItem::OneOfList(value) if split && value.contains(',') => {
                    append_split(&mut map, &name, value, shared.next(value))?
                }
                HeaderItem::OneOfList(value) => {
                    map.append(&name, header_value(shared.next(value))?);
                }
                HeaderItem::Strings(values) => {
                    for value in values {
                        if split && value.contains(',') {
                            append_split(&mut map, &name, value, shared.next(value))?;
                        } else {
                            map.append(&name, header_value(shared.next(value))?);
                        }
                    }
                }
                HeaderItem::Bytes(values) => {
                    for value in values {
                        map.append(&name, HeaderValue::from_bytes(value).map_err(|_| Refused)?);
                    }
                }
                HeaderItem::Other => return Err(Refused),
            }
        }
        Ok(map)
    }
}

/// The names every front door adds that `http` has no constant for,
/// shared rather than copied into each request.
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_AMZN_TRACE_ID: HeaderName = HeaderName::from_static("x-amzn-trace-id");
const X_FORWARDED_PORT: HeaderName = HeaderName::from_static("x-forwarded-port");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

fn header_name(name: &str) -> Read<HeaderName> {
    // `from_bytes` lowers the case: the same name.
    let same = |added: HeaderName| {
        (added.as_str() == name || added.as_str().eq_ignore_ascii_case(name)).then_some(added)
    };
    let added = match name.len() {
        15 => same(X_FORWARDED_FOR).or_else(|| same(X_AMZN_TRACE_ID)),
        16 => same(X_FORWARDED_PORT),
        17 => same(X_FORWARDED_PROTO),
        _ => None,
    };
    match added {
        Some(added) => Ok(added),
        None => HeaderName::from_bytes(name.as_bytes()).map_err(|_| Refused),
    }
}

/// The member's string values copied once, in their order, into one
/// buffer that the map's values share: one allocation for all of them
/// rather than one each (`HeaderValue::from_str` copies its text).
struct SharedValues {
    bytes: Bytes,
    at: usize,
}

impl SharedValues {
    fn of(pairs: &[(Cow<'_, str>, HeaderItem<'_>)]) -> Self {
        let values = || {
            pairs.iter().flat_map(|(_, item)| match item {
                HeaderItem::One(value) | HeaderItem::OneOfList(value) => std::slice::from_ref(value),
                HeaderItem::Strings(values) => values.as_slice(),
                HeaderItem::Bytes(_) | HeaderItem::Other => &[],
            })
        };
        let mut buffer = Vec::with_capacity(values().map(|value| value.len()).sum());
        for value in values() {
            buffer.extend_from_slice(value.as_bytes());
        }
        Self {
            bytes: Bytes::from(buffer),
            at: 0,
        }
    }

    /// `value`'s bytes, `value` being the next string value in the order
    /// [`SharedValues::of`] copied them.
    fn next(&mut self, value: &str) -> Bytes {
        let end = self.at.saturating_add(value.len()).min(self.bytes.len());
        let bytes = self.bytes.slice(self.at.min(end)..end);
        self.at = end;
        bytes
    }
}

/// `HeaderValue::from_str`'s checks, on bytes already copied.
fn header_value(value: Bytes) -> Read<HeaderValue> {
    HeaderValue::from_maybe_shared(value).map_err(|_| Refused)
}

/// `value`'s comma-separated parts, trimmed, each a slice of `bytes`,
/// which holds `value`.
fn append_split(map: &mut HeaderMap, name: &HeaderName, value: &str, bytes: Bytes) -> Read<()> {
    let mut start = 0;
    for part in value.split(',') {
        let trimmed = part.trim_start();
        let from = start + (part.len() - trimmed.len());
        let to = from + trimmed.trim_end().len();
        start += part.len() + 1;
        if to > from {
            map.append(
                name,
                header_value(bytes.slice(from.min(bytes.len())..to.min(bytes.len())))?,
            );
        }
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Headers<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(HeadersVisitor)
    }
}

struct HeadersVisitor;

impl<'de> Visitor<'de> for HeadersVisitor {
    type Value = Headers<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Headers<'de>, A::Error> {
        // What a front door's request usually has, in one allocation.
        let mut pairs = Vec::with_capacity(16);
        while let Some(Text(name)) = map.next_key::<Text<'de>>()? {
            pairs.push((name, map.next_value::<HeaderItem<'de>>()?));
        }
        Ok(Headers {
            names: pairs.len(),
            value: HeadersValue::Object(pairs),
            ..Headers::default()
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Headers<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(other())
    }

    fn visit_unit<E>(self) -> Result<Headers<'de>, E> {
        Ok(Headers::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<Headers<'de>, E> {
        Ok(other())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Headers<'de>, E> {
        Ok(other())
    }

    fn visit_u64<E>(self, _: u64) -> Result<Headers<'de>, E> {
        Ok(other())
    }

    fn visit_f64<E>(self, _: f64) -> Result<Headers<'de>, E> {
        Ok(other())
    }

    fn visit_str<E>(self, _: &str) -> Result<Headers<'de>, E> {
        Ok(other())
    }
}

fn other<'a>() -> Headers<'a> {
    Headers {
        value: HeadersValue::Other,
        ..Headers::default()
    }
}

impl<'de> Deserialize<'de> for HeaderItem<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ItemVisitor)
    }
}

struct ItemVisitor;

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = HeaderItem<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<HeaderItem<'de>, E> {
        Ok(HeaderItem::One(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<HeaderItem<'de>, E> {
        Ok(HeaderItem::One(Cow::Owned(value.to_owned())))
    }

    /// All strings, or else all arrays of bytes: `OneOrMore`'s variants
    /// in their order.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<HeaderItem<'de>, A::Error> {
        let mut first = None;
        let mut strings = Vec::new();
        let mut bytes = Vec::new();
        let mut other = false;
        while let Some(element) = seq.next_element::<Element<'de>>()? {
            match element {
                Element::Str(text) if first.is_none() => first = Some(text),
                Element::Str(text) => strings.push(text),
                Element::Bytes(value) => bytes.push(value),
                Element::Other => other = true,
            }
        }
        Ok(match (other, first, bytes.is_empty()) {
            (false, Some(only), true) if strings.is_empty() => HeaderItem::OneOfList(only),
            (false, Some(first), true) => {
                strings.insert(0, first);
                HeaderItem::Strings(strings)
            }
            (false, None, true) => HeaderItem::Strings(strings),
            (false, None, false) => HeaderItem::Bytes(bytes),
            _ => HeaderItem::Other,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HeaderItem<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(HeaderItem::Other)
    }

    fn visit_unit<E>(self) -> Result<HeaderItem<'de>, E> {
        Ok(HeaderItem::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<HeaderItem<'de>, E> {
        Ok(HeaderItem::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<HeaderItem<'de>, E> {
        Ok(HeaderItem::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<HeaderItem<'de>, E> {
        Ok(HeaderItem::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<HeaderItem<'de>, E> {
        Ok(HeaderItem::Other)
    }
}

/// An element of a header's array.
enum Element<'a> {
    Str(Cow<'a, str>),
    Bytes(Vec<u8>),
    Other,
}

impl<'de> Deserialize<'de> for Element<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ElementVisitor)
    }
}

struct ElementVisitor;

impl<'de> Visitor<'de> for ElementVisitor {
    type Value = Element<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Element<'de>, E> {
        Ok(Element::Str(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Element<'de>, E> {
        Ok(Element::Str(Cow::Owned(value.to_owned())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Element<'de>, A::Error> {
        let mut bytes = Vec::new();
        let mut other = false;
        while let Some(byte) = seq.next_element::<Byte>()? {
            match byte.0 {
                Some(byte) => bytes.push(byte),
                None => other = true,
            }
        }
        Ok(if other {
            Element::Other
        } else {
            Element::Bytes(bytes)
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Element<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Element::Other)
    }

    fn visit_unit<E>(self) -> Result<Element<'de>, E> {
        Ok(Element::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Element<'de>, E> {
        Ok(Element::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Element<'de>, E> {
        Ok(Element::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Element<'de>, E> {
        Ok(Element::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Element<'de>, E> {
        Ok(Element::Other)
    }
}

/// A byte of a header's byte array, as serde's `u8` takes it: an integer
/// from 0 to 255; anything else is `None`.
struct Byte(Option<u8>);

impl<'de> Deserialize<'de> for Byte {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ByteVisitor)
    }
}

struct ByteVisitor;

impl<'de> Visitor<'de> for ByteVisitor {
    type Value = Byte;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_u64<E>(self, value: u64) -> Result<Byte, E> {
        Ok(Byte(u8::try_from(value).ok()))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Byte, E> {
        Ok(Byte(u8::try_from(value).ok()))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Byte, E> {
        Ok(Byte(None))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Byte, E> {
        Ok(Byte(None))
    }

    fn visit_str<E>(self, _: &str) -> Result<Byte, E> {
        Ok(Byte(None))
    }

    fn visit_unit<E>(self) -> Result<Byte, E> {
        Ok(Byte(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Byte, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Byte(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Byte, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Byte(None))
    }
}

/// A JSON string, borrowed from the event unless it had escapes.
pub(super) struct Text<'a>(Cow<'a, str>);

impl<'a> Text<'a> {
    pub(super) fn as_str(&self) -> &str {
        &self.0
    }

    pub(super) fn into_owned(self) -> String {
        self.0.into_owned()
    }
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(value)))
    }
}
