//! Wiring only: logging, configuration, the DynamoDB client, the work of
//! init (the pre-warm, the issuer's keys), the runtime.

use std::time::Instant;

use futures_util::FutureExt;
use lambda_http::{Error, tracing};
use plant_store::config::Config;
use plant_store::handler::App;
use plant_store::runtime::{self, Concurrency, RuntimeApi};
use plant_store::sdk::{self, Trust};
use plant_store::store::{DynamoStore, with_budgets};
use plant_store::telemetry::{Stdout, Telemetry};
use plant_store::trace::{self, AwsSubsegments, TraceHeader, Tracer};

fn main() -> Result<(), Error> {
    plant_store::logging::init();
    let concurrency = Concurrency::from_env();
    // One thread, which spends no CPU handing wake-ups between threads:
    // for one invocation at a time (classic Lambda), and for several on a
    // single vCPU. Several at once on more vCPUs (Managed Instances): a
    // thread per vCPU, which costs about an eighth more CPU per invocation
    // and is the only way past one vCPU's worth (docs/performance.md).
    let vcpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let runtime = match concurrency {
        Ok(concurrency) if concurrency.is_concurrent() && vcpus > 1 => {
            tokio::runtime::Builder::new_multi_thread()
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build()?;
    runtime.block_on(start(concurrency))
}

async fn start(concurrency: Result<Concurrency, runtime::StartError>) -> Result<(), Error> {
    // Our own settings first: their message is the one a deployer needs.
    let api = RuntimeApi::from_env(concurrency.unwrap_or(Concurrency::ONE));
    let (api, config, trust, function, concurrency) = match (
        api,
        Config::from_env(),
        Trust::from_env(),
        runtime::function_config_from_env(),
        concurrency,
    ) {
        (Ok(api), Ok(config), Ok(trust), Ok(function), Ok(concurrency)) => {
            (api, config, trust, function, concurrency)
        }
        (api, Err(err), ..) => refuse_to_start(api.ok().as_ref(), &err).await,
        (api, _, Err(err), ..) => refuse_to_start(api.ok().as_ref(), &err).await,
        (Err(err), ..) => refuse_to_start(None, &err).await,
        (Ok(api), _, _, Err(err), _) | (Ok(api), _, _, _, Err(err)) => {
            refuse_to_start(Some(&api), &err).await
        }
    };

    // Subsegments for the invocations Lambda samples, when Lambda runs an
    // X-Ray daemon beside the function (src/trace/).
    match Tracer::from_env(&config.telemetry.service) {
        Some(Ok(tracer)) => trace::enable(tracer),
        Some(Err(err)) => tracing::warn!(cause = %err, "X-Ray subsegments are off"),
        None => {}
    }

    // Built once; every invocation reuses its connection pool. Its requests
    // carry their invocation's trace header (src/trace/).
    //
    // The SDK's futures are large. Polled inline, their temporaries made
    // `start` one stack frame of 100 KB and the invocation loop another of
    // 85 KB, and the compiler's stack probes touch every page of a frame:
    // about 30 page faults of every cold start, at 3 us each. Boxed, each
    // is polled in a frame of its own (docs/performance.md, "Smaller stack
    // frames").
    let sdk_config = sdk::load(&trust).boxed().await;
    let client = dynamo_client(&sdk_config);
    let store = DynamoStore::new(client, config.table_name);
    // With JWTs on, the issuer's keys are fetched during init too, while
    // the pre-warm runs: both mostly wait on the network.
    let authenticator = config.authenticator.clone();
    let keys = tokio::spawn(async move { authenticator.prepare().await });
    if config.prewarm {
        let started = Instant::now();
        match store.prewarm().boxed().await {
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
        refuse_to_start(Some(&api), &err).await;
    }
    // On classic Lambda a refresh of the issuer's keys that a request
    // started ends before the environment is frozen (`run_settling`).
    let settling = config.authenticator.clone();
    let app = App::new(store, config.authenticator).with_telemetry(Telemetry::new(config.telemetry, Stdout));
    let app = std::sync::Arc::new(app);

    runtime::run_settling(
        api,
        function,
        concurrency,
        move |request| {
            let app = app.clone();
            async move { app.handle(request).await }.boxed()
        },
        || settling.settled(),
    )
    .boxed()
    .await
}

/// The DynamoDB client, with the store's time budgets, the trace header and
/// the X-Ray subsegments of its calls.
/// Out of line for the reason the futures in `start` are boxed: the
/// builders' temporaries stay in this frame.
#[inline(never)]
fn dynamo_client(sdk_config: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
    let mut config = with_budgets(sdk_config.into()).interceptor(TraceHeader);
    config.push_interceptor(AwsSubsegments::shared());
    aws_sdk_dynamodb::Client::from_conf(config.build())
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
