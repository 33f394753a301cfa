use lambda_http::tracing::{self, Dispatch};

use super::super::json_subscriber;
use super::super::tests::Capture;
use super::*;

/// What `emit` logs through `dispatch`.
fn through(dispatch: Dispatch, capture: &Capture, emit: &dyn Fn()) -> String {
    tracing::dispatcher::with_default(&dispatch, emit);
    capture.text()
}

/// The lines `emit` writes through the host's subscriber and through
/// `tracing-subscriber`'s own JSON format set up as the host's was.
fn both(emit: &dyn Fn()) -> (String, String) {
    let ours = Capture::default();
    let theirs = Capture::default();
    let reference = lambda_http::tracing::subscriber::fmt()
        .with_target(false)
        .without_time()
        .with_env_filter("trace")
        .with_writer(theirs.clone())
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .finish();
    (
        through(
            Dispatch::new(json_subscriber(Some("TRACE"), ours.clone())),
            &ours,
            emit,
        ),
        through(Dispatch::new(reference), &theirs, emit),
    )
}

#[derive(Debug)]
#[allow(dead_code)]
struct Shape {
    name: &'static str,
    sides: Option<u8>,
}

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused: \"no\"\n")
    }
}

impl std::error::Error for Refused {}

/// A case's name, and what it logs.
type Case = (&'static str, Box<dyn Fn()>);

#[test]
fn every_line_is_the_bytes_tracing_subscribers_json_format_writes() {
    let cases: Vec<Case> = vec![
        ("a message alone", Box::new(|| tracing::info!("request"))),
        (
            "a message with arguments that need escaping",
            Box::new(|| tracing::warn!("a \"quoted\" {}\tand a {}", "word\n", '\\')),
        ),
        (
            "every level",
            Box::new(|| {
                tracing::error!("e");
                tracing::warn!("w");
                tracing::info!("i");
                tracing::debug!("d");
                tracing::trace!("t");
            }),
        ),
        (
            "integers, booleans, options",
            Box::new(|| {
                let none: Option<u32> = None;
                tracing::info!(
                    status = 200_u16,
                    error = 40101_u32,
                    plant_id = -7_i64,
                    big = u64::MAX,
                    small = i64::MIN,
                    cold_start = true,
                    warm = false,
                    absent = none,
                    present = Some(3_u8),
                    "request"
                );
            }),
        ),
        (
            "floats as serde_json writes them",
            Box::new(|| {
                tracing::info!(
                    a = 1.5,
                    b = 0.1 + 0.2,
                    c = 1e21,
                    d = 1e-7,
                    e = -0.0,
                    f = f64::NAN,
                    g = f64::INFINITY,
                    h = f64::NEG_INFINITY,
                    i = 123_456_789.0,
                    j = 1.234_567_890_123_456_7e300,
                    k = 2.0_f64.powi(53),
                    l = 0.001_234,
                );
            }),
        ),
        (
            "strings with escapes, control characters and unicode",
            Box::new(|| {
                tracing::info!(
                    path = "/plants/\"x\"\\y",
                    control = "\0\u{1}\u{8}\u{b}\u{c}\u{1b}[31m\u{1f}\u{7f}",
                    unicode = "Monstera déliciosa 🌿 \u{2028}\u{feff}",
                    newline = "a\r\nb\tc",
                    empty = "",
                    "a \"quoted\" key\\" = "in a key too",
                );
            }),
        ),
        (
            "debug, display, errors and wide integers",
            Box::new(|| {
                let err = Refused;
                tracing::info!(
                    shape = ?Shape { name: "leaf \"3\"", sides: None },
                    shown = %"display\u{7}",
                    error = &err as &(dyn std::error::Error + 'static),
                    wide = 170_141_183_460_469_231_731_687_303_715_884_105_727_i128,
                    unsigned = u128::MAX,
                    "otel.name" = "dotted",
                    r#type = "raw",
                );
            }),
        ),
        (
            "inside a span with fields, as the invocation's",
            Box::new(|| {
                let tenant: Option<&str> = None;
                let span = tracing::info_span!(
                    target: "lambda_host",
                    "invocation",
                    request_id = "8f1c-\"id\"",
                    xray_trace_id = Some("1-5759e988-bd862e3fe1be46a994272793"),
                    tenant_id = tenant,
                );
                let _entered = span.enter();
                tracing::info!(latency_ms = 1.234, "request");
            }),
        ),
        (
            "inside nested spans, one without fields, one recorded later",
            Box::new(|| {
                let outer = tracing::info_span!("outer", n = 1, ratio = 0.5, odd = "é\u{1}");
                let _outer = outer.enter();
                let later = tracing::info_span!(
                    "later",
                    status = tracing::field::Empty,
                    shape = tracing::field::Empty
                );
                later.record("status", 503);
                later.record(
                    "shape",
                    tracing::field::debug(Shape {
                        name: "x",
                        sides: Some(4),
                    }),
                );
                let _later = later.enter();
                tracing::info!("in later");
                let bare = tracing::info_span!("bare");
                let _bare = bare.enter();
                tracing::info!("in bare");
            }),
        ),
        (
            "span fields of every kind, unsorted, and those JsonFields treats specially",
            Box::new(|| {
                let err = Refused;
                let typed = tracing::info_span!(
                    "typed",
                    zebra = "z\"",
                    alpha = 1.5,
                    nan = f64::NAN,
                    middle = -3_i64,
                    flag = true,
                    shape = ?Shape { name: "s", sides: Some(3) },
                    shown = %"d\u{1}",
                    error = &err as &(dyn std::error::Error + 'static),
                );
                let _typed = typed.enter();
                tracing::info!("typed");
                let raw =
                    tracing::info_span!("raw", r#type = ?"debug under a raw name", r#loop = "str under one");
                let _raw = raw.enter();
                tracing::info!("raw");
                let bytes = tracing::info_span!("bytes", body = &b"ab\x00"[..], wide = 1_u128 << 100);
                let _bytes = bytes.enter();
                tracing::info!("bytes");
                let many = tracing::info_span!(
                    "many",
                    a = 1,
                    b = 2,
                    c = 3,
                    d = 4,
                    e = 5,
                    f = 6,
                    g = 7,
                    h = 8,
                    i = 9
                );
                let _many = many.enter();
                tracing::info!("many");
                let eight =
                    tracing::info_span!("eight", h = 8, g = 7, f = 6, e = 5, d = 4, c = 3, b = 2, a = 1);
                let _eight = eight.enter();
                tracing::info!("eight");
                let empty = tracing::info_span!("empty", later = tracing::field::Empty);
                let _empty = empty.enter();
                tracing::info!("empty");
                empty.record("later", "now");
                tracing::info!("recorded");
            }),
        ),
        (
            "an explicit parent, and an explicit root",
            Box::new(|| {
                let parent = tracing::info_span!("parent", which = "explicit");
                let current = tracing::info_span!("current", which = "current");
                let _entered = current.enter();
                tracing::info!(parent: &parent, "to the parent");
                tracing::info!(parent: None, "a root event");
                tracing::error!("to the current");
            }),
        ),
    ];
    for (name, emit) in cases {
        let (ours, theirs) = both(&*emit);
        assert!(!theirs.is_empty(), "{name}: nothing written");
        assert_eq!(ours, theirs, "{name}");
    }
}

#[test]
fn lines_from_callsites_that_take_turns_each_keep_their_own_keys() {
    let (ours, theirs) = both(&|| {
        for round in 0..3_u64 {
            let absent: Option<u64> = None;
            tracing::info!(request_id = "r", error = absent, status = 200_u16, "request");
            tracing::warn!("a \"key\"" = round, status = 503_u16, other = "x", "other");
            if round == 1 {
                tracing::error!(cause = "c", "request failed");
            }
        }
    });
    assert_eq!(ours.lines().count(), 7, "{ours}");
    assert_eq!(ours, theirs);
}

#[test]
fn a_line_written_while_the_threads_buffer_is_in_use_is_written_whole() {
    let (ours, theirs) = both(&|| {
        LINE.with(|buffers| {
            let _in_use = buffers.borrow_mut();
            tracing::info!(value = "kept", "while in use");
        });
    });
    assert_eq!(ours, theirs);
    assert_eq!(
        ours,
        "{\"level\":\"INFO\",\"message\":\"while in use\",\"value\":\"kept\"}\n"
    );
}

#[test]
fn the_escapes_are_serde_jsons_for_every_ascii_byte() {
    for byte in 0_u8..0x80 {
        let value = format!("a{}b", char::from(byte));
        let mut ours = String::new();
        string(&mut ours, &value);
        assert_eq!(ours, serde_json::to_string(&value).unwrap(), "byte {byte:#04x}");
    }
}

#[test]
fn an_escape_anywhere_in_a_long_value_is_found_as_serde_json_finds_it() {
    for len in 0..40 {
        for at in 0..len {
            for special in ['"', '\\', '\n', '\u{1}', '\u{1f}'] {
                let mut value: String = "abcdéfgh".chars().cycle().take(len).collect();
                let boundary = value
                    .char_indices()
                    .map(|(i, _)| i)
                    .find(|&i| i >= at)
                    .unwrap_or(value.len());
                value.insert(boundary, special);
                let mut ours = String::new();
                string(&mut ours, &value);
                assert_eq!(ours, serde_json::to_string(&value).unwrap(), "{value:?}");
            }
        }
    }
}

#[test]
fn a_span_made_while_the_threads_span_buffers_are_in_use_keeps_its_fields() {
    let (ours, theirs) = both(&|| {
        SPAN.with(|buffers| {
            let _in_use = buffers.borrow_mut();
            tracing::info_span!("invocation", request_id = "r", status = 200_u16)
                .in_scope(|| tracing::info!("inside"));
        });
    });
    assert_eq!(ours, theirs);
    assert!(ours.contains("\"request_id\":\"r\""), "{ours}");
}

#[test]
fn a_spans_large_fields_do_not_keep_their_memory_on_the_thread() {
    let large = "x".repeat(4 * KEPT);
    let (ours, theirs) = both(&|| {
        tracing::info_span!("invocation", request_id = large.as_str()).in_scope(|| tracing::info!("inside"));
    });
    assert_eq!(ours, theirs);
    SPAN.with(|buffers| {
        let buffers = buffers.borrow();
        assert!(buffers.values.capacity() <= KEPT && buffers.object.capacity() <= KEPT);
    });
}
