"""A paper figure measured from the packet captures of a suite's runs (`reproduce: {capture: ...}`
in a paper file): the bytes of one MQTT packet, the overhead of a PUBLISH exchange, the TCP ACKs
of a connection, the bytes a PUBLISH adds to its payload. The figures come from
analysis/captures.py; this module only picks, per configuration, the one a paper figure names.

Kinds (`capture:`), each over the runs of `scenario:` that were captured:
- `packet` (with `packet: CONNECT`, `layer: mqtt | frame`): the packet's size at the MQTT layer,
  or the bytes of a frame that carries it alone; with a dict-valued figure ({mqtt, mqtt_tcp}) both
  (CONNECT, CONNACK and DISCONNECT read from each connection's own exchange);
- `exchange`: per PUBLISH, {mqtt: acknowledgement bytes, mqtt_tcp: bytes of the frames that carry
  no PUBLISH byte (acknowledgements alone, bare TCP ACKs)};
- `connect_acks`: the bare TCP ACKs of a connection's set-up (after the CONNECT): {count, each,
  total} per connection (a run without any counts 0), or the size;
- `disconnect_acks`: the bytes of the broker's segment that acknowledges the DISCONNECT, a bare
  ACK or the broker's FIN (which of the two, connection by connection, is said beside it);
- `publish_overhead`: PUBLISH bytes at the MQTT layer minus the run's payload size;
- `bundled` (with `packet:` and `direction: up | down`): the most packets of that type the run's
  captures saw in one TCP segment in that direction (1: never bundled);
- `shared` (the same): how many segments carrying that packet type also carried another packet
  (a PUBREL riding behind a PUBLISH), per run;
- `fin`: the shark fin's fall, per run (analysis/captures.fin_fall): the lowest round trip after
  the highest, as a share of the highest, over the messages sent during the measured load
  (warm-up left out); 1 when the highest is the last echo (no fall), near 0 when the round trip
  collapses after its peak.

Every figure is read through analysis/captures.capture_figures: from the run's capture, or from
the figures a page's evidence keeps of it, which are the same numbers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from statistics import mean
from typing import Any, Optional, Union

from mqttlab.analysis.captures import CaptureAnalysisError, capture_figures, fin_fall, trips_from_rows
from mqttlab.analysis.configuration import scenario_value
from mqttlab.engine import client_topic, expand_template

CAPTURED = ("packet", "exchange", "connect_acks", "disconnect_acks", "publish_overhead", "fin", "bundled", "shared")
PACKETS = ("CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP", "SUBSCRIBE", "SUBACK", "DISCONNECT")
SOURCE = "measured from the run's packet capture"
# Who sends each packet that only one side sends (MQTT 3.1.1, section 3): a row of one in the other
# direction is tshark's dissector reading payload bytes as packets after losing its place in a
# stream (seen under a rate limit: thousands of 2-byte packets of the reserved type 0, a "CONNACK"
# of 111 bytes from the client), and is left out.
SENT_BY = {"CONNECT": "up", "SUBSCRIBE": "up", "UNSUBSCRIBE": "up", "PINGREQ": "up", "DISCONNECT": "up",
           "CONNACK": "down", "SUBACK": "down", "UNSUBACK": "down", "PINGRESP": "down"}
# Figures of time, not of bytes: a run flagged generator-limited is left out of them, as of every
# latency figure (the bytes a capture saw do not depend on whether the schedule was kept).
TIMED = ("fin",)
Value = Union[float, dict[str, Any], None]


@dataclass
class Captured:
    value: Value  # the mean over the configuration's captured runs (dicts: key by key)
    samples: list[float]  # per run, for a single number
    runs: int
    inputs: str  # what the capture showed, said where the figure differs from the paper's


@lru_cache(maxsize=128)
def _figures(directory: str) -> Optional[dict[str, Any]]:
    """The run's capture figures (analysis/captures.capture_figures), None when it was not captured."""
    try:
        return capture_figures(Path(directory))
    except CaptureAnalysisError:
        return None


def captured_value(kind: str, runs: list[Any], *, packet: Optional[str] = None, layer: str = "mqtt",
                   keys: Optional[list[str]] = None, direction: Optional[str] = None) -> Optional[Captured]:
    """The figure `kind` over `runs` (analysis.runs.Run of one configuration on one broker); None
    when none of them was captured. `keys` are the paper figure's own keys when it has several."""
    per_run: list[Value] = []
    used_runs: list[dict[str, Any]] = []
    lossy = limited = 0
    for run in runs:
        data = _figures(str(run.results.path))
        if data is not None and kind in TIMED and run.generator_limited:
            limited += 1  # its round trips carry the generator's lag: no verdict rests on them
        elif data is not None and data["figures"].get("capture_dropped"):
            lossy += 1  # the kernel dropped packets before the capture saw them: its counts are short
        elif data is not None:
            per_run.append(_one(kind, data, run.results.scenario, packet, layer, keys, direction))
            used_runs.append(data)
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
    what = f"{kind}" + (f" {packet}" if packet else "") + (f", {layer} layer" if kind == "packet" else "") + (f", {direction}" if direction else "")
    what += _setting(kind, packet, runs[0].results.scenario)
    if kind == "exchange":
        what += _breakdown(used_runs)
    elif kind in ("connect_acks", "disconnect_acks"):
        what += _acks_seen(kind, used_runs)
    elif kind == "fin":
        what += "; per run " + ", ".join(f"{v:g}" for v in numbers)
    left_out = f"; {lossy} run{'s' * (lossy != 1)} left out, {'their captures' if lossy != 1 else 'its capture'} lost packets" if lossy else ""
    if limited:
        left_out += f"; {limited} run{'s' * (limited != 1)} flagged generator-limited left out"
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


def _breakdown(runs: list[dict[str, Any]]) -> str:
    """What an exchange's frames were per PUBLISH, the mean over the runs the figure is of: why its bytes differ."""
    rows = [data["figures"]["exchanges"][0] for data in runs if len(data["figures"]["exchanges"]) == 1]
    if not rows:
        return ""

    def per_publish(key: str) -> str:
        return f"{mean(row[key] for row in rows):.4g}"

    return (f"; per PUBLISH, the mean of {len(rows)} run{'s' * (len(rows) != 1)}: {per_publish('ack_frames_per_publish')} frames of "
            f"acknowledgements, {per_publish('bare_acks_per_publish')} bare TCP ACKs, {per_publish('piggybacked_acks_per_publish')} "
            "acknowledgements riding with a PUBLISH")


def _acks_seen(kind: str, runs: list[dict[str, Any]]) -> str:
    """How many connections and runs showed what the figure counts: a figure that holds only in
    some runs says so."""
    connections = [row for data in runs for row in data["figures"]["connections"]]
    if kind == "connect_acks":
        counts = Counter(len(row["connect_tcp_acks"]) for row in connections)
        return "; bare TCP ACKs after the CONNECT per connection: " + ", ".join(
            f"{count} on {n} of {len(connections)}" for count, n in sorted(counts.items()))
    answers = [row.get("disconnect_ack") for row in connections]
    bare = sum(1 for a in answers if a and a["bare"])
    fin = sum(1 for a in answers if a and not a["bare"])
    runs_bare = sum(1 for data in runs if any((row.get("disconnect_ack") or {}).get("bare") for row in data["figures"]["connections"]))
    return (f"; the DISCONNECT acknowledged by a bare TCP ACK on {bare} of {len(connections)} connections "
            f"({runs_bare} of {len(runs)} runs), by the broker's FIN on {fin}"
            + (f", not in the capture on {len(answers) - bare - fin}" if len(answers) - bare - fin else ""))


# The packets that open and close a connection, read from each connection's own exchange (the
# CONNECT, the CONNACK that answers it, the DISCONNECT: analysis/captures.connection_table), not
# from every packet the dissector typed so. After a retransmitted segment the dissector can lose a
# stream's framing and read bytes of a large PUBLISH's payload as packets: one limited run's 10 KB
# payloads gave three "CONNACK"s of 111 B beside the two real ones of 4 B.
CONNECTION_PACKETS = {"CONNECT": "connect", "CONNACK": "connack", "DISCONNECT": "disconnect"}


def _connection_packet(connections: list[dict[str, Any]], prefix: str, layer: str, keys: Optional[list[str]]) -> Value:
    """The most common size over the run's connections: at the MQTT layer, and of a frame that
    carries the packet alone (None when no connection's frame did)."""

    def common(field: str) -> Optional[int]:
        sizes = [row[field] for row in connections if row.get(field) is not None]
        return Counter(sizes).most_common(1)[0][0] if sizes else None

    both = {"mqtt": common(f"{prefix}_mqtt_bytes"), "mqtt_tcp": common(f"{prefix}_frame_bytes")}
    if both["mqtt"] is None:
        return None
    if keys and set(keys) <= set(both):
        return {k: both[k] for k in keys}
    return both["mqtt_tcp"] if layer == "frame" else both["mqtt"]


def _one(kind: str, data: dict[str, Any], scenario: dict[str, Any], packet: Optional[str], layer: str,
         keys: Optional[list[str]], direction: Optional[str] = None) -> Value:
    figures = data["figures"]
    if kind in ("bundled", "shared"):
        rows = [r for r in figures["bundling"]["by_type"] if r["type"] == packet and r["direction"] == direction]
        if not rows:
            return None
        return rows[0]["max_per_segment"] if kind == "bundled" else rows[0]["shared_segments"]
    if kind == "fin":
        return fin_fall(trips_from_rows(data["round_trips"])) if data.get("round_trips") else None
    if kind == "packet" and packet in CONNECTION_PACKETS:
        return _connection_packet(figures["connections"], CONNECTION_PACKETS[packet], layer, keys)
    if kind == "packet":
        rows = [r for r in figures["packets"] if r["packet"].split(" QoS")[0] == packet
                and r["direction"] == SENT_BY.get(str(packet), r["direction"])]
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
    if kind == "connect_acks":
        acks = [row["connect_tcp_acks"] for row in figures["connections"]]
        if not acks:
            return None
        sizes = [size for each in acks for size in each]
        # A run without one counts, with none: leaving it out would report the ACKs as always there.
        both = {"count": len(sizes) / len(acks), "each": max(set(sizes), key=sizes.count) if sizes else None,
                "total": sum(sizes) / len(acks)}
        return {k: both[k] for k in keys if k in both} if keys else both["each"]
    if kind == "disconnect_acks":
        sizes = [row["disconnect_ack"]["frame_bytes"] for row in figures["connections"] if row.get("disconnect_ack")]
        return max(set(sizes), key=sizes.count) if sizes else None
    if kind == "publish_overhead":
        payload = scenario_value(scenario, "publishers.payload.size")
        rows = [r for r in figures["packets"] if r["packet"].startswith("PUBLISH") and r["direction"] == "up"]
        if payload is None or not rows:
            return None
        return max(rows, key=lambda r: r["packets"])["mqtt_bytes"] - int(payload)
    raise ValueError(f"unknown capture figure {kind!r}")
