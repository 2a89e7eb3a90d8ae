"""Finding results directories (single runs or whole suites) and reading each run's headline
figures: the numbers a comparison puts side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from mqttlab.pacing import mode_of
from mqttlab.results import MANIFEST, Results, ResultsError, load_results


class ComparisonError(Exception):
    """Nothing to compare, or a request the runs cannot answer; the message says which."""


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    unit: str
    higher_is_better: bool


# The headline figures of a run, in the order tables show them.
METRICS = (
    # Deliveries per second. In open loop the schedule's offered rate sets it, so a higher figure is
    # merit only where the generator saturates the broker (`merit`).
    Metric("throughput", "delivered rate", "msg/s", True),
    Metric("latency_p50", "latency p50", "ms", False),
    Metric("latency_p99", "latency p99", "ms", False),
    Metric("latency_max", "latency max", "ms", False),
    # The mean is what seeds 001, 003 (emqtt-bench's avg) and 004 reported; percentiles are ours.
    Metric("latency_mean", "latency mean", "ms", False),
    Metric("loss", "loss", "%", False),
    # Open loop: a send that falls due while the in-flight window is full is dropped, never sent late.
    Metric("dropped", "sends dropped", "%", False),
    Metric("broker_cpu", "broker CPU", "cores", False),
    Metric("broker_rss_peak", "broker RSS peak", "MB", False),
    # Seed 003 reported the broker's mean memory over the run, not its peak.
    Metric("broker_rss_mean", "broker RSS mean", "MB", False),
    Metric("generator_cpu", "generator CPU", "cores", False),
)
# How runs with faults (docs/faults.md) came through them; compared only where runs had faults.
FAULT_METRICS = (
    Metric("fault_outage", "fault outage", "s", False),
    Metric("fault_recovery", "recovery after the fault", "s", False),
)
# The state a broker keeps (docs/state.md); compared only where runs measured it.
STATE_METRICS = (
    Metric("offline_delivered", "held messages delivered", "%", True),
    Metric("drain_p99", "offline drain p99", "ms", False),
    Metric("retained_delivered", "retained values delivered", "%", True),
    Metric("retained_all_p99", "retained, SUBSCRIBE → all p99", "ms", False),
    Metric("wills_delivered", "wills delivered", "%", True),
    Metric("will_p50", "exit → will p50", "ms", False),
)
# A round trip's own loss (messages whose echo never came back, lost either way), beside `loss`,
# which is one way (what the subscriber did not get); compared only where runs timed round trips.
ROUND_TRIP_METRICS = (Metric("round_trips_lost", "round trips lost", "%", False),)
METRIC_BY_KEY = {metric.key: metric for metric in METRICS + FAULT_METRICS + STATE_METRICS + ROUND_TRIP_METRICS}


def metrics_for(runs: Iterable[RunFigures]) -> tuple[Metric, ...]:
    """The figures a comparison of `runs` shows: the headline ones, the faults' when any run had
    one, and each state and round-trip figure some run measured."""
    runs = list(runs)
    faults = FAULT_METRICS if any(run.figures.get("fault_outage") is not None for run in runs) else ()
    measured = tuple(metric for metric in STATE_METRICS + ROUND_TRIP_METRICS if any(run.figures.get(metric.key) is not None for run in runs))
    return METRICS + faults + measured


def merit(metric: Metric, saturating: bool) -> Optional[bool]:
    """Whether a higher figure is better (True), worse (False), or neither (None): the delivered
    rate of an open-loop run is what the schedule offered less what went missing, no figure of merit."""
    if metric.key == "throughput" and not saturating:
        return None
    return metric.higher_is_better


# Which latency a run is judged by: the round trip when the scenario asked for one (its purpose,
# and measured on one clock), else end-to-end when anyone subscribed, else the acknowledgement.
LATENCY_MEASURES = ("rtt", "e2e", "pubcomp", "puback")


@dataclass
class RunFigures:
    path: Path
    scenario: str
    broker: str
    broker_version: Optional[str]
    started_at: str
    status: str
    # The flag the comparison judges by: as the run recorded it (summary.json), or as the engine's
    # current rule reads the run again where a paper's verdicts judge it (reproductions/flags.py).
    generator_limited: bool
    latency_measure: Optional[str]
    figures: dict[str, Optional[float]]
    results: Results = field(repr=False)
    violations: dict[str, int] = field(default_factory=dict)  # kind -> count: promises the broker broke

    @property
    def generator_limited_as_recorded(self) -> bool:
        return bool(self.results.summary.get("generator_limited"))

    @property
    def saturating(self) -> bool:
        """Whether the generator sent as fast as the broker took it (closed loop, window filling)
        rather than on a schedule."""
        return not mode_of((self.results.scenario.get("publishers") or {}).get("arrival")).scheduled

    @property
    def offered_per_s(self) -> Optional[float]:
        """Deliveries per second the open-loop schedule offered: publishers × rate × the receivers
        owed each message; None in closed loop or window filling (nothing is offered in advance)."""
        scenario = self.results.scenario
        publishers, subscribers = scenario.get("publishers") or {}, (scenario.get("subscribers") or {}).get("count")
        # Without subscribers the figure is the acknowledged (sent) publishes: one per message.
        copies = (self.results.summary.get("routing") or {}).get("owed_per_message") if subscribers else 1.0
        if self.saturating or copies is None or not publishers.get("count"):
            return None
        return float(publishers["count"]) * float(publishers.get("rate") or 0.0) * float(copies)


def find_result_directories(paths: Iterable[Path]) -> list[Path]:
    """Every results directory in `paths`: a path is itself one, or is searched (a suite)."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise ComparisonError(f"{path}: no such file or directory")
        if (path / MANIFEST).is_file():
            found.append(path)
            continue
        inside = sorted(manifest.parent for manifest in path.rglob(MANIFEST))
        if not inside:
            raise ComparisonError(f"{path}: holds no results directory (no {MANIFEST} in it or below)")
        found += inside
    return list(dict.fromkeys(found))


def broker_label(broker: dict[str, Any]) -> str:
    """The broker as comparisons group it: its name, with its configuration when that is not
    the default `tuned` one and with its limits, so that runs of a broker configured
    differently are never averaged together."""
    name = str(broker.get("name") or "unknown")
    config = broker.get("config") or {}
    details = []
    if config.get("mode") and config["mode"] != "tuned":
        details.append(Path(str(config["file"])).name if config["mode"] == "file" and config.get("file") else str(config["mode"]))
    if config.get("version_pin"):
        details.append(str(config["version_pin"]))
    if config.get("persistence") is not None:
        details.append(f"persistence {'on' if config['persistence'] else 'off'}")
    limits = broker.get("limits") or {}
    if limits.get("cpus") is not None:
        details.append(f"{limits['cpus']:g} CPU")
    if limits.get("cpuset") is not None:
        details.append(f"CPUs {limits['cpuset']}")
    if limits.get("memory_bytes") is not None:
        details.append(f"{limits['memory_bytes'] / 2**20:.0f} MiB")
    return f"{name} ({', '.join(details)})" if details else name


def read_run(directory: Path) -> RunFigures:
    results = load_results(directory)
    summary, manifest = results.summary, results.manifest
    broker = manifest.get("broker") or {}
    measure = latency_measure(summary)
    latency = (summary.get("latency") or {}).get(measure) if measure else None
    figures: dict[str, Optional[float]] = {
        "throughput": _throughput(results),
        "latency_p50": _ms(latency, "p50_us"),
        "latency_p99": _ms(latency, "p99_us"),
        "latency_max": _ms(latency, "max_us"),
        "latency_mean": _ms(latency, "mean_us"),
        "latency_stdev": _ms(latency, "stdev_us"),
        "loss": _loss_percent(summary.get("messages") or {}),
        "dropped": _dropped_percent(summary.get("messages") or {}),
        "round_trips_lost": _round_trips_lost_percent(summary.get("round_trip") or {}),
    }
    resources = summary.get("resources") or {}
    broker_resources = resources.get("broker") or {}
    if served_beside(manifest):
        # Another broker served the MQTT-SN clients (RSMB beside the named one), and the named one
        # carried none of the run's messages: the run is that broker's, under the run's
        # launch.limits as well, with its own CPU and memory (runs recorded before the gateway
        # was sampled apart have none).
        broker = {**(manifest.get("gateway") or {}), "limits": broker.get("limits")}
        broker_resources = resources.get("gateway") or {}
    generator_resources = resources.get("generator") or {}
    figures["broker_cpu"] = broker_resources.get("mean_cpu_share")
    peak = broker_resources.get("peak_rss_bytes")
    figures["broker_rss_peak"] = peak / 1e6 if peak is not None else None
    average = broker_resources.get("mean_rss_bytes")
    figures["broker_rss_mean"] = average / 1e6 if average is not None else None
    figures["generator_cpu"] = generator_resources.get("mean_cpu_share")
    figures.update(_fault_figures(summary))
    figures.update(_state_figures(summary))
    return RunFigures(
        path=directory,
        scenario=str(manifest.get("scenario") or results.scenario.get("name") or directory.name),
        broker=broker_label(broker),
        broker_version=broker.get("version"),
        started_at=str(manifest.get("started_at") or ""),
        status=results.status,
        generator_limited=bool(summary.get("generator_limited")),
        latency_measure=measure,
        figures=figures,
        results=results,
        violations={str(v.get("kind")): int(v.get("count") or 0) for v in summary.get("violations") or []},
    )


def served_beside(manifest: dict[str, Any]) -> bool:
    """Whether the run's MQTT-SN clients were served by a broker of their own launched beside the
    manifest's broker (transport.gateway: rsmb in front of another broker), which then carried
    none of their messages. Results written before the gateway entry said `serves_clients` are
    known by the gateway's name: RSMB always serves its MQTT-SN clients itself."""
    gateway = manifest.get("gateway") or {}
    if not gateway.get("serves_clients", gateway.get("name") == "rsmb"):
        return False
    return gateway.get("pid") is None or gateway.get("pid") != (manifest.get("broker") or {}).get("pid")


def read_runs(paths: Iterable[Path]) -> list[RunFigures]:
    runs = []
    for directory in find_result_directories(paths):
        try:
            runs.append(read_run(directory))
        except ResultsError as error:
            raise ComparisonError(str(error)) from None
    return sorted(runs, key=lambda run: (run.started_at, str(run.path)))


def latency_measure(summary: dict[str, Any]) -> Optional[str]:
    """The latency a run is compared by: the first of LATENCY_MEASURES its summary counted."""
    latency = summary.get("latency") or {}
    for name in LATENCY_MEASURES:
        if (latency.get(name) or {}).get("count"):
            return name
    return None


MIN_RATE_WINDOW_S = 0.5


def _throughput(results: Results) -> Optional[float]:
    """Deliveries per second when anyone subscribed; acknowledged (QoS 1/2) or sent (QoS 0)
    publishes per second otherwise. None for a measured phase under MIN_RATE_WINDOW_S: the load's
    end was taken to the millisecond (before 2026-11-26 to the coordinator's 25 ms look), so the
    rate of a 24 ms run of 1,000 messages is off by as much as its timing."""
    if float(results.summary.get("measured_s") or 0.0) < MIN_RATE_WINDOW_S:
        return None
    rates = results.summary.get("rates") or {}
    subscribers = (results.scenario.get("subscribers") or {}).get("count", 1)
    if subscribers:
        return rates.get("received_per_s")
    acked = rates.get("acked_per_s")
    return acked if acked else rates.get("sent_per_s")


def _ms(latency: Optional[dict[str, Any]], key: str) -> Optional[float]:
    if not latency or latency.get(key) is None:
        return None
    return float(latency[key]) / 1000.0


def _fault_figures(summary: dict[str, Any]) -> dict[str, Optional[float]]:
    """A run's faults as figures: the longest outage, the slowest recovery (none when a fault never
    recovered in the run)."""
    faults = [fault for fault in summary.get("faults") or [] if fault.get("applied")]
    if not faults:
        return {}
    recoveries = [fault.get("recovered_after_s") for fault in faults]
    return {
        "fault_outage": max(float(fault["lasted_s"]) for fault in faults),
        "fault_recovery": max(float(r) for r in recoveries if r is not None) if None not in recoveries else None,
    }


def _state_figures(summary: dict[str, Any]) -> dict[str, Optional[float]]:
    """A run's state workloads as figures (docs/state.md): what was delivered of what the broker
    had to keep, and how fast."""
    def share(done: float, owed: float) -> Optional[float]:
        return 100.0 * done / owed if owed else None

    def p99_ms(spread: Optional[dict[str, Any]]) -> Optional[float]:
        return spread["p99"] * 1000 if spread else None

    figures: dict[str, Optional[float]] = {}
    if summary.get("offline"):
        offline = summary["offline"]
        figures["offline_delivered"] = share(offline["delivered"], offline["owed"])
        figures["drain_p99"] = p99_ms(offline.get("drain_s"))
    if summary.get("retained"):
        retained = summary["retained"]
        figures["retained_delivered"] = share(retained["delivered"], retained["expected"])
        figures["retained_all_p99"] = p99_ms(retained.get("all_s"))
    if summary.get("wills"):
        figures["wills_delivered"] = share(summary["wills"]["delivered"], summary["wills"]["expected"])
        figures["will_p50"] = _ms((summary.get("latency") or {}).get("will"), "p50_us")
    return figures


def _dropped_percent(messages: dict[str, Any]) -> Optional[float]:
    """The share of scheduled sends dropped (due while the window was full, or while disconnected)."""
    scheduled = float(messages.get("sent") or 0) + float(messages.get("dropped") or 0)
    return 100.0 * float(messages.get("dropped") or 0) / scheduled if scheduled else None


def _round_trips_lost_percent(round_trip: dict[str, Any]) -> Optional[float]:
    sent = round_trip.get("sent")
    if not sent:
        return None
    return 100.0 * float(round_trip.get("lost") or 0) / float(sent)


def _loss_percent(messages: dict[str, Any]) -> Optional[float]:
    expected = messages.get("expected")
    if not expected:
        return None
    return 100.0 * float(messages.get("lost") or 0) / float(expected)
