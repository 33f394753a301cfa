//! The ways in, and the invocation loop they run. [`run`] is the drop-in
//! for `lambda_http::run` inside a function's own `main`; [`start`] is the
//! whole of a `main`: logging, the async runtime sized for Lambda's
//! concurrency, the function's settings and init, then the loop; or, when
//! any of those cannot be had, one line in the log, the same line to
//! Lambda, and exit 1.
//!
//! The loop: `GET …/invocation/next`, call the service, `POST
//! …/response` (or `…/error`), for the life of the process; on Lambda
//! Managed Instances (`AWS_LAMBDA_MAX_CONCURRENCY`), that many loops at
//! once, each answering its own invocation.
//!
//! Ours rather than `lambda_runtime`'s, whose loop writes the process
//! environment on every invocation and so grows a warm process without
//! bound (docs/upstream/lambda-runtime-trace-id-leak.md). A fault costs at
//! most the invocation it hits: a panic, an `Err`, an event that cannot be
//! decoded, a service still running at the deadline, a response its front
//! door's JSON cannot carry each fail that one invocation and the worker
//! serves on (`worker.rs`). A Runtime API that stays
//! unreachable stops every worker, and the process exits so that Lambda
//! replaces the environment; it never serves on with fewer workers than
//! it announced. docs/guarantees.md tells the whole story.

use std::fmt::{Debug, Display};
use std::pin::pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use hyper::body::{Body as HttpBody, Bytes};
use lambda_http::http::Uri;
use lambda_http::lambda_runtime::{Config as FunctionConfig, Context, Diagnostic};
use lambda_http::tower::Service;
use lambda_http::{Error, IntoResponse, Request, Response, tracing};
use tokio::sync::{Mutex, watch};
use tokio::task::JoinSet;

pub(crate) use self::api::RuntimeApi;
pub use self::behind::spawn;
#[cfg(feature = "graceful-shutdown")]
pub use self::shutdown::spawn_graceful_shutdown_handler;
use self::worker::{Answer, Lent, Own, Shared, Streaming};
use crate::env::{Concurrency, LambdaEnv, StartError};
use crate::envelope::Stage;
use crate::{logging, trace};

mod api;
mod behind;
mod shutdown;
mod stream;
mod worker;

/// One execution environment's link to Lambda: where its Runtime API is,
/// the function it runs as, and how many invocations it takes at once.
#[derive(Debug)]
pub struct Lambda {
    endpoint: Uri,
    api: RuntimeApi,
    function: FunctionConfig,
    concurrency: Concurrency,
    stage: Stage,
}

impl Lambda {
    /// As Lambda (or `cargo lambda watch`) describes the environment:
    /// `AWS_LAMBDA_RUNTIME_API`, the function's name, memory and version,
    /// `AWS_LAMBDA_MAX_CONCURRENCY` and `AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH`.
    pub fn from_env() -> Result<Self, StartError> {
        Self::of(&LambdaEnv::read())
    }

    pub(crate) fn of(env: &LambdaEnv) -> Result<Self, StartError> {
        let lambda = Self::new(env.runtime_api.clone()?, env.function.clone()?);
        let stage = if env.ignore_stage_in_path {
            Stage::Ignored
        } else {
            Stage::InPath
        };
        Ok(Self {
            stage,
            ..lambda.with_concurrency(env.concurrency?)
        })
    }

    /// A Runtime API at `endpoint` (`http://host:port`, optionally with a
    /// base path), one invocation at a time: to serve from an emulator or a
    /// test's own Runtime API, where [`run`] would read Lambda's
    /// environment.
    pub fn new(endpoint: Uri, function: FunctionConfig) -> Self {
        Self {
            api: RuntimeApi::new(endpoint.clone(), Concurrency::ONE),
            endpoint,
            function,
            concurrency: Concurrency::ONE,
            stage: Stage::InPath,
        }
    }

    /// Takes `concurrency` invocations at once, over a connection pool of
    /// that size.
    pub fn with_concurrency(self, concurrency: Concurrency) -> Self {
        Self {
            api: RuntimeApi::new(self.endpoint.clone(), concurrency),
            concurrency,
            ..self
        }
    }

    /// Tells Lambda that init failed, so that the invoke that started this
    /// execution environment fails with `message` rather than a timeout; for
    /// a `main` of its own, as [`start`] does on a failed init.
    pub async fn init_error(&self, message: &str) -> Result<(), Error> {
        self.api.init_error(message).await
    }

    /// Serves invocations with `service` until the Runtime API fails for
    /// good, as [`run`] does: any `tower::Service` of requests, one that
    /// borrows from `main` or is not `Clone` among them. On Managed
    /// Instances its invocations are served together on the calling task,
    /// each holding the service for `ready` and `call` only: as many at once
    /// as Lambda sends, on one thread. [`Lambda::serve_concurrent`] spreads
    /// a `Clone + Send + 'static` service over the runtime's threads.
    ///
    /// When one worker cannot reach the Runtime API any more (after about
    /// 0.8 s of retries), every worker stops taking invocations, those in
    /// flight are finished and answered (each by its deadline), and the
    /// cause is returned: the process should then exit non-zero, and Lambda
    /// replaces the environment.
    ///
    /// With one worker (classic Lambda), the work spawned behind each
    /// answer with [`crate::spawn`] is awaited after the answer and before
    /// the next `next`, within the invocation's deadline: the environment
    /// is frozen once the runtime asks for the next invocation, so that
    /// work ends now rather than time out at the next thaw. With several
    /// (Managed Instances) nothing is frozen and it is not awaited.
    pub async fn serve<S, R, E>(self, service: S) -> Result<(), Error>
    where
        S: Service<Request, Response = R, Error = E>,
        R: IntoResponse,
        E: Debug + Into<Diagnostic>,
    {
        let service = Mutex::new(service);
        self.on_one_task(("run", "run_concurrent"), || Lent(&service))
            .await
    }

    /// Serves invocations with `service` as [`Lambda::serve`] does, each
    /// response streamed as it is made: its status and headers first, then
    /// its body's frames as the body yields them, with backpressure.
    ///
    /// A body error, a panic in the body, or a body still running shortly
    /// before the invocation's deadline ends that stream with Lambda's
    /// error trailers; the Runtime API closing the stream ends it too.
    /// Each costs that invocation alone, and the worker serves on.
    pub async fn serve_streaming<S, B, E>(self, service: S) -> Result<(), Error>
    where
        S: Service<Request, Response = Response<B>, Error = E>,
        E: Debug + Into<Diagnostic>,
        B: HttpBody + Unpin,
        B::Data: Into<Bytes>,
        B::Error: Into<Error>,
    {
        let service = Mutex::new(service);
        let names = (
            "run_with_streaming_response",
            "run_with_streaming_response_concurrent",
        );
        self.on_one_task(names, || Streaming(Lent(&service))).await
    }

    /// Serves invocations with `service` as [`Lambda::serve`] does, each
    /// worker a task of its own with its own clone of the service: on
    /// Managed Instances, a multi-threaded runtime spreads them over its
    /// threads. One on classic Lambda, so that an invocation's polls start
    /// at its worker rather than pass through this function.
    pub async fn serve_concurrent<S, R, E>(self, service: S) -> Result<(), Error>
    where
        S: Service<Request, Response = R, Error = E> + Clone + Send + 'static,
        S::Future: Send + 'static,
        R: IntoResponse + Send + 'static,
        E: Debug + Into<Diagnostic> + Send + 'static,
    {
        self.on_tasks(|shared, settle, stopped| worker::serve(shared, Own(service.clone()), settle, stopped))
            .await
    }

    /// Serves invocations with `service` as [`Lambda::serve_concurrent`]
    /// does, each response streamed as [`Lambda::serve_streaming`] streams
    /// it.
    pub async fn serve_streaming_concurrent<S, B, E>(self, service: S) -> Result<(), Error>
    where
        S: Service<Request, Response = Response<B>, Error = E> + Clone + Send + 'static,
        S::Future: Send + 'static,
        E: Debug + Into<Diagnostic> + Send + 'static,
        B: HttpBody + Unpin + Send + 'static,
        B::Data: Into<Bytes> + Send,
        B::Error: Into<Error> + Send + Debug,
    {
        self.on_tasks(|shared, settle, stopped| {
            worker::serve(shared, Streaming(Own(service.clone())), settle, stopped)
        })
        .await
    }

    /// Serves with a worker per invocation at once, each calling the
    /// service through `caller()`, polled together on the calling task;
    /// `names` are the entry point and its concurrent twin, for the word on
    /// Managed Instances.
    async fn on_one_task<C: Answer>(self, names: (&str, &str), caller: impl Fn() -> C) -> Result<(), Error> {
        let (shared, concurrency) = self.into_shared();
        on_one_thread(concurrency, names);
        let (stop, stopped) = watch::channel(false);
        let settle = !concurrency.is_concurrent();
        let mut workers: FuturesUnordered<_> = (0..concurrency.get())
            .map(|_| worker::serve(shared.clone(), caller(), settle, stopped.clone()))
            .collect();
        tracing::debug!(workers = workers.len(), "serving invocations on one task");
        let mut ended = Ended::default();
        let mut shutdown = pin!(shutdown::requested());
        loop {
            tokio::select! {
                result = workers.next() => match result {
                    Some(result) => ended.record(result, &stop),
                    None => break,
                },
                () = &mut shutdown, if !*stop.borrow() => { stop.send_replace(true); }
            }
        }
        ended.cause().await
    }

    /// Serves with a worker per invocation at once, each a task of its own:
    /// `worker(shared, settle, stopped)` makes it (a concrete future, so
    /// that it is known to be `Send`).
    async fn on_tasks<F>(
        self,
        worker: impl Fn(Arc<Shared>, bool, watch::Receiver<bool>) -> F,
    ) -> Result<(), Error>
    where
        F: Future<Output = Result<(), Error>> + Send + 'static,
    {
        let (shared, concurrency) = self.into_shared();
        let (stop, stopped) = watch::channel(false);
        let settle = !concurrency.is_concurrent();
        let mut workers = JoinSet::new();
        for _ in 0..concurrency.get() {
            workers.spawn(worker(shared.clone(), settle, stopped.clone()));
        }
        tracing::debug!(workers = workers.len(), "serving invocations");
        let mut ended = Ended::default();
        let mut shutdown = pin!(shutdown::requested());
        loop {
            tokio::select! {
                result = workers.join_next() => match result {
                    // Everything a worker runs for an invocation is inside
                    // its guard; a join error is the loop's own code failing.
                    Some(result) => ended.record(
                        result.unwrap_or_else(|join| Err(format!("a worker stopped: {join}").into())),
                        &stop,
                    ),
                    None => break,
                },
                () = &mut shutdown, if !*stop.borrow() => { stop.send_replace(true); }
            }
        }
        ended.cause().await
    }

    fn into_shared(self) -> (Arc<Shared>, Concurrency) {
        let Self {
            api,
            function,
            concurrency,
            stage,
            ..
        } = self;
        let mut context = Context::default();
        context.env_config = Arc::new(function);
        let shared = Arc::new(Shared {
            api,
            context,
            stage,
            cold: AtomicBool::new(true),
        });
        (shared, concurrency)
    }
}

/// On Managed Instances with several vCPUs, a word on the entry point
/// that uses them.
fn on_one_thread(concurrency: Concurrency, (this, concurrent): (&str, &str)) {
    let vcpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if concurrency.is_concurrent() && vcpus > 1 {
        tracing::info!(
            invocations = concurrency.get(),
            vcpus,
            "serving every invocation on one thread, as `{this}` serves a service that may borrow from `main`: `lambda_host::{concurrent}` spreads a `Clone + Send + 'static` service over the vCPUs"
        );
    }
}

/// How the workers ended: the first cause, on which the others were told
/// to stop.
#[derive(Default)]
struct Ended {
    first: Option<Error>,
}

impl Ended {
    fn record(&mut self, result: Result<(), Error>, stop: &watch::Sender<bool>) {
        if let Err(cause) = result
            && self.first.is_none()
        {
            tracing::error!(cause = %cause, "a worker cannot serve on; finishing the invocations in flight, then exiting");
            stop.send_replace(true);
            self.first = Some(cause);
        }
    }

    /// The first cause; none when a graceful shutdown stopped the workers,
    /// whose handler ends the process once its hook has run.
    async fn cause(self) -> Result<(), Error> {
        match self.first {
            Some(cause) => Err(cause),
            None if shutdown::stopping() => std::future::pending().await,
            None => Err("no worker was started".into()),
        }
    }
}

/// Serves the function's `service` on Lambda until the Runtime API fails
/// for good: what `lambda_http::run(service).await` does, with the same
/// bounds, in a function's own `#[tokio::main]`, with the host's
/// guarantees.
///
/// It reads Lambda's environment, installs the host's log subscriber
/// unless the function installed one first, starts the traces when
/// Lambda asks for them, and serves one invocation at a time, or
/// `AWS_LAMBDA_MAX_CONCURRENCY` at once on Managed Instances. The service
/// may borrow from `main` and need not be `Clone`: on Managed Instances
/// its invocations run together on the calling task, on one thread
/// ([`Lambda::serve`]); [`run_concurrent`] spreads a `Clone + Send +
/// 'static` service over the vCPUs. The service's response may be
/// anything `lambda_http` turns into one (an axum `Response` included);
/// an `Err` fails that invocation, as it does under `lambda_http`.
///
/// ```no_run
/// use lambda_http::{Body, Error, Request, Response, service_fn};
///
/// #[tokio::main]
/// async fn main() -> Result<(), Error> {
///     let greeting = String::from("hello from");
///     lambda_host::run(service_fn(|request: Request| {
///         let greeting = &greeting;
///         async move {
///             let path = request.uri().path();
///             Ok::<_, Error>(Response::new(Body::from(format!("{greeting} {path}"))))
///         }
///     }))
///     .await
/// }
/// ```
pub async fn run<S, R, E>(service: S) -> Result<(), Error>
where
    S: Service<Request, Response = R, Error = E>,
    R: IntoResponse,
    E: Debug + Into<Diagnostic>,
{
    Box::pin(prepare()?.serve(service)).await
}

/// Serves the function's `service` on Lambda as [`run`] does, with
/// `AWS_LAMBDA_MAX_CONCURRENCY` workers on Managed Instances, each a task
/// with its own clone of the service, spread over the runtime's threads:
/// what `lambda_http::run_concurrent` does, for any response `lambda_http`
/// converts (an axum `Router` among them, whose response is not `Sync`).
pub async fn run_concurrent<S, R, E>(service: S) -> Result<(), Error>
where
    S: Service<Request, Response = R, Error = E> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: IntoResponse + Send + 'static,
    E: Debug + Into<Diagnostic> + Send + 'static,
{
    Box::pin(prepare()?.serve_concurrent(service)).await
}

/// Serves the function's `service` on Lambda as [`run`] does, each
/// response streamed as it is made: what
/// `lambda_http::run_with_streaming_response(service).await` does, with
/// the same bounds, for a function URL in `RESPONSE_STREAM` mode or an API
/// Gateway REST API in its `STREAM` mode. Its status and headers go first,
/// then the body's frames as the body yields them, with backpressure.
///
/// A body error, a panic in the body, or a body still running shortly
/// before the invocation's deadline ends that stream with Lambda's error
/// trailers (`Lambda-Runtime-Function-Error-Type` and `-Body`); each costs
/// that invocation alone, and the function serves on. On Managed
/// Instances, `AWS_LAMBDA_MAX_CONCURRENCY` streams run at once.
///
/// ```no_run
/// use lambda_http::{Error, Request, Response, service_fn};
///
/// #[tokio::main]
/// async fn main() -> Result<(), Error> {
///     lambda_host::run_with_streaming_response(service_fn(|_request: Request| async {
///         let body = http_body_util::Full::new(hyper::body::Bytes::from("streamed"));
///         Ok::<_, Error>(Response::new(body))
///     }))
///     .await
/// }
/// ```
pub async fn run_with_streaming_response<'a, S, B, E>(service: S) -> Result<(), Error>
where
    S: Service<Request, Response = Response<B>, Error = E>,
    S::Future: Send + 'a,
    E: Debug + Into<Diagnostic>,
    B: HttpBody + Unpin + Send + 'static,
    B::Data: Into<Bytes> + Send,
    B::Error: Into<Error> + Send + Debug,
{
    Box::pin(prepare()?.serve_streaming(service)).await
}

/// Serves the function's `service` as [`run_with_streaming_response`]
/// does, with `AWS_LAMBDA_MAX_CONCURRENCY` workers on Managed Instances,
/// each a task with its own clone of the service: what
/// `lambda_http::run_with_streaming_response_concurrent` does.
pub async fn run_with_streaming_response_concurrent<S, B, E>(service: S) -> Result<(), Error>
where
    S: Service<Request, Response = Response<B>, Error = E> + Clone + Send + 'static,
    S::Future: Send + 'static,
    E: Debug + Into<Diagnostic> + Send + 'static,
    B: HttpBody + Unpin + Send + 'static,
    B::Data: Into<Bytes> + Send,
    B::Error: Into<Error> + Send + Debug,
{
    Box::pin(prepare()?.serve_streaming_concurrent(service)).await
}

/// What [`run`] and [`run_concurrent`] do before they serve: Lambda's
/// environment, the logs, the traces, and what a function author should
/// know of the build and the subscriber.
fn prepare() -> Result<Lambda, StartError> {
    let env = LambdaEnv::read();
    logging::init(&env);
    start_tracing(&env);
    if env.trace.daemon_address.is_some() && !trace::recording() {
        tracing::warn!(
            "the function installed its own tracing subscriber, without the host's trace layer: its spans are not traced. Replace `lambda_http::tracing::init_default_subscriber()` with `lambda_host::logging::init_default_subscriber()`, or add `lambda_host::trace::layer()` to the subscriber"
        );
    }
    warn_if_panics_abort();
    Lambda::of(&env)
}

/// A build whose panics abort loses the process, not one invocation, to a
/// panic; `cargo lambda build` makes such a build when the profile says
/// nothing.
fn warn_if_panics_abort() {
    if cfg!(panic = "abort") {
        tracing::warn!(
            "this build aborts on a panic, so a panic ends the process and every invocation in flight: set `panic = \"unwind\"` in Cargo.toml's `[profile.release]` (`cargo lambda build` sets abort when the profile says nothing)"
        );
    }
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
    // The function's init and the loop, as one future on that runtime.
    runtime.block_on(Box::pin(async move {
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
        // Boxed for the reason the worker boxes the service's future: the
        // init's temporaries stay out of this frame.
        let service = match Box::pin(init).await {
            Ok(service) => service,
            Err(err) => return refuse_to_start(Some(&lambda), &err).await,
        };
        warn_if_panics_abort();
        match Box::pin(lambda.serve_concurrent(service)).await {
            // As a `main` that returns the error writes it.
            Err(err) => eprintln!("Error: {err:?}"),
            Ok(()) => eprintln!("Error: the invocation loop ended"),
        }
        ExitCode::FAILURE
    }))
}

/// The tracer, when Lambda runs the X-Ray daemon, recording `tracing`
/// spans at the logs' level.
fn start_tracing(env: &LambdaEnv) {
    trace::init(&trace::TraceEnv {
        log_level: Some(logging::max_level(env)),
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
