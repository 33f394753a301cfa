#!/usr/bin/env python3
"""The plant-store cold-start and warm-latency benchmark (`make bench`).

Runs the release binary as Lambda does, under a Runtime API emulator on
loopback (bench/emulator.py), against DynamoDB Local over plain HTTP and
over HTTPS through a TLS terminator with a throwaway CA
(bench/proxy.py), beside the same handler in Python (boto3) and in
Node.js (@aws-sdk/client-dynamodb v3) and in Rust the way the runtime's own
examples write it (bench/peers/rust). Then the same at Lambda's memory
sizes, each implementation inside a cgroup whose CPU quota is the share of
a vCPU that size buys; throughput per execution environment at several
concurrencies, as on Lambda Managed Instances (the Rust implementations,
against a store with a stated latency); a long warm run per implementation
for its memory over time; and what a million creates cost. Writes
results.json, results.md, chart.svg, lambda.svg and concurrency.svg into
bench/results/ (or --out).

    .tools/venv/bin/python bench/run.py                 # the full benchmark
    .tools/venv/bin/python bench/run.py --smoke         # a few checked invocations of each implementation
    .tools/venv/bin/python bench/run.py --install-only  # the peers' dependencies, into .tools/bench/
    .tools/venv/bin/python bench/run.py --memory 128 --long 5000   # a quicker run: one memory size, a short long run
    .tools/venv/bin/python bench/run.py --memory none --long 0     # whole cores only, as before
    .tools/venv/bin/python bench/run.py --impl rust,idiomatic --transport https --cold 3 --warm 200 \\
        --memory none --long 0 --concurrency 1,8,32,64   # throughput per execution environment only
    .tools/venv/bin/python bench/run.py --impl rust --transport https \\
        --rust 'before=/path/a,PLANTS_PREWARM=0' --rust 'after=/path/b'   # compare Rust builds

Runs under the tool venv's Python (`make bench`): boto3 for its own DynamoDB calls, matplotlib for the
charts. See docs/performance.md for the method and results.
"""

import argparse
import contextlib
import copy
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import ddb  # noqa: E402
import report  # noqa: E402
from emulator import FunctionDied, FunctionProcess, ProtocolError, cpu_ns  # noqa: E402
from proxy import SYSTEM_BUNDLE_CANDIDATES, Proxy, make_certificates  # noqa: E402

TOKEN = "plant-store-dev-token"
TOKEN_SHA256 = hashlib.sha256(TOKEN.encode()).hexdigest()
TOOLS = os.path.join(REPO, ".tools", "bench")
PY_VENV = os.path.join(TOOLS, "python")
NODE_DIR = os.path.join(TOOLS, "node")
RUST_PEER_DIR = os.path.join(HERE, "peers", "rust")
RUST_PEER_TARGET = os.path.join(TOOLS, "rust-target")
RUST_PEER_BIN = os.path.join(RUST_PEER_TARGET, "release", "plant-store-bench-rust-peer")
IMPLS = ("rust", "idiomatic", "python", "node")
PEERS = os.path.join(HERE, "peers")
PLANT = {"name": "Monstera deliciosa", "tag": "aroid"}
SYSTEM_BUNDLE = next((p for p in SYSTEM_BUNDLE_CANDIDATES if os.path.isfile(p)), None)


def log(message):
    print(message, file=sys.stderr, flush=True)


def fail(message):
    raise SystemExit(f"error: {message}")


# ---- installing the peers ----------------------------------------------------


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def rust_peer_stamp():
    """The idiomatic peer's build stamp, keyed on its manifest, lock file
    and source."""
    digest = hashlib.sha256()
    for name in ("Cargo.toml", "Cargo.lock", os.path.join("src", "main.rs")):
        digest.update(_digest(os.path.join(RUST_PEER_DIR, name)).encode())
    return os.path.join(RUST_PEER_TARGET, ".stamp-" + digest.hexdigest()[:16])


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
    if rust_peer_built():
        return
    if shutil.which("cargo") is None:
        fail("cargo is needed for the idiomatic Rust peer: install Rust with rustup")
    log("building the idiomatic Rust peer into .tools/bench/rust-target (several minutes the first time)")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_LC_SYS_", "CARGO_PROFILE_", "CARGO_BUILD_", "CARGO_ENCODED_RUSTFLAGS"))
        and k not in ("RUSTFLAGS", "CARGO_TARGET_DIR")
    }
    outside = tempfile.mkdtemp(prefix="plant-store-peer-build-")
    try:
        subprocess.run(
            ["nice", "-n", "10", "cargo", "build", "--release", "--locked",
             "--manifest-path", os.path.join(RUST_PEER_DIR, "Cargo.toml"), "--target-dir", RUST_PEER_TARGET],
            cwd=outside, env=env, check=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    for old in os.listdir(RUST_PEER_TARGET):
        if old.startswith(".stamp-"):
            os.remove(os.path.join(RUST_PEER_TARGET, old))
    open(rust_peer_stamp(), "w").close()


def install_peers(impls, build_rust=True):
    """Installs the peers' pinned dependencies into .tools/bench/ (PyPI and
    npm only), once per change of their manifests; builds the idiomatic
    Rust peer unless `build_rust` is false."""
    if "idiomatic" in impls and build_rust:
        build_rust_peer()
    if "python" in impls:
        requirements = os.path.join(PEERS, "python", "requirements.txt")
        stamp = os.path.join(PY_VENV, ".stamp-" + _digest(requirements)[:16])
        if not os.path.exists(stamp):
            log("installing the Python peer's dependencies (boto3) into .tools/bench/python")
            if not os.path.exists(os.path.join(PY_VENV, "bin", "python")):
                subprocess.run([sys.executable, "-m", "venv", PY_VENV], check=True)
            subprocess.run(
                [os.path.join(PY_VENV, "bin", "python"), "-m", "pip", "install", "--quiet",
                 "--disable-pip-version-check", "--no-input", "-r", requirements],
                check=True,
            )  # fmt: skip
            open(stamp, "w").close()
    if "node" in impls:
        if shutil.which("node") is None or shutil.which("npm") is None:
            fail("node and npm are needed for the Node.js peer: install Node.js 20+")
        lock = os.path.join(PEERS, "node", "package-lock.json")
        stamp = os.path.join(NODE_DIR, ".stamp-" + _digest(lock)[:16])
        if not os.path.exists(stamp):
            log("installing the Node.js peer's dependencies (@aws-sdk/client-dynamodb) into .tools/bench/node")
            os.makedirs(NODE_DIR, exist_ok=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copy(os.path.join(PEERS, "node", name), NODE_DIR)
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR, check=True)
            open(stamp, "w").close()
        # The handler beside its node_modules, as in a deployment package.
        for name in ("bootstrap.js", "handler.js"):
            shutil.copy(os.path.join(PEERS, "node", name), NODE_DIR)


def dir_size(path, skip=()):
    total = 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                total += os.path.getsize(full)
    return total


# ---- the subjects: what is measured ------------------------------------------


class Subject:
    """One implementation as run: argv, extra environment, trust settings."""

    def __init__(self, name, kind, argv, env=None, certs="file", size=None, size_note="", echo=True):
        self.name, self.kind, self.argv = name, kind, argv
        self.env = dict(env or {})
        self.certs = certs
        self.size, self.size_note = size, size_note
        # Whether every answer must echo Lambda-Runtime-Invocation-Id (an
        # older build can be measured with echo=optional).
        self.echo = echo

    def environment(self, transport, endpoint, certs, table):
        env = {"TABLE_NAME": table, "PLANTS_TOKEN_SHA256": TOKEN_SHA256, "AWS_ENDPOINT_URL_DYNAMODB": endpoint}
        if transport == "http" and self.kind == "rust" and self.certs == "file" and SYSTEM_BUNDLE:
            # As deployed (template.yaml): the SDK builds its TLS connector
            # at start-up whatever the endpoint, reading this one file.
            env["SSL_CERT_FILE"] = SYSTEM_BUNDLE
        if transport == "https":
            if self.kind == "rust":
                # AWS_CA_BUNDLE for builds that trust only the CAs they are
                # given (src/sdk.rs), SSL_CERT_FILE for earlier builds.
                env["AWS_CA_BUNDLE"] = certs["ca"]
                env["SSL_CERT_FILE"] = certs["bundle"]
                if self.certs == "dir":
                    # What rustls-native-certs does with no variable set:
                    # the bundle file and every file of the directory.
                    env["SSL_CERT_DIR"] = certs["certdir"]
            elif self.kind == "python":
                env["AWS_CA_BUNDLE"] = certs["bundle"]
            elif self.kind == "node":
                env["NODE_EXTRA_CA_CERTS"] = certs["ca"]
        env.update(self.env)
        return env


def rust_subject(name, binary, settings):
    env, certs, echo = {}, "file", True
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            fail(f"--rust setting {setting!r} is not KEY=VALUE")
        if key == "certs":
            if value not in ("file", "dir"):
                fail("--rust certs= takes file or dir")
            certs = value
        elif key == "echo":
            if value not in ("required", "optional"):
                fail("--rust echo= takes required or optional")
            echo = value == "required"
        else:
            env[key] = value
    if not os.path.isfile(binary):
        fail(f"no binary at {binary}")
    size = os.path.getsize(binary)
    return Subject(name, "rust", [os.path.abspath(binary)], env, certs, size, "stripped binary", echo)


def stripped_size(binary):
    """The size the binary would have stripped (as deployment tools strip
    it); the file's own size when `strip` is missing."""
    if shutil.which("strip") is None:
        return os.path.getsize(binary)
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "stripped")
        subprocess.run(["strip", "-o", out, binary], check=True)
        return os.path.getsize(out)


def build_rust(profile):
    args = ["cargo", "build", "--bin", "plant-store"] + (["--release"] if profile == "release" else [])
    log("building: " + " ".join(args))
    subprocess.run(args, cwd=REPO, check=True)
    return os.path.join(REPO, "target", profile, "plant-store")


def subjects_for(args):
    subjects = []
    if "rust" in args.impl:
        if args.rust:
            for spec in args.rust:
                name, sep, rest = spec.partition("=")
                if not sep:
                    fail(f"--rust {spec!r}: use NAME=BINARY[,KEY=VALUE...]")
                binary, *settings = rest.split(",")
                subjects.append(rust_subject(name, binary, settings))
        else:
            binary = args.binary or build_rust("debug" if args.smoke else "release")
            subjects.append(rust_subject("rust", binary, []))
    if "idiomatic" in args.impl:
        if rust_peer_built():
            subjects.append(
                Subject(
                    "idiomatic",
                    "rust",
                    [RUST_PEER_BIN],
                    size=stripped_size(RUST_PEER_BIN),
                    size_note="binary of the default release profile, stripped",
                )
            )
        else:
            print("skip idiomatic: the idiomatic Rust peer is not built (make bench builds it)", flush=True)
    if "python" in args.impl:
        site = os.path.join(PY_VENV, "lib")
        subjects.append(
            Subject(
                "python",
                "python",
                [os.path.join(PY_VENV, "bin", "python"), os.path.join(PEERS, "python", "bootstrap.py")],
                size=dir_size(site, skip=("pip", "setuptools", "_distutils_hack", "pkg_resources")),
                size_note="boto3 and its dependencies",
            )
        )
    if "node" in args.impl:
        subjects.append(
            Subject(
                "node",
                "node",
                ["node", os.path.join(NODE_DIR, "bootstrap.js")],
                size=dir_size(os.path.join(NODE_DIR, "node_modules")),
                size_note="node_modules",
            )
        )
    return subjects


# ---- events --------------------------------------------------------------------


class Events:
    """API Gateway HTTP API 2.0 envelopes, as events/create-http-api.json,
    each with a fresh plant id and request id."""

    def __init__(self, start):
        with open(os.path.join(REPO, "events", "create-http-api.json")) as f:
            self.template = json.load(f)
        self.next_id = start

    def create(self, body=None, plant_id=None, **changes):
        if plant_id is None:
            plant_id, self.next_id = self.next_id, self.next_id + 1
        if body is None:
            body = json.dumps({"id": plant_id, **PLANT}, separators=(",", ":"))
        event = copy.deepcopy(self.template)
        event["body"] = body
        event["headers"]["content-length"] = str(len(body.encode()))
        event["requestContext"]["requestId"] = f"bench-{plant_id}"
        event["requestContext"]["timeEpoch"] = int(time.time() * 1000)
        for key, value in changes.items():
            if key == "headers":
                for name, header in value.items():
                    if header is None:
                        event["headers"].pop(name, None)
                    else:
                        event["headers"][name] = header
            elif key == "method":
                event["requestContext"]["http"]["method"] = value
            else:
                event[key] = value
        return json.dumps(event).encode()


def check_created(subject, response):
    body = json.loads(response.get("body") or "null")
    if response.get("statusCode") != 200 or body != PLANT:
        raise SystemExit(f"error: {subject.name} answered {response.get('statusCode')} {response.get('body')!r}")


# ---- one run -------------------------------------------------------------------


class Run:
    """The shared fixtures of one benchmark: DynamoDB Local, the TLS proxy,
    the certificates, a scratch folder for logs."""

    def __init__(self, scratch, transports, store_latency_ms=0.0):
        self.scratch = scratch
        self.transports = transports
        self.store_latency_ms = store_latency_ms
        self.stores = {}
        self.tables = 0

    def __enter__(self):
        self.ddb = ddb.DynamoDBLocal(REPO, os.path.join(self.scratch, "dynamodb-local.log")).__enter__()
        self.client = self.ddb.client()
        self.proxy = None
        self.certs = None
        if "https" in self.transports:
            self.certs = make_certificates(os.path.join(self.scratch, "tls"))
            self.proxy = Proxy(self.ddb.port, os.path.join(self.scratch, "tls-proxy.log"), self.certs).__enter__()
        return self

    def __exit__(self, *exc):
        for proxy in [self.proxy, *self.stores.values()]:
            if proxy:
                proxy.__exit__(*exc)
        self.ddb.__exit__(*exc)

    def store(self, transport):
        """The store with a stated latency: a proxy in front of DynamoDB
        Local that holds every request `store_latency_ms` and records each
        request's trace header (started on first use)."""
        if transport not in self.stores:
            if transport == "https" and self.certs is None:
                self.certs = make_certificates(os.path.join(self.scratch, "tls"))
            certs = self.certs if transport == "https" else None
            log_path = os.path.join(self.scratch, f"store-{transport}.log")
            record = os.path.join(self.scratch, f"store-{transport}.trace-ids")
            self.stores[transport] = Proxy(self.ddb.port, log_path, certs, self.store_latency_ms, record).__enter__()
        return self.stores[transport]

    def endpoint(self, transport):
        return self.proxy.endpoint if transport == "https" else self.ddb.endpoint

    def table(self, subject, transport):
        self.tables += 1
        name = f"bench-{subject.name}-{transport}-{self.tables}"
        self.client.create_table(name)
        return name

    def process(self, subject, transport, table, quota=None, concurrency=None):
        """A function process; with `concurrency`, told it may take that
        many invocations at once (as on Lambda Managed Instances) and
        pointed at the store with a stated latency."""
        endpoint = self.store(transport).endpoint if concurrency else self.endpoint(transport)
        env = subject.environment(transport, endpoint, self.certs, table)
        log_path = os.path.join(self.scratch, f"{subject.name}-{transport}.log")
        if concurrency:
            env["AWS_LAMBDA_MAX_CONCURRENCY"] = str(concurrency)
        if quota is None:
            return FunctionProcess(subject.argv, env, log_path, require_echo=subject.echo)
        env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = str(quota.memory_mb)
        # A quota is per period and the cgroup outlives its processes: let
        # one period pass, so that a new process never starts on the rest
        # of a budget its predecessor spent.
        time.sleep(CGROUP_PERIOD_US / 1e6)
        return FunctionProcess(subject.argv, env, log_path, spawn_in=quota.spawning, require_echo=subject.echo)


def cold_starts(run, subjects, transport, rounds, events, quota=None):
    """`rounds` fresh processes per subject, interleaved so that a change
    of load on the machine touches every subject alike (inside `quota`'s
    cgroup when given)."""
    samples = {s.name: [] for s in subjects}
    tables = {s.name: run.table(s, transport) for s in subjects}
    for i in range(rounds):
        order = subjects[i % len(subjects) :] + subjects[: i % len(subjects)]
        for subject in order:
            fn = run.process(subject, transport, tables[subject.name], quota)
            try:
                stat_before = quota.stat() if quota else {}
                init_wall, init_cpu = fn.start()
                stat_init = quota.stat() if quota else {}
                response, wall, cpu = fn.invoke(events.create())
                stat_cold = quota.stat() if quota else {}
                check_created(subject, response)
                cold_cpu = fn.cpu_at_response
                sample = {
                    "init_wall_ms": init_wall / 1e6,
                    "init_cpu_ms": init_cpu / 1e6,
                    "first_wall_ms": wall / 1e6,
                    "first_cpu_ms": cpu / 1e6,
                    "cold_wall_ms": (init_wall + wall) / 1e6,
                    "cold_cpu_ms": cold_cpu / 1e6,
                    "peak_rss_kib": fn.peak_rss_kib(),
                }
                # The CFS periods the cold start ran in, and in how many it
                # was throttled (cpu.stat's counters, read around it).
                for key, stat in (("init", stat_init), ("cold", stat_cold)):
                    for counter in ("nr_periods", "nr_throttled"):
                        if counter in stat and counter in stat_before:
                            sample[f"{key}_{counter}"] = stat[counter] - stat_before[counter]
                samples[subject.name].append(sample)
            except (FunctionDied, TimeoutError, ProtocolError) as err:
                fail(f"{subject.name} over {transport}: {err}; see {fn.log_path}")
            finally:
                fn.stop()
        log(f"  cold {transport}{quota.label if quota else ''}: round {i + 1}/{rounds}")
    return samples


def warm_run(run, subject, transport, count, events, quota=None):
    """One process: its cold start, then `count` sequential invocations
    (inside `quota`'s cgroup when given)."""
    fn = run.process(subject, transport, run.table(subject, transport), quota)
    try:
        fn.start()
        check_created(subject, fn.invoke(events.create())[0])
        walls, cpus = [], []
        fn.api.wait_next()
        cpu_start, ticks_start = fn.cpu(), fn.user_sys_ticks()
        window_start = time.perf_counter()
        for _ in range(count):
            response, wall, cpu = fn.invoke(events.create())
            check_created(subject, response)
            walls.append(wall / 1e6)
            cpus.append(cpu / 1e6)
        fn.api.wait_next()
        window_s = time.perf_counter() - window_start
        cpu_total = fn.cpu() - cpu_start
        user, system = (end - start for end, start in zip(fn.user_sys_ticks(), ticks_start, strict=True))
        return {
            "wall_ms": walls,
            "cpu_in_window_ms": cpus,
            "cpu_per_invocation_ms": cpu_total / 1e6 / count,
            "system_share": system / (user + system) if user + system else None,
            "peak_rss_kib": fn.peak_rss_kib(),
            # Back-to-back: the emulator hands over the next event as soon
            # as the function asks for it.
            "invocations_per_s": count / window_s,
        }
    except (FunctionDied, TimeoutError, ProtocolError) as err:
        fail(f"{subject.name} over {transport}: {err}; see {fn.log_path}")
    finally:
        fn.stop()


# ---- Lambda's memory sizes: a CPU quota per size ------------------------------

LAMBDA_FULL_VCPU_MB = 1769  # the memory size that buys one full vCPU
CGROUP_PERIOD_US = 100_000
CGROUP_V1_CPU = "/sys/fs/cgroup/cpu"
CGROUP_V2 = "/sys/fs/cgroup"


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
        name = f"plant-store-bench-{os.getpid()}-{self.memory_mb}"
        errors = []
        controllers = os.path.join(CGROUP_V2, "cgroup.controllers")
        if os.path.isfile(controllers):
            try:
                with open(controllers) as f:
                    if "cpu" not in f.read().split():
                        raise OSError("the cgroup v2 hierarchy has no cpu controller")
                with open(os.path.join(CGROUP_V2, "cgroup.subtree_control"), "w") as f:
                    f.write("+cpu")
                path = os.path.join(CGROUP_V2, name)
                os.makedirs(path, exist_ok=True)
                self.path, self.version = path, 2
                with open(os.path.join(path, "cpu.max"), "w") as f:
                    f.write(f"{self.quota_us} {CGROUP_PERIOD_US}")
                return None
            except OSError as err:
                errors.append(f"cgroup v2: {err.strerror or err}")
                self.remove()
        if os.path.isfile(os.path.join(CGROUP_V1_CPU, "cpu.cfs_quota_us")):
            try:
                path = os.path.join(CGROUP_V1_CPU, name)
                os.makedirs(path, exist_ok=True)
                self.path, self.version = path, 1
                with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
                    f.write(str(CGROUP_PERIOD_US))
                with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
                    f.write(str(self.quota_us))
                return None
            except OSError as err:
                errors.append(f"cgroup v1: {err.strerror or err}")
                self.remove()
        return "; ".join(errors) or "no cgroup v2 cpu controller and no cgroup v1 cpu hierarchy"

    @contextlib.contextmanager
    def spawning(self):
        """The harness joins the cgroup while it spawns a function process,
        which so starts inside it (and keeps its own pid and CPU clock),
        then goes back to the cgroup it came from."""
        home = self.home()
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        try:
            yield
        finally:
            with open(os.path.join(home, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

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

    def throttled(self):
        """(periods throttled, total periods) so far, from cpu.stat."""
        stat = self.stat()
        return stat.get("nr_throttled"), stat.get("nr_periods")

    def remove(self):
        if self.path is None:
            return
        for _ in range(50):
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
    transport = args.memory_transport
    out = {"transport": transport, "period_us": CGROUP_PERIOD_US, "sizes": {}}
    said = False
    for memory_mb in args.memory:
        quota = CpuQuota(memory_mb)
        why_not = quota.create()
        if why_not:
            if not said:
                print(f"no CPU quota ({why_not}): the memory sizes are measured without one", flush=True)
                said = True
            quota = None
        try:
            share = "no quota"
            if quota:
                share = f"quota {quota.quota_us} us per {CGROUP_PERIOD_US} us, cgroup v{quota.version}"
            log(
                f"{memory_mb} MB ({share}): {args.memory_cold} cold starts and "
                f"{args.memory_warm} warm invocations per implementation"
            )
            cold = cold_starts(run, subjects, transport, args.memory_cold, events, quota)
            warm = {}
            for subject in subjects:
                warm[subject.name] = warm_run(run, subject, transport, args.memory_warm, events, quota)
            throttled, periods = quota.throttled() if quota else (None, None)
            out["sizes"][str(memory_mb)] = {
                "quota_us": quota.quota_us if quota else None,
                "cgroup": f"v{quota.version}" if quota else None,
                "no_quota_reason": why_not,
                "throttled_periods": throttled,
                "periods": periods,
                "cold": cold,
                "warm": warm,
            }
        finally:
            if quota:
                quota.remove()
    return out


# ---- throughput per execution environment, as on Lambda Managed Instances ---------


def machine_busy_s():
    """CPU seconds all processes have used on the machine, from /proc/stat."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def proc_cpu_ns(pid):
    try:
        return cpu_ns(pid)
    except OSError:
        return 0


def answer_problems(done):
    """Every concurrent answer: a created plant, naming its own request id."""
    problems = []
    for invocation in done:
        response = invocation.response
        headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
        if response.get("statusCode") != 200 or json.loads(response.get("body") or "null") != PLANT:
            problems.append(f"{invocation.request_id}: {response.get('statusCode')} {response.get('body')!r}")
        elif headers.get("x-request-id") != invocation.request_id:
            problems.append(f"the answer to {invocation.request_id} names {headers.get('x-request-id')!r}")
    return problems


def check_answers(subject, done):
    if problems := answer_problems(done):
        fail(f"{subject.name}: {problems[0]} (and {len(problems) - 1} more)")


def concurrency_run(run, subject, transport, concurrency, count, events):
    """One process given `concurrency` (AWS_LAMBDA_MAX_CONCURRENCY), on the
    machine's whole cores, against the store with a stated latency: it must
    park that many GET /next at once; a warm-up; then `count` creates with
    `concurrency` in flight, every worker parked again before and after the
    window, so that the CPU clock readings frame it exactly."""
    fn = run.process(subject, transport, run.table(subject, transport), concurrency=concurrency)
    store = run.store(transport)
    others = {
        "machine, all processes": lambda: machine_busy_s() * 1e9,
        "emulator": time.process_time_ns,
        "store proxy": lambda: proc_cpu_ns(store.proc.pid),
        "DynamoDB Local": lambda: proc_cpu_ns(run.ddb.proc.pid),
    }
    try:
        fn.start()
        try:
            fn.api.wait_next(timeout=10, count=concurrency)
        except TimeoutError:
            fail(f"{subject.name} parked only {len(fn.api.parked)} of {concurrency} GET /next at once: "
                 "does it honour AWS_LAMBDA_MAX_CONCURRENCY?")  # fmt: skip
        check_answers(subject, fn.serve((events.create() for _ in range(max(200, 4 * concurrency))), concurrency))
        fn.api.wait_next(count=concurrency)
        cpu_start, others_start, started = fn.cpu(), {k: f() for k, f in others.items()}, time.perf_counter()
        done = fn.serve((events.create() for _ in range(count)), concurrency)
        window_s = time.perf_counter() - started
        fn.api.wait_next(count=concurrency)
        cpu_ms = (fn.cpu() - cpu_start) / 1e6
        others_ms = {k: (f() - others_start[k]) / 1e6 for k, f in others.items()}
        check_answers(subject, done)
        return {
            "concurrency": concurrency,
            "invocations": count,
            "wall_ms": [invocation.wall_ns / 1e6 for invocation in done],
            "creates_per_s": count / window_s,
            "cpu_per_invocation_ms": cpu_ms / count,
            "peak_rss_kib": fn.peak_rss_kib(),
            "max_parked": fn.api.max_parked,
            "missing_echo": fn.api.missing_echo,
            # Where the machine's CPU went in the window: a harness that
            # uses the rest of the cores bounds the rate, not the function.
            "cpu_share_of_machine": {"function": cpu_ms / 1e3 / window_s / len(os.sched_getaffinity(0)),
                                     **{k: v / 1e3 / window_s / len(os.sched_getaffinity(0))
                                        for k, v in others_ms.items()}},
        }  # fmt: skip
    except (FunctionDied, TimeoutError, ProtocolError) as err:
        fail(f"{subject.name} at concurrency {concurrency} over {transport}: {err}; see {fn.log_path}")
    finally:
        fn.stop()


WARM_CONCURRENT = 4000


def concurrency_runs(run, subjects, args, events):
    out = {
        "transport": args.concurrency_transport,
        "store_latency_ms": args.store_latency_ms,
        "vcpus": len(os.sched_getaffinity(0)),
    }
    # The Python and Node.js peers' hand-written loops take one invocation at a time.
    rust = [subject for subject in subjects if subject.kind == "rust"]
    out["subjects"] = {subject.name: {} for subject in rust}
    if rust:
        # DynamoDB Local's JVM compiles its concurrent paths under the first
        # concurrent load: without this, whichever runs first pays for it.
        log(f"warming DynamoDB Local under concurrency: {WARM_CONCURRENT} creates, {max(args.concurrency)} at once")
        concurrency_run(run, rust[0], args.concurrency_transport, max(args.concurrency), WARM_CONCURRENT, events)
    for i, concurrency in enumerate(args.concurrency):
        # Each level in another order, so that DynamoDB Local's JIT and the
        # machine's load favour no implementation.
        for subject in rust[i % len(rust) :] + rust[: i % len(rust)]:
            log(f"{args.concurrency_transport}: {subject.name}: {args.concurrency_invocations} creates "
                f"at concurrency {concurrency}")  # fmt: skip
            result = concurrency_run(
                run, subject, args.concurrency_transport, concurrency, args.concurrency_invocations, events
            )
            out["subjects"][subject.name][str(concurrency)] = result
    return out


# ---- memory over time -----------------------------------------------------------


def rss_kib(pid):
    """The resident set now (VmRSS), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def long_checkpoints(count):
    marks = {1, 100, 1000, 2000, count} | {count * i // 10 for i in range(1, 10)}
    return sorted(m for m in marks if 1 <= m <= count)


def long_run(run, subject, transport, count, events):
    """One process, `count` warm invocations back to back (each with a fresh
    request and trace id, as the emulator sends), its peak and current RSS
    read at checkpoints: a per-invocation leak shows as a peak that keeps
    growing after the first thousands."""
    fn = run.process(subject, transport, run.table(subject, transport))
    marks = long_checkpoints(count)
    checkpoints = []
    try:
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
                        "peak_rss_kib": fn.peak_rss_kib(),
                        "rss_kib": rss_kib(fn.proc.pid),
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
    except (FunctionDied, TimeoutError, ProtocolError) as err:
        fail(f"{subject.name} long run over {transport}: {err}; see {fn.log_path}")
    finally:
        fn.stop()


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def benchmark(args, subjects, scratch):
    results = {"transports": {}, "load": {"before": loadavg()}}
    events = Events(start=10_000_000)
    # The fixtures serve every transport any part of the run uses.
    used = set(args.transport)
    used |= {args.memory_transport} if args.memory else set()
    used |= {args.long_transport} if args.long else set()
    with Run(scratch, used, args.store_latency_ms) as run:
        log(f"warming DynamoDB Local's JVM with {args.ddb_warmup} writes")
        warm_table = "bench-jvm-warm-up"
        run.client.create_table(warm_table)
        run.client.warm(warm_table, args.ddb_warmup)
        for transport in args.transport:
            log(f"{transport}: {args.cold} cold starts per implementation")
            cold = cold_starts(run, subjects, transport, args.cold, events)
            warm = {}
            for subject in subjects:
                log(f"{transport}: {subject.name}: {args.warm} warm invocations")
                warm[subject.name] = warm_run(run, subject, transport, args.warm, events)
            results["transports"][transport] = {"cold": cold, "warm": warm}
            results["load"][f"after_{transport}"] = loadavg()
        if args.memory:
            results["memory"] = memory_sizes(run, subjects, args, events)
            results["load"]["after_memory"] = loadavg()
        if args.concurrency:
            results["concurrency"] = concurrency_runs(run, subjects, args, events)
            results["load"]["after_concurrency"] = loadavg()
        if args.long:
            results["long"] = {"transport": args.long_transport, "subjects": {}}
            for subject in subjects:
                log(f"{args.long_transport}: {subject.name}: {args.long} warm invocations for memory over time")
                long = long_run(run, subject, args.long_transport, args.long, events)
                results["long"]["subjects"][subject.name] = long
            results["load"]["after_long"] = loadavg()
    return results


# ---- the smoke test ---------------------------------------------------------------


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


def smoke(args, subjects, scratch):
    passed, failed = 0, 0
    with Run(scratch, args.transport, args.store_latency_ms) as run:
        for transport in args.transport:
            for subject in subjects:
                fn = run.process(subject, transport, run.table(subject, transport))
                events = Events(start=1000)
                problems = []
                try:
                    fn.start()
                    cases = (
                        conformance_cases(events)
                        if transport == "http"
                        else [
                            ("create", events.create(), 200, PLANT),
                            ("create", events.create(), 200, PLANT),
                        ]
                    )
                    if subject.name == "idiomatic":
                        # serde_json refuses an unpaired surrogate escape as
                        # a syntax error (40001), where plant-store reads a
                        # well-formed but invalid value (40004): the bench
                        # does not send one.
                        cases = [case for case in cases if case[0] != "unpaired surrogate"]
                    for label, event, status, expected in cases:
                        response, _, _ = fn.invoke(event)
                        body = json.loads(response.get("body") or "null")
                        got = body if status == 200 else (body or {}).get("error")
                        headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
                        if (response.get("statusCode"), got) != (status, expected):
                            problems.append(f"{label}: {response.get('statusCode')} {response.get('body')}")
                        elif headers.get("content-type") != "application/json" or "x-request-id" not in headers:
                            problems.append(f"{label}: standard headers missing: {headers}")
                except (FunctionDied, TimeoutError, ProtocolError) as err:
                    problems.append(f"{err}; see {fn.log_path}")
                finally:
                    fn.stop()
                ok = not problems
                passed, failed = passed + ok, failed + (not ok)
                print(f"{'ok  ' if ok else 'FAIL'} {subject.name} over {transport}", flush=True)
                for problem in problems:
                    print(f"     {problem}", flush=True)
        transport = "http" if "http" in args.transport else args.transport[0]
        for subject in (s for s in subjects if s.kind == "rust"):
            problems = smoke_concurrent(run, subject, transport)
            passed, failed = passed + (not problems), failed + bool(problems)
            print(f"{'FAIL' if problems else 'ok  '} {subject.name} over {transport}, {SMOKE_CONCURRENCY} at once",
                  flush=True)  # fmt: skip
            for problem in problems:
                print(f"     {problem}", flush=True)
    print(f"smoke: {passed} passed, {failed} failed", flush=True)
    return failed == 0


SMOKE_CONCURRENCY = 4


def smoke_concurrent(run, subject, transport):
    """A few concurrent invocations: SMOKE_CONCURRENCY GET /next parked at
    once, each answer on its own request id with its own invocation id, one
    item per create, and (for plant-store) each invocation's trace id on
    its DynamoDB request."""
    table = run.table(subject, transport)
    fn = run.process(subject, transport, table, concurrency=SMOKE_CONCURRENCY)
    events = Events(start=2000)
    try:
        fn.start()
        fn.api.wait_next(timeout=10, count=SMOKE_CONCURRENCY)
        done = fn.serve([events.create() for _ in range(3 * SMOKE_CONCURRENCY)], SMOKE_CONCURRENCY)
    except TimeoutError:
        return [f"parked {len(fn.api.parked)} of {SMOKE_CONCURRENCY} GET /next at once; see {fn.log_path}"]
    except (FunctionDied, ProtocolError) as err:
        return [f"{err}; see {fn.log_path}"]
    finally:
        fn.stop()
    problems = answer_problems(done)
    if (stored := run.client.count(table)) != len(done):
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


# ---- the machine -------------------------------------------------------------------


def command_version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def machine():
    model = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    os_name = None
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "arch": platform.machine(),
        "os": os_name,
        "kernel": platform.release(),
        "memory_gib": round(mem_kib / 1024 / 1024),
        "rustc": command_version(["rustc", "--version"]),
        "python": platform.python_version(),
        "node": command_version(["node", "--version"]),
        "java": command_version(["java", "-version"]),
        "openssl": command_version(["openssl", "version"]),
    }


# ---- main ------------------------------------------------------------------------


def scrub(arg):
    """An argument with every absolute path cut to its file name, so that
    no path of this machine lands in the results."""
    import re

    return re.sub(r"/[^,=\s]*/", "", arg)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="a few checked invocations of each implementation")
    parser.add_argument("--install-only", action="store_true", help="install the peers' dependencies and stop")
    parser.add_argument("--impl", default=",".join(IMPLS), help="comma-separated: " + ", ".join(IMPLS))
    parser.add_argument("--transport", default="http,https", help="comma-separated: http, https")
    parser.add_argument("--cold", type=int, default=20, help="fresh processes per implementation (default 20)")
    parser.add_argument("--warm", type=int, default=2000, help="sequential warm invocations (default 2000)")
    parser.add_argument("--ddb-warmup", type=int, default=3000, help="writes to warm DynamoDB Local's JVM first")
    parser.add_argument("--binary", help="the Rust function to run (default: build it with cargo)")
    parser.add_argument(
        "--rust", action="append", metavar="NAME=BINARY[,KEY=VALUE...]",
        help="a Rust build to measure, with extra environment; certs=dir|file picks the CA loading (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--memory", default="128,256,512,1024,1769",
        help="Lambda memory sizes (MB) to measure under their CPU quota, comma-separated; 'none' for none "
             "(default 128,256,512,1024,1769)",
    )  # fmt: skip
    parser.add_argument(
        "--memory-cold", type=int, default=10, help="fresh processes per implementation and size (default 10)"
    )
    parser.add_argument(
        "--memory-warm", type=int, default=500, help="warm invocations per implementation and size (default 500)"
    )
    parser.add_argument("--memory-transport", default="https", help="transport of the memory-size runs (default https)")
    parser.add_argument(
        "--concurrency", default="1,8,32,64",
        help="invocations in flight per execution environment (AWS_LAMBDA_MAX_CONCURRENCY) for the Rust "
             "implementations, comma-separated; 'none' for none (default 1,8,32,64)",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency-invocations", type=int, default=4000, help="creates per concurrency level (default 4000)"
    )
    parser.add_argument(
        "--concurrency-transport", default="https", help="transport of the concurrency runs (default https)"
    )
    parser.add_argument(
        "--store-latency-ms", type=float, default=report.DDB_LATENCY_MS,
        help="delay added to every DynamoDB request in the concurrency runs: an in-region PutItem "
             f"(default {report.DDB_LATENCY_MS})",
    )  # fmt: skip
    parser.add_argument(
        "--long", type=int, default=100_000,
        help="warm invocations of one process per implementation, for memory over time; 0 for none (default 100000)",
    )  # fmt: skip
    parser.add_argument("--long-transport", default="http", help="transport of the long runs (default http)")
    parser.add_argument(
        "--ddb-latency-ms", type=float, default=report.DDB_LATENCY_MS,
        help=f"assumed in-region DynamoDB latency added to billed durations (default {report.DDB_LATENCY_MS})",
    )  # fmt: skip
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="where results go")
    parser.add_argument("--label", default="", help="a note stored with the results")
    args = parser.parse_args(argv)
    args.impl = [x for x in args.impl.split(",") if x]
    args.transport = [x for x in args.transport.split(",") if x]
    for impl in args.impl:
        if impl not in IMPLS:
            parser.error(f"unknown implementation {impl}")
    for transport in args.transport:
        if transport not in ("http", "https"):
            parser.error(f"unknown transport {transport}")
    try:
        args.memory = [] if args.memory in ("", "none") else [int(x) for x in args.memory.split(",") if x]
    except ValueError:
        parser.error("--memory takes memory sizes in MB, comma-separated, or none")
    if any(not 128 <= m <= 10240 for m in args.memory):
        parser.error("--memory sizes must be from 128 to 10240 MB, as Lambda's")
    try:
        args.concurrency = (
            [] if args.concurrency in ("", "none") else [int(x) for x in args.concurrency.split(",") if x]
        )
    except ValueError:
        parser.error("--concurrency takes counts, comma-separated, or none")
    if any(n < 1 for n in args.concurrency) or args.concurrency_invocations < 1:
        parser.error("--concurrency and --concurrency-invocations must be at least 1")
    for transport in (args.memory_transport, args.long_transport, args.concurrency_transport):
        if transport not in ("http", "https"):
            parser.error(f"unknown transport {transport}")
    if args.long < 0:
        parser.error("--long must be 0 or more")
    if args.smoke:
        args.cold, args.warm = 1, 0
        args.memory, args.long, args.concurrency = [], 0, []
    if not args.smoke and (args.cold < 1 or args.warm < 1):
        parser.error("--cold and --warm must be at least 1")
    if args.memory and (args.memory_cold < 1 or args.memory_warm < 1):
        parser.error("--memory-cold and --memory-warm must be at least 1")

    return args


def main(argv=None):
    args = parse_args(argv)
    # The smoke rebuilds the idiomatic peer only on a warm cache (a build
    # already in .tools/bench/rust-target: seconds for a change of its
    # source); its first build takes minutes and is left to make bench.
    warm_cache = os.path.isdir(os.path.join(RUST_PEER_TARGET, "release"))
    install_peers(args.impl, build_rust=not args.smoke or warm_cache)
    if args.install_only:
        return 0
    if shutil.which("java") is None:
        fail("java is needed for DynamoDB Local: install a Java 17+ runtime")
    subjects = subjects_for(args)
    scratch = tempfile.mkdtemp(prefix="plant-store-bench-")
    try:
        if args.smoke:
            return 0 if smoke(args, subjects, scratch) else 1
        started = time.time()
        results = benchmark(args, subjects, scratch)
        results.update(
            {
                "schema": 1,
                "label": args.label,
                "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "duration_s": round(time.time() - started),
                "command": " ".join(["python3", "bench/run.py", *map(scrub, argv or sys.argv[1:])]),
                "settings": {
                    "cold": args.cold,
                    "warm": args.warm,
                    "ddb_warmup": args.ddb_warmup,
                    "memory": args.memory,
                    "memory_cold": args.memory_cold,
                    "memory_warm": args.memory_warm,
                    "long": args.long,
                    "concurrency": args.concurrency,
                    "concurrency_invocations": args.concurrency_invocations,
                    "store_latency_ms": args.store_latency_ms,
                    "ddb_latency_ms": args.ddb_latency_ms,
                },
                "machine": machine(),
                "subjects": {
                    s.name: {
                        "kind": s.kind,
                        "size_bytes": s.size,
                        "size_note": s.size_note,
                        "env": s.env,
                        "certs": s.certs if s.kind == "rust" else None,
                    }
                    for s in subjects
                },
            }
        )
        summary = report.summarise(results)
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write(report.markdown(summary))
        charts = report.write_charts(summary, args.out)
        print(report.markdown(summary))
        log(f"wrote results.json, results.md{''.join(', ' + c for c in charts)} to {os.path.relpath(args.out)}")
        return 0
    finally:
        if os.environ.get("BENCH_KEEP_SCRATCH"):
            log(f"logs kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
