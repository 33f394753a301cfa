//! plant-store's own parts of a warm create, each alone, for callgrind
//! (docs/performance.md, "The floor"): the event's decoding, the whole
//! handler on an in-memory store, and inside it the token check, the
//! body's parse, the log line with and without the EMF document, and the
//! answer's encoding; and the host's span of each invocation. Each part is
//! a function of its own called `ROUNDS` times on fresh events, so that
//! callgrind's inclusive count of that function over `ROUNDS` is the
//! part's instructions per create; what a warm process pays for the
//! DynamoDB call and the Runtime API is the floor's. Run it under
//! `valgrind --tool=callgrind` with its standard output to /dev/null and
//! read `callgrind_annotate --inclusive=yes`.

use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Duration;

use lambda_host::envelope::{self, Decoded, RequestOrigin};
use lambda_http::lambda_runtime::{Config, Context};
use lambda_http::tracing::subscriber::layer::SubscriberExt as _;
use lambda_http::tracing::subscriber::util::SubscriberInitExt;
use lambda_http::tracing::{Instrument, Span};
use lambda_http::{Body, Request, RequestExt, Response, http, tracing};
use plant_store::auth::Authenticator;
use plant_store::handler::App;
use plant_store::plant::NewPlant;
use plant_store::store::{Created, MemoryStore};
use plant_store::telemetry::{Invocation, Stdout, Telemetry, TelemetrySettings};

const ROUNDS: i64 = 1000;
const TOKEN: &str = "plant-store-dev-token";

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let _entered = runtime.enter();
    // As the host installs it for JSON logs.
    lambda_host::logging::json_subscriber(None, std::io::stdout)
        .with(lambda_host::trace::layer())
        .init();
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../events/create-http-api.json"
    ))
    .expect("events/create-http-api.json");
    let config = Arc::new(Config {
        function_name: "plant-store-bench".to_owned(),
        memory: 128,
        version: "$LATEST".to_owned(),
        log_stream: "bench".to_owned(),
        log_group: "/aws/lambda/plant-store-bench".to_owned(),
    });
    let authenticator = Authenticator::with_static_tokens(&[TOKEN]);
    let app = App::new(MemoryStore::default(), authenticator.clone())
        .with_telemetry(Telemetry::new(TelemetrySettings::default(), Stdout));
    let log_only = Telemetry::log_only();
    let metrics = Telemetry::new(TelemetrySettings::default(), Stdout);
    let body = r#"{"id":1,"name":"Monstera deliciosa","tag":"aroid"}"#;

    for round in 0..ROUNDS {
        let payload = event(&template, round);
        let request = with_context(decode(payload.as_bytes()).request, &config, round);
        authenticate(&authenticator, request.headers());
        parse(body.as_bytes());
        let request_id = format!("bench-{round}");
        let trace_id = trace_header(round);
        invocation_span(&request_id, &trace_id);
        let span = open_span(&request_id, &trace_id);
        let _in_span = span.enter();
        log_line(&log_only, &request);
        log_line_and_emf(&metrics, &request);
        let response = handle(&app, request);
        encode(response);
    }
}

/// The bench's event with a fresh id in its body and request id.
fn event(template: &str, round: i64) -> String {
    let id = 40_000_000 + round;
    let mut event: serde_json::Value = serde_json::from_str(template).expect("an event");
    event["body"] = format!(r#"{{"id":{id},"name":"Monstera deliciosa","tag":"aroid"}}"#).into();
    event["requestContext"]["requestId"] = format!("bench-{id}").into();
    event.to_string()
}

/// The invocation's context, as the worker attaches it.
fn with_context(request: Request, config: &Arc<Config>, round: i64) -> Request {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "lambda-runtime-deadline-ms",
        http::HeaderValue::from(4_000_000_000_000_u64),
    );
    headers.insert(
        "lambda-runtime-trace-id",
        http::HeaderValue::from_str(&trace_header(round)).expect("a header"),
    );
    let context = Context::new(&format!("request-{round}"), config.clone(), &headers).expect("a context");
    request.with_lambda_context(context)
}

/// Lambda's trace header for an untraced invocation.
fn trace_header(round: i64) -> String {
    format!("Root=1-5759e988-bd862e3fe1be46a994272{round:03};Parent=53995c3f42cd8ad8;Sampled=0")
}

/// The host worker's span of an invocation, with the worker's target,
/// name and fields.
fn open_span(request_id: &str, trace_id: &str) -> Span {
    let tenant_id: Option<&str> = None;
    tracing::info_span!(
        target: "lambda_host::runtime::worker",
        "invocation",
        request_id,
        xray_trace_id = lambda_host::trace::root(trace_id),
        tenant_id,
    )
}

/// A future that is pending `.0` more times before it is ready, as an
/// invocation waits on its DynamoDB call and its answer's POST.
struct Polls(u32);

impl Future for Polls {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<()> {
        match self.0.checked_sub(1) {
            Some(left) => {
                self.0 = left;
                Poll::Pending
            }
            None => Poll::Ready(()),
        }
    }
}

/// Polls `future` until it is ready.
fn to_end<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut TaskContext::from_waker(Waker::noop())) {
            return output;
        }
    }
}

/// The invocation's span as the worker (runtime/worker.rs) keeps it: made,
/// then instrumenting the invocation (three polls, the store's call
/// waited on twice) and the answer's POST (two polls), then closed.
#[inline(never)]
fn invocation_span(request_id: &str, trace_id: &str) {
    let span = open_span(black_box(request_id), black_box(trace_id));
    to_end(Polls(2).instrument(span.clone()));
    to_end(Polls(1).instrument(span.clone()));
    drop(black_box(span));
}

/// Polls a future that needs nothing but the runtime's timer to finish.
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut TaskContext::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a part waited"),
    }
}

#[inline(never)]
fn decode(payload: &[u8]) -> Decoded {
    black_box(envelope::decode(black_box(payload)).expect("a supported event"))
}

#[inline(never)]
fn authenticate(authenticator: &Authenticator, headers: &http::HeaderMap) {
    now(authenticator.authenticate(black_box(headers))).expect("the token accepted");
}

#[inline(never)]
fn parse(body: &[u8]) {
    black_box(NewPlant::from_json(black_box(body)).expect("a valid plant"));
}

/// The request's log line alone (metrics off).
#[inline(never)]
fn log_line(telemetry: &Telemetry, request: &Request) {
    // Not the same code as the next, so that the linker keeps both.
    black_box(1);
    record(telemetry, request);
}

/// The log line and the EMF document, as deployed.
#[inline(never)]
fn log_line_and_emf(telemetry: &Telemetry, request: &Request) {
    black_box(2);
    record(telemetry, request);
}

#[inline(always)]
fn record(telemetry: &Telemetry, request: &Request) {
    telemetry.record(black_box(&Invocation {
        context: request.lambda_context_ref(),
        method: "POST",
        path: "/plants",
        status: 200,
        error: None,
        plant_id: Some(1),
        outcome: Some(Created::Inserted),
        latency: Duration::from_micros(1234),
        store_latency: Some(Duration::from_micros(987)),
        envelope: None,
        xray_trace_id: request
            .lambda_context_ref()
            .and_then(|context| context.xray_trace_id.as_deref())
            .and_then(lambda_host::trace::root),
    }));
}

#[inline(never)]
fn handle(app: &App<MemoryStore>, request: Request) -> Response<Body> {
    black_box(now(app.handle(black_box(request))))
}

#[inline(never)]
fn encode(response: Response<Body>) {
    let _ = black_box(envelope::encode(RequestOrigin::ApiGatewayV2, black_box(response)));
}
