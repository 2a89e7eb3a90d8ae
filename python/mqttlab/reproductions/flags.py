"""The generator-limited flag of a page's runs, as each run recorded it and as the engine's current
rule reads the same run again from its plan and raw result (both are in the evidence), and the one
place that decides which of the two a page's verdicts judge by (`judge_by_current_rule`).

The rule (crates/mqttlab-engine/src/summary.rs): a run is generator-limited when more than 1% and
at least 10 of its sends left more than 2 ms after their intended time, not counting the sends
that were late while the broker held their connection's socket full (the broker's back-pressure),
or when a generator thread used more than 95% of a core. A raw result recorded before the engine
measured back-pressure (no `socket_full_us` among its counters) has no count of sends held back:
read again, every late send counts against the generator, so that part of the rule cannot be
applied to it and the table says so.

Which flag judges: the current rule's wherever the run can be read again, a run recorded before
back-pressure was measured included. The part of the rule that cannot be applied to it only ever
clears late sends, so a run read again as not generator-limited would not be by the whole rule
either, and one read again as limited is left out, its late sends not told apart from the
generator's. A run that cannot be read again (its plan or raw result refused by today's engine,
as one written before a field the engine now requires would be) keeps the flag it recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Optional

from mqttlab.analysis import Comparison
from mqttlab.analysis.runs import RunFigures

RULE = ("a run is generator-limited when more than 1% and at least 10 of its sends left more than 2 ms after their "
        "intended time, not counting those late while the broker held their connection's socket full (back-pressure), "
        "or when a generator thread used more than 95% of a core")
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class FlagReading:
    """One run's flag as recorded and as read again, with what the rule reads."""

    scenario: str  # its configuration: the scenario's name, and the fields that set it apart (compare's label)
    broker: str
    run: str  # its results directory's name (rep-N in a suite)
    day: str  # the run's UTC date
    recorded: bool
    now: Optional[bool]  # by the current rule; None: the run cannot be read again
    back_pressure: Optional[float]  # share of the publishers' connection time; None: not recorded
    held_back: Optional[int]  # sends more than 2 ms late while their socket was full; None: not recorded
    lag_p99_ms: Optional[float]
    broker_cpu: Optional[float]
    thread_cpu: Optional[float]
    host_busy: Optional[float]  # the host's busy cores while it ran (host-load.json); None: not kept

    @property
    def judged(self) -> bool:
        """The flag the verdicts use (the module's docstring says why)."""
        return self.recorded if self.now is None else self.now


def judge_by_current_rule(comparison: Comparison) -> list[FlagReading]:
    """Reads every run of `comparison` again and sets its `generator_limited` to the flag the
    verdicts judge by; returns the readings, one per run, for the page's table."""
    readings = []
    for scenario in comparison.scenarios:
        for group in scenario.groups.values():
            for run in group.runs:
                reading = read_again(run, scenario.scenario)
                run.generator_limited = reading.judged
                readings.append(reading)
    return readings


def read_again(run: RunFigures, configuration: str) -> FlagReading:
    """The run's flag by the engine's current rule, from its plan.json and result.json
    (`configuration`: the label it is compared under); `now` None when they cannot be read."""
    from mqttlab.engine import summarize
    from mqttlab.environment.host_load import read as host_load

    try:
        raw = (run.path / "result.json").read_text(encoding="utf-8")
        summary: dict[str, Any] = summarize(json.loads((run.path / "plan.json").read_text(encoding="utf-8")), raw).summary
        counters = json.loads(raw).get("counters") or {}
        now: Optional[bool] = bool(summary.get("generator_limited"))
    except (OSError, ValueError):
        summary, counters, now = run.results.summary, {}, None  # what it recorded, for the figures beside the flag
    measured = "socket_full_us" in counters
    generator = summary.get("generator") or {}
    lag = generator.get("schedule_lag_p99_us")
    return FlagReading(configuration, run.broker, run.path.name, run.started_at[:10], run.generator_limited_as_recorded, now,
                       generator.get("back_pressure_share") if measured else None,
                       int(counters.get("late_sends_held_back") or 0) if measured else None,
                       lag / 1000 if lag is not None else None, run.figures.get("broker_cpu"), generator.get("max_thread_cpu_share"),
                       host_load(run.path).get("busy_cores"))


def flag_section(readings: list[FlagReading]) -> str:
    """The page's one place for the flag: per configuration, broker and day of runs where any run
    was flagged (as recorded or read again), how many were flagged each way, with what the rule
    reads, and the runs the verdicts judge otherwise than the flags recorded; empty when no run
    was flagged either way."""
    # By the comparison's own label: runs configured differently are never one row.
    flagged = {(r.scenario, r.broker) for r in readings if r.recorded or r.now}
    if not flagged:
        return ""
    groups: dict[tuple[str, str, str, bool], list[FlagReading]] = {}
    for reading in readings:
        if (reading.scenario, reading.broker) in flagged:
            groups.setdefault((reading.scenario, reading.broker, reading.day, reading.back_pressure is not None), []).append(reading)
    lines = ["### Generator-limited runs, read again by the current rule", "",
             f"The rule: {RULE}. Each run is read again from its plan and raw result (in the evidence) by the engine that "
             "made this page. Runs recorded before back-pressure was measured (back-pressure "
             f"\"{NOT_RECORDED}\") have no count of the sends their broker held back, so that part of the rule cannot be "
             "applied to them: read again, every late send counts against the generator. Broker CPU and the busiest generator thread in "
             "shares of a core; the host's busy cores (every process's) where the run kept them, averaged over the whole run "
             "(its grace and loss deadline included, so a run that waits out a deadline reads lower than its load was). "
             "Ranges are over the runs.", "",
             _judged_text(readings), "",
             "| configuration | broker | runs on | runs | flagged as recorded | flagged by the current rule | "
             "sends held back (> 2 ms late, socket full) | back-pressure share | p99 send lag ms | broker CPU | busiest generator thread | host's busy cores |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (scenario, broker, day, _), members in groups.items():
        held = [r.held_back for r in members if r.held_back is not None]
        unread = sum(r.now is None for r in members)
        lines.append(f"| {scenario} | {broker} | {day} | {len(members)} | {sum(r.recorded for r in members)} | "
                     f"{sum(bool(r.now) for r in members)}{f' ({unread} not read again)' if unread else ''} | "
                     f"{f'{sum(held):,}' if len(held) == len(members) else NOT_RECORDED} | "
                     f"{_range([r.back_pressure for r in members], _share)} | {_range([r.lag_p99_ms for r in members], _ms)} | "
                     f"{_range([r.broker_cpu for r in members], _two)} | {_range([r.thread_cpu for r in members], _two)} | "
                     f"{_range([r.host_busy for r in members], _two)} |")
    again = _measured_lines(groups)
    if again:
        lines += ["", "Where back-pressure was measured, what the rule made of those runs:", "", *again]
    return "\n".join(lines)


def _judged_text(readings: list[FlagReading]) -> str:
    """What the verdicts judge by, and the runs that changed against the flags as recorded."""
    brought_in = [r for r in readings if r.recorded and not r.judged]
    left_out = [r for r in readings if r.judged and not r.recorded]
    unread = [r for r in readings if r.now is None]
    text = ("**The verdicts, tables and figures of this page judge by the current rule's flag** (the column \"flagged by the "
            "current rule\"), for runs recorded before back-pressure was measured too: the part of the rule that cannot be applied "
            "to them only ever clears late sends, so a run read again as not generator-limited would not be by the whole rule "
            "either, and one read again as limited is left out, its late sends not told apart from the generator's. A run that "
            "cannot be read again (its plan or raw result refused by this engine) keeps the flag it recorded. Against the "
            f"flags as recorded, that brings into the verdicts {_runs(brought_in)}, and leaves out {_runs(left_out)}")
    if unread:
        text += f"; {_runs(unread)} could not be read again and {'are' if len(unread) > 1 else 'is'} judged by the flag recorded"
    return text + "."


def _runs(readings: list[FlagReading]) -> str:
    """"no run", or the count and the runs by configuration and broker."""
    if not readings:
        return "no run"
    by_group: dict[tuple[str, str], list[str]] = {}
    for r in readings:
        by_group.setdefault((r.scenario, r.broker), []).append(r.run)
    named = "; ".join(f"{scenario} on {broker}: {', '.join(runs)}" for (scenario, broker), runs in by_group.items())
    return f"{len(readings)} run{'s' * (len(readings) != 1)} ({named})"


def _measured_lines(groups: dict[tuple[str, str, str, bool], list[FlagReading]]) -> list[str]:
    """One line per configuration and day of runs recorded with back-pressure measured."""
    by_scenario: dict[tuple[str, str], list[FlagReading]] = {}
    for (scenario, _, day, measured), members in groups.items():
        if measured:
            by_scenario.setdefault((scenario, day), []).extend(members)
    lines = []
    for (scenario, day), members in by_scenario.items():
        brokers = ", ".join(dict.fromkeys(r.broker for r in members))
        lines.append(f"- **{scenario}**: {len(members)} runs on {day} ({brokers}); {sum(bool(r.now) for r in members)} of them "
                     f"generator-limited by the current rule; back-pressure share {_range([r.back_pressure for r in members], _share)}, "
                     f"sends held back {sum(r.held_back or 0 for r in members):,}; broker CPU "
                     f"{_range([r.broker_cpu for r in members], _two)} of its core, busiest generator thread "
                     f"{_range([r.thread_cpu for r in members], _two)}, host {_range([r.host_busy for r in members], _two)} of its cores busy.")
    return lines


def _range(values: list[Optional[float]], text: Callable[[float], str]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return NOT_RECORDED
    low, high = text(min(known)), text(max(known))
    return low if low == high else f"{low}–{high}"


def _share(value: float) -> str:
    """A share as a percentage, never rounded to a zero it is not."""
    if value == 0:
        return "0"
    return f"{value * 100:.2f} %" if value >= 0.0001 else "< 0.01 %"


def _ms(value: float) -> str:
    return f"{value:.1f}"


def _two(value: float) -> str:
    return f"{value:.2f}"
