"""Static figures for papers (matplotlib, PNG): one bar chart per headline figure with the
confidence intervals as error bars, and one latency-by-percentile plot per scenario."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")  # no display: figures are only written to files
import matplotlib.pyplot as plt  # noqa: E402

from mqttlab.analysis import BrokerGroup, Comparison  # noqa: E402
from mqttlab.analysis.runs import METRIC_BY_KEY  # noqa: E402
from mqttlab.reports.figures import BAR_METRICS, NINES_LABELS, NINES_TICKS, broker_colors, percentile_curve, seeds_apply  # noqa: E402


def write_pngs(comparison: Comparison, directory: Path, dpi: int = 150, per_scenario: bool = True) -> list[Path]:
    """The bar charts, the rate sweeps, seed 001's mean ± SD (for a seed's paper), seed 002's shark fins from captured
    runs and (with per_scenario) one latency plot per scenario."""
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
    for scenario in comparison.scenarios if per_scenario else ():
        path = _percentiles(comparison, scenario, directory / f"latency-{_file_name(scenario.scenario)}.png", dpi)
        if path is not None:
            written.append(path)
    path = _mean_sd(comparison, directory / "mean-sd.png", dpi) if seeds_apply(comparison) else None
    if path is not None:
        written.append(path)
    from mqttlab.reports.shark_fin import write_shark_fins

    written += write_shark_fins(comparison, directory, dpi)
    return written


def _file_name(label: str) -> str:
    # A scenario split by configuration is labelled `name [field=value, ...]`.
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")


def _mean_sd(comparison: Comparison, path: Path, dpi: int) -> Path | None:
    """As in seed 001: mean latency ± SD (see reports.paper for which SD), lower whiskers cut at 0
    (on a log axis at a tenth of the mean, _grouped_bars)."""
    from mqttlab.reports.paper import paper_sd

    brokers = comparison.brokers
    if not any(g.estimates["latency_mean"].mean is not None for s in comparison.scenarios for g in s.groups.values()):
        return None
    colors = broker_colors(comparison)
    width = 0.8 / max(1, len(brokers))
    labels = [s.scenario for s in comparison.scenarios]
    figure, axes = plt.subplots(figsize=(max(5.0, 0.6 * len(labels) * max(1, len(brokers)) + 2), 3.8))

    def mean_sd(group: BrokerGroup) -> tuple[float, float, float] | None:
        mean = group.estimates["latency_mean"].mean
        if mean is None:
            return None
        sd = paper_sd(group)[0] or 0.0
        return mean, min(sd, mean), sd

    _grouped_bars(axes, comparison, width, colors, mean_sd, error_kw={"linestyle": "--", "elinewidth": 1})
    axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
    axes.set_ylabel("latency (ms)")
    axes.set_title("Mean ± SD, as seeds 001 and 004 drew it (one-message runs: SD of run means; others: SD of samples)", fontsize=9)
    return _finish(figure, axes, path, dpi, grid="y")


def _finish(figure: Any, axes: Any, path: Path, dpi: int, grid: str) -> Path:
    """Every chart's legend and light grid (`grid`: "y" for bars, "both" for curves), then the
    file written and the figure closed (pyplot keeps every open figure in memory)."""
    axes.legend(fontsize=8)
    axes.grid(axis=grid, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


LOG_SPAN = 20.0  # bars whose heights span more than this factor are drawn on a log axis


def _grouped_bars(axes: Any, comparison: Comparison, width: float, colors: dict[str, str],
                  value: Callable[[BrokerGroup], tuple[float, float, float] | None], **style: Any) -> None:
    """One bar per scenario and broker, brokers side by side within a scenario: `value` gives a
    group's bar height and its whiskers below and above (None: no bar). Heights that span more
    than LOG_SPAN go on a log axis, so that a 0.02 ms value stays visible beside a 60 ms one, and
    are drawn there as points, not bars: a bar's length on a log axis starts at an arbitrary
    bottom and says nothing. Lower whiskers then stop at a tenth of the value (a log axis has no 0)."""
    bars = [bar for scenario in comparison.scenarios for group in scenario.groups.values()
            for bar in [value(group)] if bar is not None and bar[0] > 0]
    log = bool(bars) and max(b[0] for b in bars) / min(b[0] for b in bars) > LOG_SPAN
    if log:
        axes.set_yscale("log")
    brokers = comparison.brokers
    for index, broker in enumerate(brokers):
        xs: list[float] = []
        means: list[float] = []
        errors: list[list[float]] = [[], []]  # below, above
        for position, scenario in enumerate(comparison.scenarios):
            group = scenario.groups.get(broker)
            bar = value(group) if group is not None else None
            if bar is None:
                continue
            xs.append(position + (index - (len(brokers) - 1) / 2) * width)
            means.append(bar[0])
            errors[0].append(min(bar[1], 0.9 * bar[0]) if log else bar[1])
            errors[1].append(bar[2])
        if log:
            axes.errorbar(xs, means, yerr=errors, fmt="o", markersize=5, capsize=3, label=broker, color=colors[broker],
                          **{key: value for key, value in style.get("error_kw", {}).items() if key == "elinewidth"})
        else:
            axes.bar(xs, means, width, yerr=errors, capsize=3, label=broker, color=colors[broker], **style)


def _bars(comparison: Comparison, key: str, path: Path, dpi: int) -> Path | None:
    metric = METRIC_BY_KEY[key]
    scenarios = [s.scenario for s in comparison.scenarios]
    brokers = comparison.brokers
    if not any(g.estimates[key].mean is not None for s in comparison.scenarios for g in s.groups.values()):
        return None
    colors = broker_colors(comparison)
    width = 0.8 / max(1, len(brokers))
    figure, axes = plt.subplots(figsize=(max(5.0, 1.2 * len(scenarios) * max(1, len(brokers)) / 2 + 2), 3.6))

    def mean_ci(group: BrokerGroup) -> tuple[float, float, float] | None:
        estimate = group.estimates[key]
        if estimate.mean is None:
            return None
        # has_interval: low and high are set (mypy cannot narrow through the property)
        below = estimate.mean - estimate.low if estimate.has_interval else 0.0  # type: ignore[operator]
        above = estimate.high - estimate.mean if estimate.has_interval else 0.0  # type: ignore[operator]
        return estimate.mean, below, above

    _grouped_bars(axes, comparison, width, colors, mean_ci)
    axes.set_xticks(range(len(scenarios)), scenarios, rotation=30, ha="right", fontsize=8)
    axes.set_ylabel(f"{metric.title} ({metric.unit})")
    axes.set_title(f"{metric.title}: mean, {comparison.confidence:.0%} CI", fontsize=10)
    return _finish(figure, axes, path, dpi, grid="y")


def _percentiles(comparison: Comparison, scenario, path: Path, dpi: int) -> Path | None:
    colors = broker_colors(comparison)
    figure, axes = plt.subplots(figsize=(5.5, 3.6))
    drawn = False
    for broker, group in scenario.groups.items():
        curve = percentile_curve(group)
        if curve is None:
            continue
        _, nines, values = curve
        axes.plot(nines, values, label=broker, color=colors[broker])
        drawn = True
    if not drawn:
        plt.close(figure)
        return None
    axes.set_xticks(NINES_TICKS, NINES_LABELS)
    axes.set_xlabel("percentile")
    axes.set_ylabel("latency (ms)")
    axes.set_title(f"{scenario.scenario}: latency by percentile (repetitions pooled)", fontsize=10)
    return _finish(figure, axes, path, dpi, grid="both")


def _sweep(comparison: Comparison, rows: list[dict], path: Path, dpi: int) -> Path:
    """One shape's rate sweep, drawn by reports.sweep (which also gives the HTML report's)."""
    from mqttlab.reports.sweep import draw_sweep_png

    return draw_sweep_png(rows, path, dpi)
