//! The two ways in: [`run`], the drop-in for `lambda_http::run` inside a
//! function's own `main`, and [`start`], the whole of a `main`: logging,
//! the async runtime sized for Lambda's concurrency, the function's
//! settings and init, then the invocation loop; or, when any of those
//! cannot be had, one line in the log, the same line to Lambda, and exit 1.

use std::fmt::{Debug, Display};
use std::process::ExitCode;

use lambda_http::lambda_runtime::Diagnostic;
use lambda_http::tower::Service;
use lambda_http::{Error, IntoResponse, Request, tracing};

use crate::env::{Concurrency, LambdaEnv};
use crate::{Lambda, logging, trace};

/// Serves the function's `service` on Lambda until the Runtime API fails
/// for good: what `lambda_http::run(service).await` (or `run_concurrent`)
/// does, in a function's own `#[tokio::main]`, with the host's guarantees.
///
/// It reads Lambda's environment, installs the host's log subscriber
/// unless the function installed one first, starts the traces when
/// Lambda asks for them, and serves one invocation at a time, or
/// `AWS_LAMBDA_MAX_CONCURRENCY` at once on Managed Instances, each worker
/// with its own clone of the service. The service's response may be
/// anything `lambda_http` turns into one (an axum `Response` included);
/// an `Err` fails that invocation, as it does under `lambda_http`.
///
/// ```no_run
/// use lambda_http::{Body, Error, Request, Response, service_fn};
///
/// #[tokio::main]
/// async fn main() -> Result<(), Error> {
///     lambda_host::run(service_fn(|request: Request| async move {
///         Ok::<_, Error>(Response::new(Body::from(request.uri().path().to_owned())))
///     }))
///     .await
/// }
/// ```
pub async fn run<S, R, E>(service: S) -> Result<(), Error>
where
    S: Service<Request, Response = R, Error = E> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: IntoResponse + Send + 'static,
    E: Debug + Into<Diagnostic> + Send + 'static,
{
    let env = LambdaEnv::read();
    logging::init(&env);
    start_tracing(&env);
    Lambda::of(&env)?.serve(service).await
}

/// Runs a function on Lambda; the whole of a `main`.
///
/// `configure` reads the function's own settings, synchronously, and
/// returns its init: the async work that builds the service (clients,
/// connections, keys). A failure of either stops the function before it
/// serves anything, with its message in the log and reported to Lambda as
/// the init error; the function's settings are checked before Lambda's own
/// environment, so that a deployer running the binary by hand reads what
/// the function needs first. Then invocations are served as [`run`] serves
/// them until the Runtime API fails for good, and the process exits 1.
///
/// One thread serves one invocation at a time (classic Lambda), and several
/// on a single vCPU, where a thread spends no CPU handing wake-ups to
/// another; several at once on more vCPUs (Managed Instances) get a thread
/// per vCPU, the only way past one vCPU's worth (docs/performance.md, "One
/// thread or a thread per vCPU").
pub fn start<C, I, S, R, E, F>(configure: C) -> ExitCode
where
    C: FnOnce() -> Result<I, F>,
    I: Future<Output = Result<S, F>>,
    S: Service<Request, Response = R, Error = E> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: IntoResponse + Send + 'static,
    E: Debug + Into<Diagnostic> + Send + 'static,
    F: Display,
{
    let env = LambdaEnv::read();
    logging::init(&env);
    let vcpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let runtime = match env.concurrency {
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
    runtime.block_on(Box::pin(serve(env, configure)))
}

async fn serve<C, I, S, R, E, F>(env: LambdaEnv, configure: C) -> ExitCode
where
    C: FnOnce() -> Result<I, F>,
    I: Future<Output = Result<S, F>>,
    S: Service<Request, Response = R, Error = E> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: IntoResponse + Send + 'static,
    E: Debug + Into<Diagnostic> + Send + 'static,
    F: Display,
{
    // With one invocation at a time if the count is unusable: enough to
    // tell Lambda why the function does not start.
    let lambda = Lambda::of(&LambdaEnv {
        concurrency: Ok(env.concurrency.unwrap_or(Concurrency::ONE)),
        ..env.clone()
    });
    let (init, lambda) = match (configure(), lambda, env.concurrency) {
        (Err(err), lambda, _) => return refuse_to_start(lambda.ok().as_ref(), &err).await,
        (Ok(_), Err(err), _) => return refuse_to_start(None, &err).await,
        (Ok(_), Ok(lambda), Err(err)) => return refuse_to_start(Some(&lambda), &err).await,
        (Ok(init), Ok(lambda), Ok(_)) => (init, lambda),
    };
    start_tracing(&env);
    // Boxed for the reason `Lambda::serve` boxes the service's future: the
    // init's temporaries stay out of this frame.
    let service = match Box::pin(init).await {
        Ok(service) => service,
        Err(err) => return refuse_to_start(Some(&lambda), &err).await,
    };
    match Box::pin(lambda.serve(service)).await {
        // As a `main` that returns the error writes it.
        Err(err) => eprintln!("Error: {err:?}"),
        Ok(()) => eprintln!("Error: the invocation loop ended"),
    }
    ExitCode::FAILURE
}

/// The tracer, when Lambda runs the X-Ray daemon, recording `tracing`
/// spans at the logs' level.
fn start_tracing(env: &LambdaEnv) {
    trace::init(&trace::TraceEnv {
        log_level: Some(logging::level(env.log_level.as_deref())),
        ..env.trace.clone()
    });
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
