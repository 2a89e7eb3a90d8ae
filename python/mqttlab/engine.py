"""The one door to the compiled engine (`mqttlab._engine`, imported here only): compiles a Scenario
into a RunPlan, splits plans into shards, runs one shard and summarizes it, and answers what the
engine knows (template expansion, topic matching, the receivers a plan owes) so that Python never
recodes it. Everything structured crosses the boundary as JSON text."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Optional

from mqttlab.plan_types import BrokerTarget, Load, MqttSnTransport, Options, PayloadSize, Publishers, RunPlan, TlsOptions
from mqttlab.scenario.model import Scenario
from mqttlab.scenario.fields import TLS_SCHEMES, split_url, websocket_path

Plan = RunPlan
ProgressCallback = Callable[[dict[str, Any]], None]

PROTOCOL_LEVEL = {3: 4, 5: 5}  # the scenario says 3 for MQTT 3.1.1, the wire says 4


class EngineUnavailable(RuntimeError):
    """The compiled module mqttlab._engine is not built or not installed."""


class PlanRejected(ValueError):
    """The engine refused a plan. The scenario validation should have caught it: a bug."""


class HostCannotRun(RuntimeError):
    """This host cannot give the run what it needs (file descriptors for its connections)."""


class BrokerUnreachable(ConnectionError):
    """The broker could not be reached or refused before any load was sent."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"cannot connect to {url}: {reason}")


@dataclass
class RunOutcome:
    plan: Plan
    result: dict[str, Any]  # the raw result (result.json)
    summary: dict[str, Any]  # the summarize() output (summary.json)

    @property
    def status(self) -> str:
        return str(self.summary.get("status") or self.result.get("status") or "failed")


def load_engine() -> Any:
    try:
        from mqttlab import _engine
    except ImportError as error:
        raise EngineUnavailable(
            "the compiled engine mqttlab._engine is missing: build it with `maturin develop` "
            f"(or install the mqttlab wheel) ({error})"
        ) from None
    return _engine


def engine_version() -> Optional[str]:
    try:
        return str(load_engine().__version__)
    except EngineUnavailable:
        return None


def expand_template(template: str, index: int, client_id: str = "") -> str:
    """A client-id, topic or filter template for client `index` as the engine expands it: `%i` the
    index, `%c` the client id, `%%` a percent sign."""
    return str(load_engine().expand_template(template, index, client_id))


def client_topic(template: str, index: int, client_id_template: str) -> str:
    """A topic or filter template for client `index`, its `%c` the client's own expanded id."""
    return expand_template(template, index, expand_template(client_id_template, index))


def topic_matches(topic_filter: str, topic: str) -> bool:
    """Whether an MQTT topic filter matches a topic name, by the engine's rules (MQTT 4.7)."""
    return bool(load_engine().topic_matches(topic_filter, topic))


def owed_units(plan: Plan, max_checks: int) -> Optional[dict[str, Any]]:
    """The plan's receiving units as the engine's accounting owes them (`owed`, `members`), or
    None when working them out would take more than `max_checks` matches."""
    found = load_engine().owed_units(json.dumps(plan), max_checks)
    return None if found is None else dict(json.loads(found))


def serve(component: str, config_json: str) -> None:
    """Runs a component compiled into the engine (`broker`, `gateway`, `link`) in this process
    until it is stopped (Ctrl-C / KeyboardInterrupt)."""
    getattr(load_engine(), f"serve_{component}")(config_json)


def smc_explore(config: dict[str, Any], progress: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """The SMC random-walk clients' rows and failures (mqttlab.smc.explore)."""
    return dict(json.loads(load_engine().smc_explore(json.dumps(config), progress)))


def smc_profile_run(config: dict[str, Any], progress: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """The SMC usage-profile clients' sequences (mqttlab.smc.verify)."""
    return dict(json.loads(load_engine().smc_profile_run(json.dumps(config), progress)))


def run_shard_raw(plan_json: str, progress: Optional[Callable[[str], None]] = None) -> str:
    """Runs one shard and returns its raw result (JSON) without summarizing it, for a shard whose
    result is merged with others' (a Dask worker). Exceptions are the engine's own
    (ConnectionError, OSError, ValueError): see `run` for what each means."""
    return str(load_engine().run_shard(plan_json, progress))


def compile_plan(scenario: Scenario, broker_url: str, *, progress_interval_ms: int = 1000) -> Plan:
    """The RunPlan for `scenario` against the broker at `broker_url` (mqtt://, mqtts://, ws:// or
    wss://), covering every client (one shard)."""
    scheme, host, port = split_url(broker_url)
    path = websocket_path(broker_url)
    pubs, subs, load = scenario.publishers, scenario.subscribers, scenario.load
    # Scenario's after-validator fills in both from the other settings.
    assert subs.filters is not None and load.warmup is not None
    broker: BrokerTarget = {"host": host, "port": port, "tls": _tls(scenario) if scheme in TLS_SCHEMES else None}
    if path:
        broker["websocket"] = {"path": path}
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
    if pubs.arrival == "closed":
        publishers["think_us"] = round(pubs.think_time * 1e6)
        publishers["complete_on"] = pubs.complete_on
    # 0 = no time limit: the run ends when every publisher sent its messages.
    load_plan: Load = {"duration_ms": _ms(load.duration) if load.duration is not None else 0, "warmup_ms": _ms(load.warmup),
                       "grace_ms": _ms(load.grace), "connect_rate": float(load.connect_rate), "seed": load.seed}
    if load.deadline is not None:
        load_plan["deadline_ms"] = _ms(load.deadline)
    options: Options = {"record_latency": scenario.options.record_latency, "reconnect": scenario.options.reconnect,
                        "progress_interval_ms": progress_interval_ms}
    if scenario.options.timer_resolution:
        options["timer_resolution_us"] = round(scenario.options.timer_resolution * 1e6)
    if scenario.options.send_ahead:
        options["send_ahead_us"] = round(scenario.options.send_ahead * 1e6)
    if scenario.options.threads:
        options["threads"] = scenario.options.threads
    if scenario.options.submission != "direct":
        options["submission"] = scenario.options.submission
    plan: Plan = {
        "broker": broker,
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
    if subs.echo_topic is not None:
        plan["subscribers"]["echo_topic"] = subs.echo_topic
    if scenario.transport.kind == "mqtt-sn":
        # Absent means MQTT, so plans of MQTT runs stay as they were.
        plan["transport"] = _sn_transport(scenario)
    return plan


def single_process_problem(scenario: Scenario) -> Optional[str]:
    """Why the scenario's measurement needs all its clients in one engine process (shards on
    other processes or hosts cannot do it), or None. The engine refuses such a shard too."""
    pubs = scenario.publishers
    if pubs.measure == "topic-sequence":
        return "publishers.measure: topic-sequence looks up each message's send record in the engine process that sent it"
    if pubs.arrival == "closed" and pubs.complete_on == "delivery":
        return "publishers.complete_on: delivery needs the subscribers in the publishers' engine process"
    return None


def _tls(scenario: Scenario) -> TlsOptions:
    return {
        "ca_file": _path_text(scenario.tls.ca),
        "cert_file": _path_text(scenario.tls.cert),
        "key_file": _path_text(scenario.tls.key),
        "insecure": scenario.tls.insecure,
        "server_name": scenario.tls.server_name,
    }


def _sn_transport(scenario: Scenario) -> MqttSnTransport:
    """The plan's MQTT-SN transport; the plan's broker host/port are then the gateway's UDP address."""
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


def planned_load_s(plan: Mapping[str, Any]) -> Optional[float]:
    """How long the plan's load phase should last, as the engine plans it (seconds), or None when
    it cannot be known in advance (closed loop with a message count: it lasts as long as the
    broker takes)."""
    length = load_engine().schedule_length_s(json.dumps(plan))
    return None if length is None else float(length)


def effective_qos(plan: Mapping[str, Any]) -> int:
    """The QoS a delivery gets: the lower of the publishers' and the subscribers' (MQTT 4.3), as
    the engine's receivers and its QoS-loss verdict use it."""
    return int(load_engine().effective_qos(json.dumps(plan)))


def plan_problems(plan: Mapping[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """Every rule the plan breaks, as the engine checks it (its validate, written once): (the
    scenario field, why, the other fields the rule reads)."""
    found = json.loads(load_engine().plan_problems(json.dumps(plan)))
    return [(str(p["field"]), str(p["message"]), tuple(str(r) for r in p["related"])) for p in found]


def packet_sizes(plan: Mapping[str, Any]) -> dict[str, int]:
    """Bytes of each packet the plan's clients send, as the engine encodes them (publisher 0 and
    subscriber 0 at the plan's QoS): connect, connack, subscribe, publish, publish_overhead,
    payload, puback, pubrec, pubrel, pubcomp, pingreq, disconnect."""
    return {str(key): int(value) for key, value in json.loads(load_engine().packet_sizes(json.dumps(plan))).items()}


def split_plan(plan: Plan, shards: int) -> list[Plan]:
    """`shards` plans that together cover the clients of `plan`'s own shard: shard k of n gets
    the contiguous index range [lo + floor(k*N/n), lo + floor((k+1)*N/n)) of each role, so every
    shard computes its share alone and the ranges tile the whole without overlap."""
    if not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards: must be a whole number of 1 or more (got {shards!r})")
    pieces = []
    for k in range(shards):
        piece = json.loads(json.dumps(plan))  # deep copy of plain JSON data
        for role in ("publishers", "subscribers"):
            low, high = plan["shard"][role]
            width = high - low
            piece["shard"][role] = [low + math.floor(k * width / shards), low + math.floor((k + 1) * width / shards)]
        pieces.append(piece)
    return pieces


def parse_cpus(text: str) -> set[int]:
    """A CPU list as taskset -c takes it ("1", "0,2", "2-3") as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def cpus_problem(text: str) -> Optional[str]:
    """Why the engine cannot be pinned to `text` on this host, or None when it can."""
    cpus, allowed = parse_cpus(text), os.sched_getaffinity(0)
    missing = sorted(cpus - allowed)
    if missing:
        return f"CPU {', '.join(map(str, missing))} is not one this process may run on ({_cpu_list(allowed)})"
    return None


def _cpu_list(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


@contextmanager
def _pinned(cpus: Optional[set[int]]) -> Iterator[None]:
    # The engine's worker threads are spawned by the thread that calls run_shard and inherit its
    # affinity; pid 0 is that calling thread, so the rest of the process keeps its own CPUs.
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def run(plan: Plan, progress: Optional[ProgressCallback] = None, *, broker_url: Optional[str] = None,
        cpus: Optional[set[int]] = None) -> RunOutcome:
    """Runs one shard and summarizes it, its threads on `cpus` when given. Ctrl-C during the run
    comes back as status "interrupted", not as an exception. An exception from `progress` stops
    the run and is raised once the engine has stopped. Raises BrokerUnreachable, HostCannotRun
    and PlanRejected."""
    plan_json = json.dumps(plan)

    def forward(snapshot_json: str) -> None:
        if progress is not None:
            progress(json.loads(snapshot_json))

    try:
        with _pinned(cpus):
            result_json = run_shard_raw(plan_json, forward if progress is not None else None)
    except ConnectionError as error:
        raise unreachable(plan, str(error), broker_url) from None
    except OSError as error:  # after ConnectionError, its subclass
        raise HostCannotRun(str(error)) from None
    except ValueError as error:
        raise PlanRejected(str(error)) from None
    return summarize(plan, result_json)


def ensure_open_files(connections: int) -> None:
    """Room for `connections` sockets in this process and the processes it starts afterwards
    (a launched broker inherits the limit). Raises HostCannotRun saying what to change."""
    try:
        load_engine().ensure_open_files(connections)
    except OSError as error:
        raise HostCannotRun(str(error)) from None


def summarize(plan: Plan, result_json: str) -> RunOutcome:
    engine = load_engine()
    summary_json = engine.summarize(json.dumps(plan), result_json)
    return RunOutcome(plan=plan, result=json.loads(result_json), summary=json.loads(summary_json))


def merge_results(shard_results_json: list[str]) -> str:
    """One raw result from those of several shards of a plan (counters and histograms add)."""
    return str(load_engine().merge_results(shard_results_json))


def histogram_stats(encoded: str) -> dict[str, Any]:
    return json.loads(load_engine().histogram_stats(encoded))


def unreachable(plan: Plan, message: str, broker_url: Optional[str] = None) -> BrokerUnreachable:
    """The BrokerUnreachable for the engine's connect failure `message` on `plan` (at `broker_url`,
    else the plan's own address), said in the user's terms with what to do."""
    url = broker_url or _plan_url(plan)
    return BrokerUnreachable(url, _reason(message, url, mqtt5=plan["mqtt"]["version"] == 5))


def _plan_url(plan: Plan) -> str:
    broker = plan["broker"]
    websocket = broker.get("websocket")
    if websocket:
        return f"{'wss' if broker.get('tls') else 'ws'}://{broker['host']}:{broker['port']}{websocket['path']}"
    scheme = "mqtts" if broker.get("tls") else "mqtt"
    return f"{scheme}://{broker['host']}:{broker['port']}"


def _reason(message: str, url: str, mqtt5: bool = False) -> str:
    # The engine's one-line reason may already name the address; don't say it twice.
    text = message.strip().splitlines()[0] if message.strip() else "connection failed"
    for prefix in (f"cannot connect to {url}:", "cannot connect:"):
        if text.lower().startswith(prefix.lower()):
            text = text[len(prefix):].strip()
    return _with_remedy(text, url, mqtt5)


# What the first byte of a peer that is not an MQTT broker usually is.
_FOREIGN_FIRST_BYTES = {ord("H"): "looks like HTTP", 0x15: "a TLS alert: it speaks TLS, use mqtts://", 0x16: "a TLS handshake: it speaks TLS, use mqtts://"}


def _with_remedy(text: str, url: str, mqtt5: bool) -> str:
    """The engine's connect failure said in the user's terms, with what to do about it: a peer
    that is not MQTT (its first byte read back from the decoder's complaint), a broker that does
    not speak MQTT 5, a certificate signed by a CA the client was not given."""
    flags = re.search(r"invalid fixed header flags 0x([0-9a-f]+) for packet type (\d+)", text)
    if flags:
        first = int(flags.group(2)) << 4 | int(flags.group(1), 16)
        like = _FOREIGN_FIRST_BYTES.get(first) or (f"first byte {chr(first)!r}" if 32 < first < 127 else f"first byte {first:#04x}")
        return f"the peer at {url} answered with something that is not MQTT ({like}); is it an MQTT broker's port? ({text})"
    if re.search(r"invalid packet type 0\b", text):
        return f"the peer at {url} answered with something that is not MQTT; is it an MQTT broker's port? ({text})"
    if mqtt5 and re.search(r"reason code 0x1 is not valid in packet type 2", text):
        return (f"the broker refused MQTT 5 with MQTT 3.1.1's 'unacceptable protocol version': it does not speak MQTT 5; "
                f"use --mqtt-version 3 (mqtt.version: 3) ({text})")
    if mqtt5 and "closed the connection before CONNACK" in text:
        return f"{text}; if it does not speak MQTT 5, use --mqtt-version 3 (mqtt.version: 3)"
    if "unknown CA" in text:
        return f"{text}; give its CA with --ca FILE (tls.ca), or --insecure (tls.insecure) to skip verification"
    return text
