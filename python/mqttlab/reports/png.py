"""Static figures for papers (matplotlib, PNG): one bar chart per headline figure with the
confidence intervals as error bars, and one latency-by-percentile plot per scenario."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: figures are only written to files
import matplotlib.pyplot as plt  # noqa: E402

from mqttlab.analysis import Comparison  # noqa: E402
from mqttlab.analysis.runs import METRIC_BY_KEY  # noqa: E402
from mqttlab.reports.figures import BAR_METRICS, broker_colors, percentile_curve  # noqa: E402


def write_pngs(comparison: Comparison, directory: Path, dpi: int = 150) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for key in BAR_METRICS:
        path = _bars(comparison, key, directory / f"{key}.png", dpi)
        if path is not None:
            written.append(path)
    from mqttlab.reports.sweep import sweep_table

    sweep = sweep_table(comparison)
    for index, shape in enumerate(dict.fromkeys(row["shape"] for row in sweep)):
        written.append(_sweep(comparison, [row for row in sweep if row["shape"] == shape], directory / f"rate-sweep-{index}.png", dpi))
    for scenario in comparison.scenarios:
        path = _percentiles(comparison, scenario, directory / f"latency-{scenario.scenario}.png", dpi)
        if path is not None:
            written.append(path)
    return written


def _bars(comparison: Comparison, key: str, path: Path, dpi: int) -> Path | None:
    metric = METRIC_BY_KEY[key]
    scenarios = [s.scenario for s in comparison.scenarios]
    brokers = comparison.brokers
    if not any(g.estimates[key].mean is not None for s in comparison.scenarios for g in s.groups.values()):
        return None
    colors = broker_colors(comparison)
    width = 0.8 / max(1, len(brokers))
    figure, axes = plt.subplots(figsize=(max(5.0, 1.2 * len(scenarios) * max(1, len(brokers)) / 2 + 2), 3.6))
    for index, broker in enumerate(brokers):
        xs, means, errors = [], [], [[], []]
        for position, scenario in enumerate(comparison.scenarios):
            group = scenario.groups.get(broker)
            estimate = group.estimates[key] if group else None
            if estimate is None or estimate.mean is None:
                continue
            xs.append(position + (index - (len(brokers) - 1) / 2) * width)
            means.append(estimate.mean)
            errors[0].append(estimate.mean - estimate.low if estimate.has_interval else 0.0)
            errors[1].append(estimate.high - estimate.mean if estimate.has_interval else 0.0)
        axes.bar(xs, means, width, yerr=errors, capsize=3, label=broker, color=colors[broker])
    axes.set_xticks(range(len(scenarios)), scenarios, rotation=30, ha="right", fontsize=8)
    axes.set_ylabel(f"{metric.title} ({metric.unit})")
    axes.set_title(f"{metric.title}: mean, {comparison.confidence:.0%} CI", fontsize=10)
    axes.legend(fontsize=8)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def _percentiles(comparison: Comparison, scenario, path: Path, dpi: int) -> Path | None:
    colors = broker_colors(comparison)
    figure, axes = plt.subplots(figsize=(5.5, 3.6))
    drawn = False
    for broker, group in scenario.groups.items():
        curve = percentile_curve(group)
        if curve is None:
            continue
        percentiles, values = curve
        nines = [-math.log10(1 - p / 100) for p in percentiles]
        axes.plot(nines, values, label=broker, color=colors[broker])
        drawn = True
    if not drawn:
        plt.close(figure)
        return None
    axes.set_xticks([0, 1, 2, 3, 4, 5], ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"])
    axes.set_xlabel("percentile")
    axes.set_ylabel("latency (ms)")
    axes.set_title(f"{scenario.scenario}: latency by percentile (repetitions pooled)", fontsize=10)
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def _sweep(comparison: Comparison, rows: list[dict], path: Path, dpi: int) -> Path:
    """Latency p50 and loss against the rate per publisher, one line per protocol and broker
    (dashed = MQTT-SN), as seed 004 drew them."""
    from mqttlab.reports.figures import PALETTE

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    # One colour per line (protocol × broker): with one broker the protocols must still differ.
    for index, (protocol, broker) in enumerate(dict.fromkeys((row["protocol"], row["broker"]) for row in rows)):
        line = sorted((row for row in rows if (row["protocol"], row["broker"]) == (protocol, broker)), key=lambda row: row["rate_per_publisher"])
        x = [row["rate_per_publisher"] for row in line]
        style = {"color": PALETTE[index % len(PALETTE)], "linestyle": "--" if protocol == "mqtt-sn" else "-", "marker": "o", "label": f"{protocol} ({broker})"}
        left.plot(x, [math.nan if row["latency_p50_ms"] is None else row["latency_p50_ms"] for row in line], **style)
        right.plot(x, [math.nan if row["loss_percent"] is None else row["loss_percent"] for row in line], **style)
    for axis, label in ((left, "latency p50 (ms)"), (right, "loss (%)")):
        axis.set_xscale("log")
        axis.set_xlabel("msg/s per publisher")
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    left.legend(fontsize=8)
    figure.suptitle(rows[0]["shape"], fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path
