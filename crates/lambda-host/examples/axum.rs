//! An axum function on the host: a `Router` with a route, a span of its own
//! (`#[tracing::instrument]`) and an AWS SDK call. With `lambda_http::run`
//! in place of `lambda_host::run`, it runs on the official runtime
//! unchanged; here, a request Lambda samples sends its trace: the SERVER
//! span, `tables` beneath it, and the SDK's `DynamoDB.ListTables` beneath
//! that.

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use lambda_host::trace::SpanDetails;
use lambda_http::{Error, tracing};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    // The host's interceptors: each invocation's trace header on the
    // client's requests, and a span per call.
    let mut dynamodb = aws_sdk_dynamodb::config::Builder::from(&config);
    for interceptor in lambda_host::trace::interceptors() {
        dynamodb.push_interceptor(interceptor);
    }
    let app = Router::new()
        .route("/tables/{prefix}", get(tables))
        .route_layer(middleware::from_fn(route_on_span))
        .with_state(Client::from_conf(dynamodb.build()));
    lambda_host::run(app).await
}

/// The tables whose names start with `prefix`.
#[tracing::instrument(skip(client), fields(count))]
async fn tables(State(client): State<Client>, Path(prefix): Path<String>) -> Result<Json<Value>, StatusCode> {
    let listed = client.list_tables().send().await.map_err(|err| {
        tracing::error!(error = %err, "ListTables failed");
        StatusCode::BAD_GATEWAY
    })?;
    let names: Vec<&str> = listed
        .table_names()
        .iter()
        .map(String::as_str)
        .filter(|name| name.starts_with(prefix.as_str()))
        .collect();
    tracing::Span::current().record("count", names.len());
    Ok(Json(json!({ "tables": names })))
}

/// The route axum matched, as the SERVER span's `http.route`: what only the
/// function knows, given to the host on the response.
async fn route_on_span(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned());
    let mut response = next.run(request).await.into_response();
    if let Some(route) = route {
        response
            .extensions_mut()
            .insert(SpanDetails::default().route(route));
    }
    response
}
