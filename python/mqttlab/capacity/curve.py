"""The curve, not just the point: per offered rate probed, latency percentiles, delivered rate,
broker CPU and memory (means over the probes at that rate), as a CSV and one PNG with the
objectives and the capacity's bracket marked. Several brokers share one figure."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any, Optional, Sequence

from mqttlab.capacity.slo import Objective, latency_us

COLUMNS = ("offered_per_s", "probes", "met", "broke", "generator_limited", "sent_per_s", "delivered_per_s", "latency", "p50_us", "p99_us",
           "p999_us", "lost", "dropped", "failed_connections", "broker_cpu_cores", "broker_rss_bytes", "host_busy_cores")


@dataclass
class Series:
    """One broker's search, as drawn: its curve rows and its bracket."""

    label: str
    rows: list[dict[str, Any]]
    lower: Optional[float]
    upper: Optional[float]
    status: str


def curve_rows(probes: Sequence[Any], source: str = "e2e") -> list[dict[str, Any]]:
    """One row per offered rate, figures averaged over the probes at it that the generator did
    not limit (a limited probe says nothing about the broker; it is counted, not averaged).
    `source` is the latency histogram drawn: e2e, or the one the objectives are about (connack)."""
    by_rate: dict[float, list[Any]] = {}
    for probe in probes:
        by_rate.setdefault(probe.rate, []).append(probe)
    rows = []
    for rate in sorted(by_rate):
        group = by_rate[rate]
        judged = [p for p in group if not p.generator_limited] or group
        rows.append({
            "offered_per_s": rate,
            "probes": len(group),
            "met": sum(1 for p in group if not p.generator_limited and p.met),
            "broke": sum(1 for p in group if not p.generator_limited and not p.met),
            "generator_limited": sum(1 for p in group if p.generator_limited),
            "sent_per_s": _mean(p.summary["rates"]["sent_per_s"] for p in judged),
            "delivered_per_s": _mean(p.summary["rates"]["received_per_s"] for p in judged),
            "latency": source,
            "p50_us": _mean(latency_us(p.result, source, "p50") for p in judged),
            "p99_us": _mean(latency_us(p.result, source, "p99") for p in judged),
            "p999_us": _mean(latency_us(p.result, source, "p99.9") for p in judged),
            "lost": sum(p.summary["messages"]["lost"] for p in judged),
            "dropped": sum(p.summary["messages"]["dropped"] for p in judged),
            "failed_connections": sum(p.summary["connections"][side]["failed"] for p in judged for side in ("publishers", "subscribers")),
            "broker_cpu_cores": _mean(_broker(p, "mean_cpu_share") for p in judged),
            "broker_rss_bytes": _mean(_broker(p, "peak_rss_bytes") for p in judged),
            "host_busy_cores": _mean(p.host.get("busy_cores") for p in judged),
        })
    return rows


def _broker(probe: Any, key: str) -> Optional[float]:
    broker = (probe.summary.get("resources") or {}).get("broker")
    return broker.get(key) if broker else None


def _mean(values: Any) -> Optional[float]:
    present = [float(v) for v in values if v is not None]
    return mean(present) if present else None


def write_csv(series: Sequence[Series], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=("broker", *COLUMNS))
        writer.writeheader()
        for one in series:
            for row in one.rows:
                writer.writerow({"broker": one.label, **{k: ("" if row[k] is None else row[k]) for k in COLUMNS}})
    return path


def write_png(series: Sequence[Series], objectives: Sequence[Objective], path: Path, title: str, unit: str = "msg/s", dpi: int = 150) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display: the figure is only written to a file
    import matplotlib.pyplot as plt

    figure, (latency, delivered, resources) = plt.subplots(3, 1, figsize=(7.5, 9.5), sharex=True)
    memory = resources.twinx()
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, one in enumerate(series):
        color = colors[index % len(colors)]
        rates = [row["offered_per_s"] for row in one.rows]
        for key, style, name in (("p50_us", ":", "p50"), ("p99_us", "-", "p99"), ("p999_us", "--", "p99.9")):
            points = [(r, row[key] / 1000) for r, row in zip(rates, one.rows) if row[key]]
            if points:
                latency.plot(*zip(*points), style, color=color, marker=".", label=f"{one.label} {name}")
        broke = [(r, row["p99_us"] / 1000) for r, row in zip(rates, one.rows) if row["broke"] and row["p99_us"]]
        if broke:
            latency.scatter(*zip(*broke), marker="x", color=color, s=50, zorder=3)
        limited = [(r, row["p99_us"] / 1000) for r, row in zip(rates, one.rows) if not row["met"] and not row["broke"] and row["p99_us"]]
        if limited:
            latency.scatter(*zip(*limited), marker="o", facecolors="none", edgecolors=color, s=90, zorder=3)
        delivered.plot(rates, [row["delivered_per_s"] for row in one.rows], "-", marker=".", color=color, label=f"{one.label} delivered/s")
        cpu = [(r, row["broker_cpu_cores"]) for r, row in zip(rates, one.rows) if row["broker_cpu_cores"] is not None]
        if cpu:
            resources.plot(*zip(*cpu), "-", marker=".", color=color, label=f"{one.label} CPU")
        rss = [(r, row["broker_rss_bytes"] / 2**20) for r, row in zip(rates, one.rows) if row["broker_rss_bytes"] is not None]
        if rss:
            memory.plot(*zip(*rss), ":", marker="s", markersize=3, color=color, label=f"{one.label} RSS")
        for axes in (latency, delivered, resources):
            if one.lower is not None:
                axes.axvline(one.lower, color=color, linewidth=1.2)
                if one.upper is not None:
                    axes.axvspan(one.lower, one.upper, color=color, alpha=0.12)
    source = next((row["latency"] for one in series for row in one.rows), "e2e")
    for objective in objectives:
        if objective.kind == "latency" and objective.source == source:
            latency.axhline(objective.threshold / 1000, color="black", linestyle="-.", linewidth=0.8)
            latency.annotate(f"SLO {objective.text}", (0.01, objective.threshold / 1000), xycoords=("axes fraction", "data"),
                             fontsize=7, va="bottom")
    latency.set_xscale("log")
    latency.set_yscale("log")
    latency.set_ylabel(f"{source} latency (ms)")
    latency.set_title(title, fontsize=9)
    if latency.get_legend_handles_labels()[0]:
        latency.legend(fontsize=6, ncol=3)
    delivered.set_ylabel("delivered (msg/s)")
    delivered.legend(fontsize=6)
    resources.set_ylabel("broker CPU (cores)")
    memory.set_ylabel("broker peak RSS (MiB)")
    resources.set_xlabel(f"offered ({unit}); line = capacity, band = its bracket, x = a probe broke the SLO, o = only generator-limited probes",
                         fontsize=8)
    lines, labels = resources.get_legend_handles_labels()
    more, more_labels = memory.get_legend_handles_labels()
    resources.legend(lines + more, labels + more_labels, fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path
