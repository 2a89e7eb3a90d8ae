"""The state of a run while it goes, as plain data: what the live display, the metrics endpoint
and `mqttlab report --watch` show.

A run keeps it in `live.json` in its results directory (replaced whole at every engine progress
snapshot, about once a second), so another process can follow it: a suite that serves metrics for
the runs it starts, or `report --watch`. At the end it holds the final figures of summary.json."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any, Mapping, Optional

from mqttlab.pacing import mode_of

LIVE_FILE = "live.json"
FORMAT = "mqttlab-live/1"
LOAD_PHASES = ("warmup", "measuring")


class RunState:
    """Fed with every engine progress snapshot; derives where the run is and how long is left.

    The snapshot carries counters and the last interval's e2e p50/p99, not the load's start
    instant or the schedule lag, so two figures are estimates from the counters: the load's start
    (an open-loop schedule has sent pubs × rate × t messages t seconds in) and the generator's
    backlog (messages due by the schedule and not yet sent or dropped, in seconds of schedule)."""

    def __init__(self, plan: Mapping[str, Any], *, run: str, scenario: str, broker: str, shard: str = "all",
                 directory: Optional[Path] = None, resources: Any = None, owed_per_message: Optional[float] = None) -> None:
        pubs, load = plan["publishers"], plan["load"]
        low, high = plan["shard"]["publishers"]
        self.publishers = high - low
        self.subscribers = plan["shard"]["subscribers"][1] - plan["shard"]["subscribers"][0]
        self.rate = float(pubs.get("rate") or 0)
        self.open_loop = mode_of(pubs.get("arrival")).scheduled and self.rate > 0
        self.messages = pubs.get("messages")
        from mqttlab.engine import planned_load_s

        self.load_s = planned_load_s(plan)
        self.warmup_s = (load.get("warmup_ms") or 0) / 1000
        self.grace_s = (load.get("grace_ms") or 0) / 1000
        self.owed_per_message = owed_per_message
        self.labels = {"run": run, "scenario": scenario, "broker": broker, "shard": shard}
        self.directory = directory
        self.resources = resources
        self.snapshot: dict[str, Any] = {}
        self.rates = {"sent": 0.0, "acked": 0.0, "received": 0.0}
        self.start_t: Optional[float] = None  # the load's start on the snapshots' clock (t_s)
        self.backlog_s: Optional[float] = None
        self.final: Optional[dict[str, Any]] = None
        self.status = "running"
        self._last_t: Optional[float] = None
        self._drain_t: Optional[float] = None  # when the load ended and the wait for deliveries began
        self._started_wall = time.time()

    # -- feeding --------------------------------------------------------------------------

    def update(self, snapshot: Mapping[str, Any]) -> None:
        t = float(snapshot.get("t_s") or 0.0)
        total = snapshot.get("total") or {}
        interval = snapshot.get("interval") or {}
        if self._last_t is not None and t > self._last_t:
            span = t - self._last_t
            self.rates = {key: interval.get(key, 0) / span for key in self.rates}
        self._last_t = t
        if snapshot.get("phase") == "draining" and self._drain_t is None:
            self._drain_t = t
        sent = int(total.get("sent", 0))
        issued = sent + int(total.get("dropped", 0))
        planned_rate = self.publishers * self.rate
        if self.start_t is None and sent > 0 and snapshot.get("phase") in LOAD_PHASES + ("draining",):
            # Every publisher sends its first message at offset 0, so this is at most 1/rate off.
            self.start_t = t - (issued / planned_rate if self.open_loop and planned_rate else 0.0)
        if self.open_loop and self.start_t is not None and snapshot.get("phase") in LOAD_PHASES and planned_rate:
            due = planned_rate * min(t - self.start_t, self.load_s or float("inf"))
            if self.messages:
                due = min(due, self.messages * self.publishers)
            self.backlog_s = max(0.0, due - issued) / planned_rate
        self.snapshot = dict(snapshot)
        self.write()

    def finish(self, summary: Mapping[str, Any]) -> None:
        """The run's final figures (from summary.json), kept until the process ends."""
        self.status = str(summary.get("status") or "failed")
        self.final = final_figures(summary)
        self.write()

    # -- reading --------------------------------------------------------------------------

    def progress(self) -> dict[str, Any]:
        """`elapsed_s` of the load, `fraction` of it done and `left_s` until the results (the
        rest of the load and the grace for deliveries still under way); None while unknown.
        `draining` once the load is over and only deliveries are awaited, `left_s` then at most
        the grace that is left (the wait ends as soon as everything owed arrived)."""
        phase = self.snapshot.get("phase")
        if self.final is not None or phase == "done":
            return {"elapsed_s": self._elapsed(), "fraction": 1.0, "left_s": 0.0}
        elapsed = self._elapsed()
        fraction: Optional[float] = None
        if self.messages and not self.open_loop and self.publishers:
            total = self.snapshot.get("total") or {}
            fraction = min(1.0, (total.get("sent", 0) + total.get("dropped", 0)) / (self.messages * self.publishers))
        elif elapsed is not None and self.load_s:
            fraction = min(1.0, elapsed / self.load_s)
        left: Optional[float] = None
        if phase == "draining":
            waited = (self._last_t or 0.0) - (self._drain_t if self._drain_t is not None else self._last_t or 0.0)
            return {"elapsed_s": elapsed, "fraction": 1.0, "left_s": max(0.0, self.grace_s - waited), "draining": True}
        elif elapsed is not None and self.load_s is not None:
            left = max(0.0, self.load_s - elapsed) + self.grace_s
        elif fraction and elapsed:
            left = elapsed * (1 - fraction) / fraction + self.grace_s
        return {"elapsed_s": elapsed, "fraction": fraction, "left_s": left}

    def _elapsed(self) -> Optional[float]:
        if self.start_t is None or self._last_t is None:
            return None
        return max(0.0, self._last_t - self.start_t)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            **self.labels,
            "status": self.status,
            "updated_unix": time.time(),
            "started_unix": self._started_wall,
            "plan": {
                "publishers": self.publishers, "subscribers": self.subscribers, "rate": self.rate,
                "messages": self.messages, "load_s": self.load_s, "warmup_s": self.warmup_s, "grace_s": self.grace_s,
                "owed_per_message": self.owed_per_message,
            },
            "snapshot": self.snapshot,
            "progress": self.progress(),
            "rates": self.rates,
            "generator_backlog_s": self.backlog_s,
            "resources": _current_resources(self.resources),
            "final": self.final,
        }

    def write(self) -> None:
        if self.directory is not None:
            write_live(self.directory, self.to_dict())


def _current_resources(resources: Any) -> dict[str, dict[str, Optional[float]]]:
    if resources is None:
        return {}
    try:
        return resources.current()
    except Exception:  # noqa: BLE001 — a figure missing from a dashboard must not stop a run
        return {}


def final_figures(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of summary.json that a dashboard shows once a run has ended."""
    messages = summary.get("messages") or {}
    e2e = (summary.get("latency") or {}).get("e2e") or {}
    generator = summary.get("generator") or {}
    connections = summary.get("connections") or {}
    return {
        "messages": {k: messages.get(k) for k in ("sent", "acked", "received", "dropped", "expected", "delivered", "lost", "duplicated", "out_of_order")},
        "e2e_us": {k: e2e.get(k) for k in ("p50_us", "p90_us", "p99_us", "p999_us", "max_us")} if e2e else {},
        "measured_s": summary.get("measured_s"),
        "rates": summary.get("rates") or {},
        "connections_failed": sum((connections.get(role) or {}).get("failed", 0) for role in ("publishers", "subscribers")),
        "generator_limited": bool(summary.get("generator_limited")),
        "schedule_lag_p99_us": generator.get("schedule_lag_p99_us"),
        "socket_full_s": generator.get("socket_full_s"),
        "back_pressure_share": generator.get("back_pressure_share"),
    }


# --- files ---------------------------------------------------------------------------------


def write_live(directory: Path, state: Mapping[str, Any]) -> None:
    """Replaces live.json whole (written aside and renamed), so a reader never sees half of it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        temporary = directory / f".{LIVE_FILE}.tmp"
        temporary.write_text(json.dumps(state) + "\n", encoding="utf-8")
        temporary.replace(directory / LIVE_FILE)
    except OSError:
        pass  # a full or vanished disk shows in the results; watching is not worth a run


def read_live(directory: Path) -> Optional[dict[str, Any]]:
    try:
        data = json.loads((directory / LIVE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


# --- suites --------------------------------------------------------------------------------


def suite_state(suite_dir: Path) -> Optional[dict[str, Any]]:
    """Where a suite is, from its runs.json and the live.json of the run under way: runs done,
    failed and left, the run under way, and the estimated time left: for a run left whose
    configuration (scenario and broker) has finished runs, what they took on average; for
    another, its planned load plus the setup time the finished runs took beyond theirs. (A
    planned load is only a bound where a run ends by its message count: seed 001's closed-loop
    runs plan 60 s and take one.)"""
    try:
        entries = json.loads((suite_dir / "runs.json").read_text(encoding="utf-8")).get("runs", [])
    except (OSError, ValueError, AttributeError):
        return None
    done = [e for e in entries if e.get("status") not in ("pending", None)]
    failed = [e for e in done if e.get("status") == "failed"]
    pending = [e for e in entries if e.get("status") in ("pending", None)]
    current, current_live = None, None
    for entry in pending:
        live = read_live(suite_dir / entry.get("directory", ""))
        if live is not None and live.get("final") is None:
            current, current_live = entry, live
            break
    overheads = [e["seconds"] - (_entry_load_s(e) or 0.0) for e in done if e.get("seconds")]
    overhead = sum(overheads) / len(overheads) if overheads else None
    took: dict[str, list[float]] = {}
    for e in done:
        if e.get("seconds"):
            took.setdefault(_configuration(e), []).append(float(e["seconds"]))
    left: Optional[float] = None
    if overhead is not None:
        left = 0.0
        for entry in pending:
            if entry is current and current_live is not None:
                left += float((current_live.get("progress") or {}).get("left_s") or 0.0)
                continue
            alike = took.get(_configuration(entry))
            left += sum(alike) / len(alike) if alike else (_entry_load_s(entry) or 0.0) + max(0.0, overhead)
    return {
        "suite": suite_dir.name,
        "runs": len(entries),
        "done": len(done),
        "failed": len(failed),
        "left": len(pending),
        "current": current.get("id") if current else None,
        "current_live": current_live,
        "left_s": left,
    }


def _configuration(entry: Mapping[str, Any]) -> str:
    """A runs.json entry's configuration, the same for each of its repetitions."""
    return json.dumps([entry.get("broker"), entry.get("scenario")], sort_keys=True)


def _entry_load_s(entry: Mapping[str, Any]) -> Optional[float]:
    """The planned load of a runs.json entry, from its scenario keys."""
    return scenario_load_s(entry.get("scenario") or {})


def scenario_load_s(scenario: Mapping[str, Any]) -> Optional[float]:
    """The planned load phase of a suite run's scenario keys; None when it cannot be planned."""
    return _scenario_load_s(json.dumps(scenario, sort_keys=True))


@functools.lru_cache(maxsize=1024)
def _scenario_load_s(scenario_json: str) -> Optional[float]:
    # Cached: a suite's metrics endpoint asks for every run left at every scrape.
    from mqttlab import engine
    from mqttlab.planning import plan_of, validate_scenario
    from mqttlab.scenario import ScenarioError

    try:
        return engine.planned_load_s(plan_of(validate_scenario(json.loads(scenario_json))))
    except (ScenarioError, ValueError, KeyError):
        return None


def format_seconds(seconds: Optional[float]) -> str:
    """12 -> "12s", 125 -> "2m05s", 7300 -> "2h01m"; "?" when unknown."""
    if seconds is None:
        return "?"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
