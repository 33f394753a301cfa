//! The invocation loop: `GET …/invocation/next`, call the service, `POST
//! …/response` (or `…/error`), for the life of the process; on Lambda
//! Managed Instances (`AWS_LAMBDA_MAX_CONCURRENCY`), that many loops at
//! once, each answering its own invocation.
//!
//! Ours rather than `lambda_runtime`'s, whose loop writes the process
//! environment on every invocation and so grows a warm process without
//! bound (docs/upstream/lambda-runtime-trace-id-leak.md). A fault costs at
//! most the invocation it hits: a panic, an `Err`, an event that cannot be
//! decoded, a service still running at the deadline each fail that one invocation
//! and the worker serves on (`worker.rs`). A Runtime API that stays
//! unreachable stops every worker, and the process exits so that Lambda
//! replaces the environment; it never serves on with fewer workers than
//! it announced. docs/guarantees.md tells the whole story.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use lambda_http::http::Uri;
use lambda_http::lambda_runtime::{Config as FunctionConfig, Diagnostic};
use lambda_http::tower::Service;
use lambda_http::{Error, IntoResponse, Request, tracing};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub(crate) use self::api::RuntimeApi;
use self::worker::Shared;
pub use self::worker::spawn;
use crate::env::{Concurrency, LambdaEnv, StartError};
use crate::envelope::Stage;

mod api;
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
    /// test's own Runtime API, where [`crate::run`] would read Lambda's
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
    /// a `main` of its own, as [`crate::start`] does on a failed init.
    pub async fn init_error(&self, message: &str) -> Result<(), Error> {
        self.api.init_error(message).await
    }

    /// Serves invocations with `service` until the Runtime API fails for
    /// good. A single worker runs on the calling task; several are spawned
    /// as tasks, each with its own clone of the service, so that a
    /// multi-threaded runtime spreads them over its threads.
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
        S: Service<Request, Response = R, Error = E> + Clone + Send + 'static,
        S::Future: Send + 'static,
        R: IntoResponse + Send + 'static,
        E: Debug + Into<Diagnostic> + Send + 'static,
    {
        let Self {
            api,
            function,
            concurrency,
            stage,
            ..
        } = self;
        let shared = Arc::new(Shared {
            api,
            function: Arc::new(function),
            stage,
            cold: AtomicBool::new(true),
        });
        let (stop, stopped) = watch::channel(false);
        if !concurrency.is_concurrent() {
            return worker::serve(&shared, service, true, stopped).await;
        }
        let mut workers = JoinSet::new();
        for _ in 0..concurrency.get() {
            let (shared, service, stopped) = (shared.clone(), service.clone(), stopped.clone());
            workers.spawn(async move { worker::serve(&shared, service, false, stopped).await });
        }
        tracing::debug!(workers = concurrency.get(), "serving invocations concurrently");
        let mut first = None;
        while let Some(ended) = workers.join_next().await {
            let cause: Error = match ended {
                Ok(Ok(())) => continue,
                Ok(Err(cause)) => cause,
                // Everything a worker runs for an invocation is inside its
                // guard; this is the loop's own code failing.
                Err(join) => format!("a worker stopped: {join}").into(),
            };
            if first.is_none() {
                tracing::error!(cause = %cause, "a worker cannot serve on; finishing the invocations in flight, then exiting");
                stop.send_replace(true);
                first = Some(cause);
            }
        }
        Err(first.unwrap_or_else(|| "no worker was started".into()))
    }
}
