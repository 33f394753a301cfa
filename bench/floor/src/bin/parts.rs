//! plant-store's own parts of a warm create, each alone, for callgrind
//! (docs/performance.md, "The floor"): the event's decoding, the whole
//! handler on an in-memory store, and inside it the token check, the
//! body's parse, the log line with and without the EMF document, and the
//! answer's encoding. Each part is a function of its own called `ROUNDS`
//! times on fresh events, so that callgrind's inclusive count of that
//! function over `ROUNDS` is the part's instructions per create; what a
//! warm process pays for the DynamoDB call and the Runtime API is the
//! floor's. Run it under `valgrind --tool=callgrind` with its standard
//! output to /dev/null and read `callgrind_annotate --inclusive=yes`.

use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Duration;

use lambda_host::envelope::{self, Decoded, RequestOrigin};
use lambda_http::lambda_runtime::{Config, Context};
use lambda_http::tracing::subscriber::util::SubscriberInitExt;
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
    lambda_host::logging::json_subscriber(None, std::io::stdout).init();
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
        let span = tracing::info_span!("invocation", request_id = %format!("bench-{round}"));
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
    let trace = format!("Root=1-5759e988-bd862e3fe1be46a994272{round:03};Parent=53995c3f42cd8ad8;Sampled=0");
    headers.insert(
        "lambda-runtime-trace-id",
        http::HeaderValue::from_str(&trace).expect("a header"),
    );
    let context = Context::new(&format!("request-{round}"), config.clone(), &headers).expect("a context");
    request.with_lambda_context(context)
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
