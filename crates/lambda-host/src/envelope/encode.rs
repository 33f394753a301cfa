//! The handler's `Response`, into the JSON answer of the front door its
//! request came through.

use lambda_http::aws_lambda_events::alb::AlbTargetGroupResponse;
use lambda_http::aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayV2httpResponse};
use lambda_http::http::header::SET_COOKIE;
use lambda_http::{Body, Response};

use super::FrontDoor;
use crate::json;

/// The front door's JSON for `response`, in the shape `lambda_http` gives
/// it. The body goes as it is: text as text, bytes in base64 (flagged
/// `isBase64Encoded`), none as empty text (`lambda_http` decides between
/// text and base64 by the `Content-Type` instead). The loop calls it on
/// every answer; a function's tests call it to see the JSON a front door
/// gets from their handler. Never waits.
pub async fn encode(origin: FrontDoor, response: Response<Body>) -> Vec<u8> {
    let (parts, body) = response.into_parts();
    let status_code = i64::from(parts.status.as_u16());
    let (body, is_base64_encoded) = match body {
        Body::Text(text) => (Body::Text(text), false),
        Body::Binary(bytes) => (Body::Binary(bytes), true),
        _ => (Body::Text(String::new()), false),
    };
    let mut headers = parts.headers;
    match origin {
        FrontDoor::RestApi => {
            // Only `multiValueHeaders`: API Gateway merges both fields, and
            // would repeat every header.
            let mut answer = ApiGatewayProxyResponse::default();
            answer.status_code = status_code;
            answer.multi_value_headers = headers;
            answer.body = Some(body);
            answer.is_base64_encoded = is_base64_encoded;
            json::to_string(&answer, "{}").into_bytes()
        }
        FrontDoor::HttpApi => {
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
            json::to_string(&answer, "{}").into_bytes()
        }
        FrontDoor::Alb => {
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
            json::to_string(&answer, "{}").into_bytes()
        }
    }
}
