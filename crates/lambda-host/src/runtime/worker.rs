//! One worker: takes an invocation, runs the service inside a panic guard,
//! its trace scope and its deadline, and answers; on classic Lambda it then
//! waits for the work the request started behind its answer
//! ([`crate::spawn`], `behind.rs`) before it takes the next invocation.
//!
//! A worker calls the function's service through [`Call`]: its own clone
//! ([`Own`], a task per worker, for `run_concurrent`), or one service lent
//! to every worker of a task in turn ([`Lent`], for `run`, whose service
//! may borrow from `main` and need not be `Clone`). What it does with the
//! service's answer is the caller's [`Answer`]: the front door's JSON,
//! posted whole; or, through [`Streaming`], the response streamed
//! (`stream.rs`).

use std::any::Any;
use std::borrow::Cow;
use std::fmt::Debug;
use std::panic::AssertUnwindSafe;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use futures_util::FutureExt;
use std::time::Instant;

use hyper::body::{Body as HttpBody, Bytes};
use lambda_http::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use lambda_http::lambda_runtime::{Context, Diagnostic};
use lambda_http::tower::{Service, ServiceExt};
use lambda_http::tracing;
use lambda_http::{Body, Error, IntoResponse, Request, RequestExt, Response};
use tokio::sync::{Mutex, watch};
use tokio::time::Sleep;

use super::api::{
    CLIENT_CONTEXT, COGNITO_IDENTITY, DEADLINE_MS, INVOCATION_ID, INVOKED_FUNCTION_ARN, REQUEST_ID,
    RuntimeApi, TENANT_ID, TRACE_ID,
};
use super::behind::{nothing_pending, settled};
use super::{shutdown, stream};
use crate::deadline::{self, BACKSTOP_MARGIN, RESPONSE_MARGIN};
use crate::envelope::{self, ApiPath, RequestOrigin, Stage};
use crate::trace;
use crate::words::{HIGHS, ONES, below};

const X_AMZN_TRACE_ID: HeaderName = HeaderName::from_static("x-amzn-trace-id");

/// What every worker of a process shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) api: RuntimeApi,
    /// What every invocation's `Context` starts from: the function's
    /// settings, shared, and nothing of an invocation.
    pub(super) context: Context,
    pub(super) stage: Stage,
    /// Set until the process's first invocation is served: its cold start.
    pub(super) cold: AtomicBool,
}

/// How a worker calls the function's service.
pub(super) trait Call {
    /// The service's response.
    type Response;
    /// The service's error, which fails the invocation.
    type Error: Debug + Into<Diagnostic>;

    /// `ready`, then `call`: the service's answer to `request`.
    fn call(&mut self, request: Request) -> impl Future<Output = Result<Self::Response, Self::Error>>;
}

/// What a worker does with the service's answer.
pub(super) trait Answer: Call {
    /// The answer for the Runtime API: the front door's JSON to post, or
    /// posted already (streamed); or why there is none.
    fn answer(
        answering: &Answering<'_>,
        response: Self::Response,
    ) -> impl Future<Output = Result<Answered, Diagnostic>>;
}

/// What a worker knows of an invocation once its service has answered.
pub(super) struct Answering<'a> {
    shared: &'a Shared,
    request_id: &'a str,
    /// `Lambda-Runtime-Invocation-Id`, which the answer carries back.
    invocation_id: Option<&'a HeaderValue>,
    origin: RequestOrigin,
    /// What the SERVER span says of the request, when it is sent.
    server: Option<&'a (Method, Option<ApiPath>, Cow<'a, str>)>,
    /// The loop's cut, [`BACKSTOP_MARGIN`] before the deadline.
    cut: Option<Instant>,
}

impl Answering<'_> {
    /// Writes the SERVER span, when it is sent.
    fn server_answer(
        &self,
        status: StatusCode,
        details: Option<&trace::SpanDetails>,
        failure: Option<&Diagnostic>,
    ) {
        let cold_start = self.shared.cold.swap(false, Ordering::Relaxed);
        if let Some((method, path, function_arn)) = self.server {
            trace::server_answer(&trace::ServerAnswer {
                status: status.as_u16(),
                method: method.as_str(),
                path: path.as_ref().map_or("/", ApiPath::as_str),
                invocation_id: self.request_id,
                function_arn: Some(function_arn),
                cold_start,
                details,
                failure: failure.map(|failure| (failure.error_type.as_str(), failure.error_message.as_str())),
            });
        }
    }

    /// The service's answer, converted by `lambda_http`'s `IntoResponse`
    /// before the cut (an axum body read to its end), as the front door's
    /// JSON.
    async fn converted(
        &self,
        mut respond: impl Future<Output = Response<Body>> + Unpin,
    ) -> Result<Answered, Diagnostic> {
        // Nearly always ready at once: then no timer, and no room for one
        // in this future, which the invocation's holds.
        let response = match (&mut respond).now_or_never() {
            Some(response) => response,
            None => Box::pin(deadline::until(self.cut, respond))
                .await
                .ok_or_else(|| self.deadline_exceeded())?,
        };
        self.whole(response)
    }

    /// The service's answer as the front door's JSON; an error when that
    /// JSON cannot carry it.
    fn whole(&self, mut response: Response<Body>) -> Result<Answered, Diagnostic> {
        let status = response.status();
        let details = response.extensions_mut().remove::<trace::SpanDetails>();
        match envelope::encode(self.origin, response) {
            Ok(json) => {
                self.server_answer(status, details.as_ref(), None);
                Ok(Answered::Whole(json))
            }
            Err(invalid) => {
                let diagnostic = failure(self.request_id, "Runtime.InvalidResponse", invalid.to_string());
                self.server_answer(status, details.as_ref(), Some(&diagnostic));
                Err(diagnostic)
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn deadline_exceeded(&self) -> Diagnostic {
        failure(
            self.request_id,
            "Runtime.DeadlineExceeded",
            "the service had not answered shortly before the invocation's deadline".to_owned(),
        )
    }
}

/// The answer of an invocation whose service answered.
pub(super) enum Answered {
    /// The front door's JSON, for the loop to post.
    Whole(Vec<u8>),
    /// Streamed to the Runtime API already.
    Streamed,
}

/// A worker's own service.
pub(super) struct Own<S>(pub(super) S);

impl<S, R, E> Call for Own<S>
where
    S: Service<Request, Response = R, Error = E>,
    E: Debug + Into<Diagnostic>,
{
    type Response = R;
    type Error = E;

    async fn call(&mut self, request: Request) -> Result<R, E> {
        self.0.ready().await?.call(request).await
    }
}

impl<S, R, E> Answer for Own<S>
where
    S: Service<Request, Response = R, Error = E>,
    R: IntoResponse + 'static,
    E: Debug + Into<Diagnostic>,
{
    // Without a future of its own for a response that is a `Response<Body>`
    // already: the invocation's boxed future holds this one's while it
    // runs, which for the usual answer is only its response.
    async fn answer(answering: &Answering<'_>, response: R) -> Result<Answered, Diagnostic> {
        let respond = match as_body(response) {
            Ok(response) => return answering.whole(response),
            Err(response) => response.into_response(),
        };
        answering.converted(respond).await
    }
}

/// One service shared by the workers of a task: each holds it for `ready`
/// and `call` only, so that the futures it returns run together. The lock
/// is a queue: a service not ready holds back the others, as it would a
/// `tower` caller.
pub(super) struct Lent<'s, S>(pub(super) &'s Mutex<S>);

impl<S, R, E> Call for Lent<'_, S>
where
    S: Service<Request, Response = R, Error = E>,
    E: Debug + Into<Diagnostic>,
{
    type Response = R;
    type Error = E;

    // Not an `async fn`, which would keep a second copy of the request
    // beside the argument while the lock is awaited: the invocation's boxed
    // future holds this one.
    fn call(&mut self, request: Request) -> impl Future<Output = Result<R, E>> {
        let lent = self.0;
        async move {
            let called = {
                let mut service = lent.lock().await;
                service.ready().await?.call(request)
            };
            called.await
        }
    }
}

impl<S, R, E> Answer for Lent<'_, S>
where
    S: Service<Request, Response = R, Error = E>,
    R: IntoResponse,
    E: Debug + Into<Diagnostic>,
{
    async fn answer(answering: &Answering<'_>, response: R) -> Result<Answered, Diagnostic> {
        answering.converted(response.into_response()).await
    }
}

/// A service whose response is streamed, as
/// `lambda_http::run_with_streaming_response` streams it: any
/// `Response<B>` whose body is an `http_body::Body`.
pub(super) struct Streaming<C>(pub(super) C);

impl<C: Call> Call for Streaming<C> {
    type Response = C::Response;
    type Error = C::Error;

    fn call(&mut self, request: Request) -> impl Future<Output = Result<Self::Response, Self::Error>> {
        self.0.call(request)
    }
}

impl<C, B> Answer for Streaming<C>
where
    C: Call<Response = Response<B>>,
    B: HttpBody + Unpin,
    B::Data: Into<Bytes>,
    B::Error: Into<Error>,
{
    async fn answer(answering: &Answering<'_>, response: Response<B>) -> Result<Answered, Diagnostic> {
        let status = response.status();
        let (mut parts, body) = response.into_parts();
        let details = parts.extensions.remove::<trace::SpanDetails>();
        let response = Response::from_parts(parts, body);
        let ended = stream::answer(
            &answering.shared.api,
            answering.request_id,
            answering.invocation_id,
            response,
            answering.cut,
        )
        .await;
        // The SERVER span ends with the stream, an error if it was cut short.
        let failure = match &ended {
            stream::Ended::Failed(diagnostic) => Some(diagnostic),
            stream::Ended::Whole | stream::Ended::Lost => None,
        };
        answering.server_answer(status, details.as_ref(), failure);
        Ok(Answered::Streamed)
    }
}

/// One worker: `next`, the service, the answer, until a Runtime API call
/// fails for good (its cause) or another worker's did (`Ok`, once this
/// worker's invocation in flight, if any, is answered). With `settle`, the
/// work spawned behind each answer ([`crate::spawn`]) is awaited after it.
pub(super) async fn serve<C: Answer>(
    shared: Arc<Shared>,
    mut service: C,
    settle: bool,
    mut stopped: watch::Receiver<bool>,
) -> Result<(), Error> {
    let mut backstop = Backstop::default();
    loop {
        // Stopped (another worker failed for good, or a shutdown began):
        // no `next` is sent.
        if *stopped.borrow() {
            return Ok(());
        }
        // A worker parked in `next` stops waiting, too. Lambda hands out no
        // invocation once it has sent SIGTERM; one handed out in the very
        // instant another worker failed for good times out, as it would in
        // an environment that crashed, and Lambda's retries apply to it.
        let (headers, payload) = tokio::select! {
            biased;
            next = shared.api.next() => next?,
            _ = stopped.wait_for(|stopped| *stopped) => return Ok(()),
        };
        let _in_flight = shutdown::InFlight::new();
        let given = Given::read(&headers);
        // Without its id an invocation cannot even be answered: Lambda broke
        // its own contract, and a fresh environment is the way out.
        let Some(request_id) = given.request_id.and_then(text).filter(|id| !id.is_empty()) else {
            return Err("the Runtime API sent an invocation without a request id".into());
        };
        let trace_id = given.trace_id.map(lossy);
        let trace_header = trace_id.as_deref().map(trace::Header::read);
        let tenant_id = given.tenant_id.map(lossy);
        // Lines written while this invocation is served and answered carry
        // its ids, as its request line does (the trace id's root, the id
        // X-Ray shows). Opened inside the trace scope: spans under it are
        // children of the invocation's SERVER span, wherever they run.
        let open_span = || {
            tracing::info_span!(
                "invocation",
                request_id,
                xray_trace_id = trace_header.and_then(|header| header.root()),
                tenant_id = tenant_id.as_deref(),
            )
        };
        // Everything the invocation runs is inside the guard: a panic
        // anywhere fails this invocation, and the worker serves on. Its SDK
        // requests carry its trace header and, when sampled, it sends its
        // spans (`trace/`).
        let deadline_ms = given.deadline_ms.and_then(deadline_ms);
        // The loop's cut, for the service and for the work behind it.
        let cut = deadline_ms.and_then(|ms| deadline::before(ms, BACKSTOP_MARGIN));
        let invocation = trace::scope(trace_header, async {
            let span = open_span();
            let at = Deadline { ms: deadline_ms, cut };
            let invoked = pin!(Some(invoke(
                &shared,
                &given,
                request_id,
                at,
                payload,
                &mut service,
                &mut backstop,
            )));
            let answer = in_span(&span, invoked).await;
            (answer, span)
        });
        let (answer, span) = AssertUnwindSafe(invocation)
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| panicked(&open_span, request_id, panic.as_ref()));
        let invocation_id = given.invocation_id;
        // The answer, and the wait for the work behind it, in the span.
        let answered = pin!(Some(async {
            match answer {
                Ok(Answered::Streamed) => {}
                Ok(Answered::Whole(body)) => shared.api.answer(request_id, invocation_id, body).await?,
                Err(diagnostic) => shared.api.fail(request_id, invocation_id, &diagnostic).await?,
            }
            // Nearly always nothing is pending: then no timer.
            if settle && !nothing_pending() && deadline::until(cut, settled()).await.is_none() {
                tracing::warn!("work started behind the answer was still running at the deadline");
            }
            Ok::<_, Error>(())
        }));
        in_span(&span, answered).await?;
    }
}

/// An invocation that panicked: its error line, in a span of its own (the
/// one it ran in was dropped with it), and its diagnostic. Out of line:
/// the loop's future is large, and this is never run on a create.
#[cold]
#[inline(never)]
fn panicked(
    open_span: &dyn Fn() -> tracing::Span,
    request_id: &str,
    panic: &(dyn Any + Send),
) -> (Result<Answered, Diagnostic>, tracing::Span) {
    let span = open_span();
    let message = panic_message(panic);
    tracing::error!(parent: &span, request_id, error = %message, "invocation failed: it panicked");
    let diagnostic = Diagnostic {
        error_type: "Runtime.HandlerPanicked".to_owned(),
        error_message: format!("the invocation panicked: {message}"),
    };
    (Err(diagnostic), span)
}

/// Polls the future in `slot` in `span`, as `Instrument` does, but with
/// the span borrowed (a clone and its drop cost about 400 instructions)
/// and, once the future is done, dropped outside the span: the `async`
/// blocks run here do nothing when dropped done, and `Instrument` would
/// enter and leave the span once more for it (about 200). A future dropped
/// before it is done (a panic, a shutdown) is dropped in the span, as
/// `Instrument` drops it.
fn in_span<'a, F: Future>(
    span: &'a tracing::Span,
    slot: Pin<&'a mut Option<F>>,
) -> impl Future<Output = F::Output> + 'a {
    let mut running = Running { span, slot };
    std::future::poll_fn(move |cx| {
        let Some(future) = running.slot.as_mut().as_pin_mut() else {
            // Polled after it was done, which `.await` never does.
            return Poll::Pending;
        };
        let output = {
            let _entered = running.span.enter();
            std::task::ready!(future.poll(cx))
        };
        running.slot.set(None);
        Poll::Ready(output)
    })
}

/// A future [`in_span`] polls: dropped in its span unless it is done.
struct Running<'a, F> {
    span: &'a tracing::Span,
    slot: Pin<&'a mut Option<F>>,
}

impl<F> Drop for Running<'_, F> {
    fn drop(&mut self) {
        if self.slot.is_some() {
            let _entered = self.span.enter();
            self.slot.set(None);
        }
    }
}

/// One invocation: its answer, or why there is none.
async fn invoke<'h, C: Answer>(
    shared: &Shared,
    given: &Given<'h>,
    request_id: &str,
    deadline: Deadline,
    payload: Bytes,
    service: &mut C,
    backstop: &mut Backstop,
) -> Result<Answered, Diagnostic> {
    let failed = |error_type: &str, message: String| failure(request_id, error_type, message);
    // `Context::new` panics without a deadline; check it first.
    let Deadline {
        ms: Some(deadline_ms),
        cut,
    } = deadline
    else {
        return Err(failed(
            "Runtime.InvalidInvocation",
            "the Runtime API sent no valid deadline".to_owned(),
        ));
    };
    // In a block of its own: what is built here and borrowed would
    // otherwise stay in this function's future, past the await below, and
    // be copied with it each time it moves (a `Context` and two requests).
    let (request, origin, server) = {
        // The ARN as text, read once for the context and the SERVER span.
        let arn = given.invoked_function_arn.and_then(text);
        let context = context(&shared.context, request_id, deadline_ms, given, arn).map_err(|err| {
            failed(
                "Runtime.InvalidInvocation",
                format!("invalid invocation headers: {err}"),
            )
        })?;
        let decoded = envelope::decode_with(&payload, shared.stage)
            .map_err(|err| failed("UnsupportedEvent", err.to_string()))?;
        // The request holds copies of what it keeps; the event's bytes, a
        // slice of the Runtime API connection's read buffer, would
        // otherwise hold that buffer until the answer is posted.
        drop(payload);
        let mut request = decoded.request;
        // As `lambda_http` sets it, for code that forwards it downstream.
        if let Some(value) = x_amzn_trace_id(given.trace_id, context.xray_trace_id.as_deref()) {
            request.headers_mut().insert(X_AMZN_TRACE_ID, value);
        }
        let request = request.with_lambda_context(context);
        // What the SERVER span says of the request, kept before the
        // service takes it; only when the invocation's spans are sent.
        let server = trace::traced().then(|| {
            // The context's ARN, which is the header's unless `Context::new`
            // made it: borrowed then, not copied.
            let arn = match arn {
                Some(arn) => Cow::Borrowed(arn),
                _ => Cow::Owned(
                    request
                        .lambda_context_ref()
                        .map(|context| context.invoked_function_arn.clone())
                        .unwrap_or_default(),
                ),
            };
            let path = request.extensions().get::<ApiPath>().cloned();
            (request.method().clone(), path, arn)
        });
        (request, decoded.origin, server)
    };
    // The service keeps to the deadline by itself, or should; the cut is
    // for one that does not, so that its worker is not held.
    let answering = Answering {
        shared,
        request_id,
        invocation_id: given.invocation_id,
        origin,
        server: server.as_ref(),
        cut,
    };
    // Boxed: a service's future (the AWS SDK's inside it) is large, and
    // polled inline it would make every frame of the loop that large too
    // (docs/performance.md, "Smaller stack frames"); so is a streamed
    // answer, which holds the body. Written into the box once it is
    // allocated: `Box::pin` moves the future in whole, all of its (large)
    // size though only its captures are set (about 400 instructions).
    // What the host adds to the service's future is kept small (the
    // answer runs in the room the service's future leaves, and a
    // `Response<Body>` is answered without a future of its own), so that
    // a small service's box is one that glibc serves from its per-thread
    // cache, which takes nothing over 1,032 bytes.
    let answered = Box::into_pin(Box::write(Box::new_uninit(), async {
        let response = {
            // Pinned where it is: the cut takes a pointer to it, and the
            // (large) future is not moved again. Dropped once it is done, as
            // `.await` drops it, so that the answer's future takes its room.
            let mut called = pin!(service.call(request));
            backstop.until(cut, called.as_mut()).await
        };
        let response = response
            .ok_or_else(|| answering.deadline_exceeded())?
            .map_err(|err| {
                tracing::error!(request_id, error = ?err, "invocation failed: the service returned an error");
                err.into()
            })?;
        C::answer(&answering, response).await
    }));
    answered.await
}

/// An invocation that fails: its error line, and the diagnostic the
/// Runtime API is given for it. Out of line, as every failure is.
#[cold]
#[inline(never)]
fn failure(request_id: &str, error_type: &str, message: String) -> Diagnostic {
    tracing::error!(request_id, error = %message, "invocation failed");
    Diagnostic {
        error_type: error_type.to_owned(),
        error_message: message,
    }
}

/// The loop's cut of a worker's invocations: one timer, kept registered
/// with tokio's time driver from one invocation to the next, and moved
/// rather than registered and removed for each (about 600 instructions a
/// create). Moving it later costs an atomic store.
///
/// While the service runs it stands first at the handler's cut
/// ([`RESPONSE_MARGIN`] before the deadline, or before it when the deadline
/// is closer than that), then, if the service has not answered by then, at
/// the loop's. Held at the handler's cut while the worker waits for its
/// next invocation, it is earlier than the cuts of that invocation (the
/// handler's and the loop's), which are then registered without a wake-up:
/// tokio's driver wakes itself (a write to its eventfd, and another turn of
/// a worker thread) for every timer registered earlier than the earliest it
/// held when it last parked, and for every one when it held none.
#[derive(Default)]
struct Backstop(Option<Pin<Box<Sleep>>>);

impl Backstop {
    /// Runs `future` until `cut`, as [`deadline::until`] does: `None` if
    /// the cut came first.
    async fn until<F: Future + Unpin>(&mut self, cut: Option<Instant>, mut future: F) -> Option<F::Output> {
        let Some(cut) = cut.map(tokio::time::Instant::from_std) else {
            return Some(future.await);
        };
        // The handler's cut: the loop's moved by the difference of their
        // margins, unless the deadline is that close.
        let first = cut.checked_sub(RESPONSE_MARGIN - BACKSTOP_MARGIN).unwrap_or(cut);
        let sleep = match &mut self.0 {
            Some(sleep) => {
                sleep.as_mut().reset(first);
                sleep
            }
            None => {
                let sleep = self.0.insert(Box::pin(tokio::time::sleep_until(first)));
                // Registered now, before the service registers its own cut:
                // a `Sleep` is otherwise registered only when first polled.
                sleep.as_mut().reset(first);
                sleep
            }
        };
        let mut at_cut = false;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = Pin::new(&mut future).poll(cx) {
                return Poll::Ready(Some(output));
            }
            // Out of the task's budget, as `tokio::time::timeout` polls
            // its timer: a service that spends the budget at every poll is
            // still cut.
            while Pin::new(&mut tokio::task::unconstrained(sleep.as_mut()))
                .poll(cx)
                .is_ready()
            {
                if at_cut {
                    return Poll::Ready(None);
                }
                at_cut = true;
                sleep.as_mut().reset(cut);
            }
            Poll::Pending
        })
        .await
    }
}

/// The Runtime API's headers of one invocation, found in one pass over
/// its few: a lookup by name hashes the name, and an invocation made nine.
/// Each is the first value of its name, as `HeaderMap::get` gives it.
struct Given<'h> {
    all: &'h HeaderMap,
    request_id: Option<&'h HeaderValue>,
    deadline_ms: Option<&'h HeaderValue>,
    invoked_function_arn: Option<&'h HeaderValue>,
    trace_id: Option<&'h HeaderValue>,
    tenant_id: Option<&'h HeaderValue>,
    invocation_id: Option<&'h HeaderValue>,
    client_context: Option<&'h HeaderValue>,
    cognito_identity: Option<&'h HeaderValue>,
}

impl<'h> Given<'h> {
    fn read(all: &'h HeaderMap) -> Self {
        let mut given = Self {
            all,
            request_id: None,
            deadline_ms: None,
            invoked_function_arn: None,
            trace_id: None,
            tenant_id: None,
            invocation_id: None,
            client_context: None,
            cognito_identity: None,
        };
        for (name, value) in all {
            let slot = if name == REQUEST_ID {
                &mut given.request_id
            } else if name == DEADLINE_MS {
                &mut given.deadline_ms
            } else if name == INVOKED_FUNCTION_ARN {
                &mut given.invoked_function_arn
            } else if name == TRACE_ID {
                &mut given.trace_id
            } else if name == TENANT_ID {
                &mut given.tenant_id
            } else if name == INVOCATION_ID {
                &mut given.invocation_id
            } else if name == CLIENT_CONTEXT {
                &mut given.client_context
            } else if name == COGNITO_IDENTITY {
                &mut given.cognito_identity
            } else {
                continue;
            };
            slot.get_or_insert(value);
        }
        given
    }
}

/// A header's value as text, as `lambda_runtime` reads the trace and
/// tenant ids. Checked by `from_utf8` first, which reads ASCII a word at a
/// time where `from_utf8_lossy` takes a byte at a time (about 500
/// instructions for a trace header).
fn lossy(value: &HeaderValue) -> Cow<'_, str> {
    match std::str::from_utf8(value.as_bytes()) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(value.as_bytes()),
    }
}

/// The invocation's `Context`, as `Context::new` makes it from the same
/// headers, whose deadline is `deadline` (`Context::new` panics without
/// one). `Context::new` looks its headers up by strings, which `HeaderMap`
/// parses and checks each time (six lookups, about 4 K instructions an
/// invocation). What takes more than a copy (a client context or a Cognito
/// identity, JSON to read; a function ARN that is not visible ASCII, an
/// error) is left to `Context::new`.
/// `arn` is the function ARN's [`text`], if it is text.
fn context(
    template: &Context,
    request_id: &str,
    deadline: u64,
    given: &Given<'_>,
    arn: Option<&str>,
) -> Result<Context, Error> {
    let (Some(arn), None, None) = (arn, given.client_context, given.cognito_identity) else {
        return Context::new(request_id, template.env_config.clone(), given.all);
    };
    let mut context = template.clone();
    context.request_id = request_id.to_owned();
    context.deadline = deadline;
    context.invoked_function_arn = arn.to_owned();
    context.xray_trace_id = given.trace_id.map(|value| lossy(value).into_owned());
    context.tenant_id = given.tenant_id.map(|value| lossy(value).into_owned());
    Ok(context)
}

/// The request's `X-Amzn-Trace-Id`, as `lambda_http` makes it from the
/// context's trace id (`Lambda-Runtime-Trace-Id`, read lossily as UTF-8):
/// the Runtime API's value itself, shared rather than copied, when the id
/// is its bytes, as it is unless they are not UTF-8.
fn x_amzn_trace_id(given: Option<&HeaderValue>, trace_id: Option<&str>) -> Option<HeaderValue> {
    let trace_id = trace_id?;
    match given {
        Some(value) if value.as_bytes() == trace_id.as_bytes() => Some(value.clone()),
        _ => HeaderValue::from_str(trace_id).ok(),
    }
}

/// The service's answer as it is when it is a `Response<Body>` already (no
/// copy of its headers or body); any other goes through `lambda_http`'s own
/// conversion (an axum body is read to its end, as `lambda_http::run` reads
/// it).
fn as_body<R: 'static>(response: R) -> Result<Response<Body>, R> {
    let mut response = Some(response);
    if let Some(ready) = (&mut response as &mut dyn Any).downcast_mut::<Option<Response<Body>>>()
        && let Some(ready) = ready.take()
    {
        return Ok(ready);
    }
    match response {
        Some(response) => Err(response),
        // Taken above.
        None => Ok(Response::default()),
    }
}

/// What a panic said, when it said it with a string.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// An invocation's deadline, and the loop's cut [`BACKSTOP_MARGIN`] before
/// it.
#[derive(Clone, Copy)]
struct Deadline {
    /// `Lambda-Runtime-Deadline-Ms`, when it is a number.
    ms: Option<u64>,
    cut: Option<Instant>,
}

/// `Lambda-Runtime-Deadline-Ms`, when it is a number.
fn deadline_ms(value: &HeaderValue) -> Option<u64> {
    text(value)?.parse().ok()
}

/// A header's value as text when it is visible ASCII (tabs too), as
/// `HeaderValue::to_str` reads it, but checked eight bytes at a time where
/// `to_str` takes a byte at a time (about 1 K instructions an invocation
/// for its request id, deadline and ARN). A word with a byte out of the
/// plain range (a tab, or one refused) is left to `to_str`.
fn text(value: &HeaderValue) -> Option<&str> {
    // Flags where a byte of `word` is a control character, DEL or not
    // ASCII; never none when one is.
    let unusual = |word: u64| below(word, 0x20) | below(word ^ (ONES * 0x7f), 1) | (word & HIGHS);
    let bytes = value.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    let mut flags = 0;
    for chunk in &mut chunks {
        flags |= unusual(u64::from_le_bytes(<[u8; 8]>::try_from(chunk).unwrap_or_default()));
    }
    if !chunks.remainder().is_empty() {
        // The last eight bytes, overlapping those read; a shorter value
        // padded with spaces.
        let last = bytes.last_chunk::<8>().copied().unwrap_or_else(|| {
            let mut padded = [b' '; 8];
            for (to, from) in padded.iter_mut().zip(bytes) {
                *to = *from;
            }
            padded
        });
        flags |= unusual(u64::from_le_bytes(last));
    }
    if flags != 0 {
        return value.to_str().ok();
    }
    // ASCII, so UTF-8.
    std::str::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_runtime_apis_headers_are_each_the_first_value_of_their_name_as_get_gives_it() {
        let names = [
            REQUEST_ID,
            DEADLINE_MS,
            INVOKED_FUNCTION_ARN,
            TRACE_ID,
            TENANT_ID,
            INVOCATION_ID,
            CLIENT_CONTEXT,
            COGNITO_IDENTITY,
        ];
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        for (at, name) in names.iter().enumerate() {
            headers.append(name, HeaderValue::from_str(&format!("first {at}")).unwrap());
            headers.append(name, HeaderValue::from_str(&format!("second {at}")).unwrap());
        }
        let given = Given::read(&headers);
        let read = [
            given.request_id,
            given.deadline_ms,
            given.invoked_function_arn,
            given.trace_id,
            given.tenant_id,
            given.invocation_id,
            given.client_context,
            given.cognito_identity,
        ];
        for (name, value) in names.iter().zip(read) {
            assert_eq!(value, headers.get(name), "{name}");
        }
        let empty = HeaderMap::new();
        let none = Given::read(&empty);
        assert!(none.request_id.is_none() && none.deadline_ms.is_none() && none.invocation_id.is_none());
    }

    #[test]
    fn an_invocations_context_is_the_one_context_new_makes_from_its_headers() {
        let mut template = Context::default();
        template.env_config = Arc::new(lambda_http::lambda_runtime::Config {
            function_name: "plants".to_owned(),
            memory: 128,
            ..Default::default()
        });
        let arn = "arn:aws:lambda:us-east-1:123456789012:function:plants";
        let trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1";
        let headers_with = |pairs: &[(&str, &[u8])]| {
            let mut headers = HeaderMap::new();
            headers.insert(DEADLINE_MS, HeaderValue::from_static("1700000000000"));
            for (name, value) in pairs {
                headers.insert(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_bytes(value).unwrap(),
                );
            }
            headers
        };
        let cases = [
            headers_with(&[]),
            headers_with(&[("lambda-runtime-invoked-function-arn", arn.as_bytes())]),
            headers_with(&[
                ("lambda-runtime-invoked-function-arn", arn.as_bytes()),
                ("lambda-runtime-trace-id", trace.as_bytes()),
                ("lambda-runtime-aws-tenant-id", b"tenant-7"),
            ]),
            // Read lossily, as `Context::new` reads them.
            headers_with(&[
                ("lambda-runtime-invoked-function-arn", arn.as_bytes()),
                ("lambda-runtime-trace-id", b"Root=\xff"),
                ("lambda-runtime-aws-tenant-id", b"t\xe9"),
            ]),
            // Left to `Context::new`: a refused ARN, JSON to read.
            headers_with(&[("lambda-runtime-invoked-function-arn", b"arn\xff")]),
            headers_with(&[
                ("lambda-runtime-invoked-function-arn", arn.as_bytes()),
                ("lambda-runtime-client-context", br#"{"custom":{"k":"v"},"env":{},"client":{"installation_id":"","app_title":"","app_version_name":"","app_version_code":"","app_package_name":""}}"#),
            ]),
            headers_with(&[
                ("lambda-runtime-invoked-function-arn", arn.as_bytes()),
                ("lambda-runtime-cognito-identity", br#"{"cognito_identity_id":"i","cognito_identity_pool_id":"p"}"#),
            ]),
            headers_with(&[("lambda-runtime-client-context", b"not json")]),
        ];
        for headers in &cases {
            let given = Given::read(headers);
            let arn = given.invoked_function_arn.and_then(text);
            let ours =
                context(&template, "req-1", 1_700_000_000_000, &given, arn).map_err(|err| err.to_string());
            let theirs =
                Context::new("req-1", template.env_config.clone(), headers).map_err(|err| err.to_string());
            assert_eq!(ours, theirs, "for {headers:?}");
            if let Ok(ours) = ours {
                assert!(
                    Arc::ptr_eq(&ours.env_config, &template.env_config),
                    "the settings are shared, not copied"
                );
            }
        }
    }

    /// Between invocations the backstop stays registered at the handler's
    /// cut though never polled: on a paused clock, a runtime with nothing
    /// to do but wait for a thread advances its clock to the earliest timer
    /// it holds. Moved later, it stands at its new instant; while a service
    /// runs, it cuts at the loop's cut, not at the handler's.
    #[tokio::test(start_paused = true)]
    async fn the_backstop_waits_at_the_handlers_cut_and_cuts_at_the_loops() {
        let started = tokio::time::Instant::now();
        let wait_for_a_thread = || {
            let (done, waited) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                let _ = done.send(());
            });
            waited
        };
        let cut = |ms: u64| Some(started.into_std() + Duration::from_millis(ms));
        let at = |ms: u64| Duration::from_millis(ms)..Duration::from_millis(ms + 2);
        let handlers_cut =
            |ms: u64| ms - u64::try_from((RESPONSE_MARGIN - BACKSTOP_MARGIN).as_millis()).unwrap();
        let mut backstop = Backstop::default();

        assert_eq!(backstop.until(cut(10_000), std::future::ready(1)).await, Some(1));
        wait_for_a_thread().await.unwrap();
        assert!(
            at(handlers_cut(10_000)).contains(&started.elapsed()),
            "{:?}",
            started.elapsed()
        );

        assert_eq!(backstop.until(cut(30_000), std::future::ready(2)).await, Some(2));
        wait_for_a_thread().await.unwrap();
        assert!(
            at(handlers_cut(30_000)).contains(&started.elapsed()),
            "{:?}",
            started.elapsed()
        );

        // No deadline: nothing is cut, and the timer stays where it was.
        assert_eq!(backstop.until(None, std::future::ready(3)).await, Some(3));
        wait_for_a_thread().await.unwrap();
        assert!(
            at(handlers_cut(30_000)).contains(&started.elapsed()),
            "{:?}",
            started.elapsed()
        );

        // Past the handler's cut, before the loop's: answered.
        let answer = pin!(tokio::time::sleep_until(started + Duration::from_millis(59_950)));
        assert_eq!(backstop.until(cut(60_000), answer).await, Some(()));
        assert!(at(59_950).contains(&started.elapsed()), "{:?}", started.elapsed());

        // Never answered: cut at the loop's cut, and again at the next one.
        for ms in [90_000, 120_000] {
            let never = std::future::pending::<()>();
            assert_eq!(backstop.until(cut(ms), never).await, None);
            assert!(at(ms).contains(&started.elapsed()), "{:?}", started.elapsed());
        }
    }

    /// A service that spends the task's whole budget at every poll, as a
    /// loop over a busy channel does, is cut all the same: the backstop
    /// polls its timer outside the budget, which a spent budget would
    /// otherwise keep pending for ever.
    #[tokio::test]
    async fn a_service_that_spends_its_budget_at_every_poll_is_still_cut() {
        let spender = std::future::poll_fn(|cx| {
            loop {
                if pin!(tokio::task::consume_budget()).poll(cx).is_pending() {
                    return Poll::<()>::Pending;
                }
            }
        });
        let cut = Instant::now() + RESPONSE_MARGIN + Duration::from_millis(50);
        let mut backstop = Backstop::default();

        let cut_off =
            tokio::time::timeout(Duration::from_secs(10), backstop.until(Some(cut), pin!(spender))).await;

        assert_eq!(cut_off, Ok(None), "the spender was not cut");
        assert!(Instant::now() >= cut);
    }

    #[test]
    fn a_headers_text_is_the_one_to_str_reads() {
        let mut values = Vec::new();
        for len in 0..20 {
            for at in 0..len {
                for byte in [b'\t', b'\r', 0, 0x1f, b' ', b'~', 0x7f, 0x80, 0xff] {
                    let mut value = vec![b'a'; len];
                    if let Some(place) = value.get_mut(at) {
                        *place = byte;
                    }
                    values.push(value);
                }
                // UTF-8 that is not ASCII, which `to_str` refuses too.
                let mut value = vec![b'a'; len];
                value.splice(at..at, "é".bytes());
                values.push(value);
            }
            values.push(b"0123456789abcdefghij".get(..len).unwrap().to_vec());
        }
        for value in values {
            let Ok(header) = HeaderValue::from_bytes(&value) else {
                continue;
            };
            assert_eq!(text(&header), header.to_str().ok(), "{value:?}");
        }
    }

    #[test]
    fn x_amzn_trace_id_is_the_context_trace_id_whatever_the_runtime_apis_bytes() {
        for raw in [
            &b"Root=1-a;Sampled=0"[..],
            b"Root=1-\xe9;Sampled=0",
            b"Root=1-\xc3\xa9",
        ] {
            let given = HeaderValue::from_bytes(raw).unwrap();
            let trace_id = String::from_utf8_lossy(raw);
            assert_eq!(
                x_amzn_trace_id(Some(&given), Some(&trace_id)),
                HeaderValue::from_str(&trace_id).ok(),
                "{trace_id}"
            );
        }
        assert_eq!(x_amzn_trace_id(None, None), None);
    }
}
