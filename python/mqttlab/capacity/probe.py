"""One probe: a real run of the scenario at one offered rate, kept as a results directory under
the search's directory (probes/rate-<msg/s>-<attempt>/), judged against the objectives.

A probe whose directory already holds a finished run is read back instead of run again: that is
what makes a search resumable and re-analysable (another SLO, the same probes). Beside the
results the probe keeps the host's CPU load while it ran (host-load.json): on a shared machine a
capacity is only as good as the quiet it was measured in."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from mqttlab.capacity.slo import Check, Objective, judge
from mqttlab.environment import host_load
from mqttlab.exits import Exit, HostLimitReached, LoadRefused, RunFailed

REFUSED = "refused.json"  # a probe whose run could not connect: no results directory, only why
# The unit of what each knob sets, as reports print it.
UNITS = {"publishers.rate": "msg/s", "load.connect_rate": "conn/s", "subscribers.count": "connections",
         "offline.held": "queued messages", "retained.topics": "retained messages"}
# Statuses whose figures can be judged; any other (interrupted, failed) is run again.
KEPT = ("completed", "incomplete", "broker_lost")
# The searches of state: what they count is held by the broker, not paced by the generator.
STATE_KNOBS = ("offline.held", "retained.topics")
# A generator thread above this share of a core (the engine's own limit, summary.rs) set the pace.
GENERATOR_CPU_LIMIT = 0.95


@dataclass(frozen=True)
class ProbeSpec:
    """The scenario every probe runs, with only the offered rate changed."""

    scenario_file: Optional[Path]
    overrides: dict[str, Any]
    assignments: tuple[str, ...]
    publishers: int  # the offered rate is split evenly between them
    duration: str
    warmup: str
    dask: Optional[str] = None
    # What the search varies (UNITS): the publishers' rate, the connect rate, the number of (idle)
    # subscribers, the messages held for offline sessions (set through the publishers' rate while
    # the sessions are away), or the retained topics set before a read (one per publisher).
    knob: str = "publishers.rate"
    # offline.held: the messages held per msg/s of each publisher (publishers x time away x
    # subscribers owed each message).
    held_per_publisher_rate: float = 1.0

    def probe_assignments(self, rate: float) -> list[str]:
        # After the user's own --set, so the search's rate and timing win.
        if self.knob == "publishers.rate":
            value = f"publishers.rate={rate / self.publishers!r}"
        elif self.knob == "subscribers.count":
            value = f"subscribers.count={int(round(rate))}"
        elif self.knob == "offline.held":
            value = f"publishers.rate={rate / self.held_per_publisher_rate!r}"
        elif self.knob == "retained.topics":
            value = f"publishers.count={int(round(rate))}"
        else:
            value = f"{self.knob}={rate!r}"
        return [*self.assignments, value, f"load.duration={self.duration}", f"load.warmup={self.warmup}"]

    @property
    def unit(self) -> str:
        return UNITS[self.knob]

    def scenario(self, rate: float) -> Any:
        from mqttlab.planning import load_scenario

        return load_scenario(self.scenario_file, overrides=self.overrides, assignments=self.probe_assignments(rate))


@dataclass
class Probe:
    rate: float  # offered, msg/s over all publishers
    attempt: int
    directory: Path
    summary: dict[str, Any]
    result: dict[str, Any]
    manifest: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    host: dict[str, Any] = field(default_factory=dict)
    reused: bool = False
    # Whether sends late on their schedule make the probe generator-limited. Not in the searches
    # of state: the count they hold is what was sent while the sessions were away (or the topics
    # set before the read), whenever within that time each send left, and their objectives are
    # the drain's and the read's, which late sends do not slow; a generator thread out of CPU,
    # which may read the drain late, still counts.
    lateness_limits: bool = True

    @property
    def generator_limited(self) -> bool:
        limited = bool(self.summary.get("generator_limited"))
        if not limited or self.lateness_limits:
            return limited
        generator = self.summary.get("generator")
        return generator is None or float(generator.get("max_thread_cpu_share") or 0.0) > GENERATOR_CPU_LIMIT

    @property
    def refused(self) -> bool:
        """The run could not connect to the broker (no results directory)."""
        return bool(self.summary.get("refused"))

    @property
    def completed(self) -> bool:
        return self.summary.get("status") == "completed"

    @property
    def met(self) -> bool:
        """Every objective held on a run that completed."""
        return self.completed and all(check.met for check in self.checks)

    def judge(self, objectives: Iterable[Objective]) -> Probe:
        self.checks = [judge(objective, self.summary, self.result) for objective in objectives]
        return self


def probe_directory(root: Path, rate: float, attempt: int) -> Path:
    return root / "probes" / f"rate-{rate:011.1f}-{attempt}"


def run_probe(spec: ProbeSpec, root: Path, rate: float, attempt: int, objectives: list[Objective], rerun_limited: bool = False) -> Probe:
    """The probe at `rate` (its `attempt`-th), read back when already finished, else run now.
    `rerun_limited` runs a kept probe again when the generator limited it (a busy host then, a
    quieter one now): it judged nothing, so nothing is lost."""
    directory = probe_directory(root, rate, attempt)
    kept = _read(directory)
    lateness_limits = spec.knob not in STATE_KNOBS
    if kept is not None and not (rerun_limited and kept.summary.get("generator_limited")):
        return _probe(rate, attempt, directory, kept, reused=True, lateness_limits=lateness_limits).judge(objectives)
    refused = _read_refusal(directory)
    if refused is not None and not (rerun_limited and refused.get("generator_limited")):
        return Probe(rate, attempt, directory, refused, {}, {}, reused=True).judge(objectives)
    if directory.exists():
        shutil.rmtree(directory)  # an interrupted probe of ours: its figures are incomplete
    from mqttlab import session

    scenario = spec.scenario(rate)
    session.prepare(directory)
    before = host_load.cpu_times()
    try:
        run = session.execute(scenario, directory, dask=spec.dask, routing=session.routing_of(scenario),
                              command_line=f"mqttlab capacity (probe at {rate:g} {spec.unit}, attempt {attempt})")
    except HostLimitReached as error:
        # Not the broker's limit but this host's (too few open files): the probe counts as
        # generator-limited.
        return _refused(directory, refusal_summary(str(error).removeprefix("error: "), generator_limited=True), rate, attempt, objectives)
    except LoadRefused as error:
        # The broker refused or reset the load's connections: kept as a probe that broke the
        # objectives; whether that ends the search (a broker given by URL that is not there) is
        # the caller's call. A broker that could not even start is an error, raised as it is.
        return _refused(directory, refusal_summary(str(error), kind=error.kind), rate, attempt, objectives)
    host = host_load.host_load(before, host_load.cpu_times())
    host_load.write(directory, host)
    if run.outcome.status not in KEPT:  # the manifest's status
        raise RunFailed(f"error: the probe at {rate:g} msg/s did not finish ({directory})", Exit.ABNORMAL)
    return Probe(rate, attempt, directory, dict(run.summary), run.result, run.manifest, host=host,
                 lateness_limits=lateness_limits).judge(objectives)


def _refused(directory: Path, summary: dict[str, Any], rate: float, attempt: int, objectives: list[Objective]) -> Probe:
    """A probe that could not run, kept as why (refused.json) so that a resumed search reads it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / REFUSED).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return Probe(rate, attempt, directory, summary, {}, {}).judge(objectives)


def refusal_summary(error: str, generator_limited: bool = False, kind: Optional[str] = None) -> dict[str, Any]:
    """What a probe that could not run counts as: a failed run that delivered nothing, refused by
    the broker (`kind`: the engine's name for how, e.g. refused, closed, connack), or
    (`generator_limited`) beyond what this host can open."""
    zero = {"ok": 0, "failed": 0}
    return {"status": "failed", "error": error, "error_kind": kind, "refused": not generator_limited, "generator_limited": generator_limited,
            "generator_limited_reasons": [error] if generator_limited else [],
            "rates": {"sent_per_s": 0.0, "acked_per_s": 0.0, "received_per_s": 0.0}, "latency": {},
            "messages": {"sent": 0, "dropped": 0, "expected": 0, "delivered": 0, "lost": 0},
            "connections": {"publishers": dict(zero), "subscribers": dict(zero)}}


def _read_refusal(directory: Path) -> Optional[dict[str, Any]]:
    try:
        return dict(json.loads((directory / REFUSED).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _probe(rate: float, attempt: int, directory: Path, kept: Any, reused: bool, lateness_limits: bool) -> Probe:
    return Probe(rate, attempt, directory, kept.summary, kept.result, kept.manifest, host=host_load.read(directory), reused=reused,
                 lateness_limits=lateness_limits)


def _read(directory: Path) -> Any:
    """The probe's results when it finished and can be judged, else None."""
    from mqttlab import results

    try:
        kept = results.load_results(directory)
    except results.ResultsError:
        return None
    return kept if kept.status in KEPT else None
