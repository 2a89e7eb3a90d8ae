"""Brokers under test: launchers that find or install a broker, start it on free loopback ports
(plain and TLS), wait until it serves MQTT, record its version and stop it; and external brokers
that join by URL.

    launcher = get_launcher("mosquitto")
    with launcher.start(workdir, tls=True) as broker:
        broker.url(tls=True)
"""

from __future__ import annotations

from collections.abc import Callable

from mqttlab.brokers.base import (
    Availability,
    BrokerError,
    BrokerStartError,
    BrokerUnavailable,
    Launcher,
    RunningBroker,
)


class UnknownBroker(KeyError):
    """No launcher has this name; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else "unknown broker"


def _mosquitto() -> Launcher:
    from mqttlab.brokers.mosquitto import MosquittoLauncher

    return MosquittoLauncher()


def _rumqttd() -> Launcher:
    from mqttlab.brokers.rumqttd import RumqttdLauncher

    return RumqttdLauncher()


def _rmqtt() -> Launcher:
    from mqttlab.brokers.rmqtt import RmqttLauncher

    return RmqttLauncher()


def _aedes() -> Launcher:
    from mqttlab.brokers.aedes import AedesLauncher

    return AedesLauncher()


def _amqtt() -> Launcher:
    from mqttlab.brokers.amqtt import AmqttLauncher

    return AmqttLauncher()


def _moquette() -> Launcher:
    from mqttlab.brokers.moquette import MoquetteLauncher

    return MoquetteLauncher()


def _external() -> Launcher:
    from mqttlab.brokers.external import ExternalLauncher

    return ExternalLauncher()


_LAUNCHERS: dict[str, Callable[[], Launcher]] = {
    "rumqttd": _rumqttd,
    "mosquitto": _mosquitto,
    "rmqtt": _rmqtt,
    "aedes": _aedes,
    "amqtt": _amqtt,
    "moquette": _moquette,
    "external": _external,
}
_URL_SCHEMES = ("mqtt://", "mqtts://", "tcp://", "ssl://")


def launcher_names() -> list[str]:
    """Names `get_launcher` accepts (besides broker URLs), the embedded default first."""
    return list(_LAUNCHERS)


def get_launcher(name: str) -> Launcher:
    """The launcher for `name`, or for an external broker given as a URL
    (`mqtt://HOST:PORT?pid=N` / `?container=NAME`)."""
    if name.startswith(_URL_SCHEMES):
        from mqttlab.brokers.external import ExternalLauncher

        return ExternalLauncher(name)
    factory = _LAUNCHERS.get(name.strip().lower())
    if factory is None:
        raise UnknownBroker(
            f"unknown broker {name!r}; known: {', '.join(launcher_names())}, or a URL mqtt://HOST:PORT"
        )
    return factory()


__all__ = [
    "Availability",
    "BrokerError",
    "BrokerStartError",
    "BrokerUnavailable",
    "Launcher",
    "RunningBroker",
    "UnknownBroker",
    "get_launcher",
    "launcher_names",
]
