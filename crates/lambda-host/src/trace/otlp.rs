//! The protobuf of an OTLP `ExportTraceServiceRequest`, written by hand for
//! the few messages a span of ours needs (`opentelemetry/proto/trace/v1`,
//! `common/v1`, `resource/v1`): chosen over `opentelemetry-proto`'s prost
//! messages by measurement (docs/tracing.md, "The encoder"). The tests
//! decode what this writes with `opentelemetry-proto` itself.
//!
//! A span is encoded once, when it ends, into its invocation's batch; the
//! resource and the instrumentation scope are encoded once per process;
//! a request is those bytes put together behind two length prefixes.

/// Protobuf wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// `Span.SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
    Producer = 4,
    Consumer = 5,
}

/// `SpanFlags`: the parent's remoteness is known (bit 8) and, for the span
/// whose parent is Lambda's segment, remote (bit 9); the W3C trace flags
/// in the low byte, of which `sampled`.
pub const FLAG_SAMPLED: u32 = 0x01;
pub const FLAG_HAS_IS_REMOTE: u32 = 0x100;
pub const FLAG_IS_REMOTE: u32 = 0x200;

/// An attribute's value: the kinds our spans carry.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    Str(&'a str),
    Int(i64),
    Bool(bool),
    Double(f64),
    /// A `string[]` attribute (`aws.dynamodb.table_names`).
    Strs(&'a [&'a str]),
}

/// A protobuf writer appending to a byte vector.
#[derive(Debug)]
pub struct Writer<'b> {
    buf: &'b mut Vec<u8>,
}

impl<'b> Writer<'b> {
    pub fn new(buf: &'b mut Vec<u8>) -> Self {
        Self { buf }
    }

    #[inline]
    fn varint(&mut self, mut value: u64) {
        if value < 0x80 {
            self.buf.push(value as u8);
            return;
        }
        while value >= 0x80 {
            self.buf.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    #[inline]
    fn tag(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field << 3 | u32::from(wire)));
    }

    #[inline]
    pub fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.tag(field, LEN);
        self.varint(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }

    #[inline]
    pub fn string(&mut self, field: u32, text: &str) {
        self.bytes(field, text.as_bytes());
    }

    /// Fields encoded earlier, as they are.
    #[inline]
    pub fn raw(&mut self, fields: &[u8]) {
        self.buf.extend_from_slice(fields);
    }

    #[inline]
    pub fn uint(&mut self, field: u32, value: u64) {
        self.tag(field, VARINT);
        self.varint(value);
    }

    pub fn fixed64(&mut self, field: u32, value: u64) {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    pub fn fixed32(&mut self, field: u32, value: u32) {
        self.tag(field, FIXED32);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    /// Opens a nested message as field `field`; [`Writer::close`] writes its
    /// length. Two bytes are kept for it, the length of a span; a message
    /// of another length moves its bytes by the difference.
    pub fn open(&mut self, field: u32) -> usize {
        self.tag(field, LEN);
        self.buf.extend_from_slice(&[0, 0]);
        self.buf.len()
    }

    pub fn close(&mut self, start: usize) {
        let length = self.buf.len() - start;
        let mut prefix = [0u8; 10];
        let used = encode_varint(length as u64, &mut prefix);
        let prefix = prefix.get(..used).unwrap_or_default();
        match self.buf.get_mut(start - 2..start) {
            Some(kept) if used == 2 => kept.copy_from_slice(prefix),
            _ => {
                self.buf.splice(start - 2..start, prefix.iter().copied());
            }
        }
    }

    /// `KeyValue { key = 1; AnyValue value = 2 }` as field `field`, its
    /// lengths worked out before it is written.
    pub fn attribute(&mut self, field: u32, key: &str, value: Value<'_>) {
        let any = value.encoded_len();
        let pair = field_len(key.len()) + field_len(any);
        // No `reserve` first: each copy checks the room itself, and one
        // more check cost more than it saved.
        // Most of ours: a field below 16 and every length one byte, so the
        // framing bytes are known at once (a few hundred instructions less
        // per attribute than field by field).
        if let (true, Value::Str(text)) = (field < 16 && pair < 0x80, value) {
            self.buf
                .extend_from_slice(&[(field << 3) as u8 | LEN, pair as u8, 0x0a, key.len() as u8]);
            self.buf.extend_from_slice(key.as_bytes());
            self.buf
                .extend_from_slice(&[0x12, any as u8, 0x0a, text.len() as u8]);
            self.buf.extend_from_slice(text.as_bytes());
            return;
        }
        self.tag(field, LEN);
        self.varint(pair as u64);
        self.string(1, key);
        self.tag(2, LEN);
        self.varint(any as u64);
        match value {
            Value::Str(text) => self.string(1, text),
            Value::Bool(flag) => self.uint(2, u64::from(flag)),
            // int64 is a plain varint of the two's complement.
            Value::Int(number) => self.uint(3, number as u64),
            Value::Double(number) => self.fixed64(4, number.to_bits()),
            Value::Strs(texts) => {
                self.tag(5, LEN);
                self.varint(strs_len(texts) as u64);
                for text in texts {
                    self.tag(1, LEN);
                    self.varint(field_len(text.len()) as u64);
                    self.string(1, text);
                }
            }
        }
    }
}

impl Value<'_> {
    /// The length of the `AnyValue` holding this value.
    fn encoded_len(&self) -> usize {
        match self {
            Self::Str(text) => field_len(text.len()),
            Self::Bool(_) => 2,
            Self::Int(number) => 1 + varint_len_u64(*number as u64),
            Self::Double(_) => 9,
            Self::Strs(texts) => field_len(strs_len(texts)),
        }
    }
}

/// The length of an `ArrayValue` of strings.
fn strs_len(texts: &[&str]) -> usize {
    texts.iter().map(|text| field_len(field_len(text.len()))).sum()
}

/// The length of a length-delimited field numbered below 16 holding
/// `length` bytes.
fn field_len(length: usize) -> usize {
    1 + varint_len(length) + length
}

fn encode_varint(mut value: u64, out: &mut [u8; 10]) -> usize {
    let mut used = 0;
    for slot in out.iter_mut() {
        used += 1;
        if value < 0x80 {
            *slot = value as u8;
            break;
        }
        *slot = (value as u8) | 0x80;
        value >>= 7;
    }
    used
}

/// `Resource { repeated KeyValue attributes = 1 }`, as field 1 of
/// `ResourceSpans`: encoded once per process.
pub fn resource(attributes: &[(&str, Value<'_>)]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(512);
    let mut writer = Writer::new(&mut buf);
    let resource = writer.open(1);
    for (key, value) in attributes {
        writer.attribute(1, key, *value);
    }
    writer.close(resource);
    buf
}

/// `InstrumentationScope { name = 1; version = 2 }`, as field 1 of
/// `ScopeSpans`: encoded once per process.
pub fn scope(name: &str, version: &str) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut writer = Writer::new(&mut buf);
    let scope = writer.open(1);
    writer.string(1, name);
    writer.string(2, version);
    writer.close(scope);
    buf
}

/// The length of `value` as a varint.
fn varint_len(value: usize) -> usize {
    varint_len_u64(value as u64)
}

fn varint_len_u64(value: u64) -> usize {
    let mut length = 1;
    let mut value = value >> 7;
    while value > 0 {
        length += 1;
        value >>= 7;
    }
    length
}

/// The most bytes [`request_head`] writes: its two lengths as varints of
/// at most three bytes (a request is under 64 KB).
pub fn request_head_room(resource: usize, scope: usize) -> usize {
    1 + 3 + resource + 1 + 3 + scope
}

/// How long the head of a request of `spans` bytes of spans is.
pub fn request_head_len(resource: usize, scope: usize, spans: usize) -> usize {
    request_len(resource, scope, spans) - spans
}

/// The head of an `ExportTraceServiceRequest` of one `ResourceSpans` with
/// one `ScopeSpans`, from the encoded resource and scope, written into
/// `out` (exactly [`request_head_len`] long): followed by `spans` bytes of
/// spans (each `Span` as field 2 of `ScopeSpans`), it is the request.
pub fn request_head(out: &mut [u8], resource: &[u8], scope: &[u8], spans: usize) {
    let scope_spans = scope.len() + spans;
    let resource_spans = resource.len() + 1 + varint_len(scope_spans) + scope_spans;
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        if let Some(slot) = out.get_mut(at..at + bytes.len()) {
            slot.copy_from_slice(bytes);
        }
        at += bytes.len();
    };
    let mut varint = [0u8; 10];
    put(&[1 << 3 | LEN]);
    let used = encode_varint(resource_spans as u64, &mut varint);
    put(varint.get(..used).unwrap_or_default());
    put(resource);
    put(&[2 << 3 | LEN]);
    let used = encode_varint(scope_spans as u64, &mut varint);
    put(varint.get(..used).unwrap_or_default());
    put(scope);
}

/// The length of a request of `spans` bytes of spans.
pub fn request_len(resource: usize, scope: usize, spans: usize) -> usize {
    let scope_spans = scope + spans;
    let resource_spans = resource + 1 + varint_len(scope_spans) + scope_spans;
    1 + varint_len(resource_spans) + resource_spans
}

/// `Status.StatusCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCode {
    Unset = 0,
    Error = 2,
}

/// What identifies a span and places it in time.
#[derive(Debug, Clone, Copy)]
pub struct SpanHead<'a> {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_span_id: [u8; 8],
    pub name: &'a str,
    pub kind: Kind,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub flags: u32,
}

/// One `Span`, as field 2 of `ScopeSpans`, written straight into a batch.
#[derive(Debug)]
pub struct SpanWriter<'b> {
    writer: Writer<'b>,
    span: usize,
    /// Where `end_time_unix_nano`'s eight bytes are.
    end_at: usize,
}

impl<'b> SpanWriter<'b> {
    pub fn begin(out: &'b mut Vec<u8>, head: &SpanHead<'_>) -> Self {
        let mut writer = Writer::new(out);
        let span = writer.open(2);
        writer.bytes(1, &head.trace_id);
        writer.bytes(2, &head.span_id);
        writer.bytes(4, &head.parent_span_id);
        writer.string(5, head.name);
        writer.uint(6, head.kind as u64);
        writer.fixed64(7, head.start_unix_nano);
        // After field 8's one-byte tag.
        let end_at = writer.buf.len() + 1;
        writer.fixed64(8, head.end_unix_nano);
        writer.fixed32(16, head.flags);
        Self { writer, span, end_at }
    }

    pub fn attribute(&mut self, key: &str, value: Value<'_>) {
        self.writer.attribute(9, key, value);
    }

    /// The span's writer, for attributes encoded elsewhere
    /// ([`Writer::attribute`] with field 9).
    pub fn writer(&mut self) -> &mut Writer<'b> {
        &mut self.writer
    }

    /// Fields encoded earlier (attributes as field 9, by [`Writer::attribute`]).
    pub fn raw(&mut self, fields: &[u8]) {
        self.writer.raw(fields);
    }

    /// `dropped_attributes_count`: attributes past the span's bound.
    pub fn dropped_attributes(&mut self, count: u32) {
        if count > 0 {
            self.writer.uint(10, u64::from(count));
        }
    }

    /// An `exception` event (semantic conventions' `exception.type`,
    /// `exception.message`) at `time_unix_nano`.
    pub fn exception(&mut self, time_unix_nano: u64, kind: &str, message: &str) {
        let event = self.writer.open(11);
        self.writer.fixed64(1, time_unix_nano);
        self.writer.string(2, "exception");
        self.writer.attribute(3, "exception.type", Value::Str(kind));
        if !message.is_empty() {
            self.writer.attribute(3, "exception.message", Value::Str(message));
        }
        self.writer.close(event);
    }

    pub fn status(&mut self, code: StatusCode, message: &str) {
        if code == StatusCode::Unset {
            return;
        }
        let status = self.writer.open(15);
        if !message.is_empty() {
            self.writer.string(2, message);
        }
        self.writer.uint(3, code as u64);
        self.writer.close(status);
    }

    /// Ends the span; returns where its end time's eight bytes are, for a
    /// span written before it ended ([`set_end`]).
    pub fn finish(mut self) -> usize {
        let before = self.writer.buf.len();
        self.writer.close(self.span);
        // The length's prefix may have taken one byte less or more than
        // the two kept for it.
        self.end_at + self.writer.buf.len() - before
    }
}

/// Sets the end time of a span [`SpanWriter::finish`]ed with its end
/// time's eight bytes at `end_at` of `batch`.
pub fn set_end(batch: &mut [u8], end_at: usize, end_unix_nano: u64) {
    if let Some(end) = batch.get_mut(end_at..end_at + 8) {
        end.copy_from_slice(&end_unix_nano.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::KeyValue;
    use prost::Message as _;

    use super::*;
    use crate::test_util::daemon::attributes;

    #[test]
    fn values_of_every_length_and_kind_decode_as_written() {
        for length in [0, 1, 100, 127, 128, 300, 16_383, 16_384, 70_000] {
            let text = "x".repeat(length);
            let mut bytes = Vec::new();
            let mut writer = Writer::new(&mut bytes);
            writer.attribute(1, "text", Value::Str(&text));
            writer.attribute(1, "number", Value::Int(-(length as i64)));
            writer.attribute(1, "flag", Value::Bool(length % 2 == 0));
            writer.attribute(1, "list", Value::Strs(&[&text, "b"]));
            writer.attribute(1, "ratio", Value::Double(length as f64 / 4.0));
            let mut rest = bytes.as_slice();
            let mut pairs = Vec::new();
            while !rest.is_empty() {
                // Each attribute as field 1: a tag byte, then a KeyValue.
                assert_eq!(rest[0], 0x0a);
                let pair = KeyValue::decode_length_delimited(&rest[1..]).expect("a KeyValue");
                let used = pair.encoded_len();
                rest = &rest[1 + prost::length_delimiter_len(used) + used..];
                pairs.push(pair);
            }
            assert_eq!(
                attributes(&pairs),
                serde_json::json!({
                    "text": text, "number": -(length as i64), "flag": length % 2 == 0, "list": [text, "b"], "ratio": length as f64 / 4.0,
                }),
                "{length}"
            );
        }
    }

    #[test]
    fn a_head_and_its_spans_are_a_request_as_long_as_said() {
        let resource = resource(&[("service.name", Value::Str("s"))]);
        let scope = scope("n", "1");
        let mut batch = Vec::new();
        let head = SpanHead {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent_span_id: [3; 8],
            name: &"n".repeat(300),
            kind: Kind::Client,
            start_unix_nano: 1,
            end_unix_nano: 2,
            flags: 0,
        };
        SpanWriter::begin(&mut batch, &head).finish();
        let head_len = request_head_len(resource.len(), scope.len(), batch.len());
        assert!(head_len <= request_head_room(resource.len(), scope.len()));
        let mut out = vec![0; head_len];
        request_head(&mut out, &resource, &scope, batch.len());
        out.extend_from_slice(&batch);
        assert_eq!(out.len(), request_len(resource.len(), scope.len(), batch.len()));
        let decoded = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(
            out.as_slice(),
        )
        .expect("a request");
        assert_eq!(decoded.resource_spans[0].scope_spans[0].spans[0].name.len(), 300);
    }
}
