#!/usr/bin/env python3
"""The floor under plant-store's cold start, step by step.

A cold start's CPU is plant-store's own work plus what any Rust function
pays that uses the same SDK and TLS stack the same way. This measures the
second part apart: bench/floor/ is plant-store's own SDK set-up, pre-warm
and `PutItem` (the crate as a library), built with the same release
profile, with nothing else of the function, stopped after each step
(`FLOOR_UNTIL`) and its process CPU clock (user and kernel time, all
threads) read there. In the same run, interleaved, plant-store's cold total
(init and the first invocation, to its answer), as bench/run.py measures it.
Everything over HTTPS to DynamoDB Local through the benchmark's TLS
terminator, with the Lambda environment bench/emulator.py gives.

    bench/floor.py                   # 60 of each (make bench-floor)
    bench/floor.py --runs 20 --binary path/to/bootstrap

Figures and method: docs/performance.md ("The floor").
"""

import argparse
import os
import statistics
import subprocess
import tempfile

from emulator import cpu_ns, lambda_environment
from fixtures import Events, Run, check_created
from run import at_least
from subjects import REPO, TOOLS, build_rust, log, rust_subject

FLOOR_DIR = os.path.join(REPO, "bench", "floor")
FLOOR_TARGET = os.path.join(TOOLS, "floor-target")
FLOOR_BIN = os.path.join(FLOOR_TARGET, "release", "plant-store-bench-floor")
STEPS = {
    "main": "the process started (exec, loader, libc, Rust's start-up)",
    "client": "+ the SDK's configuration and the DynamoDB client",
    "connection": "+ the pre-warm (DNS, TCP, TLS handshake, a signed DescribeTable)",
    "put": "+ one PutItem on that connection",
}


def build_floor():
    """In this repository (so that its .cargo/config.toml applies, as it
    does to plant-store), into .tools/bench/floor-target."""
    log("building bench/floor into .tools/bench/floor-target (a few minutes the first time)")
    manifest = os.path.join(FLOOR_DIR, "Cargo.toml")
    cargo = ["cargo", "build", "--release", "--locked", "--manifest-path", manifest, "--target-dir", FLOOR_TARGET]
    subprocess.run(cargo, cwd=REPO, check=True)
    return FLOOR_BIN


def floor_cpu_ms(binary, env, step):
    """One fresh floor process stopped after `step`: its CPU there, in ms."""
    process = subprocess.Popen([binary], env=env | {"FLOOR_UNTIL": step}, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = process.stdout.readline()
        if line.strip() != b"ready":
            raise SystemExit(f"error: the floor stopped before its step {step!r} (exit {process.wait()})")
        return cpu_ns(process.pid) / 1e6
    finally:
        process.stdin.close()
        process.wait(timeout=10)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=at_least(1), default=60, help="cold starts of each (default 60)")
    parser.add_argument("--binary", help="the plant-store build to compare (default: build it with cargo)")
    args = parser.parse_args()
    floor = build_floor()
    subject = rust_subject("plant-store", args.binary or build_rust("release"))
    with tempfile.TemporaryDirectory(prefix="plant-store-floor-") as scratch, Run(scratch, ("https",)) as run:
        events, table = Events(start=1), run.table(subject, "https")
        extra = subject.environment("https", run.proxy.endpoint, run.certs, table)
        env = lambda_environment("127.0.0.1:9", extra)  # the floor never calls the Runtime API
        cpu = {step: [] for step in [*STEPS, "plant-store"]}
        for _ in range(args.runs):
            for step in STEPS:
                cpu[step].append(floor_cpu_ms(floor, env, step))
            with run.function(subject, "https", table=table) as function:
                function.start()
                response, _, _ = function.invoke(events.create())
                check_created(subject, response)
                cpu["plant-store"].append(function.cpu_at_response / 1e6)
    print(f"\nCPU of a cold start, median of {args.runs} (min-max), ms; HTTPS to DynamoDB Local")
    previous = 0.0
    for step, label in [*STEPS.items(), ("plant-store", "plant-store: init and the first invocation, to its answer")]:
        median = statistics.median(cpu[step])
        added = "" if step == "main" else f"  ({median - previous:+.2f})"
        print(f"{step:>12}  {median:5.2f} ({min(cpu[step]):.2f}-{max(cpu[step]):.2f}){added}  {label}")
        previous = median


if __name__ == "__main__":
    main()
