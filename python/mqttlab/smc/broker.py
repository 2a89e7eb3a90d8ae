"""The broker an SMC step talks to: a launcher name (a fresh broker per replication unless told
otherwise) or a URL (an external broker, never started or stopped by us).

Fresh state per replication is what makes replications independent: retained sessions,
subscriptions and the allocator of a broker that ran the previous replication cannot leak into
the next one.

A launcher broker is configured as the step asks (`tuned`, `as-shipped`, or a config file; see
`Launcher.configure`), and the configuration is recorded with the results (`config_record`). A URL
broker's configuration is not ours to set; it is recorded as external.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path

from mqttlab.brokers import get_launcher
from mqttlab.brokers.base import RunningBroker
from mqttlab.scenario.fields import BrokerAddress, is_url

# The SMC clients (the engine's smc module) speak plain MQTT over TCP.
_PLAIN_SCHEMES = ("mqtt", "tcp")


def split_brokers(text: str) -> list[str]:
    """``mosquitto,rumqttd`` → two brokers; every name must be non-empty."""
    names = [part.strip() for part in text.split(",")]
    if not names or any(not n for n in names):
        raise ValueError(f"--broker: {text!r} must be one broker or a comma-separated list like mosquitto,rumqttd")
    for name in names:
        if is_url(name) and BrokerAddress.parse(name).scheme not in _PLAIN_SCHEMES:
            raise ValueError(f"--broker: {name!r}: the SMC clients speak plain MQTT only (mqtt://HOST:PORT)")
    return names


class BrokerSource:
    """Hands out a broker per replication; `fresh=False` starts one and keeps it."""

    def __init__(self, spec: str, workdir: Path, fresh: bool = True, config: str | None = None) -> None:
        self.spec = spec
        self.workdir = Path(workdir)
        self.is_url = is_url(spec)
        self.fresh = fresh and not self.is_url
        self.launcher = get_launcher(spec)  # UnknownBroker names the known ones
        if config is not None and not self.is_url:
            self.launcher.configure(config)
            self.launcher.check_config()  # a bad mode or file is refused before any broker starts
        self._kept: RunningBroker | None = None
        self._count = itertools.count()
        self.version: str | None = None

    def config_record(self) -> dict[str, object]:
        if self.is_url:
            return {"mode": "external", "note": "started and configured outside mqttlab"}
        return self.launcher.config_record()

    @property
    def label(self) -> str:
        return self.spec if self.is_url else self.launcher.name

    def _start(self) -> RunningBroker:
        broker = self.launcher.start(self.workdir / f"{self.label.replace('/', '_').replace(':', '_')}-{next(self._count)}")
        self.version = broker.version
        return broker

    @contextlib.contextmanager
    def replication(self) -> Iterator[RunningBroker]:
        if self.fresh:
            with self._start() as broker:
                yield broker
            return
        if self._kept is None or not self._kept.is_running():
            self._kept = self._start()
        yield self._kept

    def close(self) -> None:
        if self._kept is not None:
            self._kept.stop()
            self._kept = None

    def __enter__(self) -> BrokerSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
