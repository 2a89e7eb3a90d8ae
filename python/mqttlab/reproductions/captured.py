"""A paper figure measured from the packet captures of a suite's runs (`reproduce: {capture: ...}`
in a paper file): the bytes of one MQTT packet, the overhead of a PUBLISH exchange, the TCP ACKs
of a connection, the bytes a PUBLISH adds to its payload. The figures come from
analysis/captures.py; this module only picks, per configuration, the one a paper figure names.

Kinds (`capture:`), each over the runs of `scenario:` that were captured:
- `packet` (with `packet: CONNECT`, `layer: mqtt | frame`): the packet's size at the MQTT layer,
  or the bytes of a frame that carries it alone; with a dict-valued figure ({mqtt, mqtt_tcp}) both;
- `exchange`: per PUBLISH, {mqtt: acknowledgement bytes, mqtt_tcp: bytes of the frames that carry
  no PUBLISH byte (acknowledgements alone, bare TCP ACKs)};
- `connect_acks` / `disconnect_acks`: the bare TCP ACKs of a connection's set-up (after the
  CONNECT) or tear-down (after the DISCONNECT): {count, each, total} per connection, or the size;
- `publish_overhead`: PUBLISH bytes at the MQTT layer minus the run's payload size."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from statistics import mean
from typing import Any, Optional, Union

from mqttlab.analysis.captures import CaptureAnalysisError, measure
from mqttlab.analysis.configuration import scenario_value
from mqttlab.engine import client_topic, expand_template

CAPTURED = ("packet", "exchange", "connect_acks", "disconnect_acks", "publish_overhead")
PACKETS = ("CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP", "SUBSCRIBE", "SUBACK", "DISCONNECT")
SOURCE = "measured from the run's packet capture"
Value = Union[float, dict[str, Any], None]


@dataclass
class Captured:
    value: Value  # the mean over the configuration's captured runs (dicts: key by key)
    samples: list[float]  # per run, for a single number
    runs: int
    inputs: str  # what the capture showed, said where the figure differs from the paper's


@lru_cache(maxsize=128)
def _figures(directory: str) -> Optional[dict[str, Any]]:
    try:
        return measure(Path(directory))
    except CaptureAnalysisError:
        return None


def captured_value(kind: str, runs: list[Any], *, packet: Optional[str] = None, layer: str = "mqtt",
                   keys: Optional[list[str]] = None) -> Optional[Captured]:
    """The figure `kind` over `runs` (analysis.runs.Run of one configuration on one broker); None
    when none of them was captured. `keys` are the paper figure's own keys when it has several."""
    per_run: list[Value] = []
    lossy = 0
    for run in runs:
        figures = _figures(str(run.results.path))
        if figures is not None and figures.get("capture_dropped"):
            lossy += 1  # the kernel dropped packets before the capture saw them: its counts are short
        elif figures is not None:
            per_run.append(_one(kind, figures, run.results.scenario, packet, layer, keys))
    numbers = [float(v) for v in per_run if isinstance(v, (int, float))]
    tables = [v for v in per_run if isinstance(v, dict)]
    value: Value
    if numbers:
        value = mean(numbers)
    elif tables:
        value = {key: mean(t[key] for t in tables if t.get(key) is not None) for key in tables[0]
                 if any(t.get(key) is not None for t in tables)}
    else:
        return None
    used = len(numbers) or len(tables)
    what = f"{kind}" + (f" {packet}" if packet else "") + (f", {layer} layer" if kind == "packet" else "")
    what += _setting(kind, packet, runs[0].results.scenario)
    if kind == "exchange":
        what += _breakdown(runs)
    left_out = f"; {lossy} run{'s' * (lossy != 1)} left out, {'their captures' if lossy != 1 else 'its capture'} lost packets" if lossy else ""
    return Captured(value, numbers, used, f"{what}, {SOURCE} ({used} run{'s' * (used != 1)}{left_out})")


def _setting(kind: str, packet: Optional[str], scenario: dict[str, Any]) -> str:
    """What of the run's configuration sets the figure's size, said where it differs from the paper's."""
    if kind == "publish_overhead":
        topic = client_topic(str(scenario_value(scenario, "publishers.topic", "")), 0, str(scenario_value(scenario, "publishers.client_id", "")))
        return f" (topic {len(topic.encode())} B)"
    if packet == "CONNECT":
        client_id = expand_template(str(scenario_value(scenario, "publishers.client_id", "")), 0)
        return f" (publisher's client id {len(client_id.encode())} B)"
    return ""


def _breakdown(runs: list[Any]) -> str:
    """What an exchange's frames were, per PUBLISH (the first captured run): why its bytes differ."""
    for run in runs:
        figures = _figures(str(run.results.path))
        if figures is not None and len(figures["exchanges"]) == 1:
            row = figures["exchanges"][0]
            return (f"; per PUBLISH: {row['ack_frames_per_publish']:g} frames of acknowledgements, {row['bare_acks_per_publish']:g} "
                    f"bare TCP ACKs, {row['piggybacked_acks_per_publish']:g} acknowledgements riding with a PUBLISH")
    return ""


def _one(kind: str, figures: dict[str, Any], scenario: dict[str, Any], packet: Optional[str], layer: str,
         keys: Optional[list[str]]) -> Value:
    if kind == "packet":
        rows = [r for r in figures["packets"] if r["packet"].split(" QoS")[0] == packet]
        if not rows:
            return None
        row = max(rows, key=lambda r: r["packets"])
        both = {"mqtt": row["mqtt_bytes"], "mqtt_tcp": row["frame_bytes_alone"]}
        if keys and set(keys) <= set(both):
            return {k: both[k] for k in keys}
        return row["frame_bytes_alone"] if layer == "frame" else row["mqtt_bytes"]
    if kind == "exchange":
        rows = figures["exchanges"]
        if len(rows) != 1:
            return None  # no PUBLISH, or several QoS levels in one run: not one exchange's figure
        return {"mqtt": rows[0]["ack_mqtt_bytes_per_publish"], "mqtt_tcp": rows[0]["overhead_frame_bytes_per_publish"]}
    if kind in ("connect_acks", "disconnect_acks"):
        acks = [row[f"{kind.split('_')[0]}_tcp_acks"] for row in figures["connections"]]
        sizes = [size for each in acks for size in each]
        if not acks or not sizes:
            return None
        count = len(sizes) / len(acks)
        each = max(set(sizes), key=sizes.count)
        both = {"count": count, "each": each, "total": sum(sizes) / len(acks)}
        return {k: both[k] for k in keys if k in both} if keys else each
    if kind == "publish_overhead":
        payload = scenario_value(scenario, "publishers.payload.size")
        rows = [r for r in figures["packets"] if r["packet"].startswith("PUBLISH") and r["direction"] == "up"]
        if payload is None or not rows:
            return None
        return max(rows, key=lambda r: r["packets"])["mqtt_bytes"] - int(payload)
    raise ValueError(f"unknown capture figure {kind!r}")
