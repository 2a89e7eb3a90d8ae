"""Brokers side by side: per scenario and broker, each headline figure's mean over the
repetitions with its confidence interval and best-of-N, the latency of all repetitions pooled
(histograms add), and each broker's difference from a baseline broker with Welch's interval."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from mqttlab.analysis.configuration import configuration, configuration_key, describe, differing_fields
from mqttlab.analysis.runs import METRICS, ComparisonError, Metric, RunFigures, metrics_for, read_runs
from mqttlab.analysis.stats import Difference, Estimate, mean_interval, welch_difference
from mqttlab.calibration import difference as calibration_difference
from mqttlab.calibration import side_by_side


@dataclass
class BrokerGroup:
    """The repetitions of one scenario on one broker."""

    scenario: str
    broker: str
    runs: list[RunFigures]
    estimates: dict[str, Estimate]
    latency_measure: Optional[str]
    pooled_histogram: Optional[str]  # the latency histograms of every repetition, added
    pooled_latency: Optional[dict[str, Any]]  # statistics of pooled_histogram, µs

    @property
    def versions(self) -> list[str]:
        return sorted({run.broker_version for run in self.runs if run.broker_version})

    @property
    def generator_limited_runs(self) -> int:
        return sum(run.generator_limited for run in self.runs)

    @property
    def violations(self) -> dict[str, tuple[int, int]]:
        """Each promise the broker broke (summary.json's violations, by kind): (count over the
        runs, runs that broke it)."""
        found: dict[str, tuple[int, int]] = {}
        for run in self.runs:
            for kind, count in run.violations.items():
                total, runs = found.get(kind, (0, 0))
                found[kind] = (total + count, runs + 1)
        return found


@dataclass
class ScenarioComparison:
    scenario: str
    groups: dict[str, BrokerGroup]  # broker -> group, in broker order
    differences: dict[str, dict[str, Difference]]  # non-baseline broker -> metric -> difference
    baseline_present: bool

    @property
    def first_run(self) -> RunFigures:
        return next(iter(self.groups.values())).runs[0]

    @property
    def offered_per_s(self) -> Optional[float]:
        """The deliveries per second the schedule offered (the whole configuration is equal
        within a scenario, so any run says it); None when the generator saturated."""
        return self.first_run.offered_per_s

    @property
    def generator_limited_apart(self) -> bool:
        """Runs shown apart because they were flagged generator-limited (`compare --generator-limited`)."""
        return self.scenario.endswith(GENERATOR_LIMITED_LABEL)


@dataclass
class Comparison:
    scenarios: list[ScenarioComparison]
    brokers: list[str]
    baseline: str
    confidence: float
    excluded: list[tuple[Path, str]] = field(default_factory=list)  # runs left out, and why
    notes: list[str] = field(default_factory=list)  # e.g. brokers a suite could not run here, and why
    paper: Optional[Any] = None  # the paper vs this run (paper_figures.PaperSection), when a seed's paper applies
    metrics: tuple[Metric, ...] = METRICS  # the figures compared: the headline ones, and the faults' when runs had faults
    generator_limited_left_out: list[Path] = field(default_factory=list)  # runs flagged generator-limited, left out of the figures
    # The instrument's overhead on each broker's runs' hosts (mqttlab.calibration.side_by_side)
    calibrations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run_count(self) -> int:
        return sum(len(group.runs) for scenario in self.scenarios for group in scenario.groups.values())

    def rows(self) -> list[dict[str, Any]]:
        """One row per scenario, broker and metric: the long table behind every view."""
        rows = []
        for scenario in self.scenarios:
            for broker, group in scenario.groups.items():
                for metric in self.metrics:
                    estimate = group.estimates[metric.key]
                    difference = scenario.differences.get(broker, {}).get(metric.key)
                    rows.append({
                        "scenario": scenario.scenario,
                        "broker": broker,
                        "metric": metric.key,
                        "unit": metric.unit,
                        "n": estimate.n,
                        "mean": estimate.mean,
                        "stdev": estimate.stdev,
                        "ci_low": estimate.low,
                        "ci_high": estimate.high,
                        "best": estimate.best,
                        "baseline": self.baseline if scenario.baseline_present else None,
                        "diff": difference.difference if difference else None,
                        "diff_low": difference.low if difference else None,
                        "diff_high": difference.high if difference else None,
                        "diff_relative": difference.relative if difference else None,
                    })
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "confidence": self.confidence,
            "interval": "Student t over repetitions; differences: Welch t (unequal variances)",
            "brokers": self.brokers,
            "excluded": [{"path": str(path), "reason": reason} for path, reason in self.excluded],
            "generator_limited_left_out": [str(path) for path in self.generator_limited_left_out],
            "violations": [{"scenario": s.scenario, "broker": b, "kind": kind, "count": count, "runs": runs, "of_runs": len(g.runs)}
                           for s in self.scenarios for b, g in s.groups.items() for kind, (count, runs) in g.violations.items()],
            "notes": list(self.notes),
            "calibrations": self.calibrations,
            "rows": self.rows(),
            "pooled_latency": [
                {"scenario": s.scenario, "broker": b, "measure": g.latency_measure, **(g.pooled_latency or {})}
                for s in self.scenarios for b, g in s.groups.items()
            ],
            **({"paper": self.paper.to_dict()} if self.paper is not None else {}),
        }


def compare_runs(runs: list[RunFigures], *, baseline: Optional[str] = None, confidence: float = 0.95,
                 flagged_apart: bool = False) -> Comparison:
    """Groups completed runs by scenario and broker and compares the brokers. Runs that did
    not complete are left out of every statistic and listed in `excluded`; with `flagged_apart`
    runs flagged generator-limited form scenarios of their own."""
    if not 0 < confidence < 1:
        raise ComparisonError(f"--confidence: must be between 0 and 1, e.g. 0.95 (got {confidence})")
    usable = [run for run in runs if run.status == "completed"]
    excluded = [(run.path, f"status {run.status}") for run in runs if run.status != "completed"]
    if not usable:
        raise ComparisonError("no completed run to compare" + (f" ({len(excluded)} did not complete)" if excluded else ""))
    brokers = list(dict.fromkeys(run.broker for run in usable))
    chosen = baseline if baseline is not None else brokers[0]
    if chosen not in brokers:
        raise ComparisonError(f"--baseline: no runs of broker {chosen!r} (brokers in these results: {', '.join(brokers)})")
    labels = scenario_labels(usable, flagged_apart)
    metrics = metrics_for(usable)
    scenarios = []
    for scenario in dict.fromkeys(labels[id(run)] for run in usable):
        groups = {}
        for broker in brokers:
            members = [run for run in usable if labels[id(run)] == scenario and run.broker == broker]
            if members:
                groups[broker] = _group(scenario, broker, members, confidence, metrics)
        scenarios.append(_scenario_comparison(scenario, groups, chosen, confidence, metrics))
    return Comparison(scenarios, brokers, chosen, confidence, excluded, metrics=metrics)


GENERATOR_LIMITED_LABEL = " [generator-limited]"


def scenario_labels(runs: list[RunFigures], flagged_apart: bool = False) -> dict[int, str]:
    """The scenario each run is compared under (by id(run)): its name, and where runs of one name
    were configured differently (--set, or directories compared by hand), the name followed by the
    fields that differ, so that they are never averaged together; with `flagged_apart`, a run
    flagged generator-limited under its label followed by GENERATOR_LIMITED_LABEL."""
    configs = {id(run): configuration(run.results.scenario) for run in runs}
    labels: dict[int, str] = {}
    for name in dict.fromkeys(run.scenario for run in runs):
        named = [run for run in runs if run.scenario == name]
        distinct = {configuration_key(run.results.scenario): configs[id(run)] for run in named}
        fields = differing_fields(distinct.values())
        for run in named:
            # A run recorded before a field existed lacks it: said so ("before FIELD"), never an empty label.
            told = describe(configs[id(run)], fields) or "before " + ", ".join(fields)
            labels[id(run)] = f"{name} [{told}]" if fields else name
            if flagged_apart and run.generator_limited:
                labels[id(run)] += GENERATOR_LIMITED_LABEL
    return labels


def compare_directories(paths: Iterable[Path], *, baseline: Optional[str] = None, confidence: float = 0.95) -> Comparison:
    paths = list(paths)
    runs = read_runs(paths)
    comparison = compare_runs(runs, baseline=baseline, confidence=confidence)
    comparison.notes += skipped_broker_notes(paths)
    comparison.calibrations = side_by_side((run.broker, run.results.manifest, run.results.summary) for run in runs)
    note = calibration_difference({_from_source(run.path, paths): run.results.manifest.get("calibration") for run in runs})
    comparison.notes += [note] if note else []
    return comparison


SKIPPED_BROKERS = "skipped-brokers.json"


def _from_source(path: Path, sources: list[Path]) -> str:
    """A run's path as given, or from the directory it was found in (never this machine's scratch
    directory, as when an evidence archive is unpacked), so that a note naming it reads the same on
    any machine."""
    for source in sources:
        if Path(path) != Path(source) and Path(path).is_relative_to(source):
            return Path(path).relative_to(source).as_posix()
    return str(path)


def skipped_broker_notes(paths: Iterable[Path]) -> list[str]:
    """Notes for the brokers a suite skipped because they are not available on its host
    (written by `mqttlab suite run` as skipped-brokers.json in the suite directory)."""
    notes = []
    for path in paths:
        try:
            skipped = json.loads((Path(path) / SKIPPED_BROKERS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for entry in skipped:
            notes.append(f"{entry.get('name')} was not run: not available on this host ({entry.get('reason')})")
    return notes


def _group(scenario: str, broker: str, runs: list[RunFigures], confidence: float, metrics: tuple[Metric, ...] = METRICS) -> BrokerGroup:
    estimates = {
        metric.key: mean_interval([run.figures.get(metric.key) for run in runs], confidence, metric.higher_is_better)
        for metric in metrics
    }
    measures = Counter(run.latency_measure for run in runs if run.latency_measure)
    measure = measures.most_common(1)[0][0] if measures else None
    pooled = _pooled_histogram(runs, measure) if measure else None
    pooled_stats = _histogram_stats(pooled) if pooled else None
    return BrokerGroup(scenario, broker, runs, estimates, measure, pooled, pooled_stats)


def _scenario_comparison(
    scenario: str, groups: dict[str, BrokerGroup], baseline: str, confidence: float, metrics: tuple[Metric, ...] = METRICS
) -> ScenarioComparison:
    reference = groups.get(baseline)
    differences: dict[str, dict[str, Difference]] = {}
    if reference is not None:
        for broker, group in groups.items():
            if broker == baseline:
                continue
            differences[broker] = {
                metric.key: welch_difference(
                    [run.figures.get(metric.key) for run in group.runs],
                    [run.figures.get(metric.key) for run in reference.runs],
                    confidence,
                )
                for metric in metrics
            }
    return ScenarioComparison(scenario, groups, differences, reference is not None)


def _pooled_histogram(runs: list[RunFigures], measure: str) -> Optional[str]:
    from mqttlab.engine import load_engine

    encoded = [text for text in (run.results.histogram(measure) for run in runs) if text]
    if not encoded:
        return None
    return encoded[0] if len(encoded) == 1 else str(load_engine().histogram_merge(encoded))


def _histogram_stats(encoded: str) -> Optional[dict[str, Any]]:
    from mqttlab.engine import load_engine

    stats = json.loads(load_engine().histogram_stats(encoded))
    return stats if stats.get("count") else None


def leave_out_generator_limited(comparison: Comparison, *, keep_all_flagged: bool = True) -> Comparison:
    """The comparison made again without the runs flagged generator-limited, as the verdicts judge
    it: a flagged run bounds the host as much as the broker. A configuration whose runs were all
    flagged keeps them when `keep_all_flagged` (a table shows it, marked), and is dropped when not
    (a figure would draw it as the broker's)."""
    groups = [group for scenario in comparison.scenarios for group in scenario.groups.values()]
    if not any(group.generator_limited_runs for group in groups):
        return comparison
    kept = [run for group in groups for run in group.runs
            if not run.generator_limited or (keep_all_flagged and group.generator_limited_runs == len(group.runs))]
    if not kept:
        return comparison
    # The baseline broker may have had nothing but flagged runs: then the first broker left is.
    baseline = comparison.baseline if any(run.broker == comparison.baseline for run in kept) else None
    judged = compare_runs(kept, baseline=baseline, confidence=comparison.confidence)
    judged.notes, judged.paper, judged.excluded, judged.calibrations = comparison.notes, comparison.paper, comparison.excluded, comparison.calibrations
    judged.generator_limited_left_out = [run.path for group in groups for run in group.runs if run not in kept]
    return judged


def as_read(comparison: Comparison, *, flagged_apart: bool = False) -> Comparison:
    """The comparison `compare` shows: runs flagged generator-limited left out of the figures, as
    the reproduction pages leave them (a configuration with no other run stays, marked), or with
    `flagged_apart` in scenarios of their own beside the others."""
    if not flagged_apart:
        return leave_out_generator_limited(comparison)
    runs = [run for scenario in comparison.scenarios for group in scenario.groups.values() for run in group.runs]
    apart = compare_runs(runs, baseline=comparison.baseline, confidence=comparison.confidence, flagged_apart=True)
    apart.notes, apart.paper, apart.excluded, apart.calibrations = comparison.notes, comparison.paper, comparison.excluded, comparison.calibrations
    return apart
