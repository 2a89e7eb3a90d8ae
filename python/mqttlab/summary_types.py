"""summary.json as Python sees it.

The engine writes the summary (`crates/mqttlab-engine/src/summary.rs`); its JSON Schema is
docs/schema/summary.schema.json. The TypedDicts below mirror that schema field for field and type
for type (tests/test_schemas.py fails when they drift apart), so mypy checks the keys code reads
and a notebook gets completion on `mqttlab.run(...).summary`.

After the engine has written its part, the run adds sections of its own (the network it measured,
the capture, resources, routing, the defaults the scenario followed, the cluster). `add_section`
is the only way they get in: it refuses any name that is not one of them, so nothing the engine
computed is overwritten by Python.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, TypedDict, cast, get_args
from typing_extensions import NotRequired


class Stats(TypedDict):
    count: int
    min_us: int
    max_us: int
    mean_us: float
    stdev_us: float
    p50_us: int
    p90_us: int
    p99_us: int
    p999_us: int
    p9999_us: int


class OkFailed(TypedDict):
    ok: int
    failed: int


class ConnectionCounts(TypedDict):
    publishers: OkFailed
    subscribers: OkFailed
    lost: int
    reconnected: int
    sessions_resumed: int


class Messages(TypedDict):
    sent: int
    acked: int
    dropped: int
    dropped_receive_maximum: int
    received: int
    expected: int
    delivered: int
    lost: int
    duplicated: int
    out_of_order: int
    out_of_order_resent: int  # of those, MQTT-SN messages whose datagram was sent again
    unexpected: int
    retained: int
    retransmitted: int
    late: int
    unmeasured: int
    completion_timeouts: int


class Measurement(TypedDict):
    method: str
    pacing: str
    latency_from: str
    complete_on: Optional[str]
    think_s: Optional[float]
    deadline_s: Optional[float]
    receive_stamp: str  # "kernel" (arrival in the host's stack, plain TCP) or "client" (read handled)
    send_stamp: str  # "kernel" (the PUBLISH leaving the host's stack) or "client" (the engine's stamp before its write)
    send_stamp_why: str
    send_stamps: NotRequired[Optional["SendStampCounts"]]  # with kernel send stamps


class SendStampCounts(TypedDict):
    kernel: int  # measured deliveries timed from the kernel's send stamp
    client: int  # from the engine's, the kernel's not read when they arrived


class Rates(TypedDict):
    sent_per_s: float
    acked_per_s: float
    received_per_s: float


class Violation(TypedDict):
    kind: str
    count: int
    detail: str


class ErrorKind(TypedDict):
    kind: str
    count: int
    example: str


class GeneratorSummary(TypedDict):
    cpu_user_s: float
    cpu_sys_s: float
    cpu_per_msg_us: float
    threads: int
    max_thread_cpu_share: float
    schedule_lag_p99_us: Optional[int]
    schedule_lag_max_us: Optional[int]
    late_sends: int
    submission: str
    sends_per_submission: Optional[float]
    submission_wait_max_us: Optional[int]
    socket_full_s: float  # broker back-pressure: the time sockets held the load's bytes back
    back_pressure_share: float  # ... as a share of the publishers' connection-time


class Bytes(TypedDict):
    mqtt_out: int
    mqtt_in: int
    websocket_out: int
    websocket_in: int


class RoundTrip(TypedDict):
    sent: int
    replies: int
    lost: int
    duplicated: int


class Spread(TypedDict):
    count: int
    p50: float
    p99: float
    max: float


class OfflineSummary(TypedDict):
    subscribers: int
    periods: int
    returned: int
    sessions_resumed: int
    sessions_lost: int
    sessions_expired: int
    owed: int
    delivered: int
    not_delivered: int
    expired: int  # MQTT 5 message expiry ran out while away: not owed
    earlier: int
    drain_s: Optional[Spread]
    drain_rate_per_s: Optional[Spread]


class RetainedSummary(TypedDict):
    subscribers: int
    expected: int
    deleted: int  # deleted topics the subscribers' filters match: owed nothing
    not_deleted: int  # messages got for them anyway (retained_not_deleted)
    delivered: int
    stale: int
    missing: int
    duplicated: int
    unflagged: int
    complete: int
    first_s: Optional[Spread]
    all_s: Optional[Spread]


class WillSummary(TypedDict):
    exits: int
    graceful: int
    expected: int
    delivered: int
    missing: int
    duplicated: int
    unexpected: int
    early: int
    late: int


Status = Literal["completed", "incomplete", "interrupted", "broker_lost", "failed"]
# Best to worst, as the engine orders them when it merges shards.
STATUS_ORDER: tuple[str, ...] = get_args(Status)


class BrokerLimits(TypedDict):
    """What the broker announced in its MQTT 5 CONNACK; None: not announced (the spec's default)."""

    receive_maximum: Optional[int]
    maximum_qos: Optional[int]
    retain_available: Optional[bool]
    maximum_packet_size: Optional[int]
    topic_alias_maximum: Optional[int]
    server_keep_alive: Optional[int]
    session_expiry_interval: Optional[int]
    wildcard_subscription_available: Optional[bool]
    subscription_identifiers_available: Optional[bool]
    shared_subscription_available: Optional[bool]
    assigned_client_identifier: bool


class ChurnSummary(TypedDict):
    opened: int
    failed: int
    completed: int
    taken_over: int  # visits the broker closed while another visit on their id was under way
    rate_per_s: float
    planned_rate_per_s: float


class TakeoverSummary(TypedDict):
    taken_over: int  # second connections with the subscriber's client id that got their CONNACK
    session_present: int  # ... whose CONNACK said session present
    old_closed: int  # old connections the broker closed within close_limit_s of the new CONNACK
    old_kept: int  # ... still open then (takeover_old_kept)
    disconnect_taken_over: int  # MQTT 5: DISCONNECT 0x8E (Session taken over) on the old connection
    failed: int  # second connections that could not connect
    close_limit_s: float


class GroupSplit(TypedDict):
    """How a shared group's messages split over its members."""

    group: str
    members: int
    delivered: int
    most: int
    least: int
    most_share: float
    least_share: float


class ReasonSeen(TypedDict):
    packet: str
    code: int
    name: str
    count: int


class EngineSummary(TypedDict):
    """What the engine writes: every key of docs/schema/summary.schema.json."""

    status: Status
    error: Optional[str]
    generator_limited: bool
    generator_limited_reasons: list[str]
    warmup_s: float
    measured_s: float
    connections: ConnectionCounts
    messages: Messages
    measurement: Measurement
    rates: Rates
    latency: dict[str, Optional[Stats]]
    violations: list[Violation]
    errors: list[ErrorKind]
    generator: GeneratorSummary
    bytes: Bytes
    round_trip: Optional[RoundTrip]
    offline: NotRequired[Optional[OfflineSummary]]  # offline sessions only (subscribers.offline)
    retained: NotRequired[Optional[RetainedSummary]]  # retained reads only (subscribers.retained)
    wills: NotRequired[Optional[WillSummary]]  # wills only (publishers.will)
    broker_limits: NotRequired[Optional[BrokerLimits]]  # MQTT 5: the broker's CONNACK
    reason_codes: list[ReasonSeen]
    shared_groups: NotRequired[list[GroupSplit]]  # shared subscriptions only
    churn: NotRequired[Optional[ChurnSummary]]  # connection churn only
    takeover: NotRequired[Optional[TakeoverSummary]]  # session takeover only (subscribers.takeover)


class Summary(EngineSummary, total=False):
    """summary.json: the engine's part and the sections the run adds (docs/results.md), each only
    when the run had it."""

    network: dict[str, Any]  # mqttlab.netem.run_link: the emulated link, probed before and after
    capture: dict[str, Any]  # the packet capture's analysis, or why there is none
    resources: dict[str, Any]  # broker and generator CPU and memory (results.summarize_resources)
    routing: dict[str, Any]  # which publishers reach which subscribers (routing.RoutingCheck)
    defaults_followed: dict[str, str]  # scenario fields left to their defaults, and what they became
    distributed: dict[str, Any]  # shards, hosts, missing shards, latency clock (mqttlab.distributed)
    faults: list[dict[str, Any]]  # each fault of scenario.faults: when, and the recovery (mqttlab.environment.faults)
    promises: list[dict[str, Any]]  # the protocol's promises about state, judged (mqttlab.promises)
    state_memory: dict[str, Any]  # the broker's memory per queued or retained message (mqttlab.state_memory)


SectionName = Literal["network", "capture", "resources", "routing", "defaults_followed", "distributed", "faults", "promises", "state_memory"]
RUN_SECTIONS: frozenset[str] = frozenset(get_args(SectionName))


def add_section(summary: dict[str, Any], name: SectionName, value: Any) -> None:
    """Adds one of the run's own sections to an engine summary. Any other name is a bug: the
    engine's figures are the engine's."""
    if name not in RUN_SECTIONS:
        raise ValueError(f"{name!r} is not a section the run adds to summary.json (one of {', '.join(sorted(RUN_SECTIONS))})")
    summary[name] = value


def typed(summary: dict[str, Any]) -> Summary:
    """The summary the engine and the run wrote, seen through its types (no copy, no check)."""
    return cast(Summary, summary)
