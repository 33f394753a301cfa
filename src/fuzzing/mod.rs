//! The bodies of the fuzz targets, as plain functions of the input bytes,
//! behind the `test-util` feature (test support, never in a bootstrap).
//!
//! libFuzzer drives them through `fuzz/fuzz_targets/` (`make fuzz`); `make
//! test` replays the committed corpus through the very same functions on
//! stable Rust, without libFuzzer (`tests/api/fuzz_corpus.rs`). A crash the
//! fuzzer once found therefore stays fixed.
//!
//! Each function panics when an invariant of the contract breaks: a panic is
//! what the fuzzer reports, and what fails the replay test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod in_process;

use crate::auth::{AuthError, Authenticator, bearer_token};
use crate::error::ApiError;
use crate::handler::App;
use crate::plant::{MAX_BODY_BYTES, NewPlant, Plant};
use crate::store::MemoryStore;
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequestContext;
use lambda_http::http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use lambda_http::http::{Method, Uri};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt};
use serde_json::Value;

pub use in_process::{JsonResponse, block_on};

/// The one token the fuzzed function accepts.
pub const TOKEN: &str = "fuzz-token";
/// The Lambda request id every fuzzed request carries.
pub const REQUEST_ID: &str = "fuzz-request-id";

/// The statuses a function with static tokens and an in-memory store may
/// answer. No 403 (no scopes without JWTs), no 500 or 503 (the store cannot
/// fail): any of those would be a bug.
const STATUSES: [u16; 8] = [200, 400, 401, 404, 405, 409, 413, 415];

/// The Authorization parser. Each line of the input is one `Authorization`
/// header (an empty input is a request without one); lines that are not a
/// valid header value are left out, as no front door could deliver them.
pub fn authorization(data: &[u8]) {
    let mut headers = HeaderMap::new();
    if !data.is_empty() {
        for line in data.split(|&b| b == b'\n') {
            if let Ok(value) = HeaderValue::from_bytes(line) {
                headers.append(AUTHORIZATION, value);
            }
        }
    }
    let values: Vec<&[u8]> = headers
        .get_all(AUTHORIZATION)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();

    let parsed = bearer_token(&headers);
    assert_eq!(
        parsed.clone().map(str::as_bytes),
        expected_token(&values),
        "bearer_token disagrees with RFC 6750 for {values:?}"
    );

    let authenticated = block_on(Authenticator::with_static_tokens(&[TOKEN]).authenticate(&headers));
    match parsed {
        Ok(token) if token == TOKEN => assert_eq!(authenticated, Ok(())),
        Ok(_) => assert_eq!(authenticated, Err(AuthError::InvalidToken)),
        Err(err) => assert_eq!(authenticated, Err(err)),
    }
}

/// RFC 6750 §2.1 and RFC 7235 §2.1, written as plainly as possible and
/// independently of `bearer_token`: exactly one header, the scheme `Bearer`
/// in any case, one or more spaces, then a `b64token`.
fn expected_token<'a>(values: &[&'a [u8]]) -> Result<&'a [u8], AuthError> {
    let value = match values {
        [] => return Err(AuthError::MissingCredentials),
        [value] => *value,
        _ => return Err(AuthError::InvalidToken),
    };
    // Header values with obs-text (bytes >= 0x80) are not text.
    if !value.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        return Err(AuthError::InvalidToken);
    }
    let scheme_end = value.iter().position(|&b| b == b' ').unwrap_or(value.len());
    if !value[..scheme_end].eq_ignore_ascii_case(b"bearer") {
        return Err(AuthError::MissingCredentials);
    }
    let token = &value[scheme_end..];
    let token = &token[token.iter().take_while(|&&b| b == b' ').count()..];
    if token.is_empty() {
        return Err(AuthError::MissingCredentials);
    }
    let padding = token.iter().rev().take_while(|&&b| b == b'=').count();
    let body = &token[..token.len() - padding];
    let b64 = |b: &u8| b.is_ascii_alphanumeric() || b"-._~+/".contains(b);
    if body.is_empty() || !body.iter().all(b64) {
        return Err(AuthError::InvalidToken);
    }
    Ok(token)
}

/// The whole request path up to the store. The input is a small HTTP-like
/// text, so that the corpus can be read and written by hand:
///
/// ```text
/// METHOD SP TARGET [SP STAGE] LF
/// *(NAME ":" [SP] VALUE LF)
/// LF
/// BODY
/// ```
///
/// `STAGE` puts the request behind an HTTP API stage (the raw path then
/// carries it, as API Gateway sends it). Headers that are not valid HTTP are
/// left out; a body that is not UTF-8 arrives as a binary (base64) body.
///
/// The request is served by a fresh function, then served again (a retry
/// must answer the same and write nothing), and after a 200 a different
/// plant under the same id must get a 409 and change nothing.
pub fn request(data: &[u8]) {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let store = MemoryStore::default();
    let app = App::new(store.clone(), Authenticator::with_static_tokens(&[TOKEN]));

    let first = JsonResponse::from(block_on(app.handle(input.request())));
    check(&first, &input, &store);

    let retry = JsonResponse::from(block_on(app.handle(input.request())));
    assert_eq!(retry, first, "a retry must get the same answer");
    check(&first, &input, &store);

    if first.status == 200 {
        let stored = store.get(plant_id(&first, &input)).expect("stored");
        let other_name = if stored.name.as_str() == "other" {
            "another"
        } else {
            "other"
        };
        let conflicting = Input {
            body: format!(r#"{{"id":{},"name":"{other_name}"}}"#, stored.id).into_bytes(),
            ..input.clone()
        };
        let conflict = JsonResponse::from(block_on(app.handle(conflicting.request())));
        assert_eq!(conflict.status, 409, "{conflict:?}");
        assert_eq!(conflict.body["error"], 40901);
        assert_eq!(store.get(stored.id).as_ref(), Some(&stored));
        assert_eq!(store.len(), 1);
    }
}

/// A fuzzed request, kept apart from `Request` so it can be sent again.
#[derive(Debug, Clone)]
struct Input {
    method: Method,
    target: String,
    stage: Option<String>,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Input {
    fn parse(data: &[u8]) -> Option<Self> {
        let (head, body) = match data.windows(2).position(|pair| pair == b"\n\n") {
            Some(end) => (&data[..end], &data[end + 2..]),
            None => (data, &[][..]),
        };
        let mut lines = head.split(|&b| b == b'\n');
        let request_line = std::str::from_utf8(lines.next()?).ok()?;
        let mut words = request_line.split(' ');
        let method = Method::from_bytes(words.next()?.as_bytes()).ok()?;
        let target = words.next()?.to_owned();
        let stage = words.next().map(str::to_owned);

        let mut headers = HeaderMap::new();
        for line in lines {
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let value = &line[colon + 1..];
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(&line[..colon]),
                HeaderValue::from_bytes(value),
            ) {
                headers.append(name, value);
            }
        }
        Some(Self {
            method,
            target,
            stage,
            headers,
            body: body.to_vec(),
        })
    }

    fn request(&self) -> Request {
        let body = if self.body.is_empty() {
            Body::Empty
        } else {
            match String::from_utf8(self.body.clone()) {
                Ok(text) => Body::Text(text),
                Err(err) => Body::Binary(err.into_bytes()),
            }
        };
        let mut request = Request::new(body);
        *request.method_mut() = self.method.clone();
        // A target that forms no URI loses its query, then its path, as
        // lambda-host's decoder sets them aside.
        *request.uri_mut() = self
            .target
            .parse()
            .or_else(|_| self.path().parse())
            .unwrap_or_else(|_| Uri::from_static("/"));
        *request.headers_mut() = self.headers.clone();

        let mut context = lambda_http::Context::default();
        context.request_id = REQUEST_ID.to_owned();
        let raw_path = self.path().to_owned();
        let request = request.with_raw_http_path(raw_path).with_lambda_context(context);
        match &self.stage {
            Some(stage) => {
                let mut context = ApiGatewayV2httpRequestContext::default();
                context.stage = Some(stage.clone());
                request.with_request_context(RequestContext::ApiGatewayV2(context))
            }
            None => request,
        }
    }

    /// The target's path as a URI reads it: up to a query or a fragment.
    fn path(&self) -> &str {
        self.target.split(['?', '#']).next().unwrap_or_default()
    }
}

/// Everything the contract promises about this answer to `input`, and
/// about what the store holds afterwards.
fn check(answer: &JsonResponse, input: &Input, store: &MemoryStore) {
    let status = answer.status;
    assert!(
        STATUSES.contains(&status),
        "undocumented status {status}: {answer:?}"
    );
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.header("cache-control"), Some("no-store"));
    assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(answer.header("x-request-id"), Some(REQUEST_ID));
    assert_eq!(
        answer.header("www-authenticate").is_some(),
        status == 401,
        "{answer:?}"
    );
    assert_eq!(
        answer.header("allow"),
        (status == 405).then_some("POST"),
        "{answer:?}"
    );

    // Routing comes first and never depends on anything but the path.
    if input.path() == "/plants" && input.stage.is_none() {
        assert_ne!(status, 404, "{answer:?}");
    }
    if !input.path().ends_with("/plants") {
        assert_eq!(status, 404, "{answer:?}");
    }
    if status != 404 && input.method != Method::POST {
        assert_eq!(status, 405, "{answer:?}");
    }

    // Authentication comes before anything about the body.
    let authenticated = bearer_token(&input.headers) == Ok(TOKEN);
    if matches!(status, 200 | 400 | 409 | 413 | 415) {
        assert!(authenticated, "{status} without a valid token: {answer:?}");
    }
    if status == 401 {
        let expected = match bearer_token(&input.headers) {
            Err(AuthError::MissingCredentials) => 40101,
            _ => 40102,
        };
        assert_eq!(answer.body["error"], expected, "{answer:?}");
    }
    if status != 404 && status != 405 {
        assert_eq!(status == 401, !authenticated, "{answer:?}");
        assert_eq!(
            status == 413,
            authenticated && input.body.len() > MAX_BODY_BYTES,
            "{answer:?}"
        );
    }

    // The body is judged by the parser alone, and the response says
    // exactly what it said.
    if matches!(status, 200 | 400 | 409) {
        match NewPlant::from_json(&input.body) {
            Ok(plant) => {
                assert_ne!(status, 400, "{answer:?}");
                if status == 200 {
                    let expected = serde_json::to_value(Plant::from(&plant)).expect("a Plant is JSON");
                    assert_eq!(answer.body, expected);
                }
            }
            Err(err) => {
                assert_eq!(status, 400, "{err}: {answer:?}");
                let expected = ApiError::Body(err).body();
                assert_eq!(answer.body["error"], expected.error);
                assert_eq!(answer.body["message"], expected.message.as_str());
            }
        }
    }

    if status == 200 {
        let object = answer.body.as_object().expect("a Plant is an object");
        assert!(object["name"].is_string(), "{answer:?}");
        assert!(object.get("tag").is_none_or(Value::is_string), "{answer:?}");
        assert!(
            object.keys().all(|key| key == "name" || key == "tag"),
            "{answer:?}"
        );
        let stored = store.get(plant_id(answer, input)).expect("a 200 means stored");
        assert_eq!(Some(stored), NewPlant::from_json(&input.body).ok());
        assert_eq!(store.len(), 1, "one request, one plant");
    } else {
        let object = answer.body.as_object().expect("an Error is an object");
        assert_eq!(object.len(), 2, "{answer:?}");
        let code = object["error"].as_u64().expect("error is an integer");
        assert_eq!(code / 100, u64::from(status), "{answer:?}");
        assert!(object["message"].is_string(), "{answer:?}");
        assert!(store.is_empty(), "nothing is written for a {status}");
    }
}

fn plant_id(answer: &JsonResponse, input: &Input) -> crate::plant::PlantId {
    match NewPlant::from_json(&input.body) {
        Ok(plant) => plant.id,
        Err(err) => panic!("a {} for a body the parser refuses ({err})", answer.status),
    }
}
