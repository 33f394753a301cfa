//! Each invocation's X-Ray context: its trace header on every AWS SDK
//! request made for it, and, when Lambda sampled it and runs an X-Ray
//! daemon beside the function, the subsegments that show its work.
//!
//! The SDK's recursion-detection interceptor copies `_X_AMZN_TRACE_ID` from
//! the process environment onto each request as `X-Amzn-Trace-Id`, and
//! `lambda_runtime`'s sequential loop sets that variable before every
//! invocation. Our loop never writes the environment (`runtime/` says
//! why), and with several invocations in flight at once one variable could
//! not name them all anyway. Instead the loop runs each handler inside
//! [`scope`] with its own invocation's trace header, a tokio task-local, and
//! [`TraceHeader`], registered once on the DynamoDB client, puts it on every
//! request that handler makes, each retry included. Outside any scope (the
//! pre-warm during init) it adds nothing.
//!
//! The same task-local carries what the subsegments need, parsed once when
//! the invocation starts: the header's `Root` and `Parent`, and the id of
//! the handler's subsegment, which the subsegments of its calls name as
//! their parent. Only when the header says `Sampled=1` and `main` enabled a
//! [`Tracer`] (`AWS_XRAY_DAEMON_ADDRESS` is set) is any of it built; an
//! invocation without a header has no context at all, never an earlier
//! invocation's. Three places send documents: the handler's subsegment when
//! the request's log line is written (`telemetry`), or when the invocation
//! ends without one; an AWS call's from [`AwsSubsegments`], the SDK
//! interceptor; a JWKS or discovery fetch's from [`remote_call`]. A call's
//! subsegment that is dropped before it finished (the handler gave up at
//! its deadline) is sent from its `Drop`, as a fault.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::OnceLock;

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents, SharedInterceptor};
use aws_sdk_dynamodb::error::BoxError;
use lambda_http::http::{Response, Uri};
use lambda_http::tracing;

mod aws;
mod xray;

pub use self::aws::AwsSubsegments;
use self::xray::{
    Annotations, Aws, Cause, Document, Flags, Http, HttpRequest, HttpResponse, Id, Kind, Namespace, Parent,
};
pub use self::xray::{DAEMON_ADDRESS, DaemonError, Tracer};

/// The header the SDK's recursion-detection interceptor sets.
const HEADER: &str = "x-amzn-trace-id";

/// The process's tracer, when `main` enabled one. Beside the task-local
/// rather than in it: it is one socket for the life of the process, like
/// stdout, and the places that send (the SDK interceptor, the JWKS fetch)
/// are reached through code that must not know about tracing.
static TRACER: OnceLock<Tracer> = OnceLock::new();

/// Sends the subsegments of sampled invocations through `tracer` from now
/// on. Called once by `main`; a second call changes nothing.
pub fn enable(tracer: Tracer) {
    let _ = TRACER.set(tracer);
}

/// Sends the subsegments of sampled invocations from now on, when Lambda
/// runs an X-Ray daemon beside the function (`Tracing: Active` sets
/// `AWS_XRAY_DAEMON_ADDRESS`), with `service` as the handler's name. An
/// address that cannot be used turns them off with one warning.
pub fn start(service: &str) {
    match Tracer::from_env(service) {
        Some(Ok(tracer)) => enable(tracer),
        Some(Err(err)) => tracing::warn!(cause = %err, "X-Ray subsegments are off"),
        None => {}
    }
}

/// What an AWS SDK client needs to take part: register both on its config
/// (`config.push_interceptor(…)`). The first puts the invocation's trace
/// header on every request, each retry included; the second reports each
/// call of a sampled invocation.
pub fn interceptors() -> [SharedInterceptor; 2] {
    [SharedInterceptor::new(TraceHeader), AwsSubsegments::shared()]
}

/// The fields of Lambda's trace header (`Root=1-…-…;Parent=…;Sampled=1`),
/// unchecked.
#[derive(Debug, Default, Clone, Copy)]
struct Fields<'a> {
    root: Option<&'a str>,
    parent: Option<&'a str>,
    sampled: bool,
}

impl<'a> Fields<'a> {
    fn of(header: &'a str) -> Self {
        let mut fields = Self::default();
        for part in header.split(';') {
            match part.trim().split_once('=') {
                Some(("Root", value)) => fields.root = Some(value),
                Some(("Parent", value)) => fields.parent = Some(value),
                Some(("Sampled", value)) => fields.sampled = value == "1",
                _ => {}
            }
        }
        fields
    }
}

/// The trace id X-Ray shows (`1-…-…`), from Lambda's trace header, as
/// Powertools logs it.
pub fn root(header: &str) -> Option<&str> {
    Fields::of(header).root.filter(|root| !root.is_empty())
}

tokio::task_local! {
    static CURRENT: Invocation;
}

/// One invocation's trace context.
struct Invocation {
    /// The trace header as the SDK's requests carry it.
    header: Option<String>,
    /// Present only for a sampled invocation with a tracer enabled.
    sampled: Option<Sampled>,
}

/// What a sampled invocation's subsegments need.
struct Sampled {
    tracer: &'static Tracer,
    /// `Root` and `Parent` of the trace header: the trace, and the
    /// function's segment (Lambda's `Invocation` subsegment) to hang from.
    trace_id: String,
    parent_id: String,
    /// The handler's subsegment: its id (parent of the calls'), when the
    /// invocation began, and whether it has been sent.
    handler: Id,
    started: f64,
    answered: Cell<bool>,
}

impl Sampled {
    /// The context of `header` if it says `Sampled=1` with a well-formed
    /// `Root` and `Parent`; `None` otherwise, and nothing is sent for it.
    fn parse(header: &str, tracer: &'static Tracer) -> Option<Self> {
        let Fields {
            root,
            parent,
            sampled,
        } = Fields::of(header);
        if !sampled {
            return None;
        }
        let (root, parent) = (
            root.filter(|root| is_trace_id(root))?,
            parent.filter(|id| is_id(id))?,
        );
        Some(Self {
            tracer,
            trace_id: root.to_owned(),
            parent_id: parent.to_owned(),
            handler: tracer.id(),
            started: xray::now(),
            answered: Cell::new(false),
        })
    }

    /// Sends the handler's subsegment, once.
    fn send_handler(&self, annotations: Annotations<'_>, flags: Flags, cause: Option<(&str, &str)>) {
        if self.answered.replace(true) {
            return;
        }
        let tracer = self.tracer;
        tracer.send(&Document {
            kind: Kind::Subsegment,
            id: self.handler,
            trace_id: &self.trace_id,
            parent_id: Parent::Header(&self.parent_id),
            name: tracer.handler_name(),
            start_time: self.started,
            end_time: xray::now(),
            namespace: None,
            error: flags.error,
            throttle: flags.throttle,
            fault: flags.fault,
            cause: cause.map(|(kind, message)| Cause::new(tracer.id(), kind, message, false)),
            annotations: Some(annotations),
            aws: None,
            http: None,
        });
    }
}

impl Drop for Invocation {
    /// An invocation that ends without the handler having answered (a
    /// panic, an event that could not be decoded) still closes its
    /// subsegment, as a fault, so that the calls it made hang from it.
    fn drop(&mut self) {
        if let Some(sampled) = &self.sampled {
            let annotations = Annotations {
                cold_start: None,
                service: sampled.tracer.service(),
                status: None,
                error_code: None,
            };
            let cause = ("NoAnswer", "the invocation ended before the handler answered");
            sampled.send_handler(annotations, Flags::FAULT, Some(cause));
        }
    }
}

/// `1-` then 8 and 24 hex digits: what X-Ray accepts as a trace id.
fn is_trace_id(root: &str) -> bool {
    let hex = |part: &str, len| part.len() == len && part.bytes().all(|byte| byte.is_ascii_hexdigit());
    let mut parts = root.split('-');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some("1"), Some(time), Some(random), None) if hex(time, 8) && hex(random, 24)
    )
}

/// 16 hex digits: a segment or subsegment id.
fn is_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// Runs `future` with `trace_id` (the invocation's `Lambda-Runtime-Trace-Id`)
/// as the trace header of every SDK request it makes and, when sampled, as
/// the trace of the subsegments it sends.
pub(crate) async fn scope<F: Future>(trace_id: Option<&str>, future: F) -> F::Output {
    scope_with(TRACER.get(), trace_id, future).await
}

/// [`scope`] with `tracer` instead of the one `main` enabled: for tests and
/// tools that run invocations in a process of their own.
pub async fn scope_with<F: Future>(
    tracer: Option<&'static Tracer>,
    trace_id: Option<&str>,
    future: F,
) -> F::Output {
    let sampled = match (trace_id, tracer) {
        (Some(header), Some(tracer)) => Sampled::parse(header, tracer),
        _ => None,
    };
    let invocation = Invocation {
        header: trace_id.map(encode),
        sampled,
    };
    CURRENT.scope(invocation, future).await
}

/// The calling task's sampled invocation, to be continued in another task
/// with [`carried`]: a JWKS fetch that a request waits for runs in a task of
/// its own (it outlives a request dropped at its deadline), and its
/// subsegment still hangs under that request's handler. Empty outside a
/// sampled invocation.
pub struct Carried(Option<Sampled>);

/// The calling task's sampled invocation, for [`carried`].
pub fn carry() -> Carried {
    Carried(
        CURRENT
            .try_with(|invocation| {
                invocation.sampled.as_ref().map(|sampled| Sampled {
                    tracer: sampled.tracer,
                    trace_id: sampled.trace_id.clone(),
                    parent_id: sampled.parent_id.clone(),
                    handler: sampled.handler,
                    started: sampled.started,
                    // The handler's subsegment is its own task's to send.
                    answered: Cell::new(true),
                })
            })
            .ok()
            .flatten(),
    )
}

/// Runs `future` in the invocation `carried` from another task: the
/// subsegments of its calls hang under that invocation's handler. Its trace
/// header is not carried; nothing run this way calls AWS.
pub async fn carried<F: Future>(carried: Carried, future: F) -> F::Output {
    match carried.0 {
        None => future.await,
        Some(sampled) => {
            let invocation = Invocation {
                header: None,
                sampled: Some(sampled),
            };
            CURRENT.scope(invocation, future).await
        }
    }
}

/// The trace header of the invocation being served by the calling task.
pub fn current() -> Option<String> {
    CURRENT
        .try_with(|invocation| invocation.header.clone())
        .ok()
        .flatten()
}

/// What the handler answered, for its subsegment's annotations.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    /// The first invocation of this execution environment.
    pub cold_start: bool,
    /// The HTTP status of the answer.
    pub status: u16,
    /// The function's own error code, when the answer is an error.
    pub error: Option<u32>,
}

/// Sends the handler's subsegment of a sampled invocation, with its answer
/// as annotations and flags (4xx `error`, 429 `throttle`, 5xx `fault`).
/// Nothing outside a sampled invocation.
pub fn answered(answer: Answer) {
    let _ = CURRENT.try_with(|invocation| {
        if let Some(sampled) = &invocation.sampled {
            let annotations = Annotations {
                cold_start: Some(answer.cold_start),
                service: sampled.tracer.service(),
                status: Some(answer.status),
                error_code: answer.error,
            };
            sampled.send_handler(annotations, Flags::of_status(answer.status, false), None);
        }
    });
}

/// A subsegment of a call out of the function, opened when the call starts
/// and sent when it ends; one dropped unfinished is sent as a fault whose
/// cause is the timeout that abandoned it.
#[derive(Debug)]
struct Call {
    tracer: &'static Tracer,
    id: Id,
    trace_id: String,
    /// The handler's subsegment.
    parent_id: Id,
    name: String,
    namespace: Namespace,
    start_time: f64,
    /// What the caller knows before the answer.
    aws: Option<AwsCall>,
    url: Option<String>,
    sent: bool,
}

/// An AWS call's fields that are known when it starts.
#[derive(Debug, Default)]
struct AwsCall {
    operation: String,
    region: Option<String>,
    table_name: Option<String>,
}

/// How a call ended.
#[derive(Debug, Default)]
struct Ending<'a> {
    status: Option<u16>,
    request_id: Option<&'a str>,
    retries: Option<u32>,
    flags: Flags,
    /// Exception type, message, and whether the remote service raised it.
    cause: Option<(&'a str, &'a str, bool)>,
}

impl Call {
    /// A call's subsegment, under the handler's, if the calling task serves
    /// a sampled invocation.
    fn open(name: &str, namespace: Namespace) -> Option<Self> {
        CURRENT
            .try_with(|invocation| {
                let sampled = invocation.sampled.as_ref()?;
                Some(Self {
                    tracer: sampled.tracer,
                    id: sampled.tracer.id(),
                    trace_id: sampled.trace_id.clone(),
                    parent_id: sampled.handler,
                    name: name.to_owned(),
                    namespace,
                    start_time: xray::now(),
                    aws: None,
                    url: None,
                    sent: false,
                })
            })
            .ok()
            .flatten()
    }

    fn close(mut self, ending: &Ending<'_>) {
        self.send(ending);
    }

    fn send(&mut self, ending: &Ending<'_>) {
        self.sent = true;
        let tracer = self.tracer;
        let aws = self.aws.as_ref().map(|call| Aws {
            operation: &call.operation,
            region: call.region.as_deref(),
            request_id: ending.request_id,
            table_name: call.table_name.as_deref(),
            retries: ending.retries.filter(|retries| *retries > 0),
        });
        let http = (self.url.is_some() || ending.status.is_some()).then(|| Http {
            request: self.url.as_deref().map(|url| HttpRequest { method: "GET", url }),
            response: ending.status.map(|status| HttpResponse { status }),
        });
        tracer.send(&Document {
            kind: Kind::Subsegment,
            id: self.id,
            trace_id: &self.trace_id,
            parent_id: Parent::Subsegment(self.parent_id),
            name: &self.name,
            start_time: self.start_time,
            end_time: xray::now(),
            namespace: Some(self.namespace),
            error: ending.flags.error,
            throttle: ending.flags.throttle,
            fault: ending.flags.fault,
            cause: ending
                .cause
                .map(|(kind, message, remote)| Cause::new(tracer.id(), kind, message, remote)),
            annotations: None,
            aws,
            http,
        });
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.sent {
            self.send(&Ending {
                flags: Flags::FAULT,
                cause: Some((
                    "TimeoutError",
                    "abandoned before it finished: the invocation's time ran out first",
                    false,
                )),
                ..Ending::default()
            });
        }
    }
}

/// Runs `call`, an HTTP `GET` of `url` outside AWS (a JWKS or discovery
/// document), as a remote subsegment named after the host when the calling
/// task serves a sampled invocation; otherwise just runs it.
pub async fn remote_call<B, E: std::fmt::Display>(
    url: &Uri,
    call: impl Future<Output = Result<Response<B>, E>>,
) -> Result<Response<B>, E> {
    let Some(mut subsegment) = Call::open(url.host().unwrap_or("remote"), Namespace::Remote) else {
        return call.await;
    };
    subsegment.url = Some(url.to_string());
    let result = call.await;
    match &result {
        Ok(response) => {
            let status = response.status().as_u16();
            subsegment.close(&Ending {
                status: Some(status),
                flags: Flags::of_status(status, false),
                ..Ending::default()
            });
        }
        Err(err) => {
            let message = err.to_string();
            subsegment.close(&Ending {
                flags: Flags::FAULT,
                cause: Some(("ConnectionError", &message, false)),
                ..Ending::default()
            });
        }
    }
    result
}

/// Sets `X-Amzn-Trace-Id` on each request from the task-local of [`scope`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceHeader;

impl Intercept for TraceHeader {
    fn name(&self) -> &'static str {
        "TraceHeader"
    }

    /// Before signing, as the SDK's own interceptor does. The invocation's
    /// header replaces any other: the SDK's interceptor would have taken one
    /// from the environment, which is not this invocation's.
    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(value) = current() {
            // `encode` leaves only visible ASCII and spaces, which is always a
            // valid header value; `try_insert` keeps that a non-panicking path.
            context.request_mut().headers_mut().try_insert(HEADER, value)?;
        }
        Ok(())
    }
}

/// Percent-encodes control characters and non-ASCII bytes, the set the
/// SDK's recursion-detection interceptor encodes (`percent_encoding::CONTROLS`),
/// so that any trace header Lambda sends becomes a valid header value.
fn encode(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        if (0x20..0x7f).contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_id_is_the_root_of_lambdas_trace_header() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(root(header), Some("1-5759e988-bd862e3fe1be46a994272793"));
        assert_eq!(root("Sampled=0;Root=1-a-b"), Some("1-a-b"));
        assert_eq!(root("Parent=1;Sampled=0"), None);
        assert_eq!(root("Root="), None);
    }

    #[test]
    fn a_trace_header_as_lambda_sends_it_is_kept_as_it_is() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(encode(header), header);
    }

    #[test]
    fn control_characters_and_non_ascii_are_percent_encoded_as_the_sdk_does() {
        assert_eq!(encode("a\tb\u{7f}c\u{e9}d %"), "a%09b%7Fc%C3%A9d %");
    }

    #[tokio::test]
    async fn the_header_is_seen_inside_its_scope_only() {
        assert_eq!(current(), None);
        let inside = scope(Some("Root=1-a"), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("Root=1-a"));
        assert_eq!(scope(None, async { current() }).await, None);
        assert_eq!(current(), None);
    }

    const SAMPLED: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";

    /// A tracer sending to a listener of the test's own, standing in for
    /// the daemon; leaked, as the process's tracer lives as long as it.
    fn daemon() -> (&'static Tracer, std::net::UdpSocket) {
        let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tracer = Tracer::new(listener.local_addr().unwrap(), "orders-eu").unwrap();
        (Box::leak(Box::new(tracer)), listener)
    }

    /// The `expected` documents sent, waited for as long as only a hang
    /// takes, then any more already there: the tracer has sent them all by
    /// now, and loopback delivers a datagram as it is sent.
    fn documents(listener: &std::net::UdpSocket, expected: usize) -> Vec<serde_json::Value> {
        let mut buffer = [0; 65_536];
        let mut documents = Vec::new();
        let mut receive = |documents: &mut Vec<serde_json::Value>| {
            let length = listener.recv(&mut buffer).ok()?;
            let text = std::str::from_utf8(&buffer[..length]).unwrap();
            let (_, document) = text.split_once('\n').unwrap();
            documents.push(serde_json::from_str(document).unwrap());
            Some(())
        };
        listener
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        while documents.len() < expected {
            receive(&mut documents).expect("a document within 30 s");
        }
        listener.set_nonblocking(true).unwrap();
        while receive(&mut documents).is_some() {}
        documents
    }

    #[test]
    fn only_a_sampled_header_with_a_well_formed_root_and_parent_is_traced() {
        let (tracer, _listener) = daemon();
        for (header, traced) in [
            (SAMPLED, true),
            (
                "Sampled=1;Parent=53995c3f42cd8ad8;Root=1-5759e988-bd862e3fe1be46a994272793",
                true,
            ),
            (
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
                false,
            ),
            (
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
                false,
            ),
            ("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", false),
            (
                "Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8;Sampled=1",
                false,
            ),
            (
                "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
                false,
            ),
            (
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=\"x\";Sampled=1",
                false,
            ),
            ("", false),
        ] {
            assert_eq!(Sampled::parse(header, tracer).is_some(), traced, "{header:?}");
        }
    }

    #[tokio::test]
    async fn a_sampled_invocation_sends_its_handler_subsegment_with_the_answer_as_annotations() {
        let (tracer, listener) = daemon();

        scope_with(Some(tracer), Some(SAMPLED), async {
            answered(Answer {
                cold_start: true,
                status: 409,
                error: Some(40901),
            });
            // Once per invocation, whatever calls it again.
            answered(Answer {
                cold_start: false,
                status: 200,
                error: None,
            });
        })
        .await;

        let documents = documents(&listener, 1);
        assert_eq!(documents.len(), 1, "{documents:#?}");
        let mut document = documents[0].clone();
        let id = document["id"].take();
        assert!(id.as_str().is_some_and(is_id), "{id}");
        let (start, end) = (document["start_time"].take(), document["end_time"].take());
        assert!(start.as_f64().unwrap() <= end.as_f64().unwrap());
        assert_eq!(
            document,
            serde_json::json!({
                "type": "subsegment", "id": null, "trace_id": "1-5759e988-bd862e3fe1be46a994272793",
                "parent_id": "53995c3f42cd8ad8", "name": "## orders-eu", "start_time": null, "end_time": null,
                "error": true,
                "annotations": { "ColdStart": true, "Service": "orders-eu", "Status": 409, "ErrorCode": 40901 },
            })
        );
    }

    #[tokio::test]
    async fn an_invocation_that_ends_unanswered_closes_its_handler_subsegment_as_a_fault() {
        let (tracer, listener) = daemon();

        scope_with(Some(tracer), Some(SAMPLED), async {}).await;

        let documents = documents(&listener, 1);
        assert_eq!(documents.len(), 1);
        assert_eq!(documents[0]["fault"], true);
        assert_eq!(documents[0]["cause"]["exceptions"][0]["type"], "NoAnswer");
        assert_eq!(
            documents[0]["annotations"],
            serde_json::json!({ "Service": "orders-eu" })
        );
    }

    #[tokio::test]
    async fn unsampled_headerless_or_untraced_invocations_send_nothing() {
        let (tracer, listener) = daemon();
        let unsampled = SAMPLED.replace("Sampled=1", "Sampled=0");
        for (tracer, header) in [
            (Some(tracer), Some(unsampled.as_str())),
            (Some(tracer), None),
            (None, Some(SAMPLED)),
        ] {
            scope_with(tracer, header, async {
                answered(Answer {
                    cold_start: false,
                    status: 200,
                    error: None,
                });
                let uri: Uri = "https://issuer.example/jwks".parse().unwrap();
                let _ = remote_call(&uri, async { Ok::<_, String>(Response::new(())) }).await;
            })
            .await;
        }
        answered(Answer {
            cold_start: false,
            status: 200,
            error: None,
        });

        assert_eq!(documents(&listener, 0), Vec::<serde_json::Value>::new());
    }

    #[tokio::test]
    async fn a_remote_call_is_a_subsegment_of_the_handlers_and_one_cut_short_is_a_timeout_fault() {
        let (tracer, listener) = daemon();
        let uri: Uri = "https://issuer.example/.well-known/jwks.json".parse().unwrap();

        scope_with(Some(tracer), Some(SAMPLED), async {
            let answer = Response::builder().status(404).body(()).unwrap();
            let _ = remote_call(&uri, async { Ok::<_, String>(answer) }).await;
            let hangs = remote_call(&uri, std::future::pending::<Result<Response<()>, String>>());
            let _ = tokio::time::timeout(std::time::Duration::from_millis(10), hangs).await;
            let _ = remote_call(&uri, async { Err::<Response<()>, _>("connection refused") }).await;
            answered(Answer {
                cold_start: false,
                status: 200,
                error: None,
            });
        })
        .await;

        let documents = documents(&listener, 4);
        assert_eq!(documents.len(), 4, "{documents:#?}");
        let handler = &documents[3];
        for call in &documents[..3] {
            assert_eq!(call["parent_id"], handler["id"]);
            assert_eq!(call["trace_id"], "1-5759e988-bd862e3fe1be46a994272793");
            assert_eq!(
                (&call["name"], &call["namespace"]),
                (&"issuer.example".into(), &"remote".into())
            );
            assert_eq!(
                call["http"]["request"],
                serde_json::json!({ "method": "GET", "url": "https://issuer.example/.well-known/jwks.json" })
            );
        }
        assert_eq!(documents[0]["http"]["response"]["status"], 404);
        assert_eq!(documents[0]["error"], true);
        let exception = |n: usize| documents[n]["cause"]["exceptions"][0].clone();
        assert_eq!(documents[1]["fault"], true);
        assert_eq!(exception(1)["type"], "TimeoutError");
        assert_eq!(documents[2]["fault"], true);
        assert_eq!(
            (exception(2)["type"].clone(), exception(2)["message"].clone()),
            ("ConnectionError".into(), "connection refused".into())
        );
    }

    #[tokio::test]
    async fn concurrent_scopes_each_see_their_own_header() {
        let one = scope(Some("Root=1-one"), async {
            tokio::task::yield_now().await;
            current()
        });
        let two = scope(Some("Root=1-two"), async {
            tokio::task::yield_now().await;
            current()
        });
        let (one, two) = tokio::join!(one, two);
        assert_eq!(one.as_deref(), Some("Root=1-one"));
        assert_eq!(two.as_deref(), Some("Root=1-two"));
    }
}
