//! A traced invocation's spans: its SERVER span, written when the service
//! answers ([`ServerAnswer`]) and ended with the invocation; the spans of
//! its work (a [`Call`] per AWS SDK call, and the `tracing` spans the
//! layer records), each encoded as it ends; and the batch they go into,
//! sent as one datagram when the invocation ends (docs/tracing.md has
//! their attributes).
//!
//! Nothing is encoded or sent under the batch's lock: a span is encoded
//! into a scratch buffer of the thread's, then appended under it; the
//! batch is taken out under it and sent after.

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex, PoisonError};

#[cfg(feature = "sdk")]
use super::conventions::AwsCall;
use super::conventions::SPANS_DROPPED;
use super::details::{Annotation, SpanDetails};
use super::exporter::{self, Tracer};
use super::otlp::{
    self, FLAG_HAS_IS_REMOTE, FLAG_IS_REMOTE, FLAG_SAMPLED, Kind, SpanHead, SpanWriter, StatusCode, Value,
};

/// The longest message kept in a span's status or exception event: a
/// datagram must stay far below 64 KB, and a message longer than this says
/// nothing the first kilobyte did not.
pub(super) const MAX_MESSAGE_BYTES: usize = 1024;

/// At most this many spans per invocation besides its SERVER span: a loop
/// that opens a span per item cannot flood the daemon or the process.
/// Those past it are counted ([`SPANS_DROPPED`]) and not sent.
pub(super) const MAX_SPANS: usize = 64;

thread_local! {
    /// Where a span is encoded before it is appended to its batch.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What every span of a traced invocation shares.
#[derive(Debug, Clone)]
pub(super) struct Spans {
    tracer: &'static Tracer,
    trace_id: [u8; 16],
    /// The SERVER span's id: the parent of the spans opened in no other.
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
    /// Sent: a span that ends later (a fetch the invocation stopped
    /// waiting for) goes out on its own.
    sent: bool,
    /// Spans besides the SERVER span, sent or not.
    spans: usize,
    /// Of those, past [`MAX_SPANS`]: not sent.
    dropped: usize,
}

/// The SERVER span, open while the invocation runs.
#[derive(Debug)]
pub(super) struct Server {
    /// Lambda's segment, named by the header's `Parent`.
    parent: [u8; 8],
    started: u64,
    /// Where the span's end time sits in the batch, once
    /// [`Spans::answer`] has written the span there: only that is left
    /// for the invocation's end.
    end_at: Cell<Option<usize>>,
}

/// What the host knows of an answer, for the SERVER span's attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerAnswer<'a> {
    /// The HTTP status of the answer.
    pub status: u16,
    /// The request's HTTP method.
    pub method: &'a str,
    /// The path the client asked of the API (`url.path`), without the
    /// stage or the custom domain's API mapping key (docs/tracing.md,
    /// "Decisions").
    pub path: &'a str,
    /// Lambda's request id (`faas.invocation_id`).
    pub invocation_id: &'a str,
    /// The invoked function's ARN, perhaps with an alias or version.
    pub function_arn: Option<&'a str>,
    /// The first invocation of this execution environment.
    pub cold_start: bool,
    /// What the function added: its route and annotations.
    pub details: Option<&'a SpanDetails>,
    /// An answer that failed its invocation (a stream that ended with the
    /// error trailers, a response its front door's JSON cannot carry):
    /// the error type and message.
    pub failure: Option<(&'a str, &'a str)>,
}

impl Spans {
    /// A traced invocation's spans, under the trace and parent its header
    /// named (`Root`, `Parent`); `None` when they are not well formed.
    pub(super) fn start(
        root: &str,
        parent: &str,
        sampled: bool,
        tracer: &'static Tracer,
    ) -> Option<(Self, Server)> {
        let trace_id = trace_id(root)?;
        let parent = span_id(parent)?;
        let spans = Self {
            tracer,
            trace_id,
            server_id: tracer.id(),
            sampled,
            batch: Arc::new(Mutex::new(Batch {
                bytes: tracer.batch(),
                ends: Vec::with_capacity(4),
                ..Batch::default()
            })),
        };
        let server = Server {
            parent,
            started: exporter::now(),
            end_at: Cell::new(None),
        };
        Some((spans, server))
    }

    pub(super) fn tracer(&self) -> &'static Tracer {
        self.tracer
    }

    /// Of the same invocation as `other`.
    #[cfg_attr(not(feature = "sdk"), allow(dead_code))]
    pub(super) fn same_invocation(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.batch, &other.batch)
    }

    pub(super) fn server_id(&self) -> [u8; 8] {
        self.server_id
    }

    /// The head of a span of this invocation's.
    pub(super) fn head<'n>(&self, id: [u8; 8], parent: [u8; 8], name: &'n str, kind: Kind) -> SpanHead<'n> {
        SpanHead {
            trace_id: self.trace_id,
            span_id: id,
            parent_span_id: parent,
            name,
            kind,
            start_unix_nano: 0,
            end_unix_nano: 0,
            flags: FLAG_HAS_IS_REMOTE | if self.sampled { FLAG_SAMPLED } else { 0 },
        }
    }

    /// Encodes a span that has ended (outside the batch's lock) and adds
    /// it to the batch, or sends it at once when the batch has gone; past
    /// [`MAX_SPANS`], counts it instead.
    pub(super) fn add(&self, encode: impl FnOnce(&mut Vec<u8>)) {
        with_scratch(|scratch| {
            encode(scratch);
            let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
            batch.spans += 1;
            if batch.spans > MAX_SPANS {
                batch.dropped += 1;
                drop(batch);
                self.tracer.warn_cap_once(MAX_SPANS);
                return;
            }
            if !batch.sent {
                batch.bytes.extend_from_slice(scratch);
                let end = batch.bytes.len();
                batch.ends.push(end);
                return;
            }
            drop(batch);
            let mut alone = self.tracer.batch();
            alone.extend_from_slice(scratch);
            let end = alone.len();
            self.tracer.send(&mut alone, &[end], self.sampled);
            self.tracer.recycle(alone);
        });
    }

    /// Writes the SERVER span with `answer` into the batch, its end time
    /// left for [`Spans::end`]; a second answer changes nothing.
    pub(super) fn answer(&self, server: &Server, answer: &ServerAnswer<'_>) {
        if server.end_at.get().is_some() {
            return;
        }
        let dropped = self.batch.lock().unwrap_or_else(PoisonError::into_inner).dropped;
        with_scratch(|scratch| {
            let conventions = &self.tracer.conventions;
            let mut span = self.server_span(scratch, server, 0);
            span.attribute("faas.invocation_id", Value::Str(answer.invocation_id));
            if let Some(arn) = answer.function_arn {
                conventions.function_attributes(arn, |encoded| span.raw(encoded));
            }
            // `faas.coldstart` and `ColdStart`.
            span.raw(conventions.cold_start_attributes(answer.cold_start));
            span.attribute("http.request.method", Value::Str(answer.method));
            span.attribute("url.path", Value::Str(answer.path));
            if let Some(route) = answer.details.and_then(SpanDetails::route_str) {
                span.attribute("http.route", Value::Str(route));
            }
            let status = i64::from(answer.status);
            span.attribute("http.response.status_code", Value::Int(status));
            span.attribute("Status", Value::Int(status));
            let annotations = answer.details.map_or(&[][..], SpanDetails::annotations);
            let mut keys: [&str; super::details::MAX_ANNOTATIONS] = [""; super::details::MAX_ANNOTATIONS];
            let mut named = 0;
            for ((key, value), slot) in annotations
                .iter()
                .filter(|(key, _)| !matches!(*key, "ColdStart" | "Status"))
                .zip(keys.iter_mut())
            {
                span.attribute(key, annotation(value));
                *slot = key;
                named += 1;
            }
            conventions.annotations_attribute(span.writer(), keys.get(..named).unwrap_or_default());
            if dropped > 0 {
                span.attribute(
                    SPANS_DROPPED,
                    Value::Int(i64::try_from(dropped).unwrap_or(i64::MAX)),
                );
            }
            // A server span is an error on a 5xx only (the HTTP
            // conventions): a 4xx is the client's. A failed answer is one
            // whatever its status.
            if let Some((kind, message)) = answer.failure {
                failed(&mut span, exporter::now(), kind, message, None);
            } else if answer.status >= 500 {
                span.attribute("error.type", Value::Str(&answer.status.to_string()));
                span.status(StatusCode::Error, "");
            }
            let end_at = span.finish();
            let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
            // The batch always stays until the invocation ends.
            if !batch.sent {
                let at = batch.bytes.len();
                batch.bytes.extend_from_slice(scratch);
                let end = batch.bytes.len();
                batch.ends.push(end);
                server.end_at.set(Some(at + end_at));
            }
        });
    }

    /// Ends the SERVER span (its end time set, or written now as an error
    /// when the invocation ended without an answer: a panic, an event that
    /// could not be decoded, the deadline) and sends the batch.
    pub(super) fn end(&self, server: &Server) {
        let end = exporter::now();
        if server.end_at.get().is_none() {
            with_scratch(|scratch| {
                let mut span = self.server_span(scratch, server, end);
                let message = "the invocation ended before the handler answered";
                span.attribute("error.type", Value::Str("NoAnswer"));
                span.exception(end, "NoAnswer", message);
                span.status(StatusCode::Error, message);
                span.finish();
                let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
                if !batch.sent {
                    batch.bytes.extend_from_slice(scratch);
                    let end = batch.bytes.len();
                    batch.ends.push(end);
                }
            });
        }
        let taken = {
            let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
            (!std::mem::replace(&mut batch.sent, true))
                .then(|| (std::mem::take(&mut batch.bytes), std::mem::take(&mut batch.ends)))
        };
        let Some((mut bytes, ends)) = taken else {
            return;
        };
        if let Some(end_at) = server.end_at.get() {
            otlp::set_end(&mut bytes, end_at, end);
        }
        self.tracer.send(&mut bytes, &ends, self.sampled);
        self.tracer.recycle(bytes);
    }

    /// Begins the SERVER span in `out`, with its attributes for Application
    /// Signals.
    fn server_span<'b>(&self, out: &'b mut Vec<u8>, server: &Server, end: u64) -> SpanWriter<'b> {
        let mut head = self.head(
            self.server_id,
            server.parent,
            &self.tracer.conventions.server_name,
            Kind::Server,
        );
        head.start_unix_nano = server.started;
        head.end_unix_nano = end;
        head.flags |= FLAG_IS_REMOTE;
        let mut span = SpanWriter::begin(out, &head);
        self.local(&mut span, Kind::Server);
        span
    }

    /// The attributes our SERVER and CLIENT spans carry for Application
    /// Signals (`aws.local.*`, `aws.span.kind`, `aws.trace.flag.sampled`),
    /// and `faas.trigger` on the SERVER span.
    pub(super) fn local(&self, span: &mut SpanWriter<'_>, kind: Kind) {
        let conventions = &self.tracer.conventions;
        match kind {
            Kind::Server => span.raw(conventions.server_attributes()),
            Kind::Client => span.raw(conventions.client_attributes()),
            Kind::Internal | Kind::Producer | Kind::Consumer => {}
        }
        span.raw(conventions.sampled_attribute(self.sampled));
    }
}

/// Runs `encode` on the thread's scratch buffer, emptied first; on a fresh
/// one if the thread's is in use (a span ending inside another's encoding).
fn with_scratch(encode: impl FnOnce(&mut Vec<u8>)) {
    let mut encode = Some(encode);
    let _ = SCRATCH.try_with(|scratch| {
        if let Ok(mut scratch) = scratch.try_borrow_mut() {
            scratch.clear();
            if let Some(encode) = encode.take() {
                encode(&mut scratch);
            }
            // A huge span does not keep its buffer for the thread's life.
            if scratch.capacity() > 16 * 1024 {
                *scratch = Vec::new();
            }
        }
    });
    if let Some(encode) = encode {
        encode(&mut Vec::new());
    }
}

fn annotation(value: &Annotation) -> Value<'_> {
    match value {
        Annotation::Int(number) => Value::Int(*number),
        Annotation::Bool(flag) => Value::Bool(*flag),
        Annotation::Str(text) => Value::Str(truncated(text)),
    }
}

/// A CLIENT span of an AWS SDK call, opened when the call starts and ended
/// when it ends; one dropped unfinished ends as a timeout.
#[cfg(feature = "sdk")]
#[derive(Debug)]
pub(super) struct Call {
    spans: Spans,
    id: [u8; 8],
    parent: [u8; 8],
    start: u64,
    call: Arc<AwsCall>,
    ended: bool,
}

/// How a call ended.
#[cfg(feature = "sdk")]
#[derive(Debug, Default)]
pub(super) struct Ending<'a> {
    pub(super) status: Option<u16>,
    pub(super) request_id: Option<&'a str>,
    pub(super) retries: Option<u32>,
    /// The error's type (the service's error code, or what happened to a
    /// call that got no answer) and message.
    pub(super) error: Option<(&'a str, &'a str)>,
}

/// The error of a call dropped before it ended.
pub(super) const ABANDONED: (&str, &str) = (
    "TimeoutError",
    "abandoned before it finished: the invocation's time ran out first",
);

#[cfg(feature = "sdk")]
impl Call {
    /// A CLIENT span of `spans`' invocation under `parent` (its SERVER
    /// span's id, or that of the `tracing` span the call was made in).
    pub(super) fn open(spans: &Spans, parent: Option<[u8; 8]>, call: Arc<AwsCall>) -> Self {
        Self {
            id: spans.tracer.id(),
            parent: parent.unwrap_or(spans.server_id),
            spans: spans.clone(),
            start: exporter::now(),
            call,
            ended: false,
        }
    }

    pub(super) fn close(mut self, ending: &Ending<'_>) {
        self.end(ending);
    }

    fn end(&mut self, ending: &Ending<'_>) {
        self.ended = true;
        let end = exporter::now();
        let spans = &self.spans;
        spans.add(|out| {
            let mut head = spans.head(self.id, self.parent, &self.call.name, Kind::Client);
            head.start_unix_nano = self.start;
            head.end_unix_nano = end;
            let mut span = SpanWriter::begin(out, &head);
            span.raw(&self.call.attributes);
            if let Some(request_id) = ending.request_id {
                span.attribute("aws.request_id", Value::Str(request_id));
            }
            if let Some(retries) = ending.retries {
                span.attribute("retry_attempts", Value::Int(i64::from(retries)));
            }
            spans.local(&mut span, Kind::Client);
            if let Some(status) = ending.status {
                span.attribute("http.response.status_code", Value::Int(i64::from(status)));
            }
            // A client span is an error on a 4xx or 5xx, or without an answer.
            let status_error = ending.status.filter(|status| *status >= 400);
            match (ending.error, status_error) {
                (Some((kind, message)), _) => failed(&mut span, end, kind, message, None),
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

#[cfg(feature = "sdk")]
impl Drop for Call {
    fn drop(&mut self) {
        if !self.ended {
            self.end(&Ending {
                error: Some(ABANDONED),
                ..Ending::default()
            });
        }
    }
}

/// Marks `span` failed with `kind` and `message`: `error.type`, an
/// `exception` event at `at`, status ERROR with `status_message` or else
/// `<kind>: <message>`.
pub(super) fn failed(
    span: &mut SpanWriter<'_>,
    at: u64,
    kind: &str,
    message: &str,
    status_message: Option<&str>,
) {
    let message = truncated(message);
    span.attribute("error.type", Value::Str(kind));
    span.exception(at, kind, message);
    match status_message {
        Some(status) => span.status(StatusCode::Error, truncated(status)),
        None => {
            let mut status = String::with_capacity(kind.len() + 2 + message.len());
            status.push_str(kind);
            if !message.is_empty() {
                status.push_str(": ");
                status.push_str(message);
            }
            span.status(StatusCode::Error, &status);
        }
    }
}

/// `text` cut to [`MAX_MESSAGE_BYTES`] at a character boundary.
pub(super) fn truncated(text: &str) -> &str {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// `1-` then 8 and 24 hex digits, what X-Ray writes as a trace id: the 32
/// hex digits of the W3C trace id.
fn trace_id(root: &str) -> Option<[u8; 16]> {
    // `1-`, 8 hex digits, `-`, 24 hex digits: by position, as splitting at
    // each `-` reads it (a hex digit is never one), without the splitter's
    // search.
    let (Some(b"1-"), Some(time), Some(b"-"), Some(random), 35) = (
        root.as_bytes().get(..2),
        root.get(2..10),
        root.as_bytes().get(10..11),
        root.get(11..),
        root.len(),
    ) else {
        return None;
    };
    let mut id = [0; 16];
    let (high, low) = id.split_at_mut(4);
    hex_into(time, high)?;
    hex_into(random, low)?;
    Some(id)
}

/// 16 hex digits: a segment or span id.
fn span_id(id: &str) -> Option<[u8; 8]> {
    let mut bytes = [0; 8];
    (id.len() == 16).then_some(())?;
    hex_into(id, &mut bytes)?;
    Some(bytes)
}

/// Each byte's value as a hex digit, `0xff` for those that are not one.
const HEX_DIGITS: [u8; 256] = {
    let mut digits = [0xff; 256];
    let mut rest: &mut [u8] = &mut digits;
    let mut byte: u8 = 0;
    while let [slot, tail @ ..] = rest {
        *slot = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            b'A'..=b'F' => byte - b'A' + 10,
            _ => 0xff,
        };
        rest = tail;
        byte = byte.wrapping_add(1);
    }
    digits
};

/// `out` from the hex digits of `hex`, two a byte: a table's lookup a
/// digit, where a `match` took about 16 instructions a digit.
fn hex_into(hex: &str, out: &mut [u8]) -> Option<()> {
    let digit = |byte: &u8| HEX_DIGITS.get(usize::from(*byte)).copied().unwrap_or(0xff);
    let mut invalid = 0;
    for (pair, byte) in hex.as_bytes().chunks_exact(2).zip(out.iter_mut()) {
        let [high, low] = pair else { return None };
        let (high, low) = (digit(high), digit(low));
        invalid |= high | low;
        *byte = high << 4 | low;
    }
    (invalid & 0xf0 == 0).then_some(())
}

#[cfg(test)]
pub(super) mod tests;
