#!/usr/bin/env python3
"""The plant-store cold-start and warm-latency benchmark (`make bench`).

Runs the release binary as Lambda does, under a Runtime API emulator on
loopback (bench/emulator.py), against DynamoDB Local over plain HTTP and
over HTTPS through a TLS terminator with a throwaway CA (bench/proxy.py),
beside the same handler in Python (boto3), in Node.js (@aws-sdk/client-dynamodb
v3) and in Rust the way the runtime's own examples write it (bench/peers/).
Then the same at Lambda's memory sizes, each inside a cgroup whose CPU quota
is the share of a vCPU that size buys; throughput per execution environment
at several concurrencies, as on Lambda Managed Instances (the Rust
implementations, against a store with a stated latency); a long warm run per
implementation for its memory over time; and what a million creates cost.
Writes results.json, results.md and the charts (bench/report.py) into
bench/results/ (or --out). Method and results: docs/performance.md.

    .tools/venv/bin/python bench/run.py                 # the full benchmark
    .tools/venv/bin/python bench/run.py --smoke         # a few checked invocations of each implementation
    .tools/venv/bin/python bench/run.py --install-only  # the peers' dependencies, into .tools/bench/
    .tools/venv/bin/python bench/run.py --memory 128 --long 5000   # a quicker run: one memory size, a short long run
    .tools/venv/bin/python bench/run.py --impl rust --transport https \\
        --rust 'before=/path/a,PLANTS_PREWARM=0' --rust 'after=/path/b'   # compare Rust builds
"""

import argparse
import contextlib
import copy
import dataclasses
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import report  # noqa: E402
from ddb import DynamoDBLocal  # noqa: E402
from emulator import FunctionDied, FunctionProcess, ProtocolError, cpu_ns  # noqa: E402
from proxy import SYSTEM_BUNDLE_CANDIDATES, Proxy, make_certificates  # noqa: E402

TOKEN_SHA256 = hashlib.sha256(b"plant-store-dev-token").hexdigest()
TOOLS = os.path.join(REPO, ".tools", "bench")
PY_VENV = os.path.join(TOOLS, "python")
NODE_DIR = os.path.join(TOOLS, "node")
PEERS = os.path.join(HERE, "peers")
PY_REQUIREMENTS = os.path.join(PEERS, "python", "requirements.txt")
RUST_PEER_DIR = os.path.join(PEERS, "rust")
RUST_PEER_TARGET = os.path.join(TOOLS, "rust-target")
RUST_PEER_BIN = os.path.join(RUST_PEER_TARGET, "release", "plant-store-bench-rust-peer")
IMPLS = ("rust", "idiomatic", "python", "node")
TRANSPORTS = ("http", "https")
PLANT = {"name": "Monstera deliciosa", "tag": "aroid"}
SYSTEM_BUNDLE = next((p for p in SYSTEM_BUNDLE_CANDIDATES if os.path.isfile(p)), None)
BROKEN = (FunctionDied, TimeoutError, ProtocolError)  # how a function under test fails
# Settings the benchmark no longer takes as options, kept in results.json as before.
DDB_WARMUP = 3000  # writes to warm DynamoDB Local's JVM first
MEMORY_TRANSPORT, LONG_TRANSPORT = "https", "http"
SETTINGS = ("cold", "warm", "ddb_warmup", "memory", "memory_cold", "memory_warm", "long", "concurrency")
SETTINGS += ("concurrency_invocations", "store_latency_ms", "ddb_latency_ms")
SUBJECT_FIELDS = ("kind", "size_bytes", "size_note", "env", "certs")


def log(message):
    print(message, file=sys.stderr, flush=True)


def fail(message):
    raise SystemExit(f"error: {message}")


# ---- installing the peers ----------------------------------------------------


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _stamp(folder, digest):
    return os.path.join(folder, ".stamp-" + digest[:16])


def rust_peer_stamp():
    """The idiomatic peer's build stamp, keyed on its manifest, lock file and source."""
    digests = "".join(
        _digest(os.path.join(RUST_PEER_DIR, name)) for name in ("Cargo.toml", "Cargo.lock", "src/main.rs")
    )
    return _stamp(RUST_PEER_TARGET, hashlib.sha256(digests.encode()).hexdigest())


def rust_peer_built():
    return os.path.exists(rust_peer_stamp()) and os.path.isfile(RUST_PEER_BIN)


def build_rust_peer():
    """Builds the idiomatic Rust peer (crates.io only, its own Cargo.lock)
    into .tools/bench/rust-target, as its own workspace, with none of this
    repository's cargo settings: cargo reads `.cargo/config.toml` from the
    working directory upwards (not from the manifest's folder), so the build
    runs in a scratch folder outside the repository, and the environment
    loses any AWS_LC_SYS_* and CARGO_PROFILE_* settings. The first build
    takes several minutes (the SDK's default features)."""
    if shutil.which("cargo") is None:
        fail("cargo is needed for the idiomatic Rust peer: install Rust with rustup")
    log("building the idiomatic Rust peer into .tools/bench/rust-target (several minutes the first time)")
    skip = ("AWS_LC_SYS_", "CARGO_PROFILE_", "CARGO_BUILD_", "CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_TARGET_DIR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip[:4]) and k not in skip[4:]}
    cargo = ["nice", "-n", "10", "cargo", "build", "--release", "--locked", "--target-dir", RUST_PEER_TARGET]
    with tempfile.TemporaryDirectory(prefix="plant-store-peer-build-") as outside:
        manifest = os.path.join(RUST_PEER_DIR, "Cargo.toml")
        subprocess.run([*cargo, "--manifest-path", manifest], cwd=outside, env=env, check=True)


def install_python_peer():
    log("installing the Python peer's dependencies (boto3) into .tools/bench/python")
    if not os.path.exists(os.path.join(PY_VENV, "bin", "python")):
        subprocess.run([sys.executable, "-m", "venv", PY_VENV], check=True)
    pip = [os.path.join(PY_VENV, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-input", "-r", PY_REQUIREMENTS], check=True)


def install_node_peer():
    log("installing the Node.js peer's dependencies (@aws-sdk/client-dynamodb) into .tools/bench/node")
    os.makedirs(NODE_DIR, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(PEERS, "node", name), NODE_DIR)
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR, check=True)


def install_peers(impls, build_rust=True):
    """Installs the peers' pinned dependencies into .tools/bench/ (PyPI and
    npm only) and builds the idiomatic Rust peer (unless `build_rust` is
    false), each once per change of what it is made from: a stamp named
    after its digest marks the folder it went into."""
    if "node" in impls and not (shutil.which("node") and shutil.which("npm")):
        fail("node and npm are needed for the Node.js peer: install Node.js 20+")
    for impl, stamp, made, install in (
        ("idiomatic", rust_peer_stamp(), os.path.isfile(RUST_PEER_BIN), build_rust_peer),
        ("python", _stamp(PY_VENV, _digest(PY_REQUIREMENTS)), True, install_python_peer),
        ("node", _stamp(NODE_DIR, _digest(os.path.join(PEERS, "node", "package-lock.json"))), True, install_node_peer),
    ):
        if impl in impls and (build_rust or impl != "idiomatic") and not (os.path.exists(stamp) and made):
            install()
            for old in glob.glob(os.path.join(os.path.dirname(stamp), ".stamp-*")):
                os.remove(old)
            open(stamp, "w").close()
    if "node" in impls:  # the handler beside its node_modules, as in a deployment package
        for name in ("bootstrap.js", "handler.js"):
            shutil.copy(os.path.join(PEERS, "node", name), NODE_DIR)


def dir_size(path, skip=()):
    total = 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d not in skip]
        paths = (os.path.join(root, name) for name in files)
        total += sum(os.path.getsize(p) for p in paths if not os.path.islink(p))
    return total


# ---- the subjects: what is measured ------------------------------------------


@dataclasses.dataclass
class Subject:
    """One implementation as run: argv, extra environment, how a Rust build
    loads its CAs (`certs`), and whether every answer must echo
    Lambda-Runtime-Invocation-Id (an older build can be measured with
    echo=optional)."""

    name: str
    kind: str
    argv: list
    env: dict = dataclasses.field(default_factory=dict)
    certs: str | None = None
    size_bytes: int | None = None
    size_note: str = ""
    echo: bool = True

    def environment(self, transport, endpoint, certs, table):
        env = {"TABLE_NAME": table, "PLANTS_TOKEN_SHA256": TOKEN_SHA256, "AWS_ENDPOINT_URL_DYNAMODB": endpoint}
        if transport == "http" and self.kind == "rust" and self.certs == "file" and SYSTEM_BUNDLE:
            # As deployed (template.yaml): the SDK builds its TLS connector
            # at start-up whatever the endpoint, reading this one file.
            env["SSL_CERT_FILE"] = SYSTEM_BUNDLE
        if transport == "https":
            trust = {
                # AWS_CA_BUNDLE for builds that trust only the CAs they are
                # given (src/sdk.rs), SSL_CERT_FILE for earlier builds.
                "rust": {"AWS_CA_BUNDLE": certs["ca"], "SSL_CERT_FILE": certs["bundle"]},
                "python": {"AWS_CA_BUNDLE": certs["bundle"]},
                "node": {"NODE_EXTRA_CA_CERTS": certs["ca"]},
            }
            env.update(trust[self.kind])
            if self.kind == "rust" and self.certs == "dir":
                # What rustls-native-certs does with no variable set: the
                # bundle file and every file of the directory.
                env["SSL_CERT_DIR"] = certs["certdir"]
        return env | self.env


RUST_SETTINGS = {"certs": ("file", "dir"), "echo": ("required", "optional")}  # the rest is environment


def rust_subject(name, binary, settings=()):
    """A Rust build: the one built here, or `--rust NAME=BINARY[,KEY=VALUE...]`."""
    if not os.path.isfile(binary):
        fail(f"no binary at {binary}")
    subject = Subject(name, "rust", [os.path.abspath(binary)], {}, "file", os.path.getsize(binary), "stripped binary")
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            fail(f"--rust setting {setting!r} is not KEY=VALUE")
        if value not in RUST_SETTINGS.get(key, (value,)):
            fail(f"--rust {key}= takes {' or '.join(RUST_SETTINGS[key])}")
        if key == "certs":
            subject.certs = value
        elif key == "echo":
            subject.echo = value == "required"
        else:
            subject.env[key] = value
    return subject


def stripped_size(binary):
    """The size the binary would have stripped (as deployment tools strip
    it); the file's own size when `strip` is missing."""
    if shutil.which("strip") is None:
        return os.path.getsize(binary)
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["strip", "-o", os.path.join(scratch, "stripped"), binary], check=True)
        return os.path.getsize(os.path.join(scratch, "stripped"))


def build_rust(profile):
    args = ["cargo", "build", "--bin", "plant-store"] + (["--release"] if profile == "release" else [])
    log("building: " + " ".join(args))
    subprocess.run(args, cwd=REPO, check=True)
    return os.path.join(REPO, "target", profile, "plant-store")


def subjects_for(args):
    subjects = []
    if "rust" in args.impl and not args.rust:
        subjects.append(rust_subject("rust", args.binary or build_rust("debug" if args.smoke else "release")))
    for spec in (args.rust or []) if "rust" in args.impl else []:
        name, sep, rest = spec.partition("=")
        if not sep:
            fail(f"--rust {spec!r}: use NAME=BINARY[,KEY=VALUE...]")
        binary, *settings = rest.split(",")
        subjects.append(rust_subject(name, binary, settings))
    if "idiomatic" in args.impl and not rust_peer_built():
        print("skip idiomatic: the idiomatic Rust peer is not built (make bench builds it)", flush=True)
    elif "idiomatic" in args.impl:
        size, note = stripped_size(RUST_PEER_BIN), "binary of the default release profile, stripped"
        subjects.append(Subject("idiomatic", "rust", [RUST_PEER_BIN], certs="file", size_bytes=size, size_note=note))
    if "python" in args.impl:
        argv = [os.path.join(PY_VENV, "bin", "python"), os.path.join(PEERS, "python", "bootstrap.py")]
        size = dir_size(os.path.join(PY_VENV, "lib"), skip=("pip", "setuptools", "_distutils_hack", "pkg_resources"))
        subjects.append(Subject("python", "python", argv, size_bytes=size, size_note="boto3 and its dependencies"))
    if "node" in args.impl:
        argv, size = ["node", os.path.join(NODE_DIR, "bootstrap.js")], dir_size(os.path.join(NODE_DIR, "node_modules"))
        subjects.append(Subject("node", "node", argv, size_bytes=size, size_note="node_modules"))
    return subjects


# ---- events and answers ----------------------------------------------------------


class Events:
    """API Gateway HTTP API 2.0 envelopes, as events/create-http-api.json,
    each with a fresh plant id and request id."""

    def __init__(self, start):
        with open(os.path.join(REPO, "events", "create-http-api.json")) as f:
            self.template = json.load(f)
        self.next_id = start

    def create(self, body=None, plant_id=None, headers=(), method=None, **fields):
        if plant_id is None:
            plant_id, self.next_id = self.next_id, self.next_id + 1
        if body is None:
            body = json.dumps({"id": plant_id, **PLANT}, separators=(",", ":"))
        event = copy.deepcopy(self.template)
        event.update(body=body, **fields)
        event["headers"]["content-length"] = str(len(body.encode()))
        event["headers"].update(headers)
        event["headers"] = {name: value for name, value in event["headers"].items() if value is not None}
        event["requestContext"]["requestId"] = f"bench-{plant_id}"
        event["requestContext"]["timeEpoch"] = int(time.time() * 1000)
        event["requestContext"]["http"]["method"] = method or event["requestContext"]["http"]["method"]
        return json.dumps(event).encode()


def created_problem(response, request_id=None):
    """What keeps `response` from being a created plant (that names its own
    `request_id`, when given), or None."""
    if response.get("statusCode") != 200 or json.loads(response.get("body") or "null") != PLANT:
        return f"{response.get('statusCode')} {response.get('body')!r}"
    if request_id is None:
        return None
    named = {k.lower(): v for k, v in (response.get("headers") or {}).items()}.get("x-request-id")
    return None if named == request_id else f"the answer names {named!r}"


def check_created(subject, response):
    if problem := created_problem(response):
        fail(f"{subject.name} answered {problem}")


def answer_problems(done):
    """Every concurrent answer: a created plant, naming its own request id."""
    return [f"{i.request_id}: {p}" for i in done if (p := created_problem(i.response, i.request_id))]


def check_answers(subject, done):
    if problems := answer_problems(done):
        fail(f"{subject.name}: {problems[0]} (and {len(problems) - 1} more)")


# ---- one run -------------------------------------------------------------------


class Run(contextlib.ExitStack):
    """The shared fixtures of one benchmark: DynamoDB Local, the TLS proxy,
    the certificates, the stores with a stated latency, a scratch folder for
    logs; all stopped on exit."""

    def __init__(self, scratch, transports, store_latency_ms=0.0):
        super().__init__()
        self.scratch, self.transports, self.store_latency_ms = scratch, transports, store_latency_ms
        self.stores, self.tables = {}, 0

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def start(self):
        self.ddb = self.enter_context(DynamoDBLocal(REPO, self.path("dynamodb-local.log")))
        self.certs = make_certificates(self.path("tls")) if "https" in self.transports else None
        self.proxy = (
            self.enter_context(Proxy(self.ddb.port, self.path("tls-proxy.log"), self.certs)) if self.certs else None
        )

    def path(self, name):
        return os.path.join(self.scratch, name)

    def store(self, transport):
        """The store with a stated latency: a proxy in front of DynamoDB
        Local that holds every request `store_latency_ms` and records each
        request's trace header (started on first use)."""
        if transport not in self.stores:
            if transport == "https" and self.certs is None:
                self.certs = make_certificates(self.path("tls"))
            certs = self.certs if transport == "https" else None
            log_path, record = self.path(f"store-{transport}.log"), self.path(f"store-{transport}.trace-ids")
            proxy = Proxy(self.ddb.port, log_path, certs, self.store_latency_ms, record)
            self.stores[transport] = self.enter_context(proxy)
        return self.stores[transport]

    def table(self, subject, transport):
        self.tables += 1
        name = f"bench-{subject.name}-{transport}-{self.tables}"
        self.ddb.create_table(name)
        return name

    @contextlib.contextmanager
    def function(self, subject, transport, what="", table=None, quota=None, concurrency=None):
        """A function process, stopped at the end; a function that breaks
        ends the benchmark, naming `subject`, `what` it was doing and its
        log. With `quota`, spawned inside that CPU quota's cgroup; with
        `concurrency`, told it may take that many invocations at once (as
        on Lambda Managed Instances) and pointed at the store with a
        stated latency."""
        if concurrency:
            endpoint = self.store(transport).endpoint
        else:
            endpoint = self.proxy.endpoint if transport == "https" else self.ddb.endpoint
        env = subject.environment(transport, endpoint, self.certs, table or self.table(subject, transport))
        if concurrency:
            env["AWS_LAMBDA_MAX_CONCURRENCY"] = str(concurrency)
        if quota:
            env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = str(quota.memory_mb)
            # A quota is per period and the cgroup outlives its processes: let
            # one period pass, so that a new process never starts on the rest
            # of a budget its predecessor spent.
            time.sleep(CGROUP_PERIOD_US / 1e6)
        log_path = self.path(f"{subject.name}-{transport}.log")
        fn = FunctionProcess(subject.argv, env, log_path, quota and quota.spawning, subject.echo)
        try:
            yield fn
        except BROKEN as err:
            fail(f"{subject.name}{what} over {transport}: {err}; see {fn.log_path}")
        finally:
            fn.stop()


# ---- cold starts and warm invocations ------------------------------------------


def cold_starts(run, subjects, transport, rounds, events, quota=None):
    """`rounds` fresh processes per subject, interleaved so that a change
    of load on the machine touches every subject alike (inside `quota`'s
    cgroup when given)."""
    samples = {s.name: [] for s in subjects}
    tables = {s.name: run.table(s, transport) for s in subjects}
    stat = quota.stat if quota else dict
    for i in range(rounds):
        for subject in subjects[i % len(subjects) :] + subjects[: i % len(subjects)]:
            with run.function(subject, transport, table=tables[subject.name], quota=quota) as fn:
                stat_before = stat()
                init_wall, init_cpu = fn.start()
                stat_init = stat()
                response, wall, cpu = fn.invoke(events.create())
                stat_cold = stat()
                check_created(subject, response)
                sample = {
                    "init_wall_ms": init_wall / 1e6,
                    "init_cpu_ms": init_cpu / 1e6,
                    "first_wall_ms": wall / 1e6,
                    "first_cpu_ms": cpu / 1e6,
                    "cold_wall_ms": (init_wall + wall) / 1e6,
                    "cold_cpu_ms": fn.cpu_at_response / 1e6,
                    "peak_rss_kib": fn.kib(),
                }
                # The CFS periods the cold start ran in, and in how many it
                # was throttled (cpu.stat's counters, read around it).
                for key, after in (("init", stat_init), ("cold", stat_cold)):
                    for counter in ("nr_periods", "nr_throttled"):
                        if counter in after and counter in stat_before:
                            sample[f"{key}_{counter}"] = after[counter] - stat_before[counter]
                samples[subject.name].append(sample)
        log(f"  cold {transport}{quota.label if quota else ''}: round {i + 1}/{rounds}")
    return samples


def warm_run(run, subject, transport, count, events, quota=None):
    """One process: its cold start, then `count` sequential invocations
    (inside `quota`'s cgroup when given)."""
    with run.function(subject, transport, quota=quota) as fn:
        fn.start()
        check_created(subject, fn.invoke(events.create())[0])
        walls, cpus = [], []
        fn.api.wait_next()
        cpu_start, split_start = fn.cpu(), fn.user_system_s()
        window_start = time.perf_counter()
        for _ in range(count):
            response, wall, cpu = fn.invoke(events.create())
            check_created(subject, response)
            walls.append(wall / 1e6)
            cpus.append(cpu / 1e6)
        fn.api.wait_next()
        window_s = time.perf_counter() - window_start
        cpu_total = fn.cpu() - cpu_start
        user, system = (end - start for end, start in zip(fn.user_system_s(), split_start, strict=True))
        return {
            "wall_ms": walls,
            "cpu_in_window_ms": cpus,
            "cpu_per_invocation_ms": cpu_total / 1e6 / count,
            "system_share": system / (user + system) if user + system else None,
            "peak_rss_kib": fn.kib(),
            # Back-to-back: the emulator hands over the next event as soon
            # as the function asks for it.
            "invocations_per_s": count / window_s,
        }


def cold_and_warm(run, subjects, transport, cold, warm, events, quota=None):
    at = quota.label if quota else ""
    log(f"{transport}{at}: {cold} cold starts and {warm} warm invocations per implementation")
    samples = cold_starts(run, subjects, transport, cold, events, quota)
    return {"cold": samples, "warm": {s.name: warm_run(run, s, transport, warm, events, quota) for s in subjects}}


# ---- Lambda's memory sizes: a CPU quota per size ------------------------------

LAMBDA_FULL_VCPU_MB = 1769  # the memory size that buys one full vCPU
CGROUP_PERIOD_US = 100_000
CGROUP_V1_CPU = "/sys/fs/cgroup/cpu"
CGROUP_V2 = "/sys/fs/cgroup"


def _write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


class CpuQuota:
    """A cgroup whose CPU quota is the share of one vCPU that Lambda gives
    at `memory_mb` (memory / 1,769 MB of each 100 ms period): cgroup v2's
    `cpu.max` or v1's `cpu.cfs_quota_us`, whichever the machine has. Each
    function process is spawned inside it (`spawning`), so its pid, CPU
    clock and /proc figures stay its own."""

    def __init__(self, memory_mb):
        self.memory_mb = memory_mb
        self.quota_us = round(CGROUP_PERIOD_US * memory_mb / LAMBDA_FULL_VCPU_MB)
        self.label = f" at {memory_mb} MB"
        self.path = self.version = None

    def create(self):
        """Makes the cgroup; returns None, or why it could not."""
        errors = []
        for version, root, marker, files in (
            (2, CGROUP_V2, "cgroup.controllers", {"cpu.max": f"{self.quota_us} {CGROUP_PERIOD_US}"}),
            (
                1,
                CGROUP_V1_CPU,
                "cpu.cfs_quota_us",
                {"cpu.cfs_period_us": CGROUP_PERIOD_US, "cpu.cfs_quota_us": self.quota_us},
            ),
        ):
            if not os.path.isfile(os.path.join(root, marker)):
                continue
            try:
                if version == 2:
                    with open(os.path.join(root, marker)) as f:
                        if "cpu" not in f.read().split():
                            raise OSError("the cgroup v2 hierarchy has no cpu controller")
                    _write(os.path.join(root, "cgroup.subtree_control"), "+cpu")
                self.path = os.path.join(root, f"plant-store-bench-{os.getpid()}-{self.memory_mb}")
                self.version = version
                os.makedirs(self.path, exist_ok=True)
                for name, value in files.items():
                    _write(os.path.join(self.path, name), value)
                return None
            except OSError as err:
                errors.append(f"cgroup v{version}: {err.strerror or err}")
                self.remove()
        return "; ".join(errors) or "no cgroup v2 cpu controller and no cgroup v1 cpu hierarchy"

    @contextlib.contextmanager
    def spawning(self):
        """The harness joins the cgroup while it spawns a function process,
        which so starts inside it (and keeps its own pid and CPU clock),
        then goes back to the cgroup it came from."""
        home = self.home()
        _write(os.path.join(self.path, "cgroup.procs"), os.getpid())
        try:
            yield
        finally:
            _write(os.path.join(home, "cgroup.procs"), os.getpid())

    def home(self):
        """This process's own cgroup in the hierarchy the quota lives in."""
        root = CGROUP_V2 if self.version == 2 else CGROUP_V1_CPU
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if (self.version == 2 and controllers == "") or "cpu" in controllers.split(","):
                    return root + path
        return root

    def stat(self):
        """The cgroup's cpu.stat counters (nr_periods, nr_throttled, ...)."""
        try:
            with open(os.path.join(self.path, "cpu.stat")) as f:
                return {key: int(value) for key, value in (line.split() for line in f if line.strip())}
        except (OSError, ValueError):
            return {}

    def remove(self):
        for _ in range(50 if self.path else 0):
            try:
                os.rmdir(self.path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)  # a stopped process may not have left yet
        self.path = self.version = None


def memory_sizes(run, subjects, args, events):
    """Per memory size: cold starts and a warm run of every subject inside
    a cgroup with that size's CPU quota. Without a writable cgroup (not
    root), one line says so and the figures are measured without a quota."""
    out = {"transport": MEMORY_TRANSPORT, "period_us": CGROUP_PERIOD_US, "sizes": {}}
    said = False
    for memory_mb in args.memory:
        quota = CpuQuota(memory_mb)
        if why_not := quota.create():
            if not said:
                print(f"no CPU quota ({why_not}): the memory sizes are measured without one", flush=True)
                said = True
            quota = None
        share = f"quota {quota.quota_us} us per {CGROUP_PERIOD_US} us, cgroup v{quota.version}" if quota else "no quota"
        log(f"{memory_mb} MB: {share}")
        try:
            runs = cold_and_warm(run, subjects, MEMORY_TRANSPORT, args.memory_cold, args.memory_warm, events, quota)
            stat = quota.stat() if quota else {}
            out["sizes"][str(memory_mb)] = {
                "quota_us": quota.quota_us if quota else None,
                "cgroup": f"v{quota.version}" if quota else None,
                "no_quota_reason": why_not,
                "throttled_periods": stat.get("nr_throttled"),
                "periods": stat.get("nr_periods"),
                **runs,
            }
        finally:
            if quota:
                quota.remove()
    return out


# ---- throughput per execution environment, as on Lambda Managed Instances ---------


def proc_cpu_ns(pid):
    try:
        return cpu_ns(pid)
    except OSError:
        return 0


def machine_busy_ns():
    """CPU time all processes have used on the machine (/proc/stat, without idle and iowait)."""
    ticks = psutil.cpu_times()
    return (sum(ticks[:8]) - ticks.idle - ticks.iowait) * 1e9


def concurrency_run(run, subject, transport, concurrency, count, events):
    """One process given `concurrency` (AWS_LAMBDA_MAX_CONCURRENCY), on the
    machine's whole cores, against the store with a stated latency: it must
    park that many GET /next at once; a warm-up; then `count` creates with
    `concurrency` in flight, every worker parked again before and after the
    window, so that the CPU clock readings frame it exactly."""
    store = run.store(transport)
    others = {
        "machine, all processes": machine_busy_ns,
        "emulator": time.process_time_ns,
        "store proxy": lambda: proc_cpu_ns(store.proc.pid),
        "DynamoDB Local": lambda: proc_cpu_ns(run.ddb.proc.pid),
    }
    with run.function(subject, transport, f" at concurrency {concurrency}", concurrency=concurrency) as fn:
        fn.start()
        try:
            fn.api.wait_next(timeout=10, count=concurrency)
        except TimeoutError:
            fail(
                f"{subject.name} parked only {len(fn.api.parked)} of {concurrency} GET /next at once: "
                "does it honour AWS_LAMBDA_MAX_CONCURRENCY?"
            )
        check_answers(subject, fn.serve((events.create() for _ in range(max(200, 4 * concurrency))), concurrency))
        fn.api.wait_next(count=concurrency)
        cpu_start, others_start, started = fn.cpu(), {k: f() for k, f in others.items()}, time.perf_counter()
        done = fn.serve((events.create() for _ in range(count)), concurrency)
        window_s = time.perf_counter() - started
        fn.api.wait_next(count=concurrency)
        cpu_ms = (fn.cpu() - cpu_start) / 1e6
        others_ms = {k: (f() - others_start[k]) / 1e6 for k, f in others.items()}
        check_answers(subject, done)
        # Where the machine's CPU went in the window: a harness that uses
        # the rest of the cores bounds the rate, not the function.
        share = {"function": cpu_ms, **others_ms}
        return {
            "concurrency": concurrency,
            "invocations": count,
            "wall_ms": [invocation.wall_ns / 1e6 for invocation in done],
            "creates_per_s": count / window_s,
            "cpu_per_invocation_ms": cpu_ms / count,
            "peak_rss_kib": fn.kib(),
            "max_parked": fn.api.max_parked,
            "missing_echo": fn.api.missing_echo,
            "cpu_share_of_machine": {k: v / 1e3 / window_s / len(os.sched_getaffinity(0)) for k, v in share.items()},
        }


WARM_CONCURRENT = 4000


def concurrency_runs(run, subjects, args, events):
    transport = args.concurrency_transport
    # The Python and Node.js peers' hand-written loops take one invocation at a time.
    rust = [subject for subject in subjects if subject.kind == "rust"]
    out = {"transport": transport, "store_latency_ms": args.store_latency_ms, "vcpus": len(os.sched_getaffinity(0))}
    out["subjects"] = {subject.name: {} for subject in rust}
    if rust:
        # DynamoDB Local's JVM compiles its concurrent paths under the first
        # concurrent load: without this, whichever runs first pays for it.
        log(f"warming DynamoDB Local under concurrency: {WARM_CONCURRENT} creates, {max(args.concurrency)} at once")
        concurrency_run(run, rust[0], transport, max(args.concurrency), WARM_CONCURRENT, events)
    for i, concurrency in enumerate(args.concurrency):
        # Each level in another order, so that DynamoDB Local's JIT and the
        # machine's load favour no implementation.
        for subject in rust[i % len(rust) :] + rust[: i % len(rust)]:
            log(f"{transport}: {subject.name}: {args.concurrency_invocations} creates at concurrency {concurrency}")
            result = concurrency_run(run, subject, transport, concurrency, args.concurrency_invocations, events)
            out["subjects"][subject.name][str(concurrency)] = result
    return out


# ---- memory over time -----------------------------------------------------------


def long_run(run, subject, transport, count, events):
    """One process, `count` warm invocations back to back (each with a fresh
    request and trace id, as the emulator sends), its peak and current RSS
    read at checkpoints: a per-invocation leak shows as a peak that keeps
    growing after the first thousands."""
    marks = {1, 100, 1000, 2000, count} | {count * i // 10 for i in range(1, 10)}
    marks = sorted(m for m in marks if 1 <= m <= count)
    checkpoints = []
    with run.function(subject, transport, " long run") as fn:
        fn.start()
        started, cpu_start = time.perf_counter(), fn.cpu()
        for i in range(1, count + 1):
            response, _, _ = fn.invoke(events.create())
            if response.get("statusCode") != 200:
                check_created(subject, response)
            if i == marks[len(checkpoints)]:
                checkpoints.append(
                    {
                        "invocations": i,
                        "peak_rss_kib": fn.kib(),
                        "rss_kib": fn.kib("VmRSS"),
                        "elapsed_s": round(time.perf_counter() - started, 2),
                    }
                )
                if i % max(1, count // 5) == 0:
                    log(f"  long {subject.name}: {i}/{count}")
        return {
            "invocations": count,
            "checkpoints": checkpoints,
            "duration_s": time.perf_counter() - started,
            "cpu_per_invocation_ms": (fn.cpu() - cpu_start) / 1e6 / count,
        }


def long_runs(run, subjects, args, events):
    log(f"{LONG_TRANSPORT}: {args.long} warm invocations per implementation for memory over time")
    runs = {s.name: long_run(run, s, LONG_TRANSPORT, args.long, events) for s in subjects}
    return {"transport": LONG_TRANSPORT, "subjects": runs}


def benchmark(args, subjects, scratch):
    results = {"transports": {}, "load": {"before": list(os.getloadavg())}}
    events = Events(start=10_000_000)
    # The fixtures serve every transport any part of the run uses.
    used = {*args.transport, *([MEMORY_TRANSPORT] if args.memory else []), *([LONG_TRANSPORT] if args.long else [])}
    with Run(scratch, used, args.store_latency_ms) as run:
        log(f"warming DynamoDB Local's JVM with {DDB_WARMUP} writes")
        run.ddb.create_table("bench-jvm-warm-up")
        run.ddb.warm("bench-jvm-warm-up", DDB_WARMUP)
        for transport in args.transport:
            runs = cold_and_warm(run, subjects, transport, args.cold, args.warm, events)
            results["transports"][transport] = runs
            results["load"][f"after_{transport}"] = list(os.getloadavg())

        for part, measure in (("memory", memory_sizes), ("concurrency", concurrency_runs), ("long", long_runs)):
            if getattr(args, part):
                results[part] = measure(run, subjects, args, events)
                results["load"][f"after_{part}"] = list(os.getloadavg())
    return results


# ---- the smoke test ---------------------------------------------------------------

SMOKE_CONCURRENCY = 4


def conformance_cases(events):
    """(label, event, expected status, expected body or error code)."""
    created = json.dumps({"id": 42, **PLANT}, separators=(",", ":"))
    return [
        ("create", events.create(body=created, plant_id=42), 200, PLANT),
        ("retry of the same create", events.create(body=created, plant_id=42), 200, PLANT),
        ("same id, other content", events.create(body='{"id":42,"name":"Fern"}', plant_id=42), 409, 40901),
        ("create without a tag", events.create(body='{"id":43,"name":"Fern"}', plant_id=43), 200, {"name": "Fern"}),
        ("no token", events.create(headers={"authorization": None}), 401, 40101),
        ("unknown token", events.create(headers={"authorization": "Bearer nope"}), 401, 40102),
        ("unknown field", events.create(body='{"id":1,"name":"a","colour":"red"}'), 400, 40005),
        ("missing name", events.create(body='{"id":1}'), 400, 40002),
        ("float id", events.create(body='{"id":1.0,"name":"a"}'), 400, 40003),
        ("id beyond int64", events.create(body='{"id":9223372036854775808,"name":"a"}'), 400, 40004),
        ("blank name", events.create(body='{"id":1,"name":" "}'), 400, 40004),
        ("unpaired surrogate", events.create(body='{"id":1,"name":"a\\ud800"}'), 400, 40004),
        ("duplicate field", events.create(body='{"id":1,"name":"a","name":"b"}'), 400, 40001),
        ("not JSON", events.create(body='{"id":'), 400, 40001),
        ("text/plain", events.create(headers={"content-type": "text/plain"}), 415, 41501),
        ("GET", events.create(method="GET"), 405, 40501),
        ("other path", events.create(rawPath="/animals"), 404, 40401),
    ]


def smoke_cases(run, subject, transport):
    """Every conformance case over HTTP, two creates over HTTPS: each answer
    its expected status and body (or error code), with the standard headers."""
    events = Events(start=1000)
    if transport == "http":
        cases = conformance_cases(events)
    else:
        cases = [("create", events.create(), 200, PLANT), ("create", events.create(), 200, PLANT)]
    if subject.name == "idiomatic":
        # serde_json refuses an unpaired surrogate escape as a syntax error
        # (40001), where plant-store reads a well-formed but invalid value
        # (40004): the bench does not send one.
        cases = [case for case in cases if case[0] != "unpaired surrogate"]
    problems = []
    with run.function(subject, transport) as fn:
        fn.start()
        for label, event, status, expected in cases:
            response, _, _ = fn.invoke(event)
            body = json.loads(response.get("body") or "null")
            got = body if status == 200 else (body or {}).get("error")
            headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
            if (response.get("statusCode"), got) != (status, expected):
                problems.append(f"{label}: {response.get('statusCode')} {response.get('body')}")
            elif headers.get("content-type") != "application/json" or "x-request-id" not in headers:
                problems.append(f"{label}: standard headers missing: {headers}")
    return problems


def smoke_concurrent(run, subject, transport):
    """A few concurrent invocations: SMOKE_CONCURRENCY GET /next parked at
    once, each answer on its own request id with its own invocation id, one
    item per create, and (for plant-store) each invocation's trace id on
    its DynamoDB request."""
    table = run.table(subject, transport)
    events = Events(start=2000)
    with run.function(subject, transport, table=table, concurrency=SMOKE_CONCURRENCY) as fn:
        fn.start()
        try:
            fn.api.wait_next(timeout=10, count=SMOKE_CONCURRENCY)
        except TimeoutError:
            return [f"parked {len(fn.api.parked)} of {SMOKE_CONCURRENCY} GET /next at once; see {fn.log_path}"]
        done = fn.serve([events.create() for _ in range(3 * SMOKE_CONCURRENCY)], SMOKE_CONCURRENCY)
    problems = answer_problems(done)
    if (stored := run.ddb.count(table)) != len(done):
        problems.append(f"{len(done)} creates answered, {stored} items stored")
    recorded = set(run.store(transport).recorded_trace_ids())
    carried = sum(invocation.trace_id in recorded for invocation in done)
    if carried < len(done):
        # The idiomatic peer cannot: under run_concurrent, lambda_runtime
        # sets no _X_AMZN_TRACE_ID, which is where the SDK reads it from.
        line = f"{carried} of {len(done)} DynamoDB requests carried their invocation's trace id"
        if subject.name == "idiomatic":
            print(f"     note ({subject.name}): {line}", flush=True)
        else:
            problems.append(line)
    return problems


def smoke(args, subjects, scratch):
    """Each check prints ok or FAIL with its problems; a function that
    breaks fails its check, not the smoke."""
    checks = [(f"{s.name} over {t}", smoke_cases, s, t) for t in args.transport for s in subjects]
    transport = "http" if "http" in args.transport else args.transport[0]
    checks += [
        (f"{s.name} over {transport}, {SMOKE_CONCURRENCY} at once", smoke_concurrent, s, transport)
        for s in subjects
        if s.kind == "rust"
    ]
    failed = 0
    with Run(scratch, args.transport, args.store_latency_ms) as run:
        for label, check, subject, transport in checks:
            try:
                problems = check(run, subject, transport)
            except SystemExit as err:
                problems = [str(err).removeprefix("error: ")]
            failed += bool(problems)
            print(f"{'FAIL' if problems else 'ok  '} {label}", flush=True)
            for problem in problems:
                print(f"     {problem}", flush=True)
    print(f"smoke: {len(checks) - failed} passed, {failed} failed", flush=True)
    return failed == 0


# ---- the machine and the command line ------------------------------------------------


def command_version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def machine():
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    try:
        os_name = platform.freedesktop_os_release().get("PRETTY_NAME")
    except OSError:
        os_name = None
    versions = {"rustc": ["rustc", "--version"], "node": ["node", "--version"], "java": ["java", "-version"]}
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "arch": platform.machine(),
        "os": os_name,
        "kernel": platform.release(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3),
        **{name: command_version(argv) for name, argv in versions.items()},
        "python": platform.python_version(),
        "openssl": command_version(["openssl", "version"]),
    }


def listed(item, allowed, what):
    """An argparse type: comma-separated values, each `allowed`; '' or 'none' for none (`what`: what they are)."""

    def parse(text):
        try:
            values = [] if text in ("", "none") else [item(x) for x in text.split(",") if x]
        except ValueError:
            values = None
        if values is None or not all(map(allowed, values)):
            raise argparse.ArgumentTypeError(f"takes {what}, comma-separated")
        return values

    return parse


def at_least(minimum):
    def parse(text):
        if (value := int(text)) < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}")
        return value

    return parse


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="a few checked invocations of each implementation")
    parser.add_argument("--install-only", action="store_true", help="install the peers' dependencies and stop")
    parser.add_argument("--binary", help="the Rust function to run (default: build it with cargo)")
    rust = "a Rust build to measure, with extra environment; certs=file|dir, echo=required|optional (repeatable)"
    parser.add_argument("--rust", action="append", metavar="NAME=BINARY[,KEY=VALUE...]", help=rust)
    sizes = listed(int, lambda mb: 128 <= mb <= 10240, "sizes from 128 to 10240 MB, as Lambda's")
    counts, latency = listed(int, lambda n: n >= 1, "counts"), report.DDB_LATENCY_MS
    options = [  # flag, type, default, help
        ("--impl", listed(str, IMPLS.__contains__, ", ".join(IMPLS)), ",".join(IMPLS), "implementations"),
        ("--transport", listed(str, TRANSPORTS.__contains__, "http, https"), "http,https", "transports"),
        ("--cold", at_least(1), 20, "fresh processes per implementation"),
        ("--warm", at_least(1), 2000, "sequential warm invocations"),
        ("--memory", sizes, "128,256,512,1024,1769", "Lambda memory sizes (MB) under their CPU quota, or none"),
        ("--memory-cold", at_least(1), 10, "fresh processes per implementation and size"),
        ("--memory-warm", at_least(1), 500, "warm invocations per implementation and size"),
        ("--concurrency", counts, "1,8,32,64", "invocations in flight (AWS_LAMBDA_MAX_CONCURRENCY), or none"),
        ("--concurrency-invocations", at_least(1), 4000, "creates per concurrency level"),
        ("--store-latency-ms", float, latency, "delay added to each DynamoDB request in the concurrency runs"),
        ("--long", at_least(0), 100_000, "warm invocations of one process, for memory over time; 0 for none"),
        ("--ddb-latency-ms", float, latency, "in-region DynamoDB latency added to billed durations"),
        ("--out", str, os.path.join(HERE, "results"), "where results go"),
    ]
    for flag, kind, default, text in options:
        parser.add_argument(flag, type=kind, default=default, help=f"{text} (default {default})")
    parser.add_argument(
        "--concurrency-transport",
        choices=TRANSPORTS,
        default="https",
        help="transport of the concurrency runs (default https)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.cold, args.warm, args.memory, args.long, args.concurrency = 1, 0, [], 0, []
    return args


def main(argv=None):
    args = parse_args(argv)
    # The smoke rebuilds the idiomatic peer only on a warm cache (a build
    # already in .tools/bench/rust-target: seconds for a change of its
    # source); its first build takes minutes and is left to make bench.
    install_peers(args.impl, build_rust=not args.smoke or os.path.isdir(os.path.join(RUST_PEER_TARGET, "release")))
    if args.install_only:
        return 0
    if shutil.which("java") is None:
        fail("java is needed for DynamoDB Local: install a Java 17+ runtime")
    subjects = subjects_for(args)
    scratch = tempfile.mkdtemp(prefix="plant-store-bench-")
    ok = False
    try:
        if args.smoke:
            ok = smoke(args, subjects, scratch)
            return 0 if ok else 1
        started = time.time()
        results = benchmark(args, subjects, scratch)
        values = vars(args) | {"ddb_warmup": DDB_WARMUP}
        results.update(
            {
                "schema": 1,
                "label": "",
                "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "duration_s": round(time.time() - started),
                # Every absolute path cut to its file name: no path of this machine in the results.
                "command": " ".join(
                    ["python3", "bench/run.py", *(re.sub(r"/[^,=\s]*/", "", a) for a in argv or sys.argv[1:])]
                ),
                "settings": {key: values[key] for key in SETTINGS},
                "machine": machine(),
                "subjects": {s.name: {k: getattr(s, k) for k in SUBJECT_FIELDS} for s in subjects},
            }
        )
        report.write(report.summarise(results), args.out)
        ok = True
        return 0
    finally:
        if ok:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            log(f"logs kept in {scratch}")


if __name__ == "__main__":
    sys.exit(main())
