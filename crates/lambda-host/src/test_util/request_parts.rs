//! A request as one JSON value, for tests that compare the host's decoding
//! of a front door's event with `lambda_http`'s: the host's own, and a
//! function's over its sample events.

use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::{Request, RequestExt};
use serde_json::{Value, json};

/// The parts of a request anything downstream can read, as one value, so
/// that a difference shows which part differs.
pub fn request_parts(request: &Request) -> Value {
    json!({
        "method": request.method().as_str(),
        "uri": request.uri().to_string(),
        "version": format!("{:?}", request.version()),
        "headers": request
            .headers()
            .iter()
            .map(|(name, value)| json!([name.as_str(), String::from_utf8_lossy(value.as_bytes())]))
            .collect::<Vec<_>>(),
        "body": format!("{:?}", request.body()),
        "raw_http_path": request.raw_http_path(),
        "query_string_parameters": format!("{:?}", sorted(request.query_string_parameters_ref())),
        "path_parameters": format!("{:?}", sorted(request.path_parameters_ref())),
        "stage_variables": format!("{:?}", sorted(request.stage_variables_ref())),
        "request_context": serde_json::to_value(request.request_context_ref()).expect("serializable"),
    })
}

/// A `QueryMap` is a hash map: its own order is not the event's.
fn sorted(map: Option<&QueryMap>) -> Option<Vec<(String, Vec<String>)>> {
    map.map(|map| {
        let mut pairs: Vec<(String, Vec<String>)> = map
            .iter()
            .map(|(key, _)| {
                (
                    key.to_owned(),
                    map.all(key)
                        .unwrap_or_default()
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                )
            })
            .collect();
        pairs.sort();
        pairs.dedup();
        pairs
    })
}
