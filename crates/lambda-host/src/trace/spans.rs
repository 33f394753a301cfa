//! A traced invocation's spans: its SERVER span, from the scope's start to
//! its end with the answer [`answered`] recorded; a CLIENT span per call
//! out of the function ([`Call`], opened by the SDK interceptor in `aws.rs`
//! or by [`remote_call`]); the batch they are encoded into as they end,
//! sent as one datagram when the invocation ends (docs/tracing.md has
//! their attributes).

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

/// What the handler answered, for the SERVER span's attributes.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// The first invocation of this execution environment.
    pub cold_start: bool,
    /// The HTTP status of the answer.
    pub status: u16,
    /// The function's own error code, when it answered with one.
    pub error: Option<u32>,
    /// The request's HTTP method.
    pub method: &'a str,
    /// The path the client asked of the API (`url.path`), without the
    /// stage or the custom domain's API mapping key, which the front doors
    /// leave in or take out each their own way (docs/tracing.md,
    /// "Decisions").
    pub path: &'a str,
    /// The route that matched (`http.route`), if any did.
    pub route: Option<&'a str>,
    /// Lambda's request id (`faas.invocation_id`).
    pub invocation_id: Option<&'a str>,
    /// The invoked function's ARN, perhaps with an alias or version.
    pub function_arn: Option<&'a str>,
}

/// Records the handler's answer on the SERVER span of a traced invocation:
/// the HTTP attributes (`url.path` among them), `faas.*`, `ColdStart`,
/// `Status` and `ErrorCode` (indexed by X-Ray as annotations), error status
/// on a 5xx. The span ends and is sent with the scope; a second answer
/// changes nothing. Nothing outside a traced invocation.
pub fn answered(answer: Answer<'_>) {
    let _ = CURRENT.try_with(|invocation| {
        let (Some(spans), Some(server)) = (&invocation.spans, &invocation.server) else {
            return;
        };
        if server.end_at.get().is_some() {
            return;
        }
        let tracer = spans.tracer;
        // Written into the batch now, ended with the scope: its end time
        // is all that is left to set then.
        let written = spans.write(|out| {
            let mut span = spans.server_span(out, server, 0);
            if let Some(id) = answer.invocation_id {
                span.attribute("faas.invocation_id", Value::Str(id));
            }
            if let Some(arn) = answer.function_arn {
                tracer.function_attributes(arn, |encoded| span.raw(encoded));
            }
            // `faas.coldstart` and `ColdStart`.
            span.raw(tracer.cold_start_attributes(answer.cold_start));
            span.attribute("http.request.method", Value::Str(answer.method));
            span.attribute("url.path", Value::Str(answer.path));
            if let Some(route) = answer.route {
                span.attribute("http.route", Value::Str(route));
            }
            let status = i64::from(answer.status);
            span.attribute("http.response.status_code", Value::Int(status));
            span.attribute("Status", Value::Int(status));
            if let Some(code) = answer.error {
                span.attribute("ErrorCode", Value::Int(i64::from(code)));
            }
            span.raw(tracer.annotations_attribute(answer.error.is_some()));
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
