"""Source ports: how many connections one local address can open towards one broker address, and
which local addresses a crowd of connections is spread over.

The kernel gives each (source address, destination address and port) only its ephemeral port
range (`net.ipv4.ip_local_port_range`, often 28,232 ports); mqttlab binds each client to its source
address before connecting, and such a bind holds a port of that address whatever the destination,
so more connections than that need several source addresses. Towards a broker on loopback they
are free for the taking: all of 127.0.0.0/8 is this machine's."""

from __future__ import annotations

import math
from typing import Optional


def ephemeral_port_count() -> Optional[int]:
    """How many source ports the kernel hands out per (source address, destination)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as handle:
            low, high = (int(part) for part in handle.read().split())
        return high - low + 1
    except (OSError, ValueError):
        return None


def addresses_needed(connections: int, ephemeral_ports: int) -> int:
    """How many local source addresses `connections` to one broker address need."""
    return max(1, math.ceil(connections / max(1, ephemeral_ports)))


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def loopback_addresses(count: int) -> list[str]:
    """127.0.0.1, 127.0.0.2, ...: `count` of them (at most 254, more than 7 million ports)."""
    return [f"127.0.0.{k}" for k in range(1, min(count, 254) + 1)]


def spread_for_loopback(connections: int, broker_host: str) -> list[str]:
    """The source addresses one process spreads `connections` over towards `broker_host`: none
    (the kernel picks) when one address has ports enough or the broker is not on loopback (the
    run then fails on connect, saying so)."""
    ports = ephemeral_port_count()
    if ports is None or not is_loopback(broker_host):
        return []
    needed = addresses_needed(connections, ports)
    return loopback_addresses(needed) if needed > 1 else []
