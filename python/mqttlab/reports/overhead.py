"""Seed 002's overhead tables for a comparison: the bytes of CONNECT, CONNACK and DISCONNECT and of
the acknowledgements, the bytes a PUBLISH adds to its payload, what crossed an emulated link per
message, and message bundling where the run was captured.

The connection packets are not in any capture summary, and they need none: their size is that of
the packets the engine writes for the run's plan (its client id, keep-alive, credentials, protocol
version, and for MQTT 5 its properties), which the engine encodes (mqttlab.engine.packet_sizes).
The table says "computed" for those. A frame adds 66 bytes, as in the seed's Wireshark captures
(Ethernet 14 + IP 20 + TCP 32 with the timestamp option) — for a packet alone in its segment."""

from __future__ import annotations

from typing import Any, Optional

from mqttlab.analysis import Comparison
from mqttlab.engine import client_topic, expand_template, packet_sizes

Table = list[dict[str, Any]]
FRAME_HEADERS = 66  # Ethernet 14 + IPv4 20 + TCP 32 (20 + 12 bytes of timestamp option), as the seed counted
COMPUTED = "computed: the engine's encoding of the run's packet"


def connection_table(comparison: Comparison) -> Table:
    """Per distinct connection setting (client id length, version, credentials): CONNECT, CONNACK,
    DISCONNECT and the acknowledgements, MQTT bytes and frame bytes."""
    rows: Table = []
    seen: set[tuple[Any, ...]] = set()
    for scenario in comparison.scenarios:
        for group in scenario.groups.values():
            mqtt = group.runs[0].results.plan["mqtt"]
            client_id = expand_template(group.runs[0].results.plan["publishers"]["client_id"], 0)
            username, password = mqtt.get("username"), mqtt.get("password")
            key = (mqtt["version"], client_id, username is not None and len(username), password is not None and len(password),
                   bool(mqtt.get("session_expiry_s")))
            if key in seen:
                continue
            seen.add(key)
            v5 = mqtt["version"] == 5
            setting = f"MQTT {'5' if v5 else '3.1.1'}, client id {client_id!r} ({len(client_id)} B), keep-alive {mqtt['keepalive_s']}s"
            if username is not None:
                setting += ", with user name and password"
            sizes = packet_sizes(group.runs[0].results.plan)
            packets = [
                ("CONNECT", sizes["connect"], COMPUTED),
                ("CONNACK", None if v5 else sizes["connack"],
                 f"MQTT 5: {sizes['connack']} B plus the broker's properties (not known without a capture)" if v5 else COMPUTED),
                ("DISCONNECT", sizes["disconnect"], COMPUTED + " (reason 0, no properties)"),
                ("PUBACK / PUBREC / PUBREL / PUBCOMP", sizes["puback"], COMPUTED + " (each)"),
            ]
            for packet, size, source in packets:
                rows.append({"setting": setting, "packet": packet, "mqtt_bytes": size,
                             "frame_bytes": size + FRAME_HEADERS if size is not None else None, "source": source})
    return rows


def publish_table(comparison: Comparison) -> Table:
    """Per configuration: the run's topic, the PUBLISH overhead (bytes beyond the payload) at its
    QoS, computed; what the engine's clients wrote and read per message, measured; and, over an
    emulated link, packets and bytes per message as the link counted them."""
    rows: Table = []
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            run = group.runs[0]
            plan = run.results.plan
            qos = int(plan["publishers"]["qos"])
            topic = client_topic(plan["publishers"]["topic"], 0, plan["publishers"]["client_id"])
            sizes = packet_sizes(plan)
            payload, overhead = sizes["payload"], sizes["publish_overhead"]
            wire = ((run.results.summary.get("network") or {}).get("overhead") or {}).get("wire") or {}
            per_run = [_engine_bytes_per_message(r.results.summary) for r in group.runs]
            measured = [m for m in per_run if m is not None]
            rows.append({
                "scenario": scenario.scenario, "broker": broker, "qos": qos, "topic": topic,
                "topic_bytes": len(topic.encode()), "payload_bytes": payload,
                "publish_overhead_bytes": overhead,
                "publish_frame_overhead_bytes": overhead + FRAME_HEADERS if overhead is not None else None,
                "engine_mqtt_bytes_per_message": round(sum(measured) / len(measured), 1) if measured else None,
                "link_packets_per_message": wire.get("packets_per_message"),
                "link_frame_bytes_per_message": wire.get("frame_bytes_per_message"),
                "link_tcp_ip_overhead_bytes_per_message": wire.get("tcp_ip_overhead_bytes_per_message"),
            })  # fmt: skip
    return rows


def _engine_bytes_per_message(summary: dict[str, Any]) -> Optional[float]:
    """Everything the clients wrote and read (connects and subscriptions included) per message sent."""
    sent = (summary.get("messages") or {}).get("sent")
    traffic = summary.get("bytes") or {}
    if not sent or traffic.get("mqtt_in") is None:
        return None
    return (int(traffic["mqtt_in"]) + int(traffic.get("mqtt_out") or 0)) / sent


def bundling_table(comparison: Comparison) -> Table:
    """Message bundling (MQTT packets per TCP segment, by type and direction) of every captured run."""
    rows: Table = []
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            for index, run in enumerate(group.runs, start=1):
                capture = run.results.summary.get("capture") or {}
                if capture.get("error"):
                    rows.append({"scenario": scenario.scenario, "broker": broker, "repetition": index, "type": None,
                                 "note": f"not captured: {capture['error']}"})
                for row in capture.get("by_type") or []:
                    rows.append({"scenario": scenario.scenario, "broker": broker, "repetition": index, **row})
    return rows
