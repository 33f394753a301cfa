//! A UDP listener where Lambda's X-Ray daemon would be, and the datagrams
//! the host sends there as OpenTelemetry's own generated messages
//! (`opentelemetry-proto`) read them, never by comparing bytes the host's
//! encoder wrote.

use std::net::UdpSocket;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Map, Value, json};

/// What the test sends to the listener itself once the function is done:
/// the reader has read everything sent before it when it reads this.
const END: &[u8] = b"end of the test's datagrams";

/// A UDP listener standing in for the X-Ray daemon: a thread receives every
/// datagram as it comes (a few hundred would overflow the socket's buffer
/// otherwise) and decodes it.
#[derive(Debug)]
pub struct Daemon {
    /// `127.0.0.1:port`, for `AWS_XRAY_DAEMON_ADDRESS`.
    pub address: String,
    datagrams: Arc<Mutex<Vec<Datagram>>>,
    thread: Option<JoinHandle<()>>,
}

impl Daemon {
    /// Listens on a free loopback port.
    pub fn start() -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP port for the daemon");
        // A safety net only: the reader stops at `END`.
        socket
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("a read timeout");
        let address = socket.local_addr().expect("an address").to_string();
        let datagrams = Arc::<Mutex<Vec<Datagram>>>::default();
        let kept = datagrams.clone();
        let thread = std::thread::spawn(move || {
            let mut buffer = vec![0; 65_536];
            loop {
                let length = socket.recv(&mut buffer).expect("the test's end marker in time");
                if &buffer[..length] == END {
                    return;
                }
                assert!(length < 64_000, "a datagram of {length} bytes");
                let datagram = datagram(&buffer[..length]);
                kept.lock().unwrap_or_else(PoisonError::into_inner).push(datagram);
            }
        });
        Self {
            address,
            datagrams,
            thread: Some(thread),
        }
    }

    /// Every datagram received, once the sender is done: the sends are
    /// synchronous, so they are in the socket's queue before the marker
    /// this sends.
    pub fn datagrams(mut self) -> Vec<Datagram> {
        let marker = UdpSocket::bind("127.0.0.1:0").expect("a port");
        marker.send_to(END, &self.address).expect("the end marker");
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the daemon's thread");
        }
        std::mem::take(&mut *self.datagrams.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// One datagram: its `T1S`/`T1U` mark, the resource's attributes and
/// the spans.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Datagram {
    /// `T1S` (sampled) or `T1U`.
    pub mark: String,
    /// The resource's attributes, as [`attributes`] reads them.
    pub resource: Value,
    /// Each scope's name and version.
    pub scopes: Vec<(String, String)>,
    /// Every span, scope after scope.
    pub spans: Vec<Span>,
}

/// A datagram as the host writes it: the daemon's header line, the mark,
/// the base64 of an `ExportTraceServiceRequest`.
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

/// Bytes (an id) as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
