"""rumqttd, compiled into mqttlab's extension module: the default broker of `mqttlab run`.

It runs in its own process (`python -m mqttlab.brokers.embedded CONFIG.json`) with a config that
is rumqttd 0.20's `Config` as JSON: an MQTT 3.1.1 listener, an MQTT 5 listener on a second port,
and a TLS (3.1.1) listener when asked."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from mqttlab.brokers.base import Launcher, Ports
from mqttlab.tls import TlsMaterial

RUMQTTD_VERSION = "rumqttd 0.20.0"

# rumqttd's shipped config (rumqttd.toml): 100 in flight, 20 kB payloads, about 10 000 connections.
SHIPPED_CONNECTION_LIMITS = {
    "connection_timeout_ms": 60000,
    "max_payload_size": 20480,
    "max_inflight_count": 100,
    "auth": None,
    "dynamic_filters": True,
}
SHIPPED_ROUTER_LIMITS = {
    "max_connections": 10010,
    "max_outgoing_packet_count": 200,
    "max_segment_size": 100 * 1024 * 1024,
    "max_segment_count": 10,
    "custom_segment": None,
    "initialized_filters": None,
}
# Those limits would cap a benchmark before the broker itself does (`tuned_settings` says how).
CONNECTION_LIMITS = {**SHIPPED_CONNECTION_LIMITS, "max_payload_size": 4 * 1024 * 1024, "max_inflight_count": 65535}
ROUTER_LIMITS = {**SHIPPED_ROUTER_LIMITS, "max_connections": 50000, "max_outgoing_packet_count": 10000}


def _server(name: str, port: int, tls: TlsMaterial | None = None, host: str = "127.0.0.1",
            limits: dict[str, Any] = CONNECTION_LIMITS) -> dict[str, Any]:
    return {
        "name": name,
        "listen": f"{host}:{port}",
        # capath stays unset: with it rumqttd would ask clients for certificates.
        "tls": None if tls is None else {"certpath": str(tls.cert_file), "keypath": str(tls.key_file)},
        "next_connection_delay_ms": 0,
        "connections": dict(limits),
    }


def rumqttd_config(ports: Ports, tls: TlsMaterial | None, host: str = "127.0.0.1", tuned: bool = True) -> dict[str, Any]:
    """The JSON form of rumqttd's `Config` for these ports, with the benchmark limits or rumqttd's own."""
    limits = CONNECTION_LIMITS if tuned else SHIPPED_CONNECTION_LIMITS
    v4 = {"1": _server("v4-plain", ports.plain, host=host, limits=limits)}
    if tls is not None and ports.tls is not None:
        v4["2"] = _server("v4-tls", ports.tls, tls, host=host, limits=limits)
    return {
        "id": 0,
        "router": dict(ROUTER_LIMITS if tuned else SHIPPED_ROUTER_LIMITS),
        "v4": v4,
        "v5": {"1": _server("v5-plain", ports.extra[0], host=host, limits=limits)},
        "ws": None,
        "cluster": None,
        "console": None,
        "bridge": None,
        "prometheus": None,
        "metrics": None,
    }


class RumqttdLauncher(Launcher):
    name = "rumqttd"
    memory_only = True
    persistence_refusal = "rumqttd keeps its sessions and retained messages in memory only (it has no persistence setting)"
    how_to_get = "built into mqttlab's engine: install mqttlab (maturin develop / pip install .)"
    extra_ports = 1  # the MQTT 5 listener
    source = "crates.io rumqttd, compiled into mqttlab's engine"
    install_time = "none (built with mqttlab)"
    mqtt_versions = ("3.1.1", "5")
    accepts_config_file = False
    tuned_settings = (
        ("max_payload_size 4 MiB", "the shipped 20 kB refuses larger benchmark payloads"),
        ("max_inflight_count 65535", "the shipped 100 caps QoS 1/2 throughput per client"),
        ("max_connections 50000", "room for large connection counts (shipped: 10010)"),
        ("max_outgoing_packet_count 10000", "the shipped 200 makes the router hold deliveries back under load"),
    )

    def find(self) -> bool:
        try:
            return importlib.util.find_spec("mqttlab._engine") is not None
        except (ImportError, ValueError):
            return False

    def version(self) -> str | None:
        return RUMQTTD_VERSION

    def install(self) -> None:
        # Nothing to fetch: it ships inside the extension module.
        return None

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        config = workdir / "rumqttd.json"
        config.write_text(json.dumps(rumqttd_config(ports, tls, self.placement.listen_host, self.config.tuned), indent=2))
        return [sys.executable, "-m", "mqttlab.brokers.embedded", str(config)]

    def environment(self) -> dict[str, str] | None:
        import os

        env = dict(os.environ)
        # The child must import the same mqttlab as we do, also from a source tree.
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        return env

    def v5_port(self, ports: Ports) -> int | None:
        return ports.extra[0]
