//! Each span as the daemon receives it: the SERVER span and the PutItem's
//! for a create and a conflict, and under DynamoDB's faults. (lambda-host's
//! own tests hold a call cut at the deadline and a key fetch's span.)

use serde_json::{Value, json};

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampled_create_and_a_conflict_each_send_one_datagram_the_server_span_and_the_putitem_beneath_it() {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let sent = [create(1, 1, "Fern"), create(1, 2, "Other")];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false).await;

    assert_eq!(
        (answer_status(&answers, "req-1"), answer_status(&answers, "req-2")),
        (json!(200), json!(409))
    );
    let datagrams = daemon.datagrams();
    assert_eq!(datagrams.len(), 2, "one per invocation: {datagrams:#?}");
    let request_ids = proxy.request_ids();
    for (invocation, cold, answered, error) in
        [(&sent[0], true, 200, None), (&sent[1], false, 409, Some(40901))]
    {
        let (datagram, server, calls) = of_invocation(&datagrams, &invocation.trace_id);
        assert_eq!(datagram.mark, "T1S");
        assert_eq!(
            datagram.resource,
            json!({
                "service.name": "plant-store", "telemetry.sdk.name": "lambda-host", "telemetry.sdk.language": "rust",
                "telemetry.sdk.version": host_version(), "cloud.provider": "aws",
                "cloud.platform": "aws_lambda", "cloud.region": "us-east-1", "faas.name": "plants",
                "faas.version": "1", "faas.instance": "test", "aws.log.group.names": "/aws/lambda/plants",
                "aws.local.service": "plant-store",
            })
        );
        assert_eq!((server.name.as_str(), server.flags), ("plants", 0x301));
        assert_eq!(
            attributes(&server.attributes),
            server_attributes(&invocation.id, cold, answered, error, true),
            "{}",
            invocation.id
        );
        assert_eq!(
            status(server),
            Value::Null,
            "a 409 is the client's: {}",
            invocation.id
        );

        assert_eq!(calls.len(), 1, "{calls:#?}");
        let put = calls[0];
        assert_eq!((put.name.as_str(), put.flags), ("DynamoDB.PutItem", 0x101));
        let attributes = attributes(&put.attributes);
        let request_id = attributes["aws.request_id"]
            .as_str()
            .expect("DynamoDB's request id");
        assert!(
            request_ids.iter().any(|id| id == request_id),
            "{request_id} not in {request_ids:?}"
        );
        let put_status = if answered == 200 { 200 } else { 400 };
        let mut expected = with(
            &put_attributes(&table, "us-east-1", true),
            json!({
                "aws.request_id": request_id, "retry_attempts": 0, "http.response.status_code": put_status,
            }),
        );
        if answered == 409 {
            expected = with(
                &expected,
                json!({ "error.type": "ConditionalCheckFailedException" }),
            );
            assert_eq!(
                (status(put), events(put)),
                (
                    json!([
                        2,
                        "ConditionalCheckFailedException: The conditional request failed"
                    ]),
                    json!([{ "name": "exception", "attributes": {
                        "exception.type": "ConditionalCheckFailedException",
                        "exception.message": "The conditional request failed",
                    } }])
                )
            );
        } else {
            assert_eq!((status(put), events(put)), (Value::Null, json!([])));
        }
        assert_eq!(attributes, expected, "{}", invocation.id);
    }
}

/// Every attempt meets `fault`: the client gets 503 (50301), and the
/// PutItem's span is an error whose type names what happened.
async fn put_under(fault: Fault) -> (Value, Value, Value) {
    let (table, proxy) = table_behind_a_proxy().await;
    proxy.set(fault);
    let daemon = Daemon::start();
    let sent = [create(7, 1, "Fern")];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false).await;

    assert_eq!(answer_status(&answers, "req-1"), 503, "{fault:?}");
    let datagrams = daemon.datagrams();
    let (_, server, calls) = of_invocation(&datagrams, &sent[0].trace_id);
    assert_eq!(status(server), json!([2, ""]), "a 503 is the function's fault");
    assert_eq!(
        attributes(&server.attributes),
        server_attributes("req-1", true, 503, Some(50301), true)
    );
    assert_eq!(calls.len(), 1, "{fault:?}: {calls:#?}");
    let put = calls[0];
    (attributes(&put.attributes), status(put), events(put))
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
    assert_eq!(attributes["error.type"], "TimeoutError");
    assert_eq!(status[0], 2);
    let message = events[0]["attributes"]["exception.message"]
        .as_str()
        .expect("a message");
    assert!(message.contains("timeout"), "{events}");
}

/// lambda-host's version, which writes the spans: its manifest's.
fn host_version() -> &'static str {
    include_str!("../../../crates/lambda-host/Cargo.toml")
        .lines()
        .find_map(|line| line.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .expect("lambda-host's manifest names its version")
}
