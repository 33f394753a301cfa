use lambda_http::tracing;

use super::super::filter as directives;
use super::super::json_with;
use super::super::tests::Capture;
use super::*;

/// What `emit` logs through the JSON subscriber with `RUST_LOG` set to
/// `rust_log`.
fn logged(rust_log: &str, emit: impl FnOnce()) -> String {
    let capture = Capture::default();
    let subscriber = json_with(directives(None, Some(rust_log)), capture.clone());
    tracing::dispatcher::with_default(&tracing::Dispatch::new(subscriber), emit);
    capture.text()
}

#[test]
fn directives_on_levels_and_targets_need_no_span_callbacks() {
    for plain in ["", "info", "orders=debug,info", "orders::db=trace,warn"] {
        assert!(!Filter::new(directives(None, Some(plain))).spans, "{plain:?}");
    }
}

#[test]
fn directives_on_spans_or_field_values_are_told_of_spans() {
    for scoped in ["[invocation]=debug", "info,orders[{status=503}]=debug"] {
        assert!(Filter::new(directives(None, Some(scoped))).spans, "{scoped:?}");
    }
}

#[test]
fn a_directive_on_a_span_lets_through_what_is_logged_inside_that_span_only() {
    let text = logged("info,[invocation]=debug", || {
        tracing::debug!("outside");
        tracing::info_span!("invocation", request_id = "r").in_scope(|| tracing::debug!("inside"));
        tracing::info_span!("other").in_scope(|| tracing::debug!("in another span"));
    });
    assert!(text.contains("\"message\":\"inside\""), "{text}");
    assert!(
        !text.contains("outside") && !text.contains("in another span"),
        "{text}"
    );
}

#[test]
fn a_directive_on_a_fields_value_lets_through_the_spans_that_have_it() {
    let text = logged("info,[{status=503}]=debug", || {
        tracing::info_span!("answer", status = 503_u16).in_scope(|| tracing::debug!("refused"));
        tracing::info_span!("answer", status = 200_u16).in_scope(|| tracing::debug!("served"));
    });
    assert!(text.contains("\"message\":\"refused\""), "{text}");
    assert!(!text.contains("served"), "{text}");
}
