//! Which invocations send spans, in how many datagrams, to whom: one
//! datagram per traced invocation, none crossed at eight in flight, the
//! unsampled only with Application Signals, and a daemon that is not there.
//! Every create traced here has its spans checked whole
//! ([`assert_a_create`]), in each of these modes.

use serde_json::Value;

use super::shape::{Create, assert_a_create};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsampled_and_headerless_invocations_send_nothing() {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let body = |id: u32| http_event(&format!(r#"{{"id":{id},"name":"Fern"}}"#));
    let sent = [
        Invocation::new("req-unsampled", body(1)),
        Invocation::new("req-headerless", body(2)).without_trace_id(),
        // After a sampled one, a headerless one still has no trace of its own.
        Invocation::new("req-sampled", body(3)).sampled(),
        Invocation::new("req-headerless-after", body(4)).without_trace_id(),
    ];

    let (answers, _) = serve_traced(&sent, &proxy, &table, &daemon.address, 1, false, &[]).await;

    for invocation in &sent {
        assert_eq!(answer_status(&answers, &invocation.id), 200, "{}", invocation.id);
    }
    assert!(sent[0].trace_id.ends_with(";Sampled=0"), "{}", sent[0].trace_id);
    let datagrams = daemon.datagrams();
    assert_eq!(
        datagrams.len(),
        1,
        "the sampled invocation's only: {datagrams:#?}"
    );
    let create = Create {
        table: &table,
        cold: false,
        status: 200,
    };
    assert_a_create(&datagrams, &sent[2], create);
    assert_eq!(
        proxy.recorded()[3].header("x-amzn-trace-id"),
        None,
        "the headerless invocation after a sampled one"
    );
}

/// A hundred creates, every other one sampled, served `workers` at once;
/// with Application Signals on the unsampled ones send their spans too.
async fn a_hundred_creates(workers: usize, application_signals: bool) {
    let (table, proxy) = table_behind_a_proxy().await;
    let daemon = Daemon::start();
    let sent: Vec<Invocation> = (1..=100)
        .map(|n| {
            let invocation = Invocation::new(
                &format!("req-{n}"),
                http_event(&format!(r#"{{"id":{n},"name":"Fern {n}"}}"#)),
            );
            if n % 2 == 1 {
                invocation.sampled()
            } else {
                invocation
            }
        })
        .collect();

    let (answers, _) = serve_traced(
        &sent,
        &proxy,
        &table,
        &daemon.address,
        workers,
        application_signals,
        &[],
    )
    .await;

    let datagrams = daemon.datagrams();
    let traced: Vec<&Invocation> = sent
        .iter()
        .filter(|invocation| application_signals || invocation.trace_id.ends_with("Sampled=1"))
        .collect();
    assert_eq!(datagrams.len(), traced.len(), "one per traced invocation");
    let mut request_ids = Vec::new();
    let mut cold = 0;
    for invocation in traced {
        assert_eq!(answer_status(&answers, &invocation.id), 200, "{}", invocation.id);
        // Which invocation came first is the scheduler's choice at eight at
        // once: the span says, and the whole shape must agree with it.
        let (_, server, _) = of_invocation(&datagrams, &invocation.trace_id);
        let first = attributes(&server.attributes)["faas.coldstart"] == true;
        cold += usize::from(first);
        let create = Create {
            table: &table,
            cold: first,
            status: 200,
        };
        request_ids.push(assert_a_create(&datagrams, invocation, create));
        // The PutItem under this SERVER span is this invocation's: it
        // carried the same trace header to DynamoDB.
        let id = invocation.id.trim_start_matches("req-");
        let recorded = proxy
            .recorded()
            .into_iter()
            .find(|request| {
                serde_json::from_slice::<Value>(&request.body).is_ok_and(|body| body["Item"]["id"]["N"] == id)
            })
            .expect("the PutItem");
        assert_eq!(
            recorded.header("x-amzn-trace-id"),
            Some(invocation.trace_id.as_str())
        );
    }
    request_ids.sort();
    request_ids.dedup();
    assert_eq!(
        request_ids.len(),
        datagrams.len(),
        "each PutItem's own request id, once"
    );
    let answered = proxy.request_ids();
    assert!(
        request_ids.iter().all(|id| answered.contains(id)),
        "ids DynamoDB gave: {request_ids:?}"
    );
    assert!(cold <= 1, "one cold start per environment, if it was traced");
    if workers == 1 {
        // The first invocation is sampled, so traced in every mode.
        assert_eq!(cold, 1, "the first invocation's");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_at_a_time_each_sampled_create_sends_its_own_datagram() {
    a_hundred_creates(1, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_at_once_each_sampled_create_sends_its_own_datagram_none_crossed_none_missing() {
    a_hundred_creates(8, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_application_signals_one_at_a_time_unsampled_creates_send_theirs_marked_t1u() {
    a_hundred_creates(1, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_application_signals_eight_at_once_every_create_sends_its_own_none_crossed() {
    a_hundred_creates(8, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_is_not_listening_changes_nothing_but_one_warning() {
    let (table, proxy) = table_behind_a_proxy().await;
    let sent: Vec<Invocation> = (1..=4).map(|n| create(n, n as usize, "Fern")).collect();

    let (answers, lines) = serve_traced(&sent, &proxy, &table, crate::helpers::NOBODY, 1, false, &[]).await;

    for invocation in &sent {
        assert_eq!(answer_status(&answers, &invocation.id), 200, "{}", invocation.id);
    }
    let warnings: Vec<&Value> = lines
        .iter()
        .filter(|line| {
            line["message"]
                .as_str()
                .is_some_and(|message| message.contains("X-Ray daemon"))
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0]["level"], "WARN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_daemon_address_turns_tracing_off_with_one_warning_and_the_function_serves() {
    let (table, proxy) = table_behind_a_proxy().await;
    let sent = [create(1, 1, "Fern")];

    let (answers, lines) = serve_traced(&sent, &proxy, &table, "no daemon here", 1, false, &[]).await;

    assert_eq!(answer_status(&answers, "req-1"), 200);
    let warnings: Vec<&Value> = lines.iter().filter(|line| line["level"] == "WARN").collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(
        warnings[0]["cause"],
        "AWS_XRAY_DAEMON_ADDRESS is \"no daemon here\", not host:port (or udp:host:port tcp:host:port)"
    );
}
