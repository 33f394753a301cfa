//! Each invocation's trace context: its trace header on every AWS SDK
//! request made for it and, when Lambda sampled it (or Application Signals
//! wants every invocation) and runs its X-Ray daemon beside the function,
//! the OpenTelemetry spans that show its work, sent as ADOT sends them on
//! Lambda (docs/tracing.md has the shape, span by span).
//!
//! The SDK's recursion-detection interceptor copies `_X_AMZN_TRACE_ID` from
//! the process environment onto each request as `X-Amzn-Trace-Id`, and
//! `lambda_runtime`'s sequential loop sets that variable before every
//! invocation. Our loop never writes the environment (`runtime.rs` says
//! why), and with several invocations in flight at once one variable could
//! not name them all anyway. Instead the loop runs each handler inside
//! [`scope`] with its own invocation's trace header, a tokio task-local, and
//! [`TraceHeader`], registered once on the DynamoDB client, puts it on every
//! request that handler makes, each retry included. Outside any scope (the
//! pre-warm during init) it adds nothing.
//!
//! The same task-local carries what the spans need, parsed once when the
//! invocation starts: the trace id (the header's `Root`), Lambda's segment
//! as the remote parent (`Parent`), the id of the invocation's SERVER span,
//! which the CLIENT spans of its calls name as their parent, and the batch
//! its spans are encoded into as they end. Only when the header says
//! `Sampled=1` (or `Sampled=0` with Application Signals on) and `main`
//! enabled a [`Tracer`] is any of it built; an invocation without a header
//! has no context at all, never an earlier invocation's. A CLIENT span is
//! opened by [`AwsSubsegments`], the SDK interceptor, or by [`remote_call`]
//! (a JWKS or discovery fetch); one dropped before it finished (the handler
//! gave up at its deadline) ends from its `Drop`, as a timeout. When the
//! scope ends, the SERVER span ends, with what [`answered`] recorded, and
//! the batch goes out: one datagram for the invocation.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, Region, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use lambda_http::http::{Response, Uri};

mod aws;
mod daemon;
mod otlp;

pub use self::aws::AwsSubsegments;
pub use self::daemon::{APPLICATION_SIGNALS, DAEMON_ADDRESS, DaemonError, Environment, Tracer};
use self::otlp::{
    FLAG_HAS_IS_REMOTE, FLAG_IS_REMOTE, FLAG_SAMPLED, Kind, SpanHead, SpanWriter, StatusCode, Value,
};

/// The header the SDK's recursion-detection interceptor sets.
pub const HEADER: &str = "x-amzn-trace-id";

/// The longest message kept in a span's status or exception event: a
/// datagram must stay far below 64 KB, and a message longer than this says
/// nothing the first kilobyte did not.
const MAX_MESSAGE_BYTES: usize = 1024;

/// The process's tracer, when `main` enabled one. Beside the task-local
/// rather than in it: it is one socket for the life of the process, like
/// stdout, and the places that send (the SDK interceptor, the JWKS fetch)
/// are reached through code that must not know about tracing.
static TRACER: OnceLock<Tracer> = OnceLock::new();

/// Sends the spans of traced invocations through `tracer` from now on.
/// Called once by `main`; a second call changes nothing.
pub fn enable(tracer: Tracer) {
    let _ = TRACER.set(tracer);
}

tokio::task_local! {
    static CURRENT: Invocation;
}

/// One invocation's trace context, in the task that serves it or in a task
/// it waits for ([`carried`]).
struct Invocation {
    /// The trace header as the SDK's requests carry it.
    header: Option<String>,
    /// Present only for a traced invocation with a tracer enabled.
    spans: Option<Spans>,
    /// The SERVER span: only in the invocation's own task, which ends it.
    server: Option<Server>,
}

/// What every span of a traced invocation shares.
#[derive(Debug, Clone)]
struct Spans {
    tracer: &'static Tracer,
    trace_id: [u8; 16],
    /// The SERVER span's id: the parent of the CLIENT spans.
    server_id: [u8; 8],
    sampled: bool,
    batch: Arc<Mutex<Batch>>,
}

/// The spans of an invocation, encoded as they end, sent when it ends.
#[derive(Debug, Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Where each span's bytes end.
    ends: Vec<usize>,
    /// Sent: a span that ends later (a key fetch the invocation stopped
    /// waiting for) goes out on its own.
    sent: bool,
}

/// The SERVER span, open while the invocation runs.
struct Server {
    /// Lambda's segment, named by the header's `Parent`.
    parent: [u8; 8],
    started: u64,
    /// The attributes and status of the answer, encoded by [`answered`].
    answer: RefCell<Option<(Vec<u8>, bool)>>,
}

impl Spans {
    /// The context of `header` if it says `Sampled=1` (or `Sampled=0` with
    /// Application Signals on) with a well-formed `Root` and `Parent`;
    /// `None` otherwise, and nothing is built or sent for it.
    fn parse(header: &str, tracer: &'static Tracer) -> Option<(Self, Server)> {
        let (mut root, mut parent, mut sampled) = (None, None, false);
        for part in header.split(';') {
            match part.trim().split_once('=') {
                Some(("Root", value)) => root = Some(value),
                Some(("Parent", value)) => parent = Some(value),
                Some(("Sampled", value)) => sampled = value == "1",
                _ => {}
            }
        }
        if !sampled && !tracer.application_signals() {
            return None;
        }
        let trace_id = trace_id(root?)?;
        let parent = span_id(parent?)?;
        let spans = Self {
            tracer,
            trace_id,
            server_id: tracer.id(),
            sampled,
            batch: Arc::new(Mutex::new(Batch {
                bytes: Vec::with_capacity(2048),
                ends: Vec::with_capacity(4),
                sent: false,
            })),
        };
        let server = Server {
            parent,
            started: daemon::now(),
            answer: RefCell::new(None),
        };
        Some((spans, server))
    }

    fn flags(&self) -> u32 {
        FLAG_HAS_IS_REMOTE | if self.sampled { FLAG_SAMPLED } else { 0 }
    }

    /// Encodes a span that has ended into the batch, or sends it at once
    /// when the batch has gone.
    fn add(&self, encode: impl FnOnce(&mut Vec<u8>)) {
        let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        if batch.sent {
            drop(batch);
            let mut alone = Vec::with_capacity(1024);
            encode(&mut alone);
            self.tracer.send(&alone, &[alone.len()], self.sampled);
            return;
        }
        encode(&mut batch.bytes);
        let end = batch.bytes.len();
        batch.ends.push(end);
    }

    /// Sends the batch, once.
    fn send(&self) {
        let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        if std::mem::replace(&mut batch.sent, true) {
            return;
        }
        self.tracer.send(&batch.bytes, &batch.ends, self.sampled);
    }

    /// The attributes every span of ours carries for Application Signals
    /// (`aws.local.*`, `aws.span.kind`, `aws.trace.flag.sampled`), and
    /// `faas.trigger` on the SERVER span.
    fn local(&self, span: &mut SpanWriter<'_>, kind: Kind) {
        span.raw(match kind {
            Kind::Server => self.tracer.server_attributes(),
            Kind::Client => self.tracer.client_attributes(),
        });
        span.raw(self.tracer.sampled_attribute(self.sampled));
    }
}

impl Drop for Invocation {
    /// The SERVER span ends with the scope, with the answer [`answered`]
    /// recorded, or as an error when the invocation ended without one (a
    /// panic, an event that could not be decoded); then the batch is sent.
    fn drop(&mut self) {
        let (Some(spans), Some(server)) = (&self.spans, &self.server) else {
            return;
        };
        let answer = server.answer.borrow_mut().take();
        let end = daemon::now();
        spans.add(|out| {
            let mut span = SpanWriter::begin(
                out,
                &SpanHead {
                    trace_id: spans.trace_id,
                    span_id: spans.server_id,
                    parent_span_id: server.parent,
                    name: &[spans.tracer.server_name()],
                    kind: Kind::Server,
                    start_unix_nano: server.started,
                    end_unix_nano: end,
                    flags: spans.flags() | FLAG_IS_REMOTE,
                },
            );
            spans.local(&mut span, Kind::Server);
            match &answer {
                Some((attributes, failed)) => {
                    span.raw(attributes);
                    if *failed {
                        span.status(StatusCode::Error, "");
                    }
                }
                None => {
                    let message = "the invocation ended before the handler answered";
                    span.attribute("error.type", Value::Str("NoAnswer"));
                    span.exception(end, "NoAnswer", message);
                    span.status(StatusCode::Error, message);
                }
            }
            span.finish();
        });
        spans.send();
    }
}

/// `1-` then 8 and 24 hex digits, what X-Ray writes as a trace id: the 32
/// hex digits of the W3C trace id.
fn trace_id(root: &str) -> Option<[u8; 16]> {
    let mut parts = root.split('-');
    let (Some("1"), Some(time), Some(random), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if time.len() != 8 || random.len() != 24 {
        return None;
    }
    let mut id = [0; 16];
    hex_into(time, &mut id[..4])?;
    hex_into(random, &mut id[4..])?;
    Some(id)
}

/// 16 hex digits: a segment or span id.
fn span_id(id: &str) -> Option<[u8; 8]> {
    let mut bytes = [0; 8];
    (id.len() == 16).then_some(())?;
    hex_into(id, &mut bytes)?;
    Some(bytes)
}

fn hex_into(hex: &str, out: &mut [u8]) -> Option<()> {
    let digit = |byte: u8| char::from(byte).to_digit(16);
    for (pair, byte) in hex.as_bytes().chunks_exact(2).zip(out.iter_mut()) {
        *byte = u8::try_from(digit(pair[0])? << 4 | digit(pair[1])?).ok()?;
    }
    Some(())
}

/// Runs `future` with `trace_id` (the invocation's `Lambda-Runtime-Trace-Id`)
/// as the trace header of every SDK request it makes and, when traced, as
/// the trace of the spans it sends.
pub async fn scope<F: Future>(trace_id: Option<&str>, future: F) -> F::Output {
    scope_with(TRACER.get(), trace_id, future).await
}

/// [`scope`] with `tracer` instead of the one `main` enabled: for tests and
/// tools that run invocations in a process of their own.
pub async fn scope_with<F: Future>(
    tracer: Option<&'static Tracer>,
    trace_id: Option<&str>,
    future: F,
) -> F::Output {
    let (spans, server) = match (trace_id, tracer) {
        (Some(header), Some(tracer)) => Spans::parse(header, tracer).unzip(),
        _ => (None, None),
    };
    let invocation = Invocation {
        header: trace_id.map(encode),
        spans,
        server,
    };
    CURRENT.scope(invocation, future).await
}

/// The calling task's traced invocation, to be continued in another task
/// with [`carried`]: a JWKS fetch that a request waits for runs in a task of
/// its own (it outlives a request dropped at its deadline), and its span
/// still hangs under that request's SERVER span. Empty outside a traced
/// invocation.
pub struct Carried(Option<Spans>);

pub fn carry() -> Carried {
    Carried(
        CURRENT
            .try_with(|invocation| invocation.spans.clone())
            .ok()
            .flatten(),
    )
}

/// Runs `future` in the invocation `carried` from another task: the spans
/// of its calls hang under that invocation's SERVER span, in its batch
/// while it has not been sent. Its trace header is not carried; nothing
/// run this way calls AWS.
pub async fn carried<F: Future>(carried: Carried, future: F) -> F::Output {
    match carried.0 {
        None => future.await,
        Some(spans) => {
            let invocation = Invocation {
                header: None,
                spans: Some(spans),
                server: None,
            };
            CURRENT.scope(invocation, future).await
        }
    }
}

/// The trace header of the invocation being served by the calling task.
pub fn current() -> Option<String> {
    CURRENT
        .try_with(|invocation| invocation.header.clone())
        .ok()
        .flatten()
}

/// What the handler answered, for the SERVER span's attributes.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub cold_start: bool,
    pub status: u16,
    /// The function's own error code, when it answered with one.
    pub error: Option<u32>,
    pub method: &'a str,
    /// The route that matched (`http.route`), if any did.
    pub route: Option<&'a str>,
    /// Lambda's request id (`faas.invocation_id`).
    pub invocation_id: Option<&'a str>,
    /// The invoked function's ARN, perhaps with an alias or version.
    pub function_arn: Option<&'a str>,
}

/// Records the handler's answer on the SERVER span of a traced invocation:
/// the HTTP attributes, `faas.*`, `ColdStart`, `Status` and `ErrorCode`
/// (indexed by X-Ray as annotations), error status on a 5xx. The span ends
/// and is sent with the scope; a second answer changes nothing. Nothing
/// outside a traced invocation.
pub fn answered(answer: Answer<'_>) {
    let _ = CURRENT.try_with(|invocation| {
        let Some(server) = &invocation.server else {
            return;
        };
        let mut recorded = server.answer.borrow_mut();
        if recorded.is_some() {
            return;
        }
        let mut bytes = Vec::with_capacity(640);
        let mut attributes = otlp::Writer::new(&mut bytes);
        let mut attribute = |key: &str, value: Value<'_>| attributes.attribute(9, key, value);
        if let Some(id) = answer.invocation_id {
            attribute("faas.invocation_id", Value::Str(id));
        }
        if let Some(arn) = answer.function_arn {
            // The function's ARN without an alias or version, as the FaaS
            // conventions want `cloud.resource_id` on Lambda.
            let unqualified = arn
                .match_indices(':')
                .nth(6)
                .map_or(arn, |(colon, _)| &arn[..colon]);
            attribute("cloud.resource_id", Value::Str(unqualified));
            if let Some(account) = arn.split(':').nth(4) {
                attribute("cloud.account.id", Value::Str(account));
            }
        }
        attribute("faas.coldstart", Value::Bool(answer.cold_start));
        attribute("http.request.method", Value::Str(answer.method));
        if let Some(route) = answer.route {
            attribute("http.route", Value::Str(route));
        }
        let status = i64::from(answer.status);
        attribute("http.response.status_code", Value::Int(status));
        // A server span is an error on a 5xx only (the HTTP conventions):
        // a 4xx is the client's.
        let failed = answer.status >= 500;
        if failed {
            attribute("error.type", Value::Str(&answer.status.to_string()));
        }
        attribute("ColdStart", Value::Bool(answer.cold_start));
        attribute("Status", Value::Int(status));
        if let Some(code) = answer.error {
            attribute("ErrorCode", Value::Int(i64::from(code)));
            attribute(
                "aws.xray.annotations",
                Value::Strs(&["ColdStart", "Status", "ErrorCode"]),
            );
        } else {
            attribute("aws.xray.annotations", Value::Strs(&["ColdStart", "Status"]));
        }
        *recorded = Some((bytes, failed));
    });
}

/// A CLIENT span of a call out of the function, opened when the call
/// starts and ended when it ends; one dropped unfinished ends as a timeout.
#[derive(Debug)]
struct Call {
    spans: Spans,
    id: [u8; 8],
    start: u64,
    target: Target,
    ended: bool,
}

/// What the call is to, known when it starts.
#[derive(Debug)]
enum Target {
    Aws {
        /// The SDK's service (`DynamoDB`) and operation (`PutItem`).
        metadata: Metadata,
        region: Option<Region>,
        table_name: Option<String>,
    },
    Http {
        url: String,
    },
}

/// How a call ended.
#[derive(Debug, Default)]
struct Ending<'a> {
    status: Option<u16>,
    request_id: Option<&'a str>,
    retries: Option<u32>,
    /// The error's type (the service's error code, or what happened to a
    /// call that got no answer) and message.
    error: Option<(&'a str, &'a str)>,
}

impl Call {
    /// A CLIENT span under the invocation's SERVER span, if the calling task
    /// serves a traced invocation.
    fn open(target: impl FnOnce() -> Target) -> Option<Self> {
        CURRENT
            .try_with(|invocation| {
                let spans = invocation.spans.as_ref()?;
                Some(Self {
                    id: spans.tracer.id(),
                    spans: spans.clone(),
                    start: daemon::now(),
                    target: target(),
                    ended: false,
                })
            })
            .ok()
            .flatten()
    }

    fn close(mut self, ending: &Ending<'_>) {
        self.end(ending);
    }

    fn end(&mut self, ending: &Ending<'_>) {
        self.ended = true;
        let end = daemon::now();
        let spans = &self.spans;
        spans.add(|out| {
            let name = match &self.target {
                // `Service.Operation`, as ADOT names an AWS SDK call's span.
                Target::Aws { metadata, .. } => [metadata.service(), ".", metadata.name()],
                // The method alone, as the HTTP client conventions name a
                // span when there is no route.
                Target::Http { .. } => ["GET", "", ""],
            };
            let mut span = SpanWriter::begin(
                out,
                &SpanHead {
                    trace_id: spans.trace_id,
                    span_id: self.id,
                    parent_span_id: spans.server_id,
                    name: &name,
                    kind: Kind::Client,
                    start_unix_nano: self.start,
                    end_unix_nano: end,
                    flags: spans.flags(),
                },
            );
            match &self.target {
                Target::Aws {
                    metadata,
                    region,
                    table_name,
                } => {
                    let (service, operation) = (metadata.service(), metadata.name());
                    spans
                        .tracer
                        .operation_attributes(service, operation, |attributes| span.raw(attributes));
                    if let Some(region) = region {
                        span.attribute("aws.region", Value::Str(region.as_ref()));
                    }
                    if let Some(request_id) = ending.request_id {
                        span.attribute("aws.request_id", Value::Str(request_id));
                    }
                    if let Some(retries) = ending.retries {
                        span.attribute("retry_attempts", Value::Int(i64::from(retries)));
                    }
                    spans.local(&mut span, Kind::Client);
                    if let (Some(table), "DynamoDB") = (table_name, service) {
                        span.attribute("aws.dynamodb.table_names", Value::Strs(&[table.as_str()]));
                        span.attribute("aws.remote.resource.type", Value::Str("AWS::DynamoDB::Table"));
                        span.attribute("aws.remote.resource.identifier", Value::Str(table));
                        span.attribute("aws.remote.resource.cfn.primary.identifier", Value::Str(table));
                    }
                }
                Target::Http { url } => {
                    span.attribute("http.request.method", Value::Str("GET"));
                    span.attribute("url.full", Value::Str(url));
                    let parsed = url.parse::<Uri>().ok();
                    let host = parsed.as_ref().and_then(Uri::host).unwrap_or("remote");
                    span.attribute("server.address", Value::Str(host));
                    if let Some(port) = parsed.as_ref().and_then(Uri::port_u16) {
                        span.attribute("server.port", Value::Int(i64::from(port)));
                    }
                    spans.local(&mut span, Kind::Client);
                    span.attribute("aws.remote.service", Value::Str(host));
                    // ADOT's remote operation of an HTTP call: the method and
                    // the path's first segment.
                    let path = parsed.as_ref().map_or("/", Uri::path);
                    let first = path.split('/').nth(1).unwrap_or_default();
                    span.attribute("aws.remote.operation", Value::Str(&format!("GET /{first}")));
                }
            }
            if let Some(status) = ending.status {
                span.attribute("http.response.status_code", Value::Int(i64::from(status)));
            }
            // A client span is an error on a 4xx or 5xx, or without an answer.
            let status_error = ending.status.filter(|status| *status >= 400);
            match (ending.error, status_error) {
                (Some((kind, message)), _) => {
                    let message = truncated(message);
                    span.attribute("error.type", Value::Str(kind));
                    span.exception(end, kind, message);
                    let mut status = String::with_capacity(kind.len() + 2 + message.len());
                    status.push_str(kind);
                    if !message.is_empty() {
                        status.push_str(": ");
                        status.push_str(message);
                    }
                    span.status(StatusCode::Error, &status);
                }
                (None, Some(status)) => {
                    span.attribute("error.type", Value::Str(&status.to_string()));
                    span.status(StatusCode::Error, "");
                }
                (None, None) => {}
            }
            span.finish();
        });
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.ended {
            self.end(&Ending {
                error: Some((
                    "TimeoutError",
                    "abandoned before it finished: the invocation's time ran out first",
                )),
                ..Ending::default()
            });
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

/// Runs `call`, an HTTP `GET` of `url` outside AWS (a JWKS or discovery
/// document), as a CLIENT span when the calling task serves a traced
/// invocation; otherwise just runs it.
pub async fn remote_call<B, E: std::fmt::Display>(
    url: &Uri,
    call: impl Future<Output = Result<Response<B>, E>>,
) -> Result<Response<B>, E> {
    let Some(span) = Call::open(|| Target::Http { url: url.to_string() }) else {
        return call.await;
    };
    let result = call.await;
    match &result {
        Ok(response) => span.close(&Ending {
            status: Some(response.status().as_u16()),
            ..Ending::default()
        }),
        Err(err) => {
            let message = err.to_string();
            span.close(&Ending {
                error: Some(("ConnectionError", &message)),
                ..Ending::default()
            });
        }
    }
    result
}

/// Sets `X-Amzn-Trace-Id` on each request from the task-local of [`scope`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceHeader;

impl Intercept for TraceHeader {
    fn name(&self) -> &'static str {
        "TraceHeader"
    }

    /// Before signing, as the SDK's own interceptor does. The invocation's
    /// header replaces any other: the SDK's interceptor would have taken one
    /// from the environment, which is not this invocation's.
    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(value) = current() {
            // `encode` leaves only visible ASCII and spaces, which is always a
            // valid header value; `try_insert` keeps that a non-panicking path.
            context.request_mut().headers_mut().try_insert(HEADER, value)?;
        }
        Ok(())
    }
}

/// Percent-encodes control characters and non-ASCII bytes, the set the
/// SDK's recursion-detection interceptor encodes (`percent_encoding::CONTROLS`),
/// so that any trace header Lambda sends becomes a valid header value.
fn encode(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        if (0x20..0x7f).contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

#[cfg(test)]
pub(crate) mod decode {
    //! The datagrams as OpenTelemetry's own generated messages read them.

    use base64::Engine as _;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::trace::v1::Span;
    use prost::Message as _;
    use serde_json::{Map, Value, json};

    /// One datagram: its `T1S`/`T1U` mark, the resource's attributes and
    /// the spans.
    #[derive(Debug)]
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::decode::{Datagram, attributes, datagram, hex};
    use super::*;

    #[test]
    fn a_trace_header_as_lambda_sends_it_is_kept_as_it_is() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(encode(header), header);
    }

    #[test]
    fn control_characters_and_non_ascii_are_percent_encoded_as_the_sdk_does() {
        assert_eq!(encode("a\tb\u{7f}c\u{e9}d %"), "a%09b%7Fc%C3%A9d %");
    }

    #[tokio::test]
    async fn the_header_is_seen_inside_its_scope_only() {
        assert_eq!(current(), None);
        let inside = scope(Some("Root=1-a"), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("Root=1-a"));
        assert_eq!(scope(None, async { current() }).await, None);
        assert_eq!(current(), None);
    }

    const SAMPLED: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    const TRACE_ID: &str = "5759e988bd862e3fe1be46a994272793";

    /// A tracer sending to a listener of the test's own, standing in for
    /// the daemon; leaked, as the process's tracer lives as long as it.
    fn daemon(application_signals: bool) -> (&'static Tracer, std::net::UdpSocket) {
        let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let environment = Environment {
            region: Some("eu-west-1".to_owned()),
            function_name: Some("plants".to_owned()),
            function_version: Some("$LATEST".to_owned()),
            log_stream_name: Some("2026/11/25/[$LATEST]abc".to_owned()),
            log_group_name: Some("/aws/lambda/plants".to_owned()),
            application_signals,
        };
        let tracer = Tracer::with(listener.local_addr().unwrap(), "plants-eu", &environment).unwrap();
        (Box::leak(Box::new(tracer)), listener)
    }

    /// Every datagram already received. The sends are synchronous and the
    /// listener is on loopback: by the time the scope has ended, they are
    /// in its buffer or lost.
    fn datagrams(listener: &std::net::UdpSocket) -> Vec<Datagram> {
        listener.set_nonblocking(true).unwrap();
        let mut buffer = [0; 65_536];
        let mut datagrams = Vec::new();
        while let Ok(length) = listener.recv(&mut buffer) {
            datagrams.push(datagram(&buffer[..length]));
        }
        datagrams
    }

    fn answer(status: u16, error: Option<u32>) -> Answer<'static> {
        Answer {
            cold_start: true,
            status,
            error,
            method: "POST",
            route: Some("/plants"),
            invocation_id: Some("8f1c-request"),
            function_arn: Some("arn:aws:lambda:eu-west-1:123456789012:function:plants:live"),
        }
    }

    #[test]
    fn only_a_sampled_header_with_a_well_formed_root_and_parent_is_traced() {
        let (tracer, _listener) = daemon(false);
        let (signals, _other) = daemon(true);
        for (header, traced, with_signals) in [
            (SAMPLED, true, true),
            (
                "Sampled=1;Parent=53995c3f42cd8ad8;Root=1-5759e988-bd862e3fe1be46a994272793",
                true,
                true,
            ),
            (
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
                false,
                true,
            ),
            (
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
                false,
                true,
            ),
            ("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", false, false),
            (
                "Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8;Sampled=1",
                false,
                false,
            ),
            (
                "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
                false,
                false,
            ),
            (
                "Root=1-5759e988-bd862e3fe1be46a99427279g;Parent=53995c3f42cd8ad8;Sampled=1",
                false,
                false,
            ),
            (
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=\"x\";Sampled=1",
                false,
                false,
            ),
            ("", false, false),
        ] {
            assert_eq!(Spans::parse(header, tracer).is_some(), traced, "{header:?}");
            assert_eq!(
                Spans::parse(header, signals).is_some(),
                with_signals,
                "{header:?}, Application Signals on"
            );
        }
    }

    #[tokio::test]
    async fn a_sampled_invocation_sends_its_server_span_with_the_answer_as_attributes() {
        let (tracer, listener) = daemon(false);

        scope_with(Some(tracer), Some(SAMPLED), async {
            answered(answer(409, Some(40901)));
            // Once per invocation, whatever calls it again.
            answered(answer(200, None));
        })
        .await;

        let datagrams = datagrams(&listener);
        assert_eq!(datagrams.len(), 1, "{datagrams:#?}");
        let datagram = &datagrams[0];
        assert_eq!(datagram.mark, "T1S");
        assert_eq!(
            datagram.resource,
            json!({
                "service.name": "plants-eu", "telemetry.sdk.name": "plant-store", "telemetry.sdk.language": "rust",
                "telemetry.sdk.version": env!("CARGO_PKG_VERSION"), "cloud.provider": "aws", "cloud.platform": "aws_lambda",
                "cloud.region": "eu-west-1", "faas.name": "plants", "faas.version": "$LATEST",
                "faas.instance": "2026/11/25/[$LATEST]abc", "aws.log.group.names": "/aws/lambda/plants",
                "aws.local.service": "plants-eu",
            })
        );
        assert_eq!(
            datagram.scopes,
            [("plant-store".to_owned(), env!("CARGO_PKG_VERSION").to_owned())]
        );
        assert_eq!(datagram.spans.len(), 1);
        let span = &datagram.spans[0];
        assert_eq!(
            (
                span.name.as_str(),
                span.kind,
                hex(&span.trace_id),
                hex(&span.parent_span_id),
                span.flags
            ),
            (
                "plants",
                2,
                TRACE_ID.to_owned(),
                "53995c3f42cd8ad8".to_owned(),
                0x301
            )
        );
        assert_eq!(span.span_id.len(), 8);
        assert!(span.start_time_unix_nano <= span.end_time_unix_nano);
        assert_eq!(span.status, None, "a 409 is the client's");
        assert_eq!(
            attributes(&span.attributes),
            json!({
                "faas.trigger": "http", "aws.local.service": "plants-eu", "aws.local.operation": "plants/FunctionHandler",
                "aws.span.kind": "LOCAL_ROOT", "aws.trace.flag.sampled": true,
                "faas.invocation_id": "8f1c-request",
                "cloud.resource_id": "arn:aws:lambda:eu-west-1:123456789012:function:plants",
                "cloud.account.id": "123456789012", "faas.coldstart": true,
                "http.request.method": "POST", "http.route": "/plants", "http.response.status_code": 409,
                "ColdStart": true, "Status": 409, "ErrorCode": 40901,
                "aws.xray.annotations": ["ColdStart", "Status", "ErrorCode"],
            })
        );
    }

    #[tokio::test]
    async fn a_5xx_is_an_error_of_the_server_span() {
        let (tracer, listener) = daemon(false);

        scope_with(Some(tracer), Some(SAMPLED), async {
            answered(answer(503, Some(50301)))
        })
        .await;

        let span = &datagrams(&listener)[0].spans[0];
        let status = span.status.as_ref().expect("a status");
        assert_eq!(status.code, 2, "ERROR");
        assert_eq!(attributes(&span.attributes)["error.type"], "503");
    }

    #[tokio::test]
    async fn an_invocation_that_ends_unanswered_ends_its_server_span_as_an_error() {
        let (tracer, listener) = daemon(false);

        scope_with(Some(tracer), Some(SAMPLED), async {}).await;

        let datagrams = datagrams(&listener);
        assert_eq!(datagrams.len(), 1);
        let span = &datagrams[0].spans[0];
        assert_eq!(span.status.as_ref().map(|status| status.code), Some(2));
        assert_eq!(span.events.len(), 1);
        assert_eq!(span.events[0].name, "exception");
        assert_eq!(
            attributes(&span.events[0].attributes)["exception.type"],
            "NoAnswer"
        );
        assert_eq!(attributes(&span.attributes)["error.type"], "NoAnswer");
        assert_eq!(attributes(&span.attributes).get("faas.invocation_id"), None);
    }

    async fn one_remote_call_and_an_answer() {
        answered(answer(200, None));
        let uri: Uri = "https://issuer.example/jwks".parse().unwrap();
        let _ = remote_call(&uri, async { Ok::<_, String>(Response::new(())) }).await;
    }

    #[tokio::test]
    async fn unsampled_headerless_or_untraced_invocations_send_nothing() {
        let (tracer, listener) = daemon(false);
        let unsampled = SAMPLED.replace("Sampled=1", "Sampled=0");
        for (tracer, header) in [
            (Some(tracer), Some(unsampled.as_str())),
            (Some(tracer), None),
            (None, Some(SAMPLED)),
        ] {
            scope_with(tracer, header, one_remote_call_and_an_answer()).await;
        }
        one_remote_call_and_an_answer().await;

        assert_eq!(datagrams(&listener).len(), 0);
    }

    #[tokio::test]
    async fn with_application_signals_an_unsampled_invocation_sends_its_spans_marked_unsampled() {
        let (tracer, listener) = daemon(true);
        let unsampled = SAMPLED.replace("Sampled=1", "Sampled=0");

        scope_with(Some(tracer), Some(&unsampled), one_remote_call_and_an_answer()).await;
        scope_with(Some(tracer), None, one_remote_call_and_an_answer()).await;

        let datagrams = datagrams(&listener);
        assert_eq!(
            datagrams.len(),
            1,
            "the headerless one sends nothing: {datagrams:#?}"
        );
        assert_eq!(datagrams[0].mark, "T1U");
        assert_eq!(datagrams[0].spans.len(), 2);
        for span in &datagrams[0].spans {
            assert_eq!(span.flags & 0xff, 0, "not sampled: {span:?}");
            assert_eq!(attributes(&span.attributes)["aws.trace.flag.sampled"], false);
        }
    }

    #[tokio::test]
    async fn a_remote_call_is_a_client_span_of_the_server_span_and_one_cut_short_is_a_timeout() {
        let (tracer, listener) = daemon(false);
        let uri: Uri = "https://issuer.example:8443/.well-known/jwks.json"
            .parse()
            .unwrap();

        scope_with(Some(tracer), Some(SAMPLED), async {
            let answer = Response::builder().status(404).body(()).unwrap();
            let _ = remote_call(&uri, async { Ok::<_, String>(answer) }).await;
            let hangs = remote_call(&uri, std::future::pending::<Result<Response<()>, String>>());
            let _ = tokio::time::timeout(Duration::from_millis(10), hangs).await;
            let _ = remote_call(&uri, async { Err::<Response<()>, _>("connection refused") }).await;
            answered(super::tests::answer(200, None));
        })
        .await;

        let datagrams = datagrams(&listener);
        assert_eq!(datagrams.len(), 1, "one datagram for the invocation");
        let spans = &datagrams[0].spans;
        assert_eq!(spans.len(), 4, "{spans:#?}");
        let server = &spans[3];
        assert_eq!(server.kind, 2);
        let calls: Vec<(Value, Value, Value)> = spans[..3]
            .iter()
            .map(|span| {
                assert_eq!(
                    (
                        span.name.as_str(),
                        span.kind,
                        &span.parent_span_id,
                        hex(&span.trace_id),
                        span.flags
                    ),
                    ("GET", 3, &server.span_id, TRACE_ID.to_owned(), 0x101)
                );
                let status = span
                    .status
                    .as_ref()
                    .map(|status| json!([status.code, status.message]));
                let events: Vec<Value> = span
                    .events
                    .iter()
                    .map(|event| attributes(&event.attributes))
                    .collect();
                (attributes(&span.attributes), json!(status), json!(events))
            })
            .collect();
        let common = json!({
            "http.request.method": "GET", "url.full": "https://issuer.example:8443/.well-known/jwks.json",
            "server.address": "issuer.example", "server.port": 8443,
            "aws.local.service": "plants-eu", "aws.local.operation": "plants/FunctionHandler",
            "aws.span.kind": "CLIENT", "aws.trace.flag.sampled": true,
            "aws.remote.service": "issuer.example", "aws.remote.operation": "GET /.well-known",
        });
        let with = |extra: Value| {
            let mut all = common.clone();
            all.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            all
        };
        assert_eq!(
            calls[0],
            (
                with(json!({ "http.response.status_code": 404, "error.type": "404" })),
                json!([2, ""]),
                json!([])
            )
        );
        let timeout = "abandoned before it finished: the invocation's time ran out first";
        assert_eq!(
            calls[1],
            (
                with(json!({ "error.type": "TimeoutError" })),
                json!([2, format!("TimeoutError: {timeout}")]),
                json!([{ "exception.type": "TimeoutError", "exception.message": timeout }])
            )
        );
        assert_eq!(
            calls[2],
            (
                with(json!({ "error.type": "ConnectionError" })),
                json!([2, "ConnectionError: connection refused"]),
                json!([{ "exception.type": "ConnectionError", "exception.message": "connection refused" }])
            )
        );
    }

    #[tokio::test]
    async fn a_call_that_ends_after_its_invocation_is_sent_on_its_own() {
        let (tracer, listener) = daemon(false);
        let uri: Uri = "https://issuer.example/jwks".parse().unwrap();
        let (release, released) = tokio::sync::oneshot::channel::<()>();

        let mut fetch = None;
        scope_with(Some(tracer), Some(SAMPLED), async {
            answered(answer(503, Some(50302)));
            // The request stops waiting for the fetch: answered at its deadline.
            fetch = Some(tokio::spawn(carried(carry(), async move {
                let _ = remote_call(&uri, async {
                    let _ = released.await;
                    Ok::<_, String>(Response::new(()))
                })
                .await;
            })));
        })
        .await;
        let _ = release.send(());
        fetch.unwrap().await.unwrap();

        let datagrams = datagrams(&listener);
        assert_eq!(datagrams.len(), 2, "{datagrams:#?}");
        let (server, call) = (&datagrams[0].spans[0], &datagrams[1].spans[0]);
        assert_eq!((server.kind, call.kind), (2, 3));
        assert_eq!(call.parent_span_id, server.span_id);
        assert_eq!(call.trace_id, server.trace_id);
    }

    #[tokio::test]
    async fn more_than_ten_spans_go_in_datagrams_of_ten() {
        let (tracer, listener) = daemon(false);
        let uri: Uri = "https://issuer.example/jwks".parse().unwrap();

        scope_with(Some(tracer), Some(SAMPLED), async {
            for _ in 0..24 {
                let _ = remote_call(&uri, async { Ok::<_, String>(Response::new(())) }).await;
            }
            answered(answer(200, None));
        })
        .await;

        let sizes: Vec<usize> = datagrams(&listener)
            .iter()
            .map(|datagram| datagram.spans.len())
            .collect();
        assert_eq!(sizes, [10, 10, 5]);
    }

    #[tokio::test]
    async fn concurrent_scopes_each_see_their_own_header() {
        let one = scope(Some("Root=1-one"), async {
            tokio::task::yield_now().await;
            current()
        });
        let two = scope(Some("Root=1-two"), async {
            tokio::task::yield_now().await;
            current()
        });
        let (one, two) = tokio::join!(one, two);
        assert_eq!(one.as_deref(), Some("Root=1-one"));
        assert_eq!(two.as_deref(), Some("Root=1-two"));
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = truncated(&long);
        assert!(cut.len() <= MAX_MESSAGE_BYTES && cut.len() > MAX_MESSAGE_BYTES - 2);
        assert_eq!(truncated("short"), "short");
    }
}
