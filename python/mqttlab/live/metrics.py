"""Live metrics in the Prometheus / OpenMetrics text format (docs/metrics.md), served with
prometheus-client while a run or a suite goes.

Nothing is counted twice: every scrape is built from the run's live state (live.state.RunState,
or the live.json of the run a suite has under way) by a custom collector, so the figures are the
engine's own counters and the final ones are those of summary.json."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator, Mapping, Optional, Union

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server

RUN_LABELS = ("run", "scenario", "broker", "shard")
PHASES = ("connecting", "waiting", "warmup", "measuring", "draining", "done")
LATENCY_QUANTILES = (("0.5", "p50_us"), ("0.9", "p90_us"), ("0.99", "p99_us"), ("0.999", "p999_us"), ("1", "max_us"))

# Everything the exporter can expose, name -> help; the dashboard test checks its panels against it.
METRICS = {
    "mqttlab_messages": "Messages by kind (sent, acked, received, dropped), engine counters of the whole run",
    "mqttlab_errors": "Errors, failed connections and lost connections",
    "mqttlab_rate_messages_per_second": "Messages per second over the last progress interval, by kind",
    "mqttlab_e2e_latency_recent_seconds": "End-to-end latency quantiles (0.5, 0.99) of the last progress interval, from the engine's live histogram",
    "mqttlab_e2e_latency_seconds": "End-to-end latency quantiles of the measured window (warm-up excluded); once the run has ended",
    "mqttlab_deliveries_owed": "Deliveries owed to subscribers for the messages sent so far (sent x fan-out; the exact count from summary.json once ended)",
    "mqttlab_deliveries_outstanding": "Deliveries owed and not received yet: in flight, or lost",
    "mqttlab_messages_lost": "Deliveries lost (owed, never delivered in time); once the run has ended",
    "mqttlab_messages_duplicated": "Duplicate deliveries; once the run has ended",
    "mqttlab_connections": "Clients connected now, by role",
    "mqttlab_clients_planned": "Clients of the plan (this shard), by role",
    "mqttlab_connections_failed": "Connections that failed; once the run has ended",
    "mqttlab_generator_backlog_seconds": "How far the sends are behind their open-loop schedule, estimated from the counters",
    "mqttlab_publishers_held_back": "Publisher connections whose socket holds the load's bytes back now: the broker not reading (back-pressure, not the generator's lateness)",
    "mqttlab_broker_back_pressure_seconds": "Seconds the publishers' sockets were full, summed over their connections (summary.json's generator.socket_full_s); once ended",
    "mqttlab_broker_back_pressure_ratio": "Share of the publishers' connection time their sockets were full (generator.back_pressure_share); once ended",
    "mqttlab_generator_schedule_lag_p99_seconds": "Schedule lag p99 of the sends; once the run has ended",
    "mqttlab_generator_limited": "1 when the generator could not keep its schedule (the figures describe mqttlab); once ended",
    "mqttlab_process_cpu_cores": "CPU used by the process tree, in cores, by process (broker, generator)",
    "mqttlab_process_rss_bytes": "Resident memory of the process tree, by process (broker, generator)",
    "mqttlab_run_phase": "1 for the run's current phase",
    "mqttlab_run_progress_ratio": "Fraction of the planned load done",
    "mqttlab_run_time_left_seconds": "Estimated seconds until the run's results are written",
    "mqttlab_run_finished": "1 once the run has written its results (the figures are final)",
    "mqttlab_suite_runs": "Runs of the suite by state (planned, done, failed, left)",
    "mqttlab_suite_time_left_seconds": "Estimated seconds until the suite has run everything",
    "mqttlab_suite_progress_ratio": "Fraction of the suite's runs done",
}

StateSource = Callable[[], Mapping[str, Any]]  # {"runs": [live state dicts], "suite": suite_state or None}
# The families built here; the Metric base class has no add_metric.
_Family = Union[CounterMetricFamily, GaugeMetricFamily]


class MetricsError(Exception):
    """A --metrics address that cannot be parsed or bound."""


def parse_address(text: str) -> tuple[str, int]:
    """("127.0.0.1", 9464) from "127.0.0.1:9464", ":9464" (all interfaces) or "[::1]:9464"."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise MetricsError(f"--metrics: expected HOST:PORT such as 127.0.0.1:9464 (got {text!r})")
    return (host.strip("[]") or "0.0.0.0"), int(port)


class _Collector:
    def __init__(self, source: StateSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        try:
            state = self.source()
        except Exception:  # noqa: BLE001 — a broken scrape must not break the run being scraped
            state = {}
        families: dict[str, _Family] = {}
        for run in state.get("runs") or []:
            _run_metrics(run, families)
        if state.get("suite"):
            _suite_metrics(state["suite"], families)
        yield from families.values()


def _family(families: dict[str, _Family], name: str, labels: tuple[str, ...], counter: bool = False) -> _Family:
    if name not in families:
        kind = CounterMetricFamily if counter else GaugeMetricFamily
        families[name] = kind(name, METRICS[name], labels=list(labels))
    return families[name]


def _add(families: dict[str, _Family], name: str, labels: Mapping[str, str], value: Any, counter: bool = False, **extra: str) -> None:
    if value is None:
        return
    _family(families, name, (*labels, *extra), counter).add_metric([*labels.values(), *extra.values()], float(value))


def _run_metrics(run: Mapping[str, Any], families: dict[str, _Family]) -> None:
    labels = {k: str(run.get(k) or "") for k in RUN_LABELS}
    snapshot = run.get("snapshot") or {}
    total, interval, connected = snapshot.get("total") or {}, snapshot.get("interval") or {}, snapshot.get("connected") or {}
    plan, final = run.get("plan") or {}, run.get("final")
    for kind in ("sent", "acked", "received", "dropped"):
        _add(families, "mqttlab_messages", labels, total.get(kind, 0), counter=True, kind=kind)
        if kind != "dropped":
            _add(families, "mqttlab_rate_messages_per_second", labels, (run.get("rates") or {}).get(kind), kind=kind)
    _add(families, "mqttlab_errors", labels, total.get("errors", 0), counter=True)
    for quantile, key in (("0.5", "e2e_p50_us"), ("0.99", "e2e_p99_us")):
        value = interval.get(key)
        _add(families, "mqttlab_e2e_latency_recent_seconds", labels, None if value is None else value / 1e6, quantile=quantile)
    owed = None
    if final is not None and final["messages"].get("expected") is not None:
        owed = final["messages"]["expected"]
    elif plan.get("owed_per_message") is not None:
        owed = round(total.get("sent", 0) * plan["owed_per_message"])
    _add(families, "mqttlab_deliveries_owed", labels, owed, counter=True)
    if owed is not None:
        received = final["messages"].get("delivered") if final is not None else total.get("received", 0)
        _add(families, "mqttlab_deliveries_outstanding", labels, max(0, owed - (received or 0)))
    for role in ("publishers", "subscribers"):
        _add(families, "mqttlab_connections", labels, connected.get(role, 0), role=role)
        _add(families, "mqttlab_clients_planned", labels, plan.get(role), role=role)
    _add(families, "mqttlab_generator_backlog_seconds", labels, run.get("generator_backlog_s"))
    _add(families, "mqttlab_publishers_held_back", labels, connected.get("held_back"))
    for process, figures in (run.get("resources") or {}).items():
        _add(families, "mqttlab_process_cpu_cores", labels, figures.get("cpu_cores"), process=process)
        _add(families, "mqttlab_process_rss_bytes", labels, figures.get("rss_bytes"), process=process)
    phase = "done" if final is not None else snapshot.get("phase")
    for name in PHASES:
        _add(families, "mqttlab_run_phase", labels, 1 if name == phase else 0, phase=name)
    progress = run.get("progress") or {}
    _add(families, "mqttlab_run_progress_ratio", labels, progress.get("fraction"))
    _add(families, "mqttlab_run_time_left_seconds", labels, progress.get("left_s"))
    _add(families, "mqttlab_run_finished", labels, 0 if final is None else 1)
    if final is None:
        return
    messages = final["messages"]
    _add(families, "mqttlab_messages_lost", labels, messages.get("lost"), counter=True)
    _add(families, "mqttlab_messages_duplicated", labels, messages.get("duplicated"), counter=True)
    _add(families, "mqttlab_connections_failed", labels, final.get("connections_failed"), counter=True)
    for quantile, key in LATENCY_QUANTILES:
        value = (final.get("e2e_us") or {}).get(key)
        _add(families, "mqttlab_e2e_latency_seconds", labels, None if value is None else value / 1e6, quantile=quantile)
    lag = final.get("schedule_lag_p99_us")
    _add(families, "mqttlab_generator_schedule_lag_p99_seconds", labels, None if lag is None else lag / 1e6)
    _add(families, "mqttlab_generator_limited", labels, 1 if final.get("generator_limited") else 0)
    _add(families, "mqttlab_broker_back_pressure_seconds", labels, final.get("socket_full_s"))
    _add(families, "mqttlab_broker_back_pressure_ratio", labels, final.get("back_pressure_share"))


def _suite_metrics(suite: Mapping[str, Any], families: dict[str, _Family]) -> None:
    labels = {"suite": str(suite.get("suite") or "")}
    for state, key in (("planned", "runs"), ("done", "done"), ("failed", "failed"), ("left", "left")):
        _add(families, "mqttlab_suite_runs", labels, suite.get(key), state=state)
    _add(families, "mqttlab_suite_time_left_seconds", labels, suite.get("left_s"))
    if suite.get("runs"):
        _add(families, "mqttlab_suite_progress_ratio", labels, suite["done"] / suite["runs"])


class MetricsServer:
    """The HTTP endpoint (any path answers with the metrics), from `start()` until `stop()`.

    `linger` keeps it up that long after `stop()` is called, so a scraper that comes every 15 s
    still sees the final figures of a run that ended between two scrapes."""

    def __init__(self, address: str, source: StateSource, linger: float = 0.0) -> None:
        self.host, self.port = parse_address(address)
        self.linger = linger
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(source))
        self._server: Any = None
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "MetricsServer":
        try:
            self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as error:
            raise MetricsError(f"--metrics: cannot listen on {self.host}:{self.port}: {error.strerror or error}") from None
        self.port = self._server.server_port  # port 0 = any free one
        return self

    def stop(self, linger: Optional[float] = None) -> None:
        if self._server is None:
            return
        wait = self.linger if linger is None else linger
        if wait > 0:
            try:
                time.sleep(wait)
            except KeyboardInterrupt:
                pass
        self._server.shutdown()
        self._server.server_close()
        self._server = None

    def __enter__(self) -> "MetricsServer":
        return self if self._server is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        # After an error or Ctrl-C nobody waits for final figures.
        self.stop(None if exc[0] is None else 0.0)
