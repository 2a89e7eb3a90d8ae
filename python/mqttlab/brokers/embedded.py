"""Entry point of the embedded rumqttd broker's child process:

    python -m mqttlab.brokers.embedded CONFIG.json

The broker is compiled into mqttlab's extension module; running it in a separate process keeps
its CPU and memory apart from the load generator's, so both can be measured."""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m mqttlab.brokers.embedded CONFIG.json", file=sys.stderr)
        return 2
    config_path = Path(argv[0])
    try:
        config_json = config_path.read_text()
    except OSError as exc:
        print(f"cannot read the broker config {config_path}: {exc}", file=sys.stderr)
        return 2
    try:
        from mqttlab._engine import serve_broker
    except ImportError as exc:
        print(f"the compiled engine is not installed ({exc}); build it with maturin", file=sys.stderr)
        return 3
    try:
        serve_broker(config_json)
    except KeyboardInterrupt:
        return 0
    except ValueError as exc:  # an invalid config is reported as one line, not a traceback
        print(f"invalid broker config {config_path}: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # the broker thread ended, e.g. a listener could not bind
        print(f"embedded rumqttd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
