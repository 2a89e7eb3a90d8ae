"""The interactive figures of a comparison (plotly): bars with confidence intervals per broker
and scenario, latency by percentile and as a CDF from the pooled histograms, and the per-second
throughput, CPU and memory of every run."""

from __future__ import annotations

import math
from typing import Any, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mqttlab.analysis import BrokerGroup, Comparison, ScenarioComparison
from mqttlab.analysis.runs import METRIC_BY_KEY, merit
from mqttlab.reports.paper import paper_sd

BAR_METRICS = ("throughput", "latency_p50", "latency_p99", "latency_max", "latency_mean", "loss", "broker_cpu", "broker_rss_peak",
               "broker_rss_mean")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
# Percentiles to read from a histogram: 0..90 evenly, then ever more nines up to 99.999.
NINES = [round(100 * (1 - 10 ** (-k / 10)), 6) for k in range(0, 51)]
#: the ticks of the percentile axis in nines, with their labels
NINES_TICKS = [0, 1, 2, 3, 4, 5]
NINES_LABELS = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]


def seeds_apply(comparison: Comparison) -> bool:
    """Whether the seeds' own statistics (seed 001's mean ± SD over runs) belong in the report:
    for a seed's paper only (given, or found from a seed's suite), never for a user's own runs,
    however often repeated."""
    return comparison.paper is not None


def log_ticks(values: list[float]) -> dict[str, Any]:
    """Tick values and labels at 1, 2 and 5 of every decade the values span, written out in
    full (plotly's own log ticks label the minor ones as bare digits: `3 4 5 … 1 2 3`)."""
    positive = [v for v in values if v > 0]
    if not positive:
        return {}
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    ticks = [m * 10.0 ** k for k in range(low, high + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if min(positive) / 2 <= t <= max(positive) * 2]
    return {"tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def broker_colors(comparison: Comparison) -> dict[str, str]:
    return {broker: PALETTE[index % len(PALETTE)] for index, broker in enumerate(comparison.brokers)}


def metric_bars(comparison: Comparison, key: str) -> go.Figure:
    """Mean per scenario (x) and broker (colour), error bars = the confidence interval,
    diamonds = best-of-N."""
    metric = METRIC_BY_KEY[key]
    colors = broker_colors(comparison)
    figure = go.Figure()
    for broker in comparison.brokers:
        x, means, plus, minus, best = [], [], [], [], []
        for scenario in comparison.scenarios:
            group = scenario.groups.get(broker)
            estimate = group.estimates[key] if group else None
            if estimate is None or estimate.mean is None:
                continue
            x.append(scenario.scenario)
            means.append(estimate.mean)
            # has_interval: low and high are set (mypy cannot narrow through the property)
            plus.append(estimate.high - estimate.mean if estimate.has_interval else 0.0)  # type: ignore[operator]
            minus.append(estimate.mean - estimate.low if estimate.has_interval else 0.0)  # type: ignore[operator]
            best.append(estimate.best)
        if not x:
            continue
        figure.add_bar(
            name=broker, x=x, y=means, marker_color=colors[broker], legendgroup=broker, offsetgroup=broker,
            error_y={"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "visible": True},
            hovertemplate=f"{broker}<br>%{{x}}<br>mean %{{y:.4g}} {metric.unit}<extra></extra>",
        )
        figure.add_scatter(
            name=f"{broker} best-of-N", x=x, y=best, mode="markers", legendgroup=broker, showlegend=False, offsetgroup=broker,
            marker={"symbol": "diamond", "color": "black", "size": 7},
            hovertemplate=f"{broker}<br>%{{x}}<br>best %{{y:.4g}} {metric.unit}<extra></extra>",
        )
    directions = {merit(metric, scenario.first_run.saturating) for scenario in comparison.scenarios}
    direction = ("higher is better" if directions == {True} else "lower is better" if directions == {False}
                 else "what the schedule offered less what went missing; higher is better only where the generator saturated")
    figure.update_layout(
        title=f"{metric.title} ({metric.unit}, {direction}); bars: mean, whiskers: {comparison.confidence:.0%} CI, ◆ best-of-N",
        barmode="group", scattermode="group", yaxis_title=metric.unit, height=420, margin={"t": 60, "l": 60, "r": 20, "b": 80},
    )
    return figure


def latency_distribution(comparison: Comparison, scenario: ScenarioComparison) -> Optional[go.Figure]:
    """Latency by percentile (x in nines) and as a CDF, per broker, from the pooled histograms."""
    colors = broker_colors(comparison)
    figure = make_subplots(rows=1, cols=2, subplot_titles=("latency by percentile", "CDF"))
    drawn = False
    every_value: list[float] = []
    for broker, group in scenario.groups.items():
        curve = percentile_curve(group)
        if curve is None:
            continue
        percentiles, nines, values = curve
        every_value += values
        common = {"name": broker, "legendgroup": broker, "line": {"color": colors[broker]}}
        figure.add_scatter(x=nines, y=values, customdata=percentiles, row=1, col=1, **common,
                           hovertemplate="p%{customdata}: %{y:.3f} ms<extra>" + broker + "</extra>")
        figure.add_scatter(x=values, y=[p / 100 for p in percentiles], row=1, col=2, showlegend=False, **common,
                           hovertemplate="%{x:.3f} ms: %{y:.5f}<extra>" + broker + "</extra>")
        drawn = True
    if not drawn:
        return None
    figure.update_xaxes(row=1, col=1, tickvals=NINES_TICKS, ticktext=NINES_LABELS, title="percentile")
    figure.update_yaxes(row=1, col=1, title="ms")
    figure.update_xaxes(row=1, col=2, title="ms", type="log", **log_ticks(every_value))
    figure.update_yaxes(row=1, col=2, title="fraction of messages", range=[0, 1.02])
    measure = next((g.latency_measure for g in scenario.groups.values() if g.latency_measure), "latency")
    figure.update_layout(title=f"{scenario.scenario}: {measure} latency, all repetitions pooled", height=400,
                         margin={"t": 70, "l": 60, "r": 20, "b": 50})
    return figure


def percentile_curve(group: BrokerGroup) -> Optional[tuple[list[float], list[float], list[float]]]:
    """(percentiles, the same in nines, latency in ms) read from the group's pooled histogram: the
    one curve both the interactive and the PNG figure draw."""
    if not group.pooled_histogram:
        return None
    from hdrh.histogram import HdrHistogram

    histogram = HdrHistogram.decode(group.pooled_histogram)
    if histogram.get_total_count() == 0:
        return None
    values = [histogram.get_value_at_percentile(p) / 1000.0 for p in NINES]
    return list(NINES), [nines(p) for p in NINES], values


def nines(percentile: float) -> float:
    """A percentile on the axis in nines (p90 = 1, p99 = 2, ...); p100, the maximum, which has
    no place on it, at the axis' end."""
    return -math.log10(1 - percentile / 100) if percentile < 100 else float(NINES_TICKS[-1])


def over_time(comparison: Comparison, scenario: ScenarioComparison) -> go.Figure:
    """Per-second delivered rate, broker CPU and broker RSS of every repetition (one line each)."""
    colors = broker_colors(comparison)
    figure = make_subplots(rows=1, cols=3, subplot_titles=("received msg/s", "broker CPU (cores)", "broker RSS (MB)"))
    # A measured window of a second or two has as many points: drawn as markers too (a line
    # through one point shows nothing) on an axis of at least 0..1 s.
    seconds = [row["t_s"] for group in scenario.groups.values() for run in group.runs for row in run.results.series
               if isinstance(row.get("t_s"), (int, float)) and row["t_s"] >= 0]
    few = len(set(seconds)) <= 3
    for broker, group in scenario.groups.items():
        for index, run in enumerate(group.runs):
            common = {"legendgroup": broker, "line": {"color": colors[broker], "width": 1.5}, "mode": "lines+markers" if few else "lines",
                      "name": broker, "showlegend": False}
            rate = per_second_rate(run)
            figure.add_scatter(x=[t for t, _ in rate], y=[v for _, v in rate], row=1, col=1,
                               **dict(common, showlegend=index == 0),
                               hovertemplate=f"{broker} rep {index + 1}<br>t=%{{x}} s: %{{y}}/s<extra></extra>")
            broker_rows = [row for row in run.results.resources if row.get("process") == "broker"]
            figure.add_scatter(x=[row["t_s"] for row in broker_rows], y=[row["cpu_share"] for row in broker_rows],
                               row=1, col=2, **common)
            figure.add_scatter(x=[row["t_s"] for row in broker_rows], y=[row["rss_bytes"] / 1e6 for row in broker_rows],
                               row=1, col=3, **common)
    # The faults of the runs (docs/faults.md), shaded where they were: the same in every
    # repetition up to a few ms, so each window is drawn once.
    windows = {(f["kind"], round(f["start_s"], 1), round(f["end_s"], 1))
               for group in scenario.groups.values() for run in group.runs
               for f in (run.results.summary.get("faults") or []) if f.get("applied")}
    for kind, start, end in sorted(windows, key=lambda w: w[1]):
        figure.add_vrect(x0=start, x1=max(end, start + 0.05), fillcolor="crimson", opacity=0.15, line_width=0, row="all", col="all")
        figure.add_annotation(x=start, y=1.0, yref="paper", text=kind, showarrow=False, xanchor="left", font={"size": 10, "color": "crimson"})
    figure.update_xaxes(title="s since the measured window began", **({"range": [-0.5, max([1.0, *seconds]) + 0.5]} if few else {}))
    figure.update_layout(title=f"{scenario.scenario}: over time, every repetition", height=360,
                         margin={"t": 70, "l": 60, "r": 20, "b": 50})
    return figure


def per_second_rate(run: Any) -> list[tuple[float, float]]:
    """(second, messages per second) of a run's series from the measured window on: received, else
    acknowledged, else sent. The run ends inside its last second, whose count is then only a part
    of one: where the load ended in it (measured_s) that part is known, and the count is scaled
    to a whole second when it covers half of one or more; otherwise the second is left out, so
    that no plot draws the clock running out as a cliff to 0."""
    measured = float(run.results.summary.get("measured_s") or 0.0)
    rows = [row for row in run.results.series if isinstance(row.get("t_s"), (int, float)) and row["t_s"] >= 0]
    points = [(float(row["t_s"]), float(row["received"] or row["acked"] or row["sent"] or 0)) for row in rows]
    if points:
        last, count = points.pop()
        covered = min(1.0, measured - last)
        if covered >= 0.5:
            points.append((last, count / covered))
    return points


def all_figures(comparison: Comparison) -> list[tuple[str, str, Any]]:
    """(section, id, figure) in report order."""
    figures: list[tuple[str, str, Any]] = []
    for key in BAR_METRICS:
        if any(g.estimates[key].mean is not None for s in comparison.scenarios for g in s.groups.values()):
            figures.append(("Brokers by scenario", f"bars-{key}", metric_bars(comparison, key)))
    seed001 = mean_sd_bars(comparison) if seeds_apply(comparison) else None
    if seed001 is not None:
        figures.append(("As in seed 001: mean ± SD", "paper-mean-sd", seed001))
    for index, scenario in enumerate(comparison.scenarios):
        distribution = latency_distribution(comparison, scenario)
        if distribution is not None:
            figures.append((f"Scenario {scenario.scenario}", f"latency-{index}", distribution))
        figures.append((f"Scenario {scenario.scenario}", f"time-{index}", over_time(comparison, scenario)))
    return figures


def mean_sd_bars(comparison: Comparison) -> Optional[go.Figure]:
    """Mean latency per scenario (x) and broker (colour), whiskers ± the seed-001 SD; a whisker
    that would reach below zero is drawn to zero, as the seed omitted it."""
    colors = broker_colors(comparison)
    figure = go.Figure()
    drawn = False
    for broker in comparison.brokers:
        x, means, up, down, kinds = [], [], [], [], []
        for scenario in comparison.scenarios:
            group = scenario.groups.get(broker)
            if group is None or group.estimates["latency_mean"].mean is None:
                continue
            mean = group.estimates["latency_mean"].mean
            sd, kind = paper_sd(group)
            x.append(scenario.scenario)
            means.append(mean)
            up.append(sd or 0.0)
            down.append(min(sd or 0.0, mean))
            kinds.append(f"{kind}, n={len(group.runs)} runs")
        if not x:
            continue
        drawn = True
        figure.add_bar(name=broker, x=x, y=means, marker_color=colors[broker], customdata=kinds,
                       error_y={"type": "data", "symmetric": False, "array": up, "arrayminus": down, "visible": True},
                       hovertemplate=f"{broker}<br>%{{x}}<br>mean %{{y:.4g}} ms ± SD (%{{customdata}})<extra></extra>")
    if not drawn:
        return None
    figure.update_layout(
        title="As in seed 001: mean latency (ms) ± standard deviation; one-message runs: SD of the per-run means, "
              "others: SD of the pooled samples",
        barmode="group", yaxis_title="ms", height=420, margin={"t": 60, "l": 60, "r": 20, "b": 80},
    )
    return figure
