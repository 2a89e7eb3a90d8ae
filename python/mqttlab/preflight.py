"""What a run would refuse about its scenario beyond the scenario's own rules: the scenario
against the broker it names (known by name, speaking the MQTT version asked for, with a TLS
listener when asked to use it, with persistence when asked for it). One check, run by
`mqttlab run` before anything is launched and by `mqttlab scenario validate`, so that validate
refuses everything run would."""

from __future__ import annotations

from mqttlab.scenario import Scenario
from mqttlab.scenario.errors import Problem
from mqttlab.scenario.fields import is_image, is_url

# mqtt.version's values as the launchers name the versions they speak.
_VERSION_NAMES = {3: "3.1.1", 5: "5"}


def broker_problems(scenario: Scenario) -> list[Problem]:
    """The scenario's settings a launched broker cannot serve; nothing for a broker URL (what it
    speaks is learnt by connecting), and for a container image (its ports come with its options)
    only its persistence."""
    from mqttlab.session import EMBEDDED_BROKER

    target = scenario.broker or EMBEDDED_BROKER
    if is_url(target):
        return []
    from mqttlab.brokers import UnknownBroker, get_launcher

    try:
        launcher = get_launcher(target)
    except UnknownBroker as error:
        return [Problem("broker", str(error))]
    problems = []
    if scenario.launch.persistence is not None:
        launcher.configure(scenario.launch.config, persistence=scenario.launch.persistence)
        refused = launcher.persistence_problem()
        if refused:
            problems.append(Problem("launch.persistence", refused, ("broker",)))
    if is_image(target) or not launcher.mqtt_versions:  # an image, or a broker that cannot run here
        return problems
    asked = _VERSION_NAMES[scenario.mqtt.version]
    if asked not in launcher.mqtt_versions and scenario.transport.kind == "mqtt":
        other = "3" if scenario.mqtt.version == 5 else "5"
        problems.append(Problem("mqtt.version", f"{launcher.name} speaks MQTT {', '.join(launcher.mqtt_versions)}, not {asked} "
                                f"(`mqttlab brokers list`); use --mqtt-version {other} or another broker", ("broker",)))
    if scenario.launch.tls and not launcher.has_tls:
        problems.append(Problem("launch.tls", f"{launcher.name} has no TLS listener mqttlab can start; leave --tls out or use another broker",
                                ("broker",)))
    return problems
