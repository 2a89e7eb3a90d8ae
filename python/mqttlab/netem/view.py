"""The network part of the run summary: the link as asked and as measured, and the overhead tables."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Group, RenderableType
from rich.table import Table


def render_network(network: Mapping[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    link = Table(title=f"Network ({network.get('method')})", title_justify="left", header_style="bold")
    for column in ("direction", "delay", "jitter", "loss", "rate"):
        link.add_column(column, justify="right" if column != "direction" else "left")
    for name, d in (network.get("directions") or {}).items():
        rate = d.get("rate_bps")
        link.add_row(name, f"{d['delay_s'] * 1000:g} ms", f"± {d['jitter_s'] * 1000:g} ms", f"{d['loss'] * 100:g} %",
                     f"{rate / 1000:g} kbit/s" if rate else "unlimited")
    parts.append(link)
    probe = network.get("probe_before") or {}
    if probe:
        parts.append(_probe_table(probe))
    over = network.get("overhead") or {}
    if over:
        parts.append(_exchange_table(over))
        if over.get("wire"):
            parts.append(_wire_table(over))
    return Group(*parts)


def _probe_table(probe: Mapping[str, Any]) -> Table:
    table = Table(title="Link measured before the run (ICMP echo)", title_justify="left", header_style="bold")
    for column in ("sent", "received", "loss", "RTT min", "RTT median", "RTT max"):
        table.add_column(column, justify="right")
    fmt = lambda v: "–" if v is None else f"{v:.2f} ms"  # noqa: E731
    table.add_row(str(probe["sent"]), str(probe["received"]), f"{probe['loss'] * 100:.1f} %",
                  fmt(probe.get("rtt_min_ms")), fmt(probe.get("rtt_median_ms")), fmt(probe.get("rtt_max_ms")))
    return table


def _exchange_table(over: Mapping[str, Any]) -> Table:
    table = Table(
        title=f"MQTT bytes of one message at QoS {over['qos']} ({over['payload_bytes']} B payload, {over['topic_bytes']} B topic)",
        title_justify="left", header_style="bold",
        caption=f"sum {over['exchange_mqtt_bytes']} B, of which {over['exchange_overhead_bytes']} B beyond the two payload copies; "
                f"engine average incl. connects: {over.get('engine_mqtt_bytes_per_message')} B per message",
        caption_justify="left",
    )
    table.add_column("leg")
    table.add_column("packet")
    table.add_column("bytes", justify="right")
    for row in over["exchange"]:
        table.add_row(row["leg"], row["packet"], str(row["bytes"]))
    return table


def _wire_table(over: Mapping[str, Any]) -> Table:
    wire = over["wire"]
    table = Table(title="On the wire per message (link counters, both directions)", title_justify="left", header_style="bold")
    for column in ("packets", "IP bytes", "frame bytes", "TCP/IP overhead"):
        table.add_column(column, justify="right")
    table.add_row(f"{wire['packets_per_message']:.2f}", f"{wire['ip_bytes_per_message']:.1f}",
                  f"{wire['frame_bytes_per_message']:.1f}", f"{wire['tcp_ip_overhead_bytes_per_message']:.1f} B")
    return table


def render_bundling(capture: Mapping[str, Any]) -> RenderableType:
    """Message bundling from the run's capture (seed 002): MQTT packets per TCP segment."""
    directions = capture.get("directions") or {}
    totals = Table(title=f"Message bundling (tshark on {capture.get('device')}, port {capture.get('port')})",
                   title_justify="left", header_style="bold",
                   caption="up = clients → broker; segs: TCP segments; w. MQTT: those carrying MQTT; per seg: MQTT packets per such segment; bundled: segments "
                           "with more than one; retx: TCP retransmissions (not counted again)",
                   caption_justify="left")
    for column in ("dir", "segs", "w. MQTT", "bare ACK", "retx", "MQTT pkts", "per seg", "max", "bundled"):
        totals.add_column(column, justify="left" if column == "dir" else "right")
    for name, d in directions.items():
        per = d.get("packets_per_segment")
        totals.add_row(name, str(d["segments"]), str(d["segments_with_mqtt"]), str(d["bare_ack_segments"]),
                       str(d["retransmitted_segments"]), str(d["mqtt_packets"]), "–" if per is None else f"{per:.2f}",
                       str(d["max_packets_per_segment"]), str(d["bundled_segments"]))
    by_type = Table(title="MQTT packets per TCP segment by message type", title_justify="left", header_style="bold",
                    caption="shared: segments that also carry another message type (piggy-backed)", caption_justify="left")
    for column in ("direction", "type", "packets", "segments", "per segment", "max", "shared"):
        by_type.add_column(column, justify="left" if column in ("direction", "type") else "right")
    for row in capture.get("by_type") or []:
        by_type.add_row(row["direction"], row["type"], str(row["packets"]), str(row["segments"]),
                        f"{row['packets_per_segment']:.2f}", str(row["max_per_segment"]), str(row["shared_segments"]))
    return Group(totals, by_type)
