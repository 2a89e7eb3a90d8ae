"""Latency and loss against the publish rate, per protocol (MQTT, MQTT-SN) and broker: the
figures of seed 004, for any comparison whose runs sweep the rate or the protocol.

A line joins the runs whose whole configuration is equal except the rate per publisher (the axis)
and the protocol (its own line); each point is the mean over the repetitions at one rate, with the
standard deviation over those repetitions as seed 004 drew it. Lines are gathered into one figure
per *shape* (publishers -> subscribers, QoS, link) and, where lines of a shape differ in anything
else (payload, bandwidth limit, loss, ...), their legend says in what, in the reader's words
(`10 KB`, `limit 100 KB/s`) rather than the scenario's field names. Everything is read from each
run's resolved scenario, so the grouping needs no knowledge of the suite's axes.

Drawn (`sweep_figures` for the HTML report, `draw_sweep_png` for pages): the median and the mean
latency, each on a log axis when the lines span more than a factor of LOG_SPAN (so that lines at
0.3 and 4 ms both show their steps), and loss only where some run lost something (a panel of
zeros says nothing the caption cannot); the legend under the panels, never over a line."""

from __future__ import annotations

import json
import math
from pathlib import Path
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
# A panel whose values span more than this factor gets a log axis: seed 002's 0.3 ms lines stay
# apart beside its 4 ms ones (a factor of 14), which a linear axis squeezes into one.
LOG_SPAN = 5.0
#: the panels: (value, its SD over the repetitions, axis title)
PANELS = (("latency_p50_ms", "latency_p50_sd_ms", "median latency ± SD (ms)"),
          ("latency_mean_ms", "latency_mean_sd_ms", "mean latency ± SD (ms)"),
          ("loss_percent", "loss_sd_percent", "loss ± SD (%)"))
#: fields named first in a line's label and in the order of the lines
LEADING = ("publishers.payload.size", "network.rate", "network.loss")
#: how a field that tells lines apart is written in a legend; the others as `field=value`
MEASURE_WORDS = {"header": None, "topic-sequence": "timed by topic and sequence"}


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
    order: dict[str, tuple[Any, ...]] = {}  # lines in the order of what tells them apart: 1 B, 100 B, 1 KB, 1500 B, ...
    for shape in dict.fromkeys(family["shape"] for family in families.values()):
        members = [key for key in swept if families[key]["shape"] == shape]
        fields = sorted(differing_fields(families[key]["config"] for key in members), key=lambda f: f not in LEADING)
        for key in members:
            lines[key] = line_label(families[key]["config"], fields)
            order[key] = tuple(_sort_key(families[key]["config"].get(field)) for field in fields)
    rows = []
    for (key, protocol, broker, rate), runs in sorted(points.items(), key=lambda item: (families[item[0][0]]["shape"], order.get(item[0][0], ()),
                                                                                          lines.get(item[0][0], ""), *item[0][1:])):
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


def line_label(config: dict[str, Any], fields: list[str]) -> str:
    """What tells a line apart from the others of its figure, as a reader says it: `1 B, timed by
    topic and sequence`, `10 KB, limit 100 KB/s`; fields without words of their own as
    `field=value` (analysis.configuration.describe)."""
    parts = []
    for field in fields:
        if field not in config:
            continue
        value = config[field]
        if field == "publishers.payload.size" and isinstance(value, (int, float)):
            parts.append(_bytes(float(value)))
        elif field == "publishers.measure" and value in MEASURE_WORDS:
            if MEASURE_WORDS[value]:
                parts.append(str(MEASURE_WORDS[value]))
        elif field == "network.rate" and value:
            from mqttlab.scenario.network import parse_rate

            parts.append(f"limit {_bytes(parse_rate(value) / 8)}/s")
        elif field == "network.loss" and isinstance(value, (int, float)):
            parts.append(f"loss {100 * value:g} %")
        else:
            parts.append(describe(config, [field]))
    return ", ".join(parts)


def _sort_key(value: Any) -> tuple[int, Any]:
    # Numbers by value (1500 B before 10 KB), anything else by its text after them.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value))
    return (1, json.dumps(value, sort_keys=True, default=str))


def _bytes(size: float) -> str:
    """1 B, 1500 B, 10 KB, 1 MB: as the seeds name sizes (1000 bytes a KB)."""
    for unit, factor in (("MB", 1e6), ("KB", 1e3)):
        if size >= factor and (size / factor).is_integer():
            return f"{size / factor:g} {unit}"
    return f"{size:g} B"


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


def shown_panels(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The panels worth drawing for these rows: loss only where a run lost something."""
    lossy = any((row["loss_percent"] or 0) > 0 for row in rows)
    return [panel for panel in PANELS if panel[0] != "loss_percent" or lossy]


def log_axis(rows: list[dict[str, Any]], value: str) -> bool:
    """Whether a panel's values span more than LOG_SPAN (all above zero): then a log axis."""
    values = [row[value] for row in rows if row[value] is not None]
    return bool(values) and min(values) > 0 and max(values) / min(values) > LOG_SPAN


def _names(rows: list[dict[str, Any]]) -> tuple[dict[tuple[str, str, str], str], str]:
    """Each line's legend entry, and what every line shares (said once, in the title): with one
    protocol on one broker the entries name only what tells the lines apart."""
    keys = line_keys(rows)
    pairs = {(protocol, broker) for _, protocol, broker in keys}
    if len(pairs) == 1 and all(line for line, _, _ in keys):
        protocol, broker = next(iter(pairs))
        return {key: key[0] for key in keys}, f"{protocol} on {broker}"
    return {key: line_name({"line": key[0], "protocol": key[1], "broker": key[2]}) for key in keys}, ""


def _caption(rows: list[dict[str, Any]]) -> str:
    lossy = any((row["loss_percent"] or 0) > 0 for row in rows)
    runs = sorted({int(row["runs"]) for row in rows})
    n = str(runs[0]) if len(runs) == 1 else f"{runs[0]}–{runs[-1]}"
    dashed = any(str(row["protocol"]).startswith("mqtt-sn") for row in rows)
    return (f"Each point: the mean over n = {n} repetitions at one rate, ± the SD over them. "
            + ("" if lossy else "No run lost a message (loss not drawn). ") + ("Dashed: MQTT-SN." if dashed else "")).strip()


def sweep_figures(comparison: Comparison, rows: Optional[list[dict[str, Any]]] = None) -> list[tuple[str, go.Figure]]:
    """(shape, figure) per shape: against the rate (log axis), our median and mean latency and
    loss (shown_panels), each ± the standard deviation over the repetitions; one line per
    configuration, protocol and broker (dashed = MQTT-SN)."""
    from mqttlab.reports.figures import PALETTE, log_ticks

    rows = sweep_table(comparison) if rows is None else rows
    figures = []
    for shape in dict.fromkeys(row["shape"] for row in rows):
        mine = [row for row in rows if row["shape"] == shape]
        panels = shown_panels(mine)
        names, shared = _names(mine)
        figure = make_subplots(rows=1, cols=len(panels), subplot_titles=[title for _, _, title in panels])
        # One colour per line: with one broker the protocols (and configurations) must still differ.
        for index, key in enumerate(line_keys(mine)):
            line = sorted((row for row in mine if (row["line"], row["protocol"], row["broker"]) == key),
                          key=lambda row: row["rate_per_publisher"])
            x = [row["rate_per_publisher"] for row in line]
            style = {"color": PALETTE[index % len(PALETTE)], "dash": PROTOCOL_DASH.get(key[1], "dot")}
            name = names[key]
            for column, (value, spread, _) in enumerate(panels, start=1):
                figure.add_scatter(
                    x=x, y=[row[value] for row in line], name=name, legendgroup=name, mode="lines+markers", line=style,
                    error_y={"type": "data", "array": [row[spread] or 0.0 for row in line], "visible": True},
                    customdata=[row["runs"] for row in line], row=1, col=column, showlegend=column == 1,
                    hovertemplate=f"{name}<br>%{{x}} msg/s: %{{y:.3f}} (n=%{{customdata}})<extra></extra>",
                )
        figure.update_xaxes(type="log", title="msg/s per publisher", **log_ticks([row["rate_per_publisher"] for row in mine]))
        for column, (value, _, _) in enumerate(panels, start=1):
            if log_axis(mine, value):
                figure.update_yaxes(type="log", row=1, col=column, **log_ticks([row[value] for row in mine if row[value]]))
            else:
                figure.update_yaxes(rangemode="tozero", row=1, col=column)
        figure.update_layout(title=f"{shape}{', ' + shared if shared else ''}: latency and loss against rate<br><sup>{_caption(mine)}</sup>", height=460,
                             margin={"t": 90, "l": 60, "r": 20, "b": 50},
                             legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0})
        figures.append((shape, figure))
    return figures


def draw_sweep_png(rows: list[dict[str, Any]], path: Path, dpi: int = 150) -> Path:
    """One shape's rows as a PNG (matplotlib): the panels of shown_panels side by side, each
    against the rate on a log axis, a latency panel on a log axis where its lines span more than
    LOG_SPAN; the legend under the panels, in as many columns as fit."""
    import matplotlib

    matplotlib.use("Agg")  # no display: figures are only written to files
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    from mqttlab.reports.figures import PALETTE

    panels = shown_panels(rows)
    keys = line_keys(rows)
    names, shared = _names(rows)
    columns = min(len(keys), 4 if max((len(name) for name in names.values()), default=0) < 40 else 2) or 1
    legend_rows = -(-len(keys) // columns)
    figure = plt.figure(figsize=(4.6 * len(panels) + 0.6, 3.6 + 0.22 * legend_rows), layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    handles = []
    for index, key in enumerate(keys):
        line = sorted((row for row in rows if (row["line"], row["protocol"], row["broker"]) == key), key=lambda row: row["rate_per_publisher"])
        x = [row["rate_per_publisher"] for row in line]
        style = {"color": PALETTE[index % len(PALETTE)], "linestyle": "--" if key[1].startswith("mqtt-sn") else "-", "marker": "o",
                 "markersize": 4, "capsize": 3, "label": names[key]}
        for axis, (value, spread, _) in zip(axes, panels):
            drawn = axis.errorbar(x, [math.nan if row[value] is None else row[value] for row in line],
                                  yerr=[row[spread] or 0.0 for row in line], **style)
        handles.append(drawn)
    rates = sorted({row["rate_per_publisher"] for row in rows})
    for axis, (value, _, title) in zip(axes, panels):
        axis.set_xscale("log")
        axis.xaxis.set_major_locator(FixedLocator(rates))
        axis.xaxis.set_minor_locator(NullLocator())
        axis.set_xticklabels([f"{rate:g}" for rate in rates])
        axis.set_xlim(rates[0] / 1.6, rates[-1] * 1.6)
        axis.set_xlabel("msg/s per publisher", fontsize=8)
        axis.set_title(title, fontsize=9)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3, which="both")
        if log_axis(rows, value):
            axis.set_yscale("log")
            shown = [row[value] for row in rows if row[value]]
            # Ticks at 1, 2, 3 and 5 of each decade inside the axis, written out (0.5, 2), never as 5×10⁻¹.
            low, high = min(shown) / 1.3, max(shown) * 1.3
            axis.set_ylim(low, high)
            ticks = [m * 10.0 ** k for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1) for m in (1, 2, 3, 5)]
            ticks = [t for t in ticks if low <= t <= high]
            axis.yaxis.set_major_locator(FixedLocator(ticks))
            axis.yaxis.set_minor_locator(NullLocator())
            axis.set_yticklabels([f"{t:g}" for t in ticks])
        else:
            axis.set_ylim(bottom=0)
    figure.suptitle(f"{rows[0]['shape']}{', ' + shared if shared else ''}: latency and loss against rate\n{_caption(rows)}", fontsize=9)
    figure.legend(handles=handles, loc="outside lower center", ncol=columns, fontsize=7, frameon=False)
    figure.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(figure)
    return path
