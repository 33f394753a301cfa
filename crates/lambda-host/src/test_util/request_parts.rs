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
    map.map(query_pairs)
}

/// Each name of `map` with its values, in name order. Read through its
/// serialized form rather than its iterator, which panics on a name given
/// an empty list of values (query_map 0.7,
/// docs/upstream/query-map-iterator-empty-values.md), as `lambda_http`'s
/// own decoding can leave one.
pub(crate) fn query_pairs(map: &QueryMap) -> Vec<(String, Vec<String>)> {
    let Ok(Value::Object(members)) = serde_json::to_value(map) else {
        panic!("a query map serializes as an object of lists: {map:?}");
    };
    let mut pairs: Vec<(String, Vec<String>)> = members
        .into_iter()
        .map(|(name, values)| (name, serde_json::from_value(values).expect("a list of strings")))
        .collect();
    // In name order whatever serde_json's map keeps (its `preserve_order`
    // would keep the hash map's).
    pairs.sort();
    pairs
}
