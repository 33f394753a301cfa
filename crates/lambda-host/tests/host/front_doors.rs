//! The envelope of each front door, both ways: `envelope::decode` makes of
//! an event the request `lambda_http`'s public `request::from_str` makes of
//! it (wherever that one does not panic), and `envelope::encode` answers
//! each front door with exactly the JSON `lambda_http`'s own response
//! conversion wrote (pinned byte for byte).

use lambda_host::envelope::{self, Decoded};
use lambda_http::http::StatusCode;
use lambda_http::http::header::{
    CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue, SET_COOKIE, VARY, WWW_AUTHENTICATE,
};
use lambda_http::{Body, Response};
use proptest::prelude::*;
use serde_json::{Value, json};

use lambda_host::test_util::request_parts;

fn decode(event: &str) -> Decoded {
    envelope::decode(event.as_bytes()).unwrap_or_else(|err| panic!("{err}: {event}"))
}

fn assert_decoded_as_lambda_http_does(event: &str) {
    let theirs = lambda_http::request::from_str(event).unwrap_or_else(|err| panic!("{err}: {event}"));
    let ours = decode(event).request;
    assert_eq!(request_parts(&ours), request_parts(&theirs), "{event}");
}

#[test]
fn every_sample_event_decodes_to_the_request_lambda_http_makes_of_it() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("tests/data/") {
        let path = entry.expect("an entry").path();
        // `lambda_http` reads no VPC Lattice payload 1.0: compared below
        // with its payload 2.0 twin.
        if path.ends_with("vpc-lattice-v1.json") {
            continue;
        }
        let event = std::fs::read_to_string(&path).expect("readable");
        assert_decoded_as_lambda_http_does(&event);
        seen += 1;
    }
    assert!(seen >= 9, "{seen} events");
}

/// Well-formed values for each field: what a front door sends.
fn segment() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._~-]{1,8}|%[0-9A-F]{2}|[a-z]+%20[a-z]+"
}

fn path() -> impl Strategy<Value = String> {
    proptest::collection::vec(segment(), 0..4).prop_map(|segments| format!("/{}", segments.join("/")))
}

fn host() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(proptest::sample::select(vec![
        "api.example.com".to_owned(),
        "h5t8r2m6vb.execute-api.us-east-1.amazonaws.com".to_owned(),
        "localhost:3000".to_owned(),
        "127.0.0.1:9000".to_owned(),
        "[::1]:8080".to_owned(),
    ]))
}

fn proto() -> impl Strategy<Value = Option<&'static str>> {
    proptest::option::of(proptest::sample::select(vec!["https", "http"]))
}

fn stage() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("\\$default|prod|v[0-9]|[a-z]{1,6}")
}

fn text() -> impl Strategy<Value = String> {
    "[ -~é€\\u{1F331}]{0,16}"
}

fn body() -> impl Strategy<Value = (Option<String>, bool)> {
    prop_oneof![
        Just((None, false)),
        text().prop_map(|text| (Some(text), false)),
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(|bytes| {
            use base64::Engine;
            (
                Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
                true,
            )
        }),
    ]
}

/// A header name and value as front doors pass them on.
fn header() -> impl Strategy<Value = (String, String)> {
    ("[A-Za-z][A-Za-z0-9-]{0,10}", "[ -~]{0,16}").prop_map(|(name, value)| (name, value.trim().to_owned()))
}

fn headers_json(host: &Option<String>, proto: Option<&str>, extra: &[(String, String)]) -> Value {
    let mut headers = serde_json::Map::new();
    for (name, value) in extra {
        headers.insert(name.clone(), json!(value));
    }
    if let Some(host) = host {
        headers.insert("Host".to_owned(), json!(host));
    }
    if let Some(proto) = proto {
        headers.insert("X-Forwarded-Proto".to_owned(), json!(proto));
    }
    Value::Object(headers)
}

fn multi_value(headers: &Value) -> Value {
    Value::Object(
        headers
            .as_object()
            .expect("an object")
            .iter()
            .map(|(name, value)| (name.clone(), json!([value])))
            .collect(),
    )
}

fn query_value() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 &=%+é]{0,8}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_well_formed_http_api_event_decodes_as_lambda_http_decodes_it(
        raw_path in path(), stage in stage(), host in host(), domain in host(), proto in proto(),
        headers in proptest::collection::vec(header(), 0..4),
        query in proptest::option::of("([a-z]{1,4}=[A-Za-z0-9%+]{0,6})(&[a-z]{1,4}=[A-Za-z0-9%+]{0,6}){0,2}"),
        cookies in proptest::option::of(proptest::collection::vec("[a-z]{1,4}=[a-z0-9]{0,4}", 0..3)),
        (body, base64) in body(), method in proptest::sample::select(vec!["POST", "GET", "PUT", "DELETE"]),
        route_key in proptest::option::of("\\$default|POST /items|ANY /\\{proxy\\+\\}"),
        path_parameters in proptest::collection::hash_map("[a-z]{1,4}", "[a-z0-9]{0,4}", 0..2),
        stage_variables in proptest::collection::hash_map("[a-z]{1,4}", "[a-z0-9]{0,4}", 0..2),
    ) {
        let mut event = json!({
            "version": "2.0",
            "rawPath": raw_path,
            "headers": headers_json(&host, proto, &headers),
            "requestContext": {
                "domainName": domain,
                "http": { "method": method, "path": raw_path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1" },
                "stage": stage,
                "routeKey": route_key,
                "timeEpoch": 0
            },
            "pathParameters": path_parameters,
            "stageVariables": stage_variables,
            "body": body,
            "isBase64Encoded": base64
        });
        if let Some(query) = query {
            event["rawQueryString"] = json!(query);
        }
        if let Some(cookies) = cookies {
            event["cookies"] = json!(cookies);
        }
        assert_decoded_as_lambda_http_does(&event.to_string());
    }

    #[test]
    fn a_well_formed_rest_api_event_decodes_as_lambda_http_decodes_it(
        raw_path in path(), stage in stage(), host in host(), domain in host(), proto in proto(),
        headers in proptest::collection::vec(header(), 0..4),
        single in proptest::option::of(query_value()), multi in proptest::collection::vec(query_value(), 0..3),
        (body, base64) in body(), method in proptest::sample::select(vec!["POST", "GET", "PATCH"]),
        path_parameters in proptest::collection::hash_map("[a-z]{1,4}", "[a-z0-9]{0,4}", 0..2),
        stage_variables in proptest::collection::hash_map("[a-z]{1,4}", "[a-z0-9]{0,4}", 0..2),
    ) {
        let headers = headers_json(&host, proto, &headers);
        let event = json!({
            "resource": "/items",
            "path": raw_path,
            "httpMethod": method,
            "multiValueHeaders": multi_value(&headers),
            "headers": headers,
            "queryStringParameters": single.as_ref().map(|value| json!({ "q": value })),
            "multiValueQueryStringParameters": if multi.is_empty() { Value::Null } else { json!({ "q": multi }) },
            "pathParameters": path_parameters,
            "stageVariables": stage_variables,
            "requestContext": {
                "resourcePath": "/items", "httpMethod": method, "path": raw_path,
                "stage": stage, "domainName": domain
            },
            "body": body,
            "isBase64Encoded": base64
        });
        assert_decoded_as_lambda_http_does(&event.to_string());
    }

    #[test]
    fn a_well_formed_alb_event_decodes_as_lambda_http_decodes_it(
        raw_path in path(), host in host(), proto in proto(),
        headers in proptest::collection::vec(header(), 0..4), multi_value_headers in proptest::bool::ANY,
        single in proptest::option::of("[A-Za-z0-9%+]{0,8}"),
        (body, base64) in body(), method in proptest::sample::select(vec!["POST", "GET"]),
    ) {
        let headers = headers_json(&host, proto, &headers);
        // An ALB target group sends one form of headers or the other.
        let (headers, multi) = if multi_value_headers {
            (Value::Null, multi_value(&headers))
        } else {
            (headers, Value::Null)
        };
        let event = json!({
            "requestContext": { "elb": { "targetGroupArn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/t/0" } },
            "httpMethod": method,
            "path": raw_path,
            "queryStringParameters": single.as_ref().map(|value| json!({ "q": value })).unwrap_or(json!({})),
            "headers": headers,
            "multiValueHeaders": multi,
            "body": body,
            "isBase64Encoded": base64
        });
        assert_decoded_as_lambda_http_does(&event.to_string());
    }
}

/// A VPC Lattice payload 1.0 event (`lambda_http` reads none) becomes the
/// request its payload 2.0 twin becomes, with `lambda_http`'s reading of
/// the twin: the same method, URI, headers (a comma-separated value split
/// into values, as `aws_lambda_events` reads payload 1.0), query and body,
/// and no request context, since payload 1.0 carries none.
#[test]
fn a_vpc_lattice_v1_event_decodes_as_lambda_http_decodes_its_v2_twin() {
    let v1 = decode(&crate::data("vpc-lattice-v1.json"));
    // Payload 1.0 keeps the last value of a repeated query parameter.
    let twin = crate::data("vpc-lattice-v2.json").replace(r#"["aroid", "fern"]"#, r#"["fern"]"#);
    let theirs = lambda_http::request::from_str(&twin).expect("a VPC Lattice event");

    let mut ours = request_parts(&v1.request);
    let mut theirs = request_parts(&theirs);
    assert_eq!(ours["request_context"], Value::Null);
    ours["request_context"] = Value::Null;
    theirs["request_context"] = Value::Null;
    assert_eq!(ours, theirs);
    assert_eq!(v1.origin, envelope::RequestOrigin::VpcLattice);
}

/// A header list as VPC Lattice's payload 2.0 sends it.
fn lattice_headers(headers: &Value) -> Value {
    multi_value(headers)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_well_formed_vpc_lattice_v2_event_decodes_as_lambda_http_decodes_it(
        raw_path in path(), host in host(), proto in proto(),
        headers in proptest::collection::vec(header(), 0..4),
        // One name: a query map's order is a hash map's.
        query in proptest::option::of(proptest::collection::vec("[A-Za-z0-9%+]{0,6}", 1..3)),
        (body, base64) in body(), method in proptest::option::of(proptest::sample::select(vec!["POST", "GET", "DELETE"])),
        identity in proptest::bool::ANY,
    ) {
        let headers = headers_json(&host, proto, &headers);
        let mut event = json!({
            "version": "2.0",
            "path": raw_path,
            "headers": lattice_headers(&headers),
            "queryStringParameters": query.map_or(json!({}), |values| json!({ "q": values })),
            "body": body,
            "isBase64Encoded": base64,
            "requestContext": {
                "serviceNetworkArn": "arn:aws:vpc-lattice:us-east-1:123456789012:servicenetwork/sn-0123456789abcdef0",
                "serviceArn": "arn:aws:vpc-lattice:us-east-1:123456789012:service/svc-0123456789abcdef0",
                "targetGroupArn": "arn:aws:vpc-lattice:us-east-1:123456789012:targetgroup/tg-0123456789abcdef0",
                "region": "us-east-1",
                "timeEpoch": "1763716480455123"
            }
        });
        if let Some(method) = method {
            event["method"] = json!(method);
        }
        if identity {
            event["requestContext"]["identity"] = json!({ "type": "AWS_IAM", "principal": "arn:aws:iam::123456789012:role/r" });
        }
        assert_decoded_as_lambda_http_does(&event.to_string());
    }
}

/// The JSON `envelope::encode` answers an event of this file with.
fn encoded(file: &str, response: Response<Body>) -> String {
    let origin = decode(&crate::data(file)).origin;
    let json = envelope::encode(origin, response).expect("a response the front door's JSON can carry");
    String::from_utf8(json).expect("UTF-8")
}

/// A response as a function might build one: a JSON body, headers it sets
/// on every response, and one more, as a 401 has.
fn handler_response() -> Response<Body> {
    let mut response = Response::new(Body::from(
        r#"{"error":"unauthorized","message":"no credentials"}"#.to_owned(),
    ));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        HeaderName::from_static("x-request-id"),
        HeaderValue::from_static("c6af9ac6-7b61-11e6-9a41-93e8deadbeef"),
    );
    headers.insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"items\""),
    );
    response
}

const HANDLER_REST: &str = r#"{"statusCode":401,"headers":{},"multiValueHeaders":{"content-type":["application/json"],"cache-control":["no-store"],"x-content-type-options":["nosniff"],"x-request-id":["c6af9ac6-7b61-11e6-9a41-93e8deadbeef"],"www-authenticate":["Bearer realm=\"items\""]},"body":"{\"error\":\"unauthorized\",\"message\":\"no credentials\"}","isBase64Encoded":false}"#;
const HANDLER_HTTP: &str = r#"{"statusCode":401,"headers":{"content-type":"application/json","cache-control":"no-store","x-content-type-options":"nosniff","x-request-id":"c6af9ac6-7b61-11e6-9a41-93e8deadbeef","www-authenticate":"Bearer realm=\"items\""},"multiValueHeaders":{},"body":"{\"error\":\"unauthorized\",\"message\":\"no credentials\"}","isBase64Encoded":false,"cookies":[]}"#;
const HANDLER_LATTICE: &str = r#"{"isBase64Encoded":false,"statusCode":401,"headers":{"content-type":"application/json","cache-control":"no-store","x-content-type-options":"nosniff","x-request-id":"c6af9ac6-7b61-11e6-9a41-93e8deadbeef","www-authenticate":"Bearer realm=\"items\""},"body":"{\"error\":\"unauthorized\",\"message\":\"no credentials\"}"}"#;
const HANDLER_ALB: &str = r#"{"statusCode":401,"statusDescription":"401 Unauthorized","headers":{"content-type":"application/json","cache-control":"no-store","x-content-type-options":"nosniff","x-request-id":"c6af9ac6-7b61-11e6-9a41-93e8deadbeef","www-authenticate":"Bearer realm=\"items\""},"multiValueHeaders":{"content-type":["application/json"],"cache-control":["no-store"],"x-content-type-options":["nosniff"],"x-request-id":["c6af9ac6-7b61-11e6-9a41-93e8deadbeef"],"www-authenticate":["Bearer realm=\"items\""]},"body":"{\"error\":\"unauthorized\",\"message\":\"no credentials\"}","isBase64Encoded":false}"#;

#[test]
fn each_front_door_is_answered_in_its_own_format() {
    for (file, expected) in [
        ("rest-api-stage.json", HANDLER_REST),
        ("rest-api-custom-domain.json", HANDLER_REST),
        ("http-api.json", HANDLER_HTTP),
        ("http-api-custom-domain.json", HANDLER_HTTP),
        ("function-url.json", HANDLER_HTTP),
        ("alb.json", HANDLER_ALB),
        ("vpc-lattice-v2.json", HANDLER_LATTICE),
        ("vpc-lattice-v1.json", HANDLER_LATTICE),
    ] {
        assert_eq!(encoded(file, handler_response()), expected, "{file}");
    }
}

/// What the handler never sends today, pinned so that it stays as it was:
/// a header with two values, cookies, a status without a reason phrase,
/// an empty body. An HTTP API answer carries the first value of a repeated
/// header only (its type's serializer writes one value per name), and
/// `Set-Cookie` goes to `cookies`.
fn unusual_response(status: u16) -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = StatusCode::from_u16(status).expect("a status");
    let headers = response.headers_mut();
    headers.append(VARY, HeaderValue::from_static("origin"));
    headers.append(VARY, HeaderValue::from_static("accept"));
    headers.append(SET_COOKIE, HeaderValue::from_static("a=1; Secure"));
    headers.append(SET_COOKIE, HeaderValue::from_static("b=2"));
    response
}

#[test]
fn repeated_headers_cookies_and_reasonless_statuses_keep_their_front_doors_shape() {
    for (file, status, expected) in [
        (
            "rest-api-stage.json",
            418,
            r#"{"statusCode":418,"headers":{},"multiValueHeaders":{"vary":["origin","accept"],"set-cookie":["a=1; Secure","b=2"]},"body":"","isBase64Encoded":false}"#,
        ),
        (
            "http-api.json",
            418,
            r#"{"statusCode":418,"headers":{"vary":"origin"},"multiValueHeaders":{},"body":"","isBase64Encoded":false,"cookies":["a=1; Secure","b=2"]}"#,
        ),
        (
            "vpc-lattice-v2.json",
            418,
            r#"{"isBase64Encoded":false,"statusCode":418,"headers":{"vary":"origin","set-cookie":"a=1; Secure"},"body":""}"#,
        ),
        (
            "alb.json",
            418,
            r#"{"statusCode":418,"statusDescription":"418 I'm a teapot","headers":{"vary":"origin","set-cookie":"a=1; Secure"},"multiValueHeaders":{"vary":["origin","accept"],"set-cookie":["a=1; Secure","b=2"]},"body":"","isBase64Encoded":false}"#,
        ),
        (
            "alb.json",
            599,
            r#"{"statusCode":599,"statusDescription":"599 ","headers":{"vary":"origin","set-cookie":"a=1; Secure"},"multiValueHeaders":{"vary":["origin","accept"],"set-cookie":["a=1; Secure","b=2"]},"body":"","isBase64Encoded":false}"#,
        ),
    ] {
        assert_eq!(
            encoded(file, unusual_response(status)),
            expected,
            "{file} {status}"
        );
    }
}

#[test]
fn a_byte_body_is_sent_base64_encoded() {
    for (file, expected) in [
        (
            "rest-api-stage.json",
            r#"{"statusCode":200,"headers":{},"multiValueHeaders":{"content-type":["application/octet-stream"]},"body":"AJ+Slg==","isBase64Encoded":true}"#,
        ),
        (
            "http-api.json",
            r#"{"statusCode":200,"headers":{"content-type":"application/octet-stream"},"multiValueHeaders":{},"body":"AJ+Slg==","isBase64Encoded":true,"cookies":[]}"#,
        ),
        (
            "alb.json",
            r#"{"statusCode":200,"statusDescription":"200 OK","headers":{"content-type":"application/octet-stream"},"multiValueHeaders":{"content-type":["application/octet-stream"]},"body":"AJ+Slg==","isBase64Encoded":true}"#,
        ),
        (
            "vpc-lattice-v2.json",
            r#"{"isBase64Encoded":true,"statusCode":200,"headers":{"content-type":"application/octet-stream"},"body":"AJ+Slg=="}"#,
        ),
    ] {
        let mut response = Response::new(Body::from(vec![0_u8, 159, 146, 150]));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        assert_eq!(encoded(file, response), expected, "{file}");
    }
}

/// `lambda_http`'s sentence for a payload that is none of its events.
const NOT_A_FRONT_DOOR: &str = "unsupported event: this function expects a JSON payload from Amazon API Gateway, \
     Amazon Elastic Load Balancer, or AWS Lambda Function URLs, but the data doesn't match any of those services' events";

#[test]
fn a_payload_that_is_no_front_doors_event_is_unsupported_with_one_line() {
    for (payload, expected) in [
        (
            r#"{"Records":[{"messageId":"1","eventSource":"aws:sqs","body":"{}"}]}"#,
            NOT_A_FRONT_DOOR,
        ),
        ("{}", NOT_A_FRONT_DOOR),
        ("[]", NOT_A_FRONT_DOOR),
        (r#"{"httpMethod":"POST"}"#, NOT_A_FRONT_DOOR),
        (
            "",
            "unsupported event: EOF while parsing a value at line 1 column 0",
        ),
        ("not JSON", "unsupported event: expected ident at line 1 column 2"),
    ] {
        let err = envelope::decode(payload.as_bytes()).expect_err(payload);
        assert_eq!(err.to_string(), expected, "{payload}");
    }
}
