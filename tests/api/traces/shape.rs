//! Each span as the daemon receives it: the SERVER span and the PutItem's
//! for a create and a conflict, and under DynamoDB's faults. (lambda-host's
//! own tests hold a call cut at the deadline; `key_fetch` a key fetch's
//! span.) [`assert_a_create`] is the whole shape of a create's spans, which
//! every test that traces creates applies to each of them, whatever the
//! mode: one at a time or eight at once, sampled or sent for Application
//! Signals.

use serde_json::{Value, json};

use super::*;

/// How a create ended, as its spans must say.
#[derive(Debug, Clone, Copy)]
pub(super) struct Create<'a> {
    pub table: &'a str,
    /// The process's first invocation.
    pub cold: bool,
    /// 200, or 409 (40901) when the id was taken.
    pub status: u16,
}

/// The datagram of `invocation`, a create that ended as `create` says,
/// checked span by span against docs/tracing.md: its mark, the resource,
/// the scope, the SERVER span (name, ids, parent, flags, every attribute,
/// status, events) and the one `DynamoDB.PutItem` CLIENT span beneath it
/// (the same, its status and events those of DynamoDB's answer). Returns
/// the PutItem's `aws.request_id`, DynamoDB's own id for the request.
pub(super) fn assert_a_create(datagrams: &[Datagram], invocation: &Invocation, create: Create<'_>) -> String {
    let id = invocation.id.as_str();
    let sampled = invocation.trace_id.ends_with(";Sampled=1");
    let (datagram, server, calls) = of_invocation(datagrams, &invocation.trace_id);
    assert_eq!(datagram.mark, if sampled { "T1S" } else { "T1U" }, "{id}");
    assert_eq!(datagram.resource, resource(), "{id}");
    assert_eq!(
        datagram.scopes,
        [("lambda-host".to_owned(), host_version().to_owned())],
        "{id}"
    );
    let sampled_bit = u32::from(sampled);

    assert_eq!(
        (server.name.as_str(), server.flags),
        ("plants", 0x300 | sampled_bit),
        "{id}"
    );
    let error = (create.status == 409).then_some(40901);
    assert_eq!(
        attributes(&server.attributes),
        server_attributes(id, create.cold, create.status, error, sampled),
        "{id}"
    );
    assert_eq!(
        (status(server), events(server)),
        (Value::Null, json!([])),
        "a 409 is the client's: {id}"
    );

    assert_eq!(calls.len(), 1, "{id}: {calls:#?}");
    let put = calls[0];
    assert_eq!(
        (put.name.as_str(), put.flags),
        ("DynamoDB.PutItem", 0x100 | sampled_bit),
        "{id}"
    );
    let attributes = attributes(&put.attributes);
    let request_id = attributes["aws.request_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{id}: DynamoDB's request id in {attributes}"))
        .to_owned();
    let mut expected = with(
        &put_attributes(create.table, "us-east-1", sampled),
        json!({ "aws.request_id": request_id, "retry_attempts": 0 }),
    );
    if create.status == 409 {
        let conflict = "ConditionalCheckFailedException";
        expected = with(
            &expected,
            json!({ "http.response.status_code": 400, "error.type": conflict }),
        );
        assert_eq!(
            (status(put), events(put)),
            (
                json!([2, format!("{conflict}: The conditional request failed")]),
                json!([{ "name": "exception", "attributes": {
                    "exception.type": conflict, "exception.message": "The conditional request failed",
                } }])
            ),
            "{id}"
        );
    } else {
        expected = with(&expected, json!({ "http.response.status_code": 200 }));
        assert_eq!((status(put), events(put)), (Value::Null, json!([])), "{id}");
    }
    assert_eq!(attributes, expected, "{id}");
    request_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampled_create_and_a_conflict_each_send_one_datagram_the_server_span_and_the_putitem_beneath_it() {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let sent = [create(1, 1, "Fern"), create(1, 2, "Other")];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false, &[]).await;

    assert_eq!(
        (answer_status(&answers, "req-1"), answer_status(&answers, "req-2")),
        (json!(200), json!(409))
    );
    let datagrams = daemon.datagrams();
    assert_eq!(datagrams.len(), 2, "one per invocation: {datagrams:#?}");
    let request_ids = proxy.request_ids();
    for (invocation, cold, status) in [(&sent[0], true, 200), (&sent[1], false, 409)] {
        let table = &table;
        let request_id = assert_a_create(&datagrams, invocation, Create { table, cold, status });
        assert!(
            request_ids.contains(&request_id),
            "{request_id} not in {request_ids:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_path_is_the_path_asked_of_the_api_without_its_stage_and_a_404_has_no_route() {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    // An HTTP API on the stage `prod`, its `$default` route taking every path.
    let on_prod = |id: &str, path: &str| {
        let mut event = http_event(r#"{"id":1,"name":"Fern"}"#);
        event["rawPath"] = json!(path);
        event["routeKey"] = json!("$default");
        event["requestContext"]["routeKey"] = json!("$default");
        event["requestContext"]["stage"] = json!("prod");
        Invocation::new(id, event).sampled()
    };
    let sent = [
        on_prod("req-1", "/prod/plants"),
        on_prod("req-2", "/prod/plants/1"),
    ];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false, &[]).await;

    assert_eq!(
        (answer_status(&answers, "req-1"), answer_status(&answers, "req-2")),
        (json!(200), json!(404))
    );
    let datagrams = daemon.datagrams();
    let table = &table;
    assert_a_create(
        &datagrams,
        &sent[0],
        Create {
            table,
            cold: true,
            status: 200,
        },
    );
    let (_, server, calls) = of_invocation(&datagrams, &sent[1].trace_id);
    let mut expected = with(
        &server_attributes("req-2", false, 404, Some(40401), true),
        json!({ "url.path": "/plants/1" }),
    );
    expected.as_object_mut().expect("an object").remove("http.route");
    assert_eq!(attributes(&server.attributes), expected);
    assert_eq!((status(server), calls.len()), (Value::Null, 0));
}

/// Every attempt meets `fault`: the client gets 503 (50301), and the
/// PutItem's span is an error whose type names what happened.
async fn put_under(fault: Fault) -> (Value, Value, Value) {
    let (table, proxy) = table_behind_a_proxy().await;
    proxy.set(fault);
    let daemon = Daemon::start();
    let sent = [create(7, 1, "Fern")];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false, &[]).await;

    assert_eq!(answer_status(&answers, "req-1"), 503, "{fault:?}");
    let datagrams = daemon.datagrams();
    let (datagram, server, calls) = of_invocation(&datagrams, &sent[0].trace_id);
    assert_eq!((datagram.mark.as_str(), &datagram.resource), ("T1S", &resource()));
    assert_eq!((server.name.as_str(), server.flags), ("plants", 0x301));
    assert_eq!(status(server), json!([2, ""]), "a 503 is the function's fault");
    assert_eq!(
        attributes(&server.attributes),
        server_attributes("req-1", true, 503, Some(50301), true)
    );
    assert_eq!(calls.len(), 1, "{fault:?}: {calls:#?}");
    let put = calls[0];
    assert_eq!((put.name.as_str(), put.flags), ("DynamoDB.PutItem", 0x101));
    let attributes = attributes(&put.attributes);
    // What does not depend on how DynamoDB answered, whole; the rest is
    // each test's.
    let mut common = attributes.clone();
    for answered in [
        "aws.request_id",
        "retry_attempts",
        "http.response.status_code",
        "error.type",
    ] {
        common.as_object_mut().expect("an object").remove(answered);
    }
    assert_eq!(common, put_attributes(&table, "us-east-1", true), "{fault:?}");
    (attributes, status(put), events(put))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_fault_is_an_error_with_dynamodbs_code_and_the_retries() {
    let (attributes, status, events) = put_under(Fault::ServerError).await;

    assert_eq!(attributes["http.response.status_code"], 500);
    assert_eq!(
        attributes["aws.request_id"], "fault-proxy-server-error",
        "the id of the answer DynamoDB (here the proxy) gave"
    );
    assert_eq!(attributes["retry_attempts"], 2, "three attempts");
    assert_eq!(attributes["error.type"], "InternalServerError");
    assert_eq!(status, json!([2, "InternalServerError: Internal server error"]));
    assert_eq!(
        events,
        json!([{ "name": "exception", "attributes": {
            "exception.type": "InternalServerError", "exception.message": "Internal server error",
        } }])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_is_an_error_whose_type_is_dynamodbs_throttling_code() {
    let (attributes, status, events) = put_under(Fault::Throttle).await;

    assert_eq!(attributes["http.response.status_code"], 400);
    assert_eq!(attributes["error.type"], "ProvisionedThroughputExceededException");
    assert_eq!(status[0], 2);
    assert_eq!(
        events[0]["attributes"]["exception.type"],
        "ProvisionedThroughputExceededException"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_timeout_is_an_error_whose_type_is_the_timeout() {
    let (attributes, status, events) = put_under(Fault::BlackHole).await;

    assert_eq!(
        attributes.get("http.response.status_code"),
        None,
        "no answer came"
    );
    assert_eq!(attributes.get("aws.request_id"), None);
    assert!(attributes["retry_attempts"].is_u64(), "{attributes}");
    assert_eq!(attributes["error.type"], "TimeoutError");
    assert_eq!(status[0], 2);
    let message = events[0]["attributes"]["exception.message"]
        .as_str()
        .expect("a message");
    assert!(message.contains("timeout"), "{events}");
}
