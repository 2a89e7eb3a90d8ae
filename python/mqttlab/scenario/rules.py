"""Rules that relate several fields of a scenario. They run once every field is valid on its
own, and all of them run, so the user sees every broken rule in one listing. The rules the
engine itself keeps on a plan (payload sizes against the measurement, timing, round trips,
MQTT-SN, TLS files) are the engine's, written once in its validate.rs and asked for on the
scenario's plan by mqttlab.planning. The rest, about what the plan does not carry (the broker
to launch, faults, the gateway, client-id templates), are here."""

from __future__ import annotations

from mqttlab import pacing
from mqttlab.scenario.errors import Problem
from mqttlab.scenario.fields import MAX_PAYLOAD, BrokerAddress, is_image, is_url
from mqttlab.scenario.model import Scenario, payload_size_bounds


def cross_field_problems(scenario: Scenario) -> list[Problem]:
    problems: list[Problem] = []
    problems += _client_problems(scenario)
    problems += _payload_problems(scenario)
    problems += _pacing_problems(scenario)
    problems += _protocol_problems(scenario)
    problems += _mqtt_sn_problems(scenario)
    problems += _launch_problems(scenario)
    problems += _fault_problems(scenario)
    return problems


def _fault_problems(s: Scenario) -> list[Problem]:
    """Faults act on a broker process mqttlab launched, inside the load phase, one at a time."""
    problems = []
    broker_faults = [f for f in s.faults if f.kind.startswith("broker-")]
    if broker_faults and (s.broker is None or is_url(s.broker)):
        problems.append(Problem("faults", "act on a broker mqttlab launches as a process (a name such as mosquitto), "
                                "not on a broker URL or the embedded one", ("broker",)))
    link_faults = [index for index, f in enumerate(s.faults) if f.kind in ("link-down", "link-degrade")]
    for index, fault in enumerate(s.faults):
        if fault.kind == "link-degrade" and fault.network is None:
            problems.append(Problem(f"faults[{index}].network", "link-degrade needs the link's conditions during the fault, e.g. {loss: 5%}"))
        if fault.kind != "link-degrade" and fault.network is not None:
            problems.append(Problem(f"faults[{index}].network", f"applies to link-degrade only, not to {fault.kind}", (f"faults[{index}].kind",)))
        if fault.network is not None and fault.network.method != "auto":
            problems.append(Problem(f"faults[{index}].network.method", "a fault's conditions run on the scenario's link; leave method out"))
    if link_faults and s.network is None:
        problems.append(Problem(f"faults[{link_faults[0]}].kind", f"{s.faults[link_faults[0]].kind} acts on the emulated link: the scenario needs a network: section", ("network",)))
    elif link_faults and s.network is not None and s.network.method not in ("auto", "emulator"):
        problems.append(Problem(f"faults[{link_faults[0]}].kind", f"{s.faults[link_faults[0]].kind} needs the user-space link emulator, not network.method {s.network.method}",
                                ("network.method",)))
    for index, fault in enumerate(s.faults):
        if fault.kind == "clients-disconnect":
            if fault.duration is not None:
                problems.append(Problem(f"faults[{index}].duration", "clients-disconnect is instantaneous: the clients reconnect by themselves; leave it out"))
            if not s.options.reconnect:
                problems.append(Problem(f"faults[{index}].kind", "clients-disconnect needs options.reconnect: true (the clients are to come back)", ("options.reconnect",)))
            if s.transport.kind == "mqtt-sn":
                problems.append(Problem(f"faults[{index}].kind", "clients-disconnect tears down TCP connections; MQTT-SN clients have none", ("transport.kind",)))
        elif fault.duration is None:
            problems.append(Problem(f"faults[{index}].duration", f"is required for {fault.kind}"))
        if fault.kind != "clients-disconnect" and fault.fraction is not None:
            problems.append(Problem(f"faults[{index}].fraction", f"applies to clients-disconnect only, not to {fault.kind}", (f"faults[{index}].kind",)))
        if fault.kind != "broker-restart" and fault.signal is not None:
            problems.append(Problem(f"faults[{index}].signal", f"applies to broker-restart only, not to {fault.kind}", (f"faults[{index}].kind",)))
        if fault.kind == "broker-restart" and not s.options.reconnect:
            problems.append(Problem(f"faults[{index}].kind", "broker-restart needs options.reconnect: true (without it the "
                                    "first connection the restart breaks ends the run)", ("options.reconnect",)))
    end = None
    for index, fault in sorted(enumerate(s.faults), key=lambda item: item[1].at):
        lasts = fault.duration or 0.0
        if s.load.duration is not None and fault.at + lasts > s.load.duration:
            what = f"would end at {fault.at + lasts:g} s" if lasts else f"starts at {fault.at:g} s"
            problems.append(Problem(f"faults[{index}].duration" if lasts else f"faults[{index}].at", f"the fault {what}, "
                                    f"after the load phase ({s.load.duration:g} s); recovery is measured inside it",
                                    (f"faults[{index}].at", "load.duration")))
        if end is not None and fault.at < end:
            problems.append(Problem(f"faults[{index}].at", f"starts at {fault.at:g} s, before the previous fault ends ({end:g} s); "
                                    "faults run one at a time so that each recovery is its own"))
        end = fault.at + lasts
    return problems


def _launch_problems(s: Scenario) -> list[Problem]:
    if s.launch.is_default():
        return []
    if is_url(s.broker):
        return [Problem("launch", "applies to a broker mqttlab launches (a name such as mosquitto), not to a broker URL", ("broker",))]
    if s.launch.container is not None and not is_image(s.broker):
        return [Problem("launch.container", "applies to a broker given as image:REF (e.g. image:emqx/emqx:5.8)", ("broker",))]
    if s.launch.websocket and s.transport.kind == "mqtt-sn":
        return [Problem("launch.websocket", "MQTT-SN runs over UDP through the gateway; it cannot use the WebSocket listener", ("transport.kind",))]
    if s.launch.tls and s.transport.kind == "mqtt-sn":
        return [Problem("launch.tls", "MQTT-SN runs over plain UDP through the gateway; it cannot use the TLS listener", ("transport.kind",))]
    if s.launch.tls and not s.tls.is_default():
        return [Problem("tls", "is mqttlab's own with launch.tls (the launched broker's throwaway CA); leave it out", ("launch.tls",))]
    return []


def _client_problems(s: Scenario) -> list[Problem]:
    problems = []
    if s.publishers.count + s.subscribers.count < 1:
        problems.append(Problem("publishers.count", "publishers.count + subscribers.count must be at least 1", ("subscribers.count",)))
    for role in ("publishers", "subscribers"):
        section = getattr(s, role)
        if section.count > 1 and "%i" not in section.client_id:
            problems.append(
                Problem(
                    f"{role}.client_id",
                    f"must contain %i when count > 1, so that client ids are unique (got {section.client_id!r})",
                    (f"{role}.count",),
                )
            )
    if s.publishers.count and s.subscribers.count and s.publishers.client_id == s.subscribers.client_id:
        problems.append(
            Problem(
                "subscribers.client_id",
                "must differ from publishers.client_id, or the broker will disconnect one for the other",
                ("publishers.client_id", "publishers.count", "subscribers.count"),
            )
        )
    return problems


def _payload_problems(s: Scenario) -> list[Problem]:
    _, largest = payload_size_bounds(s.publishers.payload)
    if largest > MAX_PAYLOAD and s.publishers.payload.dist in ("fixed", "uniform"):
        return [Problem("publishers.payload", f"must be at most {MAX_PAYLOAD} bytes, the MQTT packet limit (got {largest:g})")]
    return []


def _pacing_problems(s: Scenario) -> list[Problem]:
    return [Problem(*problem) for problem in pacing.scenario_problems(s.publishers, s.load)]


def _protocol_problems(s: Scenario) -> list[Problem]:
    problems = []
    uses_tls = is_url(s.broker) and BrokerAddress.parse(s.broker or "").tls
    if not s.tls.is_default() and not uses_tls and is_url(s.broker):
        problems.append(Problem("tls", "is set but the broker is not an mqtts:// or wss:// URL", ("broker",)))
    elif not s.tls.is_default() and not is_url(s.broker) and not s.launch.tls:
        # Left here only with a certificate file: a tls: section of insecure alone turns on
        # launch.tls (model.py).
        problems.append(Problem("tls", "a broker mqttlab launches has its own throwaway CA: use --tls (launch.tls: true) "
                                "and leave --ca/--cert/--key (tls:) out", ("broker", "launch.tls")))
    if s.mqtt.version == 3 and s.mqtt.session_expiry > 0:
        problems.append(
            Problem("mqtt.session_expiry", "exists only in MQTT 5 (set mqtt.version: 5, or use clean_start: false)", ("mqtt.version",))
        )
    if s.mqtt.version == 3 and s.mqtt.password is not None and s.mqtt.username is None:
        problems.append(Problem("mqtt.password", "MQTT 3.1.1 allows a password only with a username", ("mqtt.version", "mqtt.username")))
    return problems


def _mqtt_sn_problems(s: Scenario) -> list[Problem]:
    t = s.transport
    problems: list[Problem] = []
    if t.kind != "mqtt-sn":
        # (transport.gateway is not among them: it picks the gateway of the MQTT-SN runs only, so that
        # a suite's --set transport.gateway=... can cover its MQTT runs too.)
        if t.qos_minus_one or t.predefined or t.topic_ids != "normal":
            problems.append(Problem("transport.kind", "the MQTT-SN settings need transport.kind: mqtt-sn"))
        return problems
    if t.gateway == "paho" and t.qos_minus_one:
        problems.append(Problem("transport.qos_minus_one", "the Paho gateway takes QoS -1 only from clients its clients.conf lists by address; "
                                "use transport.gateway mqttlab or rsmb", ("transport.gateway",)))
    if t.gateway == "rsmb" and (t.topic_ids == "predefined" or t.predefined):
        problems.append(Problem("transport.topic_ids", "RSMB has no predefined topic ids; use normal or short", ("transport.gateway",)))
    return problems
