"""Latency and loss against the publish rate, per protocol (MQTT, MQTT-SN) and broker: the
figures of seed 004, for any comparison whose runs sweep the rate or the protocol.

Runs are grouped by their *shape* (publishers → subscribers and the network link), which is what
stays fixed along a curve; each point is the mean over the repetitions at one rate. The shape is
read from each run's resolved scenario, so the grouping needs no knowledge of the suite's axes."""

from __future__ import annotations

from statistics import mean
from typing import Any, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mqttlab.analysis import Comparison

PROTOCOL_DASH = {"mqtt": "solid", "mqtt-sn": "dash"}


def _protocol(scenario: dict[str, Any]) -> str:
    transport = scenario.get("transport")
    if isinstance(transport, dict):
        return str(transport.get("kind") or "mqtt")
    return str(transport or "mqtt")


def _shape(scenario: dict[str, Any]) -> str:
    pubs, subs = scenario.get("publishers") or {}, scenario.get("subscribers") or {}
    network = scenario.get("network") or {}
    link = f", delay {network['delay']} each way" if network.get("delay") else (", emulated link" if network else "")
    return f"{pubs.get('count')} pub → {subs.get('count')} sub, QoS {pubs.get('qos')}{link}"


def sweep_table(comparison: Comparison) -> list[dict[str, Any]]:
    """One row per (shape, protocol, broker, rate): runs, mean latency p50/p99/mean (ms), mean
    loss (%), and the message counts summed over the runs. Empty when nothing is swept."""
    points: dict[tuple[str, str, str, float], list[Any]] = {}
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            for run in group.runs:
                data = run.results.scenario
                rate = (data.get("publishers") or {}).get("rate")
                if rate is None:
                    continue  # a run by message count has no rate to put on the axis
                points.setdefault((_shape(data), _protocol(data), broker, float(rate)), []).append(run)
    shapes: dict[str, set[tuple[str, float]]] = {}
    for shape, protocol, _, rate in points:
        shapes.setdefault(shape, set()).add((protocol, rate))
    swept = {s for s, seen in shapes.items() if len({p for p, _ in seen}) > 1 or len({r for _, r in seen}) > 1}
    rows = []
    for (shape, protocol, broker, rate), runs in sorted(points.items()):
        if shape not in swept:
            continue
        messages = [r.results.summary.get("messages") or {} for r in runs]
        rows.append({
            "shape": shape, "protocol": protocol, "broker": broker, "rate_per_publisher": rate, "runs": len(runs),
            "latency_p50_ms": _mean(r.figures.get("latency_p50") for r in runs),
            "latency_p99_ms": _mean(r.figures.get("latency_p99") for r in runs),
            "latency_mean_ms": _mean(r.figures.get("latency_mean") for r in runs),
            "loss_percent": _mean(r.figures.get("loss") for r in runs),
            "sent": sum(int(m.get("sent") or 0) for m in messages),
            "expected": sum(int(m.get("expected") or 0) for m in messages),
            "delivered": sum(int(m.get("delivered") or 0) for m in messages),
            "lost": sum(int(m.get("lost") or 0) for m in messages),
            "retransmitted": sum(int(m.get("retransmitted") or 0) for m in messages),
        })  # fmt: skip
    return rows


def _mean(values: Any) -> Optional[float]:
    present = [v for v in values if v is not None]
    return mean(present) if present else None


def sweep_figures(comparison: Comparison, rows: Optional[list[dict[str, Any]]] = None) -> list[tuple[str, go.Figure]]:
    """(shape, figure) per shape: latency p50 and loss against the rate (log axis), one line per
    protocol and broker (dashed = MQTT-SN)."""
    from mqttlab.reports.figures import PALETTE

    rows = sweep_table(comparison) if rows is None else rows
    figures = []
    for shape in dict.fromkeys(row["shape"] for row in rows):
        figure = make_subplots(rows=1, cols=2, subplot_titles=("end-to-end latency p50 (ms)", "loss (%)"))
        mine = [row for row in rows if row["shape"] == shape]
        # One colour per line (protocol × broker): with one broker the protocols must still differ.
        for index, (protocol, broker) in enumerate(dict.fromkeys((row["protocol"], row["broker"]) for row in mine)):
            line = sorted((row for row in mine if (row["protocol"], row["broker"]) == (protocol, broker)),
                          key=lambda row: row["rate_per_publisher"])
            x = [row["rate_per_publisher"] for row in line]
            style = {"color": PALETTE[index % len(PALETTE)], "dash": PROTOCOL_DASH.get(protocol, "dot")}
            name = f"{protocol} ({broker})"
            figure.add_scatter(x=x, y=[row["latency_p50_ms"] for row in line], name=name, legendgroup=name, mode="lines+markers",
                               line=style, row=1, col=1, hovertemplate=f"{name}<br>%{{x}} msg/s: %{{y:.2f}} ms<extra></extra>")
            figure.add_scatter(x=x, y=[row["loss_percent"] for row in line], name=name, legendgroup=name, mode="lines+markers",
                               line=style, row=1, col=2, showlegend=False,
                               hovertemplate=f"{name}<br>%{{x}} msg/s: %{{y:.3f}} %<extra></extra>")
        figure.update_xaxes(type="log", title="msg/s per publisher")
        figure.update_yaxes(rangemode="tozero")
        figure.update_layout(title=f"{shape}: latency and loss against rate", height=380, margin={"t": 70, "l": 60, "r": 20, "b": 50})
        figures.append((shape, figure))
    return figures
