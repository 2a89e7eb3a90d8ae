"""Protocol overhead of a run, in the manner of the seed-002 tables: MQTT bytes per message and per
QoS exchange, and bytes and packets on the wire per message from the link's counters.

Two sources on purpose: the per-exchange table holds the sizes of the packets the engine writes
for the run's own topic and payload (the engine encodes them: mqttlab.engine.packet_sizes), and
the engine's byte counters (everything its clients wrote and read, connects and subscriptions
included) are shown next to it as the measured average."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from mqttlab.engine import client_topic, effective_qos, packet_sizes

ETHERNET_HEADER = 14
ACKS = {0: [], 1: ["PUBACK"], 2: ["PUBREC", "PUBREL", "PUBCOMP"]}


def exchange_table(sizes: Mapping[str, int], qos: int) -> list[dict[str, Any]]:
    """Packets of one message's journey publisher → broker → subscriber at `qos`, with their
    sizes from `packet_sizes`."""
    rows = [{"leg": "publisher → broker", "packet": "PUBLISH", "bytes": sizes["publish"]}]
    rows += [{"leg": "publisher ⇄ broker", "packet": a, "bytes": sizes[a.lower()]} for a in ACKS[qos]]
    rows.append({"leg": "broker → subscriber", "packet": "PUBLISH", "bytes": sizes["publish"]})
    rows += [{"leg": "subscriber ⇄ broker", "packet": a, "bytes": sizes[a.lower()]} for a in ACKS[qos]]
    return rows


def delivered_sizes(plan: Mapping[str, Any]) -> dict[str, int]:
    """The packet sizes of a delivery at the QoS it gets (the lower of the two sides')."""
    return packet_sizes({**plan, "publishers": {**plan["publishers"], "qos": effective_qos(plan)}})


def overhead(plan: Mapping[str, Any], result: Mapping[str, Any], link: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The overhead figures of a run. `link` is the difference of the link counters across the
    run ({"up": {"packets", "ip_bytes"}, "down": {...}}), None when there was no emulated link."""
    counters = result.get("counters") or {}
    sent = int(counters.get("sent") or 0)
    qos = effective_qos(plan)
    sizes = delivered_sizes(plan)
    size = sizes["payload"]
    table = exchange_table(sizes, qos)
    topic_len = len(client_topic(plan["publishers"]["topic"], 0, plan["publishers"]["client_id"]).encode())
    mqtt_total = int(counters.get("mqtt_bytes_out") or 0) + int(counters.get("mqtt_bytes_in") or 0)
    # MQTT over WebSocket: the upgrade, frame headers and control frames, on the wire beside MQTT.
    websocket_total = int(counters.get("websocket_bytes_out") or 0) + int(counters.get("websocket_bytes_in") or 0)
    out: dict[str, Any] = {
        "messages_sent": sent,
        "deliveries": int(counters.get("received") or 0),
        "qos": qos,
        "payload_bytes": size,
        "topic_bytes": topic_len,
        "exchange": table,
        "exchange_mqtt_bytes": sum(r["bytes"] for r in table),
        "exchange_overhead_bytes": sum(r["bytes"] for r in table) - 2 * size,
        "engine_mqtt_bytes_per_message": round(mqtt_total / sent, 1) if sent else None,
    }
    if websocket_total:
        out["engine_websocket_bytes_per_message"] = round(websocket_total / sent, 1) if sent else None
    if link and sent:
        packets = sum(int(link[d]["packets"]) for d in ("up", "down"))
        ip_bytes = sum(int(link[d]["ip_bytes"]) for d in ("up", "down"))
        # Clients and broker are on opposite sides of the link: every MQTT (and WebSocket) byte the
        # engine wrote or read crossed it once, so the rest of what crossed is TCP/IP (and
        # retransmissions).
        out["wire"] = {
            "packets_per_message": round(packets / sent, 2),
            "ip_bytes_per_message": round(ip_bytes / sent, 1),
            "frame_bytes_per_message": round((ip_bytes + ETHERNET_HEADER * packets) / sent, 1),
            "tcp_ip_overhead_bytes_per_message": round((ip_bytes - mqtt_total - websocket_total) / sent, 1),
            "up_packets": int(link["up"]["packets"]),
            "down_packets": int(link["down"]["packets"]),
        }
    return out


def counter_difference(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    return {d: {k: int(after[d].get(k, 0)) - int(before[d].get(k, 0)) for k in after[d]} for d in ("up", "down")}
