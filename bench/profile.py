#!/usr/bin/env python3
"""Where a warm invocation's instructions go: one function process under
callgrind, served by the benchmark's Runtime API emulator against DynamoDB
Local, its counters zeroed after a warm-up and dumped after a window of
creates, one at a time or `--concurrency` in flight. With `--perf`, the
process runs as it is and `perf record` samples its CPU clock over the
window instead (kernel included, threads truly concurrent: what callgrind,
which runs one thread at a time and counts no kernel work, cannot show).

Instruction counts, unlike CPU time, come out the same on a machine busy
with other work, so that two builds (plant-store and bench/floor) profiled
one after the other compare fairly. Needs valgrind (`callgrind_control`
included) and a build with symbols: the release profile with
`CARGO_PROFILE_RELEASE_STRIP=false` (and, for line numbers,
`CARGO_PROFILE_RELEASE_DEBUG=line-tables-only`), which changes no code.

    bench/profile.py --binary target/release/plant-store --out /tmp/ps
    bench/profile.py --floor target/release/plant-store-bench-floor --out /tmp/floor
    bench/profile.py --binary ... --concurrency 64 --invocations 2000 --out /tmp/ps64
    bench/profile.py --binary ... --concurrency 64 --invocations 4000 --perf --out /tmp/ps64perf
    bench/profile.py --binary ... --cache --out /tmp/pscache   # and cache misses (I1mr, D1mr, D1mw)
    bench/profile.py --binary ... --footprint --out /tmp/psfoot   # and the code the window ran, in cache lines
    bench/profile.py --idiomatic --out /tmp/peer   # the idiomatic Rust peer (make bench builds it)

Prints the window's instructions per invocation; `callgrind_annotate
--inclusive=yes OUT/callgrind.out.*` splits them by function.
Figures and method: docs/performance.md ("The floor").
"""

import argparse
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time

from fixtures import Events, Run, check_answers, check_created
from run import at_least
from subjects import RUST_PEER_BIN, Subject, fail, floor_subject, log, peer_subject, rust_subject


def callgrind(control, pid):
    subprocess.run(["callgrind_control", control, str(pid)], check=True, capture_output=True)


def instructions(path):
    """The `summary:` (or `totals:`) line of a callgrind dump: Ir."""
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return None


def code_lines(path):
    """The distinct 64-byte lines of code that executed in a dump made with
    `--dump-instr=yes`, by object: how much code an invocation brings into
    the instruction cache, which a cache warm from the last invocation
    holds only in part. A cost line's first position is the instruction's
    address, absolute (`0x...`), relative to the line before (`+n`, `-n`)
    or the same (`*`); the line after `calls=` is at the call's address
    and counts the callee's cost, which is not this address's."""
    lines, obj, address, after_call = {}, None, 0, False
    with open(path) as f:
        for line in f:
            if line.startswith("ob="):
                obj = os.path.basename(line[3:].strip())
            elif line.startswith("calls="):
                after_call = True
            elif line[:1] in ("+", "-", "*") or line.startswith("0x"):
                position, _, *costs = line.split()
                if position.startswith("0x"):
                    address = int(position, 16)
                elif position != "*":
                    address += int(position)
                if not after_call and costs and int(costs[0]):
                    lines.setdefault(obj, set()).add(address >> 6)
                after_call = False
    return {obj: len(found) for obj, found in lines.items()}


def profile(args, subject, wrapped, events, scratch):
    """The function's warm-up, then its counters zeroed, the window, and a dump."""
    concurrency = args.concurrency if args.concurrency > 1 else None
    with Run(scratch, (args.transport,), 5.0) as run:
        if args.jwt:
            events.headers["authorization"] = f"Bearer {run.start_issuer()}"
        with run.function(wrapped, args.transport, " under callgrind", concurrency=concurrency) as fn:
            fn.start()
            # The warm-up's answers are not checked: under callgrind,
            # 50 times slower, an init-time fetch of the issuer's keys
            # may miss its budget, and the first answers be 503s.
            if concurrency:
                fn.api.wait_next(timeout=120, count=concurrency)
                fn.serve((events.create() for _ in range(args.warm)), concurrency)
                fn.api.wait_next(timeout=120, count=concurrency)
            else:
                for _ in range(args.warm):
                    fn.invoke(events.create())
                fn.api.wait_next(timeout=120)
            log(f"{subject.name}: warm; {args.invocations} invocations profiled")
            if args.perf:
                data = os.path.join(args.out, "perf.data")
                record = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "2999", "-p", str(fn.proc.pid), "-o", data]
                recorder = subprocess.Popen(record)
                time.sleep(1)  # perf attaches to every thread before the window
                switches, cpu = fn.context_switches(), fn.cpu()
            else:
                callgrind("-z", fn.proc.pid)
            if concurrency:
                check_answers(wrapped, fn.serve((events.create() for _ in range(args.invocations)), concurrency))
                fn.api.wait_next(timeout=120, count=concurrency)
            else:
                for _ in range(args.invocations):
                    check_created(wrapped, fn.invoke(events.create())[0])
                fn.api.wait_next(timeout=120)
            if args.perf:
                cpu, switches = fn.cpu() - cpu, fn.context_switches() - switches
                recorder.send_signal(signal.SIGINT)
                recorder.wait(timeout=60)
                print(
                    f"{subject.name}: {cpu / 1e6 / args.invocations:.3f} ms CPU and "
                    f"{switches / args.invocations:.2f} context switches per invocation; samples in {data}"
                )
            else:
                callgrind("-d", fn.proc.pid)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--binary", help="a plant-store build with symbols")
    which.add_argument("--floor", help="a bench/floor build with symbols")
    which.add_argument(
        "--idiomatic", nargs="?", const=RUST_PEER_BIN, help="the idiomatic Rust peer (default: make bench's build)"
    )
    parser.add_argument("--sampled", action="store_true", help="every invocation sampled for X-Ray (traced)")
    parser.add_argument(
        "--jwt", action="store_true", help="a JWT on every request, checked against a throw-away issuer"
    )
    parser.add_argument("--transport", choices=("http", "https"), default="https")
    parser.add_argument("--warm", type=at_least(1), default=50, help="invocations before the window (default 50)")
    parser.add_argument("--invocations", type=at_least(1), default=200, help="invocations in the window (200)")
    parser.add_argument("--concurrency", type=at_least(1), default=1, help="in flight (default 1: one at a time)")
    parser.add_argument("--perf", action="store_true", help="perf record's samples instead of callgrind")
    parser.add_argument(
        "--cache", action="store_true", help="callgrind's cache simulation too: first-level misses per function"
    )
    parser.add_argument(
        "--footprint", action="store_true", help="the distinct cache lines of code the window ran, by object"
    )
    parser.add_argument("--out", required=True, help="a folder for the callgrind dumps (or perf.data)")
    args = parser.parse_args()
    if (args.cache or args.footprint) and args.perf:
        parser.error("--cache and --footprint are callgrind's: not with --perf")
    for tool in ("perf",) if args.perf else ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            fail(f"{tool} is needed: install valgrind")
    if args.floor:
        subject = floor_subject(args.floor)
    elif args.idiomatic:
        subject = peer_subject(args.idiomatic)
    else:
        subject = rust_subject("traced" if args.sampled else "rust", args.binary, ["xray=sampled"] * args.sampled)
    os.makedirs(args.out, exist_ok=True)
    for old in glob.glob(os.path.join(args.out, "callgrind.out.*")):
        os.remove(old)
    out_file = os.path.join(os.path.abspath(args.out), "callgrind.out.%p")
    # The same subject, its program run under callgrind (or as it is).
    wrapped = (
        subject
        if args.perf
        else Subject(
            **{
                **vars(subject),
                "argv": [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={out_file}",
                    # Every file and function named in full in each dump:
                    # the window's dump is read alone (bench/crossed.py).
                    "--compress-strings=no",
                    "--vgdb=yes",
                    *(["--cache-sim=yes"] if args.cache else []),
                    *(["--dump-instr=yes"] if args.footprint else []),
                    *subject.argv,
                ],
            }
        )
    )
    events = Events(start=30_000_000)
    with tempfile.TemporaryDirectory(prefix="plant-store-profile-") as scratch:
        try:
            profile(args, subject, wrapped, events, scratch)
        except SystemExit:
            for path in glob.glob(os.path.join(scratch, f"{subject.name}-*.log")):
                with open(path, errors="replace") as f:
                    log(f"the end of {os.path.basename(path)}:\n" + "".join(f.readlines()[-20:]))
            raise
    if args.perf:
        return
    dumps = sorted(glob.glob(os.path.join(args.out, "callgrind.out.*.1")))
    if not dumps:
        fail(f"no dump of the window in {args.out}")
    for stale in set(glob.glob(os.path.join(args.out, "callgrind.out.*"))) - set(dumps):
        os.remove(stale)
    total = instructions(dumps[0])
    print(
        f"{subject.name} over {args.transport}, {args.concurrency} in flight: "
        f"{total / args.invocations:,.0f} instructions per invocation ({dumps[0]})"
    )
    if args.footprint:
        lines = code_lines(dumps[0])
        by_object = ", ".join(f"{obj} {count:,}" for obj, count in sorted(lines.items(), key=lambda kv: -kv[1]))
        print(f"code run in the window: {sum(lines.values()):,} lines of 64 bytes ({by_object})")


if __name__ == "__main__":
    main()
