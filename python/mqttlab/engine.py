"""The one door to the compiled engine (`mqttlab._engine`, imported here only): splits plans into
shards, runs one shard and summarizes it, and answers what the engine knows (a plan's problems,
template expansion, topic matching, the receivers a plan owes) so that Python never recodes it.
Everything structured crosses the boundary as JSON text, errors as data (their `details`).
Plans come from mqttlab.planning."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Optional

from mqttlab.plan_types import RunPlan
from mqttlab.scenario.fields import BrokerAddress

Plan = RunPlan
ProgressCallback = Callable[[dict[str, Any]], None]


class EngineUnavailable(RuntimeError):
    """The compiled module mqttlab._engine is not built or not installed."""


class PlanRejected(ValueError):
    """The engine refused a plan. The scenario validation should have caught it: a bug."""


class HostCannotRun(RuntimeError):
    """This host cannot give the run what it needs (file descriptors for its connections)."""


@dataclass(frozen=True)
class ConnectFailure:
    """Why the engine's clients could not connect, as the engine says it: `details` for programs
    (`kind`, and fields such as `first_byte`, `connack_code`, `suback_code`, `certificate`: conn.rs ConnectError),
    `message` for people. Plain data, so it crosses to and from Dask workers as it is."""

    message: str
    details: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.details.get("kind", "io"))

    @classmethod
    def of(cls, error: BaseException) -> "ConnectFailure":
        """The failure the compiled engine raised (its `details` attribute, JSON)."""
        details = getattr(error, "details", None)
        return cls(str(error), json.loads(details) if isinstance(details, str) else {})


class BrokerUnreachable(ConnectionError):
    """The broker could not be reached or refused before any load was sent; `kind` is the
    engine's name for why (ConnectFailure.kind)."""

    def __init__(self, url: str, reason: str, kind: str = "io") -> None:
        self.url = url
        self.reason = reason
        self.kind = kind
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


def engine_commit() -> Optional[str]:
    """The commit the compiled engine was built from (`+modified`: with changes to its sources not
    yet committed then); None without the engine, or for one built before it said."""
    try:
        return str(getattr(load_engine(), "__commit__", None) or "") or None
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
    (ConnectionError, OSError, ValueError, each with its `details`): `run` says what each means."""
    return str(load_engine().run_shard(plan_json, progress))


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
        raise unreachable(plan, ConnectFailure.of(error), broker_url) from None
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


def calibrate(messages: int, rate: float) -> dict[str, Any]:
    """The instrument's own overhead on this host through a loopback pair (calibration.rs):
    `send_us`, `loopback_us`, `wake_us`, `client_us` (histogram stats or None), `stamped`.
    Raises ConnectionError (an OSError) when the pair or its timestamps cannot be had."""
    return dict(json.loads(load_engine().calibrate(messages, rate)))


def unreachable(plan: Plan, failure: ConnectFailure, broker_url: Optional[str] = None) -> BrokerUnreachable:
    """The BrokerUnreachable for the engine's connect `failure` on `plan` (at `broker_url`, else
    the plan's own address), said in the user's terms with what to do."""
    url = broker_url or _plan_url(plan)
    return BrokerUnreachable(url, _reason(failure, url, mqtt5=plan["mqtt"]["version"] == 5), failure.kind)


def _plan_url(plan: Plan) -> str:
    broker = plan["broker"]
    websocket = broker.get("websocket")
    scheme = ("wss" if broker.get("tls") else "ws") if websocket else ("mqtts" if broker.get("tls") else "mqtt")
    return BrokerAddress(scheme, str(broker.get("host")), int(broker.get("port") or 0), websocket["path"] if websocket else None).url


def _reason(failure: ConnectFailure, url: str, mqtt5: bool = False) -> str:
    # The engine's one-line reason may already name the address; don't say it twice.
    message = failure.message.strip()
    text = message.splitlines()[0] if message else "connection failed"
    for prefix in (f"cannot connect to {url}:", "cannot connect:"):
        if text.lower().startswith(prefix.lower()):
            text = text[len(prefix):].strip()
    return _with_remedy(failure, text, url, mqtt5)


# What the first byte of a peer that is not an MQTT broker usually is.
_FOREIGN_FIRST_BYTES = {ord("H"): "looks like HTTP", 0x15: "a TLS alert: it speaks TLS, use mqtts://", 0x16: "a TLS handshake: it speaks TLS, use mqtts://"}


def _with_remedy(failure: ConnectFailure, text: str, url: str, mqtt5: bool) -> str:
    """The engine's connect failure said in the user's terms, with what to do about it, chosen by
    its kind and fields: a peer that is not MQTT (what its first byte looks like), a broker that
    does not speak MQTT 5, a certificate signed by a CA the client was not given."""
    kind, details = failure.kind, failure.details
    if kind == "not_mqtt":
        first = details.get("first_byte")
        like = "" if first is None else " (" + (_FOREIGN_FIRST_BYTES.get(first) or (f"first byte {chr(first)!r}" if 32 < first < 127 else f"first byte {first:#04x}")) + ")"
        return f"the peer at {url} answered with something that is not MQTT{like}; is it an MQTT broker's port? ({text})"
    if mqtt5 and kind in ("protocol", "connack") and details.get("connack_code") == 1:
        return (f"the broker refused MQTT 5 with MQTT 3.1.1's 'unacceptable protocol version': it does not speak MQTT 5; "
                f"use --mqtt-version 3 (mqtt.version: 3) ({text})")
    if mqtt5 and kind == "closed":
        return f"{text}; if it does not speak MQTT 5, use --mqtt-version 3 (mqtt.version: 3)"
    if kind == "tls" and details.get("certificate") == "unknown_issuer":
        return f"{text}; give its CA with --ca FILE (tls.ca), or --insecure (tls.insecure) to skip verification"
    return text
