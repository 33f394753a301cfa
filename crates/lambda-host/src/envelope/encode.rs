//! The answer's JSON, written rather than serialized: the bytes
//! serde_json writes of `aws_lambda_events`' response types (their members
//! in their order, their header serializers, the members they skip), into
//! one buffer sized once, without building those types or a second header
//! map (`reference.rs` keeps the serde path the bytes are held to).

use std::borrow::Borrow;
use std::fmt;

use lambda_http::http::StatusCode;
use lambda_http::http::header::{Entry, HeaderMap, HeaderName, HeaderValue, SET_COOKIE};
use lambda_http::{Body, Response};

use super::RequestOrigin;
use crate::json_string::{escape, string};

/// The front door's JSON for `response`, in the shape `lambda_http` gives
/// it. The body goes as it is: text as text, bytes in base64 (flagged
/// `isBase64Encoded`), none as empty text (`lambda_http` decides between
/// text and base64 by the `Content-Type` instead). The loop calls it on
/// every answer; a function's tests call it to see the JSON a front door
/// gets from their handler.
///
/// # Errors
///
/// [`InvalidResponse`] when a header value the JSON holds is not UTF-8,
/// which it cannot carry (HTTP APIs, function URLs and VPC Lattice take
/// the first value of each header only): the loop fails that invocation
/// (`Runtime.InvalidResponse`). A `Set-Cookie` value of an HTTP API's
/// answer that is not visible ASCII goes in `cookies` empty instead, as
/// `lambda_http` writes it.
pub fn encode(origin: RequestOrigin, response: Response<Body>) -> Result<Vec<u8>, InvalidResponse> {
    let (parts, body) = response.into_parts();
    let mut out = String::with_capacity(capacity(&parts.headers, &body));
    match origin {
        // Only `multiValueHeaders`: API Gateway merges both fields, and
        // would repeat every header.
        RequestOrigin::ApiGatewayV1 => {
            out.push_str(r#"{"statusCode":"#);
            out.push_str(parts.status.as_str());
            out.push_str(r#","headers":{},"multiValueHeaders":"#);
            multi_value_headers(&mut out, parts.headers)?;
            write_body(&mut out, body);
            out.push('}');
        }
        RequestOrigin::ApiGatewayV2 => http_api(&mut out, parts.status, parts.headers, body)?,
        // Both forms: the target group's setting decides which one the
        // load balancer reads.
        RequestOrigin::Alb => {
            out.push_str(r#"{"statusCode":"#);
            out.push_str(parts.status.as_str());
            out.push_str(r#","statusDescription":""#);
            out.push_str(parts.status.as_str());
            out.push(' ');
            escape(&mut out, parts.status.canonical_reason().unwrap_or_default());
            out.push_str(r#"","headers":"#);
            let headers = &parts.headers;
            first_values(
                &mut out,
                headers.keys().filter_map(|name| Some((name, headers.get(name)?))),
            )?;
            out.push_str(r#","multiValueHeaders":"#);
            multi_value_headers(&mut out, parts.headers)?;
            write_body(&mut out, body);
            out.push('}');
        }
        RequestOrigin::VpcLattice => {
            out.push_str(r#"{"isBase64Encoded":"#);
            out.push_str(if matches!(body, Body::Binary(_)) {
                "true"
            } else {
                "false"
            });
            out.push_str(r#","statusCode":"#);
            out.push_str(parts.status.as_str());
            // `headers` is left out when empty.
            if !parts.headers.is_empty() {
                out.push_str(r#","headers":"#);
                first_values(&mut out, first_of_each(parts.headers))?;
            }
            out.push_str(r#","body":"#);
            body_value(&mut out, body);
            out.push('}');
        }
    }
    Ok(out.into_bytes())
}

/// A response the front door's JSON cannot carry: a header whose value is
/// not UTF-8. It names the header, never its value.
#[derive(Debug)]
pub struct InvalidResponse {
    header: String,
}

impl fmt::Display for InvalidResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the response header {} has a value that is not UTF-8, which the front door's JSON cannot carry",
            self.header
        )
    }
}

impl std::error::Error for InvalidResponse {}

/// HTTP APIs and function URLs: one value per header, `Set-Cookie`'s
/// values in `cookies`.
fn http_api(
    out: &mut String,
    status: StatusCode,
    mut headers: HeaderMap,
    body: Body,
) -> Result<(), InvalidResponse> {
    // Looked for by a scan of the few names, cheaper than a hash; taken
    // out as `HeaderMap::remove` takes it (the last header moves into its
    // place), which decides the order of the headers written.
    let cookies = if headers.keys().any(|name| name == SET_COOKIE) {
        match headers.entry(SET_COOKIE) {
            Entry::Occupied(entry) => Some(entry.remove_entry_mult().1.collect::<Vec<_>>()),
            Entry::Vacant(_) => None,
        }
    } else {
        None
    };
    out.push_str(r#"{"statusCode":"#);
    out.push_str(status.as_str());
    out.push_str(r#","headers":"#);
    first_values(out, first_of_each(headers))?;
    out.push_str(r#","multiValueHeaders":{}"#);
    write_body(out, body);
    out.push_str(r#","cookies":["#);
    for (at, cookie) in cookies.iter().flatten().enumerate() {
        if at > 0 {
            out.push(',');
        }
        // Not visible ASCII: an empty cookie, as `lambda_http` gives it.
        string(out, cookie.to_str().unwrap_or_default());
    }
    out.push_str("]}");
    Ok(())
}

/// `"name":"value"` for each pair, the map's first value of each name.
fn first_values<N, V>(out: &mut String, headers: impl Iterator<Item = (N, V)>) -> Result<(), InvalidResponse>
where
    N: Borrow<HeaderName>,
    V: Borrow<HeaderValue>,
{
    out.push('{');
    for (at, (name, value)) in headers.enumerate() {
        if at > 0 {
            out.push(',');
        }
        let name = name.borrow().as_str();
        name_string(out, name);
        out.push(':');
        value_string(out, value.borrow()).map_err(|NotUtf8| refused(name))?;
    }
    out.push('}');
    Ok(())
}

/// Each name with its first value, in the map's order, without a lookup.
fn first_of_each(headers: HeaderMap) -> impl Iterator<Item = (HeaderName, HeaderValue)> {
    // The values after a name's first come without it.
    headers
        .into_iter()
        .filter_map(|(name, value)| Some((name?, value)))
}

/// `"name":["value",…]` for each header name, in the map's order.
fn multi_value_headers(out: &mut String, headers: HeaderMap) -> Result<(), InvalidResponse> {
    out.push('{');
    let mut any = false;
    // Where the name of the values that follow was written: a refusal
    // names it from there, rather than every name being kept for it.
    let mut name_at = 0;
    for (name, value) in headers {
        match name {
            Some(name) => {
                if any {
                    out.push_str("],");
                }
                any = true;
                name_at = out.len();
                name_string(out, name.as_str());
                out.push_str(":[");
            }
            None => out.push(','),
        }
        value_string(out, &value).map_err(|NotUtf8| refused(written_name(out, name_at)))?;
    }
    out.push_str(if any { "]}" } else { "}" });
    Ok(())
}

/// A header value that is not UTF-8.
struct NotUtf8;

/// `value` as a JSON string, unless it is not UTF-8.
fn value_string(out: &mut String, value: &HeaderValue) -> Result<(), NotUtf8> {
    let value = std::str::from_utf8(value.as_bytes()).map_err(|_| NotUtf8)?;
    string(out, value);
    Ok(())
}

/// A header name as a JSON string: a name is a token, which has nothing
/// to escape.
fn name_string(out: &mut String, name: &str) {
    out.push('"');
    out.push_str(name);
    out.push('"');
}

/// The name written at `at` as a JSON string (by [`name_string`]).
fn written_name(out: &str, at: usize) -> &str {
    out.get(at..)
        .and_then(|written| written.split('"').nth(1))
        .unwrap_or_default()
}

/// The error for a value of header `name`, kept out of the writing loops.
#[cold]
#[inline(never)]
fn refused(name: &str) -> InvalidResponse {
    InvalidResponse {
        header: name.to_owned(),
    }
}

/// `,"body":…,"isBase64Encoded":…`, API Gateway's and the ALB's order.
fn write_body(out: &mut String, body: Body) {
    let binary = matches!(body, Body::Binary(_));
    out.push_str(r#","body":"#);
    body_value(out, body);
    out.push_str(if binary {
        r#","isBase64Encoded":true"#
    } else {
        r#","isBase64Encoded":false"#
    });
}

fn body_value(out: &mut String, body: Body) {
    match body {
        Body::Text(text) => string(out, &text),
        Body::Binary(bytes) => {
            out.push('"');
            base64_simd::STANDARD.encode_append(&bytes, out);
            out.push('"');
        }
        _ => out.push_str(r#""""#),
    }
}

/// Room for the members, the body (in base64 if bytes) and the headers
/// twice (ALB), so that an answer without escapes is written in one
/// allocation.
fn capacity(headers: &HeaderMap, body: &Body) -> usize {
    let body = match body {
        Body::Text(text) => text.len(),
        Body::Binary(bytes) => bytes.len().div_ceil(3) * 4,
        _ => 0,
    };
    let headers: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 8)
        .sum();
    128 + body + 2 * headers
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
