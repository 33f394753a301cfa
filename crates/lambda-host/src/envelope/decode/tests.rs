use super::*;
use serde_json::{Value, json};

fn http_api_event(change: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut event = json!({
        "version": "2.0",
        "routeKey": "POST /items",
        "rawPath": "/items",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "host": "api.example.com",
            "x-forwarded-proto": "https"
        },
        "requestContext": {
            "domainName": "api.example.com",
            "http": { "method": "POST", "path": "/items", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1" },
            "routeKey": "POST /items",
            "stage": "$default",
            "timeEpoch": 0
        },
        "body": "{\"id\":1,\"name\":\"Widget\"}",
        "isBase64Encoded": false
    });
    change(&mut event);
    event.to_string().into_bytes()
}

fn repairs(decoded: &Decoded) -> SetAside {
    *decoded
        .request
        .extensions()
        .get::<SetAside>()
        .expect("repairs attached")
}

#[test]
fn an_event_from_a_front_door_is_decoded_with_nothing_set_aside() {
    let decoded = decode(&http_api_event(|_| {})).expect("an HTTP API event");

    assert_eq!(repairs(&decoded), SetAside::default());
    assert_eq!(decoded.request.uri().to_string(), "https://api.example.com/items");
    assert_eq!(decoded.request.body().as_ref(), br#"{"id":1,"name":"Widget"}"#);
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
        SetAside {
            body_not_base64: true,
            ..SetAside::default()
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
            SetAside {
                host_ignored: true,
                ..SetAside::default()
            },
            "{host:?} {proto:?}"
        );
        assert_eq!(decoded.request.raw_http_path(), "/items", "{host:?} {proto:?}");
        assert!(decoded.request.headers().get(HOST).is_none());
    }
}

#[test]
fn a_path_or_query_that_does_not_form_a_url_is_set_aside() {
    let decoded = decode(&http_api_event(|event| event["rawPath"] = json!("x:99999"))).expect("decoded");
    assert!(repairs(&decoded).path_ignored, "{:?}", repairs(&decoded));
    assert_eq!(decoded.request.raw_http_path(), "/");

    let decoded = decode(&http_api_event(|event| event["rawQueryString"] = json!("a=b c"))).expect("decoded");
    assert_eq!(
        repairs(&decoded),
        SetAside {
            query_ignored: true,
            ..SetAside::default()
        }
    );
    assert_eq!(decoded.request.raw_http_path(), "/items");
}

#[test]
fn an_event_from_another_service_is_unsupported_with_lambda_https_sentence() {
    let sqs = json!({ "Records": [{ "messageId": "1", "eventSource": "aws:sqs", "body": "{}" }] });

    let err = decode(sqs.to_string().as_bytes()).expect_err("not an HTTP event");

    assert!(
        err.to_string()
            .starts_with("unsupported event: this function expects a JSON payload from Amazon API Gateway"),
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

    assert_eq!(repairs(&decoded), SetAside::default());
    assert_eq!(decoded.request.uri().to_string(), "/items");
    assert_eq!(
        decoded.request.headers().get(X_FORWARDED_PROTO),
        Some(&HeaderValue::from_static("https"))
    );
}

/// Each event of docs/upstream/lambda-http-conversion-panics.md, on
/// which `lambda_http`'s conversion panics, and what is set aside.
#[test]
fn every_event_that_panics_lambda_https_conversion_is_decoded_with_what_was_set_aside() {
    let body = SetAside {
        body_not_base64: true,
        ..SetAside::default()
    };
    let host = SetAside {
        host_ignored: true,
        ..SetAside::default()
    };
    let path = SetAside {
        path_ignored: true,
        ..SetAside::default()
    };
    let query = SetAside {
        query_ignored: true,
        ..SetAside::default()
    };
    let context = r#""requestContext": {"domainName": "api.example.com", "http": {"method": "POST", "path": "/items", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1"}, "routeKey": "POST /items", "stage": "$default", "timeEpoch": 0}"#;
    let no_domain = r#""requestContext": {"http": {"method": "POST", "path": "/items", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1"}, "routeKey": "POST /items", "stage": "$default", "timeEpoch": 0}"#;
    let odd_domain = r#""requestContext": {"domainName": "exa mple.com", "http": {"method": "POST", "path": "/items", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1"}, "routeKey": "POST /items", "stage": "$default", "timeEpoch": 0}"#;
    let http_api = |raw_path: &str, query: &str, headers: &str, context: &str, body: &str, base64: bool| {
        format!(
            r#"{{"version": "2.0", "routeKey": "POST /items", "rawPath": "{raw_path}", "rawQueryString": "{query}", "headers": {{{headers}}}, {context}, "body": "{body}", "isBase64Encoded": {base64}}}"#
        )
    };
    let json = r#""content-type": "application/json""#;
    for (case, event, expected, raw_path) in [
        (
            "HTTP API body not base64",
            http_api("/items", "", &format!(r#"{json}, "host": "api.example.com""#), context, "not base64!", true),
            body,
            "/items",
        ),
        (
            "REST API body not base64",
            r#"{"resource": "/items", "path": "/items", "httpMethod": "POST", "headers": {"host": "api.example.com"}, "multiValueHeaders": {"host": ["api.example.com"]}, "requestContext": {"stage": "prod", "resourcePath": "/items", "httpMethod": "POST", "path": "/prod/items"}, "body": "not base64!", "isBase64Encoded": true}"#.to_owned(),
            body,
            "/items",
        ),
        (
            "Host with a port out of range",
            http_api("/items", "", &format!(r#"{json}, "host": "api.example.com:99999""#), context, "{}", false),
            host,
            "/items",
        ),
        (
            "domainName with a space and no Host",
            http_api("/items", "", json, odd_domain, "{}", false),
            host,
            "/items",
        ),
        (
            "ALB Host with a space",
            r#"{"requestContext": {"elb": {"targetGroupArn": "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/items/0123456789abcdef"}}, "httpMethod": "POST", "path": "/items", "headers": {"host": "exa mple.com"}, "body": "", "isBase64Encoded": false}"#.to_owned(),
            host,
            "/items",
        ),
        (
            "X-Forwarded-Proto that is not a scheme",
            http_api("/items", "", &format!(r#"{json}, "host": "api.example.com", "x-forwarded-proto": "not a scheme""#), context, "{}", false),
            host,
            "/items",
        ),
        (
            "HTTP API path that is not a path, no host",
            http_api("x:99999", "", json, no_domain, "{}", false),
            path,
            "/",
        ),
        (
            "REST API path that is not a path, no stage",
            r#"{"resource": "/items", "path": "x:99999", "httpMethod": "POST", "headers": {}, "multiValueHeaders": {}, "requestContext": {"resourcePath": "/items", "httpMethod": "POST", "path": "/items"}, "body": null, "isBase64Encoded": false}"#.to_owned(),
            path,
            "/",
        ),
        (
            "raw query string with a space",
            http_api("/items", "a=b c", &format!(r#"{json}, "host": "api.example.com""#), context, "{}", false),
            query,
            "/items",
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
        "resource": "/items", "path": "/items", "httpMethod": "POST",
        "headers": (0..half).map(|n| (format!("x-a{n}"), json!("v"))).collect::<serde_json::Map<_, _>>(),
        "multiValueHeaders": (0..half).map(|n| (format!("x-b{n}"), json!(["v"]))).collect::<serde_json::Map<_, _>>(),
        "requestContext": { "stage": "prod", "resourcePath": "/items", "httpMethod": "POST" },
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
                "resource": "/items", "path": path, "httpMethod": "POST",
                "headers": { "host": host, "x-forwarded-proto": proto },
                "multiValueHeaders": { "host": [host], "x-forwarded-proto": [proto] },
                "queryStringParameters": { "q": query },
                "multiValueQueryStringParameters": { "q": [query] },
                "requestContext": { "stage": stage, "domainName": domain, "resourcePath": "/items",
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
        proptest::prop_assert!(decoded.request.extensions().get::<SetAside>().is_some());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(5000))]

    /// The shortcut for a plain host gives the URL the full check gives,
    /// for hosts and paths near the edge of what it takes.
    #[test]
    fn a_plain_host_is_located_as_the_full_check_locates_it(
        scheme in "(https|http|ftp|HTTPS|)",
        host in "[a-zA-Z0-9.:@/?#%\\[\\]-]{0,24}|([a-z0-9-]{1,5}\\.|xn--[a-z]{1,2}\\.|[A-Z]\\.|\\.){0,3}([a-z][a-z0-9-]{0,5}|[A-Z]{1,3}|[0-9]{1,3}|0x[0-9a-f]{1,2}|xn--[a-z]{1,3})\\.?(:(0|443|80|8080|0?[0-9]{1,6})?)?",
        path in "[a-z/?#%. ]{0,12}|([a-zA-Z0-9/?#%.~!$&'()*+,;=:@\\\\ ^|-]{0,12})|(/(\\.|%2[eE]|\\.%2[eE]|%2[eE]\\.|\\.\\.|\\.\\.\\.|x|%2[eE]%2[eE])){1,4}/?",
    ) {
        let checked = bare(&scheme, &host)
            .then(|| Url::parse(&format!("{scheme}://{host}{path}")).ok().map(String::from))
            .flatten();
        proptest::prop_assert_eq!(absolute(&scheme, &host, &path), checked);
        let relative_checked = Url::parse(&format!("http://localhost{path}")).ok().map(|url| url.path().to_owned());
        proptest::prop_assert_eq!(relative(&path), relative_checked);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

    /// A URL written without `url` is the one `url` writes, for hosts and
    /// paths near the edge of what is written as it is: ports (default,
    /// leading zero, out of range), numbers and punycode as the last
    /// label, dot segments plain and percent-encoded.
    #[test]
    fn a_url_written_as_it_is_is_the_one_url_writes(
        scheme in "(https|http)",
        host in "([a-z0-9-]{1,5}\\.|xn--[a-z]\\.){0,2}([a-z][a-z0-9-]{0,4}|[0-9]{1,3}|0x[0-9a-f]|A[a-z])(:(0|443|80|8080|0?[0-9]{1,5}))?",
        path in "(/([a-zA-Z0-9._~!$&'()*+,;=:@%-]{0,4}|\\.|\\.\\.|%2[eE]|\\.%2[eE]|%2[eE]%2[eE])){0,4}",
    ) {
        let checked = bare(&scheme, &host)
            .then(|| Url::parse(&format!("{scheme}://{host}{path}")).ok().map(String::from))
            .flatten();
        proptest::prop_assert_eq!(absolute(&scheme, &host, &path), checked);
        let relative_checked = Url::parse(&format!("http://localhost{path}")).ok().map(|url| url.path().to_owned());
        proptest::prop_assert_eq!(relative(&path), relative_checked);
    }
}

#[test]
fn hosts_as_front_doors_send_them_take_the_shortcut_and_others_do_not() {
    for (host, plain_host) in [
        ("p7x2k9qw3m.execute-api.us-east-1.amazonaws.com", true),
        ("localhost:9000", true),
        ("999.1.1.1", true),
        ("user@host", false),
        ("[::1]:443", false),
        ("host/path", false),
        (":80", false),
    ] {
        assert_eq!(plain("https", host, "/orders"), plain_host, "{host}");
    }
    assert!(!plain("ftp", "host", "/"), "only http and https");
    for (scheme, host, path, url) in [
        (
            "https",
            "api.example.com",
            "/orders",
            "https://api.example.com/orders",
        ),
        (
            "https",
            "api.example.com:443",
            "/orders",
            "https://api.example.com/orders",
        ),
        ("http", "localhost:80", "", "http://localhost/"),
        ("http", "localhost:9000", "/a/%2e%2E/b", "http://localhost:9000/b"),
        (
            "https",
            "API.example.com",
            "/a b",
            "https://api.example.com/a%20b",
        ),
        ("https", "127.1", "/", "https://127.0.0.1/"),
    ] {
        assert_eq!(
            absolute(scheme, host, path).as_deref(),
            Some(url),
            "{scheme} {host} {path}"
        );
    }
    assert!(!plain("https", "host", "x"), "a path that does not end the host");
}

/// What a decoding gives, as one value: the request's parts, what was set
/// aside, the API path and the front door; or the refusal's line.
fn outcome(decoded: Result<Decoded, UnsupportedEvent>) -> Value {
    match decoded {
        Ok(decoded) => json!({
            "request": with_query_sorted(crate::test_util::request_parts(&decoded.request)),
            "repairs": format!("{:?}", decoded.request.extensions().get::<SetAside>()),
            "api_path": decoded.request.extensions().get::<ApiPath>().map(ApiPath::as_str),
            "origin": format!("{:?}", decoded.origin),
        }),
        Err(err) => json!({ "refused": err.to_string() }),
    }
}

/// A query map is a hash map: the order of the URI's query, written
/// from one, differs from map to map.
fn with_query_sorted(mut parts: Value) -> Value {
    let uri = parts["uri"].as_str().expect("a URI").to_owned();
    if let Some((base, query)) = uri.split_once('?') {
        let mut pairs: Vec<&str> = query.split('&').collect();
        pairs.sort_unstable();
        parts["uri"] = json!(format!("{base}?{}", pairs.join("&")));
    }
    parts
}

/// The decoder and the one it replaced give the same request, or the
/// same refusal, under both stage settings.
fn assert_decoded_as_before(payload: &[u8]) {
    for stage in [Stage::InPath, Stage::Ignored] {
        let decoded = decode_with(payload, stage);
        // The reference panics on a query parameter given an empty list
        // of values (`QueryMap` cannot write one): the decoder drops it.
        let Ok(before) = std::panic::catch_unwind(|| reference::decode_with(payload, stage)) else {
            continue;
        };
        // Where it did not have to write the query (an HTTP API event's
        // comes from `rawQueryString`), the reference kept a parameter
        // given an empty list of values: the decoder drops it there too.
        let before = before.map(without_parameters_given_no_values);
        // The reference predates VPC Lattice: it refused every such event.
        if let (Ok(decoded), Err(_)) = (&decoded, &before)
            && decoded.origin == RequestOrigin::VpcLattice
        {
            continue;
        }
        assert_eq!(
            outcome(decoded),
            outcome(before),
            "{stage:?} {}",
            String::from_utf8_lossy(payload)
        );
    }
}

/// `decoded` without the query parameters given an empty list of values,
/// which the decoder drops at every front door.
fn without_parameters_given_no_values(mut decoded: Decoded) -> Decoded {
    let Some(parameters) = decoded.request.query_string_parameters_ref() else {
        return decoded;
    };
    let kept: std::collections::HashMap<String, Vec<String>> = crate::test_util::query_pairs(parameters)
        .into_iter()
        .filter(|(_, values)| !values.is_empty())
        .collect();
    decoded.request = decoded.request.with_query_string_parameters(kept);
    decoded
}

fn sample_events() -> Vec<(String, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut events = Vec::new();
    for dir in [root.join("../../events"), root.join("tests/data")] {
        for entry in std::fs::read_dir(&dir).expect("a folder of events") {
            let path = entry.expect("an entry").path();
            // The reference predates VPC Lattice.
            let lattice = path.to_string_lossy().contains("vpc-lattice");
            if path.extension().is_some_and(|ext| ext == "json") && !lattice {
                let event = std::fs::read(&path).expect("readable");
                events.push((path.display().to_string(), event));
            }
        }
    }
    events
}

#[test]
fn every_sample_event_is_decoded_as_before() {
    let events = sample_events();
    assert!(events.len() >= 28, "{} events", events.len());
    for (_, event) in &events {
        assert_decoded_as_before(event);
    }
}

#[test]
fn refusals_and_repairs_are_as_before() {
    for payload in [
        &b""[..],
        b"not JSON",
        b"[]",
        b"{}",
        b"null",
        b"{} x",
        br#"{"httpMethod":"POST"}"#,
        br#"{"httpMethod":null,"requestContext":{"http":{"method":"GET"}}}"#,
        br#"{"headers":{},"headers":{}}"#,
        br#"{"Records":[{"messageId":"1","eventSource":"aws:sqs","body":"{}"}]}"#,
        b"{\"headers\": {\"a\": tru}}",
        b"{\"headers\": \"\xff\"}",
        b"{\"requestContext\": {\"http\": {\"method\": \"GET\"}}, \"unknown\": \"\xff\"}",
    ] {
        assert_decoded_as_before(payload);
    }
}

/// A URL at `http`'s longest and one byte past it, in the path and in
/// the query: the URI made of its parts is the one the whole text makes,
/// or set aside as it was.
#[test]
fn a_url_at_and_past_https_longest_is_located_as_before() {
    // `https://api.example.com` is 23 bytes; `http` takes 65,534.
    for len in [65_534 - 23, 65_535 - 23] {
        let path = format!("/{}", "a".repeat(len - 1));
        assert_decoded_as_before(&http_api_event(|event| event["rawPath"] = json!(path)));
        let query = format!("q={}", "b".repeat(len - "/items?q=".len()));
        assert_decoded_as_before(&http_api_event(|event| event["rawQueryString"] = json!(query)));
    }
}

/// Each of JSON's escapes, in the strings read as text, in header names
/// and values (one or a list) of every sample event: the same request,
/// or the same refusal, as before.
#[test]
fn escaped_strings_are_read_as_before() {
    const MARK: &str = "\"@@\"";
    let strings = [
        r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
        r#""\u0041\u00e9\ud83d\ude00, \t x ,""#,
        r#""\ud800""#,
        r#""x\n""#,
        r#""a\tb, c""#,
        r#""/it\u0065ms""#,
        r#""\/items?a=\"""#,
        r#""""#,
        r#""P\u004fST""#,
    ];
    for (name, event) in sample_events() {
        let event: Value = serde_json::from_slice(&event).expect("JSON");
        let changes: [fn(&mut Value); 8] = [
            |event| event["body"] = json!("@@"),
            |event| event["httpMethod"] = json!("@@"),
            |event| event["method"] = json!("@@"),
            |event| event["path"] = json!("@@"),
            |event| event["rawPath"] = json!("@@"),
            |event| event["headers"]["x-a"] = json!("@@"),
            |event| event["multiValueHeaders"]["x-a"] = json!(["1", "@@"]),
            |event| event["headers"]["@@"] = json!("1"),
        ];
        for change in changes {
            let mut changed = event.clone();
            if !changed.is_object() {
                continue;
            }
            change(&mut changed);
            let text = changed.to_string();
            assert!(text.contains(MARK), "{name}");
            for string in strings {
                assert_decoded_as_before(text.replace(MARK, string).as_bytes());
            }
        }
    }
}

/// VPC Lattice 1.0's type takes any object: an event is read as one only
/// with both its `raw_path` and its `method`, else no front door sent it.
#[test]
fn only_an_event_with_raw_path_and_method_is_read_as_vpc_lattice_v1() {
    let decoded = decode(br#"{"raw_path": "/items", "method": "GET"}"#).expect("VPC Lattice 1.0");
    assert_eq!(decoded.origin, RequestOrigin::VpcLattice);
    assert_eq!(decoded.request.uri().path(), "/items");
    for payload in [&br#"{"method": "GET"}"#[..], br#"{"raw_path": "/items"}"#] {
        let refused = decode(payload).expect_err("not a front door's");
        assert!(matches!(refused.0, Unsupported::NotAFrontDoor), "{refused}");
    }
}

/// VPC Lattice 1.0's comma-separated header values, blanks and empty
/// parts among them, as `VpcLatticeRequestV1` reads them.
#[test]
fn a_vpc_lattice_v1_header_is_split_as_its_type_splits_it() {
    use lambda_http::aws_lambda_events::vpc_lattice::VpcLatticeRequestV1;
    for value in [
        "a,b",
        " a , b ",
        "a,,b,",
        r", ,\t,",
        r"\ta\t, b\u00a0,c d ",
        r"x\u0001, y",
        "one",
    ] {
        let event = format!(
            r#"{{"raw_path": "/items", "method": "GET", "headers": {{"x-a": "{value}", "x-b": ["1, 2", " 3"]}}}}"#
        );
        let theirs = serde_json::from_str::<VpcLatticeRequestV1>(&event).map(|event| event.headers);
        let ours = decode(event.as_bytes()).map(|decoded| decoded.request.headers().clone());
        match (ours, theirs) {
            (Ok(ours), Ok(theirs)) => assert_eq!(ours, theirs, "{value}"),
            (ours, theirs) => assert!(ours.is_err() && theirs.is_err(), "{value}: {ours:?} {theirs:?}"),
        }
    }
}

/// A REST API event whose two header members mirror each other is read
/// once; one that does not, in any way, is merged as before.
#[test]
fn header_members_that_mirror_each_other_or_not_merge_as_before() {
    let event = |single: &str, multi: &str| {
        format!(
            r#"{{"resource": "/items", "path": "/items", "httpMethod": "POST", "headers": {single}, "multiValueHeaders": {multi}, "requestContext": {{"stage": "prod", "resourcePath": "/items", "httpMethod": "POST", "path": "/prod/items", "domainName": "api.example.com"}}, "body": null, "isBase64Encoded": false}}"#
        )
    };
    for (single, multi) in [
        (
            r#"{"Host": "a.example.com", "X-A": "1"}"#,
            r#"{"Host": ["a.example.com"], "X-A": ["1"]}"#,
        ),
        (
            r#"{"Host": "a.example.com", "host": "b.example.com"}"#,
            r#"{"Host": ["a.example.com"], "host": ["b.example.com"]}"#,
        ),
        (
            r#"{"X-A": "1", "x-a": "2", "X-B": "3"}"#,
            r#"{"X-A": ["1"], "x-a": ["2"], "X-B": ["3"]}"#,
        ),
        (r#"{"X-A": "1"}"#, r#"{"X-A": ["1", "2"]}"#),
        (r#"{"X-A": "1"}"#, r#"{"X-A": ["1", "\u0001"]}"#),
        (r#"{"X-A": "1"}"#, r#"{"X-A": ["2"]}"#),
        (r#"{"X-A": "1"}"#, r#"{"X-A": ["1\u0001"]}"#),
        (r#"{"X-A": "1"}"#, r#"{"X-A": ["1"], "X-B": ["\u0001"]}"#),
        (r#"{"X-A": "1", "X-B": "2"}"#, r#"{"X-B": ["2"], "X-A": ["1"]}"#),
        (r#"{"X-A": "1"}"#, r#"{"x-a": ["1"]}"#),
        (r#"{"X-A": "1"}"#, r#"{"X-A": "1"}"#),
        (r#"{"X-A": "1"}"#, r#"{"X-A": [[49]]}"#),
        (r#"{"X-A": "1"}"#, "null"),
        ("{}", "{}"),
    ] {
        assert_decoded_as_before(event(single, multi).as_bytes());
    }
}

/// A query parameter given an empty list of values, which `QueryMap`
/// panics on when it writes the query, is dropped, at any front door.
#[test]
fn a_query_parameter_with_an_empty_list_of_values_is_dropped_not_a_panic() {
    let context = r#"{"stage": "prod", "resourcePath": "/items", "httpMethod": "POST", "domainName": "api.example.com"}"#;
    for (case, event, uri) in [
        (
            "REST API",
            format!(r#"{{"path": "/items", "httpMethod": "POST", "multiValueQueryStringParameters": {{"a": [ ], "b": ["1"], "c": ["2"], "c": [{blank}]}}, "requestContext": {context}}}"#, blank = "\n\t "),
            "https://api.example.com/prod/items?b=1",
        ),
        (
            "ALB",
            r#"{"path": "/items", "httpMethod": "GET", "queryStringParameters": {"a": [], "b": "1"}, "requestContext": {"elb": {}}}"#.to_owned(),
            "/items?b=1",
        ),
        (
            "VPC Lattice",
            r#"{"path": "/items", "method": "GET", "queryStringParameters": {"a": [], "b": ["1"]}, "requestContext": {"serviceNetworkArn": "", "serviceArn": "", "targetGroupArn": "", "region": "", "timeEpoch": ""}}"#.to_owned(),
            "/items?b=1",
        ),
    ] {
        let decoded = decode(event.as_bytes()).unwrap_or_else(|err| panic!("{case}: {err}"));
        assert_eq!(decoded.request.uri().to_string(), uri, "{case}");
        let parameters = decoded.request.query_string_parameters_ref().expect("parameters");
        assert_eq!(parameters.all("a"), None, "{case}");
    }
}

/// Any JSON value a hand-made event could hold in a member.
fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        proptest::bool::ANY.prop_map(Value::from),
        (-3_i64..300).prop_map(Value::from),
        Just(json!(1.5)),
        "[ -~é]{0,8}".prop_map(Value::from),
        // What JSON escapes: `\u0001` among them, and `\t`, which a header
        // value may hold.
        "[\"\\\\/\u{8}\u{c}\n\r\t\u{1}é a,]{0,8}".prop_map(Value::from),
        Just(json!("")),
        Just(json!("GET")),
        Just(json!("/items")),
        Just(json!("a, b")),
        Just(json!("eyJpZCI6MX0=")),
    ];
    let nested = leaf.clone().prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-zA-Z-]{1,6}|host|Host|x-forwarded-proto", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    });
    prop_oneof![2 => Just(Value::Null), 3 => leaf, 3 => nested]
}

const MEMBERS: &[&str] = &[
    "httpMethod",
    "method",
    "resource",
    "path",
    "rawPath",
    "raw_path",
    "rawQueryString",
    "version",
    "routeKey",
    "type",
    "methodArn",
    "identitySource",
    "authorizationToken",
    "cookies",
    "queryStringParameters",
    "query_string_parameters",
    "multiValueQueryStringParameters",
    "pathParameters",
    "stageVariables",
    "requestContext",
    "body",
    "isBase64Encoded",
    "is_base64_encoded",
    "headers",
    "multiValueHeaders",
    "unknown",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    /// Each sample event with members changed to any value, removed, or
    /// changed inside the headers and the request context: the same
    /// request or the same refusal as before.
    #[test]
    fn a_changed_sample_event_is_decoded_or_refused_as_before(
        sample in 0..1000_usize,
        changes in proptest::collection::vec(
            (proptest::sample::select(MEMBERS), proptest::option::of(any_value()), 0..5_u8),
            1..4,
        ),
    ) {
        let events = sample_events();
        let (_, event) = &events[sample % events.len()];
        let mut event: Value = serde_json::from_slice(event).expect("JSON");
        for (member, value, depth) in changes {
            // Mostly the event's own members; else its Host, or a member
            // of its request context.
            let target = match depth {
                3 => event.get_mut("headers"),
                4 => event.get_mut("requestContext"),
                _ => Some(&mut event),
            };
            let Some(Value::Object(target)) = target else { continue };
            let key = match depth {
                3 => "host",
                4 => ["http", "stage", "domainName", "elb"][member.len() % 4],
                _ => member,
            };
            match value {
                Some(value) => { target.insert(key.to_owned(), value); }
                None => { target.remove(key); }
            }
        }
        assert_decoded_as_before(event.to_string().as_bytes());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// VPC Lattice's events (which the reference refused) with members
    /// changed to any value: a request or a refusal, never a panic.
    #[test]
    fn a_changed_vpc_lattice_event_is_decoded_or_refused_without_a_panic(
        v1 in proptest::bool::ANY,
        changes in proptest::collection::vec(
            (proptest::sample::select(MEMBERS), proptest::option::of(any_value()), 0..4_u8),
            1..4,
        ),
    ) {
        let file = if v1 { "vpc-lattice-v1.json" } else { "vpc-lattice-v2.json" };
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(file);
        let mut event: Value = serde_json::from_slice(&std::fs::read(path).expect("readable")).expect("JSON");
        for (member, value, depth) in changes {
            let target = match depth {
                3 => event.get_mut(if v1 { "headers" } else { "requestContext" }),
                _ => Some(&mut event),
            };
            let Some(Value::Object(target)) = target else { continue };
            match value {
                Some(value) => { target.insert(member.to_owned(), value); }
                None => { target.remove(member); }
            }
        }

        let decoded = decode(event.to_string().as_bytes());

        if let Ok(decoded) = decoded {
            proptest::prop_assert!(decoded.request.extensions().get::<SetAside>().is_some());
        }
    }
}

/// What a hand-made payload can get wrong, as text put into a JSON
/// event: trailing commas, numbers JSON does not have, control
/// characters, escapes that are not JSON's or are lone surrogates,
/// whitespace that is not JSON's, bytes that are not UTF-8, nesting past
/// `serde_json`'s recursion limit, a member given twice.
const MALFORMED: &[&[u8]] = &[
    b",",
    b", }",
    b",]",
    b"}",
    b"]",
    b"{",
    b"[",
    b":",
    b"\"",
    b"\\",
    b"\\x",
    b"\\u12",
    b"\\uZZZZ",
    b"\\ud800",
    b"\\udc00",
    b"\\ud800\\u0041",
    b"\\ud83d\\ude00",
    b"\x01",
    b"\x1f",
    b"\x7f",
    b"\t",
    b"\n",
    b"\x0b",
    b"\xc2\xa0",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"01",
    b"1.",
    b".5",
    b"1e",
    b"1e+",
    b"-",
    b"-0",
    b"+1",
    b"1e400",
    b"-1e400",
    b"123456789012345678901234567890",
    b"NaN",
    b"Infinity",
    b"tru",
    b"nul",
    b"null",
    b"true",
    b"0",
    b"\"\"",
    b"[]",
    b"{}",
    b"/* */",
    b"x",
];

/// A malformed piece put at `at` (a fraction of the way through the
/// payload, or through the places where a value starts or ends), in place
/// of what was there (`replace` bytes of it) or beside it.
fn mangled(payload: &[u8], at: f64, at_a_value: bool, piece: &[u8], replace: usize) -> Vec<u8> {
    let places: Vec<usize> = if at_a_value {
        let mut places = Vec::new();
        for (n, byte) in payload.iter().enumerate() {
            match byte {
                b':' | b',' | b'[' | b'{' => places.push(n + 1),
                b'}' | b']' => places.push(n),
                _ => {}
            }
        }
        places
    } else {
        (0..=payload.len()).collect()
    };
    let at = places[((places.len() - 1) as f64 * at) as usize];
    let end = (at + replace).min(payload.len());
    [&payload[..at], piece, &payload[end..]].concat()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(6000))]

    /// Each sample event, compact or indented as it is written, with a
    /// malformed piece anywhere (inside a string, where a value starts or
    /// ends, in a nested member, past the end): refused with the same
    /// words as before, or decoded as before.
    #[test]
    fn malformed_json_anywhere_is_refused_or_decoded_as_before(
        sample in 0..1000_usize,
        compact in proptest::bool::ANY,
        at in 0.0..=1.0_f64,
        at_a_value in proptest::bool::ANY,
        piece in proptest::sample::select(MALFORMED),
        replace in 0..3_usize,
    ) {
        let events = sample_events();
        let (_, event) = &events[sample % events.len()];
        let event = if compact {
            serde_json::from_slice::<Value>(event).expect("JSON").to_string().into_bytes()
        } else {
            event.clone()
        };
        assert_decoded_as_before(&mangled(&event, at, at_a_value, piece, replace));
    }
}

/// A value nested `depth` deep, arrays or objects.
fn nested(depth: usize, objects: bool) -> String {
    if objects {
        format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
    } else {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }
}

/// Values nested around `serde_json`'s recursion limit of 128, and far
/// past it, in every kind of member: one no type reads, the headers, the
/// request context, and the authorizer's fields that `serde_json` reads
/// into `Value`s.
#[test]
fn nesting_near_and_past_the_recursion_limit_is_read_as_before() {
    let events = sample_events();
    for depth in [1, 60, 120, 123, 124, 125, 126, 127, 128, 129, 200, 5_000] {
        for objects in [false, true] {
            let deep = nested(depth, objects);
            let changes: [fn(&mut Value, &Value); 6] = [
                |event, value| event["unknown"] = value.clone(),
                |event, value| event["headers"]["x-deep"] = value.clone(),
                |event, value| event["requestContext"]["unknown"] = value.clone(),
                |event, value| event["requestContext"]["authorizer"] = json!({ "lambda": { "deep": value } }),
                |event, value| event["requestContext"]["authorizer"] = json!({ "deep": value }),
                |event, value| event["requestContext"]["identity"] = json!({ "deep": value }),
            ];
            for (name, event) in &events {
                let event: Value = serde_json::from_slice(event).expect("JSON");
                if !event.is_object() || !event["requestContext"].is_object() {
                    continue;
                }
                for change in changes {
                    let mut changed = event.clone();
                    // A mark, replaced by the value's text: `Value` itself
                    // cannot be nested past the limit.
                    change(&mut changed, &json!("@@deep@@"));
                    let text = changed.to_string().replace("\"@@deep@@\"", &deep);
                    assert!(text.contains(&deep), "{name}");
                    assert_decoded_as_before(text.as_bytes());
                }
            }
        }
    }
}

/// A member given twice, at the top, in the headers, in the request
/// context and in its `http` or `identity`: the type that reads it
/// refuses it, one that does not ignores it, as before.
#[test]
fn a_member_given_twice_is_refused_or_ignored_as_before() {
    for (name, event) in sample_events() {
        let text = String::from_utf8(event).expect("UTF-8");
        let value: Value = serde_json::from_str(&text).expect("JSON");
        let Some(object) = value.as_object() else { continue };
        let mut keys: Vec<(String, String)> = object
            .iter()
            .map(|(key, value)| (format!("{{\"{key}\": {value}, "), key.clone()))
            .collect();
        for inner in ["requestContext", "headers", "multiValueHeaders"] {
            if let Some(Value::Object(members)) = object.get(inner) {
                for (key, value) in members {
                    keys.push((
                        format!("\"{inner}\": {{\"{key}\": {value}, "),
                        format!("{inner}.{key}"),
                    ));
                }
            }
        }
        for inner in ["http", "identity", "elb"] {
            if let Some(Value::Object(members)) = object
                .get("requestContext")
                .and_then(|context| context.get(inner))
            {
                for (key, value) in members {
                    keys.push((
                        format!("\"{inner}\": {{\"{key}\": {value}, "),
                        format!("{inner}.{key}"),
                    ));
                }
            }
        }
        let compact = value.to_string();
        for (prefix, case) in keys {
            // The member again, first in its object.
            let opening = match case.split_once('.') {
                None => "{".to_owned(),
                Some((outer, _)) => format!("\"{outer}\":{{"),
            };
            let Some(at) = compact.find(&opening) else {
                continue;
            };
            let (before, after) = compact.split_at(at + opening.len());
            let again = prefix.split_once('{').map_or("", |(_, again)| again);
            let payload = format!("{before}{again}{after}");
            assert!(payload.len() > compact.len(), "{name} {case}");
            assert_decoded_as_before(payload.as_bytes());
        }
    }
}

/// Every member of each sample's request context, and of its `http`
/// and `identity`, set to any value or removed: the same request or the
/// same refusal as before.
#[test]
fn every_request_context_member_changed_is_read_as_before() {
    let values = [
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(-0),
        json!(1.5),
        json!(1e300),
        json!(9_223_372_036_854_775_807_i64),
        json!(18_446_744_073_709_551_615_u64),
        json!(""),
        json!("GET"),
        json!("a\"b\\c\u{1}é"),
        json!([]),
        json!(["x"]),
        json!({}),
        json!({ "x": 1 }),
    ];
    for (_, event) in sample_events() {
        let event: Value = serde_json::from_slice(&event).expect("JSON");
        let Some(Value::Object(context)) = event.get("requestContext") else {
            continue;
        };
        let mut paths: Vec<Vec<String>> = context.keys().map(|key| vec![key.clone()]).collect();
        for inner in ["http", "identity"] {
            if let Some(Value::Object(members)) = context.get(inner) {
                paths.extend(members.keys().map(|key| vec![inner.to_owned(), key.clone()]));
            }
        }
        for path in paths {
            for value in values.iter().map(Some).chain([None]) {
                let mut changed = event.clone();
                let mut target = &mut changed["requestContext"];
                for step in &path[..path.len() - 1] {
                    target = &mut target[step.as_str()];
                }
                let last = &path[path.len() - 1];
                let Value::Object(target) = target else { continue };
                match value {
                    Some(value) => target.insert(last.clone(), value.clone()),
                    None => target.remove(last),
                };
                assert_decoded_as_before(changed.to_string().as_bytes());
            }
        }
    }
}

/// What a function reads of its authorizer (`request_context_ref()
/// .authorizer()`, as the official `http-axum-apigw-authorizer` example
/// does) is what `lambda_http` reads: a JWT's claims and scopes, a Lambda
/// authorizer's context, IAM's identity (HTTP API), and a REST API
/// authorizer's fields beside its principal.
#[test]
fn an_authorizers_context_is_read_as_before() {
    let authorizers = [
        json!({ "lambda": { "field_name": "value", "count": 3, "nested": { "a": [1, "b"] } } }),
        json!({ "jwt": { "claims": { "sub": "u-1", "scope": "read write" }, "scopes": ["read", "write"] } }),
        json!({ "iam": { "accessKey": "AKIA", "accountId": "123456789012", "callerId": "c",
                          "principalOrgId": "o-1", "userArn": "arn:aws:iam::123456789012:user/u", "userId": "u" } }),
        json!({ "lambda": null, "jwt": null }),
        json!({}),
        json!({ "lambda": "not a map" }),
    ];
    for authorizer in &authorizers {
        let event = http_api_event(|event| event["requestContext"]["authorizer"] = authorizer.clone());
        assert_decoded_as_before(&event);
        if authorizer.get("lambda").is_some_and(Value::is_object) {
            let decoded = decode_with(&event, Stage::InPath).expect("an HTTP API event");
            let context = decoded
                .request
                .request_context_ref()
                .and_then(|context| context.authorizer());
            assert_eq!(
                context.and_then(|authorizer| authorizer.fields.get("field_name")),
                Some(&json!("value")),
                "{authorizer}"
            );
        }
    }
    let rest: Value =
        serde_json::from_slice(include_bytes!("../../../../../events/create-rest-api-stage.json"))
            .expect("JSON");
    for authorizer in [
        json!({ "principalId": "user-1", "integrationLatency": 12, "field_name": "value", "n": 1.5 }),
        json!({ "claims": { "sub": "u-1" }, "scopes": null }),
        json!({}),
        Value::Null,
        json!("not a map"),
    ] {
        let mut event = rest.clone();
        event["requestContext"]["authorizer"] = authorizer;
        assert_decoded_as_before(event.to_string().as_bytes());
    }
}

/// Every member `aws_lambda_events` reads of an HTTP API's, a function
/// URL's and a REST API's request context, each with a value of its own,
/// and members it does not name: read as before. The samples hold only
/// some of them, and a member the decoder named wrongly would read as
/// absent there and here as lost.
#[test]
fn a_request_context_with_every_member_is_read_as_before() {
    let http_api = http_api_event(|event| {
        event["requestContext"] = json!({
            "accountId": "123456789012",
            "apiId": "api-id",
            "authentication": {
                "clientCert": {
                    "clientCertPem": "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----",
                    "issuerDN": "CN=issuer",
                    "serialNumber": "a1:b2",
                    "subjectDN": "CN=subject",
                    "validity": { "notAfter": "Aug  5 09:36:04 2031 GMT", "notBefore": "Aug  3 09:36:04 2021 GMT" },
                    "extra": 1
                },
                "extra": true
            },
            "authorizer": {
                "jwt": { "claims": { "sub": "u-1", "iss": "https://issuer" }, "scopes": ["read"], "extra": 2 },
                "lambda": { "tier": "gold" },
                "iam": {
                    "accessKey": "AKIA", "accountId": "123456789012", "callerId": "caller",
                    "cognitoIdentity": { "amr": ["authenticated"], "identityId": "id-1", "identityPoolId": "pool-1" },
                    "principalOrgId": "o-1", "userArn": "arn:aws:iam::123456789012:user/u", "userId": "user-id"
                }
            },
            "domainName": "api.example.com",
            "domainPrefix": "api",
            "http": {
                "method": "POST",
                "path": "/items",
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.1",
                "userAgent": "agent/1.0",
                "extra": "x"
            },
            "requestId": "request-id",
            "routeKey": "POST /items",
            "stage": "$default",
            "time": "12/Mar/2020:19:03:58 +0000",
            "timeEpoch": 1_583_348_638_390_i64,
            "extendedRequestId": "not named by the type"
        });
    });
    assert_decoded_as_before(&http_api);
    let function_url: Value = serde_json::from_slice(&http_api).expect("JSON");
    let mut function_url = function_url;
    function_url["requestContext"]["domainName"] = json!("abc.lambda-url.eu-west-1.on.aws");
    function_url["requestContext"]["apiId"] = json!("abc");
    function_url["routeKey"] = json!("$default");
    assert_decoded_as_before(function_url.to_string().as_bytes());

    let mut rest: Value =
        serde_json::from_slice(include_bytes!("../../../../../events/create-rest-api-stage.json"))
            .expect("JSON");
    rest["requestContext"] = json!({
        "accountId": "123456789012",
        "apiId": "api-id",
        "authorizer": { "principalId": "user-1", "integrationLatency": 12, "tier": "gold" },
        "domainName": "api.example.com",
        "domainPrefix": "api",
        "extendedRequestId": "extended-id",
        "httpMethod": "POST",
        "identity": {
            "accessKey": "AKIA",
            "accountId": "123456789012",
            "apiKey": "key",
            "apiKeyId": "key-id",
            "caller": "caller",
            "cognitoAuthenticationProvider": "provider",
            "cognitoAuthenticationType": "authenticated",
            "cognitoIdentityId": "id-1",
            "cognitoIdentityPoolId": "pool-1",
            "principalOrgId": "o-1",
            "sourceIp": "203.0.113.1",
            "user": "user",
            "userAgent": "agent/1.0",
            "userArn": "arn:aws:iam::123456789012:user/u",
            "clientCert": { "clientCertPem": "pem", "subjectDN": "CN=s", "issuerDN": "CN=i", "serialNumber": "1",
                            "validity": { "notBefore": "a", "notAfter": "b" } }
        },
        "operationName": "createPlant",
        "path": "/prod/plants",
        "protocol": "HTTP/1.1",
        "requestId": "request-id",
        "requestTime": "12/Mar/2020:19:03:58 +0000",
        "requestTimeEpoch": 1_583_348_638_390_i64,
        "resourceId": "resource-id",
        "resourcePath": "/plants",
        "stage": "prod",
        "connectedAt": 1_583_348_638_390_i64
    });
    let rest = rest.to_string();
    assert_decoded_as_before(rest.as_bytes());
    for event in [&http_api, function_url.to_string().as_bytes(), rest.as_bytes()] {
        assert!(
            decode_with(event, Stage::InPath).is_ok(),
            "{}",
            String::from_utf8_lossy(event)
        );
    }
}
