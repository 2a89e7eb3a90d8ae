"""mqttlab: a laboratory for the performance of MQTT brokers.

From Python (a notebook, a script): `mqttlab.run(scenario, broker=..., set={...})` runs a
scenario as `mqttlab run` does and returns a `RunResult` (summary, histograms, pandas views);
see docs/python.md."""

from typing import Any

from mqttlab._version import VERSION as __version__

__all__ = ["RunFailed", "RunResult", "__version__", "run"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `mqttlab --version` and the CLI's help need none of the run path.
    if name in ("run", "RunResult", "RunFailed"):
        from mqttlab import session

        return getattr(session, name)
    raise AttributeError(f"module 'mqttlab' has no attribute {name!r}")
