"""Brokers under test: launchers that find or install a broker, start it on free loopback ports
(plain and TLS), wait until it serves MQTT, record its version and stop it; and external brokers
that join by URL.

    launcher = get_launcher("mosquitto")
    with launcher.start(workdir, tls=True) as broker:
        broker.url(tls=True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from mqttlab.brokers.base import (
    Availability,
    BrokerError,
    BrokerStartError,
    BrokerUnavailable,
    Launcher,
    RunningBroker,
)


if TYPE_CHECKING:
    from mqttlab.brokers.paho_gateway import PahoGatewayLauncher


class UnknownBroker(KeyError):
    """No launcher has this name; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else "unknown broker"


#: the launchers, each (module under mqttlab.brokers, class), imported when first asked for: a
#: command that lists or runs one broker does not import the other twelve
_LAUNCHER_CLASSES = {
    "rumqttd": ("rumqttd", "RumqttdLauncher"),
    "mosquitto": ("mosquitto", "MosquittoLauncher"),
    "rmqtt": ("rmqtt", "RmqttLauncher"),
    "aedes": ("aedes", "AedesLauncher"),
    "amqtt": ("amqtt", "AmqttLauncher"),
    "moquette": ("moquette", "MoquetteLauncher"),
    "hivemq": ("hivemq", "HivemqLauncher"),
    "activemq": ("activemq", "ActivemqLauncher"),
    "rabbitmq": ("rabbitmq", "RabbitmqLauncher"),
    "ejabberd": ("ejabberd", "EjabberdLauncher"),
    "mochi": ("mochi", "MochiLauncher"),
    "nanomq": ("nanomq", "NanomqLauncher"),
    "rsmb": ("rsmb", "RsmbLauncher"),
}


def _installed(module: str, cls: str) -> Callable[[], Launcher]:
    def make() -> Launcher:
        launcher: Callable[[], Launcher] = getattr(importlib.import_module(f"mqttlab.brokers.{module}"), cls)
        return launcher()

    return make


def _unavailable(name: str) -> Callable[[], Launcher]:
    def make() -> Launcher:
        from mqttlab.brokers.unavailable import Missing, UnavailableLauncher

        seeds, reason = MISSING_REASONS[name]
        if name in IMAGE_ROUTES:
            from mqttlab.brokers.container import runtime_note

            reason += f"; its image runs instead: --broker image:{IMAGE_ROUTES[name]} ({runtime_note()})"
        return UnavailableLauncher(Missing(name, seeds, reason))

    return make


#: the seeds' brokers that no registry reachable here offers in a form that installs (see
#: docs/brokers.md for every route that was tried)
MISSING_REASONS = {
    "emqx": ("seeds 000 and 003", "EMQX is an Erlang release shipped as OS packages, container images and Hex; none is in Debian, PyPI, npm, crates.io, Maven Central or the Go module proxy"),
    "vernemq": ("seed 001", "VerneMQ is an Erlang release shipped as container images and built from GitHub with Hex dependencies; none is in Debian, PyPI, npm, crates.io, Maven Central or the Go module proxy"),
}
#: the image each of them runs from through docker or podman (brokers/container.py)
IMAGE_ROUTES = {"emqx": "emqx/emqx:5.8", "vernemq": "vernemq/vernemq"}


_LAUNCHERS: dict[str, Callable[[], Launcher]] = {
    **{name: _installed(module, cls) for name, (module, cls) in _LAUNCHER_CLASSES.items()},
    **{name: _unavailable(name) for name in MISSING_REASONS},
    "external": _installed("external", "ExternalLauncher"),
}


#: MQTT-SN gateways built here, listed and installed apart from the brokers (they are not brokers:
#: a scenario puts one in front of a broker with transport.gateway), each with that setting's value
GATEWAYS = {"paho-mqtt-sn-gateway": "paho"}
GATEWAY_NAMES = tuple(GATEWAYS)


def gateway_use(name: str) -> str:
    """How a gateway is used, for a user who gave its name as a broker's."""
    return (f"{name} is an MQTT-SN gateway, not a broker: a scenario puts it in front of a broker with "
            f"`transport: {{kind: mqtt-sn, gateway: {GATEWAYS[name]}}}` (or --set transport.kind=mqtt-sn "
            f"--set transport.gateway={GATEWAYS[name]}; docs/mqtt-sn.md)")


def get_gateway(name: str) -> PahoGatewayLauncher:
    """The launcher of a gateway in GATEWAY_NAMES."""
    from mqttlab.brokers.paho_gateway import PahoGatewayLauncher

    if name.strip().lower() not in GATEWAY_NAMES:
        raise UnknownBroker(f"unknown gateway {name!r}; known: {', '.join(GATEWAY_NAMES)}")
    return PahoGatewayLauncher()


def launcher_names() -> list[str]:
    """Names `get_launcher` accepts (besides broker URLs), the embedded default first."""
    return list(_LAUNCHERS)


def available_launcher_names() -> list[str]:
    """The brokers that can be started here now (installed), in `launcher_names` order."""
    return [name for name in launcher_names() if name != "external" and get_launcher(name).availability().available]


def get_launcher(name: str) -> Launcher:
    """The launcher for `name`, for a broker image (`image:emqx/emqx:5.8`), or for an external
    broker given as a URL (`mqtt://HOST:PORT?pid=N` / `?container=NAME`)."""
    from mqttlab.scenario.fields import is_image, is_url  # "name or URL?" is decided there alone

    if is_image(name):
        from mqttlab.brokers.container import ContainerLauncher

        return ContainerLauncher(name)
    if is_url(name):
        from mqttlab.brokers.external import ExternalLauncher

        return ExternalLauncher(name)
    factory = _LAUNCHERS.get(name.strip().lower())
    if factory is None:
        if name.strip().lower() in GATEWAYS:
            raise UnknownBroker(gateway_use(name.strip().lower()))
        from mqttlab.spelling import did_you_mean

        close = did_you_mean(name.strip().lower(), launcher_names())
        raise UnknownBroker(
            f"unknown broker {name!r}" + (f" (did you mean {close!r}?)" if close else "")
            + f"; known: {', '.join(launcher_names())}, a URL mqtt://HOST:PORT, or image:REF"
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
    "available_launcher_names",
    "get_launcher",
    "launcher_names",
]
