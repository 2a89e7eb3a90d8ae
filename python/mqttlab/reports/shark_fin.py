"""Seed 002's "shark fin": each message's round trip against its send time, as the seed drew it
for a limited link (a queue that fills message by message and then drains). The engine keeps no
per-message times (histograms and per-second series only), so the points come from the run's
packet capture (analysis/captures.round_trips, or the figures a page's evidence keeps of it) and
the caption says so.

One PNG per configuration of the messages (QoS, payload, rate: the scenario name from `-qos`
on), one panel per link (the rest of the name: full bandwidth, each limit), stacked with the
time axis shared and each panel on its own RTT scale, titled in place of a legend. Every captured
repetition is a line of its own, and on each the peak of the measured load and the lowest round
trip after it are marked: their ratio is the fin's fall the paper file's rule judges
(analysis/captures.fin_fall)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import matplotlib

matplotlib.use("Agg")  # no display: figures are only written to files
import matplotlib.pyplot as plt  # noqa: E402

from mqttlab.analysis import Comparison  # noqa: E402
from mqttlab.analysis.captures import CaptureAnalysisError, RoundTrip, capture_info, fin_marks, round_trips  # noqa: E402

CAPTION = ("Each point is one message: its round trip from its intended send time (the payload's header) to its echo's "
           "arrival at the capture device ({devices}), from the run's packet capture; mqttlab's engine keeps no "
           "per-message times. One line per repetition; messages never echoed are not drawn (counted in each title). "
           "Shaded: the warm-up, left out of the fall. ▲ the highest round trip of the measured load, ▼ the lowest after it; "
           "fall = ▼ / ▲ (1: no fall). Each panel on its own scale.")
REPETITION_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")


def _split(label: str) -> tuple[str, str]:
    """('limit-100KBps', 'qos0-p10KB-r10') from 'limit-100KBps-qos0-p10KB-r10'; ('', name) without a QoS part."""
    found = re.search(r"-(qos\d.*)$", label)
    return (label[: found.start()], found.group(1)) if found else ("", label)


def _link(run: Any) -> str:
    """The link as the seed wrote its limits (KB/s, 1000 bytes per second), from the run's scenario."""
    from mqttlab.scenario.network import parse_rate

    network = run.results.scenario.get("network") or {}
    parts = []
    if network.get("rate"):
        kilobytes = parse_rate(network["rate"]) / 8000
        parts.append(f"limit {kilobytes / 1000:g} MB/s" if kilobytes >= 1000 else f"limit {kilobytes:g} KB/s")
    loss = network.get("loss")
    if loss:
        parts.append(f"loss {100 * loss:g} %" if isinstance(loss, (int, float)) else f"loss {loss}")
    return ", ".join(parts) or "full bandwidth"


def write_shark_fins(comparison: Comparison, directory: Path, dpi: int = 150) -> list[Path]:
    """The shark-fin PNGs of every captured configuration with echoed messages."""
    figures: dict[str, list[tuple[str, list[tuple[Any, list[RoundTrip]]]]]] = {}
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            runs = []
            for run in group.runs:
                try:
                    trips = round_trips(run.results.path)
                except CaptureAnalysisError:
                    continue
                if trips:
                    runs.append((run, trips))
            if runs:
                case, messages = _split(scenario.scenario)
                name = messages + (f" on {broker}" if len(scenario.groups) > 1 else "")
                figures.setdefault(name, []).append((case, runs))
    written = []
    for name, panels in figures.items():
        path = _draw(name, panels, directory / f"shark-fin-{re.sub(r'[^A-Za-z0-9._-]+', '_', name)}.png", dpi)
        if path is not None:
            written.append(path)
    return written


def _draw(name: str, panels: list[tuple[str, list[tuple[Any, list[RoundTrip]]]]], path: Path, dpi: int) -> Optional[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(len(panels), 1, figsize=(7.5, 2.3 * len(panels) + 1.4), sharex=True, squeeze=False)
    devices = []
    for axis, (case, runs) in zip(axes[:, 0], panels):
        echoed, falls = [], []
        for index, (run, trips) in enumerate(runs):
            color = REPETITION_COLORS[index % len(REPETITION_COLORS)]
            sent = (run.results.summary.get("messages") or {}).get("sent")
            label = run.results.path.name + (" (generator-limited: not judged)" if run.generator_limited else "")
            axis.plot([t.send_s for t in trips], [t.rtt_ms for t in trips], marker=".", markersize=2, linewidth=0.6, color=color,
                      label=label, linestyle=":" if run.generator_limited else "-")
            echoed.append((f"{len(trips)}/{sent}" if sent is not None else str(len(trips))) + ("*" if run.generator_limited else ""))
            marks = fin_marks(trips)
            if marks is not None:
                peak, low = marks
                axis.plot([peak.send_s], [peak.rtt_ms], marker="^", color=color, markersize=7, markeredgecolor="black", linestyle="none")
                axis.plot([low.send_s], [low.rtt_ms], marker="v", color=color, markersize=7, markeredgecolor="black", linestyle="none")
                falls.append((f"{low.rtt_ms / peak.rtt_ms:.2g}" if peak.rtt_ms > 0 else "–") + ("*" if run.generator_limited else ""))
            info = capture_info(run.results.path)
            if info.get("capture_dropped"):
                echoed[-1] += f" (capture lost {info['capture_dropped']} packets)"
            devices.append(str(info.get("device")))
        start = min(trip.send_s for _, trips in runs for trip in trips)
        axis.axvspan(min(0.0, start), 0.0, color="0.9", zorder=0)  # the warm-up, left out of the run's statistics
        axis.set_ylim(bottom=0)
        axis.set_ylabel("RTT (ms)")
        axis.grid(alpha=0.3)
        if len(runs) > 1:
            axis.legend(fontsize=7, loc="lower right", title="repetition", title_fontsize=7)
        title = f"{case + ': ' if case else ''}{_link(runs[0][0])}; echoed {', '.join(echoed)}"
        if falls:
            title += f"; fall {', '.join(falls)}"
        if any(run.generator_limited for run, _ in runs):
            title += " (* generator-limited)"
        axis.set_title(title, fontsize=8.5, loc="left")
    axes[-1, 0].set_xlabel("send time (s from the start of the measured load)")
    figure.suptitle(f"Round trip of each message over time (seed 002's shark fin): {name}", fontsize=10)
    figure.text(0.01, 0.005, CAPTION.format(devices=", ".join(dict.fromkeys(devices))), fontsize=6.5, wrap=True, va="bottom")
    figure.tight_layout(rect=(0, 0.09 + 0.02 / len(panels), 1, 1))
    figure.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(figure)
    return path
