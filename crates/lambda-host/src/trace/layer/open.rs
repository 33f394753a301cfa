//! One `tracing` span being recorded, until it closes: its fields as
//! attributes (bounded in number and size), its status and its error, then
//! its encoding into the invocation's batch, in tracing-opentelemetry's
//! conventions.

use std::borrow::Cow;

use lambda_http::tracing::Event;
use lambda_http::tracing::field::{Field, Visit};
use lambda_http::tracing::span::Attributes;

use super::super::exporter;
use super::super::otlp::{Kind, SpanWriter, StatusCode, Value};
use super::super::spans::{ABANDONED, Spans, failed, truncated};

/// At most this many attributes per span; those past it are counted in
/// its `dropped_attributes_count`.
pub(super) const MAX_ATTRIBUTES: usize = 32;

/// A span being recorded, until it closes.
#[derive(Debug)]
pub(super) struct Open {
    pub(super) spans: Spans,
    pub(super) id: [u8; 8],
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
    /// A span opened now under `parent`, with the fields it was opened with.
    pub(super) fn new(spans: Spans, parent: [u8; 8], attrs: &Attributes<'_>) -> Self {
        let metadata = attrs.metadata();
        let mut open = Self {
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
        open
    }

    /// An error event inside the span: the span failed, with its message.
    pub(super) fn event(&mut self, event: &Event<'_>) {
        let mut seen = EventError::default();
        event.record(&mut seen);
        if self.error_type.is_none() {
            self.error_type = seen.error_type;
        }
        let message = seen.error.or(seen.message).unwrap_or_default();
        self.failed(&message);
    }

    /// The span closed: encoded into its invocation's batch.
    pub(super) fn close(self) {
        let end = exporter::now();
        self.spans.clone().add(|out| self.encode(out, end));
    }

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
