"""A Lambda Runtime API on loopback, and the function process it serves.

Why Python, single-threaded, on raw sockets: the figures that matter are
read from the function's side (its CPU clock, its memory high-water mark)
and from two timestamps taken in this process right before the event is
written and right after the response is read. A hand-rolled HTTP/1.1 loop
over `selectors` keeps the work between those two timestamps to a parse of
one small request (tens of microseconds), with no threads, locks or
framework in the way, and it is the same for every implementation. No
library fits: an HTTP server framework would put its own threads or event
loop and routing inside the timed window, and none of them lets the caller
hold a `GET /next` open until the harness decides to answer it. A Rust
emulator would shave those microseconds but would be one more program to
build before anything can be measured.

Two ways to serve. `invoke` is the sequential path (one event, one answer,
nothing else in flight), used for every cold and warm figure: the window
between the two timestamps holds only this invocation. `serve` is the
concurrent path, as on Lambda Managed Instances: every parked `GET /next`
(one per worker, each on its own connection) gets an event as long as fewer
than `concurrency` are in flight; its latencies include the queueing in
this one loop, which is part of what a throughput figure measures.

Every event carries a fresh request id, trace id and
`Lambda-Runtime-Invocation-Id`; every answer must come on that request id's
path, once, and echo that invocation id exactly (`require_echo`).

CPU time comes from the kernel's per-process CPU clock (the clock
`clock_getcpuclockid(3)` names, read with `clock_gettime`): nanosecond
resolution, all threads included, even those that have exited, read at the
exact moments the function is blocked on the Runtime API.

Also the small process and HTTP helpers that the proxy and DynamoDB Local
share with it (`stop`, `parse_head`).
"""

import base64
import collections
import contextlib
import glob
import json
import selectors
import socket
import subprocess
import time
import uuid

import psutil
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

RUNTIME_PREFIX = "/2018-06-01/runtime"
NEXT = RUNTIME_PREFIX + "/invocation/next"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:plant-store-bench"
ACCEPTED = b'{"status":"OK"}'


def cpu_ns(pid):
    """Total CPU time (user + system, all threads) of process `pid`, in ns."""
    # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), as clock_getcpuclockid(3) builds it.
    return time.clock_gettime_ns(((~pid) << 3) | 2)


def status_kib(pid, key="VmHWM"):
    """A size from /proc/PID/status in KiB: VmHWM, the resident set's
    high-water mark (what Lambda reports as Max Memory Used), or VmRSS."""
    with open(f"/proc/{pid}/status") as status:
        return next((int(line.split()[1]) for line in status if line.startswith(key + ":")), None)


def stop(proc, timeout=5.0):
    """SIGTERM (a JVM started from a script ignores SIGINT), then SIGKILL."""
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def parse_head(head):
    """An HTTP/1.1 request head (bytes, no blank line): its request line and
    its headers, names in lower case."""
    lines = head.decode("latin-1").split("\r\n")
    fields = (line.partition(":") for line in lines[1:])
    return lines[0], {name.strip().lower(): value.strip() for name, _, value in fields}


class FunctionDied(RuntimeError):
    pass


class ProtocolError(RuntimeError):
    """The function broke the Runtime API contract (a wrong path, request id
    or invocation id)."""


class _Connection:
    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""


class Invocation:
    """One event handed out: its ids, and its answer once it came."""

    def __init__(self, event, timeout, sampled=False):
        self.request_id = str(uuid.uuid4())
        self.invocation_id = str(uuid.uuid4())
        self.trace_id = (
            f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};"
            f"Sampled={int(sampled)}"
        )
        self.head = (
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: application/json\r\n"
            f"Lambda-Runtime-Aws-Request-Id: {self.request_id}\r\n"
            f"Lambda-Runtime-Deadline-Ms: {int(time.time() * 1000 + timeout * 1000)}\r\n"
            f"Lambda-Runtime-Invoked-Function-Arn: {FUNCTION_ARN}\r\n"
            f"Lambda-Runtime-Trace-Id: {self.trace_id}\r\n"
            f"Lambda-Runtime-Invocation-Id: {self.invocation_id}\r\n"
            f"Content-Length: {len(event)}\r\n\r\n"
        ).encode() + event
        self.sent = self.answered = self.body = None

    @property
    def wall_ns(self):
        return self.answered - self.sent


class RuntimeApi:
    """The Runtime API for one function process: `/next`, `/response`,
    `/error`, `/init/error`, with the headers `lambda_runtime` requires."""

    def __init__(self, require_echo=True, sampled=False):
        self.sampled = sampled  # every event's trace header says Sampled=1 (X-Ray)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.parked = collections.deque()  # connections waiting in GET /next
        self.max_parked = 0  # the most GET /next parked at once
        self.require_echo = require_echo
        self.missing_echo = 0  # answers without the invocation id (require_echo off)
        self.deadline = 0.0
        self.proc = None

    def close(self):
        for key in list(self.selector.get_map().values()):
            with contextlib.suppress(OSError):
                key.fileobj.close()
        self.selector.close()

    def _requests(self):
        """Yields (connection, method, path, headers, body) as requests
        arrive, until `self.deadline` (monotonic seconds)."""
        while True:
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                raise TimeoutError("the function did not call the Runtime API in time")
            events = self.selector.select(min(timeout, 0.5))
            if not events and self.proc is not None and self.proc.poll() is not None:
                raise FunctionDied(f"the function exited with {self.proc.returncode}")
            for key, _ in events:
                if key.data is None:
                    sock, _ = self.listener.accept()
                    sock.setblocking(False)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self.selector.register(sock, selectors.EVENT_READ, _Connection(sock))
                    continue
                conn = key.data
                try:
                    data = conn.sock.recv(262144)
                except ConnectionError:
                    data = b""
                if not data:
                    self.selector.unregister(conn.sock)
                    conn.sock.close()
                    if conn in self.parked:
                        self.parked.remove(conn)
                    continue
                conn.buffer += data
                while (request := _parse(conn)) is not None:
                    yield (conn, *request)

    def _other(self, conn, method, path):
        """A request that is neither an answer nor `/next`."""
        if path == RUNTIME_PREFIX + "/init/error":
            _reply(conn, 202, ACCEPTED)
            raise FunctionDied("the function reported an init error")
        _reply(conn, 404, b"{}")
        raise ProtocolError(f"the function called {method} {path}")

    def _park(self, conn):
        self.parked.append(conn)
        self.max_parked = max(self.max_parked, len(self.parked))

    def _check_echo(self, invocation, headers):
        echoed = headers.get("lambda-runtime-invocation-id")
        if echoed is None and not self.require_echo:
            self.missing_echo += 1
        elif echoed != invocation.invocation_id:
            raise ProtocolError(
                f"the answer to {invocation.request_id} carried Lambda-Runtime-Invocation-Id {echoed!r}, "
                f"not {invocation.invocation_id!r}"
            )

    def wait_next(self, timeout=60.0, count=1):
        """Returns once the function waits in GET /next `count` times at once."""
        self.deadline = time.monotonic() + timeout
        if len(self.parked) >= count:
            return
        for conn, method, path, _headers, _body in self._requests():
            if method != "GET" or path != NEXT:
                self._other(conn, method, path)
            self._park(conn)
            if len(self.parked) >= count:
                return

    def invoke(self, event, timeout=30.0, on_sent=None, on_response=None):
        """The sequential path: delivers `event` (bytes) to the waiting GET
        /next and returns (response body, sent_ns, answered_ns), with the two
        timestamps taken right before the event is written and right after
        the response is read. `on_sent` and `on_response` run at those
        moments (for CPU clock readings), outside the timed window's edges."""
        self.wait_next(timeout)
        invocation = Invocation(event, timeout, self.sampled)
        conn = self.parked.popleft()
        if on_sent:
            on_sent()
        sent = time.perf_counter_ns()
        conn.sock.sendall(invocation.head)
        self.deadline = time.monotonic() + timeout
        answer = f"{RUNTIME_PREFIX}/invocation/{invocation.request_id}/"
        for conn, method, path, headers, body in self._requests():
            if method == "POST" and path == answer + "response":
                answered = time.perf_counter_ns()
                if on_response:
                    on_response()
                _reply(conn, 202, ACCEPTED)
                self._check_echo(invocation, headers)
                return body, sent, answered
            if method == "POST" and path == answer + "error":
                _reply(conn, 202, ACCEPTED)
                raise FunctionDied(f"the function reported an invocation error: {body[:500]!r}")
            if method == "GET" and path == NEXT:
                raise ProtocolError("the function asked for the next event without answering this one")
            self._other(conn, method, path)

    def serve(self, events, concurrency, timeout=30.0):
        """The concurrent path: hands each event of `events` (bytes) to a
        parked GET /next while fewer than `concurrency` are in flight, and
        returns the `Invocation`s in the order they were answered. Each
        answer must come once, on its own request id's path, echoing its
        invocation id. Returns when every event is answered."""
        events, requests = iter(events), self._requests()
        in_flight, done = {}, []
        exhausted = False
        self.deadline = time.monotonic() + timeout
        while True:
            while self.parked and len(in_flight) < concurrency and not exhausted:
                event = next(events, None)
                if event is None:
                    exhausted = True
                    break
                invocation = Invocation(event, timeout, self.sampled)
                in_flight[invocation.request_id] = invocation
                invocation.sent = time.perf_counter_ns()
                self.parked.popleft().sock.sendall(invocation.head)
            if exhausted and not in_flight:
                return done
            conn, method, path, headers, body = next(requests)
            if method == "GET" and path == NEXT:
                self._park(conn)
                continue
            prefix = RUNTIME_PREFIX + "/invocation/"
            request_id, _, kind = path.removeprefix(prefix).partition("/")
            if method != "POST" or not path.startswith(prefix) or kind not in ("response", "error"):
                self._other(conn, method, path)
            invocation = in_flight.pop(request_id, None)
            if invocation is None:
                _reply(conn, 404, b"{}")
                raise ProtocolError(f"an answer to {request_id!r}, which is not in flight")
            invocation.answered = time.perf_counter_ns()
            _reply(conn, 202, ACCEPTED)
            if kind == "error":
                raise FunctionDied(f"the function reported an invocation error: {body[:500]!r}")
            self._check_echo(invocation, headers)
            invocation.body = body
            done.append(invocation)
            self.deadline = time.monotonic() + timeout


def _parse(conn):
    """One complete HTTP/1.1 request off the connection's buffer, or None."""
    end = conn.buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    request_line, headers = parse_head(conn.buffer[:end])
    method, path, _ = request_line.split(" ", 2)
    if "transfer-encoding" in headers:
        # Every implementation measured sends a Content-Length.
        raise ProtocolError(f"{method} {path} came with Transfer-Encoding: {headers['transfer-encoding']}")
    rest, length = conn.buffer[end + 4 :], int(headers.get("content-length", "0"))
    if len(rest) < length:
        return None
    body, conn.buffer = rest[:length], rest[length:]
    return method, path.split("?", 1)[0], headers, body


def _reply(conn, status, body):
    reason = {202: "Accepted", 404: "Not Found"}[status]
    conn.sock.sendall(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


class XrayDaemon:
    """A UDP socket where Lambda's X-Ray daemon would listen, which takes
    the function's spans: each datagram the daemon's header line, `T1S` or
    `T1U`, and the base64 of an OTLP `ExportTraceServiceRequest`. It is read
    only when asked (`spans`), never while an invocation is timed: what the
    function pays for a datagram is the same whether or not anyone reads
    it, and the kernel drops what overflows the buffer."""

    HEADER = {"format": "json", "version": 1}

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"

    def datagrams(self):
        """Every datagram received since the last call, decoded with
        OpenTelemetry's generated messages: `(mark, spans)` each, a span
        as `Span` (`trace_id`, `span_id`, `parent_span_id`, `name`, `kind`,
        `attributes`...)."""
        out = []
        while True:
            try:
                datagram = self.sock.recv(65536)
            except BlockingIOError:
                return out
            header, _, body = datagram.partition(b"\n")
            try:
                header = json.loads(header)
            except ValueError:
                header = None
            if header != self.HEADER or body[:3] not in (b"T1S", b"T1U"):
                raise ProtocolError(f"a datagram to the X-Ray daemon without its header: {datagram[:200]!r}")
            request = ExportTraceServiceRequest()
            request.ParseFromString(base64.b64decode(body[3:], validate=True))
            spans = [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
            out.append((body[:3].decode(), spans))

    def close(self):
        self.sock.close()


def lambda_environment(runtime_api, extra):
    """The environment Lambda gives a function, and nothing of this
    machine's: no HOME with credentials, no CA variables unless asked."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TZ": ":UTC",
        "AWS_LAMBDA_RUNTIME_API": runtime_api,
        "AWS_LAMBDA_FUNCTION_NAME": "plant-store-bench",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/plant-store-bench",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/01/[$LATEST]bench",
        "AWS_LAMBDA_LOG_FORMAT": "JSON",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_SESSION_TOKEN": "bench",
        **extra,
    }


class FunctionProcess:
    """One fresh function process (a cold start) under its own Runtime API."""

    def __init__(self, argv, env, log_path, spawn_in=None, require_echo=True, sampled=False):
        self.api = RuntimeApi(require_echo, sampled)
        self.argv, self.log_path = argv, log_path
        # A context the process is spawned in: bench/run.py's CPU-quota
        # cgroup, which the harness joins just while it spawns, so that the
        # child starts inside it and init already runs under the quota.
        # (Not a preexec_fn: that forces a full fork and runs Python in the
        # child, about 1.3 ms more on the child's CPU clock here, where
        # without it the child is a vfork that execs at once.)
        self.spawn_in = spawn_in or contextlib.nullcontext
        self.env = lambda_environment(self.api.address, env)
        self.proc = None

    def start(self):
        """Execs the function and waits for its first GET /next. Returns
        (init wall ns, init CPU ns)."""
        with open(self.log_path, "ab") as log, self.spawn_in():
            started = time.perf_counter_ns()
            self.proc = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.api.proc = self.proc
        self.api.wait_next()
        ready = time.perf_counter_ns()
        return ready - started, cpu_ns(self.proc.pid)

    def invoke(self, event):
        """One invocation. Returns (parsed response, wall ns, CPU ns); the
        process's CPU clock at the response is left in `self.cpu_at_response`."""
        marks = {}
        pid = self.proc.pid
        body, sent, answered = self.api.invoke(
            event,
            on_sent=lambda: marks.__setitem__("before", cpu_ns(pid)),
            on_response=lambda: marks.__setitem__("after", cpu_ns(pid)),
        )
        self.cpu_at_response = marks["after"]
        return json.loads(body), answered - sent, marks["after"] - marks["before"]

    def serve(self, events, concurrency):
        """Concurrent invocations (see `RuntimeApi.serve`): returns the
        answered `Invocation`s, each with its parsed response in `.response`."""
        done = self.api.serve(events, concurrency)
        for invocation in done:
            invocation.response = json.loads(invocation.body)
        return done

    def cpu(self):
        return cpu_ns(self.proc.pid)

    def kib(self, key="VmHWM"):
        return status_kib(self.proc.pid, key)

    def context_switches(self):
        """Voluntary and involuntary context switches of every live thread
        (/proc/PID/task/*/status): a thread that sleeps and is woken counts
        one voluntary switch each time."""
        total = 0
        for task in glob.glob(f"/proc/{self.proc.pid}/task/*/status"):
            with contextlib.suppress(OSError), open(task) as status:
                total += sum(int(line.split()[1]) for line in status if "ctxt_switches:" in line)
        return total

    def user_system_s(self):
        """(user, system) CPU seconds: coarse (clock ticks), but it tells the split."""
        return tuple(psutil.Process(self.proc.pid).cpu_times()[:2])

    def stop(self):
        stop(self.proc)
        self.api.close()
