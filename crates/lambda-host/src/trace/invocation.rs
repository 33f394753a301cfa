//! Each invocation's trace context, held in a tokio task-local for the
//! task that serves it: its trace header, and, when traced, its spans and
//! its SERVER span. The loop runs each invocation in a [`scope`]; the SDK
//! interceptors and the `tracing` layer find it there, or, in a task the
//! invocation spawned, through the span it was spawned in.

use std::fmt::Write as _;
use std::sync::OnceLock;

use super::exporter::Tracer;
use super::spans::{Server, ServerAnswer, Spans};

/// The process's tracer, once [`start`]ed. Beside the task-local rather
/// than in it: it is one socket for the life of the process, like stdout.
static TRACER: OnceLock<Tracer> = OnceLock::new();

tokio::task_local! {
    static CURRENT: Invocation;
}

/// One invocation's trace context, in the task that serves it or in a task
/// it handed its context to ([`carried`]).
struct Invocation {
    /// The trace header as the SDK's requests carry it.
    header: Option<String>,
    /// Present only for a traced invocation with a tracer enabled.
    spans: Option<Spans>,
    /// The SERVER span: only in the invocation's own task, which ends it.
    server: Option<Server>,
}

/// Sends the spans of traced invocations from now on through `tracer`; a
/// second call changes nothing.
pub(super) fn start(tracer: Tracer) {
    let _ = TRACER.set(tracer);
}

/// An invocation's trace header (`Lambda-Runtime-Trace-Id`), read once
/// for its scope and for the id its lines carry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header<'a> {
    text: &'a str,
    fields: Fields<'a>,
}

impl<'a> Header<'a> {
    pub(crate) fn read(text: &'a str) -> Self {
        Self {
            text,
            fields: Fields::of(text),
        }
    }

    /// The trace id X-Ray shows, as [`root`] gives it.
    pub(crate) fn root(&self) -> Option<&'a str> {
        self.fields.root.filter(|root| !root.is_empty())
    }
}

/// Runs `future` with `header` as the trace header of every SDK request it
/// makes and, when traced, as the trace of the spans it sends. The SERVER
/// span starts now; it ends, and the invocation's spans are sent, when the
/// future ends or is dropped.
///
/// Not an `async fn`: each `async` layer holds `future` twice (as its
/// argument, and inside what it awaits) and moves it, and the loop's
/// invocation future is large (docs/performance.md, "Smaller stack frames").
pub(crate) fn scope<F: Future>(header: Option<Header<'_>>, future: F) -> impl Future<Output = F::Output> {
    scope_read(TRACER.get(), header, future)
}

/// [`scope`] with `tracer` instead of the process's, of a header's text.
#[cfg(test)]
pub(super) fn scope_with<F: Future>(
    tracer: Option<&'static Tracer>,
    header: Option<&str>,
    future: F,
) -> impl Future<Output = F::Output> {
    scope_read(tracer, header.map(Header::read), future)
}

fn scope_read<F: Future>(
    tracer: Option<&'static Tracer>,
    header: Option<Header<'_>>,
    future: F,
) -> impl Future<Output = F::Output> {
    let (spans, server) = match (header, tracer) {
        (Some(header), Some(tracer)) => traced_by(header.fields, tracer).unzip(),
        _ => (None, None),
    };
    let invocation = Invocation {
        header: header.map(|header| encode(header.text)),
        spans,
        server,
    };
    CURRENT.scope(invocation, future)
}

/// The spans of an invocation whose header says `Sampled=1` (or
/// `Sampled=0` with Application Signals on) with a well-formed `Root` and
/// `Parent`; `None` otherwise, and nothing is built or sent for it.
fn traced_by(fields: Fields<'_>, tracer: &'static Tracer) -> Option<(Spans, Server)> {
    let Fields {
        root,
        parent,
        sampled,
    } = fields;
    if !sampled && !tracer.application_signals {
        return None;
    }
    Spans::start(root?, parent?, sampled, tracer)
}

/// [`traced_by`] of a header's text.
#[cfg(test)]
pub(super) fn traced_by_text(header: &str, tracer: &'static Tracer) -> Option<(Spans, Server)> {
    traced_by(Fields::of(header), tracer)
}

impl Drop for Invocation {
    fn drop(&mut self) {
        if let (Some(spans), Some(server)) = (&self.spans, &self.server) {
            spans.end(server);
        }
    }
}

/// Writes the SERVER span of the calling task's invocation from what the
/// host knows of the answer; it ends, and is sent, with the scope. A
/// second answer changes nothing; nothing outside a traced invocation.
pub(crate) fn server_answer(answer: &ServerAnswer<'_>) {
    let _ = CURRENT.try_with(|invocation| {
        if let (Some(spans), Some(server)) = (&invocation.spans, &invocation.server) {
            spans.answer(server, answer);
        }
    });
}

/// The calling task's invocation, to be continued in another task with
/// [`carried`]: its trace header and, when traced, its spans. Empty
/// outside an invocation.
#[derive(Debug, Default)]
pub(crate) struct Carried {
    header: Option<String>,
    spans: Option<Spans>,
}

/// The calling task's invocation, for [`carried`].
pub(crate) fn carry() -> Carried {
    CURRENT
        .try_with(|invocation| Carried {
            header: invocation.header.clone(),
            spans: invocation.spans.clone(),
        })
        .unwrap_or_default()
}

/// Runs `future` in the invocation `carried` from another task: its SDK
/// requests carry that invocation's trace header, and its spans hang under
/// that invocation's SERVER span, in its batch while it has not been sent.
pub(crate) async fn carried<F: Future>(carried: Carried, future: F) -> F::Output {
    if carried.header.is_none() && carried.spans.is_none() {
        return future.await;
    }
    let invocation = Invocation {
        header: carried.header,
        spans: carried.spans,
        server: None,
    };
    CURRENT.scope(invocation, future).await
}

/// The trace header of the invocation being served by the calling task, for
/// a request the AWS SDK does not make (the SDK's own carry it already).
/// `None` outside an invocation, or without a header.
pub fn current() -> Option<String> {
    CURRENT
        .try_with(|invocation| invocation.header.clone())
        .ok()
        .flatten()
}

/// What the calling task knows of its invocation's spans.
#[derive(Debug)]
pub(super) enum Here {
    /// No invocation's scope: a task of its own, or no invocation at all.
    Outside,
    /// An invocation not traced.
    Untraced,
    /// A traced invocation.
    Traced(Spans),
}

/// Whether the calling task serves an invocation whose spans are sent
/// (sampled, or any with Application Signals on): only then is what a
/// function would add to its SERVER span, a [`SpanDetails`] among it,
/// read. `false` outside an invocation's task.
///
/// [`SpanDetails`]: super::SpanDetails
pub fn traced() -> bool {
    CURRENT
        .try_with(|invocation| invocation.spans.is_some())
        .unwrap_or(false)
}

/// Whether the calling task serves an invocation whose spans are not
/// sent: [`Here::Untraced`], without a clone of anything.
#[cfg_attr(not(feature = "sdk"), allow(dead_code))]
pub(super) fn untraced() -> bool {
    CURRENT
        .try_with(|invocation| invocation.spans.is_none())
        .unwrap_or(false)
}

/// The calling task's invocation's spans: one task-local lookup.
pub(super) fn here() -> Here {
    CURRENT
        .try_with(|invocation| match &invocation.spans {
            Some(spans) => Here::Traced(spans.clone()),
            None => Here::Untraced,
        })
        .unwrap_or(Here::Outside)
}

/// The fields of Lambda's trace header, unchecked.
#[derive(Debug, Default, Clone, Copy)]
struct Fields<'a> {
    root: Option<&'a str>,
    parent: Option<&'a str>,
    sampled: bool,
}

impl<'a> Fields<'a> {
    fn of(header: &'a str) -> Self {
        let mut fields = Self::default();
        // `key=value`, the key up to the first `=`: as none of the three
        // holds one, a key is known by the part's prefix.
        for part in header.split(';').map(trim) {
            if let Some(value) = part.strip_prefix("Root=") {
                fields.root = Some(value);
            } else if let Some(value) = part.strip_prefix("Parent=") {
                fields.parent = Some(value);
            } else if let Some(value) = part.strip_prefix("Sampled=") {
                fields.sampled = value == "1";
            }
        }
        fields
    }
}

/// `part` trimmed as `str::trim` trims it. A part that begins and ends
/// with a visible ASCII character (a trace header as Lambda sends it)
/// has nothing to trim: that is two comparisons, where `str::trim` decodes
/// each end's character and looks it up among Unicode's spaces.
fn trim(part: &str) -> &str {
    let visible = |byte: Option<&u8>| byte.is_some_and(|byte| byte.is_ascii_graphic());
    if visible(part.as_bytes().first()) && visible(part.as_bytes().last()) {
        part
    } else {
        part.trim()
    }
}

/// The trace id X-Ray shows (`1-…-…`), from Lambda's trace header, as
/// Powertools logs it.
pub fn root(header: &str) -> Option<&str> {
    // Lambda's header begins with its root and names no other: then the
    // root is the first part's value, found without splitting the others
    // (about 400 instructions fewer).
    if let Some(rest) = header.strip_prefix("Root=") {
        let (value, others) = rest.split_once(';').unwrap_or((rest, ""));
        if value.as_bytes().last().is_some_and(u8::is_ascii_graphic) && !others.contains("Root=") {
            return Some(value);
        }
    }
    Header::read(header).root()
}

/// Percent-encodes control characters and non-ASCII bytes, the set the
/// SDK's recursion-detection interceptor encodes (`percent_encoding::CONTROLS`),
/// so that any trace header Lambda sends becomes a valid header value.
fn encode(value: &str) -> String {
    // Lambda's header has nothing to encode: copied whole.
    if value.bytes().all(|byte| (0x20..0x7f).contains(&byte)) {
        return value.to_owned();
    }
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
mod tests {
    use super::*;

    #[test]
    fn the_trace_id_is_the_root_of_lambdas_trace_header() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(root(header), Some("1-5759e988-bd862e3fe1be46a994272793"));
        assert_eq!(root("Sampled=0;Root=1-a-b"), Some("1-a-b"));
        assert_eq!(root("Parent=1;Sampled=0"), None);
        assert_eq!(root("Root="), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// The short way to the root finds the one the whole reading finds.
        #[test]
        fn the_root_is_the_one_reading_every_field_finds(
            parts in proptest::collection::vec("( |\\t|\u{a0})?(Root|Parent|Sampled|Lineage|root)?=?[0-9a-f\\- =é]{0,12}( |\u{3000})?", 0..5),
            lambda_root in "1-[0-9a-f]{8}-[0-9a-f]{24}",
        ) {
            let header = parts.join(";");
            let lambdas = format!("Root={lambda_root};{header}");
            for header in [header.as_str(), &lambdas] {
                proptest::prop_assert_eq!(root(header), Header::read(header).root(), "{:?}", header);
            }
        }
    }

    /// As splitting each part at its first `=` reads them.
    #[test]
    fn the_fields_are_read_as_key_value_pairs_split_at_the_first_equals_sign() {
        fn split_at_equals(header: &str) -> (Option<&str>, Option<&str>, bool) {
            let mut fields = (None, None, false);
            for part in header.split(';') {
                match part.trim().split_once('=') {
                    Some(("Root", value)) => fields.0 = Some(value),
                    Some(("Parent", value)) => fields.1 = Some(value),
                    Some(("Sampled", value)) => fields.2 = value == "1",
                    _ => {}
                }
            }
            fields
        }
        for header in [
            "Root=1-a-b;Parent=53995c3f42cd8ad8;Sampled=1",
            " Root=1-a ; Parent=p ;Sampled=1 ",
            "Root =1-a;Parent= p;Sampled = 1",
            "Root==1-a;Parent=p=q;Sampled=1=",
            "root=1-a;PARENT=p;sampled=1;Rooted=x;Sampled",
            "Root=1-a;Root=1-b;Sampled=1;Sampled=0",
            "\u{a0}Root=1-a\u{2003};;Lineage=a:1;Self=x",
            "Root;Parent;=;",
            "\u{b}Root=1-a\u{b};\tParent=p\u{85};Sampled=1\u{3000}",
            "Root=1-a\u{e9};\u{e9}Parent=p;Sampled=1\r\n",
            "",
        ] {
            let Fields {
                root,
                parent,
                sampled,
            } = Fields::of(header);
            assert_eq!((root, parent, sampled), split_at_equals(header), "{header:?}");
        }
    }

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
        let inside = scope(Some(Header::read("Root=1-a")), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("Root=1-a"));
        assert_eq!(scope(None, async { current() }).await, None);
        assert_eq!(current(), None);
    }

    #[tokio::test]
    async fn concurrent_scopes_each_see_their_own_header() {
        let one = scope(Some(Header::read("Root=1-one")), async {
            tokio::task::yield_now().await;
            current()
        });
        let two = scope(Some(Header::read("Root=1-two")), async {
            tokio::task::yield_now().await;
            current()
        });
        let (one, two) = tokio::join!(one, two);
        assert_eq!(one.as_deref(), Some("Root=1-one"));
        assert_eq!(two.as_deref(), Some("Root=1-two"));
    }

    #[tokio::test]
    async fn a_carried_invocation_keeps_its_header_in_another_task() {
        let (send, receive) = tokio::sync::oneshot::channel();
        scope(Some(Header::read("Root=1-a")), async {
            tokio::spawn(carried(carry(), async move { send.send(current()) }));
        })
        .await;
        assert_eq!(receive.await.unwrap().as_deref(), Some("Root=1-a"));
    }
}
