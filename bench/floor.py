#!/usr/bin/env python3
"""The floor under plant-store: what any Rust function pays that uses the
same SDK and TLS stack the same way, cold and warm, beside plant-store.

Cold, step by step: bench/floor/ is plant-store's own SDK set-up, pre-warm
and `PutItem` (the crate as a library), built with the same release
profile, with nothing else of the function, stopped after each step
(`FLOOR_UNTIL`) and its process CPU clock (user and kernel time, all
threads) read there. In the same run, interleaved, plant-store's cold total
(init and the first invocation, to its answer), as bench/run.py measures it.
Over HTTPS to DynamoDB Local through the benchmark's TLS terminator, with
the Lambda environment bench/emulator.py gives.

Warm: the same binary as a function (`FLOOR_UNTIL=loop`): per invocation a
`GET /next`, one `PutItem`, a fixed `POST /response`. Its CPU per
invocation is measured as bench/run.py measures plant-store's, with the
same code (bench/measure.py): warm processes taking turns in blocks with
plant-store unsampled (`rust`) and sampled (`traced`), and the idiomatic
peer when it is built; over HTTP and HTTPS, on whole cores and inside 128
MB's CPU quota; then at 1, 8 and 64 in flight, as on Lambda Managed
Instances, a process of each per round, taking turns for eight rounds,
the median round reported, and each level's CPU per create at one rate
for all (`at_equal_rate`). Prints the ratios and writes floor.json and
floor.md into --out.

    bench/floor.py                   # make bench-floor
    bench/floor.py --runs 20 --warm 500 --binary path/to/bootstrap

Figures and method: docs/performance.md ("The floor").
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import report
from emulator import cpu_ns, lambda_environment
from fixtures import Events, Run, check_created
from measure import concurrency_run, warm_runs, warm_up
from quota import CpuQuota
from run import at_least, listed, machine
from subjects import (
    HERE,
    REPO,
    build_floor,
    build_rust,
    floor_subject,
    log,
    peer_subject,
    rust_peer_built,
    rust_subject,
)

STEPS = {
    "main": "the process started (exec, loader, libc, Rust's start-up)",
    "client": "+ the SDK's configuration and the DynamoDB client",
    "connection": "+ the pre-warm (DNS, TCP, TLS handshake, a signed DescribeTable)",
    "put": "+ one PutItem on that connection",
}
TRANSPORTS = ("http", "https")
CONCURRENCY_TRANSPORT = "https"  # as make bench's concurrency runs
DDB_WARMUP = 3000  # writes to warm DynamoDB Local's JVM first, as make bench does


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


def cold(run, floor, subject, runs):
    """The cold steps and plant-store's cold total, interleaved: {step: [ms]}."""
    events, table = Events(start=1), run.table(subject, "https")
    extra = subject.environment("https", run.proxy.endpoint, run.certs, table)
    env = lambda_environment("127.0.0.1:9", extra)  # the floor never calls the Runtime API here
    cpu = {step: [] for step in [*STEPS, "plant-store"]}
    for _ in range(runs):
        for step in STEPS:
            cpu[step].append(floor_cpu_ms(floor, env, step))
        with run.function(subject, "https", table=table) as function:
            function.start()
            response, _, _ = function.invoke(events.create())
            check_created(subject, response)
            cpu["plant-store"].append(function.cpu_at_response / 1e6)
    return cpu


def cold_lines(cpu, runs):
    lines = [f"CPU of a cold start, median of {runs} (min-max), ms; HTTPS to DynamoDB Local", ""]
    previous = 0.0
    for step, label in [*STEPS.items(), ("plant-store", "plant-store: init and the first invocation, to its answer")]:
        median = statistics.median(cpu[step])
        added = "" if step == "main" else f"  ({median - previous:+.2f})"
        lines.append(f"{step:>12}  {median:5.2f} ({min(cpu[step]):.2f}-{max(cpu[step]):.2f}){added}  {label}")
        previous = median
    return lines


def warm(run, subjects, args, events):
    """Each place's warm runs (bench/measure.py), whole cores and inside
    each memory size's quota: {place: {name: warm run}}."""
    places = {}
    for transport in TRANSPORTS:
        log(f"warm, {transport}, whole cores: {args.warm} invocations each of {', '.join(s.name for s in subjects)}")
        places[f"{transport.upper()}, whole cores"] = warm_runs(run, subjects, transport, args.warm, events)
    for memory_mb in args.memory:
        quota = CpuQuota(memory_mb)
        if why_not := quota.create():
            print(f"no CPU quota ({why_not}): {memory_mb} MB is not measured", flush=True)
            continue
        try:
            for transport in TRANSPORTS:
                log(f"warm, {transport}, {memory_mb} MB: {args.warm} invocations each")
                runs = warm_runs(run, subjects, transport, args.warm, events, quota)
                places[f"{transport.upper()}, {memory_mb} MB"] = runs
        finally:
            quota.remove()
    return places


def in_flight(run, subjects, args, events):
    """One process per subject, level and round, as make bench's
    concurrency runs, the subjects taking turns round after round so that
    a drift of the machine's load falls on each alike: {name: {level:
    the rounds' medians}}."""
    out = {s.name: {} for s in subjects}
    if not args.concurrency:
        return out
    count = warm_up(4000, creates_in_flight(args, max(args.concurrency)))
    log(f"warming DynamoDB Local under concurrency: {count} creates, {max(args.concurrency)} at once")
    concurrency_run(run, subjects[0], CONCURRENCY_TRANSPORT, max(args.concurrency), count, events)
    for level in args.concurrency:
        creates = creates_in_flight(args, level)
        rounds = {s.name: [] for s in subjects}
        for i in range(args.in_flight_rounds):
            for subject in subjects[i % len(subjects) :] + subjects[: i % len(subjects)]:
                log(f"{subject.name}: {creates} creates, {level} in flight, round {i + 1}/{args.in_flight_rounds}")
                rounds[subject.name].append(
                    concurrency_run(run, subject, CONCURRENCY_TRANSPORT, level, creates, events)
                )
        for name, runs in rounds.items():
            out[name][str(level)] = medians(runs)
    return out


def creates_in_flight(args, level):
    """Creates per process and round at `level` in flight: as asked, else
    1,000 one at a time and 4,000 with more in flight, where 1,000 take
    under half a second and the rounds scatter by a tenth and more
    (docs/performance.md, "Longer rounds in flight")."""
    return args.concurrency_invocations or (1000 if level == 1 else 4000)


def medians(runs):
    """A level's rounds as one: each figure's median, every round's CPU per
    create, and the latency percentiles of all their creates."""
    walls = [ms for r in runs for ms in r["wall_ms"]]
    figures = ("creates_per_s", "cpu_per_invocation_ms", "system_share", "context_switches_per_invocation")
    return {
        "concurrency": runs[0]["concurrency"],
        "invocations": sum(r["invocations"] for r in runs),
        "rounds": len(runs),
        **{k: statistics.median(r[k] for r in runs) if all(r[k] is not None for r in runs) else None for k in figures},
        "cpu_per_invocation_by_round_ms": [r["cpu_per_invocation_ms"] for r in runs],
        "creates_per_s_by_round": [r["creates_per_s"] for r in runs],
        "peak_rss_kib": max(r["peak_rss_kib"] for r in runs),
        "p50_ms": report.percentile(walls, 50),
        "p99_ms": report.percentile(walls, 99),
    }


def at_equal_rate(concurrency):
    """Each level's CPU per create at one throughput for all: many in flight,
    a process's CPU per create falls as its rate rises (each wake-up serves
    more invocations), and the rate is set less by the function than by
    DynamoDB Local and the harness on the same vCPUs, which drift from
    round to round. Per subject, a least-squares fit of CPU per create
    against 1 / rate over its rounds, read at the median rate of every
    round of that level: {level: {"creates_per_s": rate, "cpu_ms": {name:
    ms}}}. A level where some subject's rates span less than a tenth is
    left out: there the store's latency sets the rate (8 in flight behind
    5 ms) and a fit would read noise as a slope."""
    out = {}
    levels = concurrency.get("floor", {})
    for level in sorted(levels, key=int):
        points = {
            name: list(zip(r["creates_per_s_by_round"], r["cpu_per_invocation_by_round_ms"], strict=True))
            for name, by_level in concurrency.items()
            if "creates_per_s_by_round" in (r := by_level.get(level, {}))
        }
        # Rates that span a tenth also keep each fit's 1 / rate apart.
        if len(points) < 2 or any(len(pts) < 3 or max(pts)[0] < 1.1 * min(pts)[0] for pts in points.values()):
            continue
        rates = [rate for pts in points.values() for rate, _ in pts]
        at = statistics.median(rates)
        cpu = {}
        for name, pts in points.items():
            fit = statistics.linear_regression([1 / rate for rate, _ in pts], [ms for _, ms in pts])
            cpu[name] = fit.intercept + fit.slope / at
        if "floor" in cpu:
            out[level] = {"creates_per_s": at, "cpu_ms": cpu}
    return out


def commit():
    """The commit measured, and the one that last changed plant-store's
    code (src/, crates/, the manifests): a branch that changes only bench/
    measures the code of its branch point."""

    def git(*argv):
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True).stdout.strip()

    code = ("src", "crates", "Cargo.toml", "Cargo.lock")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", *code)
    head, last = git("rev-parse", "--short", "HEAD"), git("log", "-1", "--format=%h", "--", *code)
    return f"{head} (code as of {last})" + (" with changes" if dirty else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=at_least(0), default=60, help="cold starts of each (default 60; 0 for none)")
    parser.add_argument(
        "--warm", type=at_least(0), default=1000, help="warm invocations of each, per place (default 1000)"
    )
    sizes = listed(int, lambda mb: 128 <= mb <= 10240, "sizes from 128 to 10240 MB")
    parser.add_argument("--memory", type=sizes, default=[128], help="memory sizes under their CPU quota (default 128)")
    levels = listed(int, lambda n: n >= 1, "counts")
    parser.add_argument("--concurrency", type=levels, default=[1, 8, 64], help="in flight (default 1,8,64), or none")
    parser.add_argument(
        "--concurrency-invocations",
        type=at_least(1),
        help="creates per process and round in flight (default 1000 at 1 in flight, 4000 at more)",
    )
    parser.add_argument(
        "--in-flight-rounds", type=at_least(1), default=8, help="processes of each per level, taking turns (8)"
    )
    parser.add_argument("--binary", help="the plant-store build to compare (default: build it with cargo)")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="where floor.json and floor.md go")
    args = parser.parse_args()
    binary = args.binary or build_rust("release")
    profile = "debug" if os.path.basename(os.path.dirname(os.path.abspath(binary))) == "debug" else "release"
    floor_bin = build_floor(profile)
    plant_store = rust_subject("rust", binary)
    subjects = [floor_subject(floor_bin), plant_store, rust_subject("traced", binary, ["xray=sampled"])]
    if rust_peer_built():
        subjects.append(peer_subject())
    else:
        print("the idiomatic peer is not built (make bench builds it): measured without it", flush=True)
    started, load = time.time(), {"before": list(os.getloadavg())}
    events = Events(start=20_000_000)
    with tempfile.TemporaryDirectory(prefix="plant-store-floor-") as scratch, Run(scratch, TRANSPORTS, 5.0) as run:
        log(f"warming DynamoDB Local's JVM with {warm_up(DDB_WARMUP, max(args.runs, args.warm))} writes")
        run.ddb.create_table("bench-jvm-warm-up")
        run.ddb.warm("bench-jvm-warm-up", warm_up(DDB_WARMUP, max(args.runs, args.warm)))
        cold_cpu = cold(run, floor_bin, plant_store, args.runs) if args.runs else None
        load["after_cold"] = list(os.getloadavg())
        places = warm(run, subjects, args, events) if args.warm else {}
        load["after_warm"] = list(os.getloadavg())
        concurrency = in_flight(run, subjects, args, events)
        load["after_concurrency"] = list(os.getloadavg())
    rows = report.floor_rows(
        {where: {n: r["cpu_per_invocation_ms"] for n, r in runs.items()} for where, runs in places.items()},
        {n: {lv: r["cpu_per_invocation_ms"] for lv, r in levels.items()} for n, levels in concurrency.items()},
    )
    results = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.time() - started),
        "plant_store_commit": commit(),
        "profile": profile,
        "settings": {k: v for k, v in vars(args).items() if k not in ("binary", "out")},
        "machine": machine(),
        "load": load,
        "cold_cpu_ms": cold_cpu,
        "warm": {
            where: {
                n: {
                    k: r[k]
                    for k in (
                        "cpu_per_invocation_ms",
                        "cpu_per_invocation_by_block_ms",
                        "system_share",
                        "invocations_per_s",
                        "processes",
                    )
                }
                for n, r in runs.items()
            }
            for where, runs in places.items()
        },
        "concurrency": concurrency,
        "floor": rows,
        "in_flight_at_equal_rate": at_equal_rate(concurrency),
    }
    write(results, cold_lines(cold_cpu, args.runs) if cold_cpu else [], args.out)


def write(results, cold_text, out):
    m, load = results["machine"], results["load"]
    text = [
        "# The floor under plant-store (make bench-floor)",
        "",
        f"plant-store at {results['plant_store_commit']} ({results['profile']} build). Machine: {m['cpus']} vCPU "
        f"{m['arch']} ({m['cpu_model']}); run {results['started_utc']}, {results['duration_s']} s; load average "
        + ", ".join(f"{k.replace('_', ' ')} {v[0]:.2f}" for k, v in load.items())
        + ".",
    ]
    if cold_text:
        text += ["", "## Cold", "", "```", *cold_text, "```"]
    if results["floor"]:
        s = results["settings"]
        # Each level's creates a round (the first implementation's; every
        # one ran the same).
        levels = next(iter(results["concurrency"].values()), {})
        in_flight = (
            f"in flight: {s['in_flight_rounds']} processes of each taking turns, each making "
            + ", ".join(f"{r['invocations'] // r['rounds']:,} creates at {lv}" for lv, r in levels.items())
            + " over HTTPS behind 5 ms per DynamoDB request, on whole cores, the median process. "
            if levels
            else ""
        )
        text += [
            "",
            "## Warm: CPU per invocation (ms), and each one's ratio to the floor",
            "",
            report.floor_table(results["floor"]),
            "",
            f"Warm rows: {s['warm']} invocations each, processes taking turns in blocks (bench/measure.py); "
            + in_flight
            + "CPU: the process's CPU clock, read from outside.",
        ]
    if any(results["concurrency"].values()):
        text += [
            "",
            "## In flight: where the CPU goes",
            "",
            "| implementation | in flight | creates/s | CPU per create (ms), rounds' min-max | kernel's share "
            "| context switches per create |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, levels in results["concurrency"].items():
            for level, r in levels.items():
                share = r.get("system_share")
                spread = r.get("cpu_per_invocation_by_round_ms") or [r["cpu_per_invocation_ms"]]
                text.append(
                    f"| {name} | {level} | {r['creates_per_s']:,.0f} | {r['cpu_per_invocation_ms']:.3f} "
                    f"({min(spread):.3f}-{max(spread):.3f}) | "
                    f"{'–' if share is None else f'{share:.0%}'} | {r.get('context_switches_per_invocation', 0):.2f} |"
                )
    if equal := results.get("in_flight_at_equal_rate"):
        names = [n for n in ("rust", "traced", "idiomatic") if any(n in e["cpu_ms"] for e in equal.values())]
        text += [
            "",
            "## In flight at equal throughput",
            "",
            "| in flight | creates/s | floor (ms) | "
            + " | ".join(f"{n} (ms)" for n in names)
            + " | "
            + " | ".join(f"{n} / floor" for n in names)
            + " |",
            "|---" + "|---:" * (2 + 2 * len(names)) + "|",
        ]
        for level, e in equal.items():
            cpu, floor_ms = e["cpu_ms"], e["cpu_ms"]["floor"]
            text.append(
                f"| {level} | {e['creates_per_s']:,.0f} | {floor_ms:.3f} | "
                + " | ".join(f"{cpu[n]:.3f}" if n in cpu else "–" for n in names)
                + " | "
                + " | ".join(f"{cpu[n] / floor_ms:.2f}×" if n in cpu else "–" for n in names)
                + " |"
            )
        text += [
            "",
            "Many in flight a process's CPU per create falls as its rate rises, and the rate is set mostly by "
            "DynamoDB Local and the harness on the same vCPUs, which drift from round to round: each "
            "implementation's rounds are fitted (CPU per create against 1 / rate, least squares) and read at "
            "the median rate of all the level's rounds.",
        ]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "floor.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "floor.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    print("\n".join(text), flush=True)
    log(f"wrote floor.json and floor.md to {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
