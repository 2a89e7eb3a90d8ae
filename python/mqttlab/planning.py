"""A scenario made ready for the engine: checked by its own rules and by the engine's on its plan
(every problem in one listing), and compiled into its RunPlan once. The plan carries no broker
address until the broker is up: `bind_broker` sets it then, with what the running broker brings
(its login, its throwaway CA), so nothing here needs a stand-in address.

    scenario = load_scenario(path)          # checked whole; its plan compiled by the check
    plan = plan_of(scenario)                # that plan again (a fresh copy), without compiling
    bind_broker(plan, url, scenario)        # once the broker is up: where it is, how to reach it

Layers: scenario (the model and its own rules) below, the engine beside; the session, the CLI,
suites and capacity above."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from mqttlab import engine
from mqttlab.pacing import mode_of
from mqttlab.plan_types import BrokerTarget, Load, MqttSnTransport, Options, PayloadSize, Publishers, RunPlan, TlsOptions
from mqttlab.scenario import Problem, Scenario, check_scenario, read_scenario
from mqttlab.scenario.fields import BrokerAddress, DEFAULT_WEBSOCKET_PATH, is_url

Plan = RunPlan

PROTOCOL_LEVEL = {3: 4, 5: 5}  # the scenario says 3 for MQTT 3.1.1, the wire says 4
# Fields no part of the plan reads: a scenario renamed (a run named by its shape) keeps its plan.
_NOT_IN_THE_PLAN = {"name", "description"}

__all__ = ["Plan", "bind_broker", "default_scenario", "load_scenario", "plan_of", "single_process_problem", "validate_scenario"]


def load_scenario(path: Optional[Path] = None, *, overrides: Mapping[str, Any] = {}, assignments: Iterable[str] = ()) -> Scenario:
    """The scenario in `path` (or the built-in default) with `overrides` ({dotted path: value}, from
    flags) and `assignments` ("path=value", from --set), checked whole: a ScenarioError lists every
    problem, the engine's on its plan among them."""
    return read_scenario(path, plan_rules=_engine_rules, overrides=overrides, assignments=assignments)


def validate_scenario(data: Mapping[str, Any], *, base_dir: Optional[Path] = None, source: str = "scenario") -> Scenario:
    """A scenario from its mapping, checked whole (as `load_scenario`)."""
    return check_scenario(data, plan_rules=_engine_rules, base_dir=base_dir, source=source)


def default_scenario() -> Scenario:
    return validate_scenario({})


def plan_of(scenario: Scenario) -> Plan:
    """The scenario's plan, without a broker address: the one its check compiled while the
    scenario is as it was then, else compiled now. A copy each time: the caller binds it."""
    fingerprint = scenario.model_dump_json(exclude=_NOT_IN_THE_PLAN)
    kept = scenario._checked_plan
    if kept is None or kept[0] != fingerprint:
        kept = (fingerprint, _compile(scenario))
        scenario._checked_plan = kept
    return copy.deepcopy(kept[1])


def bind_broker(plan: Plan, url: str, scenario: Scenario) -> Plan:
    """`plan` (changed in place, and returned) bound to the broker its clients reach at `url`:
    the address, TLS with the scenario's files (a launched broker's CA among them) where the URL
    has it, the WebSocket path, and the login the running broker asks for (`scenario` as the
    broker's start left it)."""
    address = BrokerAddress.parse(url)
    broker: BrokerTarget = {"host": address.host, "port": address.port, "tls": _tls(scenario) if address.tls else None}
    if address.path is not None:
        broker["websocket"] = {"path": address.path}
    plan["broker"] = broker
    plan["mqtt"]["username"] = scenario.mqtt.username
    plan["mqtt"]["password"] = scenario.mqtt.password
    return plan


def single_process_problem(scenario: Scenario) -> Optional[str]:
    """Why the scenario's measurement needs all its clients in one engine process (shards on
    other processes or hosts cannot do it), or None. The engine refuses such a shard too."""
    pubs = scenario.publishers
    if pubs.measure == "topic-sequence":
        return "publishers.measure: topic-sequence looks up each message's send record in the engine process that sent it"
    return mode_of(pubs.arrival).single_process_problem(pubs)


def _engine_rules(scenario: Scenario) -> list[Problem]:
    """The engine's rules (validate.rs) on the scenario's plan, compiled here once and kept for
    the run (`plan_of`)."""
    return [Problem(field, message, related) for field, message, related in engine.plan_problems(plan_of(scenario))]


def _compile(scenario: Scenario) -> Plan:
    """The RunPlan for `scenario`, covering every client (one shard), its broker section saying
    how the clients will reach the broker (TLS, WebSocket) but not yet where."""
    pubs, subs, load = scenario.publishers, scenario.subscribers, scenario.load
    # Scenario's after-validator fills in both from the other settings.
    assert subs.filters is not None and load.warmup is not None
    publishers: Publishers = {
        "count": pubs.count,
        "client_id": pubs.client_id,
        "topic": pubs.topic,
        "qos": pubs.qos,
        "retain": pubs.retain,
        "rate": float(pubs.rate),
        "arrival": pubs.arrival,
        "messages": pubs.messages,
        "payload": _payload(pubs.payload.model_dump()),
        "inflight": pubs.inflight,
    }
    # Absent keys keep the engine's defaults (header, open loop), so plans stay as they were.
    if pubs.measure != "header":
        publishers["measure"] = pubs.measure
    if pubs.will is not None:
        will = pubs.will
        publishers["will"] = {"topic": will.topic, "qos": will.qos, "leave": will.leave, "at_ms": _ms(will.at), "fraction": will.fraction,
                              "delay_s": int(round(will.delay))}
    # The mode's keys are Publishers keys; pacing, below the plan, does not import its types.
    publishers.update(mode_of(pubs.arrival).plan_keys(pubs))  # type: ignore[typeddict-item]
    # 0 = no time limit: the run ends when every publisher sent its messages.
    load_plan: Load = {"duration_ms": _ms(load.duration) if load.duration is not None else 0, "warmup_ms": _ms(load.warmup),
                       "grace_ms": _ms(load.grace), "connect_rate": float(load.connect_rate), "seed": load.seed}
    if load.deadline is not None:
        load_plan["deadline_ms"] = _ms(load.deadline)
    options: Options = {"record_latency": scenario.options.record_latency, "reconnect": scenario.options.reconnect,
                        "progress_interval_ms": 1000}
    if scenario.options.timer_resolution:
        options["timer_resolution_us"] = round(scenario.options.timer_resolution * 1e6)
    if scenario.options.send_ahead:
        options["send_ahead_us"] = round(scenario.options.send_ahead * 1e6)
    if scenario.options.threads:
        options["threads"] = scenario.options.threads
    if scenario.options.submission != "direct":
        options["submission"] = scenario.options.submission
    if not scenario.options.tcp_nodelay:
        options["tcp_nodelay"] = False
    if not scenario.options.kernel_timestamps:
        options["kernel_timestamps"] = False
    if scenario.options.kernel_send_timestamps is not None:
        options["kernel_send_timestamps"] = scenario.options.kernel_send_timestamps
    plan: Plan = {
        "broker": _unbound_broker(scenario),
        "mqtt": {
            "version": PROTOCOL_LEVEL[scenario.mqtt.version],
            "username": scenario.mqtt.username,
            "password": scenario.mqtt.password,
            "keepalive_s": int(scenario.mqtt.keepalive),
            "clean_start": scenario.mqtt.clean_start,
            "session_expiry_s": int(scenario.mqtt.session_expiry),
            "connect_timeout_ms": _ms(scenario.mqtt.connect_timeout),
        },
        "publishers": publishers,
        "subscribers": {
            "count": subs.count,
            "client_id": subs.client_id,
            "filters": list(subs.filters),
            "qos": subs.qos if subs.qos is not None else pubs.qos,
        },
        "load": load_plan,
        "shard": {"publishers": [0, pubs.count], "subscribers": [0, subs.count]},
        "options": options,
    }
    # Round-trip mode (the engine's rules want both halves); absent keeps plans as they were.
    if pubs.reply_filter is not None:
        plan["publishers"]["reply_filter"] = pubs.reply_filter
    if pubs.request_response:
        plan["publishers"]["request_response"] = True
    if subs.echo_topic is not None:
        plan["subscribers"]["echo_topic"] = subs.echo_topic
    if subs.retained is not None:
        plan["subscribers"]["retained"] = {"at_ms": _ms(subs.retained.at), "spread_ms": _ms(subs.retained.spread)}
        if subs.retained.deleted:
            plan["subscribers"]["retained"]["deleted"] = subs.retained.deleted
    if subs.offline is not None:
        offline = subs.offline
        plan["subscribers"]["offline"] = {"at_ms": _ms(offline.at), "duration_ms": _ms(offline.duration), "fraction": offline.fraction,
                                          "every_ms": _ms(offline.every) if offline.every is not None else 0}
    if subs.takeover is not None:
        takeover = subs.takeover
        plan["subscribers"]["takeover"] = {"at_ms": _ms(takeover.at), "fraction": takeover.fraction,
                                           "every_ms": _ms(takeover.every) if takeover.every is not None else 0}
    # MQTT 5's announcements, only when asked for (absent keys keep the engine's defaults).
    mqtt = scenario.mqtt
    if mqtt.receive_maximum != 65535:
        plan["mqtt"]["receive_maximum"] = mqtt.receive_maximum
    if mqtt.maximum_packet_size is not None:
        plan["mqtt"]["maximum_packet_size"] = mqtt.maximum_packet_size
    if mqtt.topic_alias_maximum:
        plan["mqtt"]["topic_alias_maximum"] = mqtt.topic_alias_maximum
    if pubs.message_expiry is not None:
        plan["publishers"]["message_expiry_s"] = int(pubs.message_expiry)
    if pubs.user_properties is not None:
        plan["publishers"]["user_properties"] = {"count": pubs.user_properties.count, "size": pubs.user_properties.size}
    if pubs.content_type is not None:
        plan["publishers"]["content_type"] = pubs.content_type
    if pubs.payload_format is not None:
        plan["publishers"]["payload_format"] = pubs.payload_format
    if pubs.no_local:
        plan["publishers"]["no_local"] = True
    if subs.subscription_identifier:
        plan["subscribers"]["subscription_identifier"] = True
    if subs.retain_as_published:
        plan["subscribers"]["retain_as_published"] = True
    if subs.retain_handling:
        plan["subscribers"]["retain_handling"] = subs.retain_handling
    if scenario.churn is not None:
        churn = scenario.churn
        plan["churn"] = {"rate": float(churn.rate), "stay_ms": _ms(churn.stay), "clients": churn.clients, "clean_start": churn.clean_start,
                         "subscribe": churn.subscribe, "leave": churn.leave}
    if scenario.transport.kind == "mqtt-sn":
        # Absent means MQTT, so plans of MQTT runs stay as they were.
        plan["transport"] = _sn_transport(scenario)
    return plan


def _unbound_broker(scenario: Scenario) -> BrokerTarget:
    """How the clients will reach the broker, known before it is up: over TLS (an mqtts:// or
    wss:// URL; a launched broker's TLS listener, or TLS files given, whose rules the engine
    checks), over WebSocket (its path). Where, `bind_broker` says."""
    if is_url(scenario.broker):
        address = BrokerAddress.parse(scenario.broker or "")
        tls, path = address.tls, address.path
    else:
        tls = scenario.launch.tls or not scenario.tls.is_default()
        path = DEFAULT_WEBSOCKET_PATH if scenario.launch.websocket else None
    broker: BrokerTarget = {"tls": _tls(scenario) if tls else None}
    if path is not None:
        broker["websocket"] = {"path": path}
    return broker


def _tls(scenario: Scenario) -> TlsOptions:
    return {
        "ca_file": _path_text(scenario.tls.ca),
        "cert_file": _path_text(scenario.tls.cert),
        "key_file": _path_text(scenario.tls.key),
        "insecure": scenario.tls.insecure,
        "server_name": scenario.tls.server_name,
    }


def _sn_transport(scenario: Scenario) -> MqttSnTransport:
    """The plan's MQTT-SN transport; the plan's broker address is then the gateway's UDP one."""
    t = scenario.transport
    return {
        "kind": "mqtt-sn",
        "topic_ids": t.topic_ids,
        "predefined": {str(k): v for k, v in t.predefined.items()},
        "retry_ms": _ms(t.retry),
        "retries": t.retries,
        "qos_minus_one": t.qos_minus_one,
    }


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _path_text(path: Any) -> Optional[str]:
    return None if path is None else str(path)


def _payload(spec: dict[str, Any]) -> PayloadSize:
    kind = spec["dist"]
    if kind == "fixed":
        return {"dist": "fixed", "size": int(spec["size"])}
    if kind == "uniform":
        return {"dist": "uniform", "min": int(spec["min"]), "max": int(spec["max"])}
    if kind == "normal":
        return {"dist": "normal", "mean": float(spec["mean"]), "std": float(spec["std"])}
    return {"dist": "exponential", "mean": float(spec["mean"])}
