//! The encoder that filled `aws_lambda_events`' response types and
//! serialized them with serde_json: the reference the encoder is held to
//! (`tests.rs`).

use lambda_http::aws_lambda_events::alb::AlbTargetGroupResponse;
use lambda_http::aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayV2httpResponse};
use lambda_http::aws_lambda_events::vpc_lattice::VpcLatticeResponse;
use lambda_http::http::header::SET_COOKIE;
use lambda_http::{Body, Response};

use super::super::RequestOrigin;

/// The front door's JSON for `response`: the response types filled and
/// serialized; an error where their header serializers refuse a value
/// that is not UTF-8.
pub(super) fn encode(origin: RequestOrigin, response: Response<Body>) -> serde_json::Result<Vec<u8>> {
    let (parts, body) = response.into_parts();
    let status_code = i64::from(parts.status.as_u16());
    let (body, is_base64_encoded) = match body {
        Body::Text(text) => (Body::Text(text), false),
        Body::Binary(bytes) => (Body::Binary(bytes), true),
        _ => (Body::Text(String::new()), false),
    };
    let mut headers = parts.headers;
    match origin {
        RequestOrigin::ApiGatewayV1 => {
            // Only `multiValueHeaders`: API Gateway merges both fields, and
            // would repeat every header.
            let mut answer = ApiGatewayProxyResponse::default();
            answer.status_code = status_code;
            answer.multi_value_headers = headers;
            answer.body = Some(body);
            answer.is_base64_encoded = is_base64_encoded;
            to_json(&answer)
        }
        RequestOrigin::ApiGatewayV2 => {
            let cookies = headers
                .get_all(SET_COOKIE)
                .iter()
                .map(|cookie| cookie.to_str().unwrap_or_default().to_owned())
                .collect();
            headers.remove(SET_COOKIE);
            let mut answer = ApiGatewayV2httpResponse::default();
            answer.status_code = status_code;
            answer.headers = headers;
            answer.cookies = cookies;
            answer.body = Some(body);
            answer.is_base64_encoded = is_base64_encoded;
            to_json(&answer)
        }
        RequestOrigin::Alb => {
            // Both forms: the target group's setting decides which one the
            // load balancer reads.
            let mut answer = AlbTargetGroupResponse::default();
            answer.status_code = status_code;
            answer.status_description = Some(format!(
                "{status_code} {}",
                parts.status.canonical_reason().unwrap_or_default()
            ));
            answer.headers = headers.clone();
            answer.multi_value_headers = headers;
            answer.body = Some(body);
            answer.is_base64_encoded = is_base64_encoded;
            to_json(&answer)
        }
        RequestOrigin::VpcLattice => {
            let mut answer = VpcLatticeResponse::default();
            answer.status_code = parts.status.as_u16();
            answer.headers = headers;
            answer.body = Some(body);
            answer.is_base64_encoded = is_base64_encoded;
            to_json(&answer)
        }
    }
}

fn to_json<T: serde::Serialize>(answer: &T) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(answer)
}
