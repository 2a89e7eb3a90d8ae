"""A reconnect storm: every client of a running load dropped at once (the `clients-disconnect`
fault, or a `broker-restart`), then all reconnecting into their persistent sessions. Measured on
one real run (mqttlab.environment.faults does the dropping):

- time until all are back: the broker's established connections on its port, counted by the
  kernel (`ss`) every 50 ms, from the first count below the full set to the first count at it
  again;
- CONNACK latency during the storm: a canary client (outside the load) connects every 100 ms
  through the whole run and times its CONNACK; the canary's connects inside the storm window are
  set against those before it. (The engine's own CONNACK histogram holds the first connects only.)
- sessions resumed and messages lost against the QoS promise: the run's fault section
  (docs/faults.md): `sessions_resumed` of `reconnected`, and the verdict on the losses.

Written to storm.json beside the run's results directory (run/)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

STORM_FILE = "storm.json"
POLL_S = 0.05
CANARY_EVERY_S = 0.1


@dataclass
class Watch:
    """The connection counts and the canary's connects, each with its monotonic time (s)."""

    counts: list[tuple[float, int]] = field(default_factory=list)
    canary: list[tuple[float, Optional[float], Optional[str]]] = field(default_factory=list)  # (t, CONNACK ms, error)


def storm_assignments(clients: int, fault: str, at_s: float, down_s: float, rate: float, qos: int, duration_s: float) -> list[str]:
    """Half the clients publish (`rate` msg/s each), half subscribe, each to its publisher's topic,
    in persistent sessions that reconnect; the fault at `at_s`."""
    publishers = clients // 2
    spec = {"kind": fault, "at": f"{at_s:g}s"}
    if fault == "broker-restart":
        spec["duration"] = f"{down_s:g}s"
    return [f"publishers.count={publishers}", f"subscribers.count={clients - publishers}", f"publishers.rate={rate!r}",
            f"publishers.qos={qos}", f"subscribers.qos={qos}", "mqtt.clean_start=false", "options.reconnect=true",
            f"load.duration={duration_s:g}s", "load.warmup=1s", "load.grace=3s", "load.connect_rate=1000",
            "faults=" + json.dumps([spec])]


def run_storm(scenario: Any, directory: Path) -> dict[str, Any]:
    """Runs the storm scenario into directory/run and writes directory/storm.json."""
    from mqttlab import session

    directory.mkdir(parents=True, exist_ok=True)
    run_dir = directory / "run"
    session.prepare(run_dir)
    watch = Watch()
    clients = scenario.publishers.count + scenario.subscribers.count

    @contextmanager
    def display(header: str, state: Any) -> Iterator[None]:
        # The broker is launched inside the run; its address is known from the run's header on.
        found = re.search(r"\bmqtts?://([^\s:/]+):(\d+)", header)
        if found is None:
            raise RuntimeError(f"storm: no broker address in the run's header {header!r}")
        host, port = found.group(1), int(found.group(2))
        stop = threading.Event()
        threads = [threading.Thread(target=_count, args=(port, watch, stop), daemon=True),
                   threading.Thread(target=_canary, args=(host, port, watch, stop), daemon=True)]
        for thread in threads:
            thread.start()
        try:
            yield None
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=10)

    outcome = session.execute(scenario, run_dir, display=display, routing=session.routing_of(scenario))
    report = analyse(watch, clients, dict(outcome.summary))
    (directory / STORM_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def _count(port: int, watch: Watch, stop: threading.Event) -> None:
    while not stop.is_set():
        listing = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True).stdout
        watch.counts.append((time.monotonic(), listing.count("\n")))
        stop.wait(POLL_S)


def _canary(host: str, port: int, watch: Watch, stop: threading.Event) -> None:
    from mqttlab.brokers.probe import MqttProbe

    number = 0
    while not stop.is_set():
        number += 1
        began = time.monotonic()
        try:
            with MqttProbe(host, port, client_id=f"mqttlab-storm-canary-{number}", timeout=5):
                watch.canary.append((began, (time.monotonic() - began) * 1000, None))
        except Exception as error:  # noqa: BLE001 — a refused or timed-out connect is what we count
            watch.canary.append((began, None, str(error) or type(error).__name__))
        stop.wait(max(0.0, CANARY_EVERY_S - (time.monotonic() - began)))


def analyse(watch: Watch, clients: int, summary: dict[str, Any]) -> dict[str, Any]:
    """The storm's figures from the watch and the run's summary."""
    # The canary's own connection may be among the counted ones: the full set is `clients` or more.
    full = [t for t, n in watch.counts if n >= clients]
    dropped_at = next((t for t, n in watch.counts if full and t > full[0] and n < clients), None)
    back_at = next((t for t, n in watch.counts if dropped_at is not None and t > dropped_at and n >= clients), None)
    low = min((n for t, n in watch.counts if dropped_at is not None and t >= dropped_at and (back_at is None or t <= back_at)), default=None)
    before = [ms for t, ms, _ in watch.canary if ms is not None and full and full[0] <= t < (dropped_at or float("inf"))]
    during = [(ms, error) for t, ms, error in watch.canary if dropped_at is not None and dropped_at <= t <= (back_at or float("inf"))]
    fault = (summary.get("faults") or [{}])[0]
    connections = summary.get("connections") or {}
    return {
        "clients": clients,
        "fault": fault,
        "all_connected_before": bool(full),
        "fewest_connected": low,
        "time_to_all_back_s": round(back_at - dropped_at, 3) if dropped_at is not None and back_at is not None else None,
        # The fault itself takes time: a broker down for `duration`, or `ss -K` tearing connections
        # down one by one; what is left after it is the reconnecting alone.
        "fault_lasted_s": fault.get("lasted_s"),
        "all_back": back_at is not None,
        "count_resolution_s": POLL_S,
        "canary_connack_ms_before": _stats([ms for ms in before]),
        "canary_connack_ms_during": _stats([ms for ms, error in during if ms is not None]),
        "canary_failures_during": sum(1 for ms, error in during if ms is None),
        "canary_errors": sorted({error for _, _, error in watch.canary if error})[:3],
        "reconnected": connections.get("reconnected"),
        "sessions_resumed": connections.get("sessions_resumed"),
        "sessions": fault.get("sessions"),
        "verdict": fault.get("verdict"),
        "lost_of_sent_during": fault.get("lost_of_sent_during"),
        "messages": {k: (summary.get("messages") or {}).get(k) for k in ("sent", "dropped", "expected", "delivered", "lost", "duplicated", "retransmitted")},
        "status": summary.get("status"),
        "generator_limited": summary.get("generator_limited"),
    }


def _stats(values: list[float]) -> Optional[dict[str, Any]]:
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"count": len(ordered), "p50": at(0.5), "p90": at(0.9), "max": round(ordered[-1], 2)}


def storm_lines(report: dict[str, Any]) -> list[str]:
    """The storm as `mqttlab storm` prints it."""
    fault = report["fault"]
    lines = [f"{fault.get('kind', 'fault')}: {report['clients']} clients, fewest connected {report['fewest_connected']}; "
             + (f"all back {report['time_to_all_back_s']:.2f} s after the first drop, the fault itself lasting {report['fault_lasted_s']} s "
                f"(counted every {report['count_resolution_s'] * 1000:.0f} ms)"
                if report["all_back"] else "not all back before the load ended")]
    before, during = report["canary_connack_ms_before"], report["canary_connack_ms_during"]
    if during:
        lines.append(f"CONNACK of a fresh client during the storm: p50 {during['p50']} ms, p90 {during['p90']} ms, max {during['max']} ms "
                     f"({during['count']} connects, {report['canary_failures_during']} failed)"
                     + (f"; before it: p50 {before['p50']} ms, max {before['max']} ms" if before else ""))
    elif report["canary_failures_during"]:
        lines.append(f"CONNACK of a fresh client during the storm: all {report['canary_failures_during']} connects failed")
    lines.append(f"sessions: {report['sessions_resumed']} of {report['reconnected']} reconnects resumed theirs ({report['sessions']}); "
                 f"verdict: {report['verdict']}")
    m = report["messages"]
    lines.append(f"messages: {m['lost']} lost of {m['expected']} owed ({report['lost_of_sent_during']} of those sent around the fault), "
                 f"{m['duplicated']} duplicated, {m['retransmitted']} retransmitted; {m['dropped']} sends dropped, not sent "
                 "(due while their publisher was away, or its QoS window full)")
    if report["generator_limited"]:
        lines.append("the generator was limited during this run: its latencies are not the broker's alone")
    return lines
