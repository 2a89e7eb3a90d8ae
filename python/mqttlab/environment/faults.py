"""Faults as part of a run (docs/faults.md): applied on the run's timeline to the launched broker
(stall, restart), the emulated link (cut, degraded) or the clients' connections (torn down), then
measured from the run's own figures.

The driver learns the load phase's start instant from the engine's progress snapshots
(`load_start_mono_ns`, on CLOCK_MONOTONIC, the engine's clock, which is set before the load
begins), so faults start on time unless asked for before the first snapshot that carries it
(about a second). What counts is the time a fault was applied, recorded on the same clock and set
against the measured window afterwards. A stalled broker is always continued, a cut or degraded
link always mended, a stopped broker always started again, also when the run ends or is
interrupted during the fault.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from mqttlab.engine import effective_qos


@dataclass
class AppliedFault:
    kind: str
    asked_at_s: float  # from the start of the load phase, as the scenario says
    duration_s: float  # 0 for clients-disconnect (instantaneous)
    signal: Optional[str] = None  # broker-restart: "kill" (default) or "term"
    fraction: Optional[float] = None  # clients-disconnect: the share of connections torn down
    torn_down: Optional[int] = None  # clients-disconnect: how many were
    connections: Optional[int] = None  # clients-disconnect: of how many
    conditions: Any = None  # link-degrade: the link's NetworkConditions during the fault
    started_mono_ns: Optional[int] = None
    down_mono_ns: Optional[int] = None  # broker-restart: when its processes had ended
    ended_mono_ns: Optional[int] = None  # stall: continued; restart: serving MQTT again
    problem: Optional[str] = None


@dataclass
class FaultDriver:
    """Applies `faults` (scenario.faults) to `broker` (a RunningBroker mqttlab launched) once the
    load runs; `restarted(pid)` is told the new PID after a restart (the resource samplers). Feed
    it every progress snapshot (`observe`); use it as a context manager around the run."""

    faults: Sequence[Any]
    broker: Any
    restarted: Optional[Callable[[int], None]] = None
    network: Any = None  # the run's EmulatedNetwork, for link faults
    target: Optional[tuple[str, int]] = None  # the broker address the clients connect to (clients-disconnect)
    applied: list[AppliedFault] = field(default_factory=list)
    _load_start_ns: Optional[int] = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None
    _stalled: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.applied = [AppliedFault(f.kind, float(f.at), float(f.duration or 0.0), f.signal, f.fraction, conditions=f.network)
                        for f in sorted(self.faults, key=lambda f: f.at)]

    def observe(self, snapshot: dict[str, Any]) -> None:
        """The first snapshot that knows the load's start instant starts the timeline; a fault
        under way is added to every snapshot (`fault`), for the live display and live.json."""
        under_way = self._under_way()
        if under_way is not None:
            snapshot["fault"] = under_way
        start = int(snapshot.get("load_start_mono_ns") or 0)
        if self._load_start_ns is not None or not start:
            return
        self._load_start_ns = start
        self._thread = threading.Thread(target=self._apply_all, name="mqttlab-faults", daemon=True)
        self._thread.start()

    def _under_way(self) -> Optional[str]:
        for fault in self.applied:
            if fault.started_mono_ns is not None and fault.ended_mono_ns is None and fault.problem is None:
                elapsed = (time.monotonic_ns() - fault.started_mono_ns) / 1e9
                return f"{fault.kind} {elapsed:.1f} s" + (f" of {fault.duration_s:g} s" if fault.duration_s else "")
        return None

    def _apply_all(self) -> None:
        assert self._load_start_ns is not None
        for fault in self.applied:
            due_ns = self._load_start_ns + int(fault.asked_at_s * 1e9)
            if self._stop.wait(max(0.0, (due_ns - time.monotonic_ns()) / 1e9)):
                return
            if fault.kind == "broker-stall":
                self._stall(fault)
            elif fault.kind == "link-down":
                self._hold_link(fault, "cut", lambda down: self.network.cut(down), True, False)
            elif fault.kind == "link-degrade":
                self._hold_link(fault, "change", lambda conditions: self.network.degrade(conditions), fault.conditions, None)
            elif fault.kind == "clients-disconnect":
                self._tear_down(fault)
            else:
                self._restart(fault)

    def _tear_down(self, fault: AppliedFault) -> None:
        """Destroys a share of this process's TCP connections to the broker (`ss -K`: the kernel
        resets them, as a crashed client host or a NAT timeout would); the clients see the error
        and reconnect. Which ones: every k-th by local port, so the choice is spread and repeatable."""
        try:
            assert self.target is not None
            host, port = self.target
            ours = _connections_to(host, port, os.getpid())
            share = fault.fraction if fault.fraction is not None else 1.0
            chosen = _spread(ours, share)
            fault.started_mono_ns = time.monotonic_ns()
            _destroy_all(chosen, host, port)
            fault.ended_mono_ns = time.monotonic_ns()
            fault.torn_down, fault.connections = len(chosen), len(ours)
        except Exception as error:  # noqa: BLE001 — told in the summary; the run goes on
            fault.problem = f"cannot tear the connections down: {error}"

    def _hold_link(self, fault: AppliedFault, what: str, set_link: Callable[[Any], None], changed: Any, normal: Any) -> None:
        """Holds the emulated link `changed` (cut, or under the fault's conditions) for the fault's
        duration, then sets it back to `normal`, also when the run ends first."""
        try:
            set_link(changed)
            fault.started_mono_ns = time.monotonic_ns()
            self._stop.wait(fault.duration_s)
        except Exception as error:  # noqa: BLE001 — told in the summary; the run goes on
            fault.problem = f"cannot {what} the link: {error}"
        finally:
            try:
                set_link(normal)
            finally:
                if fault.started_mono_ns is not None:
                    fault.ended_mono_ns = time.monotonic_ns()

    def _restart(self, fault: AppliedFault) -> None:
        """Ends the broker with the fault's signal, waits out the downtime, starts it again; the
        fault ends when the broker serves MQTT again."""
        signum = signal.SIGTERM if fault.signal == "term" else signal.SIGKILL
        try:
            fault.started_mono_ns = time.monotonic_ns()
            self.broker.end_process(signum)
            fault.down_mono_ns = time.monotonic_ns()
            # Down for the fault's duration from the signal, however long the broker took to go.
            self._stop.wait(max(0.0, fault.duration_s - (time.monotonic_ns() - fault.started_mono_ns) / 1e9))
            self.broker.start_process()
            fault.ended_mono_ns = time.monotonic_ns()
            if self.restarted is not None:
                self.restarted(self.broker.pid)
        except Exception as error:  # noqa: BLE001 — told in the summary; the run goes on
            fault.problem = f"restart failed: {error}"

    def _stall(self, fault: AppliedFault) -> None:
        try:
            with self._lock:
                _signal_group(self.broker.pid, signal.SIGSTOP)
                self._stalled = True
                fault.started_mono_ns = time.monotonic_ns()
            self._stop.wait(fault.duration_s)
        except OSError as error:
            fault.problem = f"cannot stop the broker's processes: {error}"
        finally:
            self._continue(fault)

    def _continue(self, fault: Optional[AppliedFault] = None) -> None:
        with self._lock:
            if not self._stalled:
                return
            try:
                _signal_group(self.broker.pid, signal.SIGCONT)
            finally:
                self._stalled = False
                if fault is not None:
                    fault.ended_mono_ns = time.monotonic_ns()

    def __enter__(self) -> "FaultDriver":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._continue()


def _connections_to(host: str, port: int, pid: int) -> list[tuple[str, int]]:
    """(local address, local port) of the established TCP connections of process `pid` to
    host:port, sorted by port."""
    import subprocess

    listing = subprocess.run(["ss", "-tnpH", "state", "established", "dst", host, "dport", "=", f":{port}"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    found = []
    for line in listing.splitlines():
        if f"pid={pid}," not in line:
            continue
        local = line.split()[2]  # Recv-Q Send-Q Local Peer Process
        address, _, local_port = local.rpartition(":")
        found.append((address.strip("[]"), int(local_port)))
    return sorted(set(found), key=lambda c: c[1])


def _spread(connections: list[tuple[str, int]], share: float) -> list[tuple[str, int]]:
    """round(share × n) of `connections` (at least one), evenly spread over the list."""
    if not connections:
        return []
    count = max(1, round(share * len(connections)))
    return [connections[int(i * len(connections) / count)] for i in range(count)]


# Connections reset per `ss -K` call: one call per connection took about 10 ms each here, so a
# thousand clients were dropped over ten seconds rather than at once; one call for a thousand
# takes about 0.2 s.
DESTROY_BATCH = 1000


def _destroy_all(chosen: Sequence[tuple[str, int]], host: str, port: int) -> None:
    import subprocess

    by_address: dict[str, list[int]] = {}
    for local_ip, local_port in chosen:
        by_address.setdefault(local_ip, []).append(local_port)
    for local_ip, ports in by_address.items():
        for first in range(0, len(ports), DESTROY_BATCH):
            either: list[str] = []
            for local_port in ports[first:first + DESTROY_BATCH]:
                either += (["or"] if either else []) + ["sport", "=", f":{local_port}"]
            subprocess.run(["ss", "-K", "src", local_ip, "dst", host, "dport", "=", f":{port}", "(", *either, ")"],
                           capture_output=True, text=True, timeout=10)


def _signal_group(pid: int, signum: int) -> None:
    # Launched brokers lead their own process group: a JVM's or a script's helpers stop with them.
    try:
        os.killpg(pid, signum)
    except PermissionError:
        os.kill(pid, signum)


def fault_section(
    applied: Sequence[AppliedFault], plan: Mapping[str, Any], result: Mapping[str, Any], series: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """summary.json's `faults`: per fault, when it happened on the measured window's clock, how
    the run came back from it, and for a restart whether the losses broke a promise (docs/faults.md)."""
    start = result.get("start_mono_ns")
    warmup_s = float(result.get("warmup_ms") or 0) / 1000
    section = []
    for fault in applied:
        entry: dict[str, Any] = {"kind": fault.kind, "asked_at_s": fault.asked_at_s, "duration_s": fault.duration_s}
        if fault.kind == "broker-restart":
            entry["signal"] = fault.signal or "kill"
        if fault.kind == "clients-disconnect":
            entry.update(fraction=fault.fraction if fault.fraction is not None else 1.0, torn_down=fault.torn_down, connections=fault.connections)
        if fault.problem is not None or fault.started_mono_ns is None or fault.ended_mono_ns is None or not start:
            entry["applied"] = False
            entry["problem"] = fault.problem or "not applied: the load phase ended or was interrupted first"
            section.append(entry)
            continue
        begin_s = (fault.started_mono_ns - int(start)) / 1e9
        end_s = (fault.ended_mono_ns - int(start)) / 1e9
        entry.update(applied=True, start_s=round(begin_s, 3), end_s=round(end_s, 3), lasted_s=round(end_s - begin_s, 3),
                     late_s=round(max(0.0, begin_s + warmup_s - fault.asked_at_s), 3))
        if fault.down_mono_ns is not None:
            # How long the broker took to go after the signal (a clean stop writes its state first).
            entry["stopping_s"] = round((fault.down_mono_ns - fault.started_mono_ns) / 1e9, 3)
        entry.update(_recovery(series, begin_s, end_s))
        if fault.kind in ("broker-restart", "clients-disconnect"):
            entry.update(_session_verdict(plan, result, int(entry["lost_of_sent_during"])))
        section.append(entry)
    return section


def _session_verdict(plan: Mapping[str, Any], result: Mapping[str, Any], lost: int) -> dict[str, Any]:
    """Whether the broker kept the clients' sessions across the restart, and what the losses
    around it mean: QoS 1 and 2 promise delivery within a session, so a message lost from a
    session the broker kept is the broker's fault; from a session it dropped, it is expected.
    Only the reconnects the fault caused count: the engine's `sessions_resumed` also counts
    offline subscribers coming back into their sessions (subscribers.offline), which are no
    reconnects of the fault's and are judged by the offline rules (mqttlab.promises)."""
    counters = result.get("counters") or {}
    returns = sum(1 for period in result.get("offline") or [] if period.get("returned") and period.get("session_present"))
    reconnects = int(counters.get("reconnects") or 0)
    resumed = max(0, int(counters.get("sessions_resumed") or 0) - returns)
    sessions = None if not reconnects else "kept" if resumed == reconnects else "lost" if resumed == 0 else "some kept"
    qos = effective_qos(plan)
    if qos == 0:
        verdict = "nothing promised: QoS 0"
    elif plan["mqtt"]["clean_start"]:
        verdict = "nothing promised: the clients asked for clean sessions"
    elif sessions is None:
        verdict = "not judged: no client reconnected"
    elif sessions == "kept":
        verdict = "kept: no message lost" if lost == 0 else f"broken: {lost} messages lost from sessions the broker kept"
    elif sessions == "lost":
        verdict = f"expected: the broker kept no session, {lost} messages lost with them"
    else:
        verdict = f"not judged: the broker kept {resumed} of {reconnects} sessions, {lost} messages lost"
    return {"sessions": sessions, "verdict": verdict}


def _recovery(series: Sequence[Mapping[str, Any]], begin_s: float, end_s: float) -> dict[str, Any]:
    """The pre-fault band, and the seconds from the fault's end until the start of the first
    second, from the one it ended in, whose e2e p99 is in the band (0 when it is the one it ended
    in). The band is the worst end-to-end latency of the measured seconds before the fault: what
    the run saw in normal operation, with no factor to choose. Seconds are the series' (t_s = 0 is
    the first measured second), so recovery is known to the second."""
    before = [row for row in series if row.get("e2e_max_us") is not None and int(row["t_s"]) >= 0 and int(row["t_s"]) + 1 <= begin_s]
    touched = [row for row in series if begin_s - 1 < int(row["t_s"]) < end_s]
    out: dict[str, Any] = {
        "received_during": sum(int(row.get("received") or 0) for row in series if begin_s <= int(row["t_s"]) and int(row["t_s"]) + 1 <= end_s),
        # Deliveries never made of the messages meant to leave in the seconds the fault touched.
        "lost_of_sent_during": sum(int(row.get("owed") or 0) - int(row.get("owed_delivered") or 0) for row in touched),
    }
    band = max((int(row["e2e_max_us"]) for row in before), default=None)
    out["band_us"] = band
    recovered_t = None
    if band is not None:
        for row in series:
            t = int(row["t_s"])
            # From the second the fault ended in: when that second is in the band, latency never
            # left it or was back before the second was out (skipping it would count a whole
            # second, and more, of recovery a run never needed).
            if t + 1 > end_s and row.get("e2e_p99_us") is not None and int(row["e2e_p99_us"]) <= band:
                recovered_t = t
                break
    # What the messages caught in the fault waited: the worst latency from the second it began
    # until the second back in the band (the catch-up after the fault included).
    caught = [row for row in series if begin_s - 1 < int(row["t_s"]) and (recovered_t is None or int(row["t_s"]) < max(recovered_t, end_s))]
    out["worst_e2e_us"] = max((int(row["e2e_max_us"]) for row in caught if row.get("e2e_max_us") is not None), default=None)
    if band is None:
        out.update(recovered_after_s=None, recovery_note="no measured second before the fault to set the band")
    elif recovered_t is None:
        out.update(recovered_after_s=None, recovery_note="the per-second p99 did not come back within the band before the run ended")
    else:
        # Back by the start of the first second in the band: its p99 says that second was.
        out["recovered_after_s"] = round(max(0.0, recovered_t - end_s), 3)
    return out
