//! Wiring only: the function's settings, the DynamoDB client, the work of
//! init (the pre-warm, the issuer's keys), then the host's loop.

use std::convert::Infallible;
use std::process::ExitCode;
use std::time::Instant;

use lambda_host::sdk::{self, Trust};
use lambda_http::{Body, Error, Request, Response, Service, tracing};
use plant_store::config::Config;
use plant_store::handler::App;
use plant_store::store::DynamoStore;
use plant_store::store::client::with_budgets;
use plant_store::telemetry::{Stdout, Telemetry};

fn main() -> ExitCode {
    lambda_host::start(|| {
        let config = Config::from_env()?;
        let trust = Trust::from_env()?;
        Ok::<_, Error>(init(config, trust))
    })
}

/// Init: the store, warmed, and the issuer's keys, then the app as the
/// host serves it.
async fn init(
    config: Config,
    trust: Trust,
) -> Result<
    impl Service<Request, Response = Response<Body>, Error = Infallible, Future: Send> + Clone + Send,
    Error,
> {
    // The SDK's futures are large: boxed, their temporaries stay out of
    // this frame, whose every page a cold start would otherwise touch
    // (docs/performance.md, "Smaller stack frames").
    let sdk_config = Box::pin(sdk::load(&trust)).await;
    let store = DynamoStore::new(dynamo_client(&sdk_config), config.table_name);

    // With JWTs on, the issuer's keys are fetched during init too, while
    // the pre-warm runs: both mostly wait on the network. They come
    // through the host's connector for calls outside AWS, and a refresh
    // started behind a request ends before the environment is frozen.
    let authenticator = config
        .authenticator
        .with_http_connector(|| sdk::http_connector(&trust));
    authenticator.spawn_fetches_with(|fetch| {
        lambda_host::spawn(fetch);
    });
    let preparing = authenticator.clone();
    let keys = tokio::spawn(async move { preparing.prepare().await });
    if config.prewarm {
        let started = Instant::now();
        match Box::pin(store.prewarm()).await {
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
    if let Ok(Err(err)) = keys.await {
        return Err(err.into());
    }

    let telemetry = Telemetry::new(config.telemetry, Stdout);
    Ok(App::new(store, authenticator)
        .with_telemetry(telemetry)
        .into_service())
}

/// The DynamoDB client, with the store's time budgets and the host's trace
/// interceptors. Out of line for the reason the futures in `init` are
/// boxed: the builders' temporaries stay in this frame.
#[inline(never)]
fn dynamo_client(sdk_config: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
    let mut config = with_budgets(sdk_config.into());
    for interceptor in lambda_host::trace::interceptors() {
        config.push_interceptor(interceptor);
    }
    aws_sdk_dynamodb::Client::from_conf(config.build())
}
