"""Latency and loss against the publish rate, per protocol (MQTT, MQTT-SN) and broker: the
figures of seed 004, for any comparison whose runs sweep the rate or the protocol.

A line joins the runs whose whole configuration is equal except the rate per publisher (the axis)
and the protocol (its own line); each point is the mean over the repetitions at one rate, with the
standard deviation over those repetitions as seed 004 drew it. Lines are gathered into one figure
per *shape* (publishers -> subscribers, QoS, link) and, where lines of a shape differ in anything
else (payload, bandwidth limit, loss, ...), their legend says in what. Everything is read from each
run's resolved scenario, so the grouping needs no knowledge of the suite's axes."""

from __future__ import annotations

from statistics import mean, stdev
from typing import Any, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mqttlab.analysis import Comparison
from mqttlab.analysis.configuration import configuration, configuration_key, describe, differing_fields

PROTOCOL_DASH = {"mqtt": "solid", "mqtt-sn": "dash"}
#: the MQTT-SN gateway goes with the protocol: MQTT runs have none, so it must not split them
#: from the MQTT-SN runs they are compared with (seed 004 runs MQTT-SN on RSMB)
SWEPT = ("publishers.rate", "transport.kind", "transport.gateway")


def _protocol(scenario: dict[str, Any]) -> str:
    """mqtt, mqtt-sn (through mqttlab's gateway), or mqtt-sn (GATEWAY) for another gateway."""
    transport = scenario.get("transport")
    if not isinstance(transport, dict):
        return str(transport or "mqtt")
    kind = str(transport.get("kind") or "mqtt")
    gateway = transport.get("gateway") or "mqttlab"
    return f"{kind} ({gateway})" if kind == "mqtt-sn" and gateway != "mqttlab" else kind


def _shape(scenario: dict[str, Any]) -> str:
    pubs, subs = scenario.get("publishers") or {}, scenario.get("subscribers") or {}
    network = scenario.get("network") or {}
    link = f", delay {network['delay']} each way" if network.get("delay") else (", emulated link" if network else "")
    return f"{pubs.get('count')} pub → {subs.get('count')} sub, QoS {pubs.get('qos')}{link}"


def sweep_table(comparison: Comparison) -> list[dict[str, Any]]:
    """One row per (line, protocol, broker, rate): runs, mean latency p50/p99/mean (ms) with the
    standard deviation over the repetitions of p50 and mean, mean loss (%) with its standard
    deviation, and the message counts summed over the runs. Empty when nothing is swept."""
    points: dict[tuple[str, str, str, float], list[Any]] = {}
    families: dict[str, dict[str, Any]] = {}  # configuration key without the swept fields -> its fields
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            for run in group.runs:
                data = run.results.scenario
                rate = (data.get("publishers") or {}).get("rate")
                if rate is None:
                    continue  # a run by message count has no rate to put on the axis
                key = configuration_key(data, SWEPT)
                families.setdefault(key, {"config": configuration(data, SWEPT), "shape": _shape(data), "seen": set()})
                families[key]["seen"].add((_protocol(data), float(rate)))
                points.setdefault((key, _protocol(data), broker, float(rate)), []).append(run)
    swept = {key for key, family in families.items()
             if len({p for p, _ in family["seen"]}) > 1 or len({r for _, r in family["seen"]}) > 1}
    lines: dict[str, str] = {}
    for shape in dict.fromkeys(family["shape"] for family in families.values()):
        members = [key for key in swept if families[key]["shape"] == shape]
        fields = differing_fields(families[key]["config"] for key in members)
        for key in members:
            lines[key] = describe(families[key]["config"], fields)
    rows = []
    for (key, protocol, broker, rate), runs in sorted(points.items(), key=lambda item: (families[item[0][0]]["shape"], lines.get(item[0][0], ""), *item[0][1:])):
        if key not in swept:
            continue
        messages = [r.results.summary.get("messages") or {} for r in runs]
        rows.append({
            "shape": families[key]["shape"], "line": lines[key], "protocol": protocol, "broker": broker,
            "rate_per_publisher": rate, "runs": len(runs),
            "latency_p50_ms": _mean(r.figures.get("latency_p50") for r in runs),
            "latency_p50_sd_ms": _sd(r.figures.get("latency_p50") for r in runs),
            "latency_p99_ms": _mean(r.figures.get("latency_p99") for r in runs),
            "latency_mean_ms": _mean(r.figures.get("latency_mean") for r in runs),
            "latency_mean_sd_ms": _sd(r.figures.get("latency_mean") for r in runs),
            "loss_percent": _mean(r.figures.get("loss") for r in runs),
            "loss_sd_percent": _sd(r.figures.get("loss") for r in runs),
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


def _sd(values: Any) -> Optional[float]:
    """Sample standard deviation over the repetitions; None below two (no spread to show)."""
    present = [v for v in values if v is not None]
    return stdev(present) if len(present) > 1 else None


def line_name(row: dict[str, Any]) -> str:
    return f"{row['protocol']} ({row['broker']})" + (f", {row['line']}" if row["line"] else "")


def line_keys(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return list(dict.fromkeys((row["line"], row["protocol"], row["broker"]) for row in rows))


def sweep_figures(comparison: Comparison, rows: Optional[list[dict[str, Any]]] = None) -> list[tuple[str, go.Figure]]:
    """(shape, figure) per shape: against the rate (log axis), our latency p50, the mean latency as
    in seed 004, and loss, each ± the standard deviation over the repetitions; one line per
    configuration, protocol and broker (dashed = MQTT-SN)."""
    from mqttlab.reports.figures import PALETTE, log_ticks

    rows = sweep_table(comparison) if rows is None else rows
    figures = []
    panels = (("latency_p50_ms", "latency_p50_sd_ms", "latency p50 ± SD (ms), ours"),
              ("latency_mean_ms", "latency_mean_sd_ms", "mean latency ± SD (ms), as in seed 004"),
              ("loss_percent", "loss_sd_percent", "loss ± SD (%)"))
    for shape in dict.fromkeys(row["shape"] for row in rows):
        figure = make_subplots(rows=1, cols=3, subplot_titles=[title for _, _, title in panels])
        mine = [row for row in rows if row["shape"] == shape]
        # One colour per line: with one broker the protocols (and configurations) must still differ.
        for index, key in enumerate(line_keys(mine)):
            line = sorted((row for row in mine if (row["line"], row["protocol"], row["broker"]) == key),
                          key=lambda row: row["rate_per_publisher"])
            x = [row["rate_per_publisher"] for row in line]
            style = {"color": PALETTE[index % len(PALETTE)], "dash": PROTOCOL_DASH.get(key[1], "dot")}
            name = line_name(line[0])
            for column, (value, spread, _) in enumerate(panels, start=1):
                figure.add_scatter(
                    x=x, y=[row[value] for row in line], name=name, legendgroup=name, mode="lines+markers", line=style,
                    error_y={"type": "data", "array": [row[spread] or 0.0 for row in line], "visible": True},
                    customdata=[row["runs"] for row in line], row=1, col=column, showlegend=column == 1,
                    hovertemplate=f"{name}<br>%{{x}} msg/s: %{{y:.3f}} (n=%{{customdata}})<extra></extra>",
                )
        figure.update_xaxes(type="log", title="msg/s per publisher", **log_ticks([row["rate_per_publisher"] for row in mine]))
        figure.update_yaxes(rangemode="tozero")
        figure.update_layout(title=f"{shape}: latency and loss against rate", height=400, margin={"t": 70, "l": 60, "r": 20, "b": 50})
        figures.append((shape, figure))
    return figures
