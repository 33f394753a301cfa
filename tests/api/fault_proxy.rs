//! A fault proxy: a small TCP proxy between the function's DynamoDB client
//! and DynamoDB Local that a test steers, to meet the faults real
//! deployments meet (slowness, refused connections, resets, silence, lost
//! answers, throttling) without touching the code under test.
//!
//! It speaks just enough HTTP/1.1 to find request and response boundaries
//! (`Content-Length`, which is how both the SDK and DynamoDB Local frame
//! their messages), so a fault can strike one request at a precise moment:
//! before DynamoDB sees it, or after DynamoDB has applied it.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// What the proxy does to each request while the fault is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward the request and the answer untouched.
    Pass,
    /// Forward the request at once, so DynamoDB applies it, and hold its
    /// answer back this long: a slow DynamoDB, seen from the function.
    Latency(Duration),
    /// Reset the connection once the request head has arrived, before its
    /// body is read: DynamoDB never sees the request.
    ResetMidRequest,
    /// Take the request and never answer nor close: only the client's
    /// timeouts end the wait.
    BlackHole,
    /// Forward the request, wait for DynamoDB's answer, then reset the
    /// connection instead of passing the answer on: the write is applied but
    /// the function never learns it.
    CutAfterWrite,
    /// Forward the request, wait for DynamoDB's answer, then pass on its
    /// head and half its body and nothing more, the connection left open:
    /// the write is applied and its answer stops coming.
    StallMidAnswer,
    /// Answer for DynamoDB with a `ProvisionedThroughputExceededException`;
    /// DynamoDB never sees the request.
    Throttle,
    /// Answer for DynamoDB with a 500 `InternalServerError`; DynamoDB never
    /// sees the request.
    ServerError,
}

/// DynamoDB's throttling answer, byte for byte as the service frames it.
const THROTTLE_BODY: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."}"#;

/// DynamoDB's answer when it fails on its side.
const SERVER_ERROR_BODY: &str =
    r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}"#;

/// Request and response heads longer than this are not DynamoDB's.
const MAX_HEAD_BYTES: usize = 64 * 1024;

#[derive(Debug)]
struct Shared {
    upstream: SocketAddr,
    /// The current fault, and for how many more requests it applies before
    /// the proxy goes back to `Pass` (`None`: until changed).
    fault: Mutex<(Fault, Option<u32>)>,
    connections: AtomicU32,
    requests: AtomicU32,
    forwarded: AtomicU32,
    /// Every request that arrived whole, in order.
    recorded: Mutex<Vec<Recorded>>,
    /// The `x-amzn-RequestId` of every answer passed back, in order.
    request_ids: Mutex<Vec<String>>,
}

/// One request as the function sent it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Header names in lower case, with their values.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The value of the header `name` (lower case), if sent once or more.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

impl Shared {
    /// Notes the request id of an answer passed back to the client.
    fn answered(&self, response: &str) {
        let head = response.split("\r\n\r\n").next().unwrap_or_default();
        let id = header_lines(head.as_bytes())
            .into_iter()
            .find(|(name, _)| name == "x-amzn-requestid")
            .map(|(_, value)| value);
        if let Some(id) = id {
            self.request_ids
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(id);
        }
    }

    fn next_fault(&self) -> Fault {
        let mut state = self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        let (fault, remaining) = &mut *state;
        let current = *fault;
        if let Some(left) = remaining {
            *left -= 1;
            if *left == 0 {
                *state = (Fault::Pass, None);
            }
        }
        current
    }
}

/// A proxy listening on a loopback port of its own, forwarding to
/// `upstream`. Its tasks run on the runtime of the test that started it and
/// end with it.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// The accept loop; it owns the listener and every open connection.
    server: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy in front of the DynamoDB endpoint `upstream`
    /// (`http://127.0.0.1:<port>`), passing everything through.
    pub async fn start(upstream: &str) -> Self {
        let upstream = upstream
            .strip_prefix("http://")
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("upstream {upstream:?} is not http://<ip>:<port>"));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let addr = listener.local_addr().expect("the proxy's address");
        let shared = Arc::new(Shared {
            upstream,
            fault: Mutex::new((Fault::Pass, None)),
            connections: AtomicU32::new(0),
            requests: AtomicU32::new(0),
            forwarded: AtomicU32::new(0),
            recorded: Mutex::default(),
            request_ids: Mutex::default(),
        });
        let server = Some(tokio::spawn(serve(listener, Arc::clone(&shared))));
        Self { addr, shared, server }
    }

    /// The endpoint to give the function's DynamoDB client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Applies `fault` to every request from now on.
    pub fn set(&self, fault: Fault) {
        *self.shared.fault.lock().unwrap_or_else(PoisonError::into_inner) = (fault, None);
    }

    /// Applies `fault` to the next `requests` requests, then passes again.
    pub fn set_for(&self, requests: u32, fault: Fault) {
        assert!(requests > 0, "a fault for zero requests is no fault");
        *self.shared.fault.lock().unwrap_or_else(PoisonError::into_inner) = (fault, Some(requests));
    }

    /// Stops listening and drops every open connection, so that connecting
    /// is refused (ECONNREFUSED) as when DynamoDB is down. Returns once the
    /// port is closed.
    pub async fn refuse(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
            // Aborting drops the listener and the JoinSet of connections.
            let _ = server.await;
        }
    }

    /// Listens again on the same port after `refuse`.
    pub async fn restore(&mut self) {
        assert!(self.server.is_none(), "the proxy is already listening");
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(listener) => break listener,
                Err(err) if Instant::now() < deadline => {
                    eprintln!("fault proxy: re-binding {} failed ({err}); retrying", self.addr);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => panic!("fault proxy: cannot listen on {} again: {err}", self.addr),
            }
        };
        self.server = Some(tokio::spawn(serve(listener, Arc::clone(&self.shared))));
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u32 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Request heads received so far: one per attempt the SDK made.
    pub fn requests(&self) -> u32 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Every request that arrived whole so far (faults that reset before the
    /// body is read record nothing).
    pub fn recorded(&self) -> Vec<Recorded> {
        self.shared
            .recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The request ids of the answers the function got so far, DynamoDB's
    /// and the proxy's own.
    pub fn request_ids(&self) -> Vec<String> {
        self.shared
            .request_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Requests that reached DynamoDB so far.
    pub fn forwarded(&self) -> u32 {
        self.shared.forwarded.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    shared.connections.fetch_add(1, Ordering::SeqCst);
                    connections.spawn(relay(client, Arc::clone(&shared)));
                }
                Err(err) => eprintln!("fault proxy: accept failed: {err}"),
            },
            Some(_) = connections.join_next() => {}
        }
    }
}

/// One client connection: request by request, apply the current fault.
/// Any I/O error ends the connection, as it would for a real server.
async fn relay(client: TcpStream, shared: Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let mut client = BufReader::new(client);
    let mut upstream: Option<BufReader<TcpStream>> = None;
    loop {
        let head = match read_head(&mut client).await {
            Ok(Some(head)) => head,
            Ok(None) | Err(_) => return,
        };
        shared.requests.fetch_add(1, Ordering::SeqCst);
        let fault = shared.next_fault();
        if fault == Fault::ResetMidRequest {
            return reset(client.into_inner());
        }
        let Ok(body) = read_body(&mut client, &head).await else {
            return;
        };
        shared
            .recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Recorded {
                headers: header_lines(&head),
                body: body.clone(),
            });
        match fault {
            Fault::BlackHole => {
                // Swallow whatever else comes until the client gives up.
                let _ = tokio::io::copy(&mut client, &mut tokio::io::sink()).await;
                return;
            }
            Fault::Throttle | Fault::ServerError => {
                let (status, request_id, body) = if fault == Fault::Throttle {
                    ("400 Bad Request", "fault-proxy-throttle", THROTTLE_BODY)
                } else {
                    (
                        "500 Internal Server Error",
                        "fault-proxy-server-error",
                        SERVER_ERROR_BODY,
                    )
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.0\r\n\
                     x-amzn-RequestId: {request_id}\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                if client.get_mut().write_all(response.as_bytes()).await.is_err() {
                    return;
                }
                shared.answered(&response);
                continue;
            }
            _ => {}
        }

        let stream = match &mut upstream {
            Some(stream) => stream,
            None => match TcpStream::connect(shared.upstream).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    upstream.insert(BufReader::new(stream))
                }
                // DynamoDB itself is down: the client sees its connection close.
                Err(_) => return,
            },
        };
        if forward(stream, &head, &body).await.is_err() {
            return;
        }
        shared.forwarded.fetch_add(1, Ordering::SeqCst);
        let (response, head_len) = match read_head(stream).await {
            Ok(Some(response_head)) => match read_body(stream, &response_head).await {
                Ok(response_body) => ([&response_head[..], &response_body].concat(), response_head.len()),
                Err(_) => return,
            },
            Ok(None) | Err(_) => return,
        };

        match fault {
            Fault::CutAfterWrite => return reset(client.into_inner()),
            Fault::StallMidAnswer => {
                let half = head_len + (response.len() - head_len) / 2;
                if client.get_mut().write_all(&response[..half]).await.is_ok() {
                    let _ = tokio::io::copy(&mut client, &mut tokio::io::sink()).await;
                }
                return;
            }
            Fault::Latency(delay) => tokio::time::sleep(delay).await,
            _ => {}
        }
        if client.get_mut().write_all(&response).await.is_err() {
            return;
        }
        shared.answered(&String::from_utf8_lossy(&response));
    }
}

async fn forward(upstream: &mut BufReader<TcpStream>, head: &[u8], body: &[u8]) -> io::Result<()> {
    let stream = upstream.get_mut();
    stream.write_all(head).await?;
    stream.write_all(body).await
}

/// Closes with a TCP reset (RST), not an orderly FIN.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// The head of the next message (start line and headers, with the blank
/// line), or `None` at a clean end of stream between messages.
async fn read_head<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let read = reader.read_until(b'\n', &mut head).await?;
        if read == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        if head == b"\r\n" {
            head.clear(); // an empty line before a message is to be ignored (RFC 9112 §2.2)
        } else if head.ends_with(b"\r\n\r\n") {
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "head too long"));
        }
    }
}

fn header_lines(head: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(head)
        .split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect()
}

/// The body that follows `head`, framed by its `Content-Length` (none: empty).
async fn read_body<R: AsyncRead + Unpin>(reader: &mut BufReader<R>, head: &[u8]) -> io::Result<Vec<u8>> {
    let text = String::from_utf8_lossy(head);
    let mut length = 0;
    for line in text.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the fault proxy only understands Content-Length framing",
            ));
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = value
                .trim()
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad Content-Length"))?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    Ok(body)
}
