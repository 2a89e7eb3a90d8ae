"""Brokers the seeds measured that no registry reachable here offers in a form that installs.

They are listed by `mqttlab brokers list` with the exact reason, so that a user comparing brokers
sees them and knows how to include them anyway: run the broker elsewhere (a container, another
host) and give it by URL, naming it so the results say which broker it was."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqttlab.brokers.base import BrokerUnavailable, Launcher, Ports
from mqttlab.tls import TlsMaterial


@dataclass(frozen=True)
class Missing:
    name: str
    seeds: str
    #: what was tried in each reachable registry, and what it answered
    reason: str
    port: int = 1883

    def how_to_test(self) -> str:
        return (f"--broker 'mqtt://HOST:{self.port}?name={self.name}&container=CONTAINER' "
                f"(or &pid=PID) to measure one run elsewhere")


class UnavailableLauncher(Launcher):
    """A broker mqttlab knows by name but cannot install here; `find()` is always False."""

    tested_by_test_command = False
    has_tls = False  # nothing to say about a broker that cannot run here
    mqtt_versions = ()

    def __init__(self, missing: Missing) -> None:
        self.missing = missing
        self.name = missing.name
        self.source = "none reachable here"
        self.how_to_get = f"not in any registry reachable here ({missing.reason}); to test it anyway: {missing.how_to_test()}"

    def find(self) -> bool:
        return False

    def version(self) -> str | None:
        return None

    def install(self) -> None:
        raise BrokerUnavailable(f"{self.name} cannot be installed here: {self.how_to_get}")

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        raise BrokerUnavailable(f"{self.name} is not available here: {self.how_to_get}")
