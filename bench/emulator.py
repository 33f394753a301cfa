"""A Lambda Runtime API on loopback, and the function process it serves.

Why Python, single-threaded, on raw sockets: the figures that matter are
read from the function's side (its CPU clock, its memory high-water mark)
and from two timestamps taken in this process right before the event is
written and right after the response is read. A hand-rolled HTTP/1.1 loop
over `selectors` keeps the work between those two timestamps to a parse of
one small request (tens of microseconds), with no threads, locks or
framework in the way, and it is the same for every implementation. A Rust
emulator would shave those microseconds but would be one more program to
build before anything can be measured.

CPU time comes from the kernel's per-process CPU clock (the clock
`clock_getcpuclockid(3)` names, read with `clock_gettime`): nanosecond
resolution, all threads included, even those that have exited, read at the
exact moments the function is blocked on the Runtime API.
"""

import json
import selectors
import socket
import subprocess
import time
import uuid

RUNTIME_PREFIX = "/2018-06-01/runtime"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:plant-store-bench"


def cpu_ns(pid):
    """Total CPU time (user + system, all threads) of process `pid`, in ns."""
    # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), as clock_getcpuclockid(3) builds it.
    return time.clock_gettime_ns(((~pid) << 3) | 2)


def user_sys_ticks(pid):
    """(user, system) CPU in clock ticks: coarse, but it tells the split."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def peak_rss_kib(pid):
    """The resident set's high-water mark (VmHWM), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


class FunctionDied(RuntimeError):
    pass


class _Connection:
    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""


class RuntimeApi:
    """The Runtime API for one function process: `/next`, `/response`,
    `/error`, with the headers `lambda_runtime` requires."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.setblocking(False)
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.pending_next = None  # the connection waiting in GET /next
        self.proc = None

    def close(self):
        for key in list(self.selector.get_map().values()):
            try:
                key.fileobj.close()
            except OSError:
                pass
        self.selector.close()

    def _requests(self, deadline):
        """Yields (connection, method, path, headers, body) as requests
        arrive, until `deadline` (monotonic seconds)."""
        while True:
            timeout = deadline - time.monotonic()
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
                    if self.pending_next is conn:
                        self.pending_next = None
                    continue
                conn.buffer += data
                while (request := _parse(conn)) is not None:
                    yield (conn, *request)

    def wait_next(self, timeout=60.0):
        """Returns once the function waits in GET /next."""
        deadline = time.monotonic() + timeout
        if self.pending_next is not None:
            return
        for conn, method, path, _headers, _body in self._requests(deadline):
            if method == "GET" and path == RUNTIME_PREFIX + "/invocation/next":
                self.pending_next = conn
                return
            if path == RUNTIME_PREFIX + "/init/error":
                _reply(conn, 202, b'{"status":"OK"}')
                raise FunctionDied("the function reported an init error")
            _reply(conn, 404, b"{}")

    def invoke(self, event, timeout=30.0, on_sent=None, on_response=None):
        """Delivers `event` (bytes) to the waiting GET /next and returns
        (response body, sent_ns, answered_ns), with the two timestamps taken
        right before the event is written and right after the response is
        read. `on_sent` and `on_response` run at those moments (for CPU
        clock readings), outside the timed window's edges."""
        self.wait_next(timeout)
        request_id = str(uuid.uuid4())
        deadline_ms = int(time.time() * 1000 + timeout * 1000)
        head = (
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: application/json\r\n"
            f"Lambda-Runtime-Aws-Request-Id: {request_id}\r\n"
            f"Lambda-Runtime-Deadline-Ms: {deadline_ms}\r\n"
            f"Lambda-Runtime-Invoked-Function-Arn: {FUNCTION_ARN}\r\n"
            f"Lambda-Runtime-Trace-Id: Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Sampled=0\r\n"
            f"Content-Length: {len(event)}\r\n\r\n"
        ).encode()
        conn, self.pending_next = self.pending_next, None
        if on_sent:
            on_sent()
        sent = time.perf_counter_ns()
        conn.sock.sendall(head + event)
        deadline = time.monotonic() + timeout
        for conn, method, path, _headers, body in self._requests(deadline):
            if method == "POST" and path == f"{RUNTIME_PREFIX}/invocation/{request_id}/response":
                answered = time.perf_counter_ns()
                if on_response:
                    on_response()
                _reply(conn, 202, b'{"status":"OK"}')
                return body, sent, answered
            if method == "POST" and path == f"{RUNTIME_PREFIX}/invocation/{request_id}/error":
                _reply(conn, 202, b'{"status":"OK"}')
                raise FunctionDied(f"the function reported an invocation error: {body[:500]!r}")
            if method == "GET" and path == RUNTIME_PREFIX + "/invocation/next":
                raise RuntimeError("the function asked for the next event without answering this one")
            _reply(conn, 404, b"{}")


def _parse(conn):
    """One complete HTTP/1.1 request off the connection's buffer, or None."""
    end = conn.buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = conn.buffer[:end].decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    rest = conn.buffer[end + 4 :]
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body, pos = b"", 0
        while True:
            eol = rest.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = int(rest[pos:eol].split(b";")[0], 16)
            if len(rest) < eol + 2 + size + 2:
                return None
            body += rest[eol + 2 : eol + 2 + size]
            pos = eol + 2 + size + 2
            if size == 0:
                # Trailers (none expected) end with an empty line.
                if rest[pos - 2 : pos] != b"\r\n":
                    return None
                break
        conn.buffer = rest[pos:]
    else:
        length = int(headers.get("content-length", "0"))
        if len(rest) < length:
            return None
        body, conn.buffer = rest[:length], rest[length:]
    return method, path.split("?", 1)[0], headers, body


def _reply(conn, status, body):
    reason = {200: "OK", 202: "Accepted", 404: "Not Found"}[status]
    conn.sock.sendall(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def lambda_environment(runtime_api, extra):
    """The environment Lambda gives a function, and nothing of this
    machine's: no HOME with credentials, no CA variables unless asked."""
    env = {
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
    }
    env.update(extra)
    return env


class FunctionProcess:
    """One fresh function process (a cold start) under its own Runtime API."""

    def __init__(self, argv, env, log_path, cwd=None, preexec_fn=None):
        self.api = RuntimeApi()
        self.argv, self.log_path, self.cwd = argv, log_path, cwd
        # Runs in the child between fork and exec: bench/run.py moves the
        # process into a CPU-quota cgroup there, so init already runs under it.
        self.preexec_fn = preexec_fn
        self.env = lambda_environment(self.api.address, env)
        self.proc = None

    def start(self):
        """Execs the function and waits for its first GET /next. Returns
        (init wall ns, init CPU ns)."""
        log = open(self.log_path, "ab")
        started = time.perf_counter_ns()
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=self.preexec_fn,
        )
        log.close()
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

    def cpu(self):
        return cpu_ns(self.proc.pid)

    def peak_rss_kib(self):
        return peak_rss_kib(self.proc.pid)

    def user_sys_ticks(self):
        return user_sys_ticks(self.proc.pid)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.api.close()
