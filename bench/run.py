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
    .tools/venv/bin/python bench/run.py --impl rust --jwt --transport none --memory 128 --long 0 \\
        --concurrency none                              # JWTs on: a cold start that fetches the issuer's keys
"""

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import report  # noqa: E402
from measure import WARM_BLOCK, benchmark, ddb_warmup  # noqa: E402
from smoke import smoke  # noqa: E402
from subjects import HERE, RUST_PEER_TARGET, fail, install_peers, log, subjects_for  # noqa: E402

# traced: rust with every invocation sampled (its spans sent); floor: the
# Runtime API and the PutItem alone (bench/floor, docs/performance.md).
IMPLS = ("rust", "traced", "floor", "idiomatic", "python", "node")
TRANSPORTS = ("http", "https")
SETTINGS = (
    "cold",
    "warm",
    "ddb_warmup",
    "memory",
    "memory_cold",
    "memory_warm",
    "tracing_cold",
    "tracing_warm",
    "long",
    "concurrency",
)
SETTINGS += ("concurrency_invocations", "store_latency_ms", "ddb_latency_ms", "jwt", "warm_block")
SUBJECT_FIELDS = ("kind", "size_bytes", "size_note", "env", "certs", "sampled")


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
        ("--warm", at_least(1), 2000, f"warm invocations per implementation (taking turns in blocks of {WARM_BLOCK})"),
        ("--memory", sizes, "128,256,512,1024,1769", "Lambda memory sizes (MB) under their CPU quota, or none"),
        ("--memory-cold", at_least(1), 20, "fresh processes per implementation and size"),
        ("--memory-warm", at_least(1), 1000, "warm invocations per implementation and size"),
        ("--tracing-cold", at_least(0), 200, "cold starts of rust and traced alone, per place (spans' cost)"),
        ("--tracing-warm", at_least(0), 5000, "warm invocations of rust and traced alone, per place (spans' cost)"),
        ("--concurrency", counts, "1,8,32,64", "invocations in flight (AWS_LAMBDA_MAX_CONCURRENCY), or none"),
        ("--concurrency-invocations", at_least(1), 4000, "creates per concurrency level"),
        ("--store-latency-ms", float, latency, "delay added to each DynamoDB request in the concurrency runs"),
        ("--long", at_least(0), 100_000, "warm invocations of one process, for memory over time; 0 for none"),
        ("--ddb-latency-ms", float, latency, "in-region DynamoDB latency added to billed durations"),
        ("--out", str, os.path.join(HERE, "results"), "where results go"),
    ]
    for flag, kind, default, text in options:
        parser.add_argument(flag, type=kind, default=default, help=f"{text} (default {default})")
    jwt = "JWTs on: a throw-away issuer over HTTPS, whose keys the function fetches, and a JWT on every request"
    parser.add_argument("--jwt", action="store_true", help=jwt + " (plant-store's builds only: --impl rust)")
    parser.add_argument(
        "--concurrency-transport",
        choices=TRANSPORTS,
        default="https",
        help="transport of the concurrency runs (default https)",
    )
    args = parser.parse_args(argv)
    if args.jwt and (args.impl != ["rust"] or args.smoke):
        parser.error("--jwt measures plant-store's builds only (--impl rust), and not in the smoke")
    if args.smoke:
        args.cold, args.warm, args.memory, args.long, args.concurrency = 1, 0, [], 0, []
        args.tracing_cold = args.tracing_warm = 0
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
        values = vars(args) | {"ddb_warmup": ddb_warmup(args), "warm_block": WARM_BLOCK}
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
