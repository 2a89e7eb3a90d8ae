"""The compiled engine (crates/mqttlab-py). Every structured value crosses as a JSON string, so
the Python side never holds one object per message: only plans, summaries and encoded histograms."""

from typing import Callable, Optional

__version__: str
__commit__: str

def run_shard(plan_json: str, progress: Optional[Callable[[str], None]] = None) -> str:
    """Runs one shard of a RunPlan against the broker and returns its raw result (JSON).

    Releases the GIL while the load runs. `progress` is called with a JSON snapshot every
    `options.progress_interval_ms`. Ctrl-C stops the run cleanly: the partial result comes back
    with status "interrupted" (no exception). Invalid plans (a plan without a broker address
    among them) raise ValueError; a broker that cannot be reached at all raises ConnectionError
    with a one-line reason; a host that cannot open the shard's connections (file limit) raises
    OSError saying what to change. Each carries `details`, JSON for programs: `kind` (`plan`,
    `host`, or the connect failure's: `refused`, `tls`, `not_mqtt`, `connack`, ...) and its
    fields (`first_byte`, `connack_code`, `certificate`)."""

def ensure_open_files(connections: int) -> None:
    """Raises this process's open-file limit (RLIMIT_NOFILE) so that `connections` sockets and a
    margin fit: the soft limit up to the hard one, the hard one too where allowed (root), up to
    fs.nr_open. Processes started afterwards (a launched broker) inherit it. OSError when the
    host cannot give enough, saying what is needed and what to change."""

def expand_template(template: str, index: int, client_id: str) -> str:
    """A client-id, topic or filter template expanded for client `index`: `%i` = index, `%c` =
    client id, `%%` = a percent sign; any other `%` stays."""

def topic_matches(topic_filter: str, topic: str) -> bool:
    """Whether an MQTT topic filter (`+`, `#`) matches a topic name; a leading wildcard does not
    match a topic starting with `$` (MQTT 4.7.2)."""

def owed_units(plan_json: str, max_checks: int) -> Optional[str]:
    """The plan's receiving units, as the engine's accounting owes them, as JSON: `owed` (per
    publisher the unit names owed its messages: `sub:<i>` or `share:<group>:<filter>`) and
    `members` (per unit its subscriber indices). None when working it out would take more than
    `max_checks` (publisher topic x wildcard filter) matches."""

def effective_qos(plan_json: str) -> int:
    """The QoS a plan's deliveries get: the lower of the publishers' and the subscribers' (MQTT 4.3)."""

def schedule_length_s(plan_json: str) -> Optional[float]:
    """How long the plan's publishers' schedule lasts from the start of the load, in seconds:
    `load.duration_ms`, else an open-loop count at its rate; None for a closed loop with a count."""

def plan_problems(plan_json: str) -> str:
    """Every rule the plan breaks, as the engine checks it before a run (JSON list of `field`,
    `message`, `related`: the scenario's field names, durations in seconds). ValueError for text
    that is not a plan at all."""

def packet_sizes(plan_json: str) -> str:
    """Bytes of each packet the plan's clients send (publisher 0 and subscriber 0, at the plan's
    QoS), as JSON: connect, connack (no properties), subscribe, publish, publish_overhead, payload,
    puback, pubrec, pubrel, pubcomp, pingreq, disconnect. ValueError for a plan it cannot read."""

def merge_results(results_json: list[str]) -> str:
    """Exact merge of raw shard results of one plan: counters and histograms add."""

def summarize(plan_json: str, result_json: str) -> str:
    """Delivery accounting against the plan's expected fan-out (late deliveries past
    `load.deadline_ms` counted in `lost`), histogram statistics, rates, the generator-limited
    verdict and `measurement` (method `header` / `topic-sequence`, `open` / `closed` pacing,
    deadline), as summary JSON. Plan keys: `publishers.measure`, `publishers.arrival: "closed"`
    with `think_us` and `complete_on`, `load.deadline_ms` (docs/scenarios.md)."""

def histogram_stats(encoded: str) -> str:
    """Statistics (count, min, max, mean, stdev, percentiles in µs) of one HdrHistogram V2 base64 value."""

def histogram_merge(encoded: list[str]) -> str:
    """Sum of HdrHistogram V2 base64 values, encoded the same way."""

def calibrate(messages: int, rate: float) -> str:
    """The instrument's own overhead on this host, as JSON: `messages` sent at `rate` a second
    through a loopback TCP pair, each stamped by the sender, the kernel on leaving and arriving,
    and the reading task; `send_us`, `loopback_us`, `wake_us`, `client_us` (histogram stats, None
    when nothing was stamped), `stamped` (messages with all four stamps)."""

def serve_broker(config_json: str) -> None:
    """Runs the embedded rumqttd broker with a rumqttd Config (as JSON) until the process is
    terminated. Meant for a child process: `python -m mqttlab.brokers.embedded CONFIG.json`."""

def serve_gateway(config_json: str) -> None:
    """Runs the transparent MQTT-SN gateway (UDP in front of an MQTT 3.1.1 broker) with its
    config as JSON until the process is terminated. Meant for a child process:
    `python -m mqttlab.brokers.gateway_main CONFIG.json`."""

def serve_link(config_json: str) -> None:
    """Runs the user-space emulated link between two existing TUN devices (each in its network
    namespace) until the process is terminated: per-direction delay, jitter, loss, rate and queue.
    Writes its counters as JSON to `counters_path` every 100 ms and at the end. Invalid configs
    raise ValueError; a device that cannot be attached raises OSError. Meant for a child process:
    `python -m mqttlab.netem.link CONFIG.json`."""

def smc_explore(config_json: str, progress: Optional[Callable[[str], None]] = None) -> str:
    """Runs synchronous random-walk clients over the paper's client model (mqttlab.smc.explore)
    and returns one row per message plus the functional failures (JSON). Releases the GIL;
    `progress` gets ``{"messages": n, "elapsed_s": s}`` about every 100 ms. Ctrl-C stops the
    clients at their next message and returns what was measured with status "interrupted".
    Invalid configs raise ValueError naming every bad field."""

def smc_profile_run(config_json: str, progress: Optional[Callable[[str], None]] = None) -> str:
    """Runs clients that follow a usage profile in real time (mqttlab.smc.verify) and returns,
    per client, its sequences of `sequence_length` messages with their latencies, outcomes and
    completion times (JSON). Stops at the cap of messages, when every client has decided every
    `sprt` test given, or on Ctrl-C. Same GIL, progress and error behaviour as `smc_explore`."""
