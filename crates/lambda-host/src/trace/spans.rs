//! A traced invocation's spans: its SERVER span, from the scope's start to
//! its end with the answer [`answered`] recorded; a CLIENT span per call
//! out of the function ([`Call`], opened by the SDK interceptor in `aws.rs`
//! or by [`remote_call`]); the batch they are encoded into as they end,
//! sent as one datagram when the invocation ends (docs/tracing.md has
//! their attributes).

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::{Arc, Mutex, PoisonError};

use lambda_http::http::{Response, Uri};

use super::daemon::{self, AwsCall, Tracer};
use super::otlp::{
    self, FLAG_HAS_IS_REMOTE, FLAG_IS_REMOTE, FLAG_SAMPLED, Kind, SpanHead, SpanWriter, StatusCode, Value,
};
use super::{CURRENT, Fields, Invocation, span_id, trace_id};

/// The longest message kept in a span's status or exception event: a
/// datagram must stay far below 64 KB, and a message longer than this says
/// nothing the first kilobyte did not.
const MAX_MESSAGE_BYTES: usize = 1024;

/// What every span of a traced invocation shares.
#[derive(Debug, Clone)]
pub(super) struct Spans {
    tracer: &'static Tracer,
    trace_id: [u8; 16],
    /// The SERVER span's id: the parent of the CLIENT spans.
    server_id: [u8; 8],
    sampled: bool,
    batch: Arc<Mutex<Batch>>,
}

/// The spans of an invocation, encoded as they end, sent when it ends.
#[derive(Debug, Default)]
pub(super) struct Batch {
    bytes: Vec<u8>,
    /// Where each span's bytes end.
    ends: Vec<usize>,
    /// Sent: a span that ends later (a key fetch the invocation stopped
    /// waiting for) goes out on its own.
    sent: bool,
}

/// The SERVER span, open while the invocation runs.
pub(super) struct Server {
    /// Lambda's segment, named by the header's `Parent`.
    parent: [u8; 8],
    started: u64,
    /// Where the span's end time sits in the batch, once [`answered`] has
    /// written the span there: only that is left for the scope's end.
    end_at: Cell<Option<usize>>,
}

impl Spans {
    /// The context of `header` if it says `Sampled=1` (or `Sampled=0` with
    /// Application Signals on) with a well-formed `Root` and `Parent`;
    /// `None` otherwise, and nothing is built or sent for it.
    pub(super) fn parse(header: &str, tracer: &'static Tracer) -> Option<(Self, Server)> {
        let Fields {
            root,
            parent,
            sampled,
        } = Fields::of(header);
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
                bytes: tracer.batch(),
                ends: Vec::with_capacity(4),
                sent: false,
            })),
        };
        let server = Server {
            parent,
            started: daemon::now(),
            end_at: Cell::new(None),
        };
        Some((spans, server))
    }

    fn flags(&self) -> u32 {
        FLAG_HAS_IS_REMOTE | if self.sampled { FLAG_SAMPLED } else { 0 }
    }

    /// Encodes a span that has ended into the batch, or sends it at once
    /// when the batch has gone.
    fn add(&self, encode: impl FnOnce(&mut Vec<u8>)) {
        if let Err(encode) = self.write(encode) {
            let mut alone = self.tracer.batch();
            encode(&mut alone);
            let end = alone.len();
            self.tracer.send(&mut alone, &[end], self.sampled);
            self.tracer.recycle(alone);
        }
    }

    /// Encodes a span into the batch, returning what `encode` returns; or
    /// hands `encode` back, unrun, when the batch has gone.
    fn write<T, F: FnOnce(&mut Vec<u8>) -> T>(&self, encode: F) -> Result<T, F> {
        let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        if batch.sent {
            return Err(encode);
        }
        let done = encode(&mut batch.bytes);
        let end = batch.bytes.len();
        batch.ends.push(end);
        Ok(done)
    }

    /// Sends the batch, once, the SERVER span's end time (at `end_at`, if
    /// it was written before it ended) set first.
    fn send(&self, server_end: Option<(usize, u64)>) {
        let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        if std::mem::replace(&mut batch.sent, true) {
            return;
        }
        let Batch { bytes, ends, .. } = &mut *batch;
        if let Some((end_at, end)) = server_end {
            otlp::set_end(bytes, end_at, end);
        }
        self.tracer.send(bytes, ends, self.sampled);
        self.tracer.recycle(std::mem::take(bytes));
    }

    /// Begins the SERVER span in `out`, with its attributes for Application
    /// Signals.
    fn server_span<'b>(&self, out: &'b mut Vec<u8>, server: &Server, end: u64) -> SpanWriter<'b> {
        let mut span = SpanWriter::begin(
            out,
            &SpanHead {
                trace_id: self.trace_id,
                span_id: self.server_id,
                parent_span_id: server.parent,
                name: self.tracer.server_name(),
                kind: Kind::Server,
                start_unix_nano: server.started,
                end_unix_nano: end,
                flags: self.flags() | FLAG_IS_REMOTE,
            },
        );
        self.local(&mut span, Kind::Server);
        span
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
    /// The SERVER span ends with the scope: its end time set, if
    /// [`answered`] wrote it, or written now as an error when the
    /// invocation ended without an answer (a panic, an event that could
    /// not be decoded); then the batch is sent.
    fn drop(&mut self) {
        let (Some(spans), Some(server)) = (&self.spans, &self.server) else {
            return;
        };
        let end = daemon::now();
        if let Some(end_at) = server.end_at.get() {
            spans.send(Some((end_at, end)));
            return;
        }
        spans.add(|out| {
            let mut span = spans.server_span(out, server, end);
            let message = "the invocation ended before the handler answered";
            span.attribute("error.type", Value::Str("NoAnswer"));
            span.exception(end, "NoAnswer", message);
            span.status(StatusCode::Error, message);
            span.finish();
        });
        spans.send(None);
    }
}

/// What only the function knows of its answer, for the SERVER span: put
/// it in the response's extensions. The host writes everything else it
/// knows itself (status, method, path, `faas.*`, cold start).
///
/// ```
/// # use lambda_host::trace::SpanDetails;
/// # use lambda_http::{Body, Response};
/// let mut response = Response::new(Body::from("{}"));
/// response
///     .extensions_mut()
///     .insert(SpanDetails::default().route("/plants").annotate("ErrorCode", 40901_u32));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SpanDetails {
    route: Option<Cow<'static, str>>,
    annotations: Vec<(&'static str, Annotation)>,
}

/// The value of an X-Ray annotation.
#[derive(Debug, Clone, PartialEq)]
pub enum Annotation {
    /// A number.
    Int(i64),
    /// True or false.
    Bool(bool),
    /// Text.
    Str(Cow<'static, str>),
}

impl From<i64> for Annotation {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl From<u32> for Annotation {
    fn from(value: u32) -> Self {
        Self::Int(i64::from(value))
    }
}

impl From<bool> for Annotation {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

impl From<&'static str> for Annotation {
    fn from(value: &'static str) -> Self {
        Self::Str(Cow::Borrowed(value))
    }
}

impl From<String> for Annotation {
    fn from(value: String) -> Self {
        Self::Str(Cow::Owned(value))
    }
}

impl SpanDetails {
    /// The route that matched (`http.route`), stage-independent.
    #[must_use]
    pub fn route(mut self, route: impl Into<Cow<'static, str>>) -> Self {
        self.route = Some(route.into());
        self
    }

    /// An X-Ray annotation (`key`, indexed, searchable): an attribute listed
    /// in `aws.xray.annotations` beside the host's `ColdStart` and `Status`.
    #[must_use]
    pub fn annotate(mut self, key: &'static str, value: impl Into<Annotation>) -> Self {
        self.annotations.push((key, value.into()));
        self
    }
}

/// What the host knows of an answer, for the SERVER span.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerAnswer<'a> {
    pub status: u16,
    pub method: &'a str,
    /// The path the client asked of the API (`url.path`).
    pub path: &'a str,
    pub invocation_id: &'a str,
    pub function_arn: Option<&'a str>,
    /// The first invocation of this execution environment.
    pub cold_start: bool,
    pub details: Option<&'a SpanDetails>,
}

/// Records the answer on the SERVER span of a traced invocation: the HTTP
/// attributes, `faas.*`, `ColdStart`, `Status` and the function's own
/// annotations (indexed by X-Ray), error status on a 5xx. The span ends and
/// is sent with the scope; a second answer changes nothing. Nothing outside
/// a traced invocation.
pub(crate) fn server_answer(answer: &ServerAnswer<'_>) {
    let _ = CURRENT.try_with(|invocation| {
        let (Some(spans), Some(server)) = (&invocation.spans, &invocation.server) else {
            return;
        };
        if server.end_at.get().is_some() {
            return;
        }
        let tracer = spans.tracer;
        let details = answer.details;
        // Written into the batch now, ended with the scope: its end time
        // is all that is left to set then.
        let written = spans.write(|out| {
            let mut span = spans.server_span(out, server, 0);
            span.attribute("faas.invocation_id", Value::Str(answer.invocation_id));
            if let Some(arn) = answer.function_arn {
                tracer.function_attributes(arn, |encoded| span.raw(encoded));
            }
            // `faas.coldstart` and `ColdStart`.
            span.raw(tracer.cold_start_attributes(answer.cold_start));
            span.attribute("http.request.method", Value::Str(answer.method));
            span.attribute("url.path", Value::Str(answer.path));
            if let Some(route) = details.and_then(|details| details.route.as_deref()) {
                span.attribute("http.route", Value::Str(route));
            }
            let status = i64::from(answer.status);
            span.attribute("http.response.status_code", Value::Int(status));
            span.attribute("Status", Value::Int(status));
            let annotations = details.map_or(&[][..], |details| &details.annotations[..]);
            for (key, value) in annotations {
                let value = match value {
                    Annotation::Int(value) => Value::Int(*value),
                    Annotation::Bool(value) => Value::Bool(*value),
                    Annotation::Str(value) => Value::Str(value),
                };
                span.attribute(key, value);
            }
            if annotations.is_empty() {
                span.raw(tracer.annotations_attribute());
            } else {
                let keys: Vec<&str> = ["ColdStart", "Status"]
                    .into_iter()
                    .chain(annotations.iter().map(|(key, _)| *key))
                    .collect();
                span.attribute("aws.xray.annotations", Value::Strs(&keys));
            }
            // A server span is an error on a 5xx only (the HTTP
            // conventions): a 4xx is the client's.
            if answer.status >= 500 {
                span.attribute("error.type", Value::Str(&answer.status.to_string()));
                span.status(StatusCode::Error, "");
            }
            span.finish()
        });
        // The batch has always stayed: it goes when the scope ends.
        if let Ok(end_at) = written {
            server.end_at.set(Some(end_at));
        }
    });
}

/// A CLIENT span of a call out of the function, opened when the call
/// starts and ended when it ends; one dropped unfinished ends as a timeout.
#[derive(Debug)]
pub(super) struct Call {
    spans: Spans,
    id: [u8; 8],
    start: u64,
    target: Target,
    ended: bool,
}

/// What the call is to, known when it starts.
#[derive(Debug)]
pub(super) enum Target {
    /// Its name and the attributes its operation, region and table decide.
    Aws(Arc<AwsCall>),
    Http {
        url: String,
    },
}

/// How a call ended.
#[derive(Debug, Default)]
pub(super) struct Ending<'a> {
    pub(super) status: Option<u16>,
    pub(super) request_id: Option<&'a str>,
    pub(super) retries: Option<u32>,
    /// The error's type (the service's error code, or what happened to a
    /// call that got no answer) and message.
    pub(super) error: Option<(&'a str, &'a str)>,
}

impl Call {
    /// A CLIENT span under the invocation's SERVER span, if the calling task
    /// serves a traced invocation.
    pub(super) fn open(target: impl FnOnce(&Tracer) -> Target) -> Option<Self> {
        CURRENT
            .try_with(|invocation| {
                let spans = invocation.spans.as_ref()?;
                Some(Self {
                    id: spans.tracer.id(),
                    spans: spans.clone(),
                    start: daemon::now(),
                    target: target(spans.tracer),
                    ended: false,
                })
            })
            .ok()
            .flatten()
    }

    pub(super) fn close(mut self, ending: &Ending<'_>) {
        self.end(ending);
    }

    fn end(&mut self, ending: &Ending<'_>) {
        self.ended = true;
        let end = daemon::now();
        let spans = &self.spans;
        spans.add(|out| {
            let name = match &self.target {
                // `Service.Operation`, as ADOT names an AWS SDK call's span.
                Target::Aws(call) => call.name.as_str(),
                // The method alone, as the HTTP client conventions name a
                // span when there is no route.
                Target::Http { .. } => "GET",
            };
            let mut span = SpanWriter::begin(
                out,
                &SpanHead {
                    trace_id: spans.trace_id,
                    span_id: self.id,
                    parent_span_id: spans.server_id,
                    name,
                    kind: Kind::Client,
                    start_unix_nano: self.start,
                    end_unix_nano: end,
                    flags: spans.flags(),
                },
            );
            match &self.target {
                Target::Aws(call) => {
                    span.raw(&call.attributes);
                    if let Some(request_id) = ending.request_id {
                        span.attribute("aws.request_id", Value::Str(request_id));
                    }
                    if let Some(retries) = ending.retries {
                        span.attribute("retry_attempts", Value::Int(i64::from(retries)));
                    }
                    spans.local(&mut span, Kind::Client);
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
    let Some(span) = Call::open(|_| Target::Http { url: url.to_string() }) else {
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

#[cfg(test)]
mod tests;
