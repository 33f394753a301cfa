//! The body parser and the response: JSON written every way the grammar
//! allows, round trips through the parser, the handler and `Plant`, and each
//! bound at its edge.

use super::*;

// ---- JSON text, written by hand so that every spelling gets generated ----

/// A tiny deterministic stream of choices from a generated seed, for the
/// spelling decisions (escape this character or not) that need no shrinking.
struct Choices(u64);

impl Choices {
    fn one_in(&mut self, n: u64) -> bool {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33).is_multiple_of(n)
    }
}

/// `text` as a JSON string, some characters spelled as `\uXXXX` escapes
/// (surrogate pairs beyond the BMP, hex in either case) or short escapes.
fn json_string(text: &str, choices: &mut Choices) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\t' => Some("\\t"),
            '\r' => Some("\\r"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '/' if choices.one_in(2) => Some("\\/"),
            _ => None,
        };
        match short {
            Some(escape) if !choices.one_in(3) => out.push_str(escape),
            _ if short.is_some() || c < ' ' || choices.one_in(5) => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    if choices.one_in(2) {
                        write!(out, "\\u{unit:04x}").expect("writing to a String");
                    } else {
                        write!(out, "\\u{unit:04X}").expect("writing to a String");
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Insignificant JSON whitespace: nothing, or a few of the four characters.
fn json_space(choices: &mut Choices) -> &'static str {
    const SPACES: [&str; 6] = ["", "", " ", "\n  ", "\t", "\r\n "];
    SPACES[(0..SPACES.len()).find(|_| choices.one_in(3)).unwrap_or(0)]
}

/// An object with these members (raw JSON values), spelled with random
/// whitespace and escaped keys.
fn json_object(members: &[(&str, String)], seed: u64) -> String {
    let mut choices = Choices(seed);
    let mut out = String::new();
    out.push_str(json_space(&mut choices));
    out.push('{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(json_space(&mut choices));
        out.push_str(&json_string(key, &mut choices));
        out.push_str(json_space(&mut choices));
        out.push(':');
        out.push_str(json_space(&mut choices));
        out.push_str(value);
        out.push_str(json_space(&mut choices));
    }
    if members.is_empty() {
        out.push_str(json_space(&mut choices));
    }
    out.push('}');
    out.push_str(json_space(&mut choices));
    out
}

fn is_forbidden_control(c: char) -> bool {
    c < ' ' || c == '\u{7f}'
}

/// Unicode `White_Space` characters that are not controls (those are
/// refused as controls first).
const BLANKS: &[char] = &[
    ' ', '\u{85}', '\u{a0}', '\u{1680}', '\u{2000}', '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}',
    '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}', '\u{200a}', '\u{2028}', '\u{2029}',
    '\u{202f}', '\u{205f}', '\u{3000}',
];

/// Any character the contract allows in a name or tag, biased towards the
/// interesting ones: blanks, quotes and backslashes, 1- to 4-byte UTF-8.
fn allowed_char() -> impl Strategy<Value = char> {
    prop_oneof![
        // C0 controls and DEL become C1 controls and U+00FF: no rejects.
        4 => any::<char>().prop_map(|c| if is_forbidden_control(c) { char::from(c as u8 | 0x80) } else { c }),
        1 => prop::sample::select(BLANKS),
        1 => prop::sample::select(&['"', '\\', '/', '\u{80}', '\u{9f}', '\u{fffd}', '\u{feff}', '\u{10ffff}'][..]),
        1 => prop::sample::select(&['a', 'é', '€', '🌱'][..]),
    ]
}

/// A valid name or tag: 1 to `max` allowed characters, not only blanks.
fn valid_text(max: usize) -> impl Strategy<Value = String> {
    vec(allowed_char(), 1..=max)
        .prop_filter("only whitespace", |chars| {
            !chars.iter().all(|c| c.is_whitespace())
        })
        .prop_map(String::from_iter)
}

#[derive(Debug, Clone)]
struct ValidDocument {
    id: i64,
    name: String,
    tag: Option<String>,
    text: String,
}

fn valid_document() -> impl Strategy<Value = ValidDocument> {
    (
        any::<i64>(),
        valid_text(NAME_MAX_CHARS),
        proptest::option::of(valid_text(TAG_MAX_CHARS)),
        any::<u64>(),
    )
        .prop_flat_map(|(id, name, tag, seed)| {
            let mut choices = Choices(seed);
            let mut members = vec![("id", id.to_string()), ("name", json_string(&name, &mut choices))];
            if let Some(tag) = &tag {
                members.push(("tag", json_string(tag, &mut choices)));
            }
            (Just((id, name, tag, seed)), Just(members).prop_shuffle())
        })
        .prop_map(|((id, name, tag, seed), members)| ValidDocument {
            text: json_object(&members, seed),
            id,
            name,
            tag,
        })
}

// ---- the body parser: round trips -----------------------------------------

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn a_valid_document_parses_to_exactly_what_was_sent(doc in valid_document()) {
        let plant = NewPlant::from_json(doc.text.as_bytes());
        prop_assert!(plant.is_ok(), "{:?} -> {:?}", doc.text, plant);
        let plant = plant.unwrap();
        prop_assert_eq!(plant.id.get(), doc.id);
        prop_assert_eq!(plant.name.as_str(), doc.name.as_str());
        prop_assert_eq!(plant.tag.as_ref().map(|tag| tag.as_str()), doc.tag.as_deref());
    }

    #[test]
    fn the_plant_response_is_exactly_the_name_and_tag_and_parses_back_to_the_same_plant(
        doc in valid_document()
    ) {
        let plant = NewPlant::from_json(doc.text.as_bytes()).expect("a valid document");
        let response = serde_json::to_string(&Plant::from(&plant)).expect("a Plant serializes");
        let mut value: Value = serde_json::from_str(&response).expect("the response is JSON");
        let expected = match &doc.tag {
            Some(tag) => json!({ "name": doc.name, "tag": tag }),
            None => json!({ "name": doc.name }),
        };
        prop_assert_eq!(&value, &expected);
        // The response plus the id is a request for the very same plant.
        value["id"] = json!(doc.id);
        prop_assert_eq!(NewPlant::from_json(value.to_string().as_bytes()), Ok(plant));
    }
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn a_valid_document_sent_to_the_function_is_stored_echoed_and_replayed(doc in valid_document()) {
        let store = MemoryStore::default();
        let app = App::new(store.clone(), Authenticator::with_static_tokens(&["t"]));
        let request = || {
            Event::load("create-http-api.json")
                .header("authorization", Some("Bearer t"))
                .body(&doc.text)
                .request()
        };
        let runtime = runtime();
        let first = runtime.block_on(app.handle(request()));
        let retry = runtime.block_on(app.handle(request()));

        prop_assert_eq!(first.status(), 200);
        let body: Value = serde_json::from_slice(first.body().as_ref()).expect("JSON");
        let expected = match &doc.tag {
            Some(tag) => json!({ "name": doc.name, "tag": tag }),
            None => json!({ "name": doc.name }),
        };
        prop_assert_eq!(body, expected);
        prop_assert_eq!((retry.status(), retry.body().as_ref()), (first.status(), first.body().as_ref()));
        let stored = store.get(doc.id.into()).expect("stored");
        prop_assert_eq!(stored.name.as_str(), doc.name.as_str());
        prop_assert_eq!(stored.tag.as_ref().map(|tag| tag.as_str()), doc.tag.as_deref());
        prop_assert_eq!(store.len(), 1);
    }
}

// ---- the body parser against a model of the contract ----------------------

/// A JSON value, kept as the model needs it: numbers as their literal text.
#[derive(Debug, Clone)]
enum Json {
    Null,
    Bool(bool),
    Integer(String),
    Float(String),
    Str(String),
    /// A string with an unpaired UTF-16 surrogate escape (`"\ud800"`):
    /// valid JSON syntax, but no Unicode text.
    LoneSurrogate(u16),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn write(&self, choices: &mut Choices) -> String {
        match self {
            Self::Null => "null".to_owned(),
            Self::Bool(b) => b.to_string(),
            Self::Integer(text) | Self::Float(text) => text.clone(),
            Self::Str(s) => json_string(s, choices),
            Self::LoneSurrogate(unit) => format!("\"x\\u{unit:04x}\""),
            Self::Array(items) => {
                let items: Vec<String> = items.iter().map(|item| item.write(choices)).collect();
                format!("[{}]", items.join(","))
            }
            Self::Object(members) => {
                let members: Vec<(&str, String)> = members
                    .iter()
                    .map(|(key, value)| (key.as_str(), value.write(choices)))
                    .collect();
                json_object(&members, choices.0)
            }
        }
    }
}

fn any_integer_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<i128>().prop_map(|n| n.to_string()),
        Just("-0".to_owned()),
        "-?[1-9][0-9]{19,400}",
    ]
}

fn any_float_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::to_string(&f).expect("a finite float")),
        "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,5})?[eE][+-]?[0-9]{1,4}",
        "-?(0|[1-9][0-9]{0,20})\\.[0-9]{1,5}",
    ]
}

/// Strings near the bounds: valid ones, too long, empty, blank, with controls.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        valid_text(TAG_MAX_CHARS),
        vec(allowed_char(), 0..300).prop_map(String::from_iter),
        vec(prop::sample::select(BLANKS), 1..70).prop_map(String::from_iter),
        vec(any::<char>(), 0..8).prop_map(String::from_iter),
    ]
}

fn any_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any_integer_text().prop_map(Json::Integer),
        any_float_text().prop_map(Json::Float),
        any_text().prop_map(Json::Str),
        (0xd800..=0xdfff_u16).prop_map(Json::LoneSurrogate),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Json::Array),
            vec((any_key(), inner), 0..4).prop_map(Json::Object),
        ]
    })
}

fn any_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(&["id", "name", "tag"][..]).prop_map(str::to_owned),
        1 => prop::sample::select(&["Id", "NAME", "tag ", "", "colour", "id\u{0}"][..]).prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

/// Bodies that are mostly objects with the right keys and values of every
/// type, so that each rule gets exercised, not only "not an object".
fn any_body() -> impl Strategy<Value = Json> {
    let value = prop_oneof![
        2 => any_integer_text().prop_map(Json::Integer),
        2 => any_text().prop_map(Json::Str),
        1 => any_json(),
        1 => Just(Json::LoneSurrogate(0xd800)),
    ];
    prop_oneof![
        6 => vec((any_key(), value), 0..5).prop_map(Json::Object),
        1 => any_json(),
    ]
}

/// What the contract says about a body, rule by rule, in its order: JSON
/// syntax and duplicate fields, unknown fields, missing fields, then `id`,
/// `name` and `tag`.
fn model(body: &Json) -> Result<(i64, String, Option<String>), BodyError> {
    let Json::Object(members) = body else {
        return Err(BodyError::NotAnObject);
    };
    for (i, (key, _)) in members.iter().enumerate() {
        if members[..i].iter().any(|(earlier, _)| earlier == key) {
            return Err(BodyError::DuplicateField(key.clone()));
        }
    }
    if let Some((key, _)) = members
        .iter()
        .find(|(key, _)| !["id", "name", "tag"].contains(&key.as_str()))
    {
        return Err(BodyError::UnknownField(key.clone()));
    }
    let field = |name: &str| {
        members
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    };
    let id = field("id").ok_or(BodyError::MissingField("id"))?;
    let name = field("name").ok_or(BodyError::MissingField("name"))?;
    let id = match id {
        Json::Integer(text) => text.parse::<i64>().map_err(|_| BodyError::OutOfBounds {
            field: "id",
            bound: Bound::Int64,
        })?,
        _ => {
            return Err(BodyError::WrongType {
                field: "id",
                expected: "an integer",
            });
        }
    };
    let text = |field: &'static str, value: &Json, max_chars: usize| match value {
        Json::Str(s) => {
            let chars = s.chars().count();
            let bound = if chars == 0 || chars > max_chars {
                Some(Bound::Length { max_chars })
            } else if s.chars().any(is_forbidden_control) {
                Some(Bound::NoControlCharacters)
            } else if s.chars().all(char::is_whitespace) {
                Some(Bound::NotOnlyWhitespace)
            } else {
                None
            };
            match bound {
                Some(bound) => Err(BodyError::OutOfBounds { field, bound }),
                None => Ok(s.clone()),
            }
        }
        Json::LoneSurrogate(_) => Err(BodyError::OutOfBounds {
            field,
            bound: Bound::UnpairedSurrogate,
        }),
        _ => Err(BodyError::WrongType {
            field,
            expected: "a string",
        }),
    };
    let name = text("name", name, NAME_MAX_CHARS)?;
    let tag = field("tag")
        .map(|tag| text("tag", tag, TAG_MAX_CHARS))
        .transpose()?;
    Ok((id, name, tag))
}

fn parsed(body: &[u8]) -> Result<(i64, String, Option<String>), BodyError> {
    NewPlant::from_json(body).map(|plant| {
        (
            plant.id.get(),
            plant.name.as_str().to_owned(),
            plant.tag.map(|tag| tag.as_str().to_owned()),
        )
    })
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn the_parser_gives_the_contract_verdict_on_any_json_body(body in any_body(), seed in any::<u64>()) {
        let text = body.write(&mut Choices(seed));
        let verdict = parsed(text.as_bytes());
        // A lone scalar that serde_json cannot represent (a number beyond
        // f64, a lone surrogate) is reported as invalid JSON rather than as
        // "not an object": the same code, 40001, another message.
        let unrepresentable = matches!(body, Json::Integer(_) | Json::Float(_) | Json::LoneSurrogate(_));
        if !(unrepresentable && matches!(verdict, Err(BodyError::NotJson(_)))) {
            prop_assert_eq!(verdict, model(&body), "{}", text);
        }
    }

    #[test]
    fn the_parser_never_panics_on_any_bytes(bytes in vec(any::<u8>(), 0..64)) {
        let _ = NewPlant::from_json(&bytes);
    }

    /// Damaged valid documents: never a panic, and whatever is still
    /// accepted reads exactly as serde_json's own `Value` reads it, so no
    /// other JSON parser in front of us can see a different plant.
    #[test]
    fn a_damaged_document_is_refused_or_read_exactly_as_serde_json_reads_it(
        doc in valid_document(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
    ) {
        let mut bytes = doc.text.into_bytes();
        for (at, byte, kind) in edits {
            let at = at.index(bytes.len() + 1);
            match kind {
                0 => bytes.insert(at, byte),
                1 if at < bytes.len() => { bytes.remove(at); }
                _ if at < bytes.len() => bytes[at] = byte,
                _ => bytes.push(byte),
            }
        }
        if let Ok((id, name, tag)) = parsed(&bytes) {
            let value: Value = serde_json::from_slice(&bytes).expect("accepted, so valid JSON");
            prop_assert_eq!(value["id"].as_i64(), Some(id));
            prop_assert_eq!(value["name"].as_str(), Some(name.as_str()));
            prop_assert_eq!(value.get("tag").map(|tag| tag.as_str().expect("a string")), tag.as_deref());
        }
    }
}

// ---- every bound, on both sides --------------------------------------------

fn body_with(field: &str, value: &str) -> String {
    match field {
        "name" => format!(r#"{{"id":1,"name":{value}}}"#),
        _ => format!(r#"{{"id":1,"name":"n","tag":{value}}}"#),
    }
}

fn out_of_bounds(field: &'static str, bound: Bound) -> Result<(i64, String, Option<String>), BodyError> {
    Err(BodyError::OutOfBounds { field, bound })
}

fn field_and_max() -> impl Strategy<Value = (&'static str, usize)> {
    prop::sample::select(&[("name", NAME_MAX_CHARS), ("tag", TAG_MAX_CHARS)][..])
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_text_of_exactly_the_maximum_characters_is_accepted_and_one_more_is_refused(
        (field, max) in field_and_max(),
        chars in vec(allowed_char(), NAME_MAX_CHARS + 1),
        visible in prop::sample::select(&['x', 'é', '€', '🌱'][..]),
        seed in any::<u64>(),
    ) {
        let mut text: String = chars[..max - 1].iter().collect();
        text.push(visible);
        let at_max = body_with(field, &json_string(&text, &mut Choices(seed)));
        prop_assert!(parsed(at_max.as_bytes()).is_ok(), "{} chars: {:?}", max, parsed(at_max.as_bytes()));

        text.push(chars[max]);
        let beyond = body_with(field, &json_string(&text, &mut Choices(seed)));
        prop_assert_eq!(parsed(beyond.as_bytes()), out_of_bounds(field, Bound::Length { max_chars: max }));
    }

    #[test]
    fn a_blank_text_is_refused_and_a_too_long_one_is_refused_for_its_length_first(
        (field, max) in field_and_max(),
        blanks in vec(prop::sample::select(BLANKS), 1..=NAME_MAX_CHARS + 2),
    ) {
        let text: String = blanks.iter().collect();
        let expected = if blanks.len() > max {
            Bound::Length { max_chars: max }
        } else {
            Bound::NotOnlyWhitespace
        };
        let body = body_with(field, &json_string(&text, &mut Choices(0)));
        prop_assert_eq!(parsed(body.as_bytes()), out_of_bounds(field, expected));
    }

    #[test]
    fn a_forbidden_control_anywhere_is_refused_escaped_and_invalid_json_raw(
        (field, max) in field_and_max(),
        text in valid_text(TAG_MAX_CHARS - 1),
        at in any::<prop::sample::Index>(),
        control in prop::sample::select((0..=0x1f_u8).chain([0x7f]).map(char::from).collect::<Vec<_>>()),
        seed in any::<u64>(),
    ) {
        let mut chars: Vec<char> = text.chars().collect();
        chars.insert(at.index(chars.len() + 1), control);
        let text: String = chars.iter().collect();
        prop_assert!(text.chars().count() <= max);

        let escaped = body_with(field, &json_string(&text, &mut Choices(seed)));
        prop_assert_eq!(parsed(escaped.as_bytes()), out_of_bounds(field, Bound::NoControlCharacters));

        // Raw, only DEL is legal JSON; the C0 controls make the body invalid.
        let raw = body_with(field, &format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\"")));
        match parsed(raw.as_bytes()) {
            Err(BodyError::NotJson(_)) => prop_assert_ne!(control, '\u{7f}'),
            other => {
                prop_assert_eq!(control, '\u{7f}');
                prop_assert_eq!(other, out_of_bounds(field, Bound::NoControlCharacters));
            }
        }
    }

    #[test]
    fn every_int64_is_accepted_as_id(id in any::<i64>()) {
        let body = format!(r#"{{"id":{id},"name":"n"}}"#);
        prop_assert_eq!(parsed(body.as_bytes()).map(|(id, _, _)| id), Ok(id));
    }

    #[test]
    fn an_integer_beyond_int64_is_refused_as_out_of_bounds(
        beyond in prop_oneof![
            (i128::from(i64::MAX) + 1..=i128::MAX),
            (i128::MIN..=i128::from(i64::MIN) - 1),
        ].prop_map(|n| n.to_string()),
        huge in "-?[1-9][0-9]{19,400}",
    ) {
        prop_assume!(huge.parse::<i64>().is_err());
        for id in [beyond, huge] {
            let body = format!(r#"{{"id":{id},"name":"n"}}"#);
            prop_assert_eq!(parsed(body.as_bytes()), out_of_bounds("id", Bound::Int64), "{}", id);
        }
    }

    #[test]
    fn a_number_with_a_fraction_or_exponent_is_the_wrong_type_for_id(id in any_float_text()) {
        let body = format!(r#"{{"id":{id},"name":"n"}}"#);
        prop_assert_eq!(
            parsed(body.as_bytes()),
            Err(BodyError::WrongType { field: "id", expected: "an integer" }),
            "{}", id
        );
    }
}

#[test]
fn the_edges_of_int64_are_accepted_and_one_beyond_is_out_of_bounds() {
    let cases = [
        ("-9223372036854775808", Ok(i64::MIN)),
        ("9223372036854775807", Ok(i64::MAX)),
        ("-9223372036854775809", Err(())),
        ("9223372036854775808", Err(())),
    ];
    for (id, expected) in cases {
        let body = format!(r#"{{"id":{id},"name":"n"}}"#);
        let expected = expected.map_err(|()| BodyError::OutOfBounds {
            field: "id",
            bound: Bound::Int64,
        });
        assert_eq!(parsed(body.as_bytes()).map(|(id, _, _)| id), expected, "id {id}");
    }
}

#[test]
fn an_empty_name_or_tag_is_refused_for_its_length() {
    for (field, max) in [("name", NAME_MAX_CHARS), ("tag", TAG_MAX_CHARS)] {
        assert_eq!(
            parsed(body_with(field, "\"\"").as_bytes()),
            out_of_bounds(field, Bound::Length { max_chars: max }),
            "{field}"
        );
    }
}
