"""The RunPlan as Python sees it: the engine's contract (`crates/mqttlab-engine/src/plan.rs`),
whose JSON Schema is docs/schema/run-plan.schema.json. The TypedDicts below mirror that schema
key for key, required keys in the base classes and the keys with an engine default in the
`total=False` ones (tests/test_schemas.py fails when they drift apart), so mypy checks the keys
code reads from a plan (`planning.plan_of` returns one)."""

from __future__ import annotations

from typing import Literal, Optional, TypedDict, Union

Arrival = Literal["constant", "poisson", "closed", "window"]
CompleteOn = Literal["ack", "delivery"]
Submission = Literal["direct", "batched"]
Measure = Literal["header", "topic-sequence"]
SnTopicIds = Literal["normal", "short", "predefined"]
Role = Literal["publishers", "subscribers"]  # a shard's client index ranges are per role


class TlsOptions(TypedDict, total=False):
    ca_file: Optional[str]
    cert_file: Optional[str]
    insecure: bool
    key_file: Optional[str]
    server_name: Optional[str]


class WebSocketOptions(TypedDict, total=False):
    path: str


class BrokerTarget(TypedDict, total=False):
    # Absent until the broker is up (planning.bind_broker); a run needs both.
    host: str
    port: int
    tls: Optional[TlsOptions]
    websocket: Optional[WebSocketOptions]


class _MqttOptions(TypedDict):
    clean_start: bool
    connect_timeout_ms: int
    keepalive_s: int
    version: int


class MqttOptions(_MqttOptions, total=False):
    maximum_packet_size: int
    password: Optional[str]
    receive_maximum: int
    session_expiry_s: int
    topic_alias_maximum: int
    username: Optional[str]


class FixedPayload(TypedDict):
    dist: Literal["fixed"]
    size: int


class UniformPayload(TypedDict):
    dist: Literal["uniform"]
    min: int
    max: int


class NormalPayload(TypedDict):
    dist: Literal["normal"]
    mean: float
    std: float


class ExponentialPayload(TypedDict):
    dist: Literal["exponential"]
    mean: float


PayloadSize = Union[FixedPayload, UniformPayload, NormalPayload, ExponentialPayload]


class _Publishers(TypedDict):
    arrival: Arrival
    client_id: str
    count: int
    inflight: int
    payload: PayloadSize
    qos: int
    rate: float
    topic: str


class _Will(TypedDict):
    at_ms: int
    leave: Literal["close", "reset", "silent", "graceful"]
    topic: str


class Will(_Will, total=False):
    delay_s: int
    fraction: float
    qos: int


class UserProperties(TypedDict):
    count: int
    size: int


class Publishers(_Publishers, total=False):
    will: Will
    complete_on: CompleteOn
    content_type: Optional[str]
    no_local: bool
    payload_format: Optional[int]
    user_properties: Optional[UserProperties]
    measure: Measure
    message_expiry_s: int
    messages: Optional[int]
    reply_filter: Optional[str]
    request_response: bool
    retain: bool
    think_us: int


class _Subscribers(TypedDict):
    client_id: str
    count: int
    filters: list[str]
    qos: int


class _Offline(TypedDict):
    at_ms: int
    duration_ms: int


class Offline(_Offline, total=False):
    fraction: float
    every_ms: int


class _Takeover(TypedDict):
    at_ms: int


class Takeover(_Takeover, total=False):
    fraction: float
    every_ms: int


class _RetainedRead(TypedDict):
    at_ms: int


class RetainedRead(_RetainedRead, total=False):
    spread_ms: int
    deleted: float


class Subscribers(_Subscribers, total=False):
    echo_topic: Optional[str]
    offline: Offline
    retain_as_published: bool
    retain_handling: int
    retained: RetainedRead
    subscription_identifier: bool
    takeover: Takeover


class _Load(TypedDict):
    duration_ms: int
    grace_ms: int
    seed: int


class Load(_Load, total=False):
    connect_rate: float
    deadline_ms: Optional[int]
    warmup_ms: int


class _Shard(TypedDict):
    publishers: list[int]  # [first, end) client indices
    subscribers: list[int]


class Shard(_Shard, total=False):
    source_addresses: list[str]
    start_at_unix_ns: Optional[int]


class Options(TypedDict, total=False):
    kernel_send_timestamps: bool
    kernel_timestamps: bool
    latency_publishers: Optional[list[int]]
    max_threads: int
    progress_interval_ms: int
    reconnect: bool
    record_latency: bool
    send_ahead_us: int
    submission: Submission
    tcp_nodelay: bool
    threads: int
    timer_resolution_us: int


class MqttTransport(TypedDict):
    kind: Literal["mqtt"]


class _MqttSnTransport(TypedDict):
    kind: Literal["mqtt-sn"]


class MqttSnTransport(_MqttSnTransport, total=False):
    predefined: dict[str, str]
    qos_minus_one: bool
    retries: int
    retry_ms: int
    topic_ids: SnTopicIds


Transport = Union[MqttTransport, MqttSnTransport]


class _Churn(TypedDict):
    clients: int
    rate: float
    stay_ms: int


class Churn(_Churn, total=False):
    clean_start: bool
    leave: Literal["graceful", "close"]
    subscribe: Optional[str]


class _RunPlan(TypedDict):
    broker: BrokerTarget
    load: Load
    mqtt: MqttOptions
    publishers: Publishers
    shard: Shard
    subscribers: Subscribers


class RunPlan(_RunPlan, total=False):
    """What the engine runs: every key of docs/schema/run-plan.schema.json."""

    churn: Optional[Churn]
    options: Options
    transport: Transport
