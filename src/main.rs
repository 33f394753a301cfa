//! Wiring only: logging, configuration, the DynamoDB client, the runtime.

use std::time::Instant;

use aws_config::BehaviorVersion;
use lambda_http::{Error, run, service_fn, tracing};
use plant_store::config::Config;
use plant_store::handler::App;
use plant_store::store::{DynamoStore, with_budgets};
use plant_store::telemetry::{Stdout, Telemetry};

/// One thread: Lambda sends one event at a time, and a single-threaded
/// runtime spends no CPU handing wake-ups between worker threads (measured
/// in docs/performance.md: about a fifth less CPU per warm invocation).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    plant_store::logging::init();

    let config = match Config::from_env() {
        Ok(config) => config,
        Err(err) => {
            tracing::error!("refusing to start: {err}");
            std::process::exit(1);
        }
    };

    // Built once; every invocation reuses its connection pool.
    let sdk_config = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let client = aws_sdk_dynamodb::Client::from_conf(with_budgets((&sdk_config).into()).build());
    let store = DynamoStore::new(client, config.table_name);
    if config.prewarm {
        let started = Instant::now();
        match store.prewarm().await {
            Ok(()) => tracing::debug!(
                elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
                "connection to DynamoDB opened during init"
            ),
            Err(err) => tracing::warn!(
                elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
                cause = %err,
                "pre-warm failed; the first request will open the connection to DynamoDB"
            ),
        }
    }
    let app = App::new(store, config.authenticator).with_telemetry(Telemetry::new(config.telemetry, Stdout));

    let app = &app;
    run(service_fn(move |request| async move {
        Ok::<_, Error>(app.handle(request).await)
    }))
    .await
}
