"""The child-process entry point shared by the components compiled into the engine module: the
embedded broker, the MQTT-SN gateway and the emulated link. Each runs in a process of its own, so
its CPU and memory are never the load generator's; this hands it its config and turns SIGTERM
into the same clean stop as Ctrl-C (sessions closed, counters written)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve_component(argv: list[str], *, module: str, what: str, serve: str) -> int:
    """Runs the engine's component `serve` (`broker`, `gateway`, `link`) until stopped; errors become one line and an
    exit code (2 bad config, 3 engine missing, 1 the component failed)."""
    if len(argv) != 1:
        print(f"usage: python -m {module} CONFIG.json", file=sys.stderr)
        return 2
    config_path = Path(argv[0])
    try:
        config_json = config_path.read_text()
    except OSError as exc:
        print(f"cannot read the {what} config {config_path}: {exc}", file=sys.stderr)
        return 2
    from mqttlab import engine

    try:
        engine.load_engine()
    except engine.EngineUnavailable as exc:
        print(f"the compiled engine is not installed ({exc}); run scripts/setup.sh", file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        engine.serve(serve, config_json)
    except KeyboardInterrupt:
        return 0
    except ValueError as exc:
        print(f"invalid {what} config {config_path}: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as exc:  # e.g. a port that cannot be bound
        print(f"{what}: {exc}", file=sys.stderr)
        return 1
    return 0
