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

use std::sync::OnceLock;

use lambda_http::tracing::level_filters::LevelFilter;
use lambda_http::tracing::span::{Attributes, Id, Record};
use lambda_http::tracing::subscriber::Registry;
use lambda_http::tracing::subscriber::layer::{Context, Layer};
use lambda_http::tracing::subscriber::registry::{LookupSpan, SpanRef};
use lambda_http::tracing::{self, Event, Level, Metadata, Subscriber};

use self::open::Open;
use super::invocation::{self, Here};
use super::spans::Spans;

mod open;

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

/// Whether the calling thread's subscriber (the global one, outside a
/// scoped default) has a [`SpansLayer`]: whether the function's `tracing`
/// spans can reach its traces.
pub(crate) fn recording() -> bool {
    tracing::dispatcher::get_default(|dispatch| dispatch.is::<SpansLayer>())
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

/// What a span's extensions hold for this layer. An untraced invocation's
/// span holds nothing, which costs it no allocation: it is known by its
/// name, and nothing under it is recorded.
#[derive(Debug)]
enum Node {
    /// The worker's `invocation` span: the SERVER span of these spans.
    Server(Spans),
    /// A span being recorded.
    Open(Box<Open>),
}

/// The nearest span at or above `span` that this layer knows of: its
/// spans and id, or `None` when none is, or it is under an untraced
/// invocation.
fn nearest<'a, S: for<'l> LookupSpan<'l>>(span: Option<SpanRef<'a, S>>) -> Option<(Spans, [u8; 8])> {
    for span in span?.scope() {
        match span.extensions().get::<Node>() {
            Some(Node::Server(spans)) => return Some((spans.clone(), spans.server_id())),
            Some(Node::Open(open)) => return Some((open.spans.clone(), open.id)),
            None if is_invocation(span.metadata()) => return None,
            None => {}
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
            if let Here::Traced(spans) = invocation::here() {
                span.extensions_mut().insert(Node::Server(spans));
            }
            return;
        }
        if !self.records(metadata) {
            return;
        }
        let found = nearest(span.parent()).or_else(|| match invocation::here() {
            Here::Traced(spans) => {
                let server = spans.server_id();
                Some((spans, server))
            }
            Here::Outside | Here::Untraced => None,
        });
        let Some((spans, parent)) = found else { return };
        let open = Open::new(spans, parent, attrs);
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
        open.event(event);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let node = span.extensions_mut().remove::<Node>();
        if let Some(Node::Open(open)) = node {
            open.close();
        }
    }
}

/// The id of the `tracing` span the calling code runs in, if this layer
/// records it under `spans`' invocation, for a span made elsewhere (an
/// AWS SDK call's) to hang under. Read through the registry of the
/// subscriber in use, when it is `tracing_subscriber`'s `Registry`.
#[cfg_attr(not(feature = "sdk"), allow(dead_code))]
pub(super) fn current_parent(spans: &Spans) -> Option<[u8; 8]> {
    let (found, id) = current()?;
    found.same_invocation(spans).then_some(id)
}

/// The invocation of the `tracing` span the calling code runs in, and
/// that span's id (its SERVER span's, for the worker's span). Read from
/// the subscriber's current span, not through `Span::current`, whose
/// handle, a clone of the span, costs a reference taken and dropped
/// (about 400 instructions a traced call).
#[cfg_attr(not(feature = "sdk"), allow(dead_code))]
pub(super) fn current() -> Option<(Spans, [u8; 8])> {
    tracing::dispatcher::get_default(|dispatch| {
        let registry = dispatch.downcast_ref::<Registry>()?;
        let current = dispatch.current_span();
        nearest(registry.span(current.id()?))
    })
}

#[cfg(test)]
mod tests;
