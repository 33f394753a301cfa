//! A hand-written `tower::Service` with state of its own that is neither
//! `Clone` nor `'static`-bound: it numbers the requests it is called with.
//! `lambda_host::run` calls it as `lambda_http::run` does, `poll_ready` then
//! `call`, one caller at a time; on Lambda Managed Instances the futures it
//! returns run together.
//!
//! `?linger=MS` holds the answer that long, as a slow call downstream
//! would; the answer says how many answers were pending at once at most.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use lambda_http::{Body, Error, Request, RequestExt, Response, Service};
use serde_json::json;

struct Numbering {
    called: u64,
    pending: Arc<AtomicU64>,
    most_pending: Arc<AtomicU64>,
}

impl Service<Request> for Numbering {
    type Response = Response<Body>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.called += 1;
        let number = self.called;
        let linger_ms: u64 = request
            .query_string_parameters_ref()
            .and_then(|query| query.first("linger"))
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(0);
        let (pending, most_pending) = (self.pending.clone(), self.most_pending.clone());
        let now = pending.fetch_add(1, Ordering::SeqCst) + 1;
        most_pending.fetch_max(now, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(linger_ms)).await;
            pending.fetch_sub(1, Ordering::SeqCst);
            let answer = json!({
                "number": number,
                "most_pending": most_pending.load(Ordering::SeqCst),
            });
            Ok(Response::new(Body::from(answer.to_string())))
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_host::run(Numbering {
        called: 0,
        pending: Arc::default(),
        most_pending: Arc::default(),
    })
    .await
}
