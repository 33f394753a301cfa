"""The measurements: cold starts and warm invocations, the same at Lambda's memory sizes, throughput per
execution environment at several concurrencies (as on Lambda Managed Instances), and memory over time."""

import contextlib
import copy
import os
import time

import psutil
from emulator import cpu_ns
from fixtures import Events, Run, check_answers, check_created
from quota import CGROUP_PERIOD_US, CpuQuota
from subjects import fail, log

# Settings the benchmark no longer takes as options, kept in results.json as before.
DDB_WARMUP = 3000  # writes to warm DynamoDB Local's JVM first


def warm_up(full, measured):
    """A warm-up no longer than ten times what it prepares: the full run's
    as it is, a tiny run's (make bench-tiny) a few seconds."""
    return min(full, 10 * measured)


def ddb_warmup(args):
    return warm_up(DDB_WARMUP, max(args.cold, args.warm))


MEMORY_TRANSPORT, LONG_TRANSPORT = "https", "http"


def williams(n):
    """The rows of a Williams design for `n` subjects (a balanced Latin
    square: n rows if n is even, 2n if odd): over its rows every subject
    takes every place and follows every other subject equally often."""
    first, low, high = [0], 1, n - 1
    while low <= high:
        first.append(low)
        low += 1
        if low <= high:
            first.append(high)
            high -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 else rows


def turn_order(subjects, i):
    """The subjects' order in round `i`: a row of a Williams design, so that
    what one block leaves in the caches for the next (its code, its data)
    favours no one. Rotating or reversing the order does not: with five
    subjects, rotation put `traced` after `rust`, a warm start, in every
    round, and reversal put it after a peer in every other round, while
    `rust` always followed plant-store (docs/performance.md, "Traces")."""
    rows = williams(len(subjects))
    return [subjects[j] for j in rows[i % len(rows)]]


def cold_starts(run, subjects, transport, rounds, events, quota=None):
    """`rounds` fresh processes per subject, interleaved so that a change
    of load on the machine touches every subject alike (inside `quota`'s
    cgroup when given)."""
    samples = {s.name: [] for s in subjects}
    tables = {s.name: run.table(s, transport) for s in subjects}
    stat = quota.stat if quota else dict
    for i in range(rounds):
        for subject in turn_order(subjects, i):
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


# Invocations a subject takes in one turn of the interleaved warm runs: few,
# so that the two blocks of a pair run milliseconds apart; on a shared host
# the CPU a block of 100 costs swings twofold within seconds
# (docs/performance.md, "Traces").
WARM_BLOCK = 10
# Warm processes per subject, taking its turns in rotation: one process's
# layout (ASLR, its heap) can put its warm CPU a few per cent off another's
# of the same build for its whole life, so no count of blocks from a single
# process averages it out.
WARM_PROCESSES = 5
# The same for `rust` and `traced` alone, where a 5 % budget is judged.
# There one pair of processes read anything from -4 to +15 % of the same
# cost (-22 to +44 % in the committed run), so that twenty pairs still left a row's reading a per cent off
# either way, and one to three rows of seven over 5 % in every run, a
# different row each time (docs/performance.md, "Traces"). A hundred
# pairs, five blocks each, halve that again; they live five at a time a
# side (PAIR_ALIVE), so a place's pair never keeps 200 processes running.
PAIR_PROCESSES = 100
PAIR_ALIVE = 5


def warm_runs(run, subjects, transport, count, events, quota=None, processes=WARM_PROCESSES, alive=None):
    """`processes` processes per subject, `alive` of them (all, by
    default) running at a time: each its cold start and a block untimed,
    then `count` sequential invocations per subject, handed out in blocks
    of WARM_BLOCK, the subjects taking turns (`turn_order`) and the live
    processes of a subject taking its turns in rotation, so that a change
    of load on the machine touches every subject alike, as the cold starts
    are interleaved (inside `quota`'s cgroup when given). Each group of
    live processes takes an equal share of the rounds, then stops, and the
    next starts. Only one process runs at a time; each one's CPU clock is
    read around its own blocks, with every worker parked on the Runtime
    API."""
    rounds = -(-count // WARM_BLOCK)
    # No more processes than blocks to give them.
    processes = max(1, min(processes, rounds))
    alive = min(alive or processes, processes)
    groups = -(-processes // alive)
    empty = dict(walls=[], cpus=[], blocks=[], process_of_block=[], cpu_ns=0, user=0.0, system=0.0, window_s=0.0)
    tally = {s.name: copy.deepcopy(empty) for s in subjects}
    peak_kib = dict.fromkeys(tally, 0)
    tables = {s.name: run.table(s, transport) for s in subjects}
    for group in range(groups):
        first = group * alive
        live = min(alive, processes - first)
        with contextlib.ExitStack() as stack:
            fns = {}
            for subject in subjects:
                fns[subject.name] = [
                    stack.enter_context(run.function(subject, transport, table=tables[subject.name], quota=quota))
                    for _ in range(live)
                ]
                for fn in fns[subject.name]:
                    fn.start()
                    # An untimed block first, so that a process living as
                    # briefly as a pair's is as warm as a long-lived one.
                    for _ in range(WARM_BLOCK):
                        check_created(subject, fn.invoke(events.create())[0])
                    fn.api.wait_next()
            for i in range(group * rounds // groups, (group + 1) * rounds // groups):
                block = min(WARM_BLOCK, count - i * WARM_BLOCK)
                for subject in turn_order(subjects, i):
                    k = i % live
                    fn, t = fns[subject.name][k], tally[subject.name]
                    cpu_start, split_start = fn.cpu(), fn.user_system_s()
                    window_start = time.perf_counter()
                    for _ in range(block):
                        response, wall, cpu = fn.invoke(events.create())
                        check_created(subject, response)
                        t["walls"].append(wall / 1e6)
                        t["cpus"].append(cpu / 1e6)
                    fn.api.wait_next()
                    t["window_s"] += time.perf_counter() - window_start
                    t["cpu_ns"] += (block_ns := fn.cpu() - cpu_start)
                    t["blocks"].append(block_ns / 1e6 / block)
                    t["process_of_block"].append(first + k)
                    user, system = (end - start for end, start in zip(fn.user_system_s(), split_start, strict=True))
                    t["user"], t["system"] = t["user"] + user, t["system"] + system
            for name, live_fns in fns.items():
                peak_kib[name] = max(peak_kib[name], *(fn.kib() for fn in live_fns))
    out = {}
    for subject in subjects:
        t = tally[subject.name]
        busy = t["user"] + t["system"]
        out[subject.name] = {
            "wall_ms": t["walls"],
            "cpu_in_window_ms": t["cpus"],
            "cpu_per_invocation_ms": t["cpu_ns"] / 1e6 / count,
            # Per round of the interleaving, so that two subjects can be
            # compared block by block (report.py's tracing table).
            "cpu_per_invocation_by_block_ms": t["blocks"],
            "processes": processes,
            # Which of them ran each round's block.
            "process_by_block": t["process_of_block"],
            "system_share": t["system"] / busy if busy else None,
            "peak_rss_kib": peak_kib[subject.name],
            # Back-to-back within a block: the emulator hands over the
            # next event as soon as the function asks for it.
            "invocations_per_s": count / t["window_s"],
        }
    return out


def cold_and_warm(run, subjects, transport, cold, warm, events, quota=None, tracing=(0, 0)):
    """Every subject's cold starts and warm run, then, where `rust` and
    `traced` both run, `tracing` = (cold starts, warm invocations) of those
    two alone, for the spans' cost (`tracing_pair`)."""
    at = quota.label if quota else ""
    log(f"{transport}{at}: {cold} cold starts and {warm} warm invocations per implementation")
    samples = cold_starts(run, subjects, transport, cold, events, quota)
    out = {"cold": samples, "warm": warm_runs(run, subjects, transport, warm, events, quota)}
    if pair := tracing_pair(run, subjects, transport, *tracing, events, quota):
        out["tracing"] = pair
    return out


def tracing_pair(run, subjects, transport, cold, warm, events, quota=None):
    """`rust` and `traced` alone, interleaved, for report.py's table of what
    the spans cost. Measured apart from the run of all five because a 5 %
    budget needs a reading finer than that run gives: there the blocks of
    a pair are a round of five subjects apart, and 100 to 200 of them read
    a 95 % interval ±4 to ±6 % wide on the slow host of
    docs/performance.md; two subjects alone, 500 blocks, about ±1 %. Each
    side's turns are taken by PAIR_PROCESSES processes, PAIR_ALIVE at a
    time."""
    pair = [s for s in subjects if s.name in ("rust", "traced")]
    if len(pair) < 2 or not cold or not warm:
        return None
    at = quota.label if quota else ""
    log(f"{transport}{at}: the spans' cost, {cold} cold starts and {warm} warm invocations of rust and traced")
    return {
        "cold": cold_starts(run, pair, transport, cold, events, quota),
        "warm": warm_runs(run, pair, transport, warm, events, quota, PAIR_PROCESSES, PAIR_ALIVE),
    }


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
            tracing = (args.tracing_cold, args.tracing_warm)
            runs = cold_and_warm(
                run, subjects, MEMORY_TRANSPORT, args.memory_cold, args.memory_warm, events, quota, tracing
            )
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
        "DynamoDB Local": lambda: proc_cpu_ns(run.ddb.child.popen.pid),
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
        switches_start, split_start = fn.context_switches(), fn.user_system_s()
        cpu_start, others_start, started = fn.cpu(), {k: f() for k, f in others.items()}, time.perf_counter()
        done = fn.serve((events.create() for _ in range(count)), concurrency)
        window_s = time.perf_counter() - started
        fn.api.wait_next(count=concurrency)
        cpu_ms = (fn.cpu() - cpu_start) / 1e6
        user, system = (end - start for end, start in zip(fn.user_system_s(), split_start, strict=True))
        switches = fn.context_switches() - switches_start
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
            # Kernel time's share of the function's CPU, and its threads'
            # context switches per create: the cost of wake-ups and
            # hand-offs, which instruction counts do not see.
            "system_share": system / (user + system) if user + system else None,
            "context_switches_per_invocation": switches / count,
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
        count = warm_up(WARM_CONCURRENT, args.concurrency_invocations)
        log(f"warming DynamoDB Local under concurrency: {count} creates, {max(args.concurrency)} at once")
        concurrency_run(run, rust[0], transport, max(args.concurrency), count, events)
    for i, concurrency in enumerate(args.concurrency):
        # Each level in another order, so that DynamoDB Local's JIT and the
        # machine's load favour no implementation.
        for subject in rust[i % len(rust) :] + rust[: i % len(rust)]:
            log(f"{transport}: {subject.name}: {args.concurrency_invocations} creates at concurrency {concurrency}")
            result = concurrency_run(run, subject, transport, concurrency, args.concurrency_invocations, events)
            out["subjects"][subject.name][str(concurrency)] = result
    return out


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
        if args.jwt:
            events.headers["authorization"] = f"Bearer {run.start_issuer()}"
        log(f"warming DynamoDB Local's JVM with {ddb_warmup(args)} writes")
        run.ddb.create_table("bench-jvm-warm-up")
        run.ddb.warm("bench-jvm-warm-up", ddb_warmup(args))
        for transport in args.transport:
            runs = cold_and_warm(
                run, subjects, transport, args.cold, args.warm, events, tracing=(args.tracing_cold, args.tracing_warm)
            )
            results["transports"][transport] = runs
            results["load"][f"after_{transport}"] = list(os.getloadavg())

        for part, measure in (("memory", memory_sizes), ("concurrency", concurrency_runs), ("long", long_runs)):
            if getattr(args, part):
                results[part] = measure(run, subjects, args, events)
                results["load"][f"after_{part}"] = list(os.getloadavg())
    return results
