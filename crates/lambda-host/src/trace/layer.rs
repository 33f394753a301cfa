//! The `tracing` spans of a traced invocation, as OpenTelemetry spans in
//! its datagram: a `tracing_subscriber::Layer` ([`SpansLayer`]) that a
//! function adds to its subscriber (the host's own has it).
//!
//! Each span opened inside a traced invocation keeps its data in its
//! extensions: its invocation's spans, its id and its parent's, its
//! fields. The worker's `invocation` span (target `lambda_host`) stands
//! for the SERVER span: what is opened under it hangs under the SERVER
//! span, and it is not exported itself. A span finds its invocation
//! through the nearest span above it that has one, else through the
//! invocation's scope, so that a task spawned with `.in_current_span()`
//! keeps its spans in their invocation. Fields follow
//! tracing-opentelemetry's conventions (`otel.name`, `otel.kind`,
//! `otel.status_code`, `otel.status_message`); docs/tracing.md says what
//! becomes of each.

use std::borrow::Cow;
use std::sync::OnceLock;

use lambda_http::tracing::field::{Field, Visit};
use lambda_http::tracing::level_filters::LevelFilter;
use lambda_http::tracing::span::{Attributes, Id, Record};
use lambda_http::tracing::subscriber::Registry;
use lambda_http::tracing::subscriber::layer::{Context, Layer};
use lambda_http::tracing::subscriber::registry::{LookupSpan, SpanRef};
use lambda_http::tracing::{self, Event, Level, Metadata, Subscriber};

use super::exporter;
use super::invocation::{self, Here};
use super::otlp::{Kind, SpanWriter, StatusCode, Value};
use super::spans::{ABANDONED, Spans, failed, truncated};

/// At most this many attributes per span; those past it are counted in
/// its `dropped_attributes_count`.
const MAX_ATTRIBUTES: usize = 32;

/// The level the host's logs are at, set once at start-up: the level of
/// a [`layer`] made without one.
static HOST_LEVEL: OnceLock<LevelFilter> = OnceLock::new();

/// Sets the level of the layers made by [`layer`]: the logs' level, so
/// that the AWS SDK's own spans (at debug) stay out unless the logs are
/// at debug too.
pub(super) fn set_level(level: LevelFilter) {
    let _ = HOST_LEVEL.set(level);
}

/// A `tracing_subscriber::Layer` that makes the `tracing` spans of each
/// traced invocation OpenTelemetry spans of its trace. Outside a traced
/// invocation it records nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpansLayer {
    /// The most verbose level recorded; the host's log level when `None`.
    level: Option<LevelFilter>,
}

/// The layer a function adds to its own subscriber, for its `tracing`
/// spans to reach its traces:
///
/// ```no_run
/// use lambda_http::tracing::subscriber::{self, layer::SubscriberExt, util::SubscriberInitExt};
///
/// subscriber::registry()
///     .with(subscriber::fmt::layer())
///     .with(lambda_host::trace::layer())
///     .init();
/// ```
///
/// Spans are recorded at the level of the host's logs
/// (`AWS_LAMBDA_LOG_LEVEL`, `INFO` when unset); [`SpansLayer::with_level`]
/// sets another.
pub fn layer() -> SpansLayer {
    SpansLayer::default()
}

impl SpansLayer {
    /// A layer recording spans at `level` and above.
    pub fn with_level(level: LevelFilter) -> Self {
        Self { level: Some(level) }
    }

    fn records(&self, metadata: &Metadata<'_>) -> bool {
        let level = self
            .level
            .or_else(|| HOST_LEVEL.get().copied())
            .unwrap_or(LevelFilter::INFO);
        *metadata.level() <= level
    }
}

/// The worker's span of each invocation.
fn is_invocation(metadata: &Metadata<'_>) -> bool {
    metadata.name() == "invocation"
        && metadata
            .target()
            .strip_prefix("lambda_host")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// What a span's extensions hold for this layer.
#[derive(Debug)]
enum Node {
    /// Under an invocation that is not traced: nothing here is recorded.
    Off,
    /// The worker's `invocation` span: the SERVER span of these spans.
    Server(Spans),
    /// A span being recorded.
    Open(Box<Open>),
}

/// A span being recorded, until it closes.
#[derive(Debug)]
struct Open {
    spans: Spans,
    id: [u8; 8],
    parent: [u8; 8],
    start: u64,
    name: Cow<'static, str>,
    kind: Kind,
    attributes: Vec<(&'static str, Owned)>,
    dropped: u32,
    status_code: Option<i64>,
    /// `otel.status_code`: `Some(true)` for `error`.
    status_error: Option<bool>,
    status_message: Option<String>,
    error_type: Option<String>,
    /// The exception's message, from an `error` field or an error event.
    error: Option<String>,
    error_at: u64,
    /// An HTTP client span that declared its status and has not had one:
    /// closed so, it was dropped before the answer came.
    awaiting_status: bool,
}

/// An attribute's value, owned until the span is encoded.
#[derive(Debug)]
enum Owned {
    Str(String),
    Int(i64),
    Bool(bool),
    Double(f64),
}

impl Owned {
    fn value(&self) -> Value<'_> {
        match self {
            Self::Str(text) => Value::Str(text),
            Self::Int(number) => Value::Int(*number),
            Self::Bool(flag) => Value::Bool(*flag),
            Self::Double(number) => Value::Double(*number),
        }
    }
}

/// `text` as an owned attribute value, cut to a kilobyte.
fn owned(text: &str) -> String {
    truncated(text).to_owned()
}

impl Open {
    fn attribute(&mut self, key: &'static str, value: Owned) {
        if let Some(known) = self.attributes.iter_mut().find(|(known, _)| *known == key) {
            known.1 = value;
        } else if self.attributes.len() < MAX_ATTRIBUTES {
            self.attributes.push((key, value));
        } else {
            self.dropped = self.dropped.saturating_add(1);
        }
    }

    fn text(&mut self, key: &'static str, text: &str) {
        match key {
            "message" => {}
            "otel.name" => self.name = Cow::Owned(owned(text)),
            "otel.kind" => self.kind = kind(text).unwrap_or(self.kind),
            "otel.status_code" => {
                self.status_error = match text.to_ascii_lowercase().as_str() {
                    "error" => Some(true),
                    "ok" => Some(false),
                    _ => self.status_error,
                }
            }
            "otel.status_message" => self.status_message = Some(owned(text)),
            "error.type" => self.error_type = Some(owned(text)),
            "error" => self.failed(text),
            _ => self.attribute(key, Owned::Str(owned(text))),
        }
    }

    fn number(&mut self, key: &'static str, number: i64) {
        if key == "http.response.status_code" {
            self.status_code = Some(number);
            self.awaiting_status = false;
        }
        self.attribute(key, Owned::Int(number));
    }

    fn failed(&mut self, message: &str) {
        if self.error.is_none() {
            self.error = Some(owned(message));
            self.error_at = exporter::now();
        }
    }

    /// Encodes the span, ended at `end`.
    fn encode(&self, out: &mut Vec<u8>, end: u64) {
        let mut head = self.spans.head(self.id, self.parent, &self.name, self.kind);
        head.start_unix_nano = self.start;
        head.end_unix_nano = end;
        let mut span = SpanWriter::begin(out, &head);
        for (key, value) in &self.attributes {
            span.attribute(key, value.value());
        }
        if self.kind == Kind::Client {
            self.spans.local(&mut span, Kind::Client);
        }
        span.dropped_attributes(self.dropped);
        // The HTTP conventions: a client's 4xx or 5xx is an error, a
        // server's 5xx only.
        let status_error = self.status_code.filter(|status| match self.kind {
            Kind::Client => *status >= 400,
            Kind::Server => *status >= 500,
            Kind::Internal | Kind::Producer | Kind::Consumer => false,
        });
        let status_message = self.status_message.as_deref();
        if let Some(message) = &self.error {
            let kind = self.error_type.as_deref().unwrap_or("_OTHER");
            failed(&mut span, self.error_at, kind, message, status_message);
        } else if self.awaiting_status && self.error_type.is_none() && self.status_error.is_none() {
            let (kind, message) = ABANDONED;
            failed(&mut span, end, kind, message, status_message);
        } else if self.error_type.is_some() || status_error.is_some() || self.status_error == Some(true) {
            let status = status_error.map(|status| status.to_string());
            if let Some(kind) = self.error_type.as_deref().or(status.as_deref()) {
                span.attribute("error.type", Value::Str(kind));
            }
            span.status(StatusCode::Error, status_message.unwrap_or_default());
        }
        span.finish();
    }
}

/// `otel.kind`'s values, as tracing-opentelemetry reads them.
fn kind(text: &str) -> Option<Kind> {
    Some(match text.to_ascii_lowercase().as_str() {
        "client" => Kind::Client,
        "server" => Kind::Server,
        "internal" => Kind::Internal,
        "producer" => Kind::Producer,
        "consumer" => Kind::Consumer,
        _ => return None,
    })
}

impl Visit for Open {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field.name(), value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text(field.name(), &format!("{value:?}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.number(field.name(), value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.number(field.name(), i64::try_from(value).unwrap_or(i64::MAX));
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(number) => self.number(field.name(), number),
            Err(_) => self.text(field.name(), &value.to_string()),
        }
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        match i64::try_from(value) {
            Ok(number) => self.number(field.name(), number),
            Err(_) => self.text(field.name(), &value.to_string()),
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        match field.name() {
            "error" if value => self.failed(""),
            name => self.attribute(name, Owned::Bool(value)),
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attribute(field.name(), Owned::Double(value));
    }

    fn record_error(&mut self, _field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.failed(&value.to_string());
    }
}

/// What an event inside a span says of a failure.
#[derive(Debug, Default)]
struct EventError {
    error: Option<String>,
    error_type: Option<String>,
    message: Option<String>,
}

impl Visit for EventError {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "error" => self.error = Some(owned(value)),
            "error.type" => self.error_type = Some(owned(value)),
            "message" => self.message = Some(owned(value)),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if matches!(field.name(), "error" | "error.type" | "message") {
            self.record_str(field, &format!("{value:?}"));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }
}

/// The nearest span at or above `span` that this layer knows of: its
/// spans and id, or `None` when none is, or it is under an untraced
/// invocation.
fn nearest<'a, S: for<'l> LookupSpan<'l>>(span: Option<SpanRef<'a, S>>) -> Option<Option<(Spans, [u8; 8])>> {
    for span in span?.scope() {
        match span.extensions().get::<Node>() {
            None => {}
            Some(Node::Off) => return Some(None),
            Some(Node::Server(spans)) => return Some(Some((spans.clone(), spans.server_id()))),
            Some(Node::Open(open)) => return Some(Some((open.spans.clone(), open.id))),
        }
    }
    None
}

impl<S> Layer<S> for SpansLayer
where
    S: Subscriber + for<'l> LookupSpan<'l>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let metadata = attrs.metadata();
        let Some(span) = ctx.span(id) else { return };
        if is_invocation(metadata) {
            let node = match invocation::here() {
                Here::Outside => return,
                Here::Untraced => Node::Off,
                Here::Traced(spans) => Node::Server(spans),
            };
            span.extensions_mut().insert(node);
            return;
        }
        if !self.records(metadata) {
            return;
        }
        let found = match nearest(span.parent()) {
            Some(found) => found,
            None => match invocation::here() {
                Here::Traced(spans) => {
                    let server = spans.server_id();
                    Some((spans, server))
                }
                Here::Outside | Here::Untraced => None,
            },
        };
        let Some((spans, parent)) = found else { return };
        let mut open = Open {
            id: spans.tracer().id(),
            spans,
            parent,
            start: exporter::now(),
            name: Cow::Borrowed(metadata.name()),
            kind: Kind::Internal,
            attributes: Vec::new(),
            dropped: 0,
            status_code: None,
            status_error: None,
            status_message: None,
            error_type: None,
            error: None,
            error_at: 0,
            awaiting_status: metadata.fields().field("http.response.status_code").is_some(),
        };
        attrs.record(&mut open);
        open.awaiting_status &= open.kind == Kind::Client;
        span.extensions_mut().insert(Node::Open(Box::new(open)));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(Node::Open(open)) = span.extensions_mut().get_mut::<Node>() {
            values.record(open.as_mut());
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        if *metadata.level() != Level::ERROR && metadata.fields().field("error").is_none() {
            return;
        }
        let Some(span) = ctx.event_span(event) else { return };
        let mut extensions = span.extensions_mut();
        let Some(Node::Open(open)) = extensions.get_mut::<Node>() else {
            return;
        };
        let mut seen = EventError::default();
        event.record(&mut seen);
        if open.error_type.is_none() {
            open.error_type = seen.error_type;
        }
        let message = seen.error.or(seen.message).unwrap_or_default();
        open.failed(&message);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let node = span.extensions_mut().remove::<Node>();
        if let Some(Node::Open(open)) = node {
            let end = exporter::now();
            open.spans.clone().add(|out| open.encode(out, end));
        }
    }
}

/// The id of the `tracing` span the calling code runs in, if this layer
/// records it under `spans`' invocation, for a span made elsewhere (an
/// AWS SDK call's) to hang under. Read through the registry of the
/// subscriber in use, when it is `tracing_subscriber`'s `Registry`.
pub(super) fn current_parent(spans: &Spans) -> Option<[u8; 8]> {
    let (found, id) = current()?;
    found.same_invocation(spans).then_some(id)
}

/// The invocation of the `tracing` span the calling code runs in, and
/// that span's id (its SERVER span's, for the worker's span).
pub(super) fn current() -> Option<(Spans, [u8; 8])> {
    tracing::Span::current()
        .with_subscriber(|(id, dispatch)| {
            let registry = dispatch.downcast_ref::<Registry>()?;
            nearest(registry.span(id)).flatten()
        })
        .flatten()
}

#[cfg(test)]
mod tests;
