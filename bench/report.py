#!/usr/bin/env python3
"""Turns raw benchmark samples into the summary (results.json), a Markdown
table (results.md) and the charts (matplotlib: SVG for docs/performance.md, PNG
to look at). As a script, writes results.md and the charts again from a
results.json:

    .tools/venv/bin/python bench/report.py bench/results/results.json --out bench/results
"""

import argparse
import collections
import json
import math
import os
import statistics
import sys
from statistics import median

import jinja2

HERE = os.path.dirname(os.path.abspath(__file__))

# The implementations plant-store is compared with: the two managed
# runtimes' SDKs, and Rust written the way the runtime's examples are.
PEERS = ("python", "node", "idiomatic")
# The targets were set against the Python and Node.js peers.
TARGET_PEERS = ("python", "node")

# ---- prices: dated constants, in one place ----------------------------------
# us-east-1, on demand, no free tier; the rates below, the pages they come from
# in "sources". Lambda (read 2026-11-22; the rates as quoted e.g. in artillery
# 2.0.28's lib/platform/aws-lambda/prices.js and a cost guide dated 2026-05-11):
# per GB-second for the first 6 (x86_64) / 7.5 (arm64) billion GB-seconds a
# month, billed duration rounded up to the millisecond. API Gateway HTTP API as
# quoted 2025-05-19, DynamoDB on demand as quoted 2025-07-21 (one create of an
# item under 1 KB is one write request unit). Lambda Managed Instances (read
# 2026-11-23; the Lambda pricing page as transcribed 2026-09-20): requests and
# a management fee on the EC2 on-demand price of the capacity provider's
# instances, no duration charge; m7g.large (Graviton3, 2 vCPU, 8 GiB), Linux,
# as quoted for June 2026. A capacity provider keeps three instances by
# default (one per availability zone), whatever the load: the floor below.
PRICES = {
    "as_of": "2026-11-22",
    "region": "us-east-1",
    "lambda_gb_second_usd": {"arm64": 0.0000133334, "x86_64": 0.0000166667},
    "lambda_request_usd": 0.20 / 1e6,
    "http_api_request_usd": 1.00 / 1e6,
    "dynamodb_wru_usd": 0.625 / 1e6,
    "managed_instances": {
        "as_of": "2026-11-23",
        "instance_type": "m7g.large",
        "instance_vcpus": 2,
        "instance_hour_usd": 0.0816,
        "management_fee": 0.15,
        "request_usd": 0.20 / 1e6,
        "minimum_instances": 3,
    },
    "sources": {
        "lambda": "aws.amazon.com/lambda/pricing (us-east-1)",
        "http_api": "aws.amazon.com/api-gateway/pricing (HTTP APIs, first 300 million)",
        "dynamodb": "aws.amazon.com/dynamodb/pricing/on-demand (after the November 2024 cut)",
        "managed_instances": "aws.amazon.com/lambda/pricing (Lambda Managed Instances: requests, 15 % management fee; "
        "as transcribed 2026-09-20) and aws.amazon.com/ec2/pricing/on-demand (m7g.large, us-east-1, as quoted "
        "June 2026)",
    },
}
# The average CPU utilisation at which a capacity provider is assumed to
# run its instances (it scales on CPU utilisation; headroom for bursts and
# for the instance's own agent). An assumption, not a price: change it here.
MANAGED_INSTANCES_CPU_UTILISATION = 0.5
COST_MEMORY_MB = (128, 256, 512, 1024)
# The round trip of one PutItem to DynamoDB in the same region, added to the
# measured warm wall time (which already includes DynamoDB Local's own time
# on loopback, about 1 ms, so the estimate errs high). AWS describes
# DynamoDB as delivering "single-digit millisecond performance at any scale"
# (aws.amazon.com/dynamodb); 5 ms is the middle of that range.
DDB_LATENCY_MS = 5.0
DDB_LATENCY_SOURCE = (
    'AWS: DynamoDB delivers "single-digit millisecond performance at any scale" (aws.amazon.com/dynamodb)'
)

# The figures of each implementation's cold starts and warm run (their labels: bench/results.md.j2).
COLD_METRICS = ("init_wall_ms", "init_cpu_ms", "first_wall_ms", "first_cpu_ms", "cold_wall_ms", "cold_cpu_ms")
WARM_METRICS = ("warm_p50_ms", "warm_p90_ms", "warm_p99_ms", "warm_max_ms", "warm_cpu_ms", "peak_rss_mb", "size_mb")
PERIODS = ("init_nr_periods", "init_nr_throttled", "cold_nr_periods", "cold_nr_throttled")


def percentile(values, p):
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def cold_warm_figures(cold, warm, size_bytes):
    """One implementation's cold starts (median, min and max of each metric;
    the medians of the CPU quota periods where counted) and warm run."""
    fig = {}
    for key in COLD_METRICS:
        values = [s[key] for s in cold]
        fig |= {key: median(values), key + "_min": min(values), key + "_max": max(values)}
    fig["cold_samples"] = len(cold)
    fig |= {f"{key}_median": median(s[key] for s in cold) for key in PERIODS if all(key in s for s in cold)}
    walls = warm["wall_ms"]
    return fig | {
        "warm_invocations": len(walls),
        "warm_p50_ms": percentile(walls, 50),
        "warm_p90_ms": percentile(walls, 90),
        "warm_p99_ms": percentile(walls, 99),
        "warm_max_ms": max(walls),
        "warm_mean_ms": statistics.fmean(walls),
        "warm_cpu_ms": warm["cpu_per_invocation_ms"],
        "warm_cpu_in_window_p50_ms": percentile(warm["cpu_in_window_ms"], 50),
        "warm_cpu_system_share": warm.get("system_share"),
        "peak_rss_mb": max(warm["peak_rss_kib"], *(s["peak_rss_kib"] for s in cold)) * 1024 / 1e6,
        "size_mb": (size_bytes or 0) / 1e6,
        "invocations_per_s": warm.get("invocations_per_s"),
    }


def _figures(data, subjects):
    """Per implementation: its cold and warm figures."""
    return {n: cold_warm_figures(cold, data["warm"][n], subjects[n]["size_bytes"]) for n, cold in data["cold"].items()}


def _raw(data):
    warm = {n: [round(x, 4) for x in w["wall_ms"]] for n, w in data["warm"].items()}
    blocks = {n: [round(x, 5) for x in w.get("cpu_per_invocation_by_block_ms", [])] for n, w in data["warm"].items()}
    raw = {"cold": data["cold"], "warm_wall_ms": warm, "warm_cpu_by_block_ms": blocks}
    if pair := data.get("tracing"):
        raw["tracing"] = _raw(pair)
    return raw


def summarise(results):
    figures = {transport: _figures(data, results["subjects"]) for transport, data in results["transports"].items()}
    summary = {k: v for k, v in results.items() if k not in ("transports", "memory", "long")}
    summary |= {"figures": figures, "ratios": ratios(figures), "targets": targets(figures)}
    summary["tracing"] = tracing_cost(results)
    summary["raw"] = {transport: _raw(data) for transport, data in results["transports"].items()}
    if memory := results.get("memory"):
        sizes = {
            size: {k: data.get(k) for k in ("quota_us", "cgroup", "no_quota_reason", "throttled_periods", "periods")}
            | {"figures": _figures(data, results["subjects"])}
            for size, data in memory["sizes"].items()
        }
        summary["memory_sizes"] = {"transport": memory["transport"], "period_us": memory["period_us"], "sizes": sizes}
        summary["cost"] = cost(memory, results["settings"].get("ddb_latency_ms", DDB_LATENCY_MS))
        summary["raw"]["memory_sizes"] = {size: _raw(data) for size, data in memory["sizes"].items()}
    if concurrency := results.get("concurrency"):
        summary["concurrency"] = concurrency_figures(concurrency)
        summary["managed_instances_cost"] = managed_instances_cost(summary["concurrency"], summary.get("cost"))
        summary["raw"]["concurrency_wall_ms"] = {
            name: {level: [round(x, 4) for x in r["wall_ms"]] for level, r in levels.items()}
            for name, levels in concurrency["subjects"].items()
        }
    if results.get("long"):
        summary["memory_over_time"] = long_figures(results["long"])
    summary["floor"] = summary_floor(summary)
    return summary


def concurrency_figures(concurrency):
    """Per implementation and concurrency: what one execution environment
    sustains on the machine's cores against the store with a stated latency."""
    out = {k: concurrency[k] for k in ("transport", "store_latency_ms", "vcpus")}
    out["subjects"] = {
        name: {
            level: {
                "invocations": r["invocations"],
                "creates_per_s": r["creates_per_s"],
                "p50_ms": percentile(r["wall_ms"], 50),
                "p99_ms": percentile(r["wall_ms"], 99),
                "cpu_per_invocation_ms": r["cpu_per_invocation_ms"],
                "peak_rss_mb": r["peak_rss_kib"] * 1024 / 1e6,
                "max_parked": r["max_parked"],
                "cpu_share_of_machine": {k: round(v, 3) for k, v in r["cpu_share_of_machine"].items()},
            }
            for level, r in levels.items()
        }
        for name, levels in concurrency["subjects"].items()
    }
    return out


def managed_instances_cost(concurrency, on_demand):
    """USD per million creates on Lambda Managed Instances, per implementation
    and measured concurrency: the instance hour plus the management fee,
    spread over the creates an instance holds at the assumed CPU utilisation
    (its vCPUs over the measured CPU per create), plus the request charge.
    Beside it, on-demand Lambda at 128 MB (arm64) where it was measured."""
    mi = PRICES["managed_instances"]
    hour_usd = mi["instance_hour_usd"] * (1 + mi["management_fee"])
    od = {r["implementation"]: r for r in (on_demand or {}).get("per_million_creates", []) if r["memory_mb"] == 128}
    rows = []
    for name, levels in ((n, lv) for n, lv in concurrency["subjects"].items() if n != FLOOR):
        for level, f in levels.items():
            per_s = mi["instance_vcpus"] * MANAGED_INSTANCES_CPU_UTILISATION / (f["cpu_per_invocation_ms"] / 1000)
            compute = hour_usd / (3600 * per_s) * 1e6
            rows.append(
                {
                    "implementation": name,
                    "concurrency": int(level),
                    "cpu_per_invocation_ms": f["cpu_per_invocation_ms"],
                    "creates_per_s_per_instance": per_s,
                    "compute_usd": compute,
                    "usd": compute + mi["request_usd"] * 1e6,
                }
                | {f"on_demand_128mb_arm64_usd_{load}": od.get(name, {}).get(f"arm64_usd_{load}") for load in LOADS}
            )
    return {
        "rows": rows,
        "prices": mi,
        "cpu_utilisation": MANAGED_INSTANCES_CPU_UTILISATION,
        "floor_usd_per_month": mi["minimum_instances"] * hour_usd * 730,
        "source": PRICES["sources"]["managed_instances"],
    }


LOADS = ("light", "busy")


def billed_ms(walls, latency_ms):
    """Billed durations, two ways: `light`, the median invocation's wall
    time (one that finds its CPU budget for the period unspent, as on an
    instance with requests now and then), and `busy`, the mean over
    back-to-back invocations (an instance kept busy, whose invocations
    queue behind the quota now and then); each plus the assumed DynamoDB
    latency, rounded up to the millisecond as Lambda bills."""
    return {
        "light": math.ceil(percentile(walls, 50) + latency_ms),
        "busy": statistics.fmean(math.ceil(w + latency_ms) for w in walls),
    }


def cost(memory, latency_ms):
    """USD per million creates, per implementation, memory size and
    architecture: Lambda compute (billed ms x GB) plus Lambda requests.
    API Gateway and DynamoDB are the same for every implementation and
    listed on their own."""
    rows = []
    for size in (size for size in COST_MEMORY_MB if str(size) in memory["sizes"]):
        # The floor is no function anyone deploys: it has no bill.
        for name, warm in ((n, w) for n, w in memory["sizes"][str(size)]["warm"].items() if n != FLOOR):
            row = {"implementation": name, "memory_mb": size}
            for load, ms in billed_ms(warm["wall_ms"], latency_ms).items():
                row[f"billed_ms_{load}"] = ms
                for arch, price in PRICES["lambda_gb_second_usd"].items():
                    row[f"{arch}_usd_{load}"] = (
                        1e6 * ms / 1000 * size / 1024 * price + 1e6 * PRICES["lambda_request_usd"]
                    )
            rows.append(row)
    return {
        "per_million_creates": rows,
        "http_api_usd": 1e6 * PRICES["http_api_request_usd"],
        "dynamodb_usd": 1e6 * PRICES["dynamodb_wru_usd"],
        "ddb_latency_ms": latency_ms,
        "ddb_latency_source": DDB_LATENCY_SOURCE,
        "prices": PRICES,
        "note": "billed duration = warm wall time under the memory size's CPU quota + the assumed DynamoDB "
        "latency, rounded up to 1 ms: light = the median invocation, busy = the mean of back-to-back "
        "invocations; warm invocations only (no cold starts)",
    }


def long_figures(long):
    out = {"transport": long["transport"], "subjects": {}}
    for name, data in long["subjects"].items():
        early = next((c for c in data["checkpoints"] if c["invocations"] == 2000), None)
        last = data["checkpoints"][-1]
        fig = {
            "invocations": data["invocations"],
            "peak_rss_mb_after_2000": early["peak_rss_kib"] * 1024 / 1e6 if early else None,
            "peak_rss_mb_at_end": last["peak_rss_kib"] * 1024 / 1e6,
            "rss_mb_at_end": last["rss_kib"] * 1024 / 1e6,
            "cpu_per_invocation_ms": data["cpu_per_invocation_ms"],
            "duration_s": data["duration_s"],
            "checkpoints": data["checkpoints"],
        }
        if early and last["invocations"] > 2000:
            growth = (last["peak_rss_kib"] - early["peak_rss_kib"]) * 1024 / (last["invocations"] - 2000)
            fig["growth_bytes_per_invocation"] = growth
        out["subjects"][name] = fig
    return out


# Builds measured beside `rust` to show what one of its features costs,
# not compared with the peers themselves: `traced` samples every invocation,
# so each sends its spans (crates/lambda-host/src/trace/); `floor` is the
# Runtime API and the PutItem alone (bench/floor).
VARIANTS = ("traced", "floor")
# The budget for tracing: warm CPU per sampled create at most 5 %
# more, cold total CPU at most 0.15 ms more.
TRACING_BUDGET = {"warm_cpu_pct": 5.0, "cold_cpu_ms": 0.15}


def rust_names(figures):
    return [n for n in next(iter(figures.values()), {}) if n not in PEERS + VARIANTS]


def tracing_cost(results):
    """`traced` against `rust` wherever both ran (each transport on whole
    cores, each memory size under its quota): cold total CPU (median and
    quartiles of the fresh processes), warm CPU per invocation, peak RSS,
    and whether the budget holds. The costs are read pair by pair, as the
    two were interleaved: the median of each round's difference of cold
    starts, and the median of each round's ratio of warm blocks, so that
    what loads the machine for a while touches both sides of a pair alike.
    Where the run measured the two alone (`tracing_pair` in measure.py),
    those figures; otherwise the run of every implementation's."""
    places = [(f"{t.upper()}, whole cores", data) for t, data in results["transports"].items()]
    memory = results.get("memory") or {}
    places += [(f"{memory['transport'].upper()}, {size} MB", data) for size, data in memory.get("sizes", {}).items()]
    rows = []
    for where, data in places:
        alone = "tracing" in data
        data = data.get("tracing") or data
        if not {"rust", "traced"} <= data["cold"].keys() or not {"rust", "traced"} <= data["warm"].keys():
            continue
        rounds = {n: [s["cold_cpu_ms"] for s in data["cold"][n]] for n in ("rust", "traced")}
        cold = {n: sorted(v) for n, v in rounds.items()}
        warm = {n: data["warm"][n]["cpu_per_invocation_ms"] for n in ("rust", "traced")}
        blocks = {n: data["warm"][n].get("cpu_per_invocation_by_block_ms") or [] for n in ("rust", "traced")}
        rss = {n: max([data["warm"][n]["peak_rss_kib"], *(s["peak_rss_kib"] for s in data["cold"][n])]) for n in cold}
        cold_deltas = [t - r for r, t in zip(rounds["rust"], rounds["traced"], strict=True)]
        cold_delta = median(cold_deltas)
        # Round by round (nan where a block took no CPU).
        by_round = [t / r if r else math.nan for r, t in zip(blocks["rust"], blocks["traced"], strict=True)]
        processes = data["warm"]["rust"].get("processes", 1)
        # Which pair of processes ran each round (in rotation, in a run from
        # before it was recorded).
        pair_of = data["warm"]["rust"].get("process_by_block") or [i % processes for i in range(len(by_round))]
        # Each pair of processes alone: how far one process's life moves the reading.
        by_pair = collections.defaultdict(list)
        for pair, ratio in zip(pair_of, by_round, strict=True):
            by_pair[pair].append(ratio)
        by_process = [(median(x) - 1) * 100 for _, ratios in sorted(by_pair.items()) if (x := _finite(ratios))]
        by_block = _finite(by_round)
        if by_block:
            warm_pct = (median(by_block) - 1) * 100
        else:  # a run from before the warm runs were interleaved
            warm_pct = (warm["traced"] / warm["rust"] - 1) * 100 if warm["rust"] else None
        rows.append(
            {
                "where": where,
                "cold_cpu_ms": {n: median(v) for n, v in cold.items()},
                "cold_cpu_quartiles_ms": {n: (percentile(v, 25), percentile(v, 75)) for n, v in cold.items()},
                "cold_cpu_delta_ms": cold_delta,
                "cold_cpu_delta_interval_ms": median_interval(cold_deltas),
                "warm_cpu_ms": warm,
                "warm_cpu_delta_pct": warm_pct,
                "warm_cpu_delta_interval_pct": [(x - 1) * 100 for x in median_interval(by_block)] if by_block else None,
                # Measured with the two alone, or in the run of every implementation.
                "alone": alone,
                "warm_blocks": len(by_block),
                "warm_cpu_delta_pct_by_process": by_process,
                "warm_processes": processes,
                "peak_rss_mb": {n: v * 1024 / 1e6 for n, v in rss.items()},
                "met": cold_delta <= TRACING_BUDGET["cold_cpu_ms"]
                and warm_pct is not None
                and warm_pct <= TRACING_BUDGET["warm_cpu_pct"],
            }
        )
    return rows


# ---- the warm floor ------------------------------------------------------------

FLOOR = "floor"
# Compared with the floor, in this order, where they ran.
OVER_FLOOR = ("rust", "traced", "idiomatic")


def floor_row(where, cpu_ms):
    """One place's warm CPU per invocation (ms) of the floor and of what ran
    beside it, each one's ratio to the floor, and plant-store's to the
    idiomatic peer."""
    names = [n for n in OVER_FLOOR if n in cpu_ms]
    floor = cpu_ms[FLOOR]
    return {
        "where": where,
        "cpu_ms": {n: cpu_ms[n] for n in [FLOOR, *names]},
        "over_floor": {n: cpu_ms[n] / floor if floor else None for n in names},
        "rust_over_idiomatic": cpu_ms["rust"] / cpu_ms["idiomatic"] if {"rust", "idiomatic"} <= cpu_ms.keys() else None,
    }


def floor_rows(places, concurrency=None):
    """The floor against plant-store (unsampled and sampled) and the
    idiomatic peer: `places` maps a place (a transport on whole cores, or a
    memory size) to {name: warm CPU per invocation, ms}; `concurrency`
    maps a name to {level: CPU per create, ms}. Only places where the floor
    ran."""
    rows = [floor_row(where, cpu) for where, cpu in places.items() if FLOOR in cpu]
    levels = (concurrency or {}).get(FLOOR, {})
    for level in sorted(levels, key=int):
        cpu = {n: by_level[level] for n, by_level in concurrency.items() if level in by_level}
        rows.append(floor_row(f"{level} in flight", cpu))
    return rows


def summary_floor(summary):
    """`floor_rows` from a summary's figures (each transport, each memory
    size under its quota, each concurrency)."""
    places = {
        f"{t.upper()}, whole cores": {n: f["warm_cpu_ms"] for n, f in fs.items()}
        for t, fs in summary["figures"].items()
    }
    if memory := summary.get("memory_sizes"):
        for size, data in memory["sizes"].items():
            places[f"{memory['transport'].upper()}, {size} MB"] = {
                n: f["warm_cpu_ms"] for n, f in data["figures"].items()
            }
    concurrency = None
    if c := summary.get("concurrency"):
        concurrency = {
            n: {lv: f["cpu_per_invocation_ms"] for lv, f in levels.items()} for n, levels in c["subjects"].items()
        }
    return floor_rows(places, concurrency)


def floor_table(rows):
    """The rows of `floor_rows` as a Markdown table."""
    names = [n for n in OVER_FLOOR if any(n in r["cpu_ms"] for r in rows)]
    head = ["where", "floor (ms)", *(f"{n} (ms)" for n in names), *(f"{n} / floor" for n in names)]
    with_peer = "idiomatic" in names and "rust" in names
    head += ["rust / idiomatic"] * with_peer
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for r in rows:
        cells = [r["where"], _fmt(r["cpu_ms"][FLOOR]), *(_fmt(r["cpu_ms"].get(n)) for n in names)]
        cells += [_ratio(r["over_floor"].get(n)) for n in names]
        cells += [_ratio(r["rust_over_idiomatic"])] * with_peer
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _finite(values):
    return [v for v in values if math.isfinite(v)]


def median_interval(values, z=1.96):
    """A distribution-free 95 % interval for the median of independent
    `values`: the order statistics n/2 ± z·√n/2 (for 20, the 6th and 15th)."""
    ordered, half = sorted(values), z * math.sqrt(len(values)) / 2
    low, high = max(0, math.floor(len(values) / 2 - half)), math.ceil(len(values) / 2 + half) - 1
    return ordered[low], ordered[min(len(values) - 1, high)]


def ratios(figures):
    out = {}
    for transport, subjects in figures.items():
        for rust, peer in ((r, p) for r in rust_names(figures) for p in PEERS if p in subjects and r in subjects):
            out.setdefault(transport, {})[f"{rust}/{peer}"] = {
                k: subjects[rust][k] / subjects[peer][k] if subjects[peer][k] else None
                for k in COLD_METRICS + WARM_METRICS
            }
    return out


# The targets: (target, figure, divisor of the best peer's figure, unit)
# against the Python and Node.js peers, then (target, figure, limit, unit).
PEER_TARGETS = [
    ("cold total CPU <= 1/10 of the faster peer", "cold_cpu_ms", 10, "ms"),
    ("warm p50 wall <= the faster peer", "warm_p50_ms", 1, "ms"),
    ("warm CPU per invocation <= 1/5 of the faster peer", "warm_cpu_ms", 5, "ms"),
    ("peak RSS <= 1/3 of the smaller peer", "peak_rss_mb", 3, "MB"),
]
TARGETS = [
    ("init wall < 15 ms", "init_wall_ms", 15.0, "ms"),
    ("peak RSS < 24 MB", "peak_rss_mb", 24.0, "MB"),
    ("binary < 10 MB", "size_mb", 10.0, "MB"),
]


def targets(figures):
    """The issue's targets, each with the measured value and the limit."""
    out = []
    transport = "https" if "https" in figures else "http"
    subjects = figures.get(transport) or {}
    peers = [subjects[p] for p in TARGET_PEERS if p in subjects]
    goals = [(name, key, min(p[key] for p in peers) / div, unit) for name, key, div, unit in PEER_TARGETS if peers]
    for rust in rust_names(figures):
        for name, key, limit, unit in goals + TARGETS:
            value = subjects[rust][key]
            out.append(
                {
                    "subject": rust,
                    "target": name,
                    "transport": transport,
                    "value": value,
                    "limit": limit,
                    "unit": unit,
                    "met": value <= limit,
                    "margin": limit / value if value else None,
                }
            )
    return out


# ---- Markdown ---------------------------------------------------------------


def _fmt(value):
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _ratio(value):
    return "–" if value is None else f"{value:.2f}×" if value >= 0.1 else f"{value:.3f}×"


def markdown(summary):
    """results.md: the template bench/results.md.j2 filled in with the summary's figures."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE), trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True
    )
    env.filters |= {"fmt": _fmt, "ratio": _ratio}
    env.globals["floor_table"] = floor_table
    template = env.get_template("results.md.j2")
    return template.render(summary, peers=PEERS, rusts=rust_names(summary["figures"]))


# ---- charts -------------------------------------------------------------------

COLOURS = {
    "rust": "#b7410e",
    "traced": "#7a2b09",
    "floor": "#999999",
    "idiomatic": "#d9822b",
    "python": "#3572a5",
    "node": "#5fa04e",
}
FALLBACK = ["#b7410e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def write_charts(summary, out):
    """The charts as SVG (for docs/performance.md) and PNG (to look at), with
    matplotlib; returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "plant-store-bench"  # stable ids: an unchanged chart, an unchanged file
    charts = {"chart": chart, "lambda": lambda_chart, "concurrency": concurrency_chart}
    charts = {name: draw for name, draw in charts.items() if summary.get(CHART_NEEDS[name])}
    for name, draw in charts.items():
        figure = draw(summary)
        figure.savefig(os.path.join(out, f"{name}.svg"), metadata={"Date": None})
        figure.savefig(os.path.join(out, f"{name}.png"), dpi=100)
    return [f"{name}.{kind}" for name in charts for kind in ("svg", "png")]


CHART_NEEDS = {"chart": "figures", "lambda": "memory_sizes", "concurrency": "concurrency"}  # none: `--transport none`


def _bars(title, subtitle, panels, names):
    """Two panels of grouped bars, one group per implementation: each panel
    is (title, [(bar label, key)], {name: figures}, format)."""
    from matplotlib.figure import Figure

    colour = {n: COLOURS.get(n) or FALLBACK[i % len(FALLBACK)] for i, n in enumerate(names)}
    figure = Figure(figsize=(9.2, 3.9), layout="constrained")
    figure.suptitle(f"{title}\n{subtitle}", fontsize=11)
    for ax, (panel_title, series, values, fmt) in zip(figure.subplots(1, 2), panels, strict=True):
        shown = [n for n in names if n in values]
        width = 0.8 / len(series)
        ticks, labels = [], []
        for j, (label, key) in enumerate(series):
            xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(shown))]
            heights = [values[n][key] for n in shown]
            bars = ax.bar(
                xs, heights, width * 0.9, color=[colour[n] for n in shown], alpha=1 if j == len(series) - 1 else 0.55
            )
            ax.bar_label(bars, [fmt(h) for h in heights], fontsize=8)
            ticks, labels = ticks + xs, labels + [label] * len(xs)
        ax.set_xticks(ticks, labels, fontsize=8, color="#555")
        for i, name in enumerate(shown):
            ax.text(i, -0.14, name, transform=ax.get_xaxis_transform(), ha="center", fontweight="bold")
        ax.set_title(panel_title, fontsize=10, fontweight="bold")
        ax.set_yticks([])
        ax.spines[["top", "right", "left"]].set_visible(False)
        ax.margins(y=0.15)
    return figure


def _machine(summary):
    m = summary["machine"]
    return f"{m['os'] or ''}, {m['cpus']} vCPU {m['arch']}; {summary['started_utc']}"


def chart(summary):
    """Cold total (wall and CPU) and warm p50/p99, per implementation, over
    HTTPS when it was measured."""
    transport = "https" if "https" in summary["figures"] else "http"
    subjects = summary["figures"][transport]
    return _bars(
        f"plant-store: POST /plants against DynamoDB Local over {transport.upper()}, lower is better",
        _machine(summary),
        [
            ("Cold start: init + first request (median, ms)", [("wall", "cold_wall_ms"), ("CPU", "cold_cpu_ms")],
             subjects, _fmt),
            ("Warm invocation, wall (ms)", [("p50", "warm_p50_ms"), ("p99", "warm_p99_ms")], subjects, _fmt),
        ],
        list(subjects),
    )  # fmt: skip


def lambda_chart(summary):
    """The cold total (wall) at the smallest memory size measured, under its
    CPU quota, and the Lambda cost of a million creates at that size."""
    memory = summary["memory_sizes"]
    size = min(memory["sizes"], key=int)
    data = memory["sizes"][size]
    figures = data["figures"]
    costs = {r["implementation"]: r for r in summary.get("cost", {}).get("per_million_creates", [])
             if str(r["memory_mb"]) == size}  # fmt: skip
    quota = f"CPU quota {data['quota_us'] / memory['period_us']:.1%} of a core" if data["quota_us"] else "no CPU quota"
    prices = summary.get("cost", {}).get("prices", {})
    return _bars(
        f"plant-store at {size} MB ({quota}), DynamoDB Local over {memory['transport'].upper()}, lower is better",
        f"{_machine(summary)}; prices {prices.get('region', '')} {prices.get('as_of', '')}",
        [
            (f"Cold start at {size} MB: init + first request, wall (ms)",
             [("init", "init_wall_ms"), ("total", "cold_wall_ms")], figures, _fmt),
            (f"Lambda cost per million creates at {size} MB, arm64 (USD)",
             [("light", "arm64_usd_light"), ("busy", "arm64_usd_busy")], costs, lambda v: f"{v:.3f}"),
        ],
        list(figures),
    )  # fmt: skip


def concurrency_chart(summary):
    """Creates a second that one execution environment sustains, and its CPU
    per create, at each concurrency, per implementation."""
    c = summary["concurrency"]
    levels = sorted({level for levels in c["subjects"].values() for level in levels}, key=int)
    values = {
        name: {
            f"{k}_{level}": f[k] for level, f in by_level.items() for k in ("creates_per_s", "cpu_per_invocation_ms")
        }
        for name, by_level in c["subjects"].items()
    }
    m = summary["machine"]
    return _bars(
        f"One execution environment, N invocations at once: DynamoDB Local over {c['transport'].upper()} "
        f"+ {c['store_latency_ms']:g} ms",
        f"{c['vcpus']} vCPU {m['arch']} for the function and the harness together; {summary['started_utc']}",
        [
            ("Creates per second (higher is better)", [(level, f"creates_per_s_{level}") for level in levels],
             values, _fmt),
            ("CPU per create, ms (lower is better)", [(level, f"cpu_per_invocation_ms_{level}") for level in levels],
             values, _fmt),
        ],
        list(c["subjects"]),
    )  # fmt: skip


def write(summary, out, results_json=True):
    """results.json (unless `results_json` is false), results.md and the
    charts into `out`; the Markdown also to stdout."""
    os.makedirs(out, exist_ok=True)
    if results_json:
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    text = markdown(summary)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    charts = write_charts(summary, out)
    print(text)
    written = ", ".join(["results.json"] * results_json + ["results.md", *charts])
    print(f"wrote {written} to {os.path.relpath(out)}", file=sys.stderr, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="a results.json that bench/run.py wrote")
    parser.add_argument("--out", help="where results.md and the charts go (default: beside the results.json)")
    args = parser.parse_args(argv)
    with open(args.results) as f:
        summary = json.load(f)
    write(summary, args.out or os.path.dirname(os.path.abspath(args.results)), results_json=False)


if __name__ == "__main__":
    main()
