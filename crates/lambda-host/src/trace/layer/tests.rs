//! The layer's spans as a listener in the daemon's place receives them,
//! decoded with OpenTelemetry's own generated messages.

use lambda_http::tracing::Instrument as _;
use lambda_http::tracing::field::Empty;
use lambda_http::tracing::subscriber::layer::SubscriberExt as _;
use lambda_http::tracing::{self, subscriber};
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};

use super::open::MAX_ATTRIBUTES;
use super::*;
use crate::test_util::daemon::attributes;
use crate::trace::exporter::{self, Tracer};
use crate::trace::invocation::{scope_with, server_answer};
use crate::trace::spans::tests::{SAMPLED, answer, daemon, datagrams};

/// Installs a subscriber with the layer, at INFO, on the test's thread
/// (a `#[tokio::test]` runs its tasks there).
fn subscribed() -> tracing::dispatcher::DefaultGuard {
    let subscriber = subscriber::registry().with(SpansLayer::with_level(LevelFilter::INFO));
    tracing::dispatcher::set_default(&tracing::Dispatch::new(subscriber))
}

/// Runs `work` as the worker runs an invocation: in its scope, inside the
/// `invocation` span, then answered.
async fn invocation<F: Future>(tracer: &'static Tracer, header: &str, work: F) -> F::Output {
    scope_with(Some(tracer), Some(header), async {
        let span = tracing::info_span!(target: "lambda_host", "invocation", request_id = "8f1c-request");
        let output = work.instrument(span).await;
        server_answer(&answer(200, None));
        output
    })
    .await
}

/// Every span received, by name.
fn received(listener: &std::net::UdpSocket) -> Vec<Span> {
    datagrams(listener)
        .into_iter()
        .flat_map(|datagram| datagram.spans)
        .collect()
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| panic!("a span {name}: {spans:#?}"))
}

fn server(spans: &[Span]) -> &Span {
    spans.iter().find(|span| span.kind == 2).expect("the SERVER span")
}

fn status(span: &Span) -> Value {
    json!(
        span.status
            .as_ref()
            .map(|status| json!([status.code, status.message]))
    )
}

fn events(span: &Span) -> Value {
    Value::Array(
        span.events
            .iter()
            .map(|event| json!([event.name, attributes(&event.attributes)]))
            .collect(),
    )
}

#[tokio::test]
async fn a_tracing_span_in_a_sampled_invocation_is_a_child_of_the_server_span_with_its_fields_and_times() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();

    let (before, after) = invocation(tracer, SAMPLED, async {
        let before = exporter::now();
        let span = tracing::info_span!(
            "load_order",
            order.id = 7,
            cached = false,
            ratio = 0.5,
            name = "widget"
        );
        async { tokio::task::yield_now().await }.instrument(span).await;
        (before, exporter::now())
    })
    .await;

    let spans = received(&listener);
    assert_eq!(spans.len(), 2, "the span and the SERVER span only: {spans:#?}");
    let (load, server) = (named(&spans, "load_order"), server(&spans));
    assert_eq!(load.parent_span_id, server.span_id);
    assert_eq!(load.trace_id, server.trace_id);
    assert_eq!(load.kind, 1, "INTERNAL");
    assert_eq!(load.flags, 0x101);
    assert_eq!(
        attributes(&load.attributes),
        json!({ "order.id": 7, "cached": false, "ratio": 0.5, "name": "widget" })
    );
    assert!(before <= load.start_time_unix_nano, "started inside the work");
    assert!(load.start_time_unix_nano <= load.end_time_unix_nano);
    assert!(load.end_time_unix_nano <= after, "ended when its future did");
    assert_eq!(load.status, None);
}

#[tokio::test]
async fn a_span_that_records_an_error_is_an_error_with_its_exception() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();

    invocation(tracer, SAMPLED, async {
        let typed = tracing::info_span!("typed", "error.type" = Empty);
        typed.record("error.type", "Conflict");
        drop(typed);
        let evented = tracing::info_span!("evented");
        evented.in_scope(|| tracing::error!(error = "the disk is full", "could not save"));
        drop(evented);
        let flagged = tracing::info_span!(
            "flagged",
            otel.status_code = "error",
            otel.status_message = "gave up"
        );
        drop(flagged);
        let fine = tracing::info_span!("fine", otel.status_code = "ok");
        fine.in_scope(|| tracing::warn!("only a warning"));
    })
    .await;

    let spans = received(&listener);
    let typed = named(&spans, "typed");
    assert_eq!(status(typed), json!([2, ""]));
    assert_eq!(attributes(&typed.attributes), json!({ "error.type": "Conflict" }));
    let evented = named(&spans, "evented");
    assert_eq!(status(evented), json!([2, "_OTHER: the disk is full"]));
    assert_eq!(
        events(evented),
        json!([["exception", { "exception.type": "_OTHER", "exception.message": "the disk is full" }]])
    );
    assert_eq!(status(named(&spans, "flagged")), json!([2, "gave up"]));
    assert_eq!(status(named(&spans, "fine")), json!(null));
}

#[tokio::test]
async fn a_child_of_a_child_hangs_under_its_parent_and_otel_fields_name_and_kind_it() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();

    invocation(tracer, SAMPLED, async {
        let outer = tracing::info_span!("outer");
        let inner = tracing::info_span!(parent: &outer, "inner", otel.name = "publish orders", otel.kind = "producer");
        let innermost = tracing::info_span!(parent: &inner, "innermost");
        drop((innermost, inner, outer));
    })
    .await;

    let spans = received(&listener);
    let (outer, inner, innermost) = (
        named(&spans, "outer"),
        named(&spans, "publish orders"),
        named(&spans, "innermost"),
    );
    assert_eq!(outer.parent_span_id, server(&spans).span_id);
    assert_eq!(inner.parent_span_id, outer.span_id);
    assert_eq!(innermost.parent_span_id, inner.span_id);
    assert_eq!(inner.kind, 4, "PRODUCER");
    assert_eq!(
        attributes(&inner.attributes),
        json!({}),
        "otel.* are not attributes"
    );
}

#[tokio::test]
async fn a_span_in_a_task_spawned_in_the_current_span_lands_in_the_same_batch() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();

    invocation(tracer, SAMPLED, async {
        let handler = tracing::info_span!("handler");
        let task = handler.in_scope(|| {
            tokio::spawn(
                async { tokio::task::yield_now().await }
                    .instrument(tracing::info_span!("background"))
                    .in_current_span(),
            )
        });
        drop(handler);
        task.await.unwrap();
    })
    .await;

    let datagrams = datagrams(&listener);
    assert_eq!(datagrams.len(), 1, "one datagram: {datagrams:#?}");
    let spans = &datagrams[0].spans;
    assert_eq!(
        named(spans, "background").parent_span_id,
        named(spans, "handler").span_id
    );
}

#[tokio::test]
async fn an_unsampled_invocation_sends_nothing() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();
    let unsampled = SAMPLED.replace("Sampled=1", "Sampled=0");

    invocation(tracer, &unsampled, async {
        let _span = tracing::info_span!("work").entered();
        tracing::error!(error = "even so", "a failure");
    })
    .await;

    assert_eq!(received(&listener).len(), 0);
}

/// An untraced invocation inside a traced one (its scope and span) keeps
/// its spans to itself, even in a task of their own: a span under it
/// never climbs past it to the traced invocation's SERVER span.
#[tokio::test]
async fn an_unsampled_invocation_inside_a_sampled_one_sends_none_of_its_spans() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();
    let unsampled = SAMPLED.replace("Sampled=1", "Sampled=0");

    invocation(tracer, SAMPLED, async {
        invocation(tracer, &unsampled, async {
            let task = tokio::spawn(
                async { tokio::task::yield_now().await }
                    .instrument(tracing::info_span!("background"))
                    .in_current_span(),
            );
            task.await.unwrap();
        })
        .await;
    })
    .await;

    let datagrams = datagrams(&listener);
    let names: Vec<&str> = datagrams
        .iter()
        .flat_map(|datagram| &datagram.spans)
        .map(|span| span.name.as_str())
        .collect();
    assert!(!names.contains(&"background"), "{names:?}");
}

#[tokio::test]
async fn outside_any_invocation_the_layer_records_and_sends_nothing() {
    let (_tracer, listener) = daemon(false);
    let _subscriber = subscribed();

    let span = tracing::info_span!("at_start", table = "orders");
    span.in_scope(|| tracing::error!(error = "no table", "init failed"));
    let invocation = tracing::info_span!(target: "lambda_host", "invocation");
    let recorded = |span: &tracing::Span| {
        span.with_subscriber(|(id, dispatch)| {
            let registry = dispatch.downcast_ref::<Registry>().unwrap();
            registry.span(id).unwrap().extensions().get::<Node>().is_some()
        })
    };
    assert_eq!(recorded(&span), Some(false));
    assert_eq!(recorded(&invocation), Some(false));
    drop((span, invocation));
    assert_eq!(received(&listener).len(), 0);
}

#[tokio::test]
async fn spans_past_the_cap_are_counted_and_not_sent() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();

    invocation(tracer, SAMPLED, async {
        for n in 0..crate::trace::spans::MAX_SPANS + 3 {
            drop(tracing::info_span!("item", n));
        }
    })
    .await;

    let spans = received(&listener);
    assert_eq!(spans.len(), crate::trace::spans::MAX_SPANS + 1);
    // The SERVER span is written after the work: it counts them all.
    assert_eq!(
        attributes(&server(&spans).attributes)["lambda_host.spans_dropped"],
        3
    );
}

#[tokio::test]
async fn spans_below_the_level_are_left_out_and_their_children_hang_above_them() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();

    invocation(tracer, SAMPLED, async {
        let chatty = tracing::debug_span!("sdk_internals");
        drop(tracing::info_span!(parent: &chatty, "kept"));
    })
    .await;

    let spans = received(&listener);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    assert_eq!(named(&spans, "kept").parent_span_id, server(&spans).span_id);
}

#[tokio::test]
async fn a_spans_attributes_are_bounded_in_number_and_size() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();
    let long = "é".repeat(1000);

    invocation(tracer, SAMPLED, async {
        let span = tracing::info_span!(
            "wide",
            a0 = 0,
            a1 = 1,
            a2 = 2,
            a3 = 3,
            a4 = 4,
            a5 = 5,
            a6 = 6,
            a7 = 7,
            a8 = 8,
            a9 = 9,
            b0 = 0,
            b1 = 1,
            b2 = 2,
            b3 = 3,
            b4 = 4,
            b5 = 5,
            b6 = 6,
            b7 = 7,
            b8 = 8,
            b9 = 9,
            c0 = 0,
            c1 = 1,
            c2 = 2,
            c3 = 3,
            c4 = 4,
            c5 = 5,
            c6 = 6,
            c7 = 7,
            c8 = 8,
            c9 = 9,
            d0 = 0,
            long = long.as_str(),
            d2 = 2,
            d3 = 3,
        );
        drop(span);
    })
    .await;

    let spans = received(&listener);
    let wide = named(&spans, "wide");
    assert_eq!(wide.attributes.len(), MAX_ATTRIBUTES);
    assert_eq!(wide.dropped_attributes_count, 2);
    let kept = attributes(&wide.attributes)["long"].as_str().unwrap().to_owned();
    assert!(kept.len() <= 1024 && kept.len() > 1022, "{}", kept.len());
}

const JWKS: &str = "https://issuer.example:8443/.well-known/jwks.json";

/// The key fetch as the function opens it.
fn fetch_span() -> tracing::Span {
    tracing::info_span!(
        "GET",
        otel.kind = "client",
        "http.request.method" = "GET",
        "url.full" = JWKS,
        "server.address" = "issuer.example",
        "server.port" = 8443,
        "aws.remote.service" = "issuer.example",
        "aws.remote.operation" = "GET /.well-known",
        "http.response.status_code" = Empty,
        "error.type" = Empty,
    )
}

#[tokio::test]
async fn the_key_fetch_span_is_the_client_span_of_before() {
    let (tracer, listener) = daemon(false);
    let _subscriber = subscribed();

    invocation(tracer, SAMPLED, async {
        let ok = fetch_span();
        ok.record("http.response.status_code", 200);
        drop(ok);
        let missing = fetch_span();
        missing.record("http.response.status_code", 404);
        drop(missing);
        let refused = fetch_span();
        refused.record("error.type", "ConnectionError");
        refused.in_scope(|| tracing::warn!(error = "connection refused", "the key fetch failed"));
        drop(refused);
        // Its future dropped before an answer came.
        drop(fetch_span());
    })
    .await;

    let spans = received(&listener);
    let server = server(&spans);
    let fetches: Vec<&Span> = spans.iter().filter(|span| span.name == "GET").collect();
    assert_eq!(fetches.len(), 4);
    let common = json!({
        "http.request.method": "GET", "url.full": JWKS,
        "server.address": "issuer.example", "server.port": 8443,
        "aws.local.service": "orders-eu", "aws.local.operation": "orders/FunctionHandler",
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
    for fetch in &fetches {
        assert_eq!((fetch.kind, &fetch.parent_span_id), (3, &server.span_id));
    }
    let seen: Vec<Value> = fetches
        .iter()
        .map(|fetch| json!([attributes(&fetch.attributes), status(fetch), events(fetch)]))
        .collect();
    let timeout = "abandoned before it finished: the invocation's time ran out first";
    assert_eq!(
        seen,
        [
            json!([with(json!({ "http.response.status_code": 200 })), null, []]),
            json!([
                with(json!({ "http.response.status_code": 404, "error.type": "404" })),
                [2, ""],
                []
            ]),
            json!([
                with(json!({ "error.type": "ConnectionError" })),
                [2, "ConnectionError: connection refused"],
                [["exception", { "exception.type": "ConnectionError", "exception.message": "connection refused" }]]
            ]),
            json!([
                with(json!({ "error.type": "TimeoutError" })),
                [2, format!("TimeoutError: {timeout}")],
                [["exception", { "exception.type": "TimeoutError", "exception.message": timeout }]]
            ]),
        ]
    );
}
