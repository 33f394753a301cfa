//! The process's link to the endpoint Lambda runs beside the function at
//! `AWS_XRAY_DAEMON_ADDRESS`: a UDP socket, the resource and scope encoded
//! once, span ids, and the datagrams, as ADOT's Lambda exporter writes
//! them: `{"format":"json","version":1}`, a newline, `T1S` (sampled) or
//! `T1U` (unsampled, sent only for Application Signals), then the base64
//! of an OTLP `ExportTraceServiceRequest` of at most ten spans.

use std::cell::RefCell;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use lambda_http::tracing;

use super::otlp::{self, Value};

use crate::env::DAEMON_ADDRESS;

/// The line that opens every datagram to the daemon.
const DAEMON_HEADER: &[u8] = b"{\"format\":\"json\",\"version\":1}\n";

/// At most this many spans in one datagram, as ADOT batches on Lambda.
pub const MAX_SPANS_PER_DATAGRAM: usize = 10;

/// A datagram stays under the daemon's 64 KB buffer.
const MAX_DATAGRAM: usize = 64_000;

/// At most this many AWS calls (operation, region, table) and function
/// ARNs keep their encoded attributes; others are encoded per call, so a
/// function that names tables without end cannot grow the process.
const MAX_KNOWN: usize = 32;

/// At most this many batches' buffers are kept for later invocations,
/// none over MAX_SPARE_BYTES: a burst of invocations, or one with huge
/// spans, cannot grow the process for good.
const MAX_SPARE: usize = 16;
const MAX_SPARE_BYTES: usize = 16 * 1024;

thread_local! {
    /// The datagram being written, kept between sends.
    static DATAGRAM: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The Lambda environment the resource attributes come from, as ADOT's
/// Lambda layer sets `OTEL_RESOURCE_ATTRIBUTES` from it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Environment {
    pub daemon_address: Option<String>,
    pub service_name: Option<String>,
    pub region: Option<String>,
    pub function_name: Option<String>,
    pub function_version: Option<String>,
    pub log_stream_name: Option<String>,
    pub log_group_name: Option<String>,
    pub application_signals: bool,
}

/// Built once at start-up; shared by every invocation.
pub struct Tracer {
    socket: UdpSocket,
    daemon: SocketAddr,
    service: String,
    /// The SERVER span's name: the function's name, as ADOT and the FaaS
    /// conventions name it (the service's when there is no function).
    server_name: String,
    application_signals: bool,
    resource: Vec<u8>,
    scope: Vec<u8>,
    /// The room a batch keeps for a request's head.
    head_room: usize,
    /// Attributes the same on every span of a kind, encoded once.
    constant: Constant,
    /// Those of each AWS call (operation, region, table), encoded on its
    /// first.
    calls: Mutex<Vec<Arc<AwsCall>>>,
    /// `cloud.resource_id` and `cloud.account.id` of each function ARN
    /// invoked (with or without an alias or version), encoded on its first.
    functions: Mutex<Vec<(String, Vec<u8>)>>,
    /// The buffers of batches sent, for the next ones: a batch's 2.5 KB
    /// from the allocator cost a sampled create more than its spans'
    /// encoding (docs/performance.md, "Traces").
    spare: Mutex<Vec<Vec<u8>>>,
    ids: RandomState,
    next_id: AtomicU64,
    warned: AtomicBool,
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracer")
            .field("daemon", &self.daemon)
            .field("service", &self.service)
            .field("application_signals", &self.application_signals)
            .finish_non_exhaustive()
    }
}

/// Attributes (as `Span` field 9) that never change in a process.
#[derive(Debug)]
struct Constant {
    /// `faas.trigger`, `aws.local.service`, `aws.local.operation`,
    /// `aws.span.kind` `LOCAL_ROOT`.
    server: Vec<u8>,
    /// `aws.local.service`, `aws.local.operation`, `aws.span.kind` `CLIENT`.
    client: Vec<u8>,
    /// `aws.trace.flag.sampled`, false and true.
    sampled: [Vec<u8>; 2],
    /// `faas.coldstart` and the `ColdStart` annotation, false and true.
    cold_start: [Vec<u8>; 2],
    /// `aws.xray.annotations` of the host's own: `ColdStart`, `Status`.
    annotations: Vec<u8>,
}

/// An AWS SDK call's span name (`DynamoDB.PutItem`) and the attributes
/// its operation, region and table decide: `rpc.*`, `aws.region`, `db.*`
/// and `aws.dynamodb.table_names` (DynamoDB), `aws.remote.*`.
#[derive(Debug)]
pub struct AwsCall {
    service: String,
    operation: String,
    region: Option<String>,
    table: Option<String>,
    pub name: String,
    pub attributes: Vec<u8>,
}

impl AwsCall {
    fn new(service: &str, operation: &str, region: Option<&str>, table: Option<&str>) -> Self {
        let remote = format!("AWS::{service}");
        let mut pairs = vec![
            ("rpc.system", Value::Str("aws-api")),
            ("rpc.service", Value::Str(service)),
            ("rpc.method", Value::Str(operation)),
        ];
        if let Some(region) = region {
            pairs.push(("aws.region", Value::Str(region)));
        }
        let tables;
        if service == "DynamoDB" {
            pairs.extend([
                ("db.system", Value::Str("dynamodb")),
                ("db.operation", Value::Str(operation)),
            ]);
            if let Some(table) = table {
                tables = [table];
                pairs.extend([
                    ("aws.dynamodb.table_names", Value::Strs(&tables)),
                    ("aws.remote.resource.type", Value::Str("AWS::DynamoDB::Table")),
                    ("aws.remote.resource.identifier", Value::Str(table)),
                    ("aws.remote.resource.cfn.primary.identifier", Value::Str(table)),
                ]);
            }
        }
        pairs.extend([
            ("aws.remote.service", Value::Str(&remote)),
            ("aws.remote.operation", Value::Str(operation)),
        ]);
        Self {
            service: service.to_owned(),
            operation: operation.to_owned(),
            region: region.map(str::to_owned),
            table: table.map(str::to_owned),
            name: format!("{service}.{operation}"),
            attributes: attributes(&pairs),
        }
    }

    fn is(&self, service: &str, operation: &str, region: Option<&str>, table: Option<&str>) -> bool {
        self.operation == operation
            && self.table.as_deref() == table
            && self.service == service
            && self.region.as_deref() == region
    }
}

fn attributes(pairs: &[(&str, Value<'_>)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut writer = otlp::Writer::new(&mut bytes);
    for (key, value) in pairs {
        writer.attribute(9, key, *value);
    }
    bytes
}

/// Why `AWS_XRAY_DAEMON_ADDRESS` cannot be used.
#[derive(Debug)]
pub enum DaemonError {
    Address(String),
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
    /// The endpoint `AWS_XRAY_DAEMON_ADDRESS` names, read once at start-up
    /// with the rest of Lambda's environment: `None` when it is unset
    /// (tracing is off, not wanted). An address that cannot be used is an
    /// error for the caller to log: tracing is never a reason not to serve.
    pub fn from_env(environment: &Environment) -> Option<Result<Self, DaemonError>> {
        let value = environment.daemon_address.as_deref()?;
        let service = environment
            .service_name
            .as_deref()
            .or(environment.function_name.as_deref())
            .unwrap_or(env!("CARGO_PKG_NAME"));
        Some(daemon_address(value).and_then(|daemon| Self::with(daemon, service, environment)))
    }

    /// A tracer sending to `daemon` from an ephemeral port of its own, its
    /// resource that of `environment`.
    pub fn with(daemon: SocketAddr, service: &str, environment: &Environment) -> Result<Self, DaemonError> {
        let any: SocketAddr = if daemon.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(any).map_err(DaemonError::Socket)?;
        socket.connect(daemon).map_err(DaemonError::Socket)?;
        // Never wait on the daemon: a full buffer loses spans, not time.
        socket.set_nonblocking(true).map_err(DaemonError::Socket)?;
        let function = environment.function_name.as_deref();
        let local_operation = format!("{}/FunctionHandler", function.unwrap_or(service));
        let local = |kind| {
            [
                ("aws.local.service", Value::Str(service)),
                ("aws.local.operation", Value::Str(&local_operation)),
                ("aws.span.kind", Value::Str(kind)),
            ]
        };
        let server = [&[("faas.trigger", Value::Str("http"))][..], &local("LOCAL_ROOT")].concat();
        let constant = Constant {
            server: attributes(&server),
            client: attributes(&local("CLIENT")),
            sampled: [false, true]
                .map(|sampled| attributes(&[("aws.trace.flag.sampled", Value::Bool(sampled))])),
            cold_start: [false, true].map(|cold| {
                attributes(&[
                    ("faas.coldstart", Value::Bool(cold)),
                    ("ColdStart", Value::Bool(cold)),
                ])
            }),
            annotations: attributes(&[("aws.xray.annotations", Value::Strs(&["ColdStart", "Status"]))]),
        };
        let resource = resource(service, environment);
        let scope = otlp::scope(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
        Ok(Self {
            socket,
            daemon,
            service: service.to_owned(),
            server_name: function.unwrap_or(service).to_owned(),
            application_signals: environment.application_signals,
            head_room: otlp::request_head_room(resource.len(), scope.len()),
            resource,
            scope,
            constant,
            calls: Mutex::new(Vec::new()),
            functions: Mutex::new(Vec::new()),
            spare: Mutex::new(Vec::new()),
            ids: RandomState::new(),
            next_id: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        })
    }

    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    pub fn application_signals(&self) -> bool {
        self.application_signals
    }

    /// The attributes every SERVER span of this process carries (encoded).
    pub fn server_attributes(&self) -> &[u8] {
        &self.constant.server
    }

    /// The attributes every CLIENT span of this process carries (encoded).
    pub fn client_attributes(&self) -> &[u8] {
        &self.constant.client
    }

    /// `aws.trace.flag.sampled` (encoded).
    pub fn sampled_attribute(&self, sampled: bool) -> &[u8] {
        &self.constant.sampled[usize::from(sampled)]
    }

    /// `faas.coldstart` and `ColdStart` (encoded).
    pub fn cold_start_attributes(&self, cold_start: bool) -> &[u8] {
        &self.constant.cold_start[usize::from(cold_start)]
    }

    /// `aws.xray.annotations` (encoded) of the host's own annotations.
    pub fn annotations_attribute(&self) -> &[u8] {
        &self.constant.annotations
    }

    /// The span name and attributes of an AWS SDK call, encoded on the
    /// first call to that operation, region and table.
    pub fn aws_call(
        &self,
        service: &str,
        operation: &str,
        region: Option<&str>,
        table: Option<&str>,
    ) -> Arc<AwsCall> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = calls
            .iter()
            .find(|call| call.is(service, operation, region, table))
        {
            return Arc::clone(known);
        }
        let call = Arc::new(AwsCall::new(service, operation, region, table));
        if calls.len() < MAX_KNOWN {
            calls.push(Arc::clone(&call));
        }
        call
    }

    /// Calls `write` with `cloud.resource_id` (the ARN without an alias or
    /// version, as the FaaS conventions want it on Lambda) and
    /// `cloud.account.id` of the invoked function's `arn`, encoded on its
    /// first invocation.
    pub fn function_attributes(&self, arn: &str, write: impl FnOnce(&[u8])) {
        let mut functions = self.functions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, known)) = functions.iter().find(|(known, _)| known == arn) {
            write(known);
            return;
        }
        let unqualified = arn
            .match_indices(':')
            .nth(6)
            .map_or(arn, |(colon, _)| &arn[..colon]);
        let mut pairs = vec![("cloud.resource_id", Value::Str(unqualified))];
        if let Some(account) = arn.split(':').nth(4) {
            pairs.push(("cloud.account.id", Value::Str(account)));
        }
        let encoded = attributes(&pairs);
        write(&encoded);
        if functions.len() < MAX_KNOWN {
            functions.push((arn.to_owned(), encoded));
        }
    }

    /// A fresh span id: a counter through SipHash with this process's
    /// random keys, so unique within the process and unpredictable across.
    pub fn id(&self) -> [u8; 8] {
        loop {
            let n = self.next_id.fetch_add(1, Ordering::Relaxed);
            let id = self.ids.hash_one(n);
            // An all-zero span id is invalid.
            if id != 0 {
                return id.to_be_bytes();
            }
        }
    }

    /// An empty batch for [`Tracer::send`]: room at its front for a
    /// request's head, so that a request goes out from where its spans
    /// were encoded, not copied after a head first.
    pub fn batch(&self) -> Vec<u8> {
        let spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let mut bytes = spare.unwrap_or_else(|| Vec::with_capacity(self.head_room + 2048));
        // A spare one keeps its old bytes in the room: a head is written
        // over what it sends of it.
        bytes.resize(self.head_room, 0);
        bytes
    }

    /// Keeps a [`Tracer::batch`] that has been sent for a later one.
    pub fn recycle(&self, mut bytes: Vec<u8>) {
        if bytes.capacity() > MAX_SPARE_BYTES {
            return;
        }
        bytes.truncate(self.head_room);
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.len() < MAX_SPARE {
            spare.push(bytes);
        }
    }

    /// Sends the spans encoded in a [`Tracer::batch`] (each a `Span` as
    /// field 2 of `ScopeSpans`, the n-th ending at `ends[n]`) in as few
    /// datagrams as ten spans each and the size limit allow. Each request's
    /// head is written over the bytes before its spans (the room, or spans
    /// already sent). A failure (no daemon listening, a full buffer) loses
    /// them and is logged once per process.
    pub fn send(&self, bytes: &mut [u8], ends: &[usize], sampled: bool) {
        let (resource, scope) = (self.resource.len(), self.scope.len());
        DATAGRAM.with_borrow_mut(|datagram| {
            let mut first = 0;
            while first < ends.len() {
                let start = if first == 0 {
                    self.head_room
                } else {
                    ends[first - 1]
                };
                // As many spans as fit, at least one.
                let mut last = first;
                while last + 1 < ends.len()
                    && last + 1 - first < MAX_SPANS_PER_DATAGRAM
                    && datagram_len(otlp::request_len(resource, scope, ends[last + 1] - start))
                        <= MAX_DATAGRAM
                {
                    last += 1;
                }
                let spans = ends[last] - start;
                first = last + 1;
                if datagram_len(otlp::request_len(resource, scope, spans)) > MAX_DATAGRAM {
                    // One span alone over the limit, dropped: none of ours
                    // comes near it, their messages being cut short.
                    self.warn_once(&io::Error::other(format!(
                        "a span of {spans} bytes is over the datagram's limit"
                    )));
                    continue;
                }
                // Never longer than the room, which `start` is past.
                let head = start - otlp::request_head_len(resource, scope, spans);
                otlp::request_head(&mut bytes[head..start], &self.resource, &self.scope, spans);
                datagram.clear();
                datagram.extend_from_slice(DAEMON_HEADER);
                datagram.extend_from_slice(if sampled { b"T1S" } else { b"T1U" });
                // In SIMD: `base64`'s engine spent half a traced create's
                // instructions here (docs/performance.md, "Traces").
                base64_simd::STANDARD.encode_append(&bytes[head..ends[last]], datagram);
                if let Err(err) = self.socket.send(datagram) {
                    self.warn_once(&err);
                }
            }
        });
    }

    fn warn_once(&self, err: &io::Error) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                daemon = %self.daemon,
                cause = %err,
                "could not send spans to the X-Ray daemon's endpoint; this is logged once, later losses are not"
            );
        }
    }
}

fn datagram_len(request: usize) -> usize {
    DAEMON_HEADER.len() + 3 + base64_simd::STANDARD.encoded_length(request)
}

/// The resource attributes ADOT's Lambda layer sets (`service.name`,
/// `cloud.*`, `faas.*`, `aws.log.group.names`) and those an SDK gives
/// (`telemetry.sdk.*`), with ADOT's `aws.local.service`.
fn resource(service: &str, environment: &Environment) -> Vec<u8> {
    let mut attributes = vec![
        ("service.name", Value::Str(service)),
        ("telemetry.sdk.name", Value::Str(env!("CARGO_PKG_NAME"))),
        ("telemetry.sdk.language", Value::Str("rust")),
        ("telemetry.sdk.version", Value::Str(env!("CARGO_PKG_VERSION"))),
        ("cloud.provider", Value::Str("aws")),
        ("cloud.platform", Value::Str("aws_lambda")),
    ];
    for (key, value) in [
        ("cloud.region", &environment.region),
        ("faas.name", &environment.function_name),
        ("faas.version", &environment.function_version),
        ("faas.instance", &environment.log_stream_name),
        // A string, as ADOT sends it and Application Signals documents it
        // (several names joined by `&`), not the conventions' string[]:
        // docs/tracing.md, "Decisions".
        ("aws.log.group.names", &environment.log_group_name),
    ] {
        if let Some(value) = value {
            attributes.push((key, Value::Str(value)));
        }
    }
    attributes.push(("aws.local.service", Value::Str(service)));
    otlp::resource(&attributes)
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

/// Now, in nanoseconds since the Unix epoch, as OTLP wants times.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::UdpSocket;
    use std::sync::Arc;
    use std::time::Duration;

    use lambda_http::tracing::subscriber::fmt::MakeWriter;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;

    use super::*;
    use crate::test_util::daemon::{self as decode, Datagram};
    use crate::trace::otlp::{Kind, SpanHead, SpanWriter};

    /// What the test's listener reads as "nothing more is coming".
    const END: &[u8] = b"end";

    /// The datagrams a tracer sends while `send` runs, as a listener in
    /// the daemon's place reads them (in a thread of its own, so that a
    /// few datagrams of 64 KB cannot fill its socket's buffer), each with
    /// its length.
    fn sent(send: impl FnOnce(&Tracer)) -> Vec<(usize, Datagram)> {
        let listener = UdpSocket::bind("127.0.0.1:0").unwrap();
        listener.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let address = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let mut buffer = vec![0; 65_536];
            let mut datagrams = Vec::new();
            loop {
                let length = listener.recv(&mut buffer).expect("the end marker in time");
                if &buffer[..length] == END {
                    return datagrams;
                }
                datagrams.push((length, decode::datagram(&buffer[..length])));
            }
        });
        let tracer = Tracer::with(address, "s", &Environment::default()).unwrap();
        send(&tracer);
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .send_to(END, address)
            .unwrap();
        reader.join().unwrap()
    }

    /// A batch of spans numbered by their id's bytes, each `padding` bytes
    /// of attribute long or so, as `Spans` hands it to [`Tracer::send`].
    fn batch(tracer: &Tracer, spans: &[(u8, usize)]) -> (Vec<u8>, Vec<usize>) {
        let (mut bytes, mut ends) = (tracer.batch(), Vec::new());
        for &(id, padding) in spans {
            let head = SpanHead {
                trace_id: [1; 16],
                span_id: [id; 8],
                parent_span_id: [2; 8],
                name: "GET",
                kind: Kind::Client,
                start_unix_nano: 1,
                end_unix_nano: 2,
                flags: 0x101,
            };
            let mut span = SpanWriter::begin(&mut bytes, &head);
            span.attribute("padding", Value::Str(&"x".repeat(padding)));
            span.finish();
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    /// The first byte of each span's id, datagram by datagram.
    fn ids(datagrams: &[(usize, Datagram)]) -> Vec<Vec<u8>> {
        datagrams
            .iter()
            .map(|(_, datagram)| datagram.spans.iter().map(|span| span.span_id[0]).collect())
            .collect()
    }

    #[test]
    fn a_batch_over_the_limit_goes_in_datagrams_each_under_it_of_ten_spans_at_most_none_lost() {
        // Twelve spans of 9 KB (five fit in a datagram once in base64), then
        // fifteen small ones: 130 KB of spans.
        let spans: Vec<(u8, usize)> = (1..=27)
            .map(|id| (id, if id <= 12 { 9_000 } else { 100 }))
            .collect();
        let datagrams = sent(|tracer| {
            let (mut bytes, ends) = batch(tracer, &spans);
            assert!(
                datagram_len(bytes.len()) > 2 * MAX_DATAGRAM,
                "a batch over the limit"
            );
            tracer.send(&mut bytes, &ends, true);
        });

        for (length, datagram) in &datagrams {
            assert!(*length <= MAX_DATAGRAM, "a datagram of {length} bytes");
            assert!(datagram.spans.len() <= MAX_SPANS_PER_DATAGRAM, "{length} bytes");
            assert_eq!(datagram.mark, "T1S");
        }
        let every: Vec<u8> = ids(&datagrams).concat();
        assert_eq!(every, (1..=27).collect::<Vec<u8>>(), "every span once, in order");
        assert_eq!(
            ids(&datagrams).iter().map(Vec::len).collect::<Vec<_>>(),
            [5, 5, 10, 7],
            "as many as fit in each"
        );
    }

    #[test]
    fn requests_a_byte_apart_arrive_whole_whatever_base64_pads_them_with() {
        // Three requests of consecutive lengths: every remainder of three,
        // so every padding, decoded by another library than the sender's.
        let datagrams = sent(|tracer| {
            for extra in 0..3 {
                let (mut bytes, ends) = batch(tracer, &[(1 + extra as u8, 200 + extra)]);
                tracer.send(&mut bytes, &ends, true);
            }
        });

        let paddings: Vec<usize> = datagrams
            .iter()
            .map(|(_, datagram)| match &datagram.spans[..] {
                [span] => match span.attributes[0]
                    .value
                    .as_ref()
                    .and_then(|any| any.value.as_ref())
                {
                    Some(AnyValue::StringValue(padding)) => padding.len(),
                    other => panic!("{other:?}"),
                },
                spans => panic!("{} spans", spans.len()),
            })
            .collect();
        assert_eq!(paddings, [200, 201, 202]);
    }

    /// Log lines written while the test runs, on its thread.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl MakeWriter<'_> for Lines {
        type Writer = Self;
        fn make_writer(&self) -> Self {
            self.clone()
        }
    }

    #[test]
    fn a_span_alone_over_the_limit_is_dropped_with_one_warning_and_the_others_are_sent() {
        let lines = Lines::default();
        let subscriber = crate::logging::json_subscriber(None, lines.clone());
        // Spans 2 and 4 are over the limit on their own once in base64.

        let datagrams = tracing::dispatcher::with_default(&tracing::Dispatch::new(subscriber), || {
            sent(|tracer| {
                let (mut first, first_ends) = batch(tracer, &[(1, 100), (2, 50_000), (3, 100)]);
                tracer.send(&mut first, &first_ends, true);
                let (mut second, second_ends) = batch(tracer, &[(4, 50_000)]);
                tracer.send(&mut second, &second_ends, false);
            })
        });

        assert_eq!(ids(&datagrams), [vec![1], vec![3]]);
        let logged = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let warnings: Vec<&str> = logged.lines().filter(|line| line.contains("WARN")).collect();
        assert_eq!(warnings.len(), 1, "once per process: {logged}");
        assert!(
            warnings[0].contains("over the datagram's limit"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn ids_are_eight_bytes_never_zero_and_never_repeat_in_a_process() {
        let tracer = Tracer::with("127.0.0.1:9".parse().unwrap(), "s", &Environment::default()).unwrap();
        let ids: std::collections::HashSet<[u8; 8]> = (0..10_000).map(|_| tracer.id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&[0; 8]));
    }

    /// Attributes encoded as a span's (field 9), decoded as a `Span`'s.
    fn span_attributes(encoded: &[u8]) -> serde_json::Value {
        use prost::Message as _;
        let span = opentelemetry_proto::tonic::trace::v1::Span::decode(encoded).expect("span attributes");
        decode::attributes(&span.attributes)
    }

    #[test]
    fn an_aws_calls_attributes_are_encoded_once_and_a_process_keeps_a_bounded_number() {
        let tracer = Tracer::with("127.0.0.1:9".parse().unwrap(), "s", &Environment::default()).unwrap();
        let region = Some("eu-west-1");
        let first = tracer.aws_call("DynamoDB", "PutItem", region, Some("plants"));
        let again = tracer.aws_call("DynamoDB", "PutItem", region, Some("plants"));
        assert!(Arc::ptr_eq(&first, &again));
        let elsewhere = tracer.aws_call("DynamoDB", "PutItem", Some("us-east-1"), Some("plants"));
        assert!(!Arc::ptr_eq(&first, &elsewhere));

        for n in 0..3 * MAX_KNOWN {
            let table = format!("table-{n}");
            let call = tracer.aws_call("DynamoDB", "GetItem", region, Some(&table));
            assert_eq!(call.name, "DynamoDB.GetItem");
            let attributes = span_attributes(&call.attributes);
            assert_eq!(attributes["aws.dynamodb.table_names"], serde_json::json!([table]));
            assert_eq!(attributes["aws.remote.resource.identifier"], table.as_str());
            assert_eq!(attributes["aws.region"], "eu-west-1");
        }
        assert_eq!(tracer.calls.lock().unwrap().len(), MAX_KNOWN);
        for n in 0..3 * MAX_KNOWN {
            let arn = format!("arn:aws:lambda:eu-west-1:123456789012:function:f:{n}");
            let mut encoded = Vec::new();
            tracer.function_attributes(&arn, |bytes| encoded.extend_from_slice(bytes));
            let attributes = span_attributes(&encoded);
            assert_eq!(
                attributes["cloud.resource_id"],
                "arn:aws:lambda:eu-west-1:123456789012:function:f"
            );
            assert_eq!(attributes["cloud.account.id"], "123456789012");
        }
        assert_eq!(tracer.functions.lock().unwrap().len(), MAX_KNOWN);
    }

    #[test]
    fn a_sent_batchs_buffer_serves_a_later_one_and_the_spares_stay_few_and_small() {
        let tracer = Tracer::with("127.0.0.1:9".parse().unwrap(), "s", &Environment::default()).unwrap();
        let mut first = tracer.batch();
        first.extend_from_slice(b"spans");
        let buffer = first.as_ptr();
        tracer.recycle(first);
        let second = tracer.batch();
        assert_eq!(second.as_ptr(), buffer, "the same buffer");
        assert_eq!(second.len(), tracer.head_room, "only its room");

        let mut huge = tracer.batch();
        huge.resize(MAX_SPARE_BYTES + 1, 0);
        tracer.recycle(huge);
        assert!(tracer.spare.lock().unwrap().is_empty(), "a huge one is not kept");
        for _ in 0..2 * MAX_SPARE {
            tracer.recycle(tracer.batch());
            tracer.recycle(Vec::with_capacity(1024));
        }
        assert_eq!(tracer.spare.lock().unwrap().len(), MAX_SPARE);
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
}
