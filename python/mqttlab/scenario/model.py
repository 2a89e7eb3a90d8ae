"""The scenario as a pydantic model: what a user writes, with the defaults of the quick-start job.

Rules about one field live here; rules that relate several fields live in rules.py."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, model_validator
from pydantic_core import PydanticCustomError

from mqttlab.scenario.network import NetworkConditions
from mqttlab.scenario.fields import (
    MAX_PAYLOAD,
    Broker,
    ByteAmount,
    CpuList,
    ClientIdTemplate,
    Duration,
    ExistingFile,
    FilterTemplate,
    MqttVersion,
    Size,
    TopicTemplate,
    WholeSeconds,
    is_url,
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=False)


class MqttSettings(_Section):
    """Protocol settings shared by every client."""

    version: MqttVersion = Field(default=3, description="3 = MQTT 3.1.1, 5 = MQTT 5.0")
    username: Optional[str] = None
    password: Optional[str] = None
    keepalive: WholeSeconds = Field(default=60.0, le=65535, description="Whole seconds, 0 = no keep-alive")
    clean_start: bool = True
    session_expiry: WholeSeconds = Field(default=0.0, le=4294967295, description="MQTT 5 only")
    connect_timeout: Duration = Field(default=10.0, gt=0)
    receive_maximum: int = Field(
        default=65535, ge=1, le=65535,
        description="MQTT 5: the QoS 1/2 messages each client lets the broker have unacknowledged towards it; more is a violation")
    maximum_packet_size: Optional[int] = Field(
        default=None, ge=1, le=268435460,
        description="MQTT 5: the largest packet each client accepts; a larger one from the broker is a violation. null = no limit")
    topic_alias_maximum: int = Field(
        default=0, ge=0, le=65535,
        description="MQTT 5 topic aliases: subscribers accept this many from the broker, publishers name their topic by an alias "
                    "when the broker accepts one. 0 = off")


class TlsSettings(_Section):
    """Used when the broker URL is mqtts://. Relative paths are relative to the scenario file."""

    ca: ExistingFile = None
    cert: ExistingFile = None
    key: ExistingFile = None
    insecure: bool = Field(default=False, description="Skip certificate verification")
    server_name: Optional[str] = Field(default=None, description="SNI and verification name, default the broker host")

    def is_default(self) -> bool:
        return self == TlsSettings()


class FixedPayload(_Section):
    dist: Literal["fixed"] = "fixed"
    size: Size


class UniformPayload(_Section):
    dist: Literal["uniform"]
    min: Size
    max: Size

    @model_validator(mode="after")
    def _ordered(self) -> "UniformPayload":
        if self.min > self.max:
            raise PydanticCustomError("mqttlab", f"min ({self.min}) must not exceed max ({self.max})")
        return self


class NormalPayload(_Section):
    dist: Literal["normal"]
    mean: ByteAmount = Field(gt=0)
    std: ByteAmount = Field(ge=0)


class ExponentialPayload(_Section):
    dist: Literal["exponential"]
    mean: ByteAmount = Field(gt=0)


PAYLOAD_KINDS = ("fixed", "uniform", "normal", "exponential")

DEFAULT_QOS: Final = 1  # Final: mypy keeps it Literal[1], so it fits Literal[0, 1, 2]
DEFAULT_DURATION = 10.0
DEFAULT_WARMUP = 2.0
# Every payload starts with publisher index (u32), sequence (u32), intended send time (u48 µs of
# the engine's clock) and the lag of the actual send (u16).
HEADER_BYTES = 16


def _payload_shorthand(value: object) -> object:
    # `payload: 64` and `payload: "1KB"` are short for {dist: fixed, size: ...}; a mapping without
    # `dist` says what it means by its keys: {size: 20} is fixed, {min: .., max: ..} uniform.
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return {"dist": "fixed", "size": value}
    if isinstance(value, dict) and "dist" not in value:
        if "size" in value:
            return {"dist": "fixed", **value}
        if "min" in value and "max" in value:
            return {"dist": "uniform", **value}
    return value


def _payload_schema_with_shorthand(schema: dict) -> None:
    # The before-validator accepts a bare size; say so in the published schema too.
    distributions = {"oneOf": schema.pop("oneOf"), "discriminator": schema.pop("discriminator")}
    schema["anyOf"] = [{"type": "integer", "minimum": 1}, {"type": "string"}, distributions]


Payload = Annotated[
    Union[FixedPayload, UniformPayload, NormalPayload, ExponentialPayload],
    Field(discriminator="dist"),
    BeforeValidator(_payload_shorthand),
]


class Publishers(_Section):
    count: int = Field(default=10, ge=0, le=1_000_000)
    client_id: ClientIdTemplate = Field(default="mqttlab-pub-%i", description="%i = publisher index")
    topic: TopicTemplate = Field(default="bench/%i", description="%i = publisher index, %c = client id")
    qos: Literal[0, 1, 2] = DEFAULT_QOS
    retain: bool = False
    rate: float = Field(default=100.0, ge=0, description="Messages per second per publisher (open loop; not used with arrival: closed or window)")
    arrival: Literal["constant", "poisson", "closed", "window"] = Field(
        default="constant",
        description="Open loop: constant or poisson schedule at `rate`. closed: the next message is sent when the previous one completed "
                    "(complete_on) plus think_time. window: a message whenever the in-flight window (inflight) has room, intended when its "
                    "slot opened (as fast as the socket takes them at QoS 0): a generator's saturating mode",
    )
    complete_on: Literal["ack", "delivery"] = Field(
        default="ack",
        description="Closed loop: ack = PUBACK/PUBCOMP (QoS 1/2); delivery = also received by every subscriber owed it (the echo back in round-trip mode)",
    )
    think_time: Duration = Field(default=0.0, ge=0, le=3600, description="Closed loop: pause between a message's completion and the next send")
    measure: Literal["header", "topic-sequence"] = Field(
        default="header",
        description="header: a 16-byte header in every payload (payload >= 16 B). topic-sequence: each publisher on its own topic, the payload carries the sequence number modulo 256^size (payload >= 1 B; one engine process)",
    )
    messages: Optional[int] = Field(default=None, ge=1, description="Per publisher; null = run for load.duration")
    payload: Payload = Field(
        default_factory=lambda: FixedPayload(size=64),
        description='Bytes (64, "1KB") or a size distribution; with measure: header every payload starts with a 16-byte header',
        json_schema_extra=_payload_schema_with_shorthand,
    )
    inflight: int = Field(default=100, ge=1, le=65535, description="QoS>0 window; a send due while it is full is dropped")
    reply_filter: Optional[FilterTemplate] = Field(
        default=None, description="Round-trip mode: each publisher subscribes here (%i = publisher index) and times the echoes of its own messages; needs subscribers.echo_topic, "
                                  "or request_response"
    )
    request_response: bool = Field(
        default=False, description="Round-trip mode by MQTT 5 request/response: each message names reply_filter (a topic) as its Response Topic, with "
                                   "Correlation Data; subscribers answer on the topic each request names (no echo_topic)")
    will: Optional["Will"] = Field(default=None, description="Wills (docs/state.md): a last will on every publisher, and when and how the chosen ones leave")
    message_expiry: Optional[WholeSeconds] = Field(
        default=None, ge=1, le=4294967295,
        description="MQTT 5 Message Expiry Interval (whole seconds) on every message: a message delivered after it expired is a violation")
    user_properties: Optional["UserProperties"] = Field(
        default=None, description="MQTT 5 user properties on every message, which the broker must pass on unchanged and in order")
    content_type: Optional[str] = Field(default=None, max_length=65535, description="MQTT 5 Content Type on every message, passed on unchanged")
    payload_format: Optional[Literal[0, 1]] = Field(
        default=None, description="MQTT 5 Payload Format Indicator on every message (0 bytes, 1 UTF-8; the payloads are binary, so a broker "
                                  "that checks refuses 1 with 0x99), passed on unchanged")
    no_local: bool = Field(default=False, description="MQTT 5 No Local: each publisher also subscribes to its own topic with No Local; "
                                                      "a message of its own delivered back is a violation")


class Will(_Section):
    """A last will on every publisher, and the exit of the chosen ones (docs/state.md)."""

    topic: TopicTemplate = Field(description="The will's topic: %i = publisher index, %c = client id; subscribers watch it with their filters")
    qos: Literal[0, 1, 2] = 0
    leave: Literal["close", "reset", "silent", "graceful"] = Field(
        description="close: the socket closed without DISCONNECT; reset: the connection reset; silent: nothing sent or read any more "
                    "(the broker must notice after 1.5 x mqtt.keepalive); graceful: DISCONNECT, after which no will may come")
    at: Duration = Field(description="When the publishers leave, from the start of the load phase (warm-up included)")
    fraction: float = Field(default=1.0, gt=0, le=1, description="The share of the publishers that leave, spread evenly over their indices")
    delay: Duration = Field(default=0.0, ge=0, description="MQTT 5 Will Delay Interval (whole seconds): the broker waits this long after the exit")


class UserProperties(_Section):
    """User properties on every message: `count` pairs, each value `size` bytes."""

    count: int = Field(ge=1, le=1000)
    size: Size = Field(default=8, le=65535)


Publishers.model_rebuild()  # its `will` and `user_properties` name classes defined after it


class Offline(_Section):
    """Offline sessions (docs/state.md): subscribers with persistent sessions leave on a schedule
    while the publishers go on, then come back into their sessions and drain what the broker queued."""

    at: Duration = Field(description="The first DISCONNECT, from the start of the load phase (warm-up included)")
    duration: Duration = Field(gt=0, description="How long each stays away before it reconnects into its session")
    fraction: float = Field(default=1.0, gt=0, le=1, description="The share of the subscribers that go offline, spread evenly over their indices")
    every: Optional[Duration] = Field(default=None, gt=0, description="Again every this long (DISCONNECT to DISCONNECT) while the load lasts; absent = once")


class Takeover(_Section):
    """Session takeover (docs/state.md): subscribers with persistent sessions open a second
    connection with their own client id while the first is still open; the broker must close the
    old one and the session must go on in the new one."""

    at: Duration = Field(description="The first second connection, from the start of the load phase (warm-up included)")
    fraction: float = Field(default=1.0, gt=0, le=1, description="The share of the subscribers that take their sessions over, spread evenly over their indices")
    every: Optional[Duration] = Field(default=None, gt=0, description="Again every this long while the load lasts; absent = once")


class RetainedRead(_Section):
    """A retained read (docs/state.md): the subscribers subscribe only after the publishers set
    their topics' retained values, and receive the broker's retained store."""

    at: Duration = Field(description="The first SUBSCRIBE, from the start of the load phase, after the publishers' last update")
    spread: Duration = Field(default=0.0, description="The subscribers' SUBSCRIBEs spread evenly over this long; 0 = all at once (a storm)")
    deleted: float = Field(default=0.0, ge=0, le=1, description=(
        "The share of the publishers (spread evenly over their indices) that delete their topic's retained value after their last "
        "update, with an empty retained PUBLISH: a reader is owed nothing for those topics"))


class Subscribers(_Section):
    count: int = Field(default=10, ge=0, le=1_000_000)
    client_id: ClientIdTemplate = Field(default="mqttlab-sub-%i", description="%i = subscriber index")
    filters: Optional[list[FilterTemplate]] = Field(
        default=None, min_length=1, description="+, # and $share/GROUP/... allowed; absent = the publishers' topic template (each subscriber %i its publisher %i)"
    )
    qos: Optional[Literal[0, 1, 2]] = Field(default=None, description="absent = publishers.qos, so deliveries are not silently downgraded")
    echo_topic: Optional[TopicTemplate] = Field(
        default=None, description="Round-trip mode: each subscriber republishes what it receives to this topic (%i = subscriber index); needs publishers.reply_filter"
    )
    offline: Optional[Offline] = Field(
        default=None, description="Offline sessions: when subscribers leave and come back into their persistent sessions (needs mqtt.clean_start: false)"
    )
    takeover: Optional[Takeover] = Field(
        default=None, description="Session takeover: when subscribers open a second connection with their client id (needs mqtt.clean_start: false)"
    )
    retained: Optional[RetainedRead] = Field(
        default=None, description="A retained read: the subscribers subscribe late and get the retained store (needs publishers.retain and publishers.messages)"
    )
    subscription_identifier: bool = Field(
        default=False, description="MQTT 5: each subscription carries Subscription Identifier index + 1, which every delivery must carry back")
    retain_as_published: bool = Field(default=False, description="MQTT 5 Retain As Published: live messages keep the publisher's RETAIN flag")
    retain_handling: Literal[0, 1, 2] = Field(
        default=0, description="MQTT 5 Retain Handling: 0 retained messages at every subscribe, 1 only at a new subscription, 2 never")


class Churn(_Section):
    """Connection churn (docs/state.md): `rate` connections a second over the load, each staying
    `stay`, on the ids churn-0 … churn-<clients - 1> in turn."""

    rate: float = Field(gt=0, le=10_000, description="Connections opened per second")
    stay: Duration = Field(default=0.1, ge=0, le=3600, description="How long each stays connected")
    clients: int = Field(default=100, ge=1, le=1_000_000, description="Client ids reused in turn (with clean_start false, the same sessions return)")
    clean_start: bool = True
    subscribe: Optional[FilterTemplate] = Field(
        default=None, description="A filter each subscribes to on arrival and unsubscribes from before it leaves (%i = its number): "
                                  "subscription flapping, SUBACK and UNSUBACK timed")
    leave: Literal["graceful", "close"] = Field(default="graceful", description="graceful: DISCONNECT; close: the socket closed without one")


class Load(_Section):
    duration: Optional[Duration] = Field(
        default=None, gt=0, description="The whole load phase, warm-up included; absent = 10s, or with publishers.messages as long as sending them takes"
    )
    warmup: Optional[Duration] = Field(default=None, description="Excluded from the statistics; absent = 2s, or 0s with publishers.messages (every message measured)")
    grace: Duration = Field(default=2.0, description="Wait for in-flight deliveries after the last send")
    connect_rate: float = Field(default=0.0, ge=0, description="New connections per second, 0 = unlimited")
    seed: int = Field(default=1, ge=0, le=2**64 - 1)
    deadline: Optional[Duration] = Field(
        default=None, gt=0, description="A delivery later than this after its message's intended send time counts as late, and late counts as lost; needs grace >= deadline"
    )


class Options(_Section):
    record_latency: bool = True
    reconnect: bool = False
    timer_resolution: Duration = Field(
        default=0.0, ge=0, le=1.0,
        description="Round intended send times up to this grid (0 = exact); coarser = burstier arrivals, less generator CPU",
    )
    send_ahead: Duration = Field(
        default=50e-6, ge=0, le=0.01,
        description="When a thread wakes for a send, also send what is due within this much, each intended when it leaves "
                    "(0 = every send wakes on its own); fewer wake-ups, never a late send",
    )
    submission: Literal["direct", "batched"] = Field(
        default="direct",
        description="How sends reach the kernel: direct = one write each; batched = the sends of one wake-up, across a thread's "
                    "connections, in one io_uring submission (plain TCP; where io_uring is refused, direct, and the summary says so). "
                    "Pays where many sends fall due together, as on a timer_resolution grid",
    )
    kernel_timestamps: bool = Field(
        default=True,
        description="Receptions stamped by the kernel on arrival (plain TCP; SO_TIMESTAMPNS) and sends when their PUBLISH left the "
                    "host's stack (plain TCP, direct submission; SO_TIMESTAMPING), so latencies leave out the engine's own wake-up "
                    "and write; false = the engine's stamps (before its write, when its thread read)")
    kernel_send_timestamps: Optional[bool] = Field(
        default=None,
        description="With kernel_timestamps: sends stamped by the kernel (true) or by the engine before its write (false); "
                    "absent = by the kernel where a schedule bounds the load at 5,000 msg/s in all or less (each stamp costs "
                    "the publisher about 3 µs of CPU; docs/results.md, measurement.send_stamp)")
    tcp_nodelay: bool = Field(
        default=True,
        description="Nagle's algorithm off on the clients' connections (latency, not bandwidth, is measured); false runs clients "
                    "as most paper setups did, small segments bundled")
    threads: int = Field(
        default=0, ge=0, le=1024,
        description="Engine worker threads (0 = as many as the planned packet rate needs, at most one per core)",
    )
    generator_cpus: CpuList = Field(
        default=None,
        description="CPUs the engine's threads run on, e.g. \"1\" or \"2-3\" (a list as taskset -c takes); with "
                    "launch.limits.cpuset the broker and the generator get cores of their own instead of sharing them",
    )
    capture: bool = Field(
        default=False,
        description="Capture the run's MQTT traffic with tshark and report message bundling, as `mqttlab run --capture` "
                    "(a suite's runs too); where it cannot, the run goes on and its summary says why",
    )
    metrics: Optional[str] = Field(
        default=None, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*):[0-9]{1,5}$",
        description="Serve live Prometheus/OpenMetrics metrics at HOST:PORT during the run, as `mqttlab run --metrics` (docs/metrics.md); in a suite the suite serves them",
    )


def _transport_shorthand(value: object) -> object:
    # `transport: mqtt-sn` is short for {kind: mqtt-sn}.
    return {"kind": value} if isinstance(value, str) else value


class Transport(_Section):
    """How clients reach the broker: MQTT over TCP, or MQTT-SN v1.2 over UDP through a gateway
    (docs/mqtt-sn.md)."""

    kind: Literal["mqtt", "mqtt-sn"] = "mqtt"
    gateway: Literal["mqttlab", "paho", "rsmb"] = Field(
        default="mqttlab",
        description="MQTT-SN: mqttlab (our transparent gateway), paho (the Eclipse Paho MQTT-SN gateway, transparent), "
        "or rsmb (RSMB's own MQTT-SN listener serves the clients itself, as in seed 004; docs/mqtt-sn.md)",
    )
    topic_ids: Literal["normal", "short", "predefined"] = Field(default="normal", description="MQTT-SN: how publishers name their topic")
    predefined: dict[Annotated[int, Field(ge=1, le=65534)], str] = Field(default_factory=dict, description="MQTT-SN: topic id -> topic name")
    retry: Duration = Field(default=1.0, gt=0, description="MQTT-SN Tretry: resend an unacknowledged packet after this long")
    retries: int = Field(default=5, ge=0, le=100, description="MQTT-SN Nretry")
    qos_minus_one: bool = Field(default=False, description="MQTT-SN: publishers send at QoS -1 (publishers.qos must be 0)")


class LaunchLimits(_Section):
    """A cgroup around a launched broker, as on a small host (seed 004: 1 vCPU, 1 GiB)."""

    cpus: Optional[float] = Field(default=None, gt=0, le=1024, description="CPU quota in cores (CFS quota), e.g. 1 or 0.5")
    cpuset: CpuList = Field(default=None, description="CPUs to pin the broker to, e.g. '0' or '0-1'")
    memory: Optional[ByteAmount] = Field(default=None, gt=0, description="Memory limit, e.g. 1GiB")


class LaunchContainer(_Section):
    """How a broker given as `image:REF` runs in a container (docs/brokers.md)."""

    runtime: Literal["auto", "podman", "docker"] = Field(default="auto", description="auto = docker when its daemon answers, else podman")
    port: Optional[int] = Field(default=None, ge=1, le=65535, description="The image's MQTT port inside the container; needed for an image without a preset")
    tls_port: Optional[int] = Field(default=None, ge=1, le=65535, description="The image's MQTT-over-TLS port inside the container, if it has one")
    network: Literal["mapped", "host"] = Field(default="mapped", description="mapped = a free 127.0.0.1 port mapped to the container's; host = the host's network")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables for the container, e.g. an image's own settings (quote yes/no: \"yes\")")


class Launch(_Section):
    """How mqttlab configures a broker it launches (docs/brokers.md); not for broker URLs."""

    config: str = Field(
        default="tuned",
        description="tuned (benchmark settings, each documented), as-shipped (the package's defaults, only the listeners ours), or the path of a config file merged with mqttlab's listeners",
    )
    version: Optional[str] = Field(default=None, description="Pin a broker version where its registry offers several")
    limits: Optional[LaunchLimits] = Field(default=None, description="Run the broker in a cgroup with these CPU and memory limits")
    tls: bool = Field(default=False, description="Clients connect over the launched broker's TLS listener (a throwaway CA, the certificate verified); works with network:")
    websocket: bool = Field(default=False, description="Clients connect over the launched broker's WebSocket listener (ws://HOST:PORT/mqtt; with tls: wss://), where the broker has one (docs/brokers.md)")
    container: Optional[LaunchContainer] = Field(default=None, description="For a broker given as image:REF: the container runtime, the image's ports, the network")
    persistence: Optional[bool] = Field(
        default=None,
        description="true: the broker writes its state (sessions, queued and retained messages) to disk in the run's directory, "
        "where its launcher has persistence (docs/state.md, Persistence); false: in memory only; absent: as the config mode has it "
        "(tuned: off; as-shipped: as the package ships it)",
    )

    def is_default(self) -> bool:
        return self == Launch()


class Fault(_Section):
    """Something that breaks on purpose during the load (docs/faults.md)."""

    kind: Literal["broker-stall", "broker-restart", "link-down", "link-degrade", "clients-disconnect"] = Field(
        description="broker-stall: the broker's processes are frozen (SIGSTOP), then continued (SIGCONT); "
        "broker-restart: they are ended with `signal`, then the broker is started again as it was; "
        "link-down: the emulated link (network:) drops every packet both ways, a partition; "
        "link-degrade: the emulated link runs under the fault's `network` conditions for a while; "
        "clients-disconnect: a `fraction` of the clients' connections is torn down at once (the clients reconnect)"
    )
    at: Duration = Field(description="When it starts, from the start of the load phase (warm-up included)")
    duration: Optional[Duration] = Field(default=None, gt=0, description="How long it lasts: frozen, down before the restart, or cut; "
                                         "not for clients-disconnect, which is instantaneous")
    signal: Optional[Literal["kill", "term"]] = Field(
        default=None, description="broker-restart: kill (SIGKILL, a crash; the default) or term (SIGTERM, a clean stop)"
    )
    fraction: Optional[float] = Field(default=None, gt=0, le=1, description="clients-disconnect: the share of the connections torn down (default 1: all)")
    network: Optional[NetworkConditions] = Field(default=None, description="link-degrade: the link's conditions during the fault (delay, jitter, loss, rate, a profile), as in the scenario's network:")


class Scenario(_Section):
    """One load test: who connects, what they publish and subscribe, for how long."""

    name: str = Field(default="default", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=80)
    description: Optional[str] = None
    broker: Broker = Field(default=None, description="mqtt(s)://HOST:PORT, or a broker name to launch; absent = embedded rumqttd")
    launch: Launch = Field(default_factory=Launch, description="How a broker mqttlab launches is configured: tuned/as-shipped/file, version, CPU and memory limits")
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    tls: TlsSettings = Field(default_factory=TlsSettings)
    publishers: Publishers = Field(default_factory=Publishers)
    subscribers: Subscribers = Field(default_factory=Subscribers)
    load: Load = Field(default_factory=Load)
    options: Options = Field(default_factory=Options)
    network: Optional[NetworkConditions] = Field(default=None, description="Link conditions between clients and broker (docs/network.md); absent = loopback")
    transport: Annotated[Transport, BeforeValidator(_transport_shorthand)] = Field(
        default_factory=Transport, description="mqtt (default) or mqtt-sn (docs/mqtt-sn.md)"
    )
    faults: list[Fault] = Field(default_factory=list, description="Faults applied on the run's timeline, with their recovery measured (docs/faults.md)")
    churn: Optional["Churn"] = Field(default=None, description="Connection churn beside the steady load (docs/state.md): clients that connect, "
                                                              "maybe subscribe and unsubscribe, and leave, again and again")

    # Which absent fields took their value from another field (field path -> what it followed),
    # for the run's header and summary: a default that follows the user is said, not hidden.
    _followed: dict[str, str] = PrivateAttr(default_factory=dict)
    # The plan its check compiled (mqttlab.planning), with the scenario's JSON it was compiled
    # from: a run takes it from there instead of compiling it again, while the scenario is unchanged.
    _checked_plan: Optional[tuple[str, Any]] = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _defaults_follow_the_user(self) -> "Scenario":
        pubs, subs, load = self.publishers, self.subscribers, self.load
        followed = self._followed
        if subs.filters is None:
            if subs.count and "topic" in pubs.model_fields_set:
                followed["subscribers.filters"] = f"publishers.topic {pubs.topic!r}"
            # A fixed default filter next to a topic the user chose measured nothing (issue 17).
            # %c is the publisher's client id in a topic but the subscriber's in a filter: spell
            # it out as the publishers' client id template, so subscriber i follows publisher i.
            subs.filters = [pubs.topic.replace("%c", pubs.client_id)]
        if subs.qos is None:
            subs.qos = pubs.qos
            if pubs.qos != DEFAULT_QOS and subs.count:
                followed["subscribers.qos"] = f"publishers.qos {pubs.qos}"
        if load.duration is None and pubs.messages is None:
            load.duration = DEFAULT_DURATION
        elif load.duration is None:
            followed["load.duration"] = f"publishers.messages {pubs.messages}: no time limit, the run ends when every message is sent"
        if load.warmup is None:
            if pubs.messages is not None:
                load.warmup = 0.0
                followed["load.warmup"] = "0s (publishers.messages: every message is measured)"
            else:
                # The default warm-up fits a short run the user asked for (`--duration 1s`):
                # a fifth of it, at most the default; the header and summary say what it chose.
                assert load.duration is not None
                load.warmup = min(DEFAULT_WARMUP, round(load.duration / 5, 3))
                if load.warmup != DEFAULT_WARMUP:
                    followed["load.warmup"] = f"{load.warmup:g}s, a fifth of load.duration {load.duration:g}s (--warmup / load.warmup to choose)"
        if not is_url(self.broker) and self.tls.insecure and not self.launch.tls and self.transport.kind == "mqtt" \
                and (self.tls.ca, self.tls.cert, self.tls.key) == (None, None, None):
            # `--insecure` (or scenarios/tls.yaml) with a broker mqttlab launches means its TLS
            # listener; its throwaway CA is trusted, so the certificate is verified after all.
            self.launch.tls = True
            self.tls = TlsSettings()
            followed["launch.tls"] = "tls.insecure with a launched broker: its TLS listener, its throwaway CA verified"
        if "measure" not in pubs.model_fields_set and payload_size_bounds(pubs.payload)[0] < HEADER_BYTES and pubs.payload.dist in ("fixed", "uniform"):
            # A payload too small for the measurement header is measured by its topic and a
            # sequence number in the payload instead (seed 001's 1-byte messages).
            pubs.measure = "topic-sequence"
            followed["publishers.measure"] = f"payloads under {HEADER_BYTES} B, too small for the measurement header"
        return self

    @property
    def defaults_followed(self) -> dict[str, str]:
        return dict(self._followed)


def payload_size_bounds(payload: FixedPayload | UniformPayload | NormalPayload | ExponentialPayload) -> tuple[float, float]:
    """(smallest, largest) size a payload setting asks for; distributions without bounds give
    their mean as the lower bound (the engine raises smaller draws to the header size)."""
    if isinstance(payload, FixedPayload):
        return payload.size, payload.size
    if isinstance(payload, UniformPayload):
        return payload.min, payload.max
    return payload.mean, float(MAX_PAYLOAD)
