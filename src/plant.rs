//! The plant as a client sends it (`NewPlant`) and as we answer with it
//! (`Plant`). Parsing turns the raw body into domain types that cannot hold
//! an invalid value, so nothing after this module checks a bound again.

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The largest accepted body, in bytes after any base64 decoding; checked
/// before parsing (`handler.rs`), so a larger one never reaches the parser.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// The longest accepted `name`, in Unicode characters.
pub const NAME_MAX_CHARS: usize = 256;
/// The longest accepted `tag`, in Unicode characters.
pub const TAG_MAX_CHARS: usize = 64;

/// The client-chosen identifier: any `i64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlantId(i64);

impl PlantId {
    pub fn get(self) -> i64 {
        self.0
    }
}

impl From<i64> for PlantId {
    fn from(id: i64) -> Self {
        Self(id)
    }
}

impl fmt::Display for PlantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A plant's name: 1 to 256 characters, not only whitespace, no control
/// characters. Kept exactly as sent: trimming would make a retry with the
/// same body look like different content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantName(String);

/// A plant's type: 1 to 64 characters, same character rules as the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantTag(String);

impl PlantName {
    pub fn parse(value: String) -> Result<Self, BodyError> {
        check_text("name", &value, NAME_MAX_CHARS).map(|()| Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PlantTag {
    pub fn parse(value: String) -> Result<Self, BodyError> {
        check_text("tag", &value, TAG_MAX_CHARS).map(|()| Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn check_text(field: &'static str, value: &str, max_chars: usize) -> Result<(), BodyError> {
    let (chars, control, blank) = if value.is_ascii() {
        // What names nearly always are: a byte is a character.
        let bytes = value.as_bytes();
        (
            bytes.len(),
            bytes.iter().any(|&b| is_forbidden_control(char::from(b))),
            bytes.iter().all(|&b| char::from(b).is_whitespace()),
        )
    } else {
        // One pass for the three checks, which are reported in this order.
        let (mut chars, mut control, mut blank) = (0, false, true);
        for c in value.chars() {
            chars += 1;
            control |= is_forbidden_control(c);
            blank &= c.is_whitespace();
        }
        (chars, control, blank)
    };
    if chars == 0 || chars > max_chars {
        return Err(BodyError::OutOfBounds {
            field,
            bound: Bound::Length { max_chars },
        });
    }
    if control {
        return Err(BodyError::OutOfBounds {
            field,
            bound: Bound::NoControlCharacters,
        });
    }
    if blank {
        return Err(BodyError::OutOfBounds {
            field,
            bound: Bound::NotOnlyWhitespace,
        });
    }
    Ok(())
}

/// The contract forbids C0 controls and DEL; C1 controls are left alone
/// because they occur in legitimately transcoded text.
fn is_forbidden_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}')
}

/// A valid request to create a plant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPlant {
    pub id: PlantId,
    pub name: PlantName,
    pub tag: Option<PlantTag>,
}

/// Why a body is not a valid `NewPlant`; `error.rs` gives each its `error` code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    Empty,
    /// Flagged `isBase64Encoded` by a direct invoke, but not base64.
    NotBase64,
    NotJson(String),
    NotAnObject,
    DuplicateField(String),
    UnknownField(String),
    MissingField(&'static str),
    WrongType {
        field: &'static str,
        expected: &'static str,
    },
    OutOfBounds {
        field: &'static str,
        bound: Bound,
    },
}

/// The bound a value broke, worded for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Int64,
    Length { max_chars: usize },
    NotOnlyWhitespace,
    NoControlCharacters,
    UnpairedSurrogate,
}

impl NewPlant {
    /// Parses a request body. Problems are reported one at a time, in a
    /// fixed order: JSON syntax and duplicate fields, unknown fields, missing
    /// fields, then `id`, `name` and `tag`.
    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        if body.is_empty() {
            return Err(BodyError::Empty);
        }
        if let Some(plant) = plain_plant(body) {
            return Ok(plant);
        }
        let fields: Fields<'_> = serde_json::from_slice(body).map_err(|err| match err.classify() {
            // Our visitor only refuses one thing: a document that is not an object.
            serde_json::error::Category::Data => BodyError::NotAnObject,
            _ => BodyError::NotJson(err.to_string()),
        })?;

        // Duplicate keys are refused, not resolved: parsers disagree on which
        // one wins, and a proxy in front of us might have read the other one.
        if let Some(key) = fields.duplicate {
            return Err(BodyError::DuplicateField(key));
        }
        if let Some(key) = fields.unknown {
            return Err(BodyError::UnknownField(key));
        }
        let id = fields.id.ok_or(BodyError::MissingField("id"))?;
        let name = fields.name.ok_or(BodyError::MissingField("name"))?;

        Ok(Self {
            id: parse_id(id)?,
            name: PlantName::parse(parse_string("name", name)?)?,
            tag: fields
                .tag
                .map(|tag| parse_string("tag", tag).and_then(PlantTag::parse))
                .transpose()?,
        })
    }
}

/// Reads `id` from its literal text, because a float such as `1.0` or `1e3`
/// and an integer beyond `i64` must be told apart from an in-range integer,
/// and `serde_json::Value` would have rounded them already.
fn parse_id(raw: &RawValue) -> Result<PlantId, BodyError> {
    let text = raw.get();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BodyError::WrongType {
            field: "id",
            expected: "an integer",
        });
    }
    text.parse().map(PlantId).map_err(|_| BodyError::OutOfBounds {
        field: "id",
        bound: Bound::Int64,
    })
}

fn parse_string(field: &'static str, raw: &RawValue) -> Result<String, BodyError> {
    // The syntax was checked already: a JSON string with no escape is the
    // text between its quotes, as it is.
    let text = raw.get();
    if let Some(plain) = text
        .strip_prefix('"')
        .and_then(|text| text.strip_suffix('"'))
        .filter(|text| !text.contains('\\'))
    {
        return Ok(plain.to_owned());
    }
    serde_json::from_str(text).map_err(|_| {
        // The syntax was checked already, so a JSON string that does not
        // decode holds an unpaired surrogate escape such as "\ud800": it is
        // a string, but not Unicode text that any plant can be named with.
        if raw.get().starts_with('"') {
            BodyError::OutOfBounds {
                field,
                bound: Bound::UnpairedSurrogate,
            }
        } else {
            BodyError::WrongType {
                field,
                expected: "a string",
            }
        }
    })
}

/// A body as clients nearly always send it, read in one pass: an object
/// of `id` as an integer and `name` and `tag` as strings without escapes,
/// each at most once. The plant only when the body is such an object and
/// the plant is valid, which is exactly when serde_json's parse gives the
/// same plant; anything else is left to that parse, which refuses or reads
/// it as it always has.
fn plain_plant(body: &[u8]) -> Option<NewPlant> {
    // Outside its strings a JSON text is ASCII: the strings are valid
    // UTF-8 exactly when the whole body is.
    let text = std::str::from_utf8(body).ok()?;
    let (mut id, mut name, mut tag) = (None, None, None);
    let mut rest = space(body).strip_prefix(b"{")?;
    loop {
        rest = space(rest);
        let (slot, value, len) = if let Some(after) = rest.strip_prefix(br#""id""#) {
            let value = colon(after)?;
            (&mut id, value, integer(value)?)
        } else if let Some(after) = rest.strip_prefix(br#""name""#) {
            let value = colon(after)?;
            (&mut name, value, string(value)?)
        } else if let Some(after) = rest.strip_prefix(br#""tag""#) {
            let value = colon(after)?;
            (&mut tag, value, string(value)?)
        } else {
            return None;
        };
        let start = body.len() - value.len();
        if slot.replace(text.get(start..start + len)?).is_some() {
            return None;
        }
        rest = match space(value.get(len..)?) {
            [b',', rest @ ..] => rest,
            [b'}', rest @ ..] if space(rest).is_empty() => break,
            _ => return None,
        };
    }
    // A string's text between its quotes is its value: it has no escape.
    let unquoted = |text: &str| text.get(1..text.len() - 1).map(str::to_owned);
    Some(NewPlant {
        id: PlantId(id?.parse().ok()?),
        name: PlantName::parse(unquoted(name?)?).ok()?,
        tag: match tag {
            Some(tag) => Some(PlantTag::parse(unquoted(tag)?).ok()?),
            None => None,
        },
    })
}

/// `bytes` after JSON's whitespace.
fn space(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\n' | b'\r', rest @ ..] = bytes {
        bytes = rest;
    }
    bytes
}

/// What follows a member's `:`.
fn colon(bytes: &[u8]) -> Option<&[u8]> {
    match space(bytes) {
        [b':', rest @ ..] => Some(space(rest)),
        _ => None,
    }
}

/// The length of the integer `bytes` begin with, in JSON's form: an
/// optional `-`, then `0` or digits that do not begin with `0`. What
/// follows it must be `,`, `}` or whitespace (no fraction, no exponent),
/// which the caller checks.
fn integer(bytes: &[u8]) -> Option<usize> {
    let sign = usize::from(bytes.first() == Some(&b'-'));
    let digits = bytes.get(sign..)?;
    let len = digits
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    match digits {
        [] | [b'0', b'0'..=b'9', ..] => None,
        _ if len == 0 => None,
        _ => Some(sign + len),
    }
}

/// The length of the string `bytes` begin with, quotes included, when it
/// has no escape. A control character, which JSON allows only escaped, is
/// left to the name's and tag's own checks, which refuse it.
fn string(bytes: &[u8]) -> Option<usize> {
    let [b'"', rest @ ..] = bytes else {
        return None;
    };
    let len = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    (rest.get(len) == Some(&b'"')).then_some(len + 2)
}

/// A JSON object's members as the checks need them: the three known
/// values unparsed and borrowed from the body, and the first duplicate and
/// the first unknown key in document order. A valid body costs no
/// allocation here; the keys seen of an unknown member are kept only to
/// find a duplicate among them.
#[derive(Default)]
struct Fields<'de> {
    id: Option<&'de RawValue>,
    name: Option<&'de RawValue>,
    tag: Option<&'de RawValue>,
    duplicate: Option<String>,
    unknown: Option<String>,
}

/// A member's key: one of ours, or any other (decoded, escapes and all).
enum Key {
    Id,
    Name,
    Tag,
    Other(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl Visitor<'_> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member's name")
            }

            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "id" => Key::Id,
                    "name" => Key::Name,
                    "tag" => Key::Tag,
                    other => Key::Other(other.to_owned()),
                })
            }
        }

        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;

        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
                let mut fields = Fields::default();
                let mut others = HashSet::new();
                while let Some((key, value)) = map.next_entry::<Key, &'de RawValue>()? {
                    let (slot, name) = match key {
                        Key::Id => (&mut fields.id, "id"),
                        Key::Name => (&mut fields.name, "name"),
                        Key::Tag => (&mut fields.tag, "tag"),
                        Key::Other(key) => {
                            if others.contains(&key) {
                                fields.duplicate.get_or_insert(key);
                            } else {
                                fields.unknown.get_or_insert_with(|| key.clone());
                                others.insert(key);
                            }
                            continue;
                        }
                    };
                    if slot.replace(value).is_some() {
                        fields.duplicate.get_or_insert_with(|| name.to_owned());
                    }
                }
                Ok(fields)
            }
        }

        deserializer.deserialize_map(FieldsVisitor)
    }
}

/// The 200 body: the plant as stored. The contract's `Plant` has no `id`,
/// and a plant without a tag has no `tag` member at all (never `null`).
/// Borrowed from the [`NewPlant`] it shows: written once, never kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plant<'a> {
    pub name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<&'a str>,
}

impl Plant<'_> {
    /// The 200 body: the bytes serde_json writes for it, written directly.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(20 + self.name.len() + self.tag.map_or(0, str::len));
        out.push_str(r#"{"name":"#);
        crate::json::push_string(&mut out, self.name);
        if let Some(tag) = self.tag {
            out.push_str(r#","tag":"#);
            crate::json::push_string(&mut out, tag);
        }
        out.push('}');
        out
    }
}

impl<'a> From<&'a NewPlant> for Plant<'a> {
    fn from(plant: &'a NewPlant) -> Self {
        Self {
            name: plant.name.as_str(),
            tag: plant.tag.as_ref().map(PlantTag::as_str),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<NewPlant, BodyError> {
        NewPlant::from_json(body.as_bytes())
    }

    fn out_of_bounds(field: &'static str, bound: Bound) -> Result<NewPlant, BodyError> {
        Err(BodyError::OutOfBounds { field, bound })
    }

    fn wrong_type(field: &'static str, expected: &'static str) -> Result<NewPlant, BodyError> {
        Err(BodyError::WrongType { field, expected })
    }

    #[test]
    fn a_plant_with_a_tag_parses_into_domain_types() {
        let plant = parse(r#"{"id": 7, "name": "Monstera", "tag": "aroid"}"#).unwrap();
        assert_eq!(plant.id, PlantId(7));
        assert_eq!(plant.name.as_str(), "Monstera");
        assert_eq!(plant.tag.as_ref().map(PlantTag::as_str), Some("aroid"));
    }

    #[test]
    fn a_plant_without_a_tag_has_none() {
        let plant = parse(r#"{"name":"Fern","id":-3}"#).unwrap();
        assert_eq!(plant.id, PlantId(-3));
        assert_eq!(plant.tag, None);
    }

    #[test]
    fn names_are_kept_exactly_as_sent() {
        let plant = parse(r#"{"id":1,"name":"  Aloe\u00e9 ","tag":" x"}"#).unwrap();
        assert_eq!(plant.name.as_str(), "  Aloeé ");
        assert_eq!(plant.tag.unwrap().as_str(), " x");
    }

    #[test]
    fn id_accepts_the_whole_int64_range() {
        for id in [i64::MIN, -1, 0, 1, i64::MAX] {
            let plant = parse(&format!(r#"{{"id":{id},"name":"n"}}"#)).unwrap();
            assert_eq!(plant.id.get(), id, "id {id}");
        }
        assert_eq!(parse(r#"{"id":-0,"name":"n"}"#).unwrap().id.get(), 0);
    }

    #[test]
    fn id_rejects_what_is_not_an_int64_integer() {
        let cases = [
            ("9223372036854775808", out_of_bounds("id", Bound::Int64)),
            ("-9223372036854775809", out_of_bounds("id", Bound::Int64)),
            (
                "123456789012345678901234567890",
                out_of_bounds("id", Bound::Int64),
            ),
            ("1.0", wrong_type("id", "an integer")),
            ("1e3", wrong_type("id", "an integer")),
            ("-1E2", wrong_type("id", "an integer")),
            ("\"42\"", wrong_type("id", "an integer")),
            ("null", wrong_type("id", "an integer")),
            ("true", wrong_type("id", "an integer")),
            ("[1]", wrong_type("id", "an integer")),
            ("{}", wrong_type("id", "an integer")),
        ];
        for (id, expected) in cases {
            assert_eq!(
                parse(&format!(r#"{{"id":{id},"name":"n"}}"#)),
                expected,
                "id {id}"
            );
        }
    }

    #[test]
    fn name_and_tag_must_be_strings() {
        for value in ["null", "1", "false", "[\"a\"]", "{\"a\":1}"] {
            let name = parse(&format!(r#"{{"id":1,"name":{value}}}"#));
            assert_eq!(name, wrong_type("name", "a string"), "name {value}");
            let tag = parse(&format!(r#"{{"id":1,"name":"n","tag":{value}}}"#));
            assert_eq!(tag, wrong_type("tag", "a string"), "tag {value}");
        }
    }

    #[test]
    fn name_length_is_checked_in_characters_on_both_sides() {
        let too_long_or_empty = Err(BodyError::OutOfBounds {
            field: "name",
            bound: Bound::Length { max_chars: 256 },
        });
        let cases = [
            (String::new(), too_long_or_empty.clone()),
            ("a".repeat(256), Ok(())),
            ("é".repeat(256), Ok(())),
            ("🌱".repeat(256), Ok(())),
            ("a".repeat(257), too_long_or_empty.clone()),
            ("é".repeat(257), too_long_or_empty),
        ];
        for (name, expected) in cases {
            let parsed = parse(&format!(r#"{{"id":1,"name":"{name}"}}"#)).map(|_| ());
            assert_eq!(parsed, expected, "name of {} chars", name.chars().count());
        }
    }

    #[test]
    fn tag_length_is_checked_in_characters_on_both_sides() {
        let length = Bound::Length { max_chars: 64 };
        assert!(parse(&format!(r#"{{"id":1,"name":"n","tag":"{}"}}"#, "ü".repeat(64))).is_ok());
        assert_eq!(
            parse(&format!(r#"{{"id":1,"name":"n","tag":"{}"}}"#, "ü".repeat(65))),
            out_of_bounds("tag", length)
        );
        assert_eq!(
            parse(r#"{"id":1,"name":"n","tag":""}"#),
            out_of_bounds("tag", length)
        );
    }

    #[test]
    fn control_characters_are_rejected_and_other_characters_are_not() {
        for escape in ["\\u0000", "\\u001f", "\\n", "\\t", "\\u007f"] {
            let name = parse(&format!(r#"{{"id":1,"name":"a{escape}b"}}"#));
            assert_eq!(
                name,
                out_of_bounds("name", Bound::NoControlCharacters),
                "name {escape}"
            );
            let tag = parse(&format!(r#"{{"id":1,"name":"n","tag":"{escape}"}}"#));
            assert_eq!(
                tag,
                out_of_bounds("tag", Bound::NoControlCharacters),
                "tag {escape}"
            );
        }
        for allowed in ["\\u0020x", "\\u0080", "\\u00a0x", "\\ud83c\\udf31"] {
            assert!(
                parse(&format!(r#"{{"id":1,"name":"{allowed}"}}"#)).is_ok(),
                "{allowed}"
            );
        }
    }

    #[test]
    fn unpaired_surrogate_escapes_are_out_of_bounds_and_pairs_are_fine() {
        for escape in ["\\ud800", "\\udbff", "\\udc00", "a\\udfffb", "\\udf31\\ud83c"] {
            let name = parse(&format!(r#"{{"id":1,"name":"{escape}"}}"#));
            assert_eq!(
                name,
                out_of_bounds("name", Bound::UnpairedSurrogate),
                "name {escape}"
            );
            let tag = parse(&format!(r#"{{"id":1,"name":"n","tag":"{escape}"}}"#));
            assert_eq!(
                tag,
                out_of_bounds("tag", Bound::UnpairedSurrogate),
                "tag {escape}"
            );
        }
        let pair = parse(r#"{"id":1,"name":"\ud83c\udf31"}"#).unwrap();
        assert_eq!(pair.name.as_str(), "🌱");
    }

    #[test]
    fn whitespace_only_values_are_rejected() {
        for blank in [" ", "   ", "\\u00a0", "\\u3000 "] {
            let name = parse(&format!(r#"{{"id":1,"name":"{blank}"}}"#));
            assert_eq!(
                name,
                out_of_bounds("name", Bound::NotOnlyWhitespace),
                "name {blank:?}"
            );
            let tag = parse(&format!(r#"{{"id":1,"name":"n","tag":"{blank}"}}"#));
            assert_eq!(
                tag,
                out_of_bounds("tag", Bound::NotOnlyWhitespace),
                "tag {blank:?}"
            );
        }
    }

    #[test]
    fn missing_fields_are_named() {
        assert_eq!(parse(r#"{"name":"n"}"#), Err(BodyError::MissingField("id")));
        assert_eq!(parse(r#"{"id":1}"#), Err(BodyError::MissingField("name")));
        assert_eq!(parse(r#"{}"#), Err(BodyError::MissingField("id")));
    }

    #[test]
    fn unknown_fields_are_named_even_when_valid_fields_are_present() {
        assert_eq!(
            parse(r#"{"id":1,"name":"n","colour":"red"}"#),
            Err(BodyError::UnknownField("colour".into()))
        );
        assert_eq!(
            parse(r#"{"id":1,"name":"n","Tag":"x"}"#),
            Err(BodyError::UnknownField("Tag".into()))
        );
    }

    #[test]
    fn duplicate_fields_are_refused_before_anything_else() {
        assert_eq!(
            parse(r#"{"zzz":1,"name":"a","name":"b"}"#),
            Err(BodyError::DuplicateField("name".into()))
        );
        assert_eq!(
            parse(r#"{"id":1,"id":1,"name":"a"}"#),
            Err(BodyError::DuplicateField("id".into()))
        );
    }

    #[test]
    fn bodies_that_are_not_a_json_object_are_refused() {
        assert_eq!(parse(""), Err(BodyError::Empty));
        for body in ["[]", "1", "\"x\"", "null", "[{\"id\":1,\"name\":\"n\"}]"] {
            assert_eq!(parse(body), Err(BodyError::NotAnObject), "{body}");
        }
        for body in [
            " ",
            "{",
            "{\"id\":1,\"name\":\"n\"",
            "{\"id\":1,}",
            "{} x",
            "{'id':1}",
        ] {
            assert!(matches!(parse(body), Err(BodyError::NotJson(_))), "{body}");
        }
        assert!(matches!(
            NewPlant::from_json(b"{\"id\":1,\"name\":\"\xff\"}"),
            Err(BodyError::NotJson(_))
        ));
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        // Field values are skipped without recursion, so depth cannot exhaust
        // the stack; a nested value is simply the wrong type.
        let deep = format!("{}{}", "[".repeat(8000), "]".repeat(8000));
        let body = format!(r#"{{"id":1,"name":"n","tag":{deep}}}"#);
        assert_eq!(parse(&body), wrong_type("tag", "a string"));
        assert_eq!(parse(&deep), Err(BodyError::NotAnObject));
        let unbalanced = format!(r#"{{"id":1,"name":"n","tag":{}}}"#, "[".repeat(8000));
        assert!(matches!(parse(&unbalanced), Err(BodyError::NotJson(_))));
    }

    /// The parser as it was before it borrowed from the body: every member
    /// collected, keys and values copied, duplicates found with a set.
    fn reference(body: &[u8]) -> Result<NewPlant, BodyError> {
        struct Members(Vec<(String, Box<RawValue>)>);
        impl<'de> Deserialize<'de> for Members {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Members;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a JSON object")
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                        let mut members = Vec::new();
                        while let Some(entry) = map.next_entry()? {
                            members.push(entry);
                        }
                        Ok(Members(members))
                    }
                }
                deserializer.deserialize_map(V)
            }
        }
        if body.is_empty() {
            return Err(BodyError::Empty);
        }
        let Members(members) = serde_json::from_slice(body).map_err(|err| match err.classify() {
            serde_json::error::Category::Data => BodyError::NotAnObject,
            _ => BodyError::NotJson(err.to_string()),
        })?;
        let mut seen = HashSet::new();
        if let Some((key, _)) = members.iter().find(|(key, _)| !seen.insert(key.as_str())) {
            return Err(BodyError::DuplicateField(key.clone()));
        }
        let (mut id, mut name, mut tag) = (None, None, None);
        for (key, value) in members {
            match key.as_str() {
                "id" => id = Some(value),
                "name" => name = Some(value),
                "tag" => tag = Some(value),
                _ => return Err(BodyError::UnknownField(key)),
            }
        }
        let id = id.ok_or(BodyError::MissingField("id"))?;
        let name = name.ok_or(BodyError::MissingField("name"))?;
        let string = |field, raw: Box<RawValue>| {
            serde_json::from_str::<String>(raw.get()).map_err(|_| string_error(field, &raw))
        };
        let id = parse_id(&id)?;
        let name = string("name", name)?;
        reference_text("name", &name, NAME_MAX_CHARS)?;
        let tag = tag
            .map(|tag| {
                let tag = string("tag", tag)?;
                reference_text("tag", &tag, TAG_MAX_CHARS).map(|()| PlantTag(tag))
            })
            .transpose()?;
        Ok(NewPlant {
            id,
            name: PlantName(name),
            tag,
        })
    }

    /// The former `check_text`: a pass over the characters per check.
    fn reference_text(field: &'static str, value: &str, max_chars: usize) -> Result<(), BodyError> {
        let chars = value.chars().count();
        let bound = if chars == 0 || chars > max_chars {
            Bound::Length { max_chars }
        } else if value.chars().any(|c| matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}')) {
            Bound::NoControlCharacters
        } else if value.chars().all(char::is_whitespace) {
            Bound::NotOnlyWhitespace
        } else {
            return Ok(());
        };
        Err(BodyError::OutOfBounds { field, bound })
    }

    fn string_error(field: &'static str, raw: &RawValue) -> BodyError {
        if raw.get().starts_with('"') {
            BodyError::OutOfBounds {
                field,
                bound: Bound::UnpairedSurrogate,
            }
        } else {
            BodyError::WrongType {
                field,
                expected: "a string",
            }
        }
    }

    /// Bodies made of keys that are ours, others, escaped and repeated, and
    /// values of every kind, with stray bytes around them.
    fn bodies() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        const KEYS: &[&str] = &[
            r#""id""#,
            r#""name""#,
            r#""tag""#,
            r#""zzz""#,
            r#""Tag""#,
            r#""i\u0064""#,
            r#""n\u0061me""#,
            r#""""#,
            r#""\ud800""#,
        ];
        const VALUES: &[&str] = &[
            "1",
            "-0",
            "-9223372036854775808",
            "9223372036854775808",
            "1.0",
            "1e3",
            r#""Monstera""#,
            r#"" ""#,
            r#""""#,
            r#""a\nb""#,
            r#""\ud800""#,
            r#""\ud83c\udf31""#,
            r#""\u00e9""#,
            r#"" \u3000""#,
            "null",
            "true",
            "[1]",
            "{}",
            r#"{"a":[1,{"b":2}]}"#,
            "[",
            "01",
            "\"ÿ\"",
        ];
        const AROUND: &[&str] = &[" ", "x", ",", "{", "}", "[]"];
        const INTEGERS: &[&str] = &["1", "-0", "-9223372036854775808", "9223372036854775807"];
        const STRINGS: &[&str] = &[
            r#""Monstera""#,
            r#"" ""#,
            r#""""#,
            r#""a\nb""#,
            r#""\ud800""#,
            r#""\ud83c\udf31""#,
            r#""\u00e9""#,
            r#"" \u3000""#,
            "\"ÿ\"",
            r#""\u007f""#,
        ];
        // Mostly values of the member's own kind, so that many bodies get
        // past the syntax to the checks of each field.
        let value = |kind: &'static [&'static str]| prop_oneof![3 => proptest::sample::select(kind), 1 => proptest::sample::select(VALUES)];
        let ours = |key: &'static str, kind| {
            proptest::option::weighted(0.9, value(kind)).prop_map(move |value| (key, value))
        };
        let others = proptest::collection::vec(
            (proptest::sample::select(KEYS), proptest::sample::select(VALUES)),
            0..3,
        );
        let members = (
            ours(r#""id""#, INTEGERS),
            ours(r#""name""#, STRINGS),
            ours(r#""tag""#, STRINGS),
            others,
            proptest::bool::weighted(0.2),
        )
            .prop_map(|(id, name, tag, others, extra)| {
                let others = if extra { others } else { Vec::new() };
                [id, name, tag]
                    .into_iter()
                    .filter_map(|(key, value)| value.map(|value| (key, value)))
                    .chain(others)
                    .map(|(key, value)| format!("{key}:{value}"))
                    .collect::<Vec<_>>()
            })
            .prop_shuffle();
        // Mostly nothing around the members, sometimes a stray byte.
        let around = || (0..AROUND.len() * 8).prop_map(|i| AROUND.get(i).copied().unwrap_or(""));
        (around(), members, around(), proptest::bool::weighted(0.9)).prop_map(
            |(before, members, after, object)| {
                let (open, close) = if object { ("{", "}") } else { ("[", "]") };
                format!("{before}{open}{}{close}{after}", members.join(","))
            },
        )
    }

    /// A body with whitespace, JSON's and other, put in at the places given.
    fn spaced(body: &str, spaces: &[(usize, &str)]) -> String {
        let mut spaced = body.to_owned();
        for &(at, space) in spaces {
            let at = at % (spaced.len() + 1);
            if spaced.is_char_boundary(at) {
                spaced.insert_str(at, space);
            }
        }
        spaced
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        #[test]
        fn the_parser_answers_as_the_one_that_copied_every_member(body in bodies()) {
            proptest::prop_assert_eq!(parse(&body), reference(body.as_bytes()), "{}", body);
        }

        #[test]
        fn the_parser_answers_as_the_one_that_copied_every_member_whitespace_anywhere(
            body in bodies(),
            spaces in proptest::collection::vec(
                (0..80_usize, proptest::sample::select(&[" ", "\t", "\n", "\r", "\r\n  ", "\u{c}", "\u{a0}", "\u{1}"][..])),
                0..6,
            ),
        ) {
            let body = spaced(&body, &spaces);
            proptest::prop_assert_eq!(parse(&body), reference(body.as_bytes()), "{:?}", body);
        }
    }

    #[test]
    fn bodies_as_clients_send_them_are_read_in_one_pass() {
        for body in [
            r#"{"id":40000001,"name":"Monstera deliciosa","tag":"aroid"}"#,
            r#"{"name":"Fern","id":-3}"#,
            "{\"tag\":\"x\",\"id\":0,\"name\":\"ü🌱 \u{85}\"}",
            "{\"id\": 1, \"name\": \"Aloe\"}",
            " \r\n{ \"id\" :\t-9223372036854775808 ,\n  \"name\" : \"a\" } \n",
        ] {
            let plant = plain_plant(body.as_bytes());
            assert!(plant.is_some(), "{body}");
            assert_eq!(plant, reference(body.as_bytes()).ok(), "{body}");
        }
    }

    #[test]
    fn the_response_plant_has_no_id_and_no_null_tag() {
        let with_tag = parse(r#"{"id":1,"name":"Fern","tag":"pteridophyte"}"#).unwrap();
        let without = parse(r#"{"id":2,"name":"Fern"}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&Plant::from(&with_tag)).unwrap(),
            r#"{"name":"Fern","tag":"pteridophyte"}"#
        );
        assert_eq!(
            serde_json::to_string(&Plant::from(&without)).unwrap(),
            r#"{"name":"Fern"}"#
        );
    }

    #[test]
    fn the_answer_is_the_bytes_serde_json_writes() {
        let names = ["Fern", "a \"quoted\" \\ name", "ü🌱\u{7f}\u{85}", " "];
        for name in names {
            for tag in [None, Some("pteridophyte"), Some("\\"), Some("tag \"x\"")] {
                let plant = Plant { name, tag };
                assert_eq!(
                    plant.to_json(),
                    serde_json::to_string(&plant).unwrap(),
                    "{plant:?}"
                );
            }
        }
    }

    #[test]
    fn messages_name_the_field_and_the_bound() {
        let cases = [
            (r#"{"id":1}"#, "missing required field `name`"),
            (r#"{"id":"1","name":"n"}"#, "field `id` must be an integer"),
            (r#"{"id":1,"name":7}"#, "field `name` must be a string"),
            (
                r#"{"id":1,"name":""}"#,
                "field `name` must be 1 to 256 characters",
            ),
            (
                r#"{"id":1,"name":"n","tag":""}"#,
                "field `tag` must be 1 to 64 characters",
            ),
            (
                r#"{"id":1,"name":" "}"#,
                "field `name` must not be only whitespace",
            ),
            (
                r#"{"id":1,"name":"\u0000"}"#,
                "field `name` must not contain control characters",
            ),
            (
                r#"{"id":1,"name":"\ud800"}"#,
                "field `name` must not contain unpaired surrogate escapes",
            ),
            (
                r#"{"id":9223372036854775808,"name":"n"}"#,
                "field `id` must be an integer from -9223372036854775808 to 9223372036854775807",
            ),
            (r#"{"id":1,"name":"n","colour":"red"}"#, "unknown field `colour`"),
            (r#"{"id":1,"name":"n","name":"m"}"#, "duplicate field `name`"),
            ("[]", "request body must be a JSON object"),
            ("", "request body is empty"),
        ];
        for (body, message) in cases {
            assert_eq!(parse(body).unwrap_err().to_string(), message, "{body}");
        }
    }
}
