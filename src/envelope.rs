//! The event envelope: the JSON a front door hands Lambda, turned into an
//! `http::Request` by `lambda_http`'s own conversion, minus its panics; and
//! the `Response` turned back into the front door's JSON.
//!
//! `lambda_http` 1.3 builds the request with `expect`s: a body flagged
//! `isBase64Encoded` that is not base64, or a `Host`, `X-Forwarded-Proto`,
//! path or query that does not form a URL, panics inside the conversion. No
//! front door sends such an event (they come from hand-made direct invokes),
//! but nothing a caller sends may panic the function. So [`decode`] checks
//! those fields first, sets aside what would panic, and records what it set
//! aside in [`Repairs`], a request extension that the handler reads (a body
//! that is not base64 is a 400) and logs.

use std::fmt;

use base64::Engine;
use lambda_http::http::header::{HOST, HeaderMap, HeaderName};
use lambda_http::http::uri::{PathAndQuery, Uri};
use lambda_http::request::{LambdaRequest, RequestOrigin};
use lambda_http::{Body, IntoResponse, Request, Response, TransformResponse};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use url::Url;

const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// What [`decode`] set aside so that the conversion could not panic. Every
/// field is false for an event from a real front door.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repairs {
    /// The body was flagged `isBase64Encoded` but is not base64: dropped,
    /// and the request is answered 400.
    pub body_not_base64: bool,
    /// `Host` (or the context's `domainName`) and `X-Forwarded-Proto` did
    /// not form a URL with the path: ignored. We never route on them.
    pub host_ignored: bool,
    /// The query string did not form a URL: ignored. We take no query.
    pub query_ignored: bool,
    /// The path (with the stage) did not form a URL: replaced by `/`,
    /// which is not ours, so the request is answered 404.
    pub path_ignored: bool,
}

impl Repairs {
    pub fn any(&self) -> bool {
        *self != Self::default()
    }
}

/// For the log line: what was set aside, in words.
impl fmt::Display for Repairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            (self.body_not_base64, "body flagged isBase64Encoded is not base64"),
            (self.host_ignored, "Host or X-Forwarded-Proto does not form a URL"),
            (self.query_ignored, "query string does not form a URL"),
            (self.path_ignored, "path does not form a URL"),
        ];
        let mut first = true;
        for (_, text) in parts.iter().filter(|(set, _)| *set) {
            if !first {
                f.write_str("; ")?;
            }
            f.write_str(text)?;
            first = false;
        }
        Ok(())
    }
}

/// An event that is not from a front door we serve (an SQS record sent by
/// mistake, a test event from the console): the invocation fails with this
/// one line, and no handler runs.
#[derive(Debug)]
pub struct UnsupportedEvent(serde_json::Error);

impl fmt::Display for UnsupportedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // serde's message for an untagged enum is lambda_http's sentence:
        // "this function expects a JSON payload from Amazon API Gateway…".
        write!(f, "unsupported event: {}", self.0)
    }
}

impl std::error::Error for UnsupportedEvent {}

/// A request ready for the handler, and where it came from (which decides
/// the shape of the response).
#[derive(Debug)]
pub struct Decoded {
    pub request: Request,
    pub origin: RequestOrigin,
}

/// Parses an invocation's payload into a request, through `lambda_http`'s
/// own types and conversion, after [`repair`] has made the conversion safe.
/// [`Repairs`] is attached to the request as an extension.
pub fn decode(payload: &[u8]) -> Result<Decoded, UnsupportedEvent> {
    let mut event = match http_api_event(payload) {
        Some(event) => event,
        None => serde_json::from_slice(payload).map_err(UnsupportedEvent)?,
    };
    let repairs = repair(&mut event);
    let origin = event.request_origin();
    let mut request = Request::from(event);
    request.extensions_mut().insert(repairs);
    Ok(Decoded { request, origin })
}

/// The top-level key every REST API and ALB event has, and no HTTP API
/// (payload 2.0) or function URL event.
#[derive(Deserialize)]
struct Shape {
    #[serde(rename = "httpMethod")]
    http_method: Option<IgnoredAny>,
}

/// The event as `lambda_http` would read it, when it can only be an HTTP
/// API or function URL event; `None` to let `lambda_http` decide. Its
/// deserializer tries the REST API's event first, then the HTTP API's:
/// a whole failed parse of every HTTP API event before the one that
/// succeeds. Without a top-level `httpMethod`, which the REST API's and the
/// ALB's events require, only the HTTP API's can match, so it is read
/// directly, and the result is the same (`envelope` tests hold both equal).
fn http_api_event(payload: &[u8]) -> Option<LambdaRequest> {
    match serde_json::from_slice(payload) {
        Ok(Shape { http_method: None }) => serde_json::from_slice(payload)
            .ok()
            .map(LambdaRequest::ApiGatewayV2),
        _ => None,
    }
}

/// The front door's JSON for `response`, by `lambda_http`'s own conversion
/// (the same one `lambda_http::run` uses).
pub async fn encode(origin: RequestOrigin, response: Response<Body>) -> Vec<u8> {
    let transform = TransformResponse::<'_, Response<Body>, std::convert::Infallible>::Response(
        origin,
        response.into_response(),
    );
    let Ok(response) = transform.await;
    to_json(&response)
}

fn to_json(value: &impl Serialize) -> Vec<u8> {
    // The response types are plain structs of strings, numbers and maps,
    // which cannot fail to serialize; an empty object keeps this panic-free.
    serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec())
}

/// The fields of one event that `lambda_http`'s conversion reads, by front door.
struct Fields<'a> {
    headers: &'a mut HeaderMap,
    /// REST API and ALB events carry headers twice; both are kept in step.
    multi_value_headers: Option<&'a mut HeaderMap>,
    domain_name: Option<&'a mut Option<String>>,
    stage: Option<&'a mut Option<String>>,
    path: &'a mut Option<String>,
    /// Only the HTTP API appends its query string unencoded.
    raw_query: Option<&'a mut Option<String>>,
    body: &'a mut Option<String>,
    is_base64_encoded: &'a mut bool,
}

fn fields(event: &mut LambdaRequest) -> Option<Fields<'_>> {
    match event {
        LambdaRequest::ApiGatewayV1(event) => Some(Fields {
            headers: &mut event.headers,
            multi_value_headers: Some(&mut event.multi_value_headers),
            domain_name: Some(&mut event.request_context.domain_name),
            stage: Some(&mut event.request_context.stage),
            path: &mut event.path,
            raw_query: None,
            body: &mut event.body,
            is_base64_encoded: &mut event.is_base64_encoded,
        }),
        LambdaRequest::ApiGatewayV2(event) => Some(Fields {
            headers: &mut event.headers,
            multi_value_headers: None,
            domain_name: Some(&mut event.request_context.domain_name),
            stage: Some(&mut event.request_context.stage),
            path: &mut event.raw_path,
            raw_query: Some(&mut event.raw_query_string),
            body: &mut event.body,
            is_base64_encoded: &mut event.is_base64_encoded,
        }),
        LambdaRequest::Alb(event) => Some(Fields {
            headers: &mut event.headers,
            multi_value_headers: Some(&mut event.multi_value_headers),
            domain_name: None,
            stage: None,
            path: &mut event.path,
            raw_query: None,
            body: &mut event.body,
            is_base64_encoded: &mut event.is_base64_encoded,
        }),
        // Only the front doors enabled in Cargo.toml exist; a new variant
        // in a later lambda_http is left to its own conversion.
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// Sets aside every field that would make `lambda_http`'s conversion panic.
fn repair(event: &mut LambdaRequest) -> Repairs {
    let mut repairs = Repairs::default();
    let Some(mut fields) = fields(event) else {
        return repairs;
    };

    if *fields.is_base64_encoded
        && let Some(body) = fields.body.as_deref()
        && base64::engine::general_purpose::STANDARD.decode(body).is_err()
    {
        *fields.body = None;
        *fields.is_base64_encoded = false;
        repairs.body_not_base64 = true;
    }

    if let Some(query) = fields.raw_query
        && let Some(text) = query.as_deref()
        && !text.is_empty()
        && PathAndQuery::try_from(format!("/?{text}")).is_err()
    {
        *query = None;
        repairs.query_ignored = true;
    }

    let path = fields.path.as_deref().unwrap_or_default();
    let stage = fields.stage.as_ref().and_then(|stage| stage.as_deref());
    // lambda_http puts the stage in front of the path unless told not to
    // (AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH): both forms must build.
    let paths = [path.to_owned(), with_stage(stage, path)];
    if !paths.iter().all(|path| builds(path, None)) {
        *fields.path = Some("/".to_owned());
        if let Some(stage) = fields.stage.as_deref_mut() {
            *stage = None;
        }
        repairs.path_ignored = true;
    }

    let path = fields.path.as_deref().unwrap_or_default();
    let stage = fields.stage.as_ref().and_then(|stage| stage.as_deref());
    let paths = [path.to_owned(), with_stage(stage, path)];
    let host = fields
        .headers
        .get(HOST)
        .map(|value| value.to_str().ok())
        .or_else(|| fields.domain_name.as_ref().map(|name| name.as_deref()));
    let scheme = fields
        .headers
        .get(X_FORWARDED_PROTO)
        .map_or(Some("https"), |value| value.to_str().ok());
    if let Some(host) = host {
        let forms = match (host, scheme) {
            (Some(host), Some(scheme)) => paths.iter().all(|path| builds(path, Some((scheme, host)))),
            _ => false,
        };
        if !forms {
            for headers in [Some(&mut *fields.headers), fields.multi_value_headers]
                .into_iter()
                .flatten()
            {
                headers.remove(HOST);
                headers.remove(X_FORWARDED_PROTO);
            }
            if let Some(name) = fields.domain_name.as_deref_mut() {
                *name = None;
            }
            repairs.host_ignored = true;
        }
    }
    repairs
}

/// `lambda_http`'s `apigw_path_with_stage`.
fn with_stage(stage: Option<&str>, path: &str) -> String {
    match stage {
        None | Some("$default") => path.to_owned(),
        Some(stage) if path.starts_with(&format!("/{stage}/")) => path.to_owned(),
        Some(stage) => format!("/{stage}{path}"),
    }
}

/// Whether `lambda_http`'s `build_request_uri` succeeds for this path and
/// host: the URL it formats must parse with `url`, and what `url` writes
/// back must parse as an `http::Uri`. The query it appends is either
/// form-encoded (REST API, ALB) or checked on its own (HTTP API).
fn builds(path: &str, origin: Option<(&str, &str)>) -> bool {
    let url = match origin {
        None => Url::parse(&format!("http://localhost{path}")).map(|url| url.path().to_owned()),
        Some((scheme, host)) => {
            // A host with a path, query or credentials of its own would
            // parse, but would change what the request means: not a host.
            let bare = Url::parse(&format!("{scheme}://{host}")).is_ok_and(|url| {
                url.username().is_empty()
                    && url.password().is_none()
                    && url.path() == "/"
                    && url.query().is_none()
                    && url.fragment().is_none()
            });
            if !bare {
                return false;
            }
            Url::parse(&format!("{scheme}://{host}{path}")).map(String::from)
        }
    };
    url.is_ok_and(|url| Uri::try_from(url).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::RequestExt;
    use serde_json::{Value, json};

    #[test]
    fn the_http_api_shortcut_reads_every_sample_event_as_lambda_http_does() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("events");
        let mut read_directly = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let payload = std::fs::read(&path).unwrap();
            let theirs: LambdaRequest = serde_json::from_slice(&payload).unwrap();
            match http_api_event(&payload) {
                Some(ours) => {
                    assert!(matches!(theirs, LambdaRequest::ApiGatewayV2(_)), "{path:?}");
                    assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "{path:?}");
                    read_directly += 1;
                }
                None => assert!(!matches!(theirs, LambdaRequest::ApiGatewayV2(_)), "{path:?}"),
            }
        }
        assert!(read_directly >= 10, "{read_directly} HTTP API events");
    }

    fn http_api(change: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut event = json!({
            "version": "2.0",
            "routeKey": "POST /plants",
            "rawPath": "/plants",
            "rawQueryString": "",
            "headers": {
                "content-type": "application/json",
                "host": "api.example.com",
                "x-forwarded-proto": "https"
            },
            "requestContext": {
                "domainName": "api.example.com",
                "http": { "method": "POST", "path": "/plants", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1" },
                "routeKey": "POST /plants",
                "stage": "$default",
                "timeEpoch": 0
            },
            "body": "{\"id\":1,\"name\":\"Fern\"}",
            "isBase64Encoded": false
        });
        change(&mut event);
        event.to_string().into_bytes()
    }

    fn repairs(decoded: &Decoded) -> Repairs {
        *decoded
            .request
            .extensions()
            .get::<Repairs>()
            .expect("repairs attached")
    }

    #[test]
    fn an_event_from_a_front_door_is_decoded_with_nothing_set_aside() {
        let decoded = decode(&http_api(|_| {})).expect("an HTTP API event");

        assert_eq!(repairs(&decoded), Repairs::default());
        assert_eq!(
            decoded.request.uri().to_string(),
            "https://api.example.com/plants"
        );
        assert_eq!(decoded.request.body().as_ref(), br#"{"id":1,"name":"Fern"}"#);
    }

    #[test]
    fn a_base64_body_is_decoded_and_one_that_is_not_base64_is_set_aside() {
        let good = decode(&http_api(|event| {
            event["body"] = json!("eyJpZCI6MX0=");
            event["isBase64Encoded"] = json!(true);
        }))
        .expect("decoded");
        assert_eq!(good.request.body().as_ref(), br#"{"id":1}"#);
        assert!(!repairs(&good).any());

        let bad = decode(&http_api(|event| {
            event["body"] = json!("not base64!");
            event["isBase64Encoded"] = json!(true);
        }))
        .expect("decoded");
        assert_eq!(
            repairs(&bad),
            Repairs {
                body_not_base64: true,
                ..Repairs::default()
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
            let decoded = decode(&http_api(|event| {
                event["headers"]["host"] = json!(host);
                event["headers"]["x-forwarded-proto"] = json!(proto);
                event["requestContext"]["domainName"] = json!(host);
            }))
            .expect("decoded");

            assert_eq!(
                repairs(&decoded),
                Repairs {
                    host_ignored: true,
                    ..Repairs::default()
                },
                "{host:?} {proto:?}"
            );
            assert_eq!(decoded.request.raw_http_path(), "/plants", "{host:?} {proto:?}");
            assert!(decoded.request.headers().get(HOST).is_none());
        }
    }

    #[test]
    fn a_path_or_query_that_does_not_form_a_url_is_set_aside() {
        let decoded = decode(&http_api(|event| event["rawPath"] = json!("x:99999"))).expect("decoded");
        assert!(repairs(&decoded).path_ignored, "{:?}", repairs(&decoded));
        assert_eq!(decoded.request.raw_http_path(), "/");

        let decoded = decode(&http_api(|event| event["rawQueryString"] = json!("a=b c"))).expect("decoded");
        assert_eq!(
            repairs(&decoded),
            Repairs {
                query_ignored: true,
                ..Repairs::default()
            }
        );
        assert_eq!(decoded.request.raw_http_path(), "/plants");
    }

    #[test]
    fn an_event_from_another_service_is_unsupported_with_lambda_https_sentence() {
        let sqs = json!({ "Records": [{ "messageId": "1", "eventSource": "aws:sqs", "body": "{}" }] });

        let err = decode(sqs.to_string().as_bytes()).expect_err("not an HTTP event");

        assert!(
            err.to_string().starts_with(
                "unsupported event: this function expects a JSON payload from Amazon API Gateway"
            ),
            "{err}"
        );
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
            domain in TEXT, body in TEXT, base64 in proptest::bool::ANY, rest in proptest::bool::ANY,
        ) {
            let event = if rest {
                json!({
                    "resource": "/plants", "path": path, "httpMethod": "POST",
                    "headers": { "host": host, "x-forwarded-proto": proto },
                    "multiValueHeaders": { "host": [host], "x-forwarded-proto": [proto] },
                    "queryStringParameters": { "q": query },
                    "multiValueQueryStringParameters": { "q": [query] },
                    "requestContext": { "stage": stage, "domainName": domain, "resourcePath": "/plants",
                                        "httpMethod": "POST", "path": path },
                    "body": body, "isBase64Encoded": base64
                })
            } else {
                serde_json::from_slice(&http_api(|event| {
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
            proptest::prop_assert!(decoded.request.extensions().get::<Repairs>().is_some());
        }
    }

    #[test]
    fn repairs_read_as_one_line() {
        let repairs = Repairs {
            body_not_base64: true,
            host_ignored: true,
            ..Repairs::default()
        };
        assert_eq!(
            repairs.to_string(),
            "body flagged isBase64Encoded is not base64; Host or X-Forwarded-Proto does not form a URL"
        );
    }
}
