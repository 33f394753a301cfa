//! The plant-store bench subset (bearer digest check, NewPlant, conditional
//! put, Plant or Error) written in the idiom of aws-lambda-rust-runtime's
//! `examples/http-dynamodb`: a serde struct for the body, the SDK client from
//! `aws_config::load_from_env`, `lambda_http::run_concurrent` on `#[tokio::main]`
//! (the runtime's `concurrency-tokio` feature: `AWS_LAMBDA_MAX_CONCURRENCY`
//! workers on Lambda Managed Instances, the sequential loop when unset).
//! It answers the benchmark's smoke cases as the other implementations do;
//! it exists to show what plant-store's own levers buy, not to be deployed.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use lambda_http::http::{Method, StatusCode};
use lambda_http::{Body, Error, Request, RequestExt, Response, run_concurrent, service_fn, tracing};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Arc;

const MAX_BODY_BYTES: usize = 16 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewPlant {
    id: i64,
    name: String,
    tag: Option<String>,
}

#[derive(Serialize)]
struct Plant<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<&'a str>,
}

#[derive(Serialize)]
struct ErrorBody {
    error: u32,
    message: String,
}

struct ApiError {
    status: StatusCode,
    code: u32,
    message: String,
    headers: Vec<(&'static str, &'static str)>,
}

impl ApiError {
    fn new(status: StatusCode, code: u32, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            headers: Vec::new(),
        }
    }

    fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
}

struct Config {
    table: String,
    digests: Vec<Vec<u8>>,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing::init_default_subscriber();

    let table = std::env::var("TABLE_NAME")?;
    let digests = std::env::var("PLANTS_TOKEN_SHA256")?
        .split(',')
        .map(|d| hex::decode(d.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    let config = aws_config::load_from_env().await;
    let client = Client::new(&config);
    let settings = Arc::new(Config { table, digests });

    run_concurrent(service_fn(move |event: Request| {
        let client = client.clone();
        let settings = Arc::clone(&settings);
        async move { Ok::<_, Error>(handle(&client, &settings, event).await) }
    }))
    .await
}

async fn handle(client: &Client, config: &Config, event: Request) -> Response<Body> {
    let (status, body, headers) = match create(client, config, &event).await {
        Ok((name, tag)) => (
            StatusCode::OK,
            serde_json::to_string(&Plant {
                name: &name,
                tag: tag.as_deref(),
            }),
            Vec::new(),
        ),
        Err(err) => (
            err.status,
            serde_json::to_string(&ErrorBody {
                error: err.code,
                message: err.message,
            }),
            err.headers,
        ),
    };
    let request_id = event
        .lambda_context_ref()
        .map(|c| c.request_id.clone())
        .unwrap_or_default();
    tracing::info!(request_id, status = status.as_u16(), "request");
    let mut response = Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("cache-control", "no-store")
        .header("x-request-id", request_id);
    for (name, value) in headers {
        response = response.header(name, value);
    }
    response
        .body(Body::from(body.unwrap_or_default()))
        .expect("a valid response")
}

async fn create(
    client: &Client,
    config: &Config,
    event: &Request,
) -> Result<(String, Option<String>), ApiError> {
    if event.raw_http_path() != "/plants" {
        return Err(ApiError::new(StatusCode::NOT_FOUND, 40401, "no such resource"));
    }
    if event.method() != Method::POST {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            40501,
            "method not allowed; use POST",
        )
        .header("allow", "POST"));
    }
    authenticate(config, event)?;
    let body = event.body().as_ref();
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            41301,
            "request body too large",
        ));
    }
    let content_type = event
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.to_ascii_lowercase().starts_with("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            41501,
            "Content-Type must be application/json",
        ));
    }
    let plant: NewPlant = serde_json::from_slice(body).map_err(body_error)?;
    check_text("name", &plant.name, 256)?;
    if let Some(tag) = &plant.tag {
        check_text("tag", tag, 64)?;
    }
    store(client, config, &plant).await?;
    Ok((plant.name, plant.tag))
}

fn authenticate(config: &Config, event: &Request) -> Result<(), ApiError> {
    let missing = || {
        ApiError::new(StatusCode::UNAUTHORIZED, 40101, "missing bearer token")
            .header("www-authenticate", "Bearer realm=\"plants\"")
    };
    let header = event.headers().get("authorization").ok_or_else(missing)?;
    let token = header
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(missing)?;
    let digest = Sha256::digest(token.trim().as_bytes());
    if config
        .digests
        .iter()
        .any(|known| known.as_slice() == digest.as_slice())
    {
        Ok(())
    } else {
        Err(
            ApiError::new(StatusCode::UNAUTHORIZED, 40102, "invalid bearer token").header(
                "www-authenticate",
                "Bearer realm=\"plants\", error=\"invalid_token\"",
            ),
        )
    }
}

/// serde's messages name the kind of failure; the codes follow them.
fn body_error(err: serde_json::Error) -> ApiError {
    let message = err.to_string();
    let code = if message.starts_with("unknown field") {
        40005
    } else if message.starts_with("missing field") {
        40002
    } else if message.starts_with("invalid type") {
        40003
    } else if message.starts_with("invalid value") {
        40004
    } else {
        40001
    };
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}

fn check_text(field: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    let chars = value.chars().count();
    if chars == 0 || chars > max_chars || value.trim().is_empty() || value.chars().any(char::is_control) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            40004,
            format!("field `{field}` must be 1 to {max_chars} printable characters, not only whitespace"),
        ));
    }
    Ok(())
}

async fn store(client: &Client, config: &Config, plant: &NewPlant) -> Result<(), ApiError> {
    let mut request = client
        .put_item()
        .table_name(&config.table)
        .item("id", AttributeValue::N(plant.id.to_string()))
        .item("name", AttributeValue::S(plant.name.clone()))
        .item("created_at", AttributeValue::S(created_at()))
        .condition_expression("attribute_not_exists(id)")
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
    if let Some(tag) = &plant.tag {
        request = request.item("tag", AttributeValue::S(tag.clone()));
    }
    match request.send().await {
        Ok(_) => Ok(()),
        Err(SdkError::ServiceError(err)) => match err.into_err() {
            PutItemError::ConditionalCheckFailedException(failed) => {
                let old = failed.item.unwrap_or_default();
                let same_name = old.get("name").and_then(|v| v.as_s().ok()) == Some(&plant.name);
                let same_tag = old.get("tag").and_then(|v| v.as_s().ok()) == plant.tag.as_ref();
                if same_name && same_tag {
                    Ok(())
                } else {
                    Err(ApiError::new(
                        StatusCode::CONFLICT,
                        40901,
                        format!("a different plant with id {} already exists", plant.id),
                    ))
                }
            }
            err => {
                tracing::error!(error = %err, "put_item failed");
                Err(unavailable())
            }
        },
        Err(err) => {
            tracing::error!(error = %err, "put_item failed");
            Err(unavailable())
        }
    }
}

fn unavailable() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        50301,
        "the store is temporarily unavailable; retry later",
    )
    .header("retry-after", "1")
}

fn created_at() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:06}", now.as_secs(), now.subsec_micros())
}
