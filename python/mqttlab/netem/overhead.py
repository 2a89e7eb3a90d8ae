"""Protocol overhead of a run, in the manner of the seed-002 tables: MQTT bytes per message and per
QoS exchange, and bytes and packets on the wire per message from the link's counters.

Two sources on purpose: the per-exchange table is computed exactly from the MQTT 3.1.1 encoding
of the run's own topic and payload, and the engine's byte counters (everything its clients wrote
and read, connects and subscriptions included) are shown next to it as the measured average."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from mqttlab.engine import client_topic, effective_qos

ETHERNET_HEADER = 14
ACK_PACKET = 4  # fixed header + remaining length 2 + packet id: PUBACK, PUBREC, PUBREL, PUBCOMP


def varint_len(n: int) -> int:
    """Bytes of MQTT's variable-length integer for `n` (a packet's remaining length)."""
    length = 1
    while n >= 128:
        n //= 128
        length += 1
    return length


def packet_bytes(remaining: int) -> int:
    """Size of an MQTT packet whose remaining length is `remaining`: the fixed header's byte, the
    length itself, the rest."""
    return 1 + varint_len(remaining) + remaining


def publish_bytes(topic_len: int, payload: int, qos: int, v5: bool = False) -> int:
    """Size of one PUBLISH packet on the wire (MQTT 3.1.1; v5 adds an empty property length)."""
    return packet_bytes(2 + topic_len + (2 if qos else 0) + payload + (1 if v5 else 0))


def exchange_table(topic_len: int, payload: int, qos: int, v5: bool = False) -> list[dict[str, Any]]:
    """Packets of one message's journey publisher → broker → subscriber at `qos`, with sizes."""
    publish = publish_bytes(topic_len, payload, qos, v5)
    rows = [{"leg": "publisher → broker", "packet": "PUBLISH", "bytes": publish}]
    acks = {0: [], 1: ["PUBACK"], 2: ["PUBREC", "PUBREL", "PUBCOMP"]}[qos]
    rows += [{"leg": "publisher ⇄ broker", "packet": a, "bytes": ACK_PACKET} for a in acks]
    rows.append({"leg": "broker → subscriber", "packet": "PUBLISH", "bytes": publish})
    rows += [{"leg": "subscriber ⇄ broker", "packet": a, "bytes": ACK_PACKET} for a in acks]
    return rows


def _topic_length(plan: Mapping[str, Any]) -> float:
    pubs = plan["publishers"]
    count = max(1, int(pubs["count"]))
    return sum(len(client_topic(pubs["topic"], i, pubs["client_id"]).encode()) for i in range(count)) / count


def overhead(plan: Mapping[str, Any], result: Mapping[str, Any], link: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The overhead figures of a run. `link` is the difference of the link counters across the
    run ({"up": {"packets", "ip_bytes"}, "down": {...}}), None when there was no emulated link."""
    counters = result.get("counters") or {}
    sent = int(counters.get("sent") or 0)
    pubs = plan["publishers"]
    qos = effective_qos(plan)
    payload = pubs["payload"]
    size = int(payload.get("size") or payload.get("mean") or payload.get("min") or 0)
    v5 = int(plan["mqtt"]["version"]) == 5
    topic_len = round(_topic_length(plan))
    table = exchange_table(topic_len, size, qos, v5)
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
