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
use lambda_http::http::header::{HOST, HeaderMap, HeaderName, HeaderValue};
use serde::de::{DeserializeOwned, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::irregular::Unsupported;
use super::json::{self, Fields, Invalid, Kind, Scan, Scanner};

/// A top-level member: its raw JSON text, and whether the key came more
/// than once (serde refuses a repeated field of a type, and ignores a
/// repeated unknown one: only the types that read it refuse the event).
#[derive(Clone, Copy, Default)]
pub(super) struct Member<'a> {
    raw: Option<&'a str>,
    /// Its bytes, when it is not UTF-8.
    bytes: &'a [u8],
    /// There, but not UTF-8: every type that reads it refuses it.
    garbled: bool,
    repeated: bool,
    /// A string without escapes: its text between the quotes is the
    /// string, read without a second look.
    plain: bool,
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
    /// The request context's members, read with the event.
    pub(super) context_fields: Fields<'a>,
}

/// A member's value is not what the type reading it takes: that type
/// refuses the event.
#[derive(Debug)]
pub(super) struct Refused;

pub(super) type Read<T> = Result<T, Refused>;

impl<'a> Member<'a> {
    fn text(self) -> Read<Option<&'a str>> {
        if self.repeated || self.garbled {
            return Err(Refused);
        }
        Ok(self.raw)
    }

    /// The bytes of a member that is not UTF-8, which a type whose fields
    /// skip what they do not read may still take.
    pub(super) fn garbled(self) -> Option<&'a [u8]> {
        (self.garbled && !self.repeated).then_some(self.bytes)
    }

    /// The text of a member the type requires.
    pub(super) fn required_text(self) -> Read<&'a str> {
        self.text()?.ok_or(Refused)
    }

    /// Whether the key is there, whatever its value (`null` too).
    pub(super) fn present(self) -> bool {
        self.raw.is_some() || self.garbled
    }

    /// Whether the key is there with a value other than `null`.
    pub(super) fn given(self) -> bool {
        self.garbled || self.raw.is_some_and(|raw| raw != "null")
    }

    /// A string member as `Option<String>` reads it, borrowed from the
    /// event unless it has escapes.
    pub(super) fn text_or_null(self) -> Read<Option<Text<'a>>> {
        match self.text()? {
            Some(text) if self.plain => text
                .strip_prefix('"')
                .and_then(|text| text.strip_suffix('"'))
                .map(|inner| Some(Text(Cow::Borrowed(inner))))
                .ok_or(Refused),
            None | Some("null") => Ok(None),
            Some(text) => json::string_text(text)
                .map(|text| Some(Text(text)))
                .ok_or(Refused),
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
            Some(_) if self.plain => Ok(()),
            None | Some("null") => Ok(()),
            Some(text) if !text.contains('\\') && text.starts_with('"') => Ok(()),
            Some(text) => json::string_text(text).map(drop).ok_or(Refused),
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

    /// [`Member::or_default`] over `bool`, its two literals read here.
    pub(super) fn flag_or_default(self) -> Read<bool> {
        match self.text()? {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(_) => self.or_default(),
        }
    }

    /// [`Member::nullish`] over `bool`, its two literals and `null` read
    /// here.
    pub(super) fn flag_nullish(self) -> Read<bool> {
        match self.text()? {
            None | Some("null" | "false") => Ok(false),
            Some("true") => Ok(true),
            Some(_) => self.nullish(),
        }
    }

    /// An owned value of `aws_lambda_events` (a request context) that the
    /// request keeps.
    pub(super) fn owned<T: DeserializeOwned>(self) -> Read<T> {
        match self.garbled() {
            Some(bytes) => serde_json::from_slice(bytes).map_err(|_| Refused),
            None => self.required(),
        }
    }

    /// A string without escapes, its text between the quotes; `None`
    /// for anything else, left to `serde_json`.
    fn plain_text(self) -> Read<Option<Text<'a>>> {
        Ok(match self.text()? {
            Some(text) if self.plain => text
                .strip_prefix('"')
                .and_then(|text| text.strip_suffix('"'))
                .map(|inner| Text(Cow::Borrowed(inner))),
            _ => None,
        })
    }

    /// `aws_lambda_events`' `http_method`: a string, the empty one GET.
    pub(super) fn method(self) -> Read<Option<Method>> {
        let text = match self.plain_text()? {
            Some(text) => Some(text),
            None => self.parse::<Text<'a>>()?,
        };
        match text.map(|text| text.0) {
            None => Ok(None),
            Some(text) if text.is_empty() => Ok(Some(Method::GET)),
            Some(text) => Method::from_bytes(text.as_bytes()).map(Some).map_err(|_| Refused),
        }
    }

    /// `http_method::deserialize_optional`: absent or `null` is `None`.
    pub(super) fn optional_method(self) -> Read<Option<Method>> {
        let text = match self.plain_text()? {
            Some(text) => Some(text),
            None => self.optional::<Text<'a>>()?,
        };
        match text.map(|text| text.0) {
            None => Ok(None),
            Some(text) if text.is_empty() => Ok(Some(Method::GET)),
            Some(text) => Method::from_bytes(text.as_bytes()).map(Some).map_err(|_| Refused),
        }
    }

    /// A query map read by one of `query_map`'s deserializers, less the
    /// names given an empty list of values: `QueryMap` panics when it
    /// iterates over one (its `to_query_string`, which the URI is written
    /// with; docs/upstream/query-map-iterator-empty-values.md), and no
    /// front door sends one.
    pub(super) fn query(self, style: QueryStyle) -> Read<QueryMap> {
        let Some(text) = self.text()? else {
            return Ok(QueryMap::default());
        };
        // `{}`, and `null` where the style takes it: empty, read without
        // serde_json.
        if text == "{}" || text == "null" && !matches!(style, QueryStyle::Map) {
            return Ok(QueryMap::default());
        }
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
        match self.text()? {
            None | Some("null" | "{}") => Ok(HashMap::new()),
            Some(_) => self.nullish(),
        }
    }
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

/// Reads the event once, with [`json::Scanner`]. An event it finds
/// invalid is read again by `serde_json` as `lambda_http`'s first reading
/// took it ([`Shape`]), for that reading's refusal and its error's words.
/// `members` is filled in place: it is large, and a move is a copy.
pub(super) fn members<'a>(payload: &'a [u8], members: &mut Members<'a>) -> Result<(), Unsupported> {
    scan_members(payload, members).map_err(|Invalid| match serde_json::from_slice::<Shape>(payload) {
        Err(err) if !err.is_data() => Unsupported::NotJson(err),
        // JSON, but not an object, or an object with a repeated member
        // that the first reading refuses.
        _ => Unsupported::NotAFrontDoor,
    })
}

fn scan_members<'a>(payload: &'a [u8], members: &mut Members<'a>) -> Scan<()> {
    let mut scan = Scanner::new(payload);
    if !scan.object()? {
        return Err(Invalid);
    }
    let mut first = true;
    while let Some(key) = scan.key(&mut first)? {
        // The first reading reads the keys into `str`s.
        let text;
        let key = match key.plain() {
            Some(plain) => plain,
            None => {
                text = key.text().ok_or(Invalid)?;
                text.as_bytes()
            }
        };
        let slot = match key {
            b"headers" | b"multiValueHeaders" => {
                let headers = if key == b"headers" {
                    &mut members.headers
                } else {
                    &mut members.multi_value_headers
                };
                // The first reading's fields: repeated, it refuses.
                if headers.present {
                    return Err(Invalid);
                }
                *headers = scan_headers(&mut scan)?;
                continue;
            }
            b"httpMethod" if members.http_method.present() => return Err(Invalid),
            b"httpMethod" => &mut members.http_method,
            b"method" => &mut members.method,
            b"resource" => &mut members.resource,
            b"path" => &mut members.path,
            b"rawPath" => &mut members.raw_path,
            b"raw_path" => &mut members.raw_path_snake,
            b"rawQueryString" => &mut members.raw_query_string,
            b"version" => &mut members.version,
            b"routeKey" => &mut members.route_key,
            b"type" => &mut members.kind,
            b"methodArn" => &mut members.method_arn,
            b"identitySource" => &mut members.identity_source,
            b"authorizationToken" => &mut members.authorization_token,
            b"cookies" => &mut members.cookies,
            b"queryStringParameters" => &mut members.query_string_parameters,
            b"query_string_parameters" => &mut members.query_string_parameters_snake,
            b"multiValueQueryStringParameters" => &mut members.multi_value_query_string_parameters,
            b"pathParameters" => &mut members.path_parameters,
            b"stageVariables" => &mut members.stage_variables,
            b"requestContext" => {
                let slot = &mut members.request_context;
                let (raw, bytes) = scan.value_into(&mut members.context_fields)?;
                slot.repeated |= slot.present();
                slot.raw = raw;
                slot.bytes = bytes;
                slot.garbled = raw.is_none();
                continue;
            }
            b"body" => &mut members.body,
            b"isBase64Encoded" => &mut members.is_base64_encoded,
            b"is_base64_encoded" => &mut members.is_base64_encoded_snake,
            _ => {
                scan.value()?;
                continue;
            }
        };
        let (raw, plain) = scan.value_plain()?;
        slot.repeated |= slot.present();
        slot.raw = raw;
        slot.plain = plain;
        slot.garbled = raw.is_none();
    }
    scan.end()?;
    Ok(())
}

/// The members `lambda_http`'s first reading of an event took, as it took
/// them: the keys of the event and of its header members read into
/// `str`s, a header member's own value read as any value.
#[derive(Deserialize)]
struct Shape {
    #[serde(rename = "httpMethod")]
    _http_method: Option<IgnoredAny>,
    #[serde(default, rename = "headers")]
    _headers: AnyValue,
    #[serde(default, rename = "multiValueHeaders")]
    _multi_value_headers: AnyValue,
}

#[derive(Default)]
struct AnyValue;

impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AnyValueVisitor)
    }
}

struct AnyValueVisitor;

impl<'de> Visitor<'de> for AnyValueVisitor {
    type Value = AnyValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyValue, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(AnyValue)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AnyValue, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(AnyValue)
    }

    fn visit_unit<E>(self) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }

    fn visit_bool<E>(self, _: bool) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }

    fn visit_i64<E>(self, _: i64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }

    fn visit_u64<E>(self, _: u64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }

    fn visit_f64<E>(self, _: f64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }

    fn visit_str<E>(self, _: &str) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
}

/// A `headers` or `multiValueHeaders` member: its names and values as
/// slices of the event, whatever they hold, so that they are counted
/// before any map is built.
#[derive(Default)]
pub(super) struct Headers<'a> {
    present: bool,
    names: usize,
    value: HeadersValue<'a>,
    /// The member's text, which its values are slices of.
    text: &'a [u8],
}

#[derive(Default)]
enum HeadersValue<'a> {
    /// Absent or `null`: no headers.
    #[default]
    Null,
    Object(Pairs<'a>),
    /// A string, a number, an array: no header map.
    Other,
}

/// A header object's names and values in order. The pairs are `Copy`,
/// what they do not borrow from the event kept beside them, so that
/// their `Vec` is freed without a walk over it.
#[derive(Default)]
struct Pairs<'a> {
    pairs: Vec<(Piece<'a>, HeaderItem<'a>)>,
    /// The names and values that had escapes, unescaped.
    unescaped: Vec<String>,
    /// The values of the lists of more than one string, one after another.
    strings: Vec<Piece<'a>>,
    /// The values of the lists of lists of bytes, one after another.
    bytes: Vec<Vec<u8>>,
}

/// A name or a value: a slice of the event, or one of [`Pairs`]'s
/// unescaped texts.
#[derive(Clone, Copy)]
enum Piece<'a> {
    Slice(&'a str),
    Unescaped(usize),
}

/// One member's value, as `aws_lambda_events`' header reader takes it: a
/// string, an array of strings, or an array of arrays of bytes. Lists of
/// more than one value are ranges of [`Pairs`]'s `strings` or `bytes`.
#[derive(Clone, Copy)]
enum HeaderItem<'a> {
    One(Piece<'a>),
    /// A list of one string, as a REST API's `multiValueHeaders` mostly
    /// have: kept without a range.
    OneOfList(Piece<'a>),
    /// A list of strings, other than one.
    Strings(usize, usize),
    Bytes(usize, usize),
    Other,
}

impl<'a> Pairs<'a> {
    #[inline(always)]
    fn piece(&mut self, text: Cow<'a, str>) -> Piece<'a> {
        match text {
            Cow::Borrowed(text) => Piece::Slice(text),
            Cow::Owned(text) => {
                self.unescaped.push(text);
                Piece::Unescaped(self.unescaped.len() - 1)
            }
        }
    }

    #[inline(always)]
    fn text(&self, piece: Piece<'a>) -> &str {
        match piece {
            Piece::Slice(text) => text,
            Piece::Unescaped(at) => self.unescaped.get(at).map_or("", String::as_str),
        }
    }

    fn strings(&self, from: usize, to: usize) -> impl Iterator<Item = &str> {
        self.strings
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .map(|piece| self.text(*piece))
    }

    fn bytes(&self, from: usize, to: usize) -> &[Vec<u8>] {
        self.bytes.get(from..to).unwrap_or_default()
    }
}

impl<'a> Headers<'a> {
    /// Names in the member if it is an object (`MAX_HEADER_NAMES`).
    pub(super) fn names(&self) -> usize {
        self.names
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
        single.pairs.len() == multi.pairs.len()
            && single
                .pairs
                .iter()
                .zip(&multi.pairs)
                .all(|((name, item), (multi_name, multi_item))| {
                    single.text(*name) == multi.text(*multi_name)
                        && matches!((item, multi_item), (HeaderItem::One(value), HeaderItem::OneOfList(only))
                        if multi.text(*only) == single.text(*value))
                })
    }

    /// The header map `aws_lambda_events` builds of the member: a
    /// single value replaces the name's earlier ones, a list appends;
    /// `split` is VPC Lattice v1's comma-separated values.
    pub(super) fn map(&self, split: bool) -> Read<HeaderMap> {
        self.map_noting(split).map(|(map, _)| map)
    }

    /// [`Headers::map`], and the first values of `Host` and
    /// `X-Forwarded-Proto` in it, noted as the map is built.
    pub(super) fn map_noting(&self, split: bool) -> Read<(HeaderMap, Firsts<'_>)> {
        let in_map = Firsts {
            host: First::InMap,
            proto: First::InMap,
            values: None,
        };
        let pairs = match &self.value {
            HeadersValue::Null => return Ok((HeaderMap::new(), Firsts::default())),
            HeadersValue::Other => return Err(Refused),
            HeadersValue::Object(pairs) => pairs,
        };
        let mut map = HeaderMap::with_capacity(pairs.pairs.len());
        let mut shared = SharedValues::of(self.text);
        let mut firsts = Firsts::default();
        for &(name, item) in &pairs.pairs {
            let name = header_name(pairs.text(name))?;
            let noted = if name == HOST {
                Some(&mut firsts.host)
            } else if name == X_FORWARDED_PROTO {
                Some(&mut firsts.proto)
            } else {
                None
            };
            if let Some(first) = noted {
                match item {
                    HeaderItem::One(value) => *first = First::Text(pairs.text(value)),
                    HeaderItem::OneOfList(value) => first.append(First::Text(pairs.text(value))),
                    HeaderItem::Strings(from, to) => {
                        if let Some(value) = pairs.strings(from, to).next() {
                            first.append(First::Text(value));
                        }
                    }
                    HeaderItem::Bytes(from, to) if to > from => first.append(First::InMap),
                    HeaderItem::Bytes(..) | HeaderItem::Other => {}
                }
            }
            match item {
                HeaderItem::One(value) => {
                    let value = pairs.text(value);
                    if split && value.contains(',') {
                        append_split(&mut map, &name, value, shared.next(value))?
                    } else {
                        map.insert(name, shared.value(value)?);
                    }
                }
                HeaderItem::OneOfList(value) => {
                    let value = pairs.text(value);
                    if split && value.contains(',') {
                        append_split(&mut map, &name, value, shared.next(value))?
                    } else {
                        map.append(&name, shared.value(value)?);
                    }
                }
                HeaderItem::Strings(from, to) => {
                    for value in pairs.strings(from, to) {
                        if split && value.contains(',') {
                            append_split(&mut map, &name, value, shared.next(value))?;
                        } else {
                            map.append(&name, shared.value(value)?);
                        }
                    }
                }
                HeaderItem::Bytes(from, to) => {
                    for value in pairs.bytes(from, to) {
                        map.append(&name, HeaderValue::from_bytes(value).map_err(|_| Refused)?);
                    }
                }
                HeaderItem::Other => return Err(Refused),
            }
        }
        // Split, a value is not the member's text: the map has them.
        if split {
            return Ok((map, in_map));
        }
        firsts.values = Some(shared);
        Ok((map, firsts))
    }
}

/// The first values of `Host` and `X-Forwarded-Proto` in a header map,
/// as `HeaderMap::get` finds them, noted while the map is built from the
/// member (a single value replaces the name's earlier ones, a list's come
/// after them), so that they are not looked up by hashing their names.
#[derive(Default)]
pub(super) struct Firsts<'h> {
    pub(super) host: First<'h>,
    pub(super) proto: First<'h>,
    /// The member's values as the map shares them.
    values: Option<SharedValues<'h>>,
}

impl Firsts<'_> {
    /// `text`'s bytes: shared with the map's values if it is one of them
    /// (the host a URI's authority is made of), else a copy.
    pub(super) fn bytes_of(&self, text: &str) -> Bytes {
        match &self.values {
            Some(values) => values.next(text),
            None => Bytes::copy_from_slice(text.as_bytes()),
        }
    }
}

#[derive(Clone, Copy, Default)]
pub(super) enum First<'h> {
    /// The map has no value for the name.
    #[default]
    Absent,
    /// The map's first value for the name, whose bytes are this text.
    Text(&'h str),
    /// Not noted: ask the map.
    InMap,
}

impl<'h> First<'h> {
    /// A value appended after the name's others.
    fn append(&mut self, value: First<'h>) {
        if matches!(self, First::Absent) {
            *self = value;
        }
    }
}

/// The names every front door adds that `http` has no constant for,
/// shared rather than copied into each request.
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_AMZN_TRACE_ID: HeaderName = HeaderName::from_static("x-amzn-trace-id");
const X_FORWARDED_PORT: HeaderName = HeaderName::from_static("x-forwarded-port");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// Added by a function URL, and by CloudFront before a REST API.
const X_AMZN_TLS_CIPHER_SUITE: HeaderName = HeaderName::from_static("x-amzn-tls-cipher-suite");
const X_AMZN_TLS_VERSION: HeaderName = HeaderName::from_static("x-amzn-tls-version");
const X_AMZ_CF_ID: HeaderName = HeaderName::from_static("x-amz-cf-id");

fn header_name(name: &str) -> Read<HeaderName> {
    use lambda_http::http::header::{
        ACCEPT, ACCEPT_ENCODING, ACCEPT_LANGUAGE, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST,
        ORIGIN, REFERER, USER_AGENT, VIA,
    };
    // The names front doors send, as they send them (a REST API passes
    // on the client's case): `from_bytes` would copy each through a
    // table to find the same constant.
    let known = match name {
        "accept" | "Accept" => ACCEPT,
        "accept-encoding" | "Accept-Encoding" => ACCEPT_ENCODING,
        "accept-language" | "Accept-Language" => ACCEPT_LANGUAGE,
        "authorization" | "Authorization" => AUTHORIZATION,
        "content-length" | "Content-Length" => CONTENT_LENGTH,
        "content-type" | "Content-Type" => CONTENT_TYPE,
        "cookie" | "Cookie" => COOKIE,
        "host" | "Host" => HOST,
        "origin" | "Origin" => ORIGIN,
        "referer" | "Referer" => REFERER,
        "user-agent" | "User-Agent" => USER_AGENT,
        "x-amzn-trace-id" | "X-Amzn-Trace-Id" => X_AMZN_TRACE_ID,
        "x-forwarded-for" | "X-Forwarded-For" => X_FORWARDED_FOR,
        "x-forwarded-port" | "X-Forwarded-Port" => X_FORWARDED_PORT,
        "x-forwarded-proto" | "X-Forwarded-Proto" => X_FORWARDED_PROTO,
        "x-amzn-tls-cipher-suite" => X_AMZN_TLS_CIPHER_SUITE,
        "x-amzn-tls-version" => X_AMZN_TLS_VERSION,
        "via" | "Via" => VIA,
        "x-amz-cf-id" | "X-Amz-Cf-Id" => X_AMZ_CF_ID,
        _ => return other_header_name(name),
    };
    Ok(known)
}

fn other_header_name(name: &str) -> Read<HeaderName> {
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

/// The member's text copied once, whose slices the map's values share:
/// one allocation and one copy for all of them rather than one each
/// (`HeaderValue::from_str` copies its text).
struct SharedValues<'a> {
    text: &'a [u8],
    bytes: Bytes,
}

impl<'a> SharedValues<'a> {
    fn of(text: &'a [u8]) -> Self {
        Self {
            text,
            bytes: Bytes::copy_from_slice(text),
        }
    }

    /// `value` as a header value: one of the values every front door
    /// sends is a constant (neither a slice to count nor bytes to check),
    /// any other a slice of the copy.
    fn value(&mut self, value: &str) -> Read<HeaderValue> {
        Ok(match value {
            "https" => const { HeaderValue::from_static("https") },
            "443" => const { HeaderValue::from_static("443") },
            "http" => const { HeaderValue::from_static("http") },
            "80" => const { HeaderValue::from_static("80") },
            "*/*" => const { HeaderValue::from_static("*/*") },
            "application/json" => const { HeaderValue::from_static("application/json") },
            _ => header_value(self.next(value))?,
        })
    }

    /// `value`'s bytes: a slice of the copy if `value` is a slice of the
    /// member's text (no escape in it), else a copy of its own.
    fn next(&self, value: &str) -> Bytes {
        let from = value.as_ptr().addr().wrapping_sub(self.text.as_ptr().addr());
        let to = from.wrapping_add(value.len());
        // In the text's range, it is a slice of the text.
        if from <= to && to <= self.bytes.len() {
            return self.bytes.slice(from..to);
        }
        Bytes::copy_from_slice(value.as_bytes())
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

/// A header member's value. Its names are read into `str`s, as the first
/// reading reads them; its values are kept for the header map, which
/// refuses what is not a header.
fn scan_headers<'a>(scan: &mut Scanner<'a>) -> Scan<Headers<'a>> {
    let from = scan.mark();
    let value = match scan.kind()? {
        Kind::Object => {
            scan.object()?;
            // What a front door's request usually has, in one allocation.
            let mut pairs = Pairs {
                pairs: Vec::with_capacity(16),
                ..Pairs::default()
            };
            let mut first = true;
            while let Some(name) = scan.key_text(&mut first)? {
                let name = pairs.piece(name.ok_or(Invalid)?);
                let item = scan_item(scan, &mut pairs)?;
                pairs.pairs.push((name, item));
            }
            HeadersValue::Object(pairs)
        }
        Kind::Literal => match scan.value()? {
            Some("null") => HeadersValue::Null,
            _ => HeadersValue::Other,
        },
        // Read as any value: a string into a `str`, a number into an
        // `f64` if it is not an integer.
        Kind::String => {
            scan.str()?.text().ok_or(Invalid)?;
            HeadersValue::Other
        }
        Kind::Number => {
            let number = scan.value()?.ok_or(Invalid)?;
            serde_json::from_str::<f64>(number).map_err(|_| Invalid)?;
            HeadersValue::Other
        }
        Kind::Array => {
            scan.value()?;
            HeadersValue::Other
        }
    };
    Ok(Headers {
        present: true,
        names: match &value {
            HeadersValue::Object(pairs) => pairs.pairs.len(),
            _ => 0,
        },
        value,
        text: scan.since(from),
    })
}

/// One header's value, as `aws_lambda_events`' header reader takes it:
/// a string, a list of strings, a list of lists of bytes; anything else,
/// a string that is not one as `str` (a lone surrogate) among them, is
/// [`HeaderItem::Other`].
fn scan_item<'a>(scan: &mut Scanner<'a>, pairs: &mut Pairs<'a>) -> Scan<HeaderItem<'a>> {
    match scan.kind()? {
        Kind::String => Ok(match scan.text_of_str()? {
            Some(text) => HeaderItem::One(pairs.piece(text)),
            None => HeaderItem::Other,
        }),
        Kind::Array => {
            scan.array()?;
            // A list of one string, as a REST API's `multiValueHeaders`
            // mostly have, is not put in `strings`: only a second one
            // puts both there.
            let strings_from = pairs.strings.len();
            let bytes_from = pairs.bytes.len();
            let mut only = None;
            let mut count = 0_usize;
            let mut other = false;
            let mut first = true;
            while scan.element(&mut first)? {
                match scan.kind()? {
                    Kind::String => match scan.text_of_str()? {
                        Some(text) => {
                            let piece = pairs.piece(text);
                            count += 1;
                            match only.take() {
                                None if count == 1 => only = Some(piece),
                                earlier => {
                                    pairs.strings.extend(earlier);
                                    pairs.strings.push(piece);
                                }
                            }
                        }
                        None => other = true,
                    },
                    Kind::Array => match scan_bytes(scan)? {
                        Some(value) => pairs.bytes.push(value),
                        None => other = true,
                    },
                    _ => {
                        scan.value()?;
                        other = true;
                    }
                }
            }
            // All strings, or else all lists of bytes: `OneOrMore`'s
            // variants in their order.
            let bytes_to = pairs.bytes.len();
            Ok(match (other, only, bytes_to == bytes_from) {
                (false, Some(only), true) => HeaderItem::OneOfList(only),
                (false, None, true) => HeaderItem::Strings(strings_from, pairs.strings.len()),
                (false, None, false) if count == 0 => HeaderItem::Bytes(bytes_from, bytes_to),
                _ => HeaderItem::Other,
            })
        }
        _ => {
            scan.value()?;
            Ok(HeaderItem::Other)
        }
    }
}

/// A list of bytes, each as serde's `u8` takes it (an integer from 0 to
/// 255, which `serde_json` reads from digits alone); `None` if anything
/// else is in it.
fn scan_bytes(scan: &mut Scanner<'_>) -> Scan<Option<Vec<u8>>> {
    scan.array()?;
    let mut bytes = Some(Vec::new());
    let mut first = true;
    while scan.element(&mut first)? {
        let byte = match scan.kind()? {
            Kind::Number => scan
                .value()?
                .filter(|digits| digits.bytes().all(|byte| byte.is_ascii_digit()))
                .and_then(|digits| digits.parse::<u8>().ok()),
            _ => {
                scan.value()?;
                None
            }
        };
        match (byte, bytes.as_mut()) {
            (Some(byte), Some(bytes)) => bytes.push(byte),
            _ => bytes = None,
        }
    }
    Ok(bytes)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_name_is_the_one_from_bytes_makes_in_any_case() {
        let names = [
            "accept",
            "accept-encoding",
            "accept-language",
            "authorization",
            "content-length",
            "content-type",
            "cookie",
            "host",
            "origin",
            "referer",
            "user-agent",
            "x-amzn-trace-id",
            "x-forwarded-for",
            "x-forwarded-port",
            "x-forwarded-proto",
            "x-amzn-tls-cipher-suite",
            "x-amzn-tls-version",
            "via",
            "x-amz-cf-id",
            "cloudfront-viewer-country",
            "x-custom",
        ];
        let title = |name: &str| {
            name.split('-')
                .map(|word| {
                    let mut chars = word.chars();
                    chars
                        .next()
                        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join("-")
        };
        for lower in names {
            for name in [lower.to_owned(), title(lower), lower.to_ascii_uppercase()] {
                let expected = HeaderName::from_bytes(name.as_bytes()).expect("a header name");
                let name_read = header_name(&name).expect("a header name");
                assert_eq!(name_read, expected, "{name}");
                assert_eq!(name_read.as_str(), lower, "{name}");
            }
        }
        assert!(header_name("bad name").is_err());
    }
}
