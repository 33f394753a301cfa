"""Turns raw benchmark samples into the summary (results.json), a Markdown
table (results.md) and the charts (matplotlib: SVG for the README, PNG to
look at)."""

import math
import os
import statistics
import sys

# The implementations plant-store is compared with: the two managed
# runtimes' SDKs, and Rust written the way the runtime's examples are.
PEERS = ("python", "node", "idiomatic")
# The targets were set against the Python and Node.js peers.
TARGET_PEERS = ("python", "node")

# ---- prices: dated constants, in one place ----------------------------------
# us-east-1, on-demand, no free tier, read 2026-11-22. Lambda: the AWS Lambda
# pricing page (aws.amazon.com/lambda/pricing), whose rates are quoted as
# $0.0000166667 (x86_64) and $0.0000133334 (arm64) per GB-second for the first
# 6 / 7.5 billion GB-seconds a month and $0.20 per million requests (e.g. in
# artillery 2.0.28's lib/platform/aws-lambda/prices.js and a cost guide dated
# 2026-05-11); billed duration is rounded up to the millisecond. API Gateway
# HTTP API: $1.00 per million requests for the first 300 million a month
# (aws.amazon.com/api-gateway/pricing, as quoted 2025-05-19). DynamoDB
# on-demand: $0.625 per million write request units since the price cut of
# November 2024 (aws.amazon.com/dynamodb/pricing/on-demand, as quoted
# 2025-07-21); one create of an item under 1 KB is one write request unit.
#
# Lambda Managed Instances (read 2026-11-23): requests $0.20 per million and a
# compute management fee of 15 % on top of the EC2 on-demand price of the
# instances the capacity provider runs, no duration charge (the Lambda
# pricing page, aws.amazon.com/lambda/pricing, "Lambda Managed Instances",
# as transcribed from it on 2026-09-20). The instance: m7g.large (Graviton3,
# 2 vCPU, 8 GiB), Linux on demand in us-east-1, $0.0816 an hour
# (aws.amazon.com/ec2/pricing/on-demand, as quoted for June 2026). A
# capacity provider keeps three instances by default (one per availability
# zone), whatever the load: the floor below.
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

COLD_METRICS = [
    ("init_wall_ms", "init, wall (ms)"),
    ("init_cpu_ms", "init, CPU (ms)"),
    ("first_wall_ms", "first invocation, wall (ms)"),
    ("first_cpu_ms", "first invocation, CPU (ms)"),
    ("cold_wall_ms", "**cold total, wall (ms)**"),
    ("cold_cpu_ms", "**cold total, CPU (ms)**"),
]
WARM_METRICS = [
    ("warm_p50_ms", "warm p50, wall (ms)"),
    ("warm_p90_ms", "warm p90, wall (ms)"),
    ("warm_p99_ms", "**warm p99, wall (ms)**"),
    ("warm_max_ms", "warm max, wall (ms)"),
    ("warm_cpu_ms", "**warm CPU per invocation (ms)**"),
    ("peak_rss_mb", "**peak RSS (MB)**"),
    ("size_mb", "size on disk (MB)"),
]


def percentile(values, p):
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def summarise(results):
    figures = {}
    for transport, data in results["transports"].items():
        figures[transport] = {}
        for name, samples in data["cold"].items():
            fig = {}
            for key, _ in COLD_METRICS:
                values = [s[key] for s in samples]
                fig[key] = statistics.median(values)
                fig[key + "_min"] = min(values)
                fig[key + "_max"] = max(values)
            fig["cold_samples"] = len(samples)
            warm = data["warm"][name]
            walls = warm["wall_ms"]
            fig.update(
                {
                    "warm_invocations": len(walls),
                    "warm_p50_ms": percentile(walls, 50),
                    "warm_p90_ms": percentile(walls, 90),
                    "warm_p99_ms": percentile(walls, 99),
                    "warm_max_ms": max(walls),
                    "warm_mean_ms": statistics.fmean(walls),
                    "warm_cpu_ms": warm["cpu_per_invocation_ms"],
                    "warm_cpu_in_window_p50_ms": percentile(warm["cpu_in_window_ms"], 50),
                    "warm_cpu_system_share": warm.get("system_share"),
                    "peak_rss_mb": max(warm["peak_rss_kib"], *(s["peak_rss_kib"] for s in samples)) * 1024 / 1e6,
                    "size_mb": (results["subjects"][name]["size_bytes"] or 0) / 1e6,
                }
            )
            figures[transport][name] = fig
    summary = {k: v for k, v in results.items() if k != "transports"}
    summary["figures"] = figures
    summary["ratios"] = ratios(figures)
    summary["targets"] = targets(figures)
    summary["raw"] = {
        transport: {
            "cold": data["cold"],
            "warm_wall_ms": {n: [round(x, 4) for x in w["wall_ms"]] for n, w in data["warm"].items()},
        }
        for transport, data in results["transports"].items()
    }
    summary.pop("memory", None)
    summary.pop("long", None)
    if results.get("memory"):
        summary["memory_sizes"] = memory_figures(results["memory"])
        summary["cost"] = cost(results["memory"], results["settings"].get("ddb_latency_ms", DDB_LATENCY_MS))
        summary["raw"]["memory_sizes"] = {
            size: {
                "cold": data["cold"],
                "warm_wall_ms": {n: [round(x, 4) for x in w["wall_ms"]] for n, w in data["warm"].items()},
            }
            for size, data in results["memory"]["sizes"].items()
        }
    if results.get("concurrency"):
        summary["concurrency"] = concurrency_figures(results["concurrency"])
        summary["managed_instances_cost"] = managed_instances_cost(summary["concurrency"], summary.get("cost"))
        summary["raw"]["concurrency_wall_ms"] = {
            name: {level: [round(x, 4) for x in r["wall_ms"]] for level, r in levels.items()}
            for name, levels in results["concurrency"]["subjects"].items()
        }
    if results.get("long"):
        summary["memory_over_time"] = long_figures(results["long"])
    return summary


def concurrency_figures(concurrency):
    """Per implementation and concurrency: what one execution environment
    sustains on the machine's cores against the store with a stated latency."""
    out = {k: concurrency[k] for k in ("transport", "store_latency_ms", "vcpus")}
    out["subjects"] = {}
    for name, levels in concurrency["subjects"].items():
        out["subjects"][name] = {
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
    for name, levels in concurrency["subjects"].items():
        for level, f in levels.items():
            per_s = mi["instance_vcpus"] * MANAGED_INSTANCES_CPU_UTILISATION / (f["cpu_per_invocation_ms"] / 1000)
            compute = hour_usd / (3600 * per_s) * 1e6
            rows.append({
                "implementation": name,
                "concurrency": int(level),
                "cpu_per_invocation_ms": f["cpu_per_invocation_ms"],
                "creates_per_s_per_instance": per_s,
                "compute_usd": compute,
                "usd": compute + mi["request_usd"] * 1e6,
                "on_demand_128mb_arm64_usd_light": od.get(name, {}).get("arm64_usd_light"),
                "on_demand_128mb_arm64_usd_busy": od.get(name, {}).get("arm64_usd_busy"),
            })  # fmt: skip
    return {
        "rows": rows,
        "prices": mi,
        "cpu_utilisation": MANAGED_INSTANCES_CPU_UTILISATION,
        "floor_usd_per_month": mi["minimum_instances"] * hour_usd * 730,
        "source": PRICES["sources"]["managed_instances"],
    }


def memory_figures(memory):
    """Per memory size and implementation: the cold and warm figures under
    that size's CPU quota, and the rate one instance sustains."""
    out = {"transport": memory["transport"], "period_us": memory["period_us"], "sizes": {}}
    for size, data in memory["sizes"].items():
        figures = {}
        for name, samples in data["cold"].items():
            warm = data["warm"][name]
            walls = warm["wall_ms"]
            figures[name] = {
                "init_wall_ms": statistics.median(s["init_wall_ms"] for s in samples),
                # The process CPU clock: user and kernel time, all threads.
                "init_cpu_ms": statistics.median(s["init_cpu_ms"] for s in samples),
                "first_wall_ms": statistics.median(s["first_wall_ms"] for s in samples),
                "cold_wall_ms": statistics.median(s["cold_wall_ms"] for s in samples),
                "cold_wall_ms_max": max(s["cold_wall_ms"] for s in samples),
                "cold_cpu_ms": statistics.median(s["cold_cpu_ms"] for s in samples),
                "cold_samples": len(samples),
                **{
                    f"{key}_median": statistics.median(s[key] for s in samples)
                    for key in ("init_nr_periods", "init_nr_throttled", "cold_nr_periods", "cold_nr_throttled")
                    if all(key in s for s in samples)
                },
                "warm_invocations": len(walls),
                "warm_p50_ms": percentile(walls, 50),
                "warm_p99_ms": percentile(walls, 99),
                "warm_mean_ms": statistics.fmean(walls),
                "warm_cpu_ms": warm["cpu_per_invocation_ms"],
                "invocations_per_s": warm.get("invocations_per_s"),
            }
        out["sizes"][size] = {
            "quota_us": data["quota_us"],
            "cgroup": data["cgroup"],
            "no_quota_reason": data.get("no_quota_reason"),
            "throttled_periods": data.get("throttled_periods"),
            "periods": data.get("periods"),
            "figures": figures,
        }
    return out


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
    for size in COST_MEMORY_MB:
        data = memory["sizes"].get(str(size))
        if not data:
            continue
        for name, warm in data["warm"].items():
            billed = billed_ms(warm["wall_ms"], latency_ms)
            row = {"implementation": name, "memory_mb": size}
            for load, ms in billed.items():
                row[f"billed_ms_{load}"] = ms
                for arch, price in PRICES["lambda_gb_second_usd"].items():
                    compute = 1e6 * ms / 1000 * size / 1024 * price
                    row[f"{arch}_usd_{load}"] = compute + 1e6 * PRICES["lambda_request_usd"]
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
        marks = {c["invocations"]: c for c in data["checkpoints"]}
        last = data["checkpoints"][-1]
        early = marks.get(2000)
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
            fig["growth_bytes_per_invocation"] = (
                (last["peak_rss_kib"] - early["peak_rss_kib"]) * 1024 / (last["invocations"] - 2000)
            )
        out["subjects"][name] = fig
    return out


def rust_names(figures):
    names = next(iter(figures.values()), {})
    return [n for n in names if n not in PEERS]


def ratios(figures):
    out = {}
    keys = [k for k, _ in COLD_METRICS + WARM_METRICS]
    for transport, subjects in figures.items():
        for rust in rust_names(figures):
            for peer in PEERS:
                if peer in subjects and rust in subjects:
                    out.setdefault(transport, {})[f"{rust}/{peer}"] = {
                        k: subjects[rust][k] / subjects[peer][k] if subjects[peer][k] else None for k in keys
                    }
    return out


def targets(figures):
    """The issue's targets, each with the measured value and the limit."""
    out = []
    https = figures.get("https") or figures.get("http") or {}
    transport = "https" if "https" in figures else "http"
    for rust in rust_names(figures):
        f = https[rust]

        def target(name, value, limit, unit, rust=rust):
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

        peers = [p for p in TARGET_PEERS if p in https]
        if peers:
            fastest_cold = min(https[p]["cold_cpu_ms"] for p in peers)
            target("cold total CPU <= 1/10 of the faster peer", f["cold_cpu_ms"], fastest_cold / 10, "ms")
            target(
                "warm p50 wall <= the faster peer", f["warm_p50_ms"], min(https[p]["warm_p50_ms"] for p in peers), "ms"
            )
            target("warm CPU per invocation <= 1/5 of the faster peer", f["warm_cpu_ms"],
                   min(https[p]["warm_cpu_ms"] for p in peers) / 5, "ms")  # fmt: skip
            target("peak RSS <= 1/3 of the smaller peer", f["peak_rss_mb"],
                   min(https[p]["peak_rss_mb"] for p in peers) / 3, "MB")  # fmt: skip
        target("init wall < 15 ms", f["init_wall_ms"], 15.0, "ms")
        target("peak RSS < 24 MB", f["peak_rss_mb"], 24.0, "MB")
        target("binary < 10 MB", f["size_mb"], 10.0, "MB")
    return out


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


def markdown(summary):
    lines = []
    m = summary["machine"]
    lines.append(
        f"Machine: {m['cpus']} vCPU {m['arch']} ({m['cpu_model']}), {m['memory_gib']} GiB, {m['os']}; "
        f"{m['rustc']}, Python {m['python']}, Node.js {m['node']}, {m['java']} (DynamoDB Local). "
        f"Run {summary['started_utc']}, {summary['duration_s']} s; load average before "
        f"{summary['load']['before'][0]:.2f}. Cold: median of {summary['settings']['cold']} fresh processes "
        f"(min–max in results.json); warm: {summary['settings']['warm']} sequential invocations after the first."
    )
    lines.append("")
    for transport, subjects in summary["figures"].items():
        names = list(subjects)
        ratio_cols = [(r, p) for r in rust_names(summary["figures"]) for p in PEERS if p in names]
        ratio_cols = ratio_cols if len(rust_names(summary["figures"])) == 1 else []
        header = ["DynamoDB Local over " + transport.upper()] + names + [f"{r} / {p}" for r, p in ratio_cols]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|---" + "|---:" * (len(header) - 1) + "|")
        for key, label in COLD_METRICS + WARM_METRICS:
            row = [label] + [_fmt(subjects[n][key]) for n in names]
            for r, p in ratio_cols:
                value = summary["ratios"][transport][f"{r}/{p}"][key]
                row.append("–" if value is None else f"{value:.2f}×" if value >= 0.1 else f"{value:.3f}×")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    if summary["targets"]:
        lines.append("| target | measured | limit | met |")
        lines.append("|---|---:|---:|:---:|")
        for t in summary["targets"]:
            subject = "" if len(rust_names(summary["figures"])) == 1 else f"{t['subject']}: "
            lines.append(
                f"| {subject}{t['target']} ({t['transport'].upper()}) | {_fmt(t['value'])} {t['unit']} "
                f"| {_fmt(t['limit'])} {t['unit']} | {'yes' if t['met'] else '**no**'} |"
            )
        lines.append("")
    if summary.get("memory_sizes"):
        lines += memory_markdown(summary["memory_sizes"])
    if summary.get("concurrency"):
        lines += concurrency_markdown(summary["concurrency"])
    if summary.get("memory_over_time"):
        lines += long_markdown(summary["memory_over_time"])
    if summary.get("cost"):
        lines += cost_markdown(summary["cost"])
    if summary.get("managed_instances_cost"):
        lines += managed_instances_markdown(summary["managed_instances_cost"])
    return "\n".join(lines)


def memory_markdown(memory):
    lines = [
        f"### At Lambda's memory sizes (a CPU quota per size, DynamoDB Local over {memory['transport'].upper()})",
        "",
    ]
    lines.append(
        "| memory | CPU quota | implementation | init, wall (ms) | init, CPU (ms) | first invocation, wall (ms) "
        "| **cold total, wall (ms)** | cold total, CPU (ms) | quota periods, init / cold total (throttled) "
        "| warm p50 (ms) | **warm p99 (ms)** | warm CPU (ms) | sustained invocations/s |"
    )
    lines.append("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, data in memory["sizes"].items():
        share = (
            f"{data['quota_us'] / memory['period_us']:.1%} (cgroup {data['cgroup']})" if data["quota_us"] else "none"
        )
        for name, f in data["figures"].items():
            periods = "–"
            if "cold_nr_periods_median" in f:
                periods = (f"{f['init_nr_periods_median']:g} / {f['cold_nr_periods_median']:g} "
                           f"({f['init_nr_throttled_median']:g} / {f['cold_nr_throttled_median']:g})")  # fmt: skip
            lines.append(
                f"| {size} MB | {share} | {name} | {_fmt(f['init_wall_ms'])} | {_fmt(f.get('init_cpu_ms'))} "
                f"| {_fmt(f['first_wall_ms'])} | {_fmt(f['cold_wall_ms'])} | {_fmt(f['cold_cpu_ms'])} | {periods} "
                f"| {_fmt(f['warm_p50_ms'])} | {_fmt(f['warm_p99_ms'])} "
                f"| {_fmt(f['warm_cpu_ms'])} | {_fmt(f['invocations_per_s'])} |"
            )
    lines.append("")
    lines.append(
        "CPU: the process's CPU clock (user and kernel time, all threads), read from outside the process. Quota "
        "periods: the medians of how many CFS periods the cgroup's `cpu.stat` counted from exec to the first GET "
        "/next (init) and to the first answer (cold total), and in how many of them the quota ran out."
    )
    lines.append("")
    return lines


def concurrency_markdown(c):
    lines = [
        (
            f"### Throughput per execution environment (AWS_LAMBDA_MAX_CONCURRENCY; DynamoDB Local over "
            f"{c['transport'].upper()} behind {c['store_latency_ms']:g} ms per request; {c['vcpus']} vCPU, no quota)"
        ),
        "",
        (
            "| implementation | concurrency | **creates/s** | p50 (ms) | **p99 (ms)** | **CPU per invocation (ms)** "
            "| peak RSS (MB) | CPU share of the machine: function / all processes / emulator / store proxy "
            "/ DynamoDB Local |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, levels in c["subjects"].items():
        for level, f in levels.items():
            shares = " / ".join(f"{v:.0%}" for v in f["cpu_share_of_machine"].values())
            lines.append(
                f"| {name} | {level} | {_fmt(f['creates_per_s'])} | {_fmt(f['p50_ms'])} | {_fmt(f['p99_ms'])} "
                f"| {_fmt(f['cpu_per_invocation_ms'])} | {_fmt(f['peak_rss_mb'])} | {shares} |"
            )
    lines.append("")
    lines.append(
        "One process per row, given the concurrency as Lambda Managed Instances does; the emulator keeps that many "
        "creates in flight (a closed loop). CPU share: of all the machine's vCPUs over the window, for the function, "
        "for every process on the machine together (other work included), and for the harness's parts; where the "
        "machine is near 100 %, the rate is the machine's limit, not the function's, and CPU per invocation is the "
        "figure that carries over."
    )
    lines.append("")
    return lines


def managed_instances_markdown(mi):
    p = mi["prices"]
    lines = [
        f"### What a million creates cost on Lambda Managed Instances ({p['instance_type']}, prices {p['as_of']})",
        "",
        (
            f"| implementation | concurrency measured | CPU per create (ms) | creates/s per {p['instance_type']} "
            "| instance + fee (USD) | **total with requests (USD)** | on demand, 128 MB arm64, light / busy (USD) |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in mi["rows"]:
        od = "–"
        if r["on_demand_128mb_arm64_usd_light"] is not None:
            od = f"{r['on_demand_128mb_arm64_usd_light']:.3f} / {r['on_demand_128mb_arm64_usd_busy']:.3f}"
        lines.append(
            f"| {r['implementation']} | {r['concurrency']} | {_fmt(r['cpu_per_invocation_ms'])} "
            f"| {r['creates_per_s_per_instance']:,.0f} | {r['compute_usd']:.4f} | {r['usd']:.3f} | {od} |"
        )
    lines.append("")
    lines.append(
        f"Per million creates at steady load: the {p['instance_type']} on-demand price ({p['instance_hour_usd']} USD "
        f"an hour, {p['instance_vcpus']} vCPU) plus the {p['management_fee']:.0%} management fee, over the creates "
        f"its vCPUs hold at {mi['cpu_utilisation']:.0%} average CPU utilisation with the measured CPU per create, "
        f"plus {p['request_usd'] * 1e6:.2f} USD of requests. Whatever the load, a capacity provider keeps "
        f"{p['minimum_instances']} instances: {mi['floor_usd_per_month']:,.0f} USD a month. CPU per create is "
        f"measured on this machine's x86_64 cores, not Graviton3's. Sources: {mi['source']}."
    )
    lines.append("")
    return lines


def long_markdown(long):
    lines = [
        (
            "### Memory over time (one process, warm invocations back to back, DynamoDB Local over "
            f"{long['transport'].upper()})"
        ),
        "",
    ]
    lines.append(
        "| implementation | peak RSS after 2,000 (MB) | peak RSS after N (MB) | N | growth per invocation (bytes) |"
    )
    lines.append("|---|---:|---:|---:|---:|")
    for name, f in long["subjects"].items():
        growth = f.get("growth_bytes_per_invocation")
        lines.append(
            f"| {name} | {_fmt(f['peak_rss_mb_after_2000'])} | {_fmt(f['peak_rss_mb_at_end'])} | {f['invocations']:,} "
            f"| {'–' if growth is None else f'{growth:.1f}'} |"
        )
    lines.append("")
    return lines


def cost_markdown(cost):
    p = cost["prices"]
    lines = [f"### What a million creates cost ({p['region']}, prices as of {p['as_of']})", ""]
    lines.append(
        "| implementation | memory | billed ms, light | billed ms, busy | **arm64, light (USD)** | arm64, busy (USD) "
        "| x86_64, light (USD) | x86_64, busy (USD) |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in cost["per_million_creates"]:
        lines.append(
            f"| {row['implementation']} | {row['memory_mb']} MB | {row['billed_ms_light']} "
            f"| {_fmt(row['billed_ms_busy'])} "
            f"| {row['arm64_usd_light']:.3f} | {row['arm64_usd_busy']:.3f} "
            f"| {row['x86_64_usd_light']:.3f} | {row['x86_64_usd_busy']:.3f} |"
        )
    lines.append("")
    lines.append(
        f"Lambda compute (billed duration × memory × {p['lambda_gb_second_usd']['arm64']} USD per GB-second on arm64, "
        f"{p['lambda_gb_second_usd']['x86_64']} on x86_64) plus {p['lambda_request_usd'] * 1e6:.2f} USD of requests, "
        f"per million creates. The same for every implementation, not included: API Gateway HTTP API "
        f"{cost['http_api_usd']:.2f} USD and DynamoDB on-demand writes {cost['dynamodb_usd']:.3f} USD per million. "
        f"Billed duration: warm wall time under the CPU quota plus {cost['ddb_latency_ms']:g} ms assumed "
        f"for DynamoDB in-region ({cost['ddb_latency_source']}), rounded up to 1 ms; *light*: the median invocation "
        f"(an instance with requests now and then, each finding its CPU budget unspent); *busy*: the mean of "
        f"back-to-back invocations (an instance kept busy, whose invocations now and then wait for the next "
        f"quota period). Sources: " + "; ".join(v for k, v in p["sources"].items() if k != "managed_instances") + "."
    )
    lines.append("")
    return lines


COLOURS = {"rust": "#b7410e", "idiomatic": "#d9822b", "python": "#3572a5", "node": "#5fa04e"}
FALLBACK = ["#b7410e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def write_charts(summary, out):
    """The charts as SVG (for the README) and PNG (to look at), with
    matplotlib; returns the file names written."""
    try:
        import matplotlib
    except ImportError:
        print("no charts: matplotlib is not installed (make tools-deploy installs it)", file=sys.stderr)
        return []
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "plant-store-bench"  # stable ids: an unchanged chart, an unchanged file
    charts = {"chart": chart}
    if summary.get("memory_sizes"):
        charts["lambda"] = lambda_chart
    if summary.get("concurrency"):
        charts["concurrency"] = concurrency_chart
    written = []
    for name, draw in charts.items():
        figure = draw(summary)
        figure.savefig(os.path.join(out, f"{name}.svg"), metadata={"Date": None})
        figure.savefig(os.path.join(out, f"{name}.png"), dpi=100)
        written += [f"{name}.svg", f"{name}.png"]
    return written


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
