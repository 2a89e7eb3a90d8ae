"""Seed 002's figures for the runs that measured round trips: RTT by QoS × payload at full
bandwidth, RTT by bandwidth limit, RTT under packet loss, and latency over time under a limit or
loss (the seed's "shark fin").

Every point is one configuration on one broker (a group of the comparison: equal in everything but
the repetition): the mean over the repetitions of each run's mean RTT, its whisker the standard
deviation over those repetitions (points, not bars: the axis is logarithmic). The seed averaged its
send rates together ("verdichtete Daten"); we do not: each send rate is its own panel, and whatever
else differs between points of one panel (payload, limit, ...) is named in the legend."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mqttlab.analysis import BrokerGroup, Comparison
from mqttlab.analysis.configuration import Configuration, configuration, describe, differing_fields, scenario_value

Table = list[dict[str, Any]]
QOS_FIELDS = ("publishers.qos", "subscribers.qos")
QOS_COLORS = {0: "#1f77b4", 1: "#ff7f0e", 2: "#2ca02c"}
SHARK_FIN_NOTE = (
    "Per-second p50 (dotted) and maximum (solid) of the one-way latency publisher → echoing subscriber, "
    "every repetition drawn: the engine keeps per-second histograms of end-to-end latency, not of the round "
    "trip, so this is the seed's per-message RTT curve at one-second resolution and over half the path."
)


@dataclass
class RttPoint:
    scenario: str
    broker: str
    group: BrokerGroup
    config: Configuration
    row: dict[str, Any]


def rtt_points(comparison: Comparison) -> list[RttPoint]:
    """One point per group judged by its round trips."""
    points = []
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            if group.latency_measure != "rtt":
                continue
            data = group.runs[0].results.scenario
            estimate = group.estimates["latency_mean"]
            trips = [run.results.summary.get("round_trip") or {} for run in group.runs]
            row = {
                "scenario": scenario.scenario, "broker": broker, "runs": len(group.runs),
                "qos": scenario_value(data, "publishers.qos"),
                "payload_bytes": payload_bytes(data),
                "rate_per_publisher": scenario_value(data, "publishers.rate"),
                "limit_bytes_per_s": limit_bytes_per_s(data),
                "loss_percent": loss_percent(data),
                "delay": scenario_value(data, "network.delay"),
                "rtt_mean_ms": estimate.mean,
                "rtt_mean_sd_ms": estimate.stdev,
                "rtt_p50_ms": group.estimates["latency_p50"].mean,
                "rtt_p99_ms": group.estimates["latency_p99"].mean,
                "rtt_max_ms": group.estimates["latency_max"].mean,
                "round_trips_sent": sum(int(t.get("sent") or 0) for t in trips),
                "replies": sum(int(t.get("replies") or 0) for t in trips),
                "replies_lost": sum(int(t.get("lost") or 0) for t in trips),
            }  # fmt: skip
            points.append(RttPoint(scenario.scenario, broker, group, configuration(data), row))
    return points


def rtt_table(comparison: Comparison) -> Table:
    return [point.row for point in rtt_points(comparison)]


def payload_bytes(scenario: dict[str, Any]) -> Optional[float]:
    payload = scenario_value(scenario, "publishers.payload")
    if isinstance(payload, dict):
        return payload.get("size") if payload.get("dist") == "fixed" else payload.get("mean")
    return payload


def limit_bytes_per_s(scenario: dict[str, Any]) -> Optional[float]:
    rate = scenario_value(scenario, "network.rate")
    if rate is None:
        return None
    from mqttlab.scenario.network import parse_rate  # bits per second, from the scenario's own syntax

    return parse_rate(rate) / 8


def loss_percent(scenario: dict[str, Any]) -> Optional[float]:
    loss = scenario_value(scenario, "network.loss")
    if not loss:
        return None
    from mqttlab.scenario.network import parse_loss

    return 100.0 * parse_loss(loss)


def _bytes_text(value: float, per_second: bool = False) -> str:
    suffix = "/s" if per_second else ""
    for unit, size in (("MB", 1e6), ("KB", 1e3)):
        if value >= size:
            return f"{value / size:g} {unit}{suffix}"
    return f"{value:g} B{suffix}"


def _grouped_points(points: list[RttPoint], x_field: str, x_of: Callable[[dict[str, Any]], float], x_text: Callable[[float], str],
                  title: str, x_title: str) -> Optional[go.Figure]:
    """Mean RTT ± SD over the repetitions, side by side as grouped points (on a log axis, where a
    bar's length would start at an arbitrary bottom): x from `x_of`, colour by QoS, one panel per
    send rate; any other field that differs between the points is named in the trace."""
    if not points:
        return None
    rates = sorted({p.row["rate_per_publisher"] for p in points}, key=lambda r: (r is None, r))
    fields = [f for f in differing_fields(p.config for p in points)
              if f not in (x_field, "publishers.rate", *QOS_FIELDS) and not f.startswith(x_field + ".")]
    figure = make_subplots(rows=1, cols=len(rates), shared_yaxes=True,
                           subplot_titles=[f"{r:g} msg/s" if r is not None else "by message count" for r in rates])
    shown: set[str] = set()
    traces: dict[tuple[Any, ...], list[RttPoint]] = {}
    for point in points:
        traces.setdefault((point.row["qos"], point.broker, describe(point.config, fields), point.row["rate_per_publisher"]), []).append(point)
    for (qos, broker, other, rate), members in sorted(traces.items(), key=lambda item: tuple(str(v) for v in item[0])):
        members.sort(key=lambda p: x_of(p.row))
        name = f"QoS {qos} ({broker})" + (f", {other}" if other else "")
        figure.add_scatter(
            mode="markers", marker_size=9,
            x=[x_text(x_of(p.row)) for p in members], y=[p.row["rtt_mean_ms"] for p in members],
            error_y={"type": "data", "array": [p.row["rtt_mean_sd_ms"] or 0.0 for p in members], "visible": True},
            name=name, legendgroup=name, showlegend=name not in shown, marker_color=QOS_COLORS.get(qos), offsetgroup=name,
            customdata=[[p.row["runs"], p.row["rtt_p50_ms"], p.row["rtt_max_ms"]] for p in members],
            hovertemplate=f"{name}<br>%{{x}}: mean %{{y:.3f}} ms, p50 %{{customdata[1]:.3f}}, max %{{customdata[2]:.3f}} "
                          "(n=%{customdata[0]})<extra></extra>",
            row=1, col=rates.index(rate) + 1,
        )
        shown.add(name)
    from mqttlab.reports.figures import log_ticks

    figure.update_yaxes(type="log", title="RTT (ms), log scale", row=1, col=1,
                        **log_ticks([p.row["rtt_mean_ms"] for p in points if p.row["rtt_mean_ms"] is not None]))
    figure.update_xaxes(title=x_title, type="category")
    figure.update_layout(title=title, scattermode="group", height=420, margin={"t": 80, "l": 60, "r": 20, "b": 60})
    return figure


def _full_bandwidth(point: RttPoint) -> bool:
    return point.config.get("network") is None and not any(k.startswith("network.") for k in point.config)


def rtt_figures(comparison: Comparison) -> list[tuple[str, str, go.Figure]]:
    """(id, caption, figure) of seed 002's figures that these runs can draw."""
    points = rtt_points(comparison)
    out: list[tuple[str, str, Any]] = []
    full = [p for p in points if _full_bandwidth(p) and p.row["payload_bytes"] is not None]
    limited = [p for p in points if p.row["limit_bytes_per_s"] is not None and not p.row["loss_percent"]]
    lossy = [p for p in points if p.row["loss_percent"]]
    specs = (
        ("rtt-qos-payload", full, "publishers.payload", lambda r: r["payload_bytes"], _bytes_text,
         "As in seed 002: RTT by QoS level and payload, full bandwidth", "payload"),
        ("rtt-limit", limited, "network.rate", lambda r: r["limit_bytes_per_s"], lambda v: _bytes_text(v, True),
         "As in seed 002: RTT by QoS and bandwidth limit (tc)", "bandwidth limit"),
        ("rtt-loss", lossy, "network.loss", lambda r: r["loss_percent"], lambda v: f"{v:g} %",
         "As in seed 002: RTT by QoS under packet loss", "packet loss each way"),
    )
    for figure_id, members, field, x_of, x_text, title, x_title in specs:
        figure = _grouped_points(members, field, x_of, x_text, title, x_title)
        if figure is not None:
            out.append((figure_id, "Points: mean over the repetitions of each run's mean RTT (publisher → broker → echoing "
                        "subscriber → broker → publisher, on the publisher's clock), whiskers: SD over the repetitions; "
                        "one panel per send rate (the seed pooled its rates, we keep them apart).", figure))
    for figure_id, members, label in (("shark-fin-limit", limited, "bandwidth limit"), ("shark-fin-loss", lossy, "packet loss")):
        figure = shark_fin(members, label)
        if figure is not None:
            out.append((figure_id, SHARK_FIN_NOTE, figure))
    return out


def shark_fin(points: list[RttPoint], label: str) -> Optional[go.Figure]:
    """Latency over time (per second) under a limit or loss: one panel per QoS, one colour per
    configuration, every repetition drawn."""
    series = [(p, run) for p in points for run in p.group.runs if any(row.get("e2e_max_us") is not None for row in run.results.series)]
    if not series:
        return None
    qos_levels = sorted({p.row["qos"] for p, _ in series})
    fields = [f for f in differing_fields(p.config for p, _ in series) if f not in QOS_FIELDS]
    figure = make_subplots(rows=1, cols=len(qos_levels), shared_yaxes=True, subplot_titles=[f"QoS {q}" for q in qos_levels])
    from mqttlab.reports.figures import PALETTE, log_ticks

    colours: dict[str, str] = {}
    drawn: list[float] = []
    for point, run in series:
        name = f"{point.broker}" + (f", {describe(point.config, fields)}" if fields else "")
        first = name not in colours
        colour = colours.setdefault(name, PALETTE[len(colours) % len(PALETTE)])
        rows = [r for r in run.results.series if isinstance(r.get("t_s"), (int, float)) and r["t_s"] >= 0]
        t = [r["t_s"] for r in rows]
        drawn += [_ms(r.get(key)) for r in rows for key in ("e2e_max_us", "e2e_p50_us")]
        column = qos_levels.index(point.row["qos"]) + 1
        figure.add_scatter(x=t, y=[_ms(r.get("e2e_max_us")) for r in rows], mode="lines", name=name, legendgroup=name,
                           showlegend=first, line={"color": colour, "width": 1.5}, row=1, col=column,
                           hovertemplate=f"{name}<br>%{{x}} s: max %{{y:.1f}} ms<extra></extra>")
        figure.add_scatter(x=t, y=[_ms(r.get("e2e_p50_us")) for r in rows], mode="lines", name=name, legendgroup=name,
                           showlegend=False, line={"color": colour, "width": 1, "dash": "dot"}, row=1, col=column,
                           hovertemplate=f"{name}<br>%{{x}} s: p50 %{{y:.1f}} ms<extra></extra>")
    figure.update_yaxes(type="log", title="latency (ms), log scale", row=1, col=1, **log_ticks(drawn))
    figure.update_xaxes(title="s since the measured window began")
    figure.update_layout(title=f"As in seed 002 (\"shark fin\"): latency over time under {label}, per second", height=420,
                         margin={"t": 80, "l": 60, "r": 20, "b": 60})
    return figure


def _ms(value: Any) -> float:
    return value / 1000.0 if isinstance(value, (int, float)) else math.nan
