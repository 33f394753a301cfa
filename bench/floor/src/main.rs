//! The floor under plant-store's cold start: its SDK configuration, client,
//! pre-warm and one `PutItem`, called as `src/main.rs` calls them, and
//! nothing else. `FLOOR_UNTIL` stops it after a step: `main` (the process
//! has started: exec, the dynamic loader, libc and Rust's start-up of a
//! binary this size), `client` (the SDK's configuration and the DynamoDB
//! client), `connection` (the pre-warm: DNS, TCP, the TLS handshake, a
//! signed `DescribeTable`) or `put` (one `PutItem` on that connection, the
//! default). It then writes `ready` and waits for its standard input to
//! close, so that bench/floor.py reads its CPU clock at that point.

use std::io::Read;

use lambda_host::sdk::{self, Trust};
use plant_store::plant::NewPlant;
use plant_store::store::{DynamoStore, PlantStore, with_budgets};

fn main() {
    let until = std::env::var("FLOOR_UNTIL").unwrap_or_else(|_| "put".to_owned());
    if until != "main" {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        runtime.block_on(steps(&until));
    }
    println!("ready");
    // Ends when bench/floor.py closes our standard input.
    let _ = std::io::stdin().read(&mut [0_u8; 1]);
}

async fn steps(until: &str) {
    let trust = Trust::from_env().expect("AWS_CA_BUNDLE, if set, names a usable bundle");
    let sdk_config = sdk::load(&trust).await;
    let client = aws_sdk_dynamodb::Client::from_conf(with_budgets((&sdk_config).into()).build());
    if until == "client" {
        return;
    }
    let store = DynamoStore::new(client, std::env::var("TABLE_NAME").expect("TABLE_NAME"));
    store.prewarm().await.expect("the pre-warm's DescribeTable");
    if until == "connection" {
        return;
    }
    let body = format!(r#"{{"id":{},"name":"floor"}}"#, std::process::id());
    let plant = NewPlant::from_json(body.as_bytes()).expect("a valid plant");
    store.create(&plant).await.expect("one PutItem");
}
