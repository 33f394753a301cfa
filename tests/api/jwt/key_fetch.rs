//! The span of a key fetch a request waits for, from the built function:
//! the issuer stand-in and tokens of `jwt`, with the daemon and the checks
//! of `traces`.

use serde_json::{Value, json};

use super::key_cache::unknown_kid;
use super::{AUDIENCE, ISSUER, JwksServer, standard_jwks};
use crate::helpers::Event;
use crate::runtime_fake::Invocation;
use crate::traces::{
    Daemon, answer_status, attributes, events, of_invocation, resource, serve_traced, server_attributes,
    status, table_behind_a_proxy,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_waits_for_a_key_fetch_sends_the_fetchs_get_as_a_client_span_beneath_its_own() {
    let issuer = JwksServer::start(standard_jwks()).await;
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    // A kid the keys fetched during init lack: the request waits for a
    // refresh (the first after init may come at once), then is refused.
    let token = unknown_kid().encode();
    let event = Event::load("create-http-api.json")
        .body(r#"{"id":1,"name":"Fern"}"#)
        .header("authorization", Some(&format!("Bearer {token}")));
    let sent = [Invocation::new("req-1", event.text()).sampled()];
    let jwks_url = issuer.jwks_url();
    let jwt = [
        ("PLANTS_JWT_ISSUER", ISSUER),
        ("PLANTS_JWT_AUDIENCE", AUDIENCE),
        ("PLANTS_JWT_JWKS_URL", jwks_url.as_str()),
    ];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false, &jwt).await;

    assert_eq!(answer_status(&answers, "req-1"), 401);
    assert_eq!(issuer.fetches(), 2, "during init, then for the request");
    let datagrams = daemon.datagrams();
    assert_eq!(
        datagrams.len(),
        1,
        "the fetch in the request's datagram: {datagrams:#?}"
    );
    let (datagram, server, calls) = of_invocation(&datagrams, &sent[0].trace_id);
    assert_eq!((datagram.mark.as_str(), &datagram.resource), ("T1S", &resource()));
    assert_eq!((server.name.as_str(), server.flags), ("plants", 0x301));
    assert_eq!(
        attributes(&server.attributes),
        server_attributes("req-1", true, 401, Some(40102), true)
    );
    assert_eq!(calls.len(), 1, "the fetch alone, no PutItem: {calls:#?}");
    let fetch = calls[0];
    assert_eq!((fetch.name.as_str(), fetch.flags), ("GET", 0x101));
    let port = jwks_url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|port| port.parse::<u16>().ok())
        .expect("the stand-in's port");
    assert_eq!(
        attributes(&fetch.attributes),
        json!({
            "http.request.method": "GET", "url.full": jwks_url, "server.address": "127.0.0.1",
            "server.port": port, "http.response.status_code": 200,
            "aws.local.service": "plants", "aws.local.operation": "plants/FunctionHandler",
            "aws.span.kind": "CLIENT", "aws.trace.flag.sampled": true,
            "aws.remote.service": "127.0.0.1", "aws.remote.operation": "GET /jwks.json",
        })
    );
    assert_eq!((status(fetch), events(fetch)), (Value::Null, json!([])));
}
