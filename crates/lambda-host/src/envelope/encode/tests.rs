use lambda_http::http::header::{HeaderName, HeaderValue};
use lambda_http::http::{Response, StatusCode};
use proptest::prelude::*;

use super::super::RequestOrigin;
use super::{encode, reference};
use lambda_http::Body;

const ORIGINS: [RequestOrigin; 4] = [
    RequestOrigin::ApiGatewayV1,
    RequestOrigin::ApiGatewayV2,
    RequestOrigin::Alb,
    RequestOrigin::VpcLattice,
];

/// A response's parts, built afresh for each encoder (a `Response` is not
/// `Clone`).
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Body,
}

impl Answer {
    fn new(status: u16, headers: &[(&str, &[u8])], body: Body) -> Self {
        let headers = headers
            .iter()
            .map(|(name, value)| {
                (
                    HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
                    HeaderValue::from_bytes(value).expect("a header value"),
                )
            })
            .collect();
        Self {
            status,
            headers,
            body,
        }
    }

    fn response(&self) -> Response<Body> {
        let mut response = Response::new(self.body.clone());
        *response.status_mut() = StatusCode::from_u16(self.status).expect("a status");
        for (name, value) in &self.headers {
            response.headers_mut().append(name.clone(), value.clone());
        }
        response
    }
}

/// Both encoders' bytes for every front door, compared; or both refuse.
fn assert_same(case: &str, answer: &Answer) {
    for origin in ORIGINS {
        match (
            encode(origin, answer.response()),
            reference::encode(origin, answer.response()),
        ) {
            (Ok(ours), Ok(theirs)) => {
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&theirs),
                    "{case}, {origin:?}"
                );
                assert_eq!(ours, theirs, "{case}, {origin:?}");
            }
            (Err(_), Err(_)) => {}
            (ours, theirs) => panic!("{case}, {origin:?}: ours {ours:?}, the reference's {theirs:?}"),
        }
    }
}

/// `answer` refused for `origin` by both encoders, the error naming the
/// header `x-bytes` and not its value.
fn assert_refused(origin: RequestOrigin, case: &str, answer: &Answer) {
    let refused = encode(origin, answer.response())
        .map(|json| String::from_utf8_lossy(&json).into_owned())
        .expect_err(case);
    let message = refused.to_string();
    assert!(message.contains("x-bytes"), "{case}: {message}");
    assert!(!message.contains("caf"), "{case}: {message}");
    assert!(
        reference::encode(origin, answer.response()).is_err(),
        "{case}: the reference"
    );
}

/// A header value that is not UTF-8, between two that are.
fn not_utf8_first() -> Answer {
    Answer::new(
        200,
        &[("x-before", b"1"), ("x-bytes", b"caf\xe9"), ("x-after", b"2")],
        text("hello"),
    )
}

/// A header's second value that is not UTF-8.
fn not_utf8_later() -> Answer {
    Answer::new(
        200,
        &[("x-bytes", b"cafe"), ("x-bytes", b"caf\xe9")],
        text("hello"),
    )
}

fn text(value: &str) -> Body {
    Body::Text(value.to_owned())
}

#[test]
fn each_front_doors_json_is_the_response_types_as_serde_json_writes_them() {
    let every_ascii: String = (0_u8..0x80).map(char::from).collect();
    let header_ascii: Vec<u8> = (0_u8..0x80)
        .filter(|&byte| byte == b'\t' || (0x20..0x7f).contains(&byte))
        .collect();
    let cases: Vec<(&str, Answer)> = vec![
        ("no headers, empty body", Answer::new(200, &[], Body::Empty)),
        ("no headers, empty text", Answer::new(204, &[], text(""))),
        (
            "a JSON answer",
            Answer::new(
                201,
                &[("content-type", b"application/json"), ("location", b"/plants/1")],
                text(r#"{"id":1,"name":"Monstera deliciosa"}"#),
            ),
        ),
        (
            "several values of one header, between others",
            Answer::new(
                200,
                &[
                    ("vary", b"origin"),
                    ("x-a", b"1"),
                    ("vary", b"accept-encoding"),
                    ("x-b", b""),
                    ("vary", b"cookie"),
                ],
                text("ok"),
            ),
        ),
        (
            "one cookie",
            Answer::new(200, &[("set-cookie", b"a=1; Path=/")], text("ok")),
        ),
        (
            "cookies between headers, the last header moving into their place",
            Answer::new(
                302,
                &[
                    ("x-first", b"1"),
                    ("set-cookie", b"a=1"),
                    ("x-second", b"2"),
                    ("set-cookie", b"b=\"2\"; HttpOnly"),
                    ("location", b"/"),
                    ("x-last", b"3"),
                ],
                Body::Empty,
            ),
        ),
        (
            "only cookies",
            Answer::new(
                200,
                &[("set-cookie", b"a=1"), ("set-cookie", b"b=2")],
                Body::Empty,
            ),
        ),
        (
            "a cookie beyond ASCII, and one that is not UTF-8",
            Answer::new(
                200,
                &[
                    ("set-cookie", "a=é".as_bytes()),
                    ("set-cookie", b"b=\xff"),
                    ("set-cookie", b"c=\t3"),
                ],
                Body::Empty,
            ),
        ),
        (
            "every ASCII character a header value can hold",
            Answer::new(
                200,
                &[("x-ascii", &header_ascii), ("x-quotes", br#""\"\\"#)],
                text(""),
            ),
        ),
        (
            "obs-text that is UTF-8",
            Answer::new(200, &[("x-text", "é€🌱".as_bytes())], text("")),
        ),
        (
            "a first value that is not UTF-8",
            Answer::new(200, &[("x-bytes", b"caf\xe9"), ("x-next", b"1")], text("")),
        ),
        (
            "a later value that is not UTF-8",
            Answer::new(200, &[("x-bytes", b"cafe"), ("x-bytes", b"caf\xe9")], text("")),
        ),
        (
            "a lone continuation byte",
            Answer::new(200, &[("x-bytes", b"\x80")], text("")),
        ),
        (
            "every ASCII character in a text body",
            Answer::new(
                200,
                &[("content-type", b"text/plain")],
                Body::Text(every_ascii.clone()),
            ),
        ),
        (
            "escapes and unicode in a text body",
            Answer::new(
                400,
                &[],
                text("\"quoted\" back\\slash\u{0}\u{1f}\u{7f} é € 🌱 \u{2028}\u{fffd}"),
            ),
        ),
        (
            "a binary body",
            Answer::new(
                200,
                &[("content-type", b"image/png")],
                Body::Binary((0..=255).collect()),
            ),
        ),
        (
            "an empty binary body",
            Answer::new(200, &[], Body::Binary(Vec::new())),
        ),
        (
            "a binary body of one byte",
            Answer::new(200, &[], Body::Binary(vec![0xfb])),
        ),
        (
            "a binary body of two bytes",
            Answer::new(200, &[], Body::Binary(vec![0xff, 0xfe])),
        ),
        (
            "many headers",
            Answer::new(
                500,
                &[
                    ("a", b"1"),
                    ("b", b"2"),
                    ("c", b"3"),
                    ("d", b"4"),
                    ("e", b"5"),
                    ("f", b"6"),
                    ("g", b"7"),
                    ("h", b"8"),
                    ("i", b"9"),
                    ("j", b"10"),
                    ("set-cookie", b"k=11"),
                    ("l", b"12"),
                ],
                text("{}"),
            ),
        ),
    ];
    for (case, answer) in &cases {
        assert_same(case, answer);
    }
    for status in 100..=999 {
        assert_same(&format!("status {status}"), &Answer::new(status, &[], text("")));
    }
}

#[test]
fn an_http_apis_answer_with_a_header_value_that_is_not_utf8_is_refused() {
    assert_refused(RequestOrigin::ApiGatewayV2, "a first value", &not_utf8_first());
    // Only a header's first value goes in `headers`, as in `lambda_http`'s.
    let later =
        encode(RequestOrigin::ApiGatewayV2, not_utf8_later().response()).expect("a later value is left out");
    assert!(String::from_utf8_lossy(&later).contains(r#""headers":{"x-bytes":"cafe"}"#));
}

#[test]
fn an_http_apis_cookie_that_is_not_visible_ascii_goes_empty_and_the_answer_is_kept() {
    let answer = Answer::new(
        200,
        &[
            ("set-cookie", b"a=caf\xe9"),
            ("set-cookie", "b=é".as_bytes()),
            ("set-cookie", b"c=3"),
        ],
        text("hello"),
    );
    let json = encode(RequestOrigin::ApiGatewayV2, answer.response()).expect("the answer is kept");
    assert!(String::from_utf8_lossy(&json).contains(r#""cookies":["","","c=3"]"#));
}

#[test]
fn a_rest_apis_answer_with_a_header_value_that_is_not_utf8_is_refused() {
    assert_refused(RequestOrigin::ApiGatewayV1, "a first value", &not_utf8_first());
    assert_refused(RequestOrigin::ApiGatewayV1, "a later value", &not_utf8_later());
}

#[test]
fn an_albs_answer_with_a_header_value_that_is_not_utf8_is_refused() {
    assert_refused(RequestOrigin::Alb, "a first value", &not_utf8_first());
    // `multiValueHeaders` holds every value.
    assert_refused(RequestOrigin::Alb, "a later value", &not_utf8_later());
}

#[test]
fn a_vpc_lattice_answer_with_a_header_value_that_is_not_utf8_is_refused() {
    assert_refused(RequestOrigin::VpcLattice, "a first value", &not_utf8_first());
}

#[test]
fn an_http_apis_answer_reads_as_expected() {
    let answer = Answer::new(
        201,
        &[("content-type", b"application/json"), ("set-cookie", b"a=1")],
        text("{\"id\":1}"),
    );
    assert_eq!(
        String::from_utf8(encode(RequestOrigin::ApiGatewayV2, answer.response()).expect("encoded"))
            .expect("UTF-8"),
        r#"{"statusCode":201,"headers":{"content-type":"application/json"},"multiValueHeaders":{},"body":"{\"id\":1}","isBase64Encoded":false,"cookies":["a=1"]}"#
    );
}

/// Header names: common ones, cookies, and any token.
fn name() -> impl Strategy<Value = HeaderName> {
    prop_oneof![
        Just(HeaderName::from_static("content-type")),
        Just(HeaderName::from_static("set-cookie")),
        Just(HeaderName::from_static("vary")),
        Just(HeaderName::from_static("x-custom")),
        "[a-z0-9!#$%&'*+.^_`|~-]{1,12}"
            .prop_map(|name| HeaderName::from_bytes(name.as_bytes()).expect("a token")),
    ]
}

/// Header values: text with escapes and unicode, and raw bytes (often not
/// UTF-8).
fn value() -> impl Strategy<Value = HeaderValue> {
    prop_oneof![
        "[\t -~é€\u{1F331}]{0,16}".prop_map(|value| HeaderValue::from_str(&value).expect("a value")),
        proptest::collection::vec(prop_oneof![Just(b'\t'), 0x20_u8..0x7f, 0x80_u8..=0xff], 0..8)
            .prop_map(|bytes| HeaderValue::from_bytes(&bytes).expect("a value")),
    ]
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        Just(Body::Empty),
        any::<String>().prop_map(Body::Text),
        "[\u{0}-\u{7f}é€\u{1F331}\u{2028}]{0,40}".prop_map(Body::Text),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Body::Binary),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn any_answer_is_written_as_serde_json_writes_the_response_types(
        status in 100_u16..=999,
        headers in proptest::collection::vec((name(), value()), 0..8),
        body in body(),
    ) {
        let answer = Answer { status, headers, body };
        for origin in ORIGINS {
            match (encode(origin, answer.response()), reference::encode(origin, answer.response())) {
                (Ok(ours), Ok(theirs)) => {
                    prop_assert_eq!(
                        String::from_utf8_lossy(&ours),
                        String::from_utf8_lossy(&theirs),
                        "{:?}", origin
                    );
                    prop_assert_eq!(ours, theirs);
                }
                (Err(_), Err(_)) => {}
                (ours, theirs) => prop_assert!(false, "{:?}: ours {:?}, the reference's {:?}", origin, ours, theirs),
            }
        }
    }
}
