"""Entry point of the MQTT-SN gateway's child process:

    python -m mqttlab.brokers.gateway_main CONFIG.json

The gateway is compiled into mqttlab's extension module (crate mqttlab-gateway); like the
embedded broker it runs in a process of its own, so its CPU is not the load generator's."""

from __future__ import annotations

import signal
import sys
from pathlib import Path


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # Turned into the KeyboardInterrupt that serve_gateway answers by closing every session
    # (DISCONNECT to clients and broker) instead of dying mid-packet.
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m mqttlab.brokers.gateway_main CONFIG.json", file=sys.stderr)
        return 2
    config_path = Path(argv[0])
    try:
        config_json = config_path.read_text()
    except OSError as exc:
        print(f"cannot read the gateway config {config_path}: {exc}", file=sys.stderr)
        return 2
    try:
        from mqttlab._engine import serve_gateway
    except ImportError as exc:
        print(f"the compiled engine is not installed ({exc}); build it with maturin", file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        serve_gateway(config_json)
    except KeyboardInterrupt:
        return 0
    except ValueError as exc:  # an invalid config: one line naming the field, not a traceback
        print(f"invalid gateway config {config_path}: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # e.g. the UDP port could not be bound
        print(f"mqttlab gateway: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
