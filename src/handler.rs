//! The request path: route, authenticate, parse, store, answer. Every request
//! gets a response here (expected failures are `ApiError`s rendered as the
//! `Error` body) and exactly one log line.

use std::convert::Infallible;
use std::mem;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lambda_host::ApiPath;
use lambda_host::deadline;
use lambda_host::envelope::SetAside;
use lambda_host::trace::{self, SpanDetails};
use lambda_http::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use lambda_http::http::{Method, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Context, Request, RequestExt, Response, Service, service_fn, tracing};
use serde::Serialize;

use crate::auth::Authenticator;
use crate::error::{ApiError, Waiting};
use crate::log::ErrorChain;
use crate::plant::{BodyError, MAX_BODY_BYTES, NewPlant, Plant, PlantId};
use crate::store::{Created, PlantStore};
use crate::telemetry::{Invocation, Telemetry};

const PLANTS_PATH: &str = "/plants";
const X_CONTENT_TYPE_OPTIONS: HeaderName = HeaderName::from_static("x-content-type-options");
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The function: a store and an authenticator, built once at start-up and
/// shared by every invocation.
#[derive(Debug)]
pub struct App<S> {
    store: S,
    authenticator: Authenticator,
    telemetry: Telemetry,
    /// The headers of every answer, built once: cloning them costs less
    /// than inserting each per request.
    headers: HeaderMap,
}

impl<S: PlantStore> App<S> {
    pub fn new(store: S, authenticator: Authenticator) -> Self {
        Self {
            store,
            authenticator,
            telemetry: Telemetry::log_only(),
            headers: header_template(),
        }
    }

    /// The log keys and metrics to write for every request.
    pub fn with_telemetry(self, telemetry: Telemetry) -> Self {
        Self { telemetry, ..self }
    }

    /// The function as the host serves it: each worker's clone shares the
    /// app, and each request is one [`App::handle`].
    pub fn into_service(
        self,
    ) -> impl Service<Request, Response = Response<Body>, Error = Infallible, Future: Send> + Clone + Send
    {
        let app = Arc::new(self);
        service_fn(move |request: Request| {
            let app = Arc::clone(&app);
            async move { Ok(app.handle(request).await) }
        })
    }

    /// Serves one request. Never fails: an `Err` out of a Lambda HTTP
    /// handler would reach the client as a bare 502 from API Gateway.
    ///
    /// Never waits past the invocation's deadline either: at
    /// [`deadline::RESPONSE_MARGIN`] before it, whatever the request is waiting for
    /// (DynamoDB, the issuer) is dropped and the answer is a 503 with
    /// `error` 50302, so that the invocation ends by itself and its worker
    /// takes the next one ([`deadline`] says why).
    pub async fn handle(&self, mut request: Request) -> Response<Body> {
        let started = Instant::now();
        let mut progress = Progress::default();
        // Pinned where it is made: the work's future is as large as its
        // largest state, and moving it into `until` and on into the
        // timeout copied all of it, three times per request.
        let finished = {
            let respond_by = deadline::respond_by(&request);
            let work = pin!(self.create_plant(&mut request, &mut progress));
            deadline::until(respond_by, work).await
        };
        let path = api_path(&request);
        let set_aside = request.extensions().get::<SetAside>();
        let outcome = finished.unwrap_or_else(|| Err(progress.cut_short()));
        let Progress {
            plant_id,
            store_latency,
            ..
        } = progress;

        let context = request.lambda_context_ref();
        let request_id = context.map(|context| context.request_id.as_str());
        // Rare: only a direct invoke's event needs repairs.
        let repairs = set_aside.filter(|repairs| repairs.any()).map(SetAside::to_string);
        let (status, body, extra_headers, created, error_code) = match &outcome {
            Ok((plant, created)) => (
                StatusCode::OK,
                Plant::from(plant).to_json(),
                Vec::new(),
                Some(*created),
                None,
            ),
            Err(err) => {
                if let Some(cause) = err.cause() {
                    tracing::error!(request_id, error = err.code(), cause = %ErrorChain(cause), "request failed");
                }
                (
                    err.status(),
                    json(&err.body()),
                    err.headers(),
                    None,
                    Some(err.code()),
                )
            }
        };

        self.telemetry.record(&Invocation {
            context,
            method: request.method().as_str(),
            path,
            status: status.as_u16(),
            error: error_code,
            plant_id: plant_id.map(PlantId::get),
            outcome: created,
            latency: started.elapsed(),
            store_latency,
            envelope: repairs.as_deref(),
            xray_trace_id: context
                .and_then(|context| context.xray_trace_id.as_deref())
                .and_then(trace::root),
        });

        let routed = path == PLANTS_PATH;
        // The request ends here: its id moves into the answer's header
        // rather than being copied there.
        let request_id = request
            .extensions_mut()
            .get_mut::<Context>()
            .map(|context| mem::take(&mut context.request_id));
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = status;
        *response.headers_mut() = answer_headers(&self.headers, request_id, extra_headers);
        // The SERVER span's route (none matched a 404's path) and error
        // code; read only when the invocation's spans are sent, and an
        // extension costs three allocations.
        if trace::traced() {
            let mut span = SpanDetails::default();
            if routed {
                span = span.route(PLANTS_PATH);
            }
            if let Some(code) = error_code {
                span = span.annotate("ErrorCode", code);
            }
            response.extensions_mut().insert(span);
        }
        response
    }

    /// The checks run in the documented order: path, method, credentials,
    /// size, content type, body, store. Authentication comes before anything
    /// about the body, so an unauthenticated caller learns nothing about it.
    /// Before the store is waited for, the request lets go of what is no
    /// longer read ([`release`]).
    async fn create_plant(
        &self,
        request: &mut Request,
        progress: &mut Progress,
    ) -> Result<(NewPlant, Created), ApiError> {
        let path = api_path(request);
        let set_aside = request.extensions().get::<SetAside>();
        if path != PLANTS_PATH {
            return Err(ApiError::NotFound);
        }
        if request.method() != Method::POST {
            return Err(ApiError::MethodNotAllowed);
        }
        self.authenticator.authenticate(request.headers()).await?;

        let body = request.body().as_ref();
        if body.len() > MAX_BODY_BYTES {
            return Err(ApiError::PayloadTooLarge);
        }
        if !is_json(request.headers()) {
            return Err(ApiError::UnsupportedMediaType);
        }
        if set_aside.is_some_and(|repairs| repairs.body_not_base64) {
            return Err(BodyError::NotBase64.into());
        }
        let plant = NewPlant::from_json(body)?;
        progress.plant_id = Some(plant.id);
        release(request);

        let store_started = Instant::now();
        progress.store_started = Some(store_started);
        let created = self.store.create(&plant).await;
        progress.store_latency = Some(store_started.elapsed());
        Ok((plant, created?))
    }
}

/// Frees what a request holds that nothing reads once its body is parsed:
/// its headers, its body and the front door's request context (a dozen
/// strings). Kept until the answer, they would stay out of glibc's
/// per-thread cache for all of the store's wait, and the allocations made
/// meanwhile (the SDK's and, with invocations in flight, the next
/// requests') would take the allocator's slower path: about 2,100
/// instructions a create one at a time, 4,000 at 64 in flight.
fn release(request: &mut Request) {
    request.extensions_mut().remove::<RequestContext>();
    *request.headers_mut() = HeaderMap::new();
    *request.body_mut() = Body::Empty;
}

/// How far a request got, for its log line and metrics, also when its
/// deadline cut it short.
#[derive(Debug, Default)]
struct Progress {
    plant_id: Option<PlantId>,
    store_started: Option<Instant>,
    store_latency: Option<Duration>,
}

impl Progress {
    /// The deadline came: what the request was waiting for then. Only the
    /// issuer and the store are waited for; everything else is CPU work
    /// between two awaits, which a deadline cannot interrupt.
    fn cut_short(&mut self) -> ApiError {
        ApiError::DeadlineExceeded(match self.store_started {
            Some(store_started) => {
                self.store_latency = Some(store_started.elapsed());
                Waiting::Store
            }
            None => Waiting::Issuer,
        })
    }
}

/// An answer's headers: the template's, the request's id when it can be a
/// header value, then the error's own.
fn answer_headers(
    template: &HeaderMap,
    request_id: Option<String>,
    extra_headers: Vec<(HeaderName, HeaderValue)>,
) -> HeaderMap {
    let mut headers = template.clone();
    // The id's slot is the last of the template's, so filling or removing
    // it leaves the others in their order.
    match request_id.and_then(|id| HeaderValue::try_from(id).ok()) {
        Some(id) => {
            if let Some(slot) = headers.get_mut(X_REQUEST_ID) {
                *slot = id;
            }
        }
        None => {
            headers.remove(X_REQUEST_ID);
        }
    }
    // Most answers have none: no reserve, no iterator.
    if !extra_headers.is_empty() {
        headers.extend(extra_headers);
    }
    headers
}

/// The headers every answer carries, in their order, with a slot for
/// `x-request-id` last.
fn header_template() -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(4);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_REQUEST_ID, HeaderValue::from_static(""));
    headers
}

/// The path the client asked of the API, whatever the front door (the
/// host works it out: no stage, no custom domain's mapping key).
fn api_path(request: &Request) -> &str {
    request
        .extensions()
        .get::<ApiPath>()
        .map_or_else(|| request.uri().path(), ApiPath::as_str)
}

/// `application/json`, in any case, with optional parameters; a `charset`
/// other than UTF-8 is refused because JSON is UTF-8 (RFC 8259 §8.1).
fn is_json(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    // What clients send nearly always, settled without the parse below.
    if value.as_bytes() == b"application/json" {
        return true;
    }
    let Ok(value) = value.to_str() else {
        return false;
    };
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
        && parts.all(|parameter| match parameter.split_once('=') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("charset") => {
                value.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
            }
            Some(_) => true,
            None => parameter.trim().is_empty(),
        })
}

/// Our bodies are plain structs of strings and integers, which cannot fail
/// to serialize; the fallback keeps this path free of panics regardless.
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|_| r#"{"error":50001,"message":"internal error"}"#.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content_type(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    /// How the headers were built before the template: one insert each.
    fn inserted_one_by_one(
        request_id: Option<&str>,
        extra_headers: Vec<(HeaderName, HeaderValue)>,
    ) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        if let Some(id) = request_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(X_REQUEST_ID, id);
        }
        headers.extend(extra_headers);
        headers
    }

    #[test]
    fn an_answers_headers_are_the_same_and_in_the_same_order_as_inserted_one_by_one() {
        let template = header_template();
        let challenge = || {
            vec![(
                lambda_http::http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            )]
        };
        let two = || {
            vec![
                (lambda_http::http::header::ALLOW, HeaderValue::from_static("POST")),
                (
                    lambda_http::http::header::RETRY_AFTER,
                    HeaderValue::from_static("1"),
                ),
            ]
        };
        let cases = [
            ("an id", Some("c6af9ac6-7b61-11e6-9a41-93e812345678"), Vec::new()),
            ("an id and a challenge", Some("req-1"), challenge()),
            ("no id", None, Vec::new()),
            ("no id, two more", None, two()),
            ("an id that is no header value", Some("a\nb"), challenge()),
            ("an empty id", Some(""), Vec::new()),
        ];
        for (name, request_id, extra) in cases {
            let ours = answer_headers(&template, request_id.map(str::to_owned), extra.clone());
            let theirs = inserted_one_by_one(request_id, extra);
            assert_eq!(
                ours.iter().collect::<Vec<_>>(),
                theirs.iter().collect::<Vec<_>>(),
                "{name}"
            );
        }
    }

    #[test]
    fn json_content_types_are_recognised_with_parameters_and_in_any_case() {
        for value in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=UTF-8",
            "application/json; charset=\"utf-8\"",
            "application/json; foo=bar",
        ] {
            assert!(is_json(&content_type(&[value])), "{value}");
        }
    }

    #[test]
    fn other_content_types_are_refused() {
        for values in [
            &[][..],
            &["text/plain"],
            &["application/jsonx"],
            &["application/json-patch+json"],
            &["application/x-www-form-urlencoded"],
            &["application/json; charset=iso-8859-1"],
            &["application/json; charset=utf-16"],
            &["application/json", "application/json"],
            &[""],
        ] {
            assert!(!is_json(&content_type(values)), "{values:?}");
        }
    }
}
