//! The JSON log line, written rather than serialized: the bytes of
//! `tracing-subscriber`'s JSON format as [`super::json_subscriber`] sets it
//! up (the level, the event's fields flattened, the current span; no time,
//! no target, no span list), into a buffer kept per thread. That format
//! writes each line through serde's map serializer into a `fmt::Write`
//! adapter that checks every piece for UTF-8, and parses the span's fields
//! back from JSON on every line; this writes the same bytes directly and
//! copies the span's fields as they were formatted. A span's fields are
//! formatted as `JsonFields` formats them, without its map of
//! `serde_json::Value`s (docs/performance.md, "A warm create against its
//! floor").

use std::cell::RefCell;
use std::fmt::{self, Write as _};

use lambda_http::tracing::callsite::Identifier;
use lambda_http::tracing::field::{Field, Visit};
use lambda_http::tracing::span::Record;
use lambda_http::tracing::subscriber::field::RecordFields;
use lambda_http::tracing::subscriber::fmt::format::{FormatEvent, FormatFields, JsonFields, Writer};
use lambda_http::tracing::subscriber::fmt::{FmtContext, FormattedFields};
use lambda_http::tracing::subscriber::registry::{LookupSpan, SpanRef};
use lambda_http::tracing::{Event, Level, Metadata, Subscriber};

use crate::json_string::{escape, string};

/// The event formatter of [`super::json_subscriber`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct JsonLine;

thread_local! {
    static LINE: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// What a thread keeps between lines: the line's buffer and the keys of
/// the last event callsite it wrote.
#[derive(Default)]
struct Buffers {
    line: String,
    keys: Keys,
}

/// The keys of one event callsite, each written as `,"name":`, so that
/// the next line from the same callsite (the request line, every
/// invocation) copies them rather than escaping each name again. Bounded
/// by the largest field set seen; each key's buffer is kept for the next
/// callsite.
#[derive(Default)]
struct Keys {
    callsite: Option<Identifier>,
    /// Each field's key, by the field's index.
    written: Vec<String>,
}

impl Keys {
    /// Makes these the keys of `metadata`'s fields.
    fn hold(&mut self, metadata: &'static Metadata<'static>) {
        let callsite = metadata.callsite();
        if self.callsite.as_ref() == Some(&callsite) {
            return;
        }
        let fields = metadata.fields();
        self.written.resize_with(fields.len(), String::new);
        for (key, field) in self.written.iter_mut().zip(fields) {
            key.clear();
            write_key(key, field.name());
        }
        self.callsite = Some(callsite);
    }

    /// `field`'s key, if it is one of the fields held.
    fn get(&self, field: &Field) -> Option<&str> {
        if self.callsite.as_ref() != Some(&field.callsite()) {
            return None;
        }
        self.written.get(field.index()).map(String::as_str)
    }
}

/// `,"name":`, the name escaped.
fn write_key(out: &mut String, name: &str) {
    out.push_str(",\"");
    escape(out, name);
    out.push_str("\":");
}

impl<S, N> FormatEvent<S, N> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        LINE.with(|buffers| match buffers.try_borrow_mut() {
            Ok(mut buffers) => {
                let Buffers { line, keys } = &mut *buffers;
                line.clear();
                keys.hold(event.metadata());
                write_line(line, Some(keys), ctx, event);
                writer.write_str(line)
            }
            // In use by a line being written on this thread (tracing's
            // dispatcher allows none today): a buffer of its own.
            Err(_) => {
                let mut line = String::new();
                write_line(&mut line, None, ctx, event);
                writer.write_str(&line)
            }
        })
    }
}

fn write_line<S, N>(line: &mut String, keys: Option<&Keys>, ctx: &FmtContext<'_, S, N>, event: &Event<'_>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    line.push_str(r#"{"level":"#);
    line.push_str(level(event.metadata().level()));
    // The span `tracing-subscriber` picks: the event's explicit parent if
    // it is known, else the current one.
    let span = event
        .parent()
        .and_then(|id| ctx.span(id))
        .or_else(|| ctx.lookup_current());
    event.record(&mut Members { line, keys });
    if let Some(span) = span {
        line.push_str(r#","span":"#);
        write_span::<S, N>(line, &span);
    }
    line.push_str("}\n");
}

fn level(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => r#""ERROR""#,
        Level::WARN => r#""WARN""#,
        Level::INFO => r#""INFO""#,
        Level::DEBUG => r#""DEBUG""#,
        Level::TRACE => r#""TRACE""#,
    }
}

/// The span's fields as its formatter wrote them, then its name.
fn write_span<S, N>(line: &mut String, span: &SpanRef<'_, S>)
where
    S: for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    let extensions = span.extensions();
    let fields = extensions
        .get::<FormattedFields<N>>()
        .map_or("", |fields| fields.fields.as_str());
    // `SpanFields` (or `JsonFields`) wrote them as serde_json writes a
    // map, which parsing and writing again, as `tracing-subscriber` does,
    // leaves unchanged.
    let members = fields.strip_prefix('{').and_then(|rest| rest.strip_suffix('}'));
    line.push('{');
    match members {
        Some("") => {}
        Some(members) => {
            line.push_str(members);
            line.push(',');
        }
        None => reformat(line, fields),
    }
    line.push_str(r#""name":"#);
    string(line, span.metadata().name());
    line.push('}');
}

/// What `tracing-subscriber` writes for fields that are not an object.
fn reformat(line: &mut String, fields: &str) {
    let mut out = Vec::new();
    let written = match serde_json::from_str::<serde_json::Value>(fields) {
        Ok(serde_json::Value::Object(members)) => {
            for (name, value) in &members {
                let _ = serde_json::to_writer(&mut out, name);
                out.push(b':');
                let _ = serde_json::to_writer(&mut out, value);
                out.push(b',');
            }
            Ok(())
        }
        Ok(value) => {
            out.extend_from_slice(br#""field":"#);
            let _ = serde_json::to_writer(&mut out, &value);
            out.extend_from_slice(br#","field_error":"field was no a valid object","#);
            Ok(())
        }
        Err(err) => Err(err.to_string()),
    };
    match written {
        Ok(()) => line.push_str(&String::from_utf8_lossy(&out)),
        Err(err) => {
            line.push_str(r#""field_error":"#);
            string(line, &err);
            line.push(',');
        }
    }
}

/// The span fields' formatter of [`super::json_subscriber`]: the bytes of
/// `JsonFields` (a JSON object, its members sorted by name, a name given
/// twice keeping its last value), which collects the fields into a map of
/// `serde_json::Value`s first. The values are written into a buffer kept
/// per thread and the object handed to the span's own `String` in one
/// piece, which then needs a single allocation. Fields it treats specially
/// (a `Debug` value under a raw or `log.` name, bytes), more than
/// [`MEMBERS`] of them, and fields recorded after the span's creation go to
/// `JsonFields` itself.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SpanFields;

/// The most fields a span's own formatting takes.
const MEMBERS: usize = 8;

/// The capacity a thread's span buffers keep between spans: a span with
/// larger fields does not hold its memory for the thread's life.
const KEPT: usize = 1024;

thread_local! {
    static SPAN: RefCell<SpanBuffers> = RefCell::new(SpanBuffers::default());
}

/// A thread's buffers for a span's fields: their values, then the object.
#[derive(Default)]
struct SpanBuffers {
    values: String,
    object: String,
}

impl<'w> FormatFields<'w> for SpanFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        SPAN.with(|buffers| match buffers.try_borrow_mut() {
            Ok(mut buffers) => {
                let SpanBuffers { values, object } = &mut *buffers;
                values.clear();
                object.clear();
                let written = format_span_fields(writer, fields, values, object);
                for buffer in [values, object] {
                    if buffer.capacity() > KEPT {
                        *buffer = String::new();
                    }
                }
                written
            }
            // In use by a span being made while one is (a field's `Debug`
            // that opens a span): buffers of its own.
            Err(_) => format_span_fields(writer, fields, &mut String::new(), &mut String::new()),
        })
    }

    fn add_fields(&self, current: &'w mut FormattedFields<Self>, fields: &Record<'_>) -> fmt::Result {
        let mut json = FormattedFields::<JsonFields>::new(std::mem::take(&mut current.fields));
        let added = JsonFields::new().add_fields(&mut json, fields);
        current.fields = json.fields;
        added
    }
}

/// `fields` as the JSON object of [`SpanFields`], written with `values` and
/// `object` (both empty) as its buffers.
fn format_span_fields<R: RecordFields>(
    mut writer: Writer<'_>,
    fields: R,
    values: &mut String,
    object: &mut String,
) -> fmt::Result {
    let mut sorted = Sorted {
        members: Default::default(),
        len: 0,
        values,
        unusual: false,
    };
    fields.record(&mut sorted);
    if sorted.unusual {
        return JsonFields::new().format_fields(writer, fields);
    }
    object.push('{');
    for (at, (name, range)) in sorted.members.iter().take(sorted.len).enumerate() {
        if at > 0 {
            object.push(',');
        }
        string(object, name);
        object.push(':');
        object.push_str(sorted.values.get(range.clone()).unwrap_or_default());
    }
    object.push('}');
    writer.write_str(object)
}

/// A span's fields, each value written as JSON, kept sorted by name.
struct Sorted<'a> {
    members: [(&'static str, std::ops::Range<usize>); MEMBERS],
    len: usize,
    values: &'a mut String,
    unusual: bool,
}

impl Sorted<'_> {
    /// Writes a value with `write` and files it under `field`'s name.
    fn member(&mut self, field: &Field, write: impl FnOnce(&mut String)) {
        let name = field.name();
        let start = self.values.len();
        write(self.values);
        let value = start..self.values.len();
        let filed = self.members.get(..self.len).unwrap_or_default();
        match filed.binary_search_by(|(other, _)| other.cmp(&name)) {
            Ok(at) => {
                if let Some(member) = self.members.get_mut(at) {
                    member.1 = value;
                }
            }
            Err(_) if self.len == MEMBERS => self.unusual = true,
            Err(at) => {
                if let Some(shifted) = self.members.get_mut(at..=self.len) {
                    shifted.rotate_right(1);
                    if let Some(member) = shifted.first_mut() {
                        *member = (name, value);
                    }
                }
                self.len += 1;
            }
        }
    }
}

impl Visit for Sorted<'_> {
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.member(field, |out| out.push_str(if value { "true" } else { "false" }));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.member(field, |out| integer(out, value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.member(field, |out| integer(out, value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.member(field, |out| float(out, value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.member(field, |out| string(out, value));
    }

    fn record_bytes(&mut self, _field: &Field, _value: &[u8]) {
        self.unusual = true;
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if name.starts_with("r#") || name.starts_with("log.") {
            self.unusual = true;
            return;
        }
        self.member(field, |out| debug(out, value));
    }
}

/// The event's fields as members of the line, in the order the event
/// records them, each value as tracing-serde writes it.
struct Members<'a> {
    line: &'a mut String,
    keys: Option<&'a Keys>,
}

impl Members<'_> {
    fn key(&mut self, field: &Field) {
        match self.keys.and_then(|keys| keys.get(field)) {
            Some(key) => self.line.push_str(key),
            None => write_key(self.line, field.name()),
        }
    }
}

impl Visit for Members<'_> {
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.line.push_str(if value { "true" } else { "false" });
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        integer(self.line, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        integer(self.line, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        float(self.line, value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        string(self.line, value);
    }

    /// Also what `i128`, `u128`, errors and bytes come to: a string.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        debug(self.line, value);
    }
}

/// `value`'s decimal digits, without `fmt`'s machinery.
fn integer(out: &mut String, value: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(value));
}

/// serde_json's digits (a shortest round-trip form that Rust's `Display`
/// does not share), and `null` for what is not finite.
fn float(out: &mut String, value: f64) {
    let mut digits = [0u8; 40];
    let mut rest = &mut digits[..];
    let written = serde_json::to_writer(&mut rest, &value).map(|()| 40 - rest.len());
    // serde_json writes ASCII, so always UTF-8.
    match written
        .ok()
        .and_then(|len| digits.get(..len))
        .and_then(|digits| std::str::from_utf8(digits).ok())
    {
        Some(digits) => out.push_str(digits),
        None => out.push_str("null"),
    }
}

/// `value`'s `Debug` as a JSON string.
fn debug(out: &mut String, value: &dyn fmt::Debug) {
    out.push('"');
    let _ = write!(Escaped(out), "{value:?}");
    out.push('"');
}

/// Writes through [`escape`].
struct Escaped<'a>(&'a mut String);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, piece: &str) -> fmt::Result {
        escape(self.0, piece);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
