#!/usr/bin/env python3
"""The soak: one warm function process, many invocations, its memory watched.

Lambda keeps an execution environment for hours and sends every invocation
with a fresh `Lambda-Runtime-Trace-Id`. A process that keeps a few bytes of
each invocation is killed, sooner or later, for running out of memory
(at `MemorySize: 128` after about a million requests, at 92 bytes each).
This runs the function under the Runtime API emulator (bench/emulator.py,
which sends a fresh trace id with every event), creates a new plant in
DynamoDB Local per invocation, checks every answer, and reads the process's
resident set at checkpoints: its high-water mark (VmHWM, what Lambda's
`Max Memory Used` reports) must not grow by more than the bound between the
baseline invocation and the last one. With `--concurrency N` the function
is told it may take N invocations at once (`AWS_LAMBDA_MAX_CONCURRENCY`, as
on Lambda Managed Instances), must park N `GET /next` at once, and the
emulator keeps N creates in flight, each answer matched to its request id
and invocation id; memory is read while every worker waits in `GET /next`.

    bench/soak.py                                     # 200,000 invocations, release build (make soak)
    bench/soak.py --invocations 20000 --profile debug --max-growth-mb 0.5      # the short version in make test
    bench/soak.py --invocations 20000 --profile debug --max-growth-mb 0.5 --concurrency 8   # and concurrent
    bench/soak.py --binary path/to/bootstrap          # any build

Runs under the tool venv's Python (boto3 for DynamoDB Local). Figures and method: docs/performance.md
("Flat memory: the soak").
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import ddb  # noqa: E402
from emulator import FunctionDied, FunctionProcess, ProtocolError  # noqa: E402
from run import Events, Subject, answer_problems, check_created  # noqa: E402


def log(message):
    print(message, file=sys.stderr, flush=True)


def memory_kib(pid):
    """(VmHWM, VmRSS) of `pid`, in KiB."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                values[key] = int(rest.split()[0])
    return values["VmHWM"], values["VmRSS"]


def build(profile):
    args = ["cargo", "build", "--bin", "plant-store"] + (["--release"] if profile == "release" else [])
    log("building: " + " ".join(args))
    subprocess.run(args, cwd=REPO, check=True)
    return os.path.join(REPO, "target", profile, "plant-store")


def soak(binary, invocations, baseline, checkpoints, scratch, concurrency=1):
    """Runs the soak; returns the checkpoints as dicts."""
    subject = Subject("rust", "rust", [os.path.abspath(binary)])
    with ddb.DynamoDBLocal(REPO, os.path.join(scratch, "dynamodb-local.log")) as local:
        client = local.client()
        table = "soak"
        client.create_table(table)
        # As deployed: the CA bundle file, over plain HTTP to DynamoDB Local.
        env = subject.environment("http", local.endpoint, None, table)
        if concurrency > 1:
            env["AWS_LAMBDA_MAX_CONCURRENCY"] = str(concurrency)
        fn = FunctionProcess(subject.argv, env, os.path.join(scratch, "function.log"))
        events = Events(start=1)
        marks = sorted({baseline, invocations, *range(0, invocations + 1, max(1, invocations // checkpoints))} - {0})
        rows = []
        started = time.monotonic()
        try:
            fn.start()
            try:
                fn.api.wait_next(timeout=10, count=concurrency)
            except TimeoutError:
                parked = len(fn.api.parked)
                raise SystemExit(f"error: the function parked {parked} of {concurrency} GET /next at once") from None
            done = 0
            for n in marks:
                if concurrency == 1:
                    for _ in range(n - done):
                        check_created(subject, fn.invoke(events.create())[0])
                else:
                    answers = fn.serve((events.create() for _ in range(n - done)), concurrency)
                    if problems := answer_problems(answers):
                        raise SystemExit(f"error: {problems[0]} (and {len(problems) - 1} more)")
                done = n
                fn.api.wait_next(count=concurrency)  # every worker idle in GET /next, as between invocations
                hwm, rss = memory_kib(fn.proc.pid)
                rows.append({"invocation": n, "peak_rss_kib": hwm, "rss_kib": rss,
                             "elapsed_s": round(time.monotonic() - started, 1)})  # fmt: skip
                log(f"  {n:>9,} invocations: peak RSS {hwm / 1024:7.2f} MB, RSS {rss / 1024:7.2f} MB")
        except (FunctionDied, TimeoutError, ProtocolError) as err:
            raise SystemExit(f"error: the function failed during the soak: {err}; see {fn.log_path}") from err
        finally:
            fn.stop()
        stored = client.count(table)
        if stored != invocations:
            raise SystemExit(f"error: {invocations} creates answered 200 but the table holds {stored} items")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--invocations", type=int, default=200_000, help="warm invocations (default 200,000)")
    parser.add_argument(
        "--baseline", type=int, default=2_000, help="the invocation growth is measured from (default 2,000)"
    )
    parser.add_argument(
        "--max-growth-mb", type=float, default=1.0, help="largest accepted peak-RSS growth, MB (default 1.0)"
    )
    parser.add_argument("--checkpoints", type=int, default=10, help="memory readings besides the baseline (default 10)")
    parser.add_argument(
        "--profile", choices=("release", "debug"), default="release", help="build to soak (default release)"
    )
    parser.add_argument("--binary", help="soak this binary instead of building one")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="invocations in flight (AWS_LAMBDA_MAX_CONCURRENCY; default 1)"
    )
    parser.add_argument("--json", help="write the checkpoints and the verdict here")
    args = parser.parse_args(argv)
    if not 0 < args.baseline < args.invocations:
        parser.error("--baseline must be between 0 and --invocations")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if shutil.which("java") is None:
        raise SystemExit("error: java is needed for DynamoDB Local: install a Java 17+ runtime")

    binary = args.binary or build(args.profile)
    scratch = tempfile.mkdtemp(prefix="plant-store-soak-")
    try:
        at_once = f", {args.concurrency} at once" if args.concurrency > 1 else ""
        log(f"soak: {args.invocations:,} invocations{at_once}, each with a fresh trace id and a new plant")
        rows = soak(binary, args.invocations, args.baseline, args.checkpoints, scratch, args.concurrency)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    base = next(row for row in rows if row["invocation"] == args.baseline)
    last = rows[-1]
    growth_mb = (last["peak_rss_kib"] - base["peak_rss_kib"]) / 1024
    per_invocation = (last["peak_rss_kib"] - base["peak_rss_kib"]) * 1024 / (last["invocation"] - base["invocation"])
    ok = growth_mb <= args.max_growth_mb
    verdict = {
        "invocations": args.invocations,
        "concurrency": args.concurrency,
        "baseline": args.baseline,
        "peak_rss_at_baseline_mb": round(base["peak_rss_kib"] / 1024, 2),
        "peak_rss_at_end_mb": round(last["peak_rss_kib"] / 1024, 2),
        "growth_mb": round(growth_mb, 3),
        "bytes_per_invocation": round(per_invocation, 1),
        "max_growth_mb": args.max_growth_mb,
        "ok": ok,
        "checkpoints": rows,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(verdict, f, indent=1)
            f.write("\n")
    print(
        f"soak{at_once}: {'ok  ' if ok else 'FAIL'} peak RSS {verdict['peak_rss_at_baseline_mb']} MB at invocation "
        f"{args.baseline:,}, {verdict['peak_rss_at_end_mb']} MB at {args.invocations:,}: grew {growth_mb:.3f} MB "
        f"({per_invocation:.1f} bytes per invocation; bound {args.max_growth_mb} MB)",
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
