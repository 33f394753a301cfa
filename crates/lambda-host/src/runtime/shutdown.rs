//! Graceful shutdown, for a function that opts in with
//! [`spawn_graceful_shutdown_handler`]: Lambda sends the runtime SIGTERM
//! before it shuts an execution environment down only when an extension is
//! registered, so the handler registers one that takes no events (as
//! `lambda_runtime`'s does). On SIGTERM (or SIGINT, under `cargo lambda
//! watch`) every worker stops taking invocations, those in flight are
//! answered, the work spawned behind them ([`crate::spawn`]) ends, and so
//! their spans are sent; then the function's hook runs and the process
//! exits 0.
//!
//! The count of invocations in flight is kept whether or not a function
//! opts in: two atomic operations per invocation. The handler itself is
//! behind the `graceful-shutdown` feature, as `lambda_runtime`'s is.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(feature = "graceful-shutdown")]
use std::time::Duration;

#[cfg(feature = "graceful-shutdown")]
use lambda_http::tracing;
#[cfg(feature = "graceful-shutdown")]
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Notify;

#[cfg(feature = "graceful-shutdown")]
use super::RuntimeApi;
#[cfg(feature = "graceful-shutdown")]
use super::behind::settled;
#[cfg(feature = "graceful-shutdown")]
use crate::env::{Concurrency, LambdaEnv};

#[cfg(feature = "graceful-shutdown")]
/// Lambda gives a runtime with an internal extension 500 ms from SIGTERM
/// to SIGKILL; the hook and the exit get what is left after this.
const DRAIN_AT_MOST: Duration = Duration::from_millis(400);

#[cfg(feature = "graceful-shutdown")]
/// The name the extension registers under: unique within a function.
const EXTENSION_NAME: &str = "lambda-host-graceful-shutdown";

static STOPPING: AtomicBool = AtomicBool::new(false);
static STOP: Notify = Notify::const_new();
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
#[cfg(feature = "graceful-shutdown")]
static IDLE: Notify = Notify::const_new();

/// Registers an extension with Lambda, so that Lambda sends SIGTERM before
/// it shuts this execution environment down, and spawns the task that then
/// drains the invocation loop, runs `shutdown_hook` and exits 0; what
/// `lambda_runtime::spawn_graceful_shutdown_handler` does, called the same
/// way, before [`crate::run`] (or [`crate::run_concurrent`]):
///
/// ```no_run
/// # async fn main_() -> Result<(), lambda_http::Error> {
/// # let service = lambda_http::service_fn(|_: lambda_http::Request| async { Ok::<_, lambda_http::Error>("ok") });
/// lambda_host::spawn_graceful_shutdown_handler(|| async {
///     // Close connections, flush what the function buffers.
/// })
/// .await;
/// lambda_host::run(service).await
/// # }
/// ```
///
/// No invocation in flight at SIGTERM is lost: each is answered first, as
/// long as it ends within Lambda's shutdown window (the handler waits
/// 400 ms at most before it runs the hook). It costs the cold start one
/// Runtime API call. Without an extension registered (outside Lambda, or
/// when the call fails, which is logged) the signals are still handled.
#[cfg(feature = "graceful-shutdown")]
pub async fn spawn_graceful_shutdown_handler<H, F>(shutdown_hook: H)
where
    H: FnOnce() -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let registered = match LambdaEnv::read().runtime_api {
        Ok(endpoint) => {
            let api = RuntimeApi::new(endpoint, Concurrency::ONE);
            match api.register_extension(EXTENSION_NAME).await {
                Ok(id) => Some((api, id)),
                Err(err) => {
                    tracing::error!(cause = %err, "could not register the extension that has Lambda send SIGTERM: shutdown will not be graceful");
                    None
                }
            }
        }
        Err(err) => {
            tracing::debug!(cause = %err, "no Runtime API to register the shutdown extension with");
            None
        }
    };
    let (terminate, interrupt) = match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(terminate), Ok(interrupt)) => (terminate, interrupt),
        (Err(err), _) | (_, Err(err)) => {
            tracing::error!(cause = %err, "cannot listen for SIGTERM: shutdown will not be graceful");
            return;
        }
    };
    if let Some((api, id)) = registered {
        // An extension that takes no events waits in `next` for good; the
        // call tells Lambda it is ready.
        tokio::spawn(async move {
            if let Err(err) = api.extension_next(&id).await {
                tracing::debug!(cause = %err, "the shutdown extension's wait ended");
            }
        });
    }
    tokio::spawn(async move {
        let (mut terminate, mut interrupt) = (terminate, interrupt);
        let signal = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        tracing::info!(signal, "shutting down: answering the invocations in flight");
        STOPPING.store(true, Ordering::Release);
        STOP.notify_waiters();
        if tokio::time::timeout(DRAIN_AT_MOST, drained()).await.is_err() {
            tracing::warn!("invocations or work behind them were still running at shutdown");
        }
        shutdown_hook().await;
        tracing::info!("shut down");
        std::process::exit(0);
    });
}

/// Resolves once a shutdown has begun.
pub(super) async fn requested() {
    loop {
        let stop = STOP.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if STOPPING.load(Ordering::Acquire) {
            return;
        }
        stop.await;
    }
}

/// Whether a shutdown has begun.
pub(super) fn stopping() -> bool {
    STOPPING.load(Ordering::Acquire)
}

/// Once every invocation in flight is answered, and the work behind them
/// has ended.
#[cfg(feature = "graceful-shutdown")]
async fn drained() {
    loop {
        let idle = IDLE.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        if IN_FLIGHT.load(Ordering::Acquire) == 0 {
            break;
        }
        idle.await;
    }
    settled().await;
}

/// One invocation, from `next` to its answer, counted until dropped.
pub(super) struct InFlight;

impl InFlight {
    pub(super) fn new() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let _last = IN_FLIGHT.fetch_sub(1, Ordering::AcqRel) == 1;
        #[cfg(feature = "graceful-shutdown")]
        if _last && stopping() {
            IDLE.notify_waiters();
        }
    }
}
