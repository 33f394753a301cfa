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
At each checkpoint the X-Ray daemon's stand-in is read too: with
`--sampled`, spans must have arrived since the last one, every datagram
marked `T1S` and holding one invocation's SERVER span; without, none.

    bench/soak.py                                     # 200,000 invocations, release build (make soak)
    bench/soak.py --invocations 20000 --profile debug --max-growth-mb 0.5      # the short version in make test
    bench/soak.py --invocations 20000 --profile debug --max-growth-mb 0.5 --concurrency 8   # and concurrent
    bench/soak.py --binary path/to/bootstrap          # any build
    bench/soak.py --sampled                           # every invocation traced: its spans sent

Runs under the tool venv's Python (boto3 for DynamoDB Local). Figures and method: docs/performance.md
("Flat memory: the soak").
"""

import argparse
import shutil
import sys
import tempfile

from fixtures import Events, Run, check_answers, check_created
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from run import at_least
from subjects import build_rust, fail, log, rust_subject

BASELINE = 2_000  # the invocation growth is measured from


def trace_problems(datagrams, window, sampled):
    """What is wrong with the datagrams the daemon's stand-in holds after
    `window` invocations, all sampled or none.

    The stand-in is read only here, between invocations: reading it while
    they run would take CPU from the function whose memory is measured.
    Meanwhile the kernel keeps what fits in the socket's receive buffer (a
    few tens of datagrams) and drops the rest, as UDP may, so a window
    holds at least one datagram and at most one per invocation, not one
    for each."""
    if not sampled:
        return [f"{len(datagrams)} trace datagrams sent for unsampled invocations"] if datagrams else []
    if not datagrams:
        return [f"no trace datagram arrived in a window of {window:,} sampled invocations"]
    problems = []
    if marks := {mark for mark, _ in datagrams} - {"T1S"}:
        problems.append(f"datagrams marked {sorted(marks)} for sampled invocations")
    if len(datagrams) > window:
        problems.append(f"{len(datagrams)} datagrams for {window:,} invocations")
    servers = [sum(span.kind == Span.SPAN_KIND_SERVER for span in spans) for _, spans in datagrams]
    if odd := [n for n in servers if n != 1]:
        problems.append(f"{len(odd)} datagrams without exactly one SERVER span ({sorted(set(odd))})")
    if crossed := [spans for _, spans in datagrams if len({span.trace_id for span in spans}) != 1]:
        problems.append(f"{len(crossed)} datagrams with the spans of more than one trace")
    return problems


def soak(binary, invocations, checkpoints, scratch, concurrency=1, sampled=False):
    """Runs the soak; returns the checkpoints as dicts."""
    # As deployed: the CA bundle file, over plain HTTP to DynamoDB Local.
    subject = rust_subject("rust", binary, ["xray=sampled"] if sampled else [])
    if concurrency > 1:
        subject.env["AWS_LAMBDA_MAX_CONCURRENCY"] = str(concurrency)
    events = Events(start=1)
    marks = sorted({BASELINE, invocations, *range(0, invocations + 1, max(1, invocations // checkpoints))} - {0})
    rows, done = [], 0
    with Run(scratch, {"http"}) as run:
        table = run.table(subject, "http")
        with run.function(subject, "http", " during the soak", table=table) as fn:
            fn.start()
            try:
                fn.api.wait_next(timeout=10, count=concurrency)
            except TimeoutError:
                fail(f"the function parked {len(fn.api.parked)} of {concurrency} GET /next at once")
            run.daemon.datagrams()  # anything sent before the first invocation
            for n in marks:
                if concurrency == 1:
                    for _ in range(n - done):
                        check_created(subject, fn.invoke(events.create())[0])
                else:
                    check_answers(subject, fn.serve((events.create() for _ in range(n - done)), concurrency))
                window, done = n - done, n
                fn.api.wait_next(count=concurrency)  # every worker idle in GET /next, as between invocations
                hwm, rss = fn.kib(), fn.kib("VmRSS")
                # Every invocation of the window is over: its spans are sent.
                datagrams = run.daemon.datagrams()
                if problems := trace_problems(datagrams, window, sampled):
                    fail(f"after invocation {n:,}: " + "; ".join(problems))
                rows.append({"invocation": n, "peak_rss_kib": hwm, "rss_kib": rss, "datagrams": len(datagrams)})
                log(
                    f"  {n:>9,} invocations: peak RSS {hwm / 1024:7.2f} MB, RSS {rss / 1024:7.2f} MB, "
                    f"{len(datagrams)} trace datagrams read"
                )
        if (stored := run.ddb.count(table)) != invocations:
            fail(f"{invocations} creates answered 200 but the table holds {stored} items")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, kind, default, text in (
        ("--invocations", at_least(BASELINE + 1), 200_000, "warm invocations"),
        ("--max-growth-mb", float, 1.0, "largest accepted peak-RSS growth, MB"),
        ("--checkpoints", at_least(1), 10, "memory readings besides the baseline"),
        ("--concurrency", at_least(1), 1, "invocations in flight (AWS_LAMBDA_MAX_CONCURRENCY)"),
    ):
        parser.add_argument(flag, type=kind, default=default, help=f"{text} (default {default:,})")
    parser.add_argument(
        "--profile", choices=("release", "debug"), default="release", help="build to soak (default release)"
    )
    parser.add_argument("--binary", help="soak this binary instead of building one")
    parser.add_argument("--sampled", action="store_true", help="every invocation sampled for X-Ray (its spans sent)")
    args = parser.parse_args(argv)
    if shutil.which("java") is None:
        fail("java is needed for DynamoDB Local: install a Java 17+ runtime")

    binary = args.binary or build_rust(args.profile)
    at_once = f", {args.concurrency} at once" if args.concurrency > 1 else ""
    at_once += ", every invocation sampled for X-Ray" if args.sampled else ""
    log(f"soak: {args.invocations:,} invocations{at_once}, each with a fresh trace id and a new plant")
    with tempfile.TemporaryDirectory(prefix="plant-store-soak-") as scratch:
        rows = soak(binary, args.invocations, args.checkpoints, scratch, args.concurrency, args.sampled)
    base = next(row["peak_rss_kib"] for row in rows if row["invocation"] == BASELINE)
    growth_kib = rows[-1]["peak_rss_kib"] - base
    ok = growth_kib / 1024 <= args.max_growth_mb
    end = rows[-1]["peak_rss_kib"]
    print(
        f"soak{at_once}: {'ok  ' if ok else 'FAIL'} peak RSS {round(base / 1024, 2)} MB at invocation {BASELINE:,}, "
        f"{round(end / 1024, 2)} MB at {args.invocations:,}: grew {growth_kib / 1024:.3f} MB "
        f"({growth_kib * 1024 / (args.invocations - BASELINE):.1f} bytes per invocation; "
        f"bound {args.max_growth_mb} MB)",
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
