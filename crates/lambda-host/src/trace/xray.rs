//! The X-Ray side of a sampled invocation: subsegment documents, their ids,
//! and the UDP socket to the daemon Lambda runs beside the function.
//!
//! Written here rather than taken from a crate, by measurement
//! (docs/performance.md, "Traces"). The function with `opentelemetry-aws`
//! 0.21's X-Ray exporter (the OpenTelemetry SDK's span pipeline, `regex`
//! under its translator) spent 2.3 ms more CPU on a traced cold start than
//! with this module (budget: +0.15 ms), about 20 % more per sampled create
//! (budget: +5 %; this module: +4 %), and its bootstrap grew by 1.2 MB.
//! `awssdk-instrumentation` 0.3 is that exporter and more, and turns on
//! the AWS SDK's default features: a second TLS stack. What a Lambda
//! function sends is a few small JSON documents per sampled invocation,
//! one UDP datagram each: that is this file.
//!
//! The documents follow the X-Ray segment document schema and the shape the
//! X-Ray SDKs give them: `type: "subsegment"`, the invocation's `trace_id`,
//! a `parent_id`, 16-hex-digit ids, epoch seconds, `namespace` `aws` or
//! `remote` for calls out of the function, `error` / `fault` / `throttle`
//! with a `cause` naming the exception.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use lambda_http::tracing;
use serde::{Serialize, Serializer};

/// Where Lambda says its X-Ray daemon listens.
pub const DAEMON_ADDRESS: &str = "AWS_XRAY_DAEMON_ADDRESS";

/// The line that opens every datagram to the daemon, as the X-Ray SDKs write it.
const DAEMON_HEADER: &[u8] = b"{\"format\":\"json\",\"version\":1}\n";

/// The longest exception message kept in a `cause`: a datagram must stay
/// far below the daemon's 64 KB, and a message longer than this says
/// nothing the first kilobyte did not.
const MAX_MESSAGE_BYTES: usize = 1024;

/// The process's link to the X-Ray daemon: a UDP socket connected to it,
/// the service name the handler's subsegment carries, and the id source.
/// Built once at start-up; shared by every invocation.
pub struct Tracer {
    socket: UdpSocket,
    daemon: SocketAddr,
    service: String,
    /// The handler's subsegment's name: `## ` and the service, as
    /// Powertools names its handler's subsegment `## ` and the handler.
    handler_name: String,
    ids: RandomState,
    next_id: AtomicU64,
    warned: AtomicBool,
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracer")
            .field("daemon", &self.daemon)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

/// Why `AWS_XRAY_DAEMON_ADDRESS` cannot be used.
#[derive(Debug)]
pub enum DaemonError {
    /// Not a `host:port` that resolves.
    Address(String),
    /// No UDP socket could be opened.
    Socket(io::Error),
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Address(value) => write!(
                f,
                "{DAEMON_ADDRESS} is {value:?}, not host:port (or udp:host:port tcp:host:port)"
            ),
            Self::Socket(err) => write!(f, "cannot open a UDP socket to the X-Ray daemon: {err}"),
        }
    }
}

impl std::error::Error for DaemonError {}

impl Tracer {
    /// The daemon `AWS_XRAY_DAEMON_ADDRESS` names, read once at start-up:
    /// `None` when it is unset (tracing is off, not wanted). An address that
    /// cannot be used is an error for the caller to log: tracing is never a
    /// reason not to serve.
    pub fn from_env(service: &str) -> Option<Result<Self, DaemonError>> {
        let value = std::env::var(DAEMON_ADDRESS)
            .ok()
            .filter(|value| !value.trim().is_empty())?;
        Some(daemon_address(&value).and_then(|daemon| Self::new(daemon, service)))
    }

    /// A tracer sending to `daemon`, from an ephemeral port of its own.
    pub fn new(daemon: SocketAddr, service: &str) -> Result<Self, DaemonError> {
        let any: SocketAddr = if daemon.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(any).map_err(DaemonError::Socket)?;
        socket.connect(daemon).map_err(DaemonError::Socket)?;
        // Never wait on the daemon: a full buffer loses a document, not time.
        socket.set_nonblocking(true).map_err(DaemonError::Socket)?;
        Ok(Self {
            socket,
            daemon,
            service: service.to_owned(),
            handler_name: format!("## {service}"),
            ids: RandomState::new(),
            next_id: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        })
    }

    /// The service name the documents carry.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The name of the handler's subsegment.
    pub fn handler_name(&self) -> &str {
        &self.handler_name
    }

    /// A fresh subsegment id: a counter through SipHash with this process's
    /// random keys, so unique within the process and unpredictable across.
    pub fn id(&self) -> Id {
        loop {
            let n = self.next_id.fetch_add(1, Ordering::Relaxed);
            let id = self.ids.hash_one(n);
            // X-Ray refuses an all-zero id.
            if id != 0 {
                return Id(id);
            }
        }
    }

    /// Sends `document` as one datagram. A failure (no daemon listening, a
    /// full buffer) loses the document and is logged once per process.
    pub fn send(&self, document: &Document<'_>) {
        let mut datagram = Vec::with_capacity(768);
        datagram.extend_from_slice(DAEMON_HEADER);
        // Strings, numbers and booleans into a Vec cannot fail to serialize;
        // a partial document must not reach the daemon all the same.
        if serde_json::to_writer(&mut datagram, document).is_err() {
            return;
        }
        if let Err(err) = self.socket.send(&datagram)
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                daemon = %self.daemon,
                cause = %err,
                "could not send a subsegment to the X-Ray daemon; this is logged once, later losses are not"
            );
        }
    }
}

/// `host:port`, as Lambda sets it, or the two-address form the X-Ray SDKs
/// also accept (`udp:host:port tcp:host:port`), of which the UDP one.
fn daemon_address(value: &str) -> Result<SocketAddr, DaemonError> {
    let value = value.trim();
    let udp = if value.contains(' ') {
        value
            .split_whitespace()
            .find_map(|part| part.strip_prefix("udp:"))
            .ok_or_else(|| DaemonError::Address(value.to_owned()))?
    } else {
        value
    };
    if let Ok(address) = udp.parse() {
        return Ok(address);
    }
    // A host name (`localhost:2000`): resolved once, here, at start-up.
    udp.to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or_else(|| DaemonError::Address(value.to_owned()))
}

/// A segment or subsegment id: 64 bits, written as 16 lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Id(u64);

impl Id {
    /// The 16 hex digits, without going through `fmt` (a few of these are
    /// written per sampled invocation).
    fn hex(self) -> [u8; 16] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0; 16];
        for (i, digit) in hex.iter_mut().enumerate() {
            *digit = DIGITS[((self.0 >> (60 - 4 * i)) & 0xf) as usize];
        }
        hex
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Hex digits are ASCII.
        f.write_str(std::str::from_utf8(&self.hex()).unwrap_or_default())
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(std::str::from_utf8(&self.hex()).unwrap_or_default())
    }
}

/// A document's parent: the function's segment, as the trace header names
/// it, or a subsegment of ours.
#[derive(Debug, Clone, Copy)]
pub enum Parent<'a> {
    Header(&'a str),
    Subsegment(Id),
}

impl Serialize for Parent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Header(id) => serializer.serialize_str(id),
            Self::Subsegment(id) => id.serialize(serializer),
        }
    }
}

/// Now, in epoch seconds with microseconds, as X-Ray wants times.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// One subsegment document. Optional parts are left out when empty, as the
/// SDKs leave them out.
#[derive(Debug, Serialize)]
pub struct Document<'a> {
    #[serde(rename = "type")]
    pub kind: Kind,
    pub id: Id,
    pub trace_id: &'a str,
    pub parent_id: Parent<'a>,
    pub name: &'a str,
    pub start_time: f64,
    pub end_time: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Namespace>,
    // `Flags`' three fields, in the document itself: `#[serde(flatten)]`
    // would serialize the whole document through a map, at twice the cost.
    #[serde(skip_serializing_if = "is_false")]
    pub error: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub throttle: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub fault: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aws: Option<Aws<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<Http<'a>>,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Subsegment,
}

/// What a subsegment of a call out of the function stands for: an AWS
/// service (a node of its own in the service map) or any other remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Namespace {
    Aws,
    Remote,
}

/// X-Ray's three flags: `error` a client error (4xx), `throttle` a 429 or
/// a service's throttling error (with `error`), `fault` a server error
/// (5xx), a timeout or a failure to get any answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    pub error: bool,
    pub throttle: bool,
    pub fault: bool,
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

impl Flags {
    pub const FAULT: Self = Self {
        error: false,
        throttle: false,
        fault: true,
    };

    /// The flags of an HTTP status, as X-Ray reads one; `throttled` when the
    /// service named its error a throttling one (DynamoDB throttles with 400).
    pub fn of_status(status: u16, throttled: bool) -> Self {
        let throttle = status == 429 || throttled;
        Self {
            error: (400..500).contains(&status) || throttle,
            throttle,
            fault: status >= 500,
        }
    }
}

/// The exception behind a flag: `{"exceptions": [{id, type, message, remote}]}`.
#[derive(Debug, Serialize)]
pub struct Cause<'a> {
    exceptions: [Exception<'a>; 1],
}

#[derive(Debug, Serialize)]
struct Exception<'a> {
    id: Id,
    #[serde(rename = "type")]
    kind: &'a str,
    message: &'a str,
    /// The exception came from the remote service, not from the caller.
    remote: bool,
}

impl<'a> Cause<'a> {
    pub fn new(id: Id, kind: &'a str, message: &'a str, remote: bool) -> Self {
        Self {
            exceptions: [Exception {
                id,
                kind,
                message: truncated(message),
                remote,
            }],
        }
    }
}

fn truncated(text: &str) -> &str {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The handler subsegment's annotations, indexed by X-Ray for filter
/// expressions (`annotation.Status = 503`). `ColdStart` and `Service` as
/// Powertools' Tracer writes them; `Status` and `ErrorCode` the answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Annotations<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold_start: Option<bool>,
    pub service: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<u32>,
}

/// The `aws` object of an AWS call's subsegment, as the X-Ray SDKs fill it.
#[derive(Debug, Default, Serialize)]
pub struct Aws<'a> {
    pub operation: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_name: Option<&'a str>,
    /// Left out when the first attempt was the last, as the SDKs leave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
}

/// The `http` object: what was asked (remote calls) and the answer's status.
#[derive(Debug, Default, Serialize)]
pub struct Http<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<HttpRequest<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<HttpResponse>,
}

#[derive(Debug, Serialize)]
pub struct HttpRequest<'a> {
    pub method: &'a str,
    pub url: &'a str,
}

#[derive(Debug, Serialize)]
pub struct HttpResponse {
    pub status: u16,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn listener() -> UdpSocket {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        socket
    }

    fn received(socket: &UdpSocket) -> (String, Value) {
        let mut buffer = [0; 65_536];
        let length = socket.recv(&mut buffer).unwrap();
        let text = std::str::from_utf8(&buffer[..length]).unwrap();
        let (header, document) = text.split_once('\n').unwrap();
        (header.to_owned(), serde_json::from_str(document).unwrap())
    }

    #[test]
    fn a_document_is_one_datagram_of_the_daemon_header_and_the_json_with_empty_parts_left_out() {
        let daemon = listener();
        let tracer = Tracer::new(daemon.local_addr().unwrap(), "orders").unwrap();
        let document = Document {
            kind: Kind::Subsegment,
            id: Id(0xabc),
            trace_id: "1-5759e988-bd862e3fe1be46a994272793",
            parent_id: Parent::Header("53995c3f42cd8ad8"),
            name: "DynamoDB",
            start_time: 1.5,
            end_time: 2.25,
            namespace: Some(Namespace::Aws),
            error: true,
            throttle: false,
            fault: false,
            cause: Some(Cause::new(
                Id(1),
                "ConditionalCheckFailedException",
                "The conditional request failed",
                true,
            )),
            annotations: None,
            aws: Some(Aws {
                operation: "PutItem",
                region: Some("eu-west-1"),
                request_id: Some("R1"),
                table_name: Some("orders"),
                retries: None,
            }),
            http: Some(Http {
                request: None,
                response: Some(HttpResponse { status: 400 }),
            }),
        };

        tracer.send(&document);

        let (header, document) = received(&daemon);
        assert_eq!(header, r#"{"format":"json","version":1}"#);
        assert_eq!(
            document,
            json!({
                "type": "subsegment", "id": "0000000000000abc",
                "trace_id": "1-5759e988-bd862e3fe1be46a994272793", "parent_id": "53995c3f42cd8ad8",
                "name": "DynamoDB", "start_time": 1.5, "end_time": 2.25, "namespace": "aws", "error": true,
                "cause": { "exceptions": [{
                    "id": "0000000000000001", "type": "ConditionalCheckFailedException",
                    "message": "The conditional request failed", "remote": true,
                }] },
                "aws": { "operation": "PutItem", "region": "eu-west-1", "request_id": "R1", "table_name": "orders" },
                "http": { "response": { "status": 400 } },
            })
        );
    }

    #[test]
    fn statuses_set_the_flags_as_x_ray_reads_them() {
        let flags = |error, throttle, fault| Flags {
            error,
            throttle,
            fault,
        };
        for (status, throttled, expected) in [
            (200, false, flags(false, false, false)),
            (400, false, flags(true, false, false)),
            (400, true, flags(true, true, false)),
            (404, false, flags(true, false, false)),
            (429, false, flags(true, true, false)),
            (500, false, flags(false, false, true)),
            (503, false, flags(false, false, true)),
        ] {
            assert_eq!(
                Flags::of_status(status, throttled),
                expected,
                "{status} {throttled}"
            );
        }
    }

    #[test]
    fn ids_are_sixteen_hex_digits_and_never_repeat_in_a_process() {
        let tracer = Tracer::new("127.0.0.1:9".parse().unwrap(), "s").unwrap();
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| tracer.id().to_string()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }

    #[test]
    fn the_daemon_address_is_host_and_port_or_the_udp_half_of_the_two_address_form() {
        for (value, expected) in [
            ("169.254.79.129:2000", Some("169.254.79.129:2000")),
            (" 127.0.0.1:2000 ", Some("127.0.0.1:2000")),
            ("tcp:127.0.0.1:2000 udp:127.0.0.2:2001", Some("127.0.0.2:2001")),
            ("tcp:127.0.0.1:2000 other", None),
            ("169.254.79.129", None),
            ("not an address", None),
        ] {
            let parsed = daemon_address(value).ok().map(|address| address.to_string());
            assert_eq!(parsed.as_deref(), expected, "{value:?}");
        }
        let named = daemon_address("localhost:2000").unwrap();
        assert!(named.ip().is_loopback() && named.port() == 2000, "{named}");
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = truncated(&long);
        assert!(cut.len() <= MAX_MESSAGE_BYTES && cut.len() > MAX_MESSAGE_BYTES - 2);
        assert_eq!(truncated("short"), "short");
    }
}
