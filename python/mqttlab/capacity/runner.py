"""A capacity search for one broker, from its probes to capacity.json, curve.csv and curve.png in
its directory. The directory remembers the scenario it searched (search.json): running the same
command again reuses every finished probe, so an interrupted search resumes and a finished one is
analysed again (another --slo re-judges the same probes, probing only the rates it still needs)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import yaml

from mqttlab.capacity.curve import Series, curve_rows, write_csv, write_png
from mqttlab.capacity.knee import limits_at_knee
from mqttlab.capacity.probe import Probe, ProbeSpec, run_probe
from mqttlab.capacity.search import Outcome, Search, Settings
from mqttlab.capacity.slo import Objective, parse_objective
from mqttlab.exits import LoadRefused
from mqttlab.results import MANIFEST, provenance
from mqttlab.scenario.fields import is_url

FORMAT = "mqttlab-capacity/1"
SEARCH_FILE = "search.json"
REPORT_FILE = "capacity.json"
RULE = ("capacity = the highest offered rate at which {repeats} of {repeats} probes met every objective, every rate probed below it "
        "meeting them too; bracket = [that rate, the lowest rate above it at which a probe broke an objective], narrowed to "
        "{resolution:.0%} (upper/lower - 1). Probes the generator limited judge nothing.")
GO_FURTHER = ("to go further: grid timing (--set options.timer_resolution=1ms: sends sharing a millisecond leave in one wake-up), "
              "a wider send-ahead window (--set options.send_ahead=200us), more engine threads (--set options.threads=N), "
              "or more generator processes or hosts (--dask local:N, --dask tcp://SCHEDULER:8786; docs/distributed.md)")


class SearchConflict(Exception):
    """The directory holds probes of another scenario."""


@dataclass
class CapacityReport:
    broker: str
    directory: Path
    outcome: Outcome
    objectives: list[Objective]
    limits: list[dict[str, Any]] = field(default_factory=list)
    generator_reasons: list[str] = field(default_factory=list)
    unit: str = "msg/s"
    verification: list[dict[str, Any]] = field(default_factory=list)  # probes at 0.9x and 1.2x the capacity

    @property
    def capacity(self) -> Optional[float]:
        return self.outcome.lower

    def headline(self) -> str:
        """The one-sentence answer."""
        o = self.outcome
        if o.status == "bracketed":
            return (f"{self.broker}: capacity {o.lower:g} {self.unit}, bracket [{o.lower:g}, {o.upper:g}] {self.unit} "
                    f"({o.settings.repeats if o.settings else '?'} probes met the objectives at {o.lower:g}, a probe at {o.upper:g} broke one)")
        if o.status == "generator_limited":
            above = f"above {o.lower:g} {self.unit}" if o.lower is not None else "not measured (no rate was shown sustained before)"
            return f"{self.broker}: broker capacity {above}; this host's generator is the limit (at {o.limited_at:g} {self.unit})"
        if o.status == "above_max":
            return f"{self.broker}: capacity above {o.lower:g} {self.unit} (--max-rate reached, every rate sustained)"
        if o.status == "below_min":
            return f"{self.broker}: capacity below {o.upper:g} {self.unit} (--min-rate reached, no rate sustained)"
        return f"{self.broker}: probe budget spent; the capacity lies in [{o.lower}, {o.upper}] {self.unit} as far as the search got"

    def verified(self) -> Optional[bool]:
        """With --verify: every judged probe at 0.9x met the objectives and one at 1.2x broke
        them. False says the host's noise (or the broker's) is wider than the bracket."""
        if not self.verification:
            return None
        below, above = self.verification[0], self.verification[-1]
        return below["broke"] == 0 and below["met"] > 0 and above["broke"] > 0

    def to_dict(self) -> dict[str, Any]:
        o = self.outcome
        settings = o.settings
        hosts = [p.host.get("busy_cores") for p in o.probes if p.host.get("busy_cores") is not None]
        return {
            "format": FORMAT,
            "broker": self.broker,
            "status": o.status,
            "headline": self.headline(),
            "unit": self.unit,
            "capacity_per_s": o.lower,
            "interval_per_s": [o.lower, o.upper],
            "rule": RULE.format(repeats=settings.repeats, resolution=settings.resolution) if settings else None,
            "ends": o.ends(),
            "objectives": [objective.to_dict() for objective in self.objectives],
            "settings": settings.__dict__ if settings else None,
            "limited_by": self.limits,
            "generator": {"limited_at_per_s": o.limited_at, "reasons": self.generator_reasons,
                          "go_further": GO_FURTHER if o.status == "generator_limited" else None},
            "host_busy_cores": {"mean": sum(hosts) / len(hosts), "max": max(hosts)} if hosts else None,
            "verification": self.verification,
            "verified": self.verified(),
            "probes": [_probe_entry(p, self.directory) for p in o.probes],
            "provenance": provenance(_manifests(p.directory for p in o.probes)),
        }


def _manifests(runs: Iterable[Path]) -> Iterator[dict[str, Any]]:
    for run in runs:
        try:
            yield json.loads((run / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a probe refused before it wrote one


def _probe_entry(probe: Probe, root: Path) -> dict[str, Any]:
    return {"rate_per_s": probe.rate, "attempt": probe.attempt, "directory": str(probe.directory.relative_to(root)),
            "status": probe.summary.get("status"), "met": probe.met, "generator_limited": probe.generator_limited,
            "checks": [check.to_dict() for check in probe.checks], "host": probe.host, "reused": probe.reused}


SENT_AS_OFFERED = "dropped==0"


def with_rate_offered(spec: ProbeSpec, objectives: list[Objective]) -> list[Objective]:
    """A message rate counts as sustained only if it was offered: open loop, a send that falls
    due while the publisher's QoS window is full (the broker acknowledging too slowly) is dropped,
    not sent, so a probe that dropped sends carried less than its rate however good its latency
    and loss. Unless the objectives bound `dropped` themselves, `dropped==0` joins them (also in the
    queued-messages search, whose count is the messages sent while the sessions are away)."""
    if spec.knob not in ("publishers.rate", "offline.held") or any(objective.metric == "dropped" for objective in objectives):
        return objectives
    return [*objectives, parse_objective(SENT_AS_OFFERED)]


def search_capacity(
    broker: str,
    spec: ProbeSpec,
    objectives: list[Objective],
    settings: Settings,
    directory: Path,
    on_probe: Optional[Callable[[Probe], None]] = None,
    rerun_limited: bool = False,
    verify: int = 0,
) -> CapacityReport:
    """Runs (or resumes) the search and writes capacity.json, curve.csv and curve.png. With
    `verify`, a bracketed capacity is checked by that many probes at 0.9x and at 1.2x of it."""
    directory.mkdir(parents=True, exist_ok=True)
    _claim(directory, spec)
    objectives = with_rate_offered(spec, objectives)

    reached: list[bool] = []

    def probe(rate: float, attempt: int) -> Probe:
        found = run_probe(spec, directory, rate, attempt, objectives, rerun_limited)
        if found.refused and not any(reached) and is_url(broker):
            # A broker given by URL that refused before any probe got through is not there: nothing
            # was measured. One mqttlab launched was up before the load: its refusal is a limit.
            raise LoadRefused(found.summary["error"], found.summary.get("error_kind", "io"))
        reached.append(not found.refused)
        if on_probe is not None:
            on_probe(found)
        return found

    outcome = Search(settings, probe).run()
    report = CapacityReport(broker, directory, outcome, objectives, unit=spec.unit)
    report.limits = limits_at_knee(_at(outcome, outcome.lower, met=True), _at(outcome, outcome.upper, met=False))
    if outcome.status == "generator_limited":
        report.generator_reasons = sorted({reason for p in outcome.probes if p.rate == outcome.limited_at and p.generator_limited
                                           for reason in p.summary.get("generator_limited_reasons") or []})
    if verify and outcome.status == "bracketed" and outcome.lower:
        report.verification = _verify(spec, objectives, directory, outcome.lower, verify, rerun_limited, on_probe)
    (directory / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    series = [report_series(report)]
    write_csv(series, directory / "curve.csv")
    write_png(series, objectives, directory / "curve.png", title=f"{broker}: {', '.join(o.text for o in objectives)}", unit=spec.unit)
    return report


VERIFY_AT = (0.9, 1.2)


def _verify(spec: ProbeSpec, objectives: list[Objective], directory: Path, capacity: float, count: int, rerun_limited: bool,
            on_probe: Optional[Callable[[Probe], None]]) -> list[dict[str, Any]]:
    """Probes at 0.9x and 1.2x the capacity (in verify/): below it they should all meet the
    objectives, above it some should break them. Generator-limited probes are counted apart."""
    from mqttlab.capacity.search import round_rate

    found = []
    for factor in VERIFY_AT:
        rate = round_rate(capacity * factor)
        probes = [run_probe(spec, directory / "verify", rate, attempt, objectives, rerun_limited) for attempt in range(1, count + 1)]
        for probe in probes:
            if on_probe is not None:
                on_probe(probe)
        judged = [p for p in probes if not p.generator_limited]
        found.append({"factor": factor, "rate": rate, "probes": len(probes), "met": sum(1 for p in judged if p.met),
                      "broke": sum(1 for p in judged if not p.met), "generator_limited": len(probes) - len(judged),
                      "p99_us": [((p.summary.get("latency") or {}).get(_source(objectives)) or {}).get("p99_us") for p in probes]})
    return found


def _source(objectives: list[Objective]) -> str:
    return next((objective.source for objective in objectives if objective.kind == "latency"), "e2e")


def report_series(report: CapacityReport) -> Series:
    o = report.outcome
    return Series(report.broker, curve_rows(o.probes, _source(report.objectives)), o.lower, o.upper, o.status)


def _at(outcome: Outcome, rate: Optional[float], met: bool) -> list[Probe]:
    return [p for p in outcome.probes if p.rate == rate and not p.generator_limited and p.met == met]


def _claim(directory: Path, spec: ProbeSpec) -> None:
    """Records the scenario searched (less its rate and timing) or checks it is the one recorded."""
    scenario = _comparable(spec)
    path = directory / SEARCH_FILE
    if path.is_file():
        recorded = json.loads(path.read_text(encoding="utf-8")).get("scenario")
        if recorded != scenario:
            changed = sorted(_differences(recorded or {}, scenario))
            raise SearchConflict(f"{directory} holds the probes of another scenario (differs in {', '.join(changed[:6]) or 'its shape'}); "
                                 "choose another --out, or remove it to search again")
        return
    path.write_text(json.dumps({"format": FORMAT, "scenario": scenario}, indent=2) + "\n", encoding="utf-8")


def _comparable(spec: ProbeSpec) -> dict[str, Any]:
    from mqttlab.scenario import scenario_to_yaml

    data = yaml.safe_load(scenario_to_yaml(spec.scenario(1.0)))
    data["publishers"].pop("rate", None)
    data.pop("description", None)
    return dict(data)


def _differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> set[str]:
    found = set()
    for key in set(a) | set(b):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            found |= _differences(x, y, f"{prefix}{key}.")
        elif x != y:
            found.add(f"{prefix}{key}")
    return found
