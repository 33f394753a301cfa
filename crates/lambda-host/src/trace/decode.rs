//! The datagrams as OpenTelemetry's own generated messages read them (tests only).

use base64::Engine as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Map, Value, json};

/// One datagram: its `T1S`/`T1U` mark, the resource's attributes and
/// the spans.
#[derive(Debug, Clone)]
pub struct Datagram {
    pub mark: String,
    pub resource: Value,
    pub scopes: Vec<(String, String)>,
    pub spans: Vec<Span>,
}

pub fn datagram(bytes: &[u8]) -> Datagram {
    let text = std::str::from_utf8(bytes).expect("an ASCII datagram");
    let (header, body) = text.split_once('\n').expect("a header line");
    assert_eq!(header, r#"{"format":"json","version":1}"#);
    let (mark, encoded) = body.split_at(3);
    let protobuf = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    let request =
        ExportTraceServiceRequest::decode(protobuf.as_slice()).expect("an ExportTraceServiceRequest");
    assert_eq!(request.resource_spans.len(), 1, "{request:#?}");
    let resource_spans = &request.resource_spans[0];
    Datagram {
        mark: mark.to_owned(),
        resource: attributes(&resource_spans.resource.as_ref().expect("a resource").attributes),
        scopes: resource_spans
            .scope_spans
            .iter()
            .map(|scope| {
                let scope = scope.scope.as_ref().expect("a scope");
                (scope.name.clone(), scope.version.clone())
            })
            .collect(),
        spans: resource_spans
            .scope_spans
            .iter()
            .flat_map(|scope| scope.spans.clone())
            .collect(),
    }
}

fn value(any: Option<&AnyValue>) -> Value {
    match any.and_then(|any| any.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => json!(text),
        Some(any_value::Value::BoolValue(flag)) => json!(flag),
        Some(any_value::Value::IntValue(number)) => json!(number),
        Some(any_value::Value::DoubleValue(number)) => json!(number),
        Some(any_value::Value::ArrayValue(array)) => {
            Value::Array(array.values.iter().map(|item| value(Some(item))).collect())
        }
        other => panic!("a value of a kind we never send: {other:?}"),
    }
}

/// Attributes as a JSON object; a key twice is a failure.
pub fn attributes(attributes: &[KeyValue]) -> Value {
    let mut object = Map::new();
    for pair in attributes {
        let previous = object.insert(pair.key.clone(), value(pair.value.as_ref()));
        assert!(previous.is_none(), "{} twice", pair.key);
    }
    Value::Object(object)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
