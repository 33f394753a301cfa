//! The work a request starts behind its answer ([`spawn`]): counted while
//! it runs, so that a classic Lambda worker waits for it before it takes the
//! next invocation (`worker.rs`), and a graceful shutdown before it exits
//! (`shutdown.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};

use lambda_http::tracing::Instrument;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::trace;

/// Tasks spawned with [`spawn`] that have not ended, process-wide.
static PENDING: AtomicUsize = AtomicUsize::new(0);
static ENDED: Notify = Notify::const_new();

/// Spawns `future` as `tokio::spawn` does, for work a request starts
/// behind its answer:
/// - it stays in the `tracing` span it was spawned from, and in the
///   invocation: its spans are children of the span that spawned it, in
///   the same datagram while the invocation's spans have not gone, and its
///   AWS SDK requests carry the invocation's trace header;
/// - on classic Lambda, where the environment is frozen as soon as the
///   host asks for the next invocation, the host waits for it first (until
///   shortly before the invocation's deadline), so that it ends now rather
///   than time out at the next thaw. On Managed Instances nothing is frozen
///   and nothing waits.
///
/// # Panics
///
/// Outside a tokio runtime, as `tokio::spawn` does.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let pending = Pending::new();
    let invocation = trace::carry();
    tokio::spawn(
        async move {
            let _pending = pending;
            trace::carried(invocation, future).await
        }
        .in_current_span(),
    )
}

/// Whether every task of [`spawn`] has ended, as [`settled`] finds it.
pub(super) fn nothing_pending() -> bool {
    PENDING.load(Ordering::Acquire) == 0
}

/// Resolves once every task of [`spawn`] has ended: at once, nearly always.
pub(super) async fn settled() {
    loop {
        let ended = ENDED.notified();
        tokio::pin!(ended);
        // Registered before the count is read, so that a task ending in
        // between is not missed.
        ended.as_mut().enable();
        if nothing_pending() {
            return;
        }
        ended.await;
    }
}

/// One task counted in [`PENDING`] until it is dropped: when it ends, is
/// aborted or panics.
struct Pending;

impl Pending {
    fn new() -> Self {
        PENDING.fetch_add(1, Ordering::AcqRel);
        Self
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if PENDING.fetch_sub(1, Ordering::AcqRel) == 1 {
            ENDED.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn settled_waits_for_the_work_spawned_behind_and_no_longer() {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let work = spawn(async move {
            let _ = released.await;
        });
        let waiting = tokio::time::timeout(Duration::from_millis(50), settled()).await;
        assert!(waiting.is_err(), "settled while the work was still running");

        release.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), settled())
            .await
            .expect("settled once the work ended");
        work.await.unwrap();
    }

    #[tokio::test]
    async fn work_that_panics_still_counts_as_ended() {
        let work = spawn(async { panic!("a bug behind the answer") });
        assert!(work.await.is_err());
        tokio::time::timeout(Duration::from_secs(10), settled())
            .await
            .expect("settled after the panic");
    }
}
