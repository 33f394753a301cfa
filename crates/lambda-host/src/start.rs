//! The process: logging, the async runtime sized for Lambda's concurrency,
//! the function's settings and init, then the invocation loop; or, when any
//! of those cannot be had, one line in the log, the same line to Lambda,
//! and exit 1.

use std::fmt::Display;
use std::process::ExitCode;

use lambda_http::tracing;

use crate::env::{Concurrency, StartError};
use crate::{Handler, Lambda, logging};

/// Runs a function on Lambda; the whole of a `main`.
///
/// `configure` reads the function's own settings, synchronously, and
/// returns its init: the async work that builds the [`Handler`] (clients,
/// connections, keys). A failure of either stops the function before it
/// serves anything, with its message in the log and reported to Lambda as
/// the init error; the function's settings are checked before Lambda's own
/// environment, so that a deployer running the binary by hand reads what
/// the function needs first. Then invocations are served until the Runtime
/// API fails for good ([`Lambda::serve`]), and the process exits 1.
///
/// One thread serves one invocation at a time (classic Lambda), and several
/// on a single vCPU, where a thread spends no CPU handing wake-ups to
/// another; several at once on more vCPUs (Managed Instances) get a thread
/// per vCPU, the only way past one vCPU's worth (docs/performance.md, "One
/// thread or a thread per vCPU").
pub fn run<C, I, H, E>(configure: C) -> ExitCode
where
    C: FnOnce() -> Result<I, E>,
    I: Future<Output = Result<H, E>>,
    H: Handler,
    E: Display,
{
    logging::init();
    crate::trace::init(&crate::env::tracing());
    let concurrency = Concurrency::from_env();
    let vcpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let runtime = match concurrency {
        Ok(concurrency) if concurrency.is_concurrent() && vcpus > 1 => {
            tokio::runtime::Builder::new_multi_thread()
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("refusing to start: no async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(Box::pin(start(concurrency, configure)))
}

async fn start<C, I, H, E>(concurrency: Result<Concurrency, StartError>, configure: C) -> ExitCode
where
    C: FnOnce() -> Result<I, E>,
    I: Future<Output = Result<H, E>>,
    H: Handler,
    E: Display,
{
    // With one invocation at a time if the count is unusable: enough to
    // tell Lambda why the function does not start.
    let lambda = Lambda::from_env(concurrency.unwrap_or(Concurrency::ONE));
    let (init, lambda) = match (configure(), lambda, concurrency) {
        (Err(err), lambda, _) => return refuse_to_start(lambda.ok().as_ref(), &err).await,
        (Ok(_), Err(err), _) => return refuse_to_start(None, &err).await,
        (Ok(_), Ok(lambda), Err(err)) => return refuse_to_start(Some(&lambda), &err).await,
        (Ok(init), Ok(lambda), Ok(_)) => (init, lambda),
    };
    // Boxed for the reason `Lambda::serve` boxes the handler's future: the
    // init's temporaries stay out of this frame.
    let handler = match Box::pin(init).await {
        Ok(handler) => handler,
        Err(err) => return refuse_to_start(Some(&lambda), &err).await,
    };
    match Box::pin(lambda.serve(handler)).await {
        // As a `main` that returns the error writes it.
        Err(err) => eprintln!("Error: {err:?}"),
        Ok(()) => eprintln!("Error: the invocation loop ended"),
    }
    ExitCode::FAILURE
}

/// One line in the log, the same line to Lambda (so that the invoke that
/// started this environment fails with it), and exit.
async fn refuse_to_start(lambda: Option<&Lambda>, err: &dyn Display) -> ExitCode {
    let message = format!("refusing to start: {err}");
    tracing::error!("{message}");
    if let Some(lambda) = lambda
        && let Err(report) = lambda.init_error(&message).await
    {
        tracing::debug!(cause = %report, "could not report the init error to the Runtime API");
    }
    ExitCode::FAILURE
}
