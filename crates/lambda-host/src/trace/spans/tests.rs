//! The spans as a listener in the daemon's place receives them, decoded
//! with OpenTelemetry's own generated messages.

use serde_json::{Value, json};

use super::super::conventions::CallKey;
use super::super::exporter::TraceEnv;
use super::super::invocation::{self, Here, carried, carry, scope_with};
use super::*;
use crate::test_util::daemon::{Datagram, attributes, datagram, hex};

pub(in crate::trace) const SAMPLED: &str =
    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
const TRACE_ID: &str = "5759e988bd862e3fe1be46a994272793";

/// A tracer sending to a listener of the test's own, standing in for
/// the daemon; leaked, as the process's tracer lives as long as it.
pub(in crate::trace) fn daemon(application_signals: bool) -> (&'static Tracer, std::net::UdpSocket) {
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let environment = TraceEnv {
        powertools_service_name: Some("orders-eu".to_owned()),
        region: Some("eu-west-1".to_owned()),
        function_name: Some("orders".to_owned()),
        function_version: Some("$LATEST".to_owned()),
        log_stream_name: Some("2026/11/25/[$LATEST]abc".to_owned()),
        log_group_name: Some("/aws/lambda/orders".to_owned()),
        application_signals,
        ..TraceEnv::default()
    };
    let tracer = Tracer::with(listener.local_addr().unwrap(), &environment).unwrap();
    (Box::leak(Box::new(tracer)), listener)
}

/// Every datagram already received. The sends are synchronous and the
/// listener is on loopback: by the time the scope has ended, they are
/// in its buffer or lost.
pub(in crate::trace) fn datagrams(listener: &std::net::UdpSocket) -> Vec<Datagram> {
    listener.set_nonblocking(true).unwrap();
    let mut buffer = [0; 65_536];
    let mut datagrams = Vec::new();
    while let Ok(length) = listener.recv(&mut buffer) {
        datagrams.push(datagram(&buffer[..length]));
    }
    datagrams
}

/// The function's details of a 409 or 503: its route and error code.
fn details(code: u32) -> SpanDetails {
    SpanDetails::default().route("/orders").annotate("Shard", code)
}

pub(in crate::trace) fn answer(status: u16, details: Option<&SpanDetails>) -> ServerAnswer<'_> {
    ServerAnswer {
        status,
        method: "POST",
        path: "/orders",
        invocation_id: "8f1c-request",
        function_arn: Some("arn:aws:lambda:eu-west-1:123456789012:function:orders:live"),
        cold_start: true,
        details,
        failure: None,
    }
}

/// As the host does when the service has answered.
fn answered(answer: ServerAnswer<'_>) {
    invocation::server_answer(&answer);
}

/// A call out of the invocation, as the SDK interceptor makes it: a
/// CLIENT span under the SERVER span, ended with `ending`.
fn call(ending: &Ending<'_>) {
    if let Here::Traced(spans) = invocation::here() {
        open_call(&spans).close(ending);
    }
}

fn open_call(spans: &Spans) -> Call {
    let key = CallKey {
        service: "Lambda",
        operation: "Invoke",
        region: Some("eu-west-1"),
        resource: None,
    };
    let aws = spans.tracer().conventions.aws_call(&key, |_| {});
    Call::open(spans, None, aws)
}

#[test]
fn only_a_sampled_header_with_a_well_formed_root_and_parent_is_traced() {
    let (tracer, _listener) = daemon(false);
    let (signals, _other) = daemon(true);
    for (header, traced, with_signals) in [
        (SAMPLED, true, true),
        (
            "Sampled=1;Parent=53995c3f42cd8ad8;Root=1-5759e988-bd862e3fe1be46a994272793",
            true,
            true,
        ),
        (
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
            false,
            true,
        ),
        (
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
            false,
            true,
        ),
        (
            "Root=1-5759E988-BD862E3FE1BE46A994272793;Parent=53995C3F42CD8AD8;Sampled=1",
            true,
            true,
        ),
        ("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", false, false),
        (
            "Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8;Sampled=1",
            false,
            false,
        ),
        (
            "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            false,
            false,
        ),
        (
            "Root=1-5759e988-bd862e3fe1be46a99427279g;Parent=53995c3f42cd8ad8;Sampled=1",
            false,
            false,
        ),
        (
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=\"x\";Sampled=1",
            false,
            false,
        ),
        ("", false, false),
    ] {
        assert_eq!(
            invocation::traced_by_text(header, tracer).is_some(),
            traced,
            "{header:?}"
        );
        assert_eq!(
            invocation::traced_by_text(header, signals).is_some(),
            with_signals,
            "{header:?}, Application Signals on"
        );
    }
}

#[tokio::test]
async fn a_server_span_from_an_answer_with_details_carries_the_route_and_the_functions_annotations() {
    let (tracer, listener) = daemon(false);
    let details = details(40901);

    let answered_at = scope_with(Some(tracer), Some(SAMPLED), async {
        answered(answer(409, Some(&details)));
        // Once per invocation, whatever calls it again.
        answered(answer(200, None));
        exporter::now()
    })
    .await;

    let datagrams = datagrams(&listener);
    assert_eq!(datagrams.len(), 1, "{datagrams:#?}");
    let datagram = &datagrams[0];
    assert_eq!(datagram.mark, "T1S");
    assert_eq!(
        datagram.resource,
        json!({
            "service.name": "orders-eu", "telemetry.sdk.name": "lambda-host", "telemetry.sdk.language": "rust",
            "telemetry.sdk.version": env!("CARGO_PKG_VERSION"), "cloud.provider": "aws", "cloud.platform": "aws_lambda",
            "cloud.region": "eu-west-1", "faas.name": "orders", "faas.version": "$LATEST",
            "faas.instance": "2026/11/25/[$LATEST]abc", "aws.log.group.names": "/aws/lambda/orders",
            "aws.local.service": "orders-eu",
        })
    );
    assert_eq!(
        datagram.scopes,
        [("lambda-host".to_owned(), env!("CARGO_PKG_VERSION").to_owned())]
    );
    assert_eq!(datagram.spans.len(), 1);
    let span = &datagram.spans[0];
    assert_eq!(
        (
            span.name.as_str(),
            span.kind,
            hex(&span.trace_id),
            hex(&span.parent_span_id),
            span.flags
        ),
        (
            "orders",
            2,
            TRACE_ID.to_owned(),
            "53995c3f42cd8ad8".to_owned(),
            0x301
        )
    );
    assert_eq!(span.span_id.len(), 8);
    assert!(span.start_time_unix_nano <= answered_at);
    assert!(
        span.end_time_unix_nano >= answered_at,
        "it ends with the scope, not with the answer"
    );
    assert_eq!(span.status, None, "a 409 is the client's");
    assert_eq!(
        attributes(&span.attributes),
        json!({
            "faas.trigger": "http", "aws.local.service": "orders-eu", "aws.local.operation": "orders/FunctionHandler",
            "aws.span.kind": "LOCAL_ROOT", "aws.trace.flag.sampled": true,
            "faas.invocation_id": "8f1c-request",
            "cloud.resource_id": "arn:aws:lambda:eu-west-1:123456789012:function:orders",
            "cloud.account.id": "123456789012", "faas.coldstart": true,
            "http.request.method": "POST", "url.path": "/orders", "http.route": "/orders",
            "http.response.status_code": 409,
            "ColdStart": true, "Status": 409, "Shard": 40901,
            "aws.xray.annotations": ["ColdStart", "Status", "Shard"],
        })
    );
}

#[tokio::test]
async fn a_server_span_from_an_answer_without_details_has_no_route_and_only_the_hosts_annotations() {
    let (tracer, listener) = daemon(false);

    scope_with(Some(tracer), Some(SAMPLED), async {
        answered(ServerAnswer {
            cold_start: false,
            function_arn: None,
            ..answer(404, None)
        });
    })
    .await;

    let span = &datagrams(&listener)[0].spans[0];
    let attributes = attributes(&span.attributes);
    assert_eq!(attributes.get("http.route"), None);
    assert_eq!(attributes.get("Shard"), None);
    assert_eq!(attributes.get("cloud.resource_id"), None);
    assert_eq!(attributes["url.path"], "/orders");
    assert_eq!(attributes["Status"], 404);
    assert_eq!(attributes["ColdStart"], false);
    assert_eq!(attributes["aws.xray.annotations"], json!(["ColdStart", "Status"]));
    assert_eq!(span.status, None);
}

#[tokio::test]
async fn a_5xx_is_an_error_of_the_server_span() {
    let (tracer, listener) = daemon(false);

    scope_with(Some(tracer), Some(SAMPLED), async {
        answered(answer(503, Some(&details(50301))))
    })
    .await;

    let span = &datagrams(&listener)[0].spans[0];
    let status = span.status.as_ref().expect("a status");
    assert_eq!(status.code, 2, "ERROR");
    assert_eq!(attributes(&span.attributes)["error.type"], "503");
}

#[tokio::test]
async fn a_server_span_longer_than_a_two_byte_length_still_ends_with_its_scope() {
    let (tracer, listener) = daemon(false);
    let path = format!("/orders/{}", "x".repeat(20_000));

    let answered_at = scope_with(Some(tracer), Some(SAMPLED), async {
        answered(ServerAnswer {
            path: &path,
            ..answer(200, None)
        });
        exporter::now()
    })
    .await;

    let span = &datagrams(&listener)[0].spans[0];
    assert_eq!(attributes(&span.attributes)["url.path"], path.as_str());
    assert!(span.start_time_unix_nano <= answered_at);
    assert!(span.end_time_unix_nano >= answered_at);
}

#[tokio::test]
async fn an_invocation_that_ends_unanswered_ends_its_server_span_as_an_error() {
    let (tracer, listener) = daemon(false);

    scope_with(Some(tracer), Some(SAMPLED), async {}).await;

    let datagrams = datagrams(&listener);
    assert_eq!(datagrams.len(), 1);
    let span = &datagrams[0].spans[0];
    assert_eq!(span.status.as_ref().map(|status| status.code), Some(2));
    assert_eq!(span.events.len(), 1);
    assert_eq!(span.events[0].name, "exception");
    assert_eq!(
        attributes(&span.events[0].attributes)["exception.type"],
        "NoAnswer"
    );
    assert_eq!(attributes(&span.attributes)["error.type"], "NoAnswer");
    assert_eq!(attributes(&span.attributes).get("faas.invocation_id"), None);
}

async fn one_call_and_an_answer() {
    answered(answer(200, None));
    call(&Ending {
        status: Some(200),
        ..Ending::default()
    });
}

#[tokio::test]
async fn unsampled_headerless_or_untraced_invocations_send_nothing() {
    let (tracer, listener) = daemon(false);
    let unsampled = SAMPLED.replace("Sampled=1", "Sampled=0");
    for (tracer, header) in [
        (Some(tracer), Some(unsampled.as_str())),
        (Some(tracer), None),
        (None, Some(SAMPLED)),
    ] {
        scope_with(tracer, header, one_call_and_an_answer()).await;
    }
    one_call_and_an_answer().await;

    assert_eq!(datagrams(&listener).len(), 0);
}

#[tokio::test]
async fn an_invocation_is_traced_exactly_when_its_spans_are_sent() {
    let (tracer, _listener) = daemon(false);
    let (signals, _signals_listener) = daemon(true);
    let unsampled = SAMPLED.replace("Sampled=1", "Sampled=0");
    for (tracer, header, sent) in [
        (Some(tracer), Some(SAMPLED), true),
        (Some(signals), Some(unsampled.as_str()), true),
        (Some(tracer), Some(unsampled.as_str()), false),
        (Some(tracer), None, false),
        (None, Some(SAMPLED), false),
    ] {
        let traced = scope_with(tracer, header, async { invocation::traced() }).await;
        assert_eq!(traced, sent, "{header:?}");
    }
    assert!(!invocation::traced(), "outside an invocation");
}

#[tokio::test]
async fn with_application_signals_an_unsampled_invocation_sends_its_spans_marked_unsampled() {
    let (tracer, listener) = daemon(true);
    let unsampled = SAMPLED.replace("Sampled=1", "Sampled=0");

    scope_with(Some(tracer), Some(&unsampled), one_call_and_an_answer()).await;
    scope_with(Some(tracer), None, one_call_and_an_answer()).await;

    let datagrams = datagrams(&listener);
    assert_eq!(
        datagrams.len(),
        1,
        "the headerless one sends nothing: {datagrams:#?}"
    );
    assert_eq!(datagrams[0].mark, "T1U");
    assert_eq!(datagrams[0].spans.len(), 2);
    for span in &datagrams[0].spans {
        assert_eq!(span.flags & 0xff, 0, "not sampled: {span:?}");
        assert_eq!(attributes(&span.attributes)["aws.trace.flag.sampled"], false);
    }
}

#[tokio::test]
async fn a_call_is_a_client_span_of_the_server_span_and_one_dropped_unfinished_is_a_timeout() {
    let (tracer, listener) = daemon(false);

    scope_with(Some(tracer), Some(SAMPLED), async {
        call(&Ending {
            status: Some(404),
            request_id: Some("r-1"),
            retries: Some(0),
            error: None,
        });
        if let Here::Traced(spans) = invocation::here() {
            drop(open_call(&spans));
        }
        call(&Ending {
            error: Some(("DispatchFailure", "connection refused")),
            ..Ending::default()
        });
        answered(answer(200, None));
    })
    .await;

    let datagrams = datagrams(&listener);
    assert_eq!(datagrams.len(), 1, "one datagram for the invocation");
    let spans = &datagrams[0].spans;
    assert_eq!(spans.len(), 4, "{spans:#?}");
    let server = &spans[3];
    assert_eq!(server.kind, 2);
    let calls: Vec<(Value, Value, Value)> = spans[..3]
        .iter()
        .map(|span| {
            assert_eq!(
                (
                    span.name.as_str(),
                    span.kind,
                    &span.parent_span_id,
                    hex(&span.trace_id),
                    span.flags
                ),
                ("Lambda.Invoke", 3, &server.span_id, TRACE_ID.to_owned(), 0x101)
            );
            let status = span
                .status
                .as_ref()
                .map(|status| json!([status.code, status.message]));
            let events: Vec<Value> = span
                .events
                .iter()
                .map(|event| attributes(&event.attributes))
                .collect();
            (attributes(&span.attributes), json!(status), json!(events))
        })
        .collect();
    let common = json!({
        "rpc.system": "aws-api", "rpc.service": "Lambda", "rpc.method": "Invoke", "aws.region": "eu-west-1",
        "aws.local.service": "orders-eu", "aws.local.operation": "orders/FunctionHandler",
        "aws.span.kind": "CLIENT", "aws.trace.flag.sampled": true,
        "aws.remote.service": "AWS::Lambda", "aws.remote.operation": "Invoke",
    });
    let with = |extra: Value| {
        let mut all = common.clone();
        all.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        all
    };
    assert_eq!(
        calls[0],
        (
            with(json!({
                "http.response.status_code": 404, "error.type": "404", "aws.request_id": "r-1", "retry_attempts": 0,
            })),
            json!([2, ""]),
            json!([])
        )
    );
    let timeout = "abandoned before it finished: the invocation's time ran out first";
    assert_eq!(
        calls[1],
        (
            with(json!({ "error.type": "TimeoutError" })),
            json!([2, format!("TimeoutError: {timeout}")]),
            json!([{ "exception.type": "TimeoutError", "exception.message": timeout }])
        )
    );
    assert_eq!(
        calls[2],
        (
            with(json!({ "error.type": "DispatchFailure" })),
            json!([2, "DispatchFailure: connection refused"]),
            json!([{ "exception.type": "DispatchFailure", "exception.message": "connection refused" }])
        )
    );
}

#[tokio::test]
async fn a_call_that_ends_after_its_invocation_is_sent_on_its_own() {
    let (tracer, listener) = daemon(false);
    let (release, released) = tokio::sync::oneshot::channel::<()>();

    let mut fetch = None;
    scope_with(Some(tracer), Some(SAMPLED), async {
        answered(answer(503, Some(&details(50302))));
        // The request stops waiting for the fetch: answered at its deadline.
        fetch = Some(tokio::spawn(carried(carry(), async move {
            let _ = released.await;
            call(&Ending::default());
        })));
    })
    .await;
    let _ = release.send(());
    fetch.unwrap().await.unwrap();

    let datagrams = datagrams(&listener);
    assert_eq!(datagrams.len(), 2, "{datagrams:#?}");
    let (server, call) = (&datagrams[0].spans[0], &datagrams[1].spans[0]);
    assert_eq!((server.kind, call.kind), (2, 3));
    assert_eq!(call.parent_span_id, server.span_id);
    assert_eq!(call.trace_id, server.trace_id);
}

#[tokio::test]
async fn more_than_ten_spans_go_in_datagrams_of_ten() {
    let (tracer, listener) = daemon(false);

    scope_with(Some(tracer), Some(SAMPLED), async {
        for _ in 0..24 {
            call(&Ending::default());
        }
        answered(answer(200, None));
    })
    .await;

    let sizes: Vec<usize> = datagrams(&listener)
        .iter()
        .map(|datagram| datagram.spans.len())
        .collect();
    assert_eq!(sizes, [10, 10, 5]);
}

#[tokio::test]
async fn spans_past_the_cap_are_counted_on_the_server_span_and_not_sent() {
    let (tracer, listener) = daemon(false);

    scope_with(Some(tracer), Some(SAMPLED), async {
        for _ in 0..MAX_SPANS + 6 {
            call(&Ending::default());
        }
        answered(answer(200, None));
    })
    .await;

    let spans: Vec<_> = datagrams(&listener)
        .into_iter()
        .flat_map(|datagram| datagram.spans)
        .collect();
    assert_eq!(spans.len(), MAX_SPANS + 1, "the cap's worth and the SERVER span");
    let server = spans.iter().find(|span| span.kind == 2).expect("the SERVER span");
    assert_eq!(attributes(&server.attributes)["lambda_host.spans_dropped"], 6);
}

#[tokio::test]
async fn an_invocation_within_the_cap_says_nothing_of_dropped_spans() {
    let (tracer, listener) = daemon(false);

    scope_with(Some(tracer), Some(SAMPLED), async {
        for _ in 0..MAX_SPANS {
            call(&Ending::default());
        }
        answered(answer(200, None));
    })
    .await;

    let spans: Vec<_> = datagrams(&listener)
        .into_iter()
        .flat_map(|datagram| datagram.spans)
        .collect();
    assert_eq!(spans.len(), MAX_SPANS + 1);
    let server = spans.iter().find(|span| span.kind == 2).expect("the SERVER span");
    assert_eq!(
        attributes(&server.attributes).get("lambda_host.spans_dropped"),
        None
    );
}

#[test]
fn long_messages_are_cut_at_a_character_boundary() {
    let long = "é".repeat(MAX_MESSAGE_BYTES);
    let cut = truncated(&long);
    assert!(cut.len() <= MAX_MESSAGE_BYTES && cut.len() > MAX_MESSAGE_BYTES - 2);
    assert_eq!(truncated("short"), "short");
}

/// A DynamoDB endpoint that takes connections and never answers.
#[cfg(feature = "dynamodb")]
fn black_hole() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().collect();
        drop(held);
    });
    url
}

#[cfg(feature = "dynamodb")]
#[tokio::test]
async fn a_putitem_dropped_before_dynamodb_answered_is_still_sent_as_a_timeout() {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    use aws_sdk_dynamodb::types::AttributeValue;

    let (tracer, listener) = daemon(false);
    let mut config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new("l", "l", None, None, "t"))
        .endpoint_url(black_hole());
    for interceptor in crate::trace::interceptors() {
        config.push_interceptor(interceptor);
    }
    let client = aws_sdk_dynamodb::Client::from_conf(config.build());

    // As a handler does at the invocation's deadline: it gives up on the
    // store and answers, dropping the PutItem's future mid-flight.
    let put = client
        .put_item()
        .table_name("orders")
        .item("id", AttributeValue::N("1".to_owned()))
        .send();
    let cut = scope_with(Some(tracer), Some(SAMPLED), async {
        tokio::time::timeout(std::time::Duration::from_millis(300), put).await
    })
    .await;

    assert!(cut.is_err(), "the PutItem was still waiting");
    let datagrams = datagrams(&listener);
    assert_eq!(datagrams.len(), 1, "one datagram for the invocation");
    let spans = &datagrams[0].spans;
    let put = spans
        .iter()
        .find(|span| span.name == "DynamoDB.PutItem")
        .unwrap_or_else(|| panic!("a PutItem span: {spans:#?}"));
    let server = spans.iter().find(|span| span.kind == 2).expect("the SERVER span");
    assert_eq!((put.kind, &put.parent_span_id), (3, &server.span_id));
    let attributes = attributes(&put.attributes);
    assert_eq!(attributes["aws.dynamodb.table_names"], json!(["orders"]));
    assert_eq!(attributes["error.type"], "TimeoutError");
    let timeout = "abandoned before it finished: the invocation's time ran out first";
    let status = put
        .status
        .as_ref()
        .map(|status| json!([status.code, status.message]));
    assert_eq!(json!(status), json!([2, format!("TimeoutError: {timeout}")]));
}

#[test]
fn the_w3c_ids_are_the_hex_digits_of_root_and_parent() {
    let id = trace_id("1-5759e988-bd862e3fe1be46a994272793").unwrap();
    assert_eq!(id[..4], [0x57, 0x59, 0xe9, 0x88]);
    assert_eq!(id[15], 0x93);
    assert_eq!(
        span_id("53995c3f42cd8ad8"),
        Some([0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8])
    );
    assert_eq!(span_id("53995c3f42cd8ad"), None);
    assert_eq!(trace_id("1-5759e988-bd862e3fe1be46a99427279g"), None);
}

/// The ids as a splitter at each `-` and a `match` per hex digit read them.
fn ids_by_split(root: &str, parent: &str) -> (Option<[u8; 16]>, Option<[u8; 8]>) {
    fn digits(hex: &str) -> Option<Vec<u8>> {
        hex.len().is_multiple_of(2).then_some(())?;
        (0..hex.len())
            .step_by(2)
            .map(|at| {
                hex.get(at..at + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
            .filter(|_| hex.bytes().all(|byte| byte.is_ascii_hexdigit()))
    }
    let parts: Vec<&str> = root.split('-').collect();
    let trace = match parts[..] {
        ["1", time, random] if time.len() == 8 && random.len() == 24 => {
            let mut id = digits(time).unwrap_or_default();
            id.extend(digits(random).unwrap_or_default());
            <[u8; 16]>::try_from(id).ok()
        }
        _ => None,
    };
    let span = (parent.len() == 16)
        .then(|| digits(parent))
        .flatten()
        .and_then(|id| <[u8; 8]>::try_from(id).ok());
    (trace, span)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    #[test]
    fn the_ids_are_read_as_splitting_and_matching_each_digit_reads_them(
        root in "(1|2|11)?-?[0-9a-fA-F\\-gG+ é]{0,9}-?[0-9a-fA-F\\-gG+ ]{0,26}",
        good_time in "[0-9a-fA-F]{8}",
        good_random in "[0-9a-fA-F]{24}",
        parent in "[0-9a-fA-FgG\\- é]{14,17}",
    ) {
        let good = format!("1-{good_time}-{good_random}");
        let longer = format!("{good}0");
        let shorter = good.get(..good.len() - 1).unwrap_or_default();
        let moved = format!("1-{good_time}0-{}", good_random.get(1..).unwrap_or_default());
        for root in [root.as_str(), &good, &longer, shorter, &moved] {
            proptest::prop_assert_eq!((trace_id(root), span_id(&parent)), ids_by_split(root, &parent), "{} {}", root, parent);
        }
        proptest::prop_assert!(trace_id(&good).is_some());
    }
}
