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
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use lambda_http::tracing;
use lambda_http::tracing::level_filters::LevelFilter;

use super::conventions::{self, Conventions, ResourceOf};
use super::otlp;

/// Where Lambda says its X-Ray daemon (now its OTLP-over-UDP endpoint too)
/// listens.
pub(crate) const DAEMON_ADDRESS: &str = "AWS_XRAY_DAEMON_ADDRESS";

/// ADOT's switch for Application Signals: when `true`, invocations Lambda
/// did not sample send their spans too, marked `T1U`, so that Application
/// Signals counts every request.
pub(crate) const APPLICATION_SIGNALS: &str = "OTEL_AWS_APPLICATION_SIGNALS_ENABLED";

/// The line that opens every datagram to the daemon.
const DAEMON_HEADER: &[u8] = b"{\"format\":\"json\",\"version\":1}\n";

/// At most this many spans in one datagram, as ADOT batches on Lambda.
pub(super) const MAX_SPANS_PER_DATAGRAM: usize = 10;

/// A datagram stays under the daemon's 64 KB buffer.
const MAX_DATAGRAM: usize = 64_000;

/// At most this many batches' buffers are kept for later invocations,
/// none over MAX_SPARE_BYTES: a burst of invocations, or one with huge
/// spans, cannot grow the process for good.
const MAX_SPARE: usize = 16;
const MAX_SPARE_BYTES: usize = 16 * 1024;

thread_local! {
    /// The datagram being written, kept between sends.
    static DATAGRAM: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What the tracer needs of Lambda's environment, read by the host once
/// at start-up and handed to [`super::init`]: this module reads no
/// variable itself.
#[derive(Debug, Default, Clone)]
pub(crate) struct TraceEnv {
    /// `AWS_XRAY_DAEMON_ADDRESS`: unset, tracing is off.
    pub daemon_address: Option<String>,
    /// `OTEL_SERVICE_NAME`.
    pub otel_service_name: Option<String>,
    /// `POWERTOOLS_SERVICE_NAME`.
    pub powertools_service_name: Option<String>,
    /// `AWS_REGION`.
    pub region: Option<String>,
    /// `AWS_LAMBDA_FUNCTION_NAME`.
    pub function_name: Option<String>,
    /// `AWS_LAMBDA_FUNCTION_VERSION`.
    pub function_version: Option<String>,
    /// `AWS_LAMBDA_LOG_STREAM_NAME`.
    pub log_stream_name: Option<String>,
    /// `AWS_LAMBDA_LOG_GROUP_NAME`.
    pub log_group_name: Option<String>,
    /// `OTEL_AWS_APPLICATION_SIGNALS_ENABLED` is `true`.
    pub application_signals: bool,
    /// The logs' level (`AWS_LAMBDA_LOG_LEVEL`), which the `tracing`
    /// spans recorded are at too; `INFO` when `None`.
    pub log_level: Option<LevelFilter>,
}

impl TraceEnv {
    /// `service.name`: `OTEL_SERVICE_NAME`, else `POWERTOOLS_SERVICE_NAME`,
    /// else the function's name.
    pub(super) fn service(&self) -> &str {
        conventions::service_name(
            self.otel_service_name.as_deref(),
            self.powertools_service_name.as_deref(),
            self.function_name.as_deref(),
        )
    }
}

/// Built once at start-up; shared by every invocation.
pub(super) struct Tracer {
    socket: UdpSocket,
    daemon: SocketAddr,
    service: String,
    /// Every invocation traced, sampled or not (Application Signals).
    pub(super) application_signals: bool,
    resource: Vec<u8>,
    scope: Vec<u8>,
    /// The room a batch keeps for a request's head.
    head_room: usize,
    /// The names and encoded attributes of our spans.
    pub(super) conventions: Conventions,
    /// The buffers of batches sent, for the next ones: a batch's 2.5 KB
    /// from the allocator cost a sampled invocation more than its spans'
    /// encoding (docs/performance.md, "Traces").
    spare: Mutex<Vec<Vec<u8>>>,
    ids: RandomState,
    next_id: AtomicU64,
    warned: AtomicBool,
    warned_cap: AtomicBool,
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

/// Why `AWS_XRAY_DAEMON_ADDRESS` cannot be used.
#[derive(Debug)]
pub(super) enum DaemonError {
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
    /// The endpoint `env` names: `None` when it names none (tracing is
    /// off, not wanted). An address that cannot be used is an error for
    /// the caller to log: tracing is never a reason not to serve.
    pub(super) fn from_env(env: &TraceEnv) -> Option<Result<Self, DaemonError>> {
        let value = env
            .daemon_address
            .as_deref()
            .filter(|value| !value.trim().is_empty())?;
        Some(daemon_address(value).and_then(|daemon| Self::with(daemon, env)))
    }

    /// A tracer sending to `daemon` from an ephemeral port of its own, its
    /// resource that of `env`.
    pub(super) fn with(daemon: SocketAddr, env: &TraceEnv) -> Result<Self, DaemonError> {
        let any: SocketAddr = if daemon.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(any).map_err(DaemonError::Socket)?;
        socket.connect(daemon).map_err(DaemonError::Socket)?;
        // Never wait on the daemon: a full buffer loses spans, not time.
        socket.set_nonblocking(true).map_err(DaemonError::Socket)?;
        let service = env.service();
        let function = env.function_name.as_deref();
        let resource = conventions::resource(&ResourceOf {
            service,
            region: env.region.as_deref(),
            function_name: function,
            function_version: env.function_version.as_deref(),
            log_stream_name: env.log_stream_name.as_deref(),
            log_group_name: env.log_group_name.as_deref(),
        });
        let scope = conventions::scope();
        Ok(Self {
            socket,
            daemon,
            service: service.to_owned(),
            application_signals: env.application_signals,
            head_room: otlp::request_head_room(resource.len(), scope.len()),
            resource,
            scope,
            conventions: Conventions::new(service, function),
            spare: Mutex::new(Vec::new()),
            ids: RandomState::new(),
            next_id: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            warned_cap: AtomicBool::new(false),
        })
    }

    /// A fresh span id: a counter through SipHash with this process's
    /// random keys, so unique within the process and unpredictable across.
    pub(super) fn id(&self) -> [u8; 8] {
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
    pub(super) fn batch(&self) -> Vec<u8> {
        let spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let mut bytes = spare.unwrap_or_else(|| Vec::with_capacity(self.head_room + 2048));
        // A spare one keeps its old bytes in the room: a head is written
        // over what it sends of it.
        bytes.resize(self.head_room, 0);
        bytes
    }

    /// Keeps a [`Tracer::batch`] that has been sent for a later one.
    pub(super) fn recycle(&self, mut bytes: Vec<u8>) {
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
    pub(super) fn send(&self, bytes: &mut [u8], ends: &[usize], sampled: bool) {
        let (resource, scope) = (self.resource.len(), self.scope.len());
        DATAGRAM.with_borrow_mut(|datagram| {
            let mut first = 0;
            while first < ends.len() {
                let start = match first.checked_sub(1) {
                    None => self.head_room,
                    Some(previous) => ends.get(previous).copied().unwrap_or(self.head_room),
                };
                // As many spans as fit, at least one.
                let mut last = first;
                while let Some(&next) = ends.get(last + 1)
                    && last + 1 - first < MAX_SPANS_PER_DATAGRAM
                    && datagram_len(otlp::request_len(resource, scope, next - start)) <= MAX_DATAGRAM
                {
                    last += 1;
                }
                let Some(&end) = ends.get(last) else { break };
                let spans = end - start;
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
                let Some(room) = bytes.get_mut(head..start) else {
                    continue;
                };
                otlp::request_head(room, &self.resource, &self.scope, spans);
                let Some(request) = bytes.get(head..end) else {
                    continue;
                };
                datagram.clear();
                datagram.extend_from_slice(DAEMON_HEADER);
                datagram.extend_from_slice(if sampled { b"T1S" } else { b"T1U" });
                // In SIMD: `base64`'s engine spent half a traced invocation's
                // instructions here (docs/performance.md, "Traces").
                base64_simd::STANDARD.encode_append(request, datagram);
                if let Err(err) = self.socket.send(datagram) {
                    self.warn_once(&err);
                }
            }
        });
    }

    /// Says once per process that an invocation opened more spans than
    /// its cap, which are counted and not sent.
    pub(super) fn warn_cap_once(&self, cap: usize) {
        if !self.warned_cap.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                cap,
                "an invocation opened more spans than its cap; those past it are counted on its SERVER span and not sent; this is logged once"
            );
        }
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
pub(super) fn now() -> u64 {
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
    use crate::trace::otlp::{Kind, SpanHead, SpanWriter, Value};

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
        let tracer = Tracer::with(address, &TraceEnv::default()).unwrap();
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
        let tracer = Tracer::with("127.0.0.1:9".parse().unwrap(), &TraceEnv::default()).unwrap();
        let ids: std::collections::HashSet<[u8; 8]> = (0..10_000).map(|_| tracer.id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&[0; 8]));
    }

    #[test]
    fn a_sent_batchs_buffer_serves_a_later_one_and_the_spares_stay_few_and_small() {
        let tracer = Tracer::with("127.0.0.1:9".parse().unwrap(), &TraceEnv::default()).unwrap();
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
