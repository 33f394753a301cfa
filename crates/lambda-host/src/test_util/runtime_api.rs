//! A stand-in for the Lambda Runtime API on loopback, speaking its contract:
//! `GET …/invocation/next` with the request id, deadline, function ARN,
//! trace id, invocation id and tenant id headers; `POST …/{id}/response`,
//! `…/{id}/error` and `…/init/error`. A thread per connection, so that
//! several `next` can be parked at once, as on Lambda Managed Instances; it
//! can hold every `next` back until a given number are parked, which shows
//! that the function polls that many at once. It can also fail calls on
//! purpose (a status, or a connection dropped), once each, in order.
//!
//! A streamed answer (`Lambda-Runtime-Function-Response-Mode: streaming`,
//! chunked) is read chunk by chunk as it comes, each chunk's arrival timed,
//! and its trailers kept: [`Posted::stream`].
//!
//! For the host's tests and a function's black-box tests, which start
//! the function's binary with `AWS_LAMBDA_RUNTIME_API` set to
//! [`FakeRuntimeApi::address`].

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lambda_http::http::Uri;
use serde_json::Value;

/// The ARN the stand-in gives as the invoked function's.
pub const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:orders";
/// An X-Ray trace header as Lambda sends it, for tests that need one fixed.
pub const TRACE_HEADER: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
/// How long a held `next` waits for the others before it is answered anyway
/// (and the test that asked for them fails on its count).
const HOLD_AT_MOST: Duration = Duration::from_secs(30);

/// One event as the Runtime API hands it out.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// `Lambda-Runtime-Aws-Request-Id`.
    pub id: String,
    /// The payload.
    pub event: String,
    /// `Lambda-Runtime-Trace-Id`.
    pub trace_id: String,
    /// `Lambda-Runtime-Invocation-Id`, if sent.
    pub invocation_id: Option<String>,
    /// `Lambda-Runtime-Deadline-Ms`, if sent.
    pub deadline_ms: Option<u64>,
    /// `Lambda-Runtime-Aws-Tenant-Id`, if sent.
    pub tenant_id: Option<String>,
}

impl Invocation {
    /// With a trace id and an invocation id of its own, told apart from
    /// the request id so that a test sees which one the function echoes.
    pub fn new(id: &str, event: impl ToString) -> Self {
        let hash = fxhash(id);
        Self {
            id: id.to_owned(),
            event: event.to_string(),
            trace_id: format!(
                "Root=1-6920aa00-{:024x};Parent={:016x};Sampled=0",
                hash & ((1 << 96) - 1),
                hash >> 64
            ),
            invocation_id: Some(format!("{:032x}", hash.rotate_left(17))),
            deadline_ms: Some(4_102_444_800_000),
            tenant_id: None,
        }
    }

    /// Due `within` from now, as Lambda sets it from the function's timeout.
    pub fn due_in(mut self, within: Duration) -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
        self.deadline_ms = Some(u64::try_from((now + within).as_millis()).expect("ms fit in u64"));
        self
    }

    /// For `tenant_id` (Lambda's tenant isolation mode).
    pub fn for_tenant(mut self, tenant_id: &str) -> Self {
        self.tenant_id = Some(tenant_id.to_owned());
        self
    }

    /// With no deadline header, which Lambda always sends.
    pub fn without_deadline(mut self) -> Self {
        self.deadline_ms = None;
        self
    }

    /// Lambda sampled it for X-Ray: `Sampled=1`.
    pub fn sampled(mut self) -> Self {
        self.trace_id = self.trace_id.replace("Sampled=0", "Sampled=1");
        self
    }

    /// Sent without `Lambda-Runtime-Trace-Id` at all.
    pub fn without_trace_id(mut self) -> Self {
        self.trace_id = String::new();
        self
    }

    /// With no invocation id, as classic Lambda sends none.
    pub fn without_invocation_id(mut self) -> Self {
        self.invocation_id = None;
        self
    }

    /// The trace id's root: the id X-Ray shows and the log lines carry.
    pub fn trace_root(&self) -> &str {
        self.trace_id
            .trim_start_matches("Root=")
            .split(';')
            .next()
            .unwrap_or_default()
    }
}

fn fxhash(text: &str) -> u128 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u128::from(byte)).wrapping_mul(0x1000_0000_01b3)
    })
}

/// What the function posted: path, headers (lower-case names), JSON body,
/// and when the stand-in had all of it (the wall clock, as Lambda's
/// deadlines are).
#[derive(Debug)]
#[non_exhaustive]
pub struct Posted {
    /// The path posted to (`…/{id}/response`, `…/{id}/error`, `…/init/error`).
    pub path: String,
    /// Its headers, names in lower case.
    pub headers: HashMap<String, String>,
    /// Its body, as JSON.
    pub body: Value,
    /// When the stand-in had read it whole.
    pub arrived: SystemTime,
    /// A streamed answer as it came; `None` for any other post.
    pub stream: Option<Streamed>,
}

/// The most of a streamed body the stand-in keeps; past it, only its
/// length and its chunks' timing, so that a test can stream hundreds of MB.
pub const KEPT_AT_MOST: usize = 8 << 20;

/// A streamed answer (`Transfer-Encoding: chunked`), read as it came.
#[derive(Debug, Default)]
pub struct Streamed {
    /// The HTTP integration's prelude: the JSON before the eight NUL bytes
    /// (`Null` when there were none, or it is not JSON).
    pub prelude: Value,
    /// The response body after the delimiter (its first [`KEPT_AT_MOST`]
    /// bytes).
    pub body: Vec<u8>,
    /// The response body's whole length.
    pub length: u64,
    /// Each chunk: when the stand-in had read it, and its size.
    pub chunks: Vec<(Instant, usize)>,
    /// The trailers after the last chunk, names in lower case.
    pub trailers: HashMap<String, String>,
    /// The stream ended with its last chunk (`0`), rather than with the
    /// connection.
    pub ended: bool,
}

impl Streamed {
    /// The trailer `name` (lower case), if sent.
    pub fn trailer(&self, name: &str) -> Option<&str> {
        self.trailers.get(name).map(String::as_str)
    }

    /// `Lambda-Runtime-Function-Error-Body`, decoded: the diagnostic's JSON.
    pub fn error_body(&self) -> Option<Value> {
        use base64::Engine as _;
        let encoded = self.trailer("lambda-runtime-function-error-body")?;
        let json = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("the error body is base64");
        Some(serde_json::from_slice(&json).expect("the error body is JSON"))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Posted {
    /// The header `name` (lower case), if posted.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// How long before `invocation`'s deadline the stand-in had this
    /// answer, as a wall-clock difference; negative when after it.
    pub fn ahead_of_deadline_ms(&self, invocation: &Invocation) -> i128 {
        let deadline_ms = invocation.deadline_ms.expect("an invocation with a deadline");
        let arrived_ms = self
            .arrived
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_millis();
        i128::from(deadline_ms) - i128::try_from(arrived_ms).expect("ms fit in i128")
    }

    /// The request id in the path of an answer (`…/invocation/{id}/…`).
    pub fn request_id(&self) -> &str {
        self.path
            .trim_start_matches("/2018-06-01/runtime/invocation/")
            .split('/')
            .next()
            .unwrap_or_default()
    }
}

/// A call the stand-in fails on purpose instead of answering it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Answered with this status and an empty body.
    Status(u16),
    /// The connection is closed without an answer.
    Drop,
    /// A streamed answer's connection is closed once this many bytes of it
    /// (prelude included) are read, without an answer.
    DropAfter(usize),
}

#[derive(Debug, Default)]
struct Queue {
    invocations: VecDeque<Invocation>,
    /// Open: a `next` with nothing to hand out waits, as on Lambda, until an
    /// invocation is pushed or the stand-in is closed. Closed: it is
    /// answered 403, which ends the function's process, once every
    /// invocation handed out has its answer (so that none is cut short).
    open: bool,
    /// Invocations handed out and not answered yet.
    outstanding: usize,
    /// The next `next` calls, and the next answers, to fail on purpose.
    next_faults: VecDeque<Fault>,
    answer_faults: VecDeque<Fault>,
    /// Answers refused with a fault, by path.
    refused: Vec<(String, Fault)>,
    /// `next` calls waiting for their answer now, and the most ever.
    parked: usize,
    max_parked: usize,
    /// No `next` is answered until this many are parked at once.
    hold_until: usize,
    released: bool,
    /// The headers of every `next`, in order.
    nexts: Vec<HashMap<String, String>>,
}

#[derive(Debug, Default)]
struct State {
    queue: Mutex<Queue>,
    changed: Condvar,
}

/// A Runtime API on loopback. Once its events are all handed out it answers
/// `next` with a 403, which the function does not retry: its process ends.
/// [`FakeRuntimeApi::open`] keeps `next` waiting instead, as Lambda does.
pub struct FakeRuntimeApi {
    /// `127.0.0.1:port`, for `AWS_LAMBDA_RUNTIME_API`.
    pub address: String,
    /// Every answer, error and init error, as it is posted.
    pub posted: Receiver<Posted>,
    state: Arc<State>,
}

impl FakeRuntimeApi {
    /// Hands out `invocations` in order, then answers `next` with a 403,
    /// which ends the function's loop.
    pub fn start(invocations: Vec<Invocation>) -> Self {
        Self::holding(invocations, 1)
    }

    /// Answers no `next` until `parked` of them are waiting at once.
    pub fn holding(invocations: Vec<Invocation>, parked: usize) -> Self {
        Self::with_queue(Queue {
            invocations: VecDeque::from(invocations),
            hold_until: parked,
            ..Queue::default()
        })
    }

    /// Hands out `invocations`, then keeps every `next` waiting until
    /// [`FakeRuntimeApi::push`] or [`FakeRuntimeApi::close`].
    pub fn open(invocations: Vec<Invocation>) -> Self {
        Self::with_queue(Queue {
            invocations: VecDeque::from(invocations),
            open: true,
            hold_until: 1,
            ..Queue::default()
        })
    }

    fn with_queue(queue: Queue) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the Runtime API");
        let address = listener.local_addr().expect("an address").to_string();
        let state = Arc::new(State {
            queue: Mutex::new(queue),
            changed: Condvar::new(),
        });
        let (sender, posted) = channel();
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (state, sender) = (shared.clone(), sender.clone());
                std::thread::spawn(move || serve(stream, &state, &sender));
            }
        });
        Self {
            address,
            posted,
            state,
        }
    }

    /// Its address as a URI, for [`crate::Lambda::new`].
    pub fn uri(&self) -> Uri {
        format!("http://{}", self.address).parse().expect("a URI")
    }

    /// The next thing posted, waiting for it.
    pub fn next_post(&self) -> Posted {
        self.posted
            .recv_timeout(Duration::from_secs(30))
            .expect("the function posted within 30 s")
    }

    /// The most `next` calls that were ever waiting at once.
    pub fn max_parked(&self) -> usize {
        self.queue().max_parked
    }

    /// The headers of every `next` so far.
    pub fn nexts(&self) -> Vec<HashMap<String, String>> {
        self.queue().nexts.clone()
    }

    /// The `next` calls waiting for an invocation now.
    pub fn parked(&self) -> usize {
        self.queue().parked
    }

    /// Waits until `count` `next` calls are parked at once; how long that
    /// took, or `None` if it did not happen `within`.
    pub fn wait_until_parked(&self, count: usize, within: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < within {
            if self.parked() == count {
                return Some(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// One more invocation for a parked (or the next) `next`.
    pub fn push(&self, invocation: Invocation) {
        self.queue().invocations.push_back(invocation);
        self.state.changed.notify_all();
    }

    /// Every `next` from now on, parked or not, is answered 403.
    pub fn close(&self) {
        self.queue().open = false;
        self.state.changed.notify_all();
    }

    /// The next `next` call (after any fault queued before) fails so.
    pub fn fail_next(&self, fault: Fault) {
        self.queue().next_faults.push_back(fault);
    }

    /// The next answer posted (after any fault queued before) fails so.
    pub fn fail_answer(&self, fault: Fault) {
        self.queue().answer_faults.push_back(fault);
    }

    /// The answers refused with a fault so far: path and fault.
    pub fn refused(&self) -> Vec<(String, Fault)> {
        self.queue().refused.clone()
    }

    /// Invocations handed out and not answered yet.
    pub fn outstanding(&self) -> usize {
        self.queue().outstanding
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where an extension registers, and waits for its events.
pub const EXTENSION_REGISTER: &str = "/2020-01-01/extension/register";
const EXTENSION_NEXT: &str = "/2020-01-01/extension/event/next";

/// What a `next` gets.
enum Next {
    Invocation(Invocation),
    Fault(Fault),
    /// Closed, with nothing left to hand out.
    Over,
}

/// Parks one `next` until the hold is released, then hands out the next
/// invocation (or waits for one while the stand-in is open), unless a fault
/// is queued for it.
fn next_invocation(state: &State, headers: HashMap<String, String>) -> Next {
    let mut queue = state.queue.lock().unwrap_or_else(PoisonError::into_inner);
    queue.nexts.push(headers);
    if let Some(fault) = queue.next_faults.pop_front() {
        return Next::Fault(fault);
    }
    queue.parked += 1;
    queue.max_parked = queue.max_parked.max(queue.parked);
    if queue.parked >= queue.hold_until {
        queue.released = true;
        state.changed.notify_all();
    }
    if !queue.released {
        let (mut held, _) = state
            .changed
            .wait_timeout_while(queue, HOLD_AT_MOST, |queue| !queue.released)
            .unwrap_or_else(PoisonError::into_inner);
        held.released = true;
        queue = held;
    }
    let mut queue = state
        .changed
        .wait_while(queue, |queue| {
            queue.invocations.is_empty() && (queue.open || queue.outstanding > 0)
        })
        .unwrap_or_else(PoisonError::into_inner);
    queue.parked -= 1;
    match queue.invocations.pop_front() {
        Some(invocation) => {
            queue.outstanding += 1;
            Next::Invocation(invocation)
        }
        None => Next::Over,
    }
}

/// Answers a call with `fault`: its status, or nothing at all.
fn fail(writer: &mut TcpStream, fault: Fault) {
    if let Fault::Status(status) = fault {
        let _ = write!(writer, "HTTP/1.1 {status} Fault\r\nContent-Length: 0\r\n\r\n");
    }
}

fn serve(stream: TcpStream, state: &State, posted: &Sender<Posted>) {
    let mut reader = BufReader::new(stream.try_clone().expect("a socket"));
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("a header line");
            if line.trim_end().is_empty() {
                break;
            }
            // A header sent twice reads as one, its values joined.
            if let Some((name, value)) = line.split_once(':') {
                headers
                    .entry(name.trim().to_ascii_lowercase())
                    .and_modify(|values: &mut String| {
                        values.push_str(", ");
                        values.push_str(value.trim());
                    })
                    .or_insert_with(|| value.trim().to_owned());
            }
        }
        let chunked = headers
            .get("transfer-encoding")
            .is_some_and(|value| value.eq_ignore_ascii_case("chunked"));
        let length = headers
            .get("content-length")
            .map_or(0, |value| value.parse().expect("a length"));
        let mut body = vec![0; if chunked { 0 } else { length }];
        reader.read_exact(&mut body).expect("a body");
        let path = request_line.split(' ').nth(1).unwrap_or_default().to_owned();
        let mut stream = None;
        if chunked {
            // A refusal comes as soon as the headers are read, as Lambda's
            // does; a drop after so many bytes, once they are read.
            let cut_after = match state
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .answer_faults
                .front()
            {
                Some(Fault::DropAfter(bytes)) => Some(*bytes),
                Some(Fault::Status(_)) => Some(0),
                _ => None,
            };
            let streamed = read_chunked(&mut reader, cut_after);
            if !streamed.ended {
                // Cut by the fault (or the function went): refused below,
                // or nothing to answer on a closed connection.
                if cut_after.is_none() {
                    return;
                }
            }
            stream = Some(streamed);
        }

        if request_line.starts_with("GET") && path == EXTENSION_NEXT {
            // An extension that takes no events waits for good: until the
            // function's process closes the connection.
            let _ = reader.read_line(&mut String::new());
            return;
        }
        if request_line.starts_with("POST") && path == EXTENSION_REGISTER {
            let _ = posted.send(Posted {
                path,
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                arrived: SystemTime::now(),
                stream: None,
            });
            write!(
                writer,
                "HTTP/1.1 200 OK\r\nLambda-Extension-Identifier: 6b3f0c4e-extension\r\n\
                 Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
            )
            .expect("an answer");
            continue;
        }
        if request_line.starts_with("GET") {
            assert_eq!(path, "/2018-06-01/runtime/invocation/next");
            let invocation = match next_invocation(state, headers) {
                Next::Invocation(invocation) => invocation,
                Next::Fault(fault) => {
                    fail(&mut writer, fault);
                    if fault == Fault::Drop {
                        return;
                    }
                    continue;
                }
                Next::Over => {
                    let _ = write!(writer, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
                    return;
                }
            };
            let optional = |name: &str, value: Option<String>| {
                value
                    .map(|value| format!("{name}: {value}\r\n"))
                    .unwrap_or_default()
            };
            write!(
                writer,
                "HTTP/1.1 200 OK\r\nLambda-Runtime-Aws-Request-Id: {}\r\n{}{}\
                 Lambda-Runtime-Invoked-Function-Arn: {FUNCTION_ARN}\r\n{}\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
                invocation.id,
                optional(
                    "Lambda-Runtime-Deadline-Ms",
                    invocation.deadline_ms.map(|ms| ms.to_string())
                ),
                optional("Lambda-Runtime-Invocation-Id", invocation.invocation_id.clone())
                    + &optional("Lambda-Runtime-Aws-Tenant-Id", invocation.tenant_id.clone()),
                optional(
                    "Lambda-Runtime-Trace-Id",
                    Some(invocation.trace_id.clone()).filter(|id| !id.is_empty())
                ),
                invocation.event.len(),
                invocation.event
            )
            .expect("an answer");
        } else {
            let fault = state
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .answer_faults
                .pop_front();
            if let Some(fault) = fault {
                let mut queue = state.queue.lock().unwrap_or_else(PoisonError::into_inner);
                // A refusal (4xx) is final: Lambda is done with the
                // invocation; so is any fault on a stream, never posted twice.
                if matches!(fault, Fault::Status(400..500)) || stream.is_some() {
                    queue.outstanding = queue.outstanding.saturating_sub(1);
                    state.changed.notify_all();
                }
                queue.refused.push((path, fault));
                drop(queue);
                fail(&mut writer, fault);
                // A stream refused part-way leaves the rest of its body
                // unread: the connection cannot serve another request.
                if matches!(fault, Fault::Drop | Fault::DropAfter(_)) || stream.is_some() {
                    return;
                }
                continue;
            }
            if path.ends_with("/response") || path.ends_with("/error") {
                let mut queue = state.queue.lock().unwrap_or_else(PoisonError::into_inner);
                queue.outstanding = queue.outstanding.saturating_sub(1);
                state.changed.notify_all();
            }
            let arrived = SystemTime::now();
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let _ = posted.send(Posted {
                path,
                headers,
                body,
                arrived,
                stream,
            });
            const ACCEPTED: &str = r#"{"status":"OK"}"#;
            write!(
                writer,
                "HTTP/1.1 202 Accepted\r\nContent-Length: {}\r\n\r\n{ACCEPTED}",
                ACCEPTED.len()
            )
            .expect("an answer");
        }
    }
}

/// Reads a chunked body as it comes, until its last chunk and trailers,
/// the connection's end, or `cut_after` bytes.
fn read_chunked(reader: &mut impl BufRead, cut_after: Option<usize>) -> Streamed {
    let mut streamed = Streamed::default();
    // The prelude and the delimiter, until the delimiter is seen.
    let mut head = Vec::new();
    let mut past_prelude = false;
    let mut read = 0;
    loop {
        if cut_after.is_some_and(|cut| read >= cut) {
            return streamed;
        }
        let mut size_line = String::new();
        if reader.read_line(&mut size_line).unwrap_or(0) == 0 {
            return streamed;
        }
        let size_text = size_line.trim().split(';').next().unwrap_or_default();
        let Ok(size) = usize::from_str_radix(size_text, 16) else {
            return streamed;
        };
        if size == 0 {
            break;
        }
        let mut chunk = vec![0; size];
        let mut crlf = [0; 2];
        if reader.read_exact(&mut chunk).is_err() || reader.read_exact(&mut crlf).is_err() {
            return streamed;
        }
        streamed.chunks.push((Instant::now(), size));
        read += size;
        let mut data = chunk.as_slice();
        if !past_prelude {
            head.extend_from_slice(data);
            data = &[];
            if let Some(at) = head.windows(8).position(|window| window == [0; 8]) {
                past_prelude = true;
                streamed.prelude = serde_json::from_slice(&head[..at]).unwrap_or(Value::Null);
                let rest = head.split_off(at + 8);
                streamed.length += rest.len() as u64;
                keep(&mut streamed.body, &rest);
            }
        }
        streamed.length += data.len() as u64;
        keep(&mut streamed.body, data);
    }
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return streamed;
        }
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            streamed
                .trailers
                .insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    if !past_prelude {
        streamed.prelude = serde_json::from_slice(&head).unwrap_or(Value::Null);
    }
    streamed.ended = true;
    streamed
}

fn keep(body: &mut Vec<u8>, data: &[u8]) {
    let room = KEPT_AT_MOST.saturating_sub(body.len());
    body.extend_from_slice(&data[..data.len().min(room)]);
}

/// Starts a stand-in Runtime API that hands out `events` (request id,
/// event JSON) in order, each with `TRACE_HEADER`; returns its address and
/// what the function posts back.
pub fn runtime_api(events: Vec<(String, String)>) -> (String, Receiver<Posted>) {
    let api = FakeRuntimeApi::start(
        events
            .into_iter()
            .map(|(id, event)| Invocation {
                trace_id: TRACE_HEADER.to_owned(),
                ..Invocation::new(&id, event)
            })
            .collect(),
    );
    (api.address, api.posted)
}

/// The one answer posted for `invocation`, under its own invocation id.
pub fn answer_for<'a>(answers: &'a [Posted], invocation: &Invocation) -> &'a Posted {
    let found: Vec<_> = answers
        .iter()
        .filter(|posted| posted.request_id() == invocation.id)
        .collect();
    assert_eq!(found.len(), 1, "one answer for {}: {answers:?}", invocation.id);
    assert_eq!(
        found[0].header("lambda-runtime-invocation-id"),
        invocation.invocation_id.as_deref(),
        "{} answered under its own invocation id",
        invocation.id
    );
    found[0]
}

/// `count` invocations `inv-1`, `inv-2`…, each with `event(n)`.
pub fn invocations(count: usize, event: impl Fn(usize) -> Value) -> Vec<Invocation> {
    (1..=count)
        .map(|n| Invocation::new(&format!("req-{n:03}"), event(n)))
        .collect()
}

/// The answers by request id; each request id answered once.
pub fn by_request_id(posted: Vec<Posted>) -> HashMap<String, Posted> {
    let count = posted.len();
    let answers: HashMap<String, Posted> = posted
        .into_iter()
        .map(|post| (post.request_id().to_owned(), post))
        .collect();
    assert_eq!(answers.len(), count, "an invocation was answered twice");
    answers
}
