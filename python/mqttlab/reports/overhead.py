"""Seed 002's overhead tables for a comparison: the bytes of CONNECT, CONNACK and DISCONNECT and of
the acknowledgements, the bytes a PUBLISH adds to its payload, what crossed an emulated link per
message, and message bundling where the run was captured.

The connection packets are not in any capture summary, and they need none: their size follows
from the MQTT encoding of what the engine sends (the run's client id, keep-alive, credentials,
protocol version, and for MQTT 5 its properties: Receive Maximum always, Session Expiry when set).
The table says "computed" for those. A frame adds 66 bytes, as in the seed's Wireshark captures
(Ethernet 14 + IP 20 + TCP 32 with the timestamp option) — for a packet alone in its segment."""

from __future__ import annotations

from typing import Any, Optional

from mqttlab.analysis import Comparison
from mqttlab.analysis.configuration import scenario_value
from mqttlab.engine import client_topic, expand_template
from mqttlab.netem.overhead import packet_bytes, publish_bytes, varint_len

Table = list[dict[str, Any]]
FRAME_HEADERS = 66  # Ethernet 14 + IPv4 20 + TCP 32 (20 + 12 bytes of timestamp option), as the seed counted
COMPUTED = "computed from the MQTT encoding of the engine's packet"


def connect_bytes(client_id: str, keepalive_s: int, version: int, username: Optional[str] = None,
                  password: Optional[str] = None, session_expiry_s: int = 0) -> int:
    """CONNECT as the engine writes it (no will). The keep-alive's value does not change the size
    (two bytes whatever it is); it is named in the table because the seed's figure depends on it."""
    del keepalive_s
    variable = 2 + 4 + 1 + 1 + 2  # protocol name "MQTT", level, flags, keep-alive
    if version == 5:
        properties = 3 + (5 if session_expiry_s else 0)  # Receive Maximum (+ Session Expiry Interval)
        variable += varint_len(properties) + properties
    payload = 2 + len(client_id.encode())
    if username is not None:
        payload += 2 + len(username.encode())
    if password is not None:
        payload += 2 + len(password.encode())
    return packet_bytes(variable + payload)


def connection_table(comparison: Comparison) -> Table:
    """Per distinct connection setting (client id length, version, credentials): CONNECT, CONNACK,
    DISCONNECT and the acknowledgements, MQTT bytes and frame bytes."""
    rows: Table = []
    seen: set[tuple[Any, ...]] = set()
    for scenario in comparison.scenarios:
        for group in scenario.groups.values():
            data = group.runs[0].results.scenario
            version = int(scenario_value(data, "mqtt.version", 3) or 3)
            client_id = expand_template(str(scenario_value(data, "publishers.client_id", "mqttlab-pub-%i")), 0)
            keepalive = scenario_value(data, "mqtt.keepalive")
            username, password = scenario_value(data, "mqtt.username"), scenario_value(data, "mqtt.password")
            expiry = 1 if str(scenario_value(data, "mqtt.session_expiry", "0s")) not in ("0s", "0", "0.0") else 0
            key = (version, client_id, username is not None and len(username), password is not None and len(password), expiry)
            if key in seen:
                continue
            seen.add(key)
            setting = f"MQTT {'5' if version == 5 else '3.1.1'}, client id {client_id!r} ({len(client_id)} B), keep-alive {keepalive}"
            if username is not None:
                setting += ", with user name and password"
            connect = connect_bytes(client_id, 0, version, username, password, expiry)
            packets = [
                ("CONNECT", connect, COMPUTED),
                ("CONNACK", 4 if version == 3 else None,
                 COMPUTED if version == 3 else "MQTT 5: 5 B plus the broker's properties (not known without a capture)"),
                ("DISCONNECT", 2, COMPUTED + " (reason 0, no properties: 2 B in MQTT 3.1.1 and 5)"),
                ("PUBACK / PUBREC / PUBREL / PUBCOMP", 4, COMPUTED + " (each)"),
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
            data = run.results.scenario
            qos = int(scenario_value(data, "publishers.qos", 0) or 0)
            topic = client_topic(str(scenario_value(data, "publishers.topic", "")), 0, str(scenario_value(data, "publishers.client_id", "mqttlab-pub-%i")))
            payload = scenario_value(data, "publishers.payload.size")
            v5 = int(scenario_value(data, "mqtt.version", 3) or 3) == 5
            overhead = publish_bytes(len(topic.encode()), int(payload), qos, v5) - int(payload) if payload is not None else None
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
