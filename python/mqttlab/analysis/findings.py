"""What a comparison found, in sentences: each difference from the baseline whose interval excludes
0 with its size in words, the figures that do not differ at this confidence, what cannot be judged
and why (one run, only generator-limited runs), and every promise a broker broke. `compare` opens
with these, in the terminal, the HTML report and comparison.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, Optional

from mqttlab.analysis.compare import BrokerGroup, Comparison, ScenarioComparison
from mqttlab.analysis.runs import METRIC_BY_KEY, merit
from mqttlab.analysis.stats import Difference
from mqttlab.numbers import figure_text

Kind = Literal["significant", "not significant", "cannot judge", "violations"]

# The figures a finding is about: the summary's (the mean latency, mean RSS and the generator's CPU
# stay in the tables).
JUDGED = ("throughput", "latency_p50", "latency_p99", "latency_max", "loss", "dropped", "broker_cpu", "broker_rss_peak",
          "fault_outage", "fault_recovery")

# What `relative` (the difference over the baseline's mean) is called, from the smallest up.
SIZES = ((0.05, "marginal"), (0.2, "small"), (0.5, "moderate"), (1.0, "large"))


@dataclass(frozen=True)
class Finding:
    kind: Kind
    scenario: str
    broker: str
    text: str  # the whole sentence, without the scenario (findings are shown under it)
    metric: Optional[str] = None
    difference: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    relative: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def size_in_words(relative: Optional[float]) -> str:
    """How big a difference is against the baseline's mean: marginal (< 5 %), small (< 20 %),
    moderate (< 50 %), large (< 100 %), or a multiple (2.4× the baseline's)."""
    if relative is None:
        return "the baseline's mean is 0"
    for bound, word in SIZES:
        if abs(relative) < bound:
            return f"{relative:+.0%}, {word}"
    return f"{1 + relative:.2g}× the baseline's"


def comparison_data(comparison: Comparison) -> dict[str, Any]:
    """comparison.json and `compare --json`: the comparison with its findings."""
    return {**comparison.to_dict(), "findings": [finding.to_dict() for finding in findings(comparison)]}


def findings(comparison: Comparison) -> list[Finding]:
    """Every scenario's findings for every broker against the baseline, then the violations."""
    found: list[Finding] = []
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            if broker != comparison.baseline:
                found += _against_baseline(comparison, scenario, broker, group)
            found += _violations(scenario, broker, group)
    return found


def _against_baseline(comparison: Comparison, scenario: ScenarioComparison, broker: str, group: BrokerGroup) -> list[Finding]:
    baseline = comparison.baseline
    reference = scenario.groups.get(baseline)
    why = _unjudged(scenario, broker, group, baseline, reference)
    if why is not None:
        return [Finding("cannot judge", scenario.scenario, broker, f"{broker} against {baseline}: cannot judge, {why}")]
    found: list[Finding] = []
    level = f"{comparison.confidence:.0%}"
    alike = []
    for key in JUDGED:
        difference = scenario.differences.get(broker, {}).get(key)
        if difference is None or difference.difference is None or METRIC_BY_KEY[key] not in comparison.metrics:
            continue
        if difference.excludes_zero:
            found.append(_significant(scenario, broker, baseline, key, difference))
        else:
            alike.append(METRIC_BY_KEY[key].title)
    if alike:
        found.append(Finding("not significant", scenario.scenario, broker,
                             f"{broker} and {baseline} do not differ at {level} in {', '.join(alike)}"))
    return found


def _unjudged(scenario: ScenarioComparison, broker: str, group: BrokerGroup, baseline: str, reference: Optional[BrokerGroup]) -> Optional[str]:
    """Why `group` cannot be set against the baseline, or None when it can."""
    if scenario.generator_limited_apart:
        return "its runs were all flagged generator-limited (shown apart; they bound the host as much as the broker)"
    if reference is None:
        return f"no run of {baseline} in this scenario"
    for name, members in ((broker, group), (baseline, reference)):
        if members.generator_limited_runs == len(members.runs):
            return f"only generator-limited runs of {name} (they bound the host as much as the broker)"
    ones = [f"{len(members.runs)} run of {name}" for name, members in ((broker, group), (baseline, reference)) if len(members.runs) < 2]
    if ones:
        return " and ".join(ones) + " (an interval needs two or more on each side)"
    return None


def _significant(scenario: ScenarioComparison, broker: str, baseline: str, key: str, difference: Difference) -> Finding:
    metric = METRIC_BY_KEY[key]
    value = difference.difference or 0.0
    direction = "higher" if value > 0 else "lower"
    better = merit(metric, scenario.first_run.saturating)
    verdict = "" if better is None else (", better" if (value > 0) == better else ", worse")
    if better is None:  # an open-loop delivered rate: missing deliveries, not speed
        verdict = f" of the same offered {figure_text(scenario.offered_per_s or 0.0)} {metric.unit}" if scenario.offered_per_s else ""
    text = (f"{broker}: {metric.title} {figure_text(abs(value))} {metric.unit} {direction} than {baseline}'s"
            f" [{figure_text(difference.low or 0.0, 2, '+')}, {figure_text(difference.high or 0.0, 2, '+')}]"
            f" ({size_in_words(difference.relative)}){verdict}")
    return Finding("significant", scenario.scenario, broker, text, key, difference.difference, difference.low, difference.high,
                   difference.relative)


def _violations(scenario: ScenarioComparison, broker: str, group: BrokerGroup) -> list[Finding]:
    if not group.violations:
        return []
    broken = ", ".join(f"{kind} {count:,} in {runs} of {len(group.runs)} run{'s' if len(group.runs) != 1 else ''}"
                       for kind, (count, runs) in group.violations.items())
    return [Finding("violations", scenario.scenario, broker, f"{broker} broke the protocol's promises: {broken} (those runs exit 1)")]
