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

With persistent sessions (`--persistent`) the storm is the subscribers' return instead: every
subscriber leaves its session with DISCONNECT at once (the session stays: clean start 0, and under
MQTT 5 a session expiry longer than the run), stays away while the publishers go on, and all come
back at the same moment into their sessions and drain what the broker queued. The offline-session
accounting (docs/state.md) counts, per session, the messages owed while away and those delivered
after the return; the sessions resumed and the queued messages delivered are judged by the
protocol's promises (promises.py: `session_lost`, `queued_lost`, each with its count).

Written to storm.json beside the run's results directory (run/)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from mqttlab.promises import verdict_text

STORM_FILE = "storm.json"
POLL_S = 0.05
CANARY_EVERY_S = 0.1
GRACE_S = 3.0  # after the load, for the last deliveries


@dataclass
class Watch:
    """The connection counts and the canary's connects, each with its monotonic time (s)."""

    counts: list[tuple[float, int]] = field(default_factory=list)
    canary: list[tuple[float, Optional[float], Optional[str]]] = field(default_factory=list)  # (t, CONNACK ms, error)


def storm_assignments(clients: int, fault: str, at_s: float, down_s: float, rate: float, qos: int, duration_s: float,
                      away_s: Optional[float] = None) -> list[str]:
    """Half the clients publish (`rate` msg/s each), half subscribe, each to its publisher's topic,
    in persistent sessions that reconnect; the fault at `at_s`, or with `away_s` (persistent
    sessions) every subscriber leaving its session at `at_s` for that long instead."""
    publishers = clients // 2
    if away_s is not None:
        storm = "subscribers.offline=" + json.dumps({"at": f"{at_s:g}s", "duration": f"{away_s:g}s"})
    else:
        spec = {"kind": fault, "at": f"{at_s:g}s"}
        if fault == "broker-restart":
            spec["duration"] = f"{down_s:g}s"
        storm = "faults=" + json.dumps([spec])
    return [f"publishers.count={publishers}", f"subscribers.count={clients - publishers}", f"publishers.rate={rate!r}",
            f"publishers.qos={qos}", f"subscribers.qos={qos}", "mqtt.clean_start=false", "options.reconnect=true",
            f"load.duration={duration_s:g}s", "load.warmup=1s", f"load.grace={GRACE_S:g}s", "load.connect_rate=1000", storm]


def session_expiry_assignment(user: Any, duration_s: float) -> list[str]:
    """Under MQTT 5 a session with expiry 0 ends with its connection: a persistent storm's
    sessions are given one longer than the whole run (load and grace, and a minute more), so no session
    may expire in it. `user`: the scenario as the user gave it (file and --set), whose version
    decides, and whose own expiry is kept (one shorter than the time away counts as
    `sessions_expired`, as asked, not as lost)."""
    if user.mqtt.version != 5 or user.mqtt.session_expiry:
        return []
    return [f"mqtt.session_expiry={math.ceil(duration_s + GRACE_S) + 60}s"]


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
    if scenario.subscribers.offline is not None:
        report["away_s"] = float(scenario.subscribers.offline.duration)
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
    report = {
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
    offline = summary.get("offline")
    if offline:
        report.update(_persistent(offline, summary.get("promises") or []))
    return report


def _persistent(offline: dict[str, Any], verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """A persistent storm's sessions from the run's offline accounting: the returns that found
    their session, the messages queued while away and delivered after, and the promises' verdicts."""
    session = next((v for v in verdicts if v.get("name") == "session_lost"), None)
    return {
        "persistent": True,
        "reconnected": offline["returned"],
        "sessions_resumed": offline["sessions_resumed"],
        "sessions_lost": offline["sessions_lost"],
        "sessions_expired": offline["sessions_expired"],
        "sessions": None if session is None else session["verdict"],
        "verdict": None if session is None else ", ".join(f"{v['promise']}: {v['verdict']}" for v in verdicts),
        "queued": {key: offline.get(key) for key in ("owed", "delivered", "not_delivered", "earlier", "drain_s", "drain_rate_per_s")},
        "promises": [v for v in verdicts if v.get("name") in ("session_lost", "queued_lost")],
    }


def broken_promises(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The promises a persistent storm found broken (none for the other storms)."""
    return [v for v in report.get("promises") or [] if v["verdict"] == "broken"]


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
    if report.get("persistent"):
        lines = [f"persistent sessions: {report['clients']} clients, every subscriber left its session at once and came back "
                 f"after {report['away_s']:g} s; fewest connected {report['fewest_connected']}; "
                 + (f"all back {report['time_to_all_back_s']:.2f} s after the first left (counted every {report['count_resolution_s'] * 1000:.0f} ms)"
                    if report["all_back"] else "not all back before the load ended")]
    else:
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
    if report.get("persistent"):
        queued = report["queued"]
        drain = queued["drain_s"]
        lines.append(f"sessions: {report['sessions_resumed']} of {report['reconnected']} returns found theirs "
                     f"({report['sessions_lost']} lost, {report['sessions_expired']} expired as asked)")
        lines.append(f"queued while away: {queued['delivered']:,} of {queued['owed']:,} delivered after the return"
                     + (f" (+{queued['earlier']:,} sent before leaving)" if queued["earlier"] else "")
                     + (f"; drain p50 {drain['p50'] * 1000:.2f} ms, p99 {drain['p99'] * 1000:.2f} ms" if drain else ""))
        for verdict in report["promises"]:
            lines.append(f"{verdict['promise']}: {verdict_text(verdict)}; rule: {verdict['rule']}")
    else:
        lines.append(f"sessions: {report['sessions_resumed']} of {report['reconnected']} reconnects resumed theirs ({report['sessions']}); "
                     f"verdict: {report['verdict']}")
    m = report["messages"]
    around = "" if report.get("persistent") else f" ({report['lost_of_sent_during']} of those sent around the fault)"
    lines.append(f"messages: {m['lost']} lost of {m['expected']} owed{around}, "
                 f"{m['duplicated']} duplicated, {m['retransmitted']} retransmitted; {m['dropped']} sends dropped, not sent "
                 "(due while their publisher was away, or its QoS window full)")
    if report["generator_limited"]:
        lines.append("the generator was limited during this run: its latencies are not the broker's alone")
    return lines

