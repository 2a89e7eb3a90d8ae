"""Rules that relate several fields of a scenario. They run once every field is valid on its
own, and all of them run, so the user sees every broken rule in one listing."""

from __future__ import annotations

from mqttlab.scenario.errors import Problem
from mqttlab.scenario.fields import MAX_PAYLOAD, TLS_SCHEMES, WEBSOCKET_SCHEMES, is_image, is_url, split_url
from mqttlab.scenario.model import HEADER_BYTES, Scenario, payload_size_bounds


def cross_field_problems(scenario: Scenario) -> list[Problem]:
    problems: list[Problem] = []
    problems += _client_problems(scenario)
    problems += _payload_problems(scenario)
    problems += _timing_problems(scenario)
    problems += _protocol_problems(scenario)
    problems += _mqtt_sn_problems(scenario)
    problems += _round_trip_problems(scenario)
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
    smallest, largest = payload_size_bounds(s.publishers.payload)
    problems = []
    if s.publishers.measure == "header" and smallest < HEADER_BYTES:
        problems.append(
            Problem(
                "publishers.payload",
                f"every payload must be at least {HEADER_BYTES} bytes with publishers.measure: header, the size of the measurement header "
                f"(got {smallest:g}); for smaller payloads set publishers.measure: topic-sequence",
                ("publishers.measure",),
            )
        )
    if s.publishers.measure == "topic-sequence":
        problems += _topic_sequence_problems(s, smallest)
    if largest > MAX_PAYLOAD and s.publishers.payload.dist in ("fixed", "uniform"):
        problems.append(Problem("publishers.payload", f"must be at most {MAX_PAYLOAD} bytes, the MQTT packet limit (got {largest:g})"))
    return problems


def _topic_sequence_problems(s: Scenario, smallest: float) -> list[Problem]:
    """The topic-sequence method names the publisher by its topic: every publisher needs its own."""
    problems = []
    if smallest < 1:
        problems.append(Problem("publishers.payload", f"must be at least 1 byte with publishers.measure: topic-sequence (got {smallest:g})", ("publishers.measure",)))
    topic, client_id = s.publishers.topic, s.publishers.client_id
    distinct = "%i" in topic or ("%c" in topic and "%i" in client_id)
    if s.publishers.count > 1 and not distinct:
        problems.append(
            Problem(
                "publishers.topic",
                f"must give each publisher its own topic with publishers.measure: topic-sequence (put %i in it; got {topic!r})",
                ("publishers.measure", "publishers.count"),
            )
        )
    if s.transport.kind == "mqtt-sn":
        problems.append(Problem("publishers.measure", "topic-sequence is MQTT only, not over MQTT-SN", ("transport.kind",)))
    return problems


def _timing_problems(s: Scenario) -> list[Problem]:
    problems = []
    closed = s.publishers.arrival == "closed"
    if closed and s.publishers.complete_on == "ack" and s.publishers.qos == 0:
        problems.append(
            Problem("publishers.complete_on", "ack needs publishers.qos 1 or 2 (QoS 0 has no acknowledgement); use delivery", ("publishers.arrival", "publishers.qos"))
        )
    if closed and s.load.grace <= 0:
        problems.append(Problem("load.grace", "must be > 0 with publishers.arrival: closed (a message not complete within it is given up)", ("publishers.arrival",)))
    if not closed and s.publishers.think_time > 0:
        problems.append(Problem("publishers.arrival", "publishers.think_time applies to closed loop: set arrival: closed", ("publishers.think_time",)))
    if s.load.deadline is not None and s.load.grace < s.load.deadline:
        problems.append(
            Problem("load.grace", f"must be at least load.deadline ({s.load.deadline:g}s), or deliveries still within their deadline are cut off (got {s.load.grace:g}s)", ("load.deadline",))
        )
    assert s.load.warmup is not None  # Scenario's after-validator always fills it in
    if s.load.duration is not None and s.load.warmup >= s.load.duration:
        problems.append(
            Problem("load.warmup", f"must be shorter than load.duration ({s.load.warmup:g}s >= {s.load.duration:g}s): "
                    "a shorter --warmup (load.warmup), or a longer --duration", ("load.duration",))
        )
    problems += _measures_nothing_problems(s)
    if s.publishers.count and s.publishers.rate <= 0 and s.publishers.messages is None and not closed:
        problems.append(
            Problem("publishers.rate", "must be greater than 0 unless publishers.messages is given", ("publishers.messages", "publishers.count"))
        )
    return problems


def _measures_nothing_problems(s: Scenario) -> list[Problem]:
    """Settings that together silently cut the run short or leave nothing to measure."""
    pubs, load = s.publishers, s.load
    assert load.warmup is not None  # Scenario's after-validator always fills it in
    problems = []
    if pubs.count and pubs.messages is not None and pubs.arrival == "constant" and pubs.rate > 0:
        sending = (pubs.messages - 1) / pubs.rate  # the last send's offset from the start
        if load.duration is not None and sending >= load.duration:
            sent = min(pubs.messages, int(load.duration * pubs.rate) + 1)
            problems.append(Problem(
                "load.duration",
                f"stops the sends at {load.duration:g}s, before the {pubs.messages:,} messages per publisher at {pubs.rate:g} msg/s "
                f"are sent ({sending:g}s; only about {sent:,} would be); leave load.duration out to send them all",
                ("publishers.messages", "publishers.rate"),
            ))
        elif load.warmup > 0 and sending < load.warmup:
            problems.append(Problem(
                "load.warmup",
                f"every message is sent within the warm-up ({pubs.messages:,} at {pubs.rate:g} msg/s take {sending:g}s < {load.warmup:g}s), "
                "so no latency would be measured; lower load.warmup or leave it out",
                ("publishers.messages", "publishers.rate"),
            ))
    if pubs.arrival == "closed" and "rate" in pubs.model_fields_set:
        problems.append(Problem(
            "publishers.rate",
            "is not used with publishers.arrival: closed (the next message goes when the previous one completed); "
            "leave it out (on the command line: --set publishers.rate=null), or use arrival: constant or poisson",
            ("publishers.arrival",),
        ))
    return problems


def _protocol_problems(s: Scenario) -> list[Problem]:
    problems = []
    uses_tls = is_url(s.broker) and split_url(s.broker or "")[0] in TLS_SCHEMES
    if not s.tls.is_default() and not uses_tls and is_url(s.broker):
        problems.append(Problem("tls", "is set but the broker is not an mqtts:// or wss:// URL", ("broker",)))
    elif not s.tls.is_default() and not is_url(s.broker) and not s.launch.tls:
        # Left here only with a certificate file: a tls: section of insecure alone turns on
        # launch.tls (model.py).
        problems.append(Problem("tls", "a broker mqttlab launches has its own throwaway CA: use --tls (launch.tls: true) "
                                "and leave --ca/--cert/--key (tls:) out", ("broker", "launch.tls")))
    if (s.tls.cert is None) != (s.tls.key is None):
        problems.append(Problem("tls.key" if s.tls.key is None else "tls.cert", "tls.cert and tls.key must be given together", ("tls",)))
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
    if is_url(s.broker) and split_url(s.broker or "")[0] in (*TLS_SCHEMES, *WEBSOCKET_SCHEMES):
        problems.append(Problem("broker", "MQTT-SN runs over plain UDP: the gateway needs an mqtt:// broker", ("transport.kind",)))
    if t.qos_minus_one and s.publishers.qos != 0:
        problems.append(Problem("publishers.qos", "must be 0 with transport.qos_minus_one (the publishers send at QoS -1)", ("transport.qos_minus_one",)))
    if t.qos_minus_one and t.topic_ids == "normal":
        problems.append(Problem("transport.topic_ids", "QoS -1 needs short or predefined topic ids", ("transport.qos_minus_one",)))
    if t.gateway == "paho" and t.qos_minus_one:
        problems.append(Problem("transport.qos_minus_one", "the Paho gateway takes QoS -1 only from clients its clients.conf lists by address; "
                                "use transport.gateway mqttlab or rsmb", ("transport.gateway",)))
    if t.gateway == "rsmb" and (t.topic_ids == "predefined" or t.predefined):
        problems.append(Problem("transport.topic_ids", "RSMB has no predefined topic ids; use normal or short", ("transport.gateway",)))
    return problems


def _round_trip_problems(s: Scenario) -> list[Problem]:
    """Round-trip mode needs both halves, and topics that cannot loop: a reply filter that caught
    the publisher's own messages, or a subscription that caught the echoes, would feed itself."""
    from mqttlab.engine import expand_template as expand
    from mqttlab.engine import topic_matches as matches

    reply, echo = s.publishers.reply_filter, s.subscribers.echo_topic
    if reply is None and echo is None:
        return []
    if reply is None or echo is None:
        missing, given = ("publishers.reply_filter", "subscribers.echo_topic") if reply is None else ("subscribers.echo_topic", "publishers.reply_filter")
        return [Problem(missing, f"round-trip mode needs {missing} together with {given}", (given,))]
    problems = []
    if s.transport.kind == "mqtt-sn":
        problems.append(Problem("publishers.reply_filter", "round-trip mode is not available over MQTT-SN", ("transport.kind",)))
    # Index 0 stands for every client: the templates differ between clients only by %i and %c.
    own_topic = expand(s.publishers.topic, 0, expand(s.publishers.client_id, 0, ""))
    reply_0 = expand(reply, 0, expand(s.publishers.client_id, 0, ""))
    if matches(reply_0, own_topic):
        problems.append(Problem("publishers.reply_filter", f"{reply_0!r} matches the publisher's own topic {own_topic!r}; replies must come back on another topic", ("publishers.topic",)))
    echo_0 = expand(echo, 0, expand(s.subscribers.client_id, 0, ""))
    assert s.subscribers.filters is not None  # Scenario's after-validator always fills it in
    for k, template in enumerate(s.subscribers.filters):
        topic_filter = expand(template, 0, expand(s.subscribers.client_id, 0, ""))
        topic_filter = topic_filter.split("/", 2)[2] if topic_filter.startswith("$share/") else topic_filter
        if matches(topic_filter, echo_0):
            problems.append(Problem("subscribers.echo_topic", f"{echo_0!r} is matched by subscribers.filters[{k}] {topic_filter!r}: the echoes would be echoed again", (f"subscribers.filters[{k}]",)))
    return problems
