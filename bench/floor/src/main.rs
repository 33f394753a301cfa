//! The floor under plant-store: its SDK configuration, client, pre-warm and
//! `PutItem`, called as `src/main.rs` and the store call them, and nothing
//! else of the function.
//!
//! `FLOOR_UNTIL` picks what it does. The cold floor stops after a step:
//! `main` (the process has started: exec, the dynamic loader, libc and
//! Rust's start-up of a binary this size), `client` (the SDK's configuration
//! and the DynamoDB client), `connection` (the pre-warm: DNS, TCP, the TLS
//! handshake, a signed `DescribeTable`) or `put` (one `PutItem` on that
//! connection, the default). It then writes `ready` and waits for its
//! standard input to close, so that bench/floor.py reads its CPU clock at
//! that point.
//!
//! `loop` is the warm floor: after the pre-warm it serves the Runtime API
//! at `AWS_LAMBDA_RUNTIME_API` as a function would, each invocation one
//! `GET /next` (its event read, never decoded), one `PutItem` of a fresh
//! plant, and `POST /response` with a fixed answer, on the Runtime API
//! client the host uses (`lambda_runtime_api_client`, a pool of one
//! connection per worker). `AWS_LAMBDA_MAX_CONCURRENCY=N` runs N such loops
//! at once on the runtime the host would pick (a thread per vCPU when N > 1
//! and there is more than one vCPU, else one thread), as Lambda Managed
//! Instances runs a function. Whatever a function costs per invocation
//! above this is its own work: decoding the event, the token check, the
//! body's parse, encoding the answer, logs, metrics and spans.

use std::io::Read;
use std::sync::{Arc, OnceLock};
use std::sync::atomic::{AtomicI64, Ordering};

use http_body_util::BodyExt;
use lambda_host::sdk::{self, Trust};
use lambda_runtime_api_client::body::Body;
use lambda_runtime_api_client::{PooledClient, build_request};
use plant_store::plant::{NewPlant, PlantId, PlantName, PlantTag};
use plant_store::store::client::with_budgets;
use plant_store::store::{DynamoStore, PlantStore};

/// What plant-store answers to a create, as the benchmark checks it; the
/// same bytes every time, so that no encoding is measured.
const ANSWER: &str = r#"{"statusCode":200,"headers":{"content-type":"application/json"},"body":"{\"name\":\"Monstera deliciosa\",\"tag\":\"aroid\"}"}"#;
const NEXT: &str = "/2018-06-01/runtime/invocation/next";

fn main() {
    let until = std::env::var("FLOOR_UNTIL").unwrap_or_else(|_| "put".to_owned());
    if until == "main" {
        return ready();
    }
    let workers = std::env::var("AWS_LAMBDA_MAX_CONCURRENCY")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let vcpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let runtime = if until == "loop" && workers > 1 && vcpus > 1 {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    }
    .enable_all()
    .build()
    .expect("a tokio runtime");
    runtime.block_on(async {
        let store = steps(&until).await;
        if until == "loop" {
            serve(store.expect("a store after the pre-warm"), workers).await;
        }
    });
    ready();
}

fn ready() {
    println!("ready");
    // Ends when bench/floor.py closes our standard input.
    let _ = std::io::stdin().read(&mut [0_u8; 1]);
}

/// The cold steps up to `until`; the store once it is pre-warmed.
async fn steps(until: &str) -> Option<DynamoStore> {
    let trust = Trust::from_env().expect("AWS_CA_BUNDLE, if set, names a usable bundle");
    let sdk_config = sdk::load(&trust).await;
    let client = aws_sdk_dynamodb::Client::from_conf(with_budgets((&sdk_config).into()).build());
    if until == "client" {
        return None;
    }
    let store = DynamoStore::new(client, std::env::var("TABLE_NAME").expect("TABLE_NAME"));
    store.prewarm().await.expect("the pre-warm's DescribeTable");
    if until == "connection" || until == "loop" {
        return Some(store);
    }
    store.create(&plant(fresh_id())).await.expect("one PutItem");
    None
}

/// Ids no other floor process writes into the same table: the process id
/// above a counter. The id is read once: glibc asks the kernel each time,
/// a system call that plant-store does not make.
fn fresh_id() -> i64 {
    static NEXT_ID: AtomicI64 = AtomicI64::new(0);
    static PROCESS: OnceLock<i64> = OnceLock::new();
    let process = *PROCESS.get_or_init(|| i64::from(std::process::id()) * 1_000_000_000);
    process + NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn plant(id: i64) -> NewPlant {
    NewPlant {
        id: PlantId::from(id),
        name: PlantName::parse("Monstera deliciosa".to_owned()).expect("a valid name"),
        tag: Some(PlantTag::parse("aroid".to_owned()).expect("a valid tag")),
    }
}

/// `workers` loops until the process is stopped; a failure of any ends it.
/// Each is a task of its own, one alone too, as the host runs its workers:
/// a loop polled as `block_on`'s own future makes tokio check its driver
/// without waiting (an `epoll_wait` with no timeout) after each of its
/// wake-ups, about three system calls a create that plant-store does not
/// make.
async fn serve(store: DynamoStore, workers: usize) {
    let api = std::env::var("AWS_LAMBDA_RUNTIME_API").expect("AWS_LAMBDA_RUNTIME_API");
    let client = PooledClient::builder()
        .with_endpoint(format!("http://{api}").parse().expect("a Runtime API address"))
        .with_pool_size(workers)
        .build();
    let floor = Arc::new((client, store));
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let floor = floor.clone();
        loops.spawn(async move { work(&floor).await });
    }
    if let Some(Err(err)) = loops.join_next().await {
        panic!("a worker stopped: {err}");
    }
}

async fn work(floor: &(PooledClient, DynamoStore)) {
    let (client, store) = floor;
    loop {
        let next = build_request().uri(NEXT).body(Body::empty()).expect("GET /next");
        let (parts, event) = client.call(next).await.expect("an invocation").into_parts();
        event.collect().await.expect("its event");
        let request_id = parts
            .headers
            .get("lambda-runtime-aws-request-id")
            .and_then(|id| id.to_str().ok())
            .expect("a request id");

        store.create(&plant(fresh_id())).await.expect("one PutItem");

        let mut answer = build_request()
            .method("POST")
            .uri(format!("/2018-06-01/runtime/invocation/{request_id}/response"));
        if let Some(id) = parts.headers.get("lambda-runtime-invocation-id") {
            answer = answer.header("lambda-runtime-invocation-id", id);
        }
        let answer = answer.body(Body::from(ANSWER)).expect("POST /response");
        let accepted = client.call(answer).await.expect("the answer taken");
        accepted
            .into_body()
            .collect()
            .await
            .expect("the Runtime API's reply");
    }
}
