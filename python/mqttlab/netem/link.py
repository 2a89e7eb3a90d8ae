"""Entry point of the user-space emulated link's child process:

    python -m mqttlab.netem.link CONFIG.json

The forwarding runs in the compiled engine (crates/mqttlab-link); this process only hands it the
config and turns SIGTERM into the same clean stop as Ctrl-C, so the counters file is final."""

from __future__ import annotations

import signal
import sys
from pathlib import Path


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m mqttlab.netem.link CONFIG.json", file=sys.stderr)
        return 2
    try:
        config_json = Path(argv[0]).read_text()
    except OSError as error:
        print(f"cannot read the link config {argv[0]}: {error}", file=sys.stderr)
        return 2
    try:
        from mqttlab._engine import serve_link
    except ImportError as error:
        print(f"the compiled engine is not installed ({error}); build it with maturin", file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        serve_link(config_json)
    except KeyboardInterrupt:
        return 0
    except ValueError as error:
        print(f"invalid link config {argv[0]}: {error}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as error:
        print(f"emulated link: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
