"""Turns raw benchmark samples into the summary (results.json), a Markdown
table (results.md) and a chart (chart.svg, hand-written SVG)."""

import html
import statistics

PEERS = ("python", "node")
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
    return summary


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
        peers = [p for p in PEERS if p in https]

        def target(name, value, limit, unit):
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

        if peers:
            fastest_cold = min(https[p]["cold_cpu_ms"] for p in peers)
            target("cold total CPU <= 1/10 of the faster peer", f["cold_cpu_ms"], fastest_cold / 10, "ms")
            target("warm p50 wall <= the faster peer", f["warm_p50_ms"], min(https[p]["warm_p50_ms"] for p in peers), "ms")
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
    return "\n".join(lines)


COLOURS = {"rust": "#b7410e", "python": "#3572a5", "node": "#5fa04e"}
FALLBACK = ["#b7410e", "#d9822b", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def svg(summary):
    """Two panels: cold total (wall and CPU) and warm p50/p99, per
    implementation, over HTTPS when it was measured."""
    transport = "https" if "https" in summary["figures"] else "http"
    subjects = summary["figures"][transport]
    names = list(subjects)
    colour = {n: COLOURS.get(n) or FALLBACK[i % len(FALLBACK)] for i, n in enumerate(names)}
    panels = [
        ("Cold start: init + first request (median, ms)", [("wall", "cold_wall_ms"), ("CPU", "cold_cpu_ms")]),
        ("Warm invocation, wall (ms)", [("p50", "warm_p50_ms"), ("p99", "warm_p99_ms")]),
    ]
    width, height, top, bottom, left = 920, 380, 70, 60, 20
    panel_w = (width - 3 * left) / 2
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">'
        f"plant-store: POST /plants against DynamoDB Local over {transport.upper()}, lower is better</text>",
        f'<text x="{width / 2}" y="42" text-anchor="middle" fill="#555">'
        f"{html.escape(summary['machine']['os'] or '')}, {summary['machine']['cpus']} vCPU "
        f"{summary['machine']['arch']}; {summary['started_utc']}</text>",
    ]
    for p, (title, bars) in enumerate(panels):
        x0 = left + p * (panel_w + left)
        chart_h = height - top - bottom
        peak = max(subjects[n][key] for n in names for _, key in bars) or 1
        out.append(f'<text x="{x0 + panel_w / 2}" y="{top - 8}" text-anchor="middle" font-weight="bold">{title}</text>')
        out.append(
            f'<line x1="{x0}" y1="{top + chart_h}" x2="{x0 + panel_w}" y2="{top + chart_h}" stroke="#333"/>'
        )
        group_w = panel_w / len(names)
        bar_w = min(40, group_w / (len(bars) + 1))
        for i, name in enumerate(names):
            gx = x0 + i * group_w + (group_w - bar_w * len(bars)) / 2
            for j, (label, key) in enumerate(bars):
                value = subjects[name][key]
                h = max(1.0, chart_h * 0.85 * value / peak)
                x, y = gx + j * bar_w, top + chart_h - h
                opacity = "1" if j == len(bars) - 1 else "0.55"
                out.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w - 4:.1f}" height="{h:.1f}" '
                    f'fill="{colour[name]}" fill-opacity="{opacity}"/>'
                )
                out.append(
                    f'<text x="{x + (bar_w - 4) / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle" font-size="11">'
                    f"{_fmt(value)}</text>"
                )
                out.append(
                    f'<text x="{x + (bar_w - 4) / 2:.1f}" y="{top + chart_h + 14}" text-anchor="middle" '
                    f'font-size="10" fill="#555">{label}</text>'
                )
            out.append(
                f'<text x="{gx + bar_w * len(bars) / 2 - 2:.1f}" y="{top + chart_h + 32}" text-anchor="middle" '
                f'font-weight="bold">{html.escape(name)}</text>'
            )
    out.append("</svg>")
    return "\n".join(out) + "\n"
