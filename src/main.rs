//! Wiring only: logging, configuration, the DynamoDB client, the runtime.

use std::time::Instant;

use aws_config::BehaviorVersion;
use lambda_http::{Error, tracing};
use plant_store::config::Config;
use plant_store::handler::App;
use plant_store::runtime::{self, RuntimeApi};
use plant_store::store::{DynamoStore, with_budgets};
use plant_store::telemetry::{Stdout, Telemetry};

/// One thread: Lambda sends one event at a time, and a single-threaded
/// runtime spends no CPU handing wake-ups between worker threads (measured
/// in docs/performance.md: about a fifth less CPU per warm invocation).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    plant_store::logging::init();

    // Our own settings first: their message is the one a deployer needs.
    let (api, config, function) = match (
        RuntimeApi::from_env(),
        Config::from_env(),
        runtime::function_config_from_env(),
    ) {
        (Ok(api), Ok(config), Ok(function)) => (api, config, function),
        (api, Err(err), _) => refuse_to_start(api.ok().as_ref(), &err).await,
        (Err(err), ..) => refuse_to_start(None, &err).await,
        (Ok(api), _, Err(err)) => refuse_to_start(Some(&api), &err).await,
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

    runtime::run(&api, function, async |request| app.handle(request).await).await
}

/// One line in the log, the same line to Lambda (so that the invoke that
/// started this environment fails with it), and exit.
async fn refuse_to_start(api: Option<&RuntimeApi>, err: &dyn std::fmt::Display) -> ! {
    let message = format!("refusing to start: {err}");
    tracing::error!("{message}");
    if let Some(api) = api
        && let Err(report) = api.init_error(&message).await
    {
        tracing::debug!(cause = %report, "could not report the init error to the Runtime API");
    }
    std::process::exit(1);
}
