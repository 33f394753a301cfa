//! The invocation loop: `GET …/invocation/next`, run the handler, `POST
//! …/response` (or `…/error`), for the life of the process; on Lambda
//! Managed Instances (`AWS_LAMBDA_MAX_CONCURRENCY`), that many loops at
//! once, each answering its own invocation.
//!
//! Ours rather than `lambda_runtime`'s, whose loop writes the process
//! environment on every invocation and so grows a warm process without
//! bound (docs/upstream/lambda-runtime-trace-id-leak.md). A fault costs at
//! most the invocation it hits: a panic, an event that cannot be decoded,
//! a handler still running at the deadline each fail that one invocation
//! and the worker serves on (`worker.rs`). A Runtime API that stays
//! unreachable stops every worker, and the process exits so that Lambda
//! replaces the environment; it never serves on with fewer workers than
//! it announced. docs/guarantees.md tells the whole story.

use std::sync::Arc;

use lambda_http::http::Uri;
use lambda_http::lambda_runtime::Config as FunctionConfig;
use lambda_http::{Error, tracing};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub(crate) use self::api::RuntimeApi;
use crate::Handler;
use crate::env::{self, Concurrency, StartError};

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
}

impl Lambda {
    /// As Lambda (or `cargo lambda watch`) describes the environment:
    /// `AWS_LAMBDA_RUNTIME_API`, the function's name, memory and version,
    /// and `concurrency` (read with [`Concurrency::from_env`]).
    pub fn from_env(concurrency: Concurrency) -> Result<Self, StartError> {
        Ok(Self::new(env::runtime_api()?, env::function_config()?).with_concurrency(concurrency))
    }

    /// A Runtime API at `endpoint` (`http://host:port`, optionally with a
    /// base path), one invocation at a time: to serve a handler from an
    /// emulator or a test's own Runtime API, where [`crate::run`] would
    /// read Lambda's environment.
    pub fn new(endpoint: Uri, function: FunctionConfig) -> Self {
        Self {
            api: RuntimeApi::new(endpoint.clone(), Concurrency::ONE),
            endpoint,
            function,
            concurrency: Concurrency::ONE,
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
    /// a `main` of its own, as [`crate::run`] does on a failed init.
    pub async fn init_error(&self, message: &str) -> Result<(), Error> {
        self.api.init_error(message).await
    }

    /// Serves invocations with `handler` until the Runtime API fails for
    /// good. A single worker runs on the calling task; several are spawned
    /// as tasks, so that a multi-threaded runtime spreads them over its
    /// threads.
    ///
    /// When one worker cannot reach the Runtime API any more (after about
    /// 0.8 s of retries), every worker stops taking invocations, those in
    /// flight are finished and answered (each by its deadline), and the
    /// cause is returned: the process should then exit non-zero, and Lambda
    /// replaces the environment.
    ///
    /// With one worker (classic Lambda), [`Handler::settled`] is awaited
    /// after each answer and before the next `next`, within the
    /// invocation's deadline: the environment is frozen once the runtime
    /// asks for the next invocation, so work a request started behind its
    /// answer ends now rather than time out at the next thaw. With several
    /// (Managed Instances) nothing is frozen and it is not awaited.
    pub async fn serve<H: Handler>(self, handler: H) -> Result<(), Error> {
        let Self {
            api,
            function,
            concurrency,
            ..
        } = self;
        let (api, function, handler) = (Arc::new(api), Arc::new(function), Arc::new(handler));
        let (stop, stopped) = watch::channel(false);
        if !concurrency.is_concurrent() {
            return worker::serve(&api, &function, handler.as_ref(), true, stopped).await;
        }
        let mut workers = JoinSet::new();
        for _ in 0..concurrency.get() {
            let (api, function, handler, stopped) =
                (api.clone(), function.clone(), handler.clone(), stopped.clone());
            workers
                .spawn(async move { worker::serve(&api, &function, handler.as_ref(), false, stopped).await });
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
