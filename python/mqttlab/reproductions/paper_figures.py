"""The paper vs this run: each figure of a seed's paper file beside ours for the same configuration,
with the ratio or difference, and a verdict on each of the paper's claims.

Where our figure comes from is the figure's `reproduce:` mapping in the paper file (paper_file.py):
a suite's runs (a Comparison, which already keeps each whole configuration apart, so a row never
averages different configurations), a computation (deterministic figures), or seed 000's
`mqttlab smc paper` directory. Deterministic figures (`exact: true`) must be equal; when they are
not, the row is flagged and says why (the inputs that differ from the paper's)."""

from __future__ import annotations

import fnmatch
import itertools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, TypeGuard, Union

from mqttlab.analysis.compare import BrokerGroup, Comparison
from mqttlab.analysis.runs import RunFigures
from mqttlab.analysis.stats import mean_interval
from mqttlab.engine import client_topic, expand_template
from mqttlab.reproductions.capacity_searches import CapacitySearch, matching
from mqttlab.reproductions.paper_file import Figure, Reproduce

# Row statuses.
MATCHES = "matches"  # exact figure, equal
DIFFERS = "differs"  # exact figure, not equal: flagged
AGREES = "agrees"  # in the paper's range, or within the mapping's tolerance factor (its interval wholly so)
DISAGREES = "disagrees"  # outside (its interval wholly outside)
CANNOT_TELL = "cannot tell"  # our interval straddles the edge of the agreement region
LIMITED = "not judged: generator-limited runs only"  # every run of the row was flagged generator-limited
NO_PAPER_NUMBER = "no number in the paper"  # a plot without numbers: ours shown, nothing to compare
NOT_MEASURED = "not measured in these results"
NOT_HERE = "not reproducible here"
MEASURED = (MATCHES, DIFFERS, AGREES, DISAGREES, CANNOT_TELL)

# Keys of a dict-valued exact figure that still depend on the host (an SPRT row's wall time):
# compared with the tolerance, never flagged.
HOST_DEPENDENT_KEYS = {"time_s"}
FRAME_HEADERS = 66  # Ethernet 14 + IPv4 20 + TCP 32 with timestamps, as seed 002's captures counted
DEFAULT_TOLERANCE = 2.0  # a mapping without `tolerance:`; every row judged with it says "(default)"
COMPUTED_HERE = "computed, not measured"  # what a `computed:` figure of ours is, said beside it

Value = Union[float, str, list, dict, None]


@dataclass
class FigureRow:
    figure: str
    quote: str
    kind: str
    unit: Optional[str]
    exact: bool
    paper: Value
    ours: Value
    status: str
    scenario: Optional[str] = None
    broker: Optional[str] = None
    runs: Optional[int] = None
    source: str = ""  # what ours is: "mean of 5 runs", "computed", "smc table2", or why not here
    ratio: Optional[float] = None  # ours / paper's, single numbers only
    difference: Optional[float] = None  # ours - paper's
    flagged: bool = False
    reason: str = ""  # why a flagged figure differs, or why it is not measured
    rule: str = ""  # how the status was decided: "within ×2 (default tolerance) of 200 ms", "equal (exact)"
    samples: list[float] = field(default_factory=list)  # per-run values behind `ours` (the runs judged)
    interval: Optional[list[float]] = None  # the confidence interval of `ours`, from the samples (n >= 2)
    limited: int = 0  # runs flagged generator-limited, left out of `ours` (or, when all are, of every verdict)
    expected: Value = None  # beside a measured figure: the same figure computed from the protocol, never judged
    statistic: str = ""  # what `ours` is of its runs: "mean of 5 runs", "best of 5 runs", "one run", "range of 4 brokers' means"
    # A range of ours over brokers: each broker's figure as [low, high] (its interval, or its value twice)
    spans: list[list[float]] = field(default_factory=list)
    # Intervals of keys of a value with keys (an SPRT row's share of clients: binomial), which the rules use
    key_intervals: dict[str, list[float]] = field(default_factory=dict)
    side: str = ""  # where ours lies when it disagrees: "ours lower" or "ours higher" than the paper's, or "other sign"
    derived: str = ""  # the paper's figure is not printed but computed from what is: how
    derived_keys: list[str] = field(default_factory=list)  # of keyed values, the keys derived (none named: all)
    interval_kind: str = ""  # which interval `interval` is, where not the runs' t interval ("binomial")
    started: list[str] = field(default_factory=list)  # when each run behind `ours` started (UTC, ISO), where runs are behind it

    @property
    def uncertainty(self) -> str:
        """What ours is (`mean of 3 runs`, `best of 5 runs, no interval`, `one run`) with its interval;
        and how many generator-limited runs were left out."""
        parts = []
        if self.statistic:
            parts.append(self.statistic)
        elif self.samples:
            parts.append("one run" if len(self.samples) == 1 else f"{len(self.samples)} runs")
        if self.interval is not None:
            if self.interval_kind == BRACKET:
                parts.append(f"bracket {_text(self.interval[0])}–{_text(self.interval[1])}")
            else:
                parts.append(f"CI {_text(self.interval[0])}–{_text(self.interval[1])}" + (f" ({self.interval_kind})" if self.interval_kind else ""))
        elif len(self.samples) > 1 and not self.spans:
            parts.append("no interval")
        # A value with keys: the intervals of the keys its rules read (a share's binomial one, an estimate's).
        parts += [f"{key} CI {_text(low)}–{_text(high)}" for key, (low, high) in self.key_intervals.items()]
        if self.status == LIMITED:  # the runs shown are the flagged ones: nothing was left out of them
            parts.append("every run generator-limited: shown, not judged")
        elif self.limited:
            parts.append(f"{self.limited} generator-limited run{'s' * (self.limited != 1)} left out")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def figure_rows(figure: Figure, comparison: Optional[Comparison], smc: Optional["SmcPaperResults"],
                searches: Optional[list[CapacitySearch]] = None) -> list[FigureRow]:
    how = figure.reproduce
    paper = _paper_value(figure)
    base: dict[str, Any] = {"figure": figure.id, "quote": figure.quote, "kind": figure.kind, "unit": figure.unit, "exact": figure.exact, "paper": paper,
                            "derived": figure.derived or "", "derived_keys": list(figure.derived_keys or [])}
    if how.not_here is not None:
        return [FigureRow(**base, ours=None, status=NOT_HERE, source="", reason=how.not_here)]
    if how.computed is not None:
        found = _computed(figure, how, comparison)
    elif how.smc is not None:
        if smc is None:
            return [FigureRow(**base, ours=None, status=NOT_MEASURED, source=f"smc {how.smc}",
                              reason="seed 000's figures come from a `mqttlab smc paper` directory")]
        found = smc.values(figure, how)
    elif how.capture is not None:
        found = _captured(figure, how, comparison)
    elif how.capacity is not None:
        found = _capacity(how, searches or [])
    else:
        found = _measured(how, comparison)
    if not found:
        where = ((f"scenario {how.scenario}" + (" with a packet capture" if how.capture else "")) if how.scenario
                 else f"capacity search {how.capacity}" if how.capacity else (how.smc or how.computed or ""))
        return [FigureRow(**base, ours=None, status=NOT_MEASURED, source=where,
                          reason=f"no run of {where}" + (f" on {how.broker}" if how.broker else "") + " in these results")]
    rows = []
    for match in found:
        row = FigureRow(**base, ours=match.value, status="", scenario=match.scenario, broker=match.broker, runs=match.runs,
                        source=match.source, samples=match.samples, interval=match.interval, limited=match.limited,
                        statistic=match.statistic, spans=match.spans, key_intervals=match.key_intervals, interval_kind=match.interval_kind,
                        started=match.started)
        if figure.exact:
            # A protocol figure (bytes of a packet, an SPRT's sample count) does not depend on
            # whether the host kept the schedule: no run is left out of it.
            row.limited = 0
            _judge(row, figure, how, match.inputs)
        elif match.limited_only:
            row.status, row.rule = LIMITED, ("the search stopped at the generator's limit before any rate was sustained" if how.capacity
                                              else "every run of this configuration was flagged generator-limited")
        else:
            _judge(row, figure, how, match.inputs)
        rows.append(row)
    if how.expected is not None:
        _expect(rows, figure, how, comparison)
    return rows


@dataclass
class _Ours:
    value: Value
    source: str
    scenario: Optional[str] = None
    broker: Optional[str] = None
    runs: Optional[int] = None
    inputs: str = ""  # for a computed figure: what it was computed from (the "why" of a difference)
    samples: list[float] = field(default_factory=list)
    interval: Optional[list[float]] = None
    limited: int = 0
    limited_only: bool = False
    statistic: str = ""
    spans: list[list[float]] = field(default_factory=list)
    key_intervals: dict[str, list[float]] = field(default_factory=dict)
    interval_kind: str = ""
    started: list[str] = field(default_factory=list)


def _paper_value(figure: Figure) -> Value:
    if figure.range is not None:
        return list(figure.range)
    if figure.values is not None:
        return figure.values
    return figure.value


# ---- measured: a suite's runs -------------------------------------------------------------------


def base_name(label: str) -> str:
    # Runs of one name configured differently are labelled "name [field=value, ...]" (compare.py).
    return label.split(" [", 1)[0]


def _broker_matches(label: str, wanted: Optional[list[str]]) -> bool:
    return wanted is None or any(label == name or label.startswith(name + " (") for name in wanted)


def _groups(how: Reproduce, comparison: Optional[Comparison]) -> list[tuple[str, str, BrokerGroup]]:
    if comparison is None or how.scenario is None:
        return []
    wanted = [how.broker] if how.broker else how.brokers
    return [(scenario.scenario, broker, group) for scenario in comparison.scenarios
            if fnmatch.fnmatchcase(base_name(scenario.scenario), how.scenario)
            for broker, group in scenario.groups.items() if _broker_matches(broker, wanted)]


def _measured(how: Reproduce, comparison: Optional[Comparison]) -> list[_Ours]:
    """Ours per configuration and broker, from the runs not flagged generator-limited (all runs,
    marked, when every one was: shown, never judged)."""
    found = []
    confidence = comparison.confidence if comparison is not None else 0.95
    for scenario, broker, group in _groups(how, comparison):
        usable = [run for run in group.runs if not run.generator_limited]
        runs = usable or group.runs
        per_run = [v for v in (run_value(run, how.metric or "") for run in runs) if v is not None]
        if not per_run:
            continue
        value: Value = _best(per_run, how.metric or "") if how.statistic == "best" else sum(per_run) / len(per_run)
        if how.metric == "latency_mean_sd":
            from mqttlab.reports.paper import paper_sd  # which SD the seeds drew lives with their statistics table

            value = {"mean": value, "std": paper_sd(group)[0]}
        estimate = mean_interval(per_run, confidence) if usable and how.statistic == "mean" else None
        interval = [estimate.low, estimate.high] if estimate is not None and estimate.low is not None and estimate.high is not None else None
        if interval is not None and interval[0] < 0 <= min(per_run):
            # Every figure a run gives here (latency, loss, throughput, CPU, memory) is at least 0: a
            # Student-t interval over a few skewed runs can reach below it, the quantity cannot.
            interval[0] = 0.0
        n = len(runs)
        limited = len(group.runs) - len(usable)
        statistic = "one run" if n == 1 else f"{'best' if how.statistic == 'best' else 'mean'} of {n} runs"
        kind = ""
        if how.metric == "loss" and usable and how.statistic == "mean":
            pooled = _loss_interval(usable, confidence)
            if pooled is not None:
                # A share of messages has its binomial uncertainty; the runs' spread, where wider, is kept.
                interval = pooled if interval is None else [min(interval[0], pooled[0]), max(interval[1], pooled[1])]
                # A share is at most 100 %, as it is at least 0: t over two runs (t = 12.7) reaches past it.
                interval[1] = min(interval[1], 100.0)
                kind = "the wider of t and the pooled count's binomial" if n > 1 else "binomial"
        found.append(_Ours(value, f"{how.metric}, {statistic}", scenario, broker, n, samples=per_run, interval=interval,
                           limited=limited, limited_only=not usable, statistic=statistic, interval_kind=kind,
                           started=[run.started_at for run in runs if run.started_at]))
    if how.aggregate == "max" and found:
        judged = [f for f in found if not f.limited_only] or found
        top = max((f for f in judged if number(f.value)), key=lambda f: float(f.value), default=None)  # type: ignore[arg-type]
        if top is None:
            return []
        top.source = f"{top.source}: the highest of {len(judged)} broker/configuration groups ({top.broker})"
        top.statistic = f"the highest of {len(judged)} groups' {_plural(top.statistic)}"
        return [top]
    if how.aggregate == "range" and found:
        judged = [f for f in found if not f.limited_only] or found
        judged = [f for f in judged if number(f.value)]
        if not judged:
            return []
        numbers = [float(f.value) for f in judged]  # type: ignore[arg-type]
        # Each group's interval (or, without one, its value) is what the range's rule judges.
        spans = [list(f.interval) if f.interval else [float(f.value), float(f.value)] for f in judged]  # type: ignore[arg-type]
        statistics = sorted({_plural(f.statistic) for f in judged})
        return [_Ours([min(numbers), max(numbers)], f"{how.metric}: range over {len(numbers)} broker/configuration groups",
                      how.scenario, ", ".join(dict.fromkeys(f.broker or "" for f in judged)), sum(f.runs or 0 for f in judged),
                      limited=sum(f.limited for f in found), limited_only=all(f.limited_only for f in found),
                      statistic=f"range of {len(numbers)} groups' {' or '.join(statistics)}", spans=spans)]
    return found


BRACKET = "bracket"  # the interval_kind of a capacity: the search's bracket, not a confidence interval


def _capacity(how: Reproduce, searches: list[CapacitySearch]) -> list[_Ours]:
    """The broker's capacity from each matching search, its bracket as its interval; a search the
    generator stopped before any rate was sustained judges nothing (limited_only)."""
    found = []
    for search in matching(searches, how.capacity or "", [how.broker] if how.broker else how.brokers):
        statistic = f"capacity ({search.objectives}; {search.probes} probes)"
        found.append(_Ours(search.lower, f"capacity search {search.name}: {search.headline}", search.name, search.broker, 1,
                           interval=search.bracket, limited_only=search.lower is None and search.status == "generator_limited",
                           statistic=statistic, interval_kind=BRACKET))
    return found


def _loss_interval(runs: list[RunFigures], confidence: float) -> Optional[list[float]]:
    """The Clopper–Pearson interval, in %, of the runs' lost deliveries of those expected, pooled."""
    from mqttlab.smc.stats import clopper_pearson

    counts = [run.results.summary.get("messages") or {} for run in runs]
    expected = sum(int(c.get("expected") or 0) for c in counts)
    if expected <= 0:
        return None
    low, high = clopper_pearson(sum(int(c.get("lost") or 0) for c in counts), expected, confidence)
    return [100 * low, 100 * high]


def _plural(statistic: str) -> str:
    """"mean of 5 runs" as one of several groups' figures: "means of 5 runs"; "one run": "single runs"."""
    if statistic == "one run":
        return "single runs"
    head, _, rest = statistic.partition(" of ")
    return f"means of {rest}" if head == "mean" else statistic


# A paper metric read from a run figure of another name, in another unit: (figure, factor).
_FROM_FIGURE = {"latency_mean_sd": ("latency_mean", 1.0), "broker_cpu_percent": ("broker_cpu", 100.0)}


def _best(per_run: list[float], metric: str) -> float:
    """The best run's figure: the highest throughput, the lowest latency, CPU or memory."""
    from mqttlab.analysis.runs import METRIC_BY_KEY

    known = METRIC_BY_KEY.get(_FROM_FIGURE.get(metric, (metric, 1.0))[0])
    return max(per_run) if known is not None and known.higher_is_better else min(per_run)


def run_value(run: RunFigures, metric: str) -> Optional[float]:
    """Our figure `metric` (paper_file.METRIC_UNITS) of one run; latency_mean_sd: its mean."""
    if metric == "sent":
        sent = (run.results.summary.get("messages") or {}).get("sent")
        return None if sent is None else float(sent)
    figure, factor = _FROM_FIGURE.get(metric, (metric, 1.0))
    value = run.figures.get(figure)
    return None if value is None else factor * float(value)


# ---- computed: deterministic figures -----------------------------------------------------------


def _captured(figure: Figure, how: Reproduce, comparison: Optional[Comparison]) -> list[_Ours]:
    """Ours from the packet captures of the runs of each configuration (reproductions/captured.py).
    Every captured run counts, generator-limited or not: the bytes a capture saw do not depend on
    whether the generator kept its schedule."""
    from mqttlab.reproductions.captured import captured_value

    from mqttlab.reproductions.captured import TIMED

    keys = [str(key) for key in figure.values] if isinstance(figure.values, dict) else None
    confidence = comparison.confidence if comparison is not None else 0.95
    found = []
    for scenario, broker, group in _groups(how, comparison):
        got = captured_value(how.capture or "", group.runs, packet=how.packet, layer=how.layer, keys=keys, direction=how.direction)
        if got is not None:
            # A timed figure (the fin's fall) is a measurement that varies from run to run: its mean
            # has the runs' t-interval, as a suite's figures do; the byte counts are exact.
            estimate = mean_interval(got.samples, confidence) if how.capture in TIMED and len(got.samples) > 1 else None
            interval = [estimate.low, estimate.high] if estimate is not None and estimate.low is not None and estimate.high is not None else None
            if interval is not None:
                interval = [max(interval[0], 0.0), min(interval[1], 1.0)]  # a fall is a share of the peak
            found.append(_Ours(got.value, got.inputs, scenario, broker, got.runs, inputs=got.inputs, samples=got.samples,
                               interval=interval, statistic="one run" if got.runs == 1 else f"mean of {got.runs} runs"))
    return found


def _expect(rows: list[FigureRow], figure: Figure, how: Reproduce, comparison: Optional[Comparison]) -> None:
    """Beside each measured row, the figure computed from the protocol for its configuration."""
    computed = _computed(figure, how.model_copy(update={"computed": how.expected}), comparison)
    for row in rows:
        same = [c for c in computed if c.scenario in (None, row.scenario) and c.broker in (None, row.broker)]
        if same:
            row.expected = same[0].value


def _computed(figure: Figure, how: Reproduce, comparison: Optional[Comparison]) -> list[_Ours]:
    config = figure.config
    extra = FRAME_HEADERS if how.layer == "frame" else 0
    layer = " + 66 B of Ethernet/IP/TCP headers" if extra else ""
    if how.computed in ("ack_bytes", "connack_bytes", "disconnect_bytes", "ack_overhead"):
        return _per_run_plan(how, comparison, lambda sizes, plan: _packet_figure(how, sizes, extra, layer))
    if how.computed == "chernoff_samples":
        from mqttlab.smc.stats import chernoff_sample_size

        epsilon, delta = float(config["epsilon"]), float(config["delta"])
        return [_Ours(chernoff_sample_size(epsilon, delta), "computed: mqttlab.smc chernoff_sample_size",
                      inputs=f"ε = {epsilon:g}, δ = {delta:g}: ⌈ln(2/δ) / (2ε²)⌉", statistic=COMPUTED_HERE)]
    if how.computed == "sprt_samples_all_successes":
        from mqttlab.smc.sprt import SPRT

        p0, p1, alpha, beta = (float(config[k]) for k in ("p0", "p1", "alpha", "beta"))
        result = SPRT(p0, p1, alpha, beta).run(itertools.repeat(True))
        return [_Ours(result.samples, "computed: mqttlab.smc SPRT on a stream of successes",
                      inputs=f"H0 {p0:g}, H1 {p1:g}, α = {alpha:g}, β = {beta:g}, every sample a success", statistic=COMPUTED_HERE)]
    if how.computed == "publish_overhead":
        return _per_run_plan(how, comparison, lambda sizes, plan: _publish_overhead(sizes, plan, extra, layer))
    return _per_run_plan(how, comparison, lambda sizes, plan: _connect_figure(figure, sizes, plan, extra, layer))


def _connect_figure(figure: Figure, sizes: dict[str, int], plan: dict[str, Any], extra: int, layer: str) -> tuple[int, str]:
    """connect_bytes: CONNECT as the engine writes it for the run's plan."""
    value, inputs = sizes["connect"] + extra, f"CONNECT as the engine writes it{layer}"
    if number(figure.value) and int(figure.value) != value:
        # CONNECT's size is all fixed fields but the client id (and credentials): say which id the paper's implies.
        client_id = len(expand_template(str(plan["publishers"]["client_id"]), 0).encode())
        inputs += (f" (client id {client_id} B; the paper's {figure.value} B imply a client id of "
                   f"{client_id + int(figure.value) - value} B without credentials)")
    return value, inputs


def _per_run_plan(how: Reproduce, comparison: Optional[Comparison], figure: Any) -> list[_Ours]:
    """A computed figure per configuration: `figure` (value, inputs) of the packet sizes the engine
    encodes for the plan of the configuration's first run (mqttlab.engine.packet_sizes)."""
    from mqttlab.engine import packet_sizes

    found = []
    for scenario, broker, group in _groups(how, comparison) if how.scenario else _all_groups(comparison):
        plan = group.runs[0].results.plan
        value, inputs = figure(packet_sizes(plan), plan)
        found.append(_Ours(value, "computed: the engine's encoding of the run's packet", scenario, broker, len(group.runs), inputs,
                           statistic=COMPUTED_HERE))
    return found


def _packet_figure(how: Reproduce, sizes: dict[str, int], extra: int, layer: str) -> tuple[Any, str]:
    """ack_bytes (PUBACK, as each of PUBREC, PUBREL and PUBCOMP), connack_bytes, disconnect_bytes,
    and ack_overhead: per PUBLISH exchange, `packets` acknowledgements, each in a frame of its own;
    at QoS 0 nothing acknowledges the PUBLISH but TCP's bare ACK (a frame without payload)."""
    if how.computed == "ack_overhead":
        n = how.packets or 0
        value = {"mqtt": sizes["puback"] * n, "mqtt_tcp": (sizes["puback"] + FRAME_HEADERS) * n if n else FRAME_HEADERS}
        return value, f"{n} acknowledgement(s) of {sizes['puback']} B" + (", each in its own frame" if n else ", a bare TCP ACK")
    packet = {"ack_bytes": "puback", "connack_bytes": "connack", "disconnect_bytes": "disconnect"}[how.computed or ""]
    return sizes[packet] + extra, f"{packet.upper()} as the engine encodes it{layer}"


def _all_groups(comparison: Optional[Comparison]) -> list[tuple[str, str, BrokerGroup]]:
    if comparison is None:
        return []
    return [(s.scenario, b, g) for s in comparison.scenarios for b, g in s.groups.items()]


def _publish_overhead(sizes: dict[str, int], plan: dict[str, Any], extra: int, layer: str) -> tuple[int, str]:
    """A PUBLISH's bytes beyond its payload, as the engine encodes the run's."""
    pubs = plan["publishers"]
    topic = len(client_topic(pubs["topic"], 0, pubs["client_id"]).encode())
    return sizes["publish_overhead"] + extra, (f"topic {topic} B, QoS {pubs['qos']}, payload {sizes['payload']} B: "
                                               f"a PUBLISH of {sizes['publish']} B as the engine encodes it{layer}")


# ---- judging a row -------------------------------------------------------------------------------


def number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def _judge(row: FigureRow, figure: Figure, how: Reproduce, inputs: str) -> None:
    paper, ours = row.paper, row.ours
    tolerance = how.tolerance if how.tolerance is not None else DEFAULT_TOLERANCE
    factor = f"×{tolerance:g}" + ("" if how.tolerance is not None else " (default tolerance)")
    unit = f" {row.unit}" if row.unit else ""
    if ours is None:
        row.status, row.reason = NOT_MEASURED, "no value in these results"
        return
    if isinstance(paper, dict) and figure.kind == "sprt_result":
        _judge_share(row, paper, ours if isinstance(ours, dict) else {}, int(figure.config.get("clients") or 0))
    elif isinstance(paper, dict) and figure.kind == "regression_coefficient":
        _judge_estimate(row, paper, ours if isinstance(ours, dict) else {}, tolerance, factor)
    elif isinstance(paper, dict):
        compared = _judge_values(row, paper, ours if isinstance(ours, dict) else {}, tolerance)
        row.rule = (f"{', '.join(compared)} equal (exact)" if figure.exact
                    else f"each of {', '.join(compared)} within {factor} of the paper's (one value each, no interval)")
    elif isinstance(paper, list) and len(paper) == 2 and all(v is None or number(v) for v in paper) and paper != [None, None]:
        # An open end (the paper's "20–30+ ms": [20, null]) bounds one side only.
        low = float(paper[0]) if paper[0] is not None else -math.inf
        high = float(paper[1]) if paper[1] is not None else math.inf
        span: list[Any] = ours if isinstance(ours, list) else [ours, ours]  # numbers, checked next
        if not all(number(v) for v in span):
            row.status = NO_PAPER_NUMBER
            return
        if isinstance(ours, list):
            # A range of ours (over brokers or configurations) agrees when it overlaps the paper's:
            # one group's interval wholly inside it; none does when every one lies wholly outside.
            row.status = _spans_status(row, span, (low, high), every=False)
            row.rule = (f"agrees when one group's interval lies wholly in the paper's {_range_text(low, high)}{unit} (the ranges "
                        "overlap), disagrees when every one lies wholly outside, else cannot tell")
        else:
            row.rule = f"in the paper's range {_range_text(low, high)}{unit}"
            row.status = AGREES if low <= float(span[0]) <= high else DISAGREES
            _interval_status(row, (low, high))
    elif number(paper):
        value = float(paper)
        if isinstance(ours, list) and all(number(v) for v in ours):
            region = (value / tolerance, value * tolerance)
            row.status = _spans_status(row, ours, region, every=True)
            row.rule = (f"agrees when every group's interval lies wholly within {factor} of the paper's {_text(value)}{unit}, i.e. in "
                        f"[{_text(region[0])}, {_text(region[1])}]; disagrees when one lies wholly outside, else cannot tell")
        elif number(ours):
            row.difference = float(ours) - value
            row.ratio = float(ours) / value if value else None
            if figure.exact:
                row.status = MATCHES if math.isclose(float(ours), value, rel_tol=1e-9, abs_tol=1e-9) else DIFFERS
                row.rule = "equal (exact)"
            else:
                row.status = AGREES if _within(float(ours), value, tolerance) else DISAGREES
                row.rule = f"within {factor} of the paper's {_text(value)}{unit}, i.e. in [{_text(value / tolerance)}, {_text(value * tolerance)}]"
                _interval_status(row, (value / tolerance, value * tolerance))
        else:
            row.status = NO_PAPER_NUMBER
    else:
        row.status = NO_PAPER_NUMBER
    if row.status == NO_PAPER_NUMBER:
        row.rule = "shown, not judged: the paper gives no number"
    if row.status == DISAGREES and not figure.exact:
        row.side = _side(row)
    if row.status == DIFFERS or (figure.exact and row.status == DISAGREES):
        row.status, row.flagged = DIFFERS, True
        row.reason = _why(row, figure, inputs)
    elif figure.exact and row.status == AGREES:
        row.status = MATCHES


def _range_text(low: float, high: float) -> str:
    return f"[{_text(low)}, {_text(high)}]" if math.isfinite(low) and math.isfinite(high) else (
        f"≥ {_text(low)}" if math.isfinite(low) else f"≤ {_text(high)}")


def _spans_status(row: FigureRow, ours: list[Any], region: tuple[float, float], every: bool) -> str:
    """A range of ours judged on each group's interval (its value, without one): `every` group
    inside the region, or (not every) at least one; a group straddling an edge cannot tell."""
    spans = row.spans or [[float(ours[0]), float(ours[0])], [float(ours[1]), float(ours[1])]]
    inside = [region[0] <= low and high <= region[1] for low, high in spans]
    outside = [high < region[0] or low > region[1] for low, high in spans]
    if all(inside) if every else any(inside):
        return AGREES
    if any(outside) if every else all(outside):
        return DISAGREES
    return CANNOT_TELL


def _side(row: FigureRow) -> str:
    """Where ours lies against the paper's figure when it disagrees: "ours lower" or "ours higher"
    (a different magnitude here, said as such), or "other sign" for a regression term."""
    def judged(value: Value) -> list[float]:
        if isinstance(value, dict):  # the key its rule reads
            value = next((value[key] for key in (SHARE_KEY, "estimate", "mean") if key in value), None)
        return [float(v) for v in (value if isinstance(value, list) else [value]) if number(v)]

    mine, theirs = judged(row.ours), judged(row.paper)
    if not mine or not theirs:
        return ""
    if row.kind == "regression_coefficient" and mine[0] * theirs[0] < 0:
        return "other sign"  # not a magnitude: the term works the other way
    return "ours lower" if max(mine) < min(theirs) else "ours higher" if min(mine) > max(theirs) else ""


SHARE_KEY = "h1_accept_pct"  # an SPRT row's share of clients accepting H1, in %
SHARE_POINTS = 10.0  # how far our share may lie from the paper's, in percentage points, and still agree
CONFIDENCE = 0.95  # of the binomial and normal intervals drawn here


def share_interval(percent: float, clients: int) -> list[float]:
    """The Clopper–Pearson interval, in %, of a share of `clients` given in %: k = its count."""
    from mqttlab.smc.stats import clopper_pearson

    k = min(clients, max(0, round(percent * clients / 100)))
    low, high = clopper_pearson(k, clients, CONFIDENCE)
    return [100 * low, 100 * high]


def _judge_share(row: FigureRow, paper: dict[str, Any], ours: dict[str, Any], clients: int) -> None:
    """An SPRT row: the share of its clients that accepted H1, ours against the paper's, each a
    count of the same number of clients with its binomial interval; their difference's bounds
    from the two intervals must lie within ±SHARE_POINTS (wholly outside: disagrees)."""
    row.rule = (f"ours − the paper's share of the {clients} clients accepting H1 within ±{SHARE_POINTS:g} points, bounded by the two "
                f"{CONFIDENCE:.0%} Clopper–Pearson intervals (h0, h1 and samples shown, not judged)")
    if not number(paper.get(SHARE_KEY)) or not number(ours.get(SHARE_KEY)) or clients <= 0:
        row.status = NO_PAPER_NUMBER
        return
    mine, theirs = share_interval(float(ours[SHARE_KEY]), clients), share_interval(float(paper[SHARE_KEY]), clients)
    row.key_intervals[SHARE_KEY] = mine
    low, high = mine[0] - theirs[1], mine[1] - theirs[0]
    row.difference = float(ours[SHARE_KEY]) - float(paper[SHARE_KEY])
    row.reason = (f"share: ours {_text(float(ours[SHARE_KEY]))} % [{_text(mine[0])}–{_text(mine[1])}], the paper's "
                  f"{_text(float(paper[SHARE_KEY]))} % [{_text(theirs[0])}–{_text(theirs[1])}]: difference {_text(low)} to {_text(high)} points")
    row.rule += f"; the paper's share's interval {_text(theirs[0])}–{_text(theirs[1])}, the difference {_text(low)} to {_text(high)} points"
    row.status = (AGREES if -SHARE_POINTS <= low and high <= SHARE_POINTS
                  else DISAGREES if high < -SHARE_POINTS or low > SHARE_POINTS else CANNOT_TELL)


def _judge_estimate(row: FigureRow, paper: dict[str, Any], ours: dict[str, Any], tolerance: float, factor: str) -> None:
    """A regression coefficient: our estimate's normal interval (± z standard errors) within the
    tolerance factor of the paper's estimate, same sign."""
    from scipy.stats import norm

    if not number(paper.get("estimate")) or not number(ours.get("estimate")):
        row.status = NO_PAPER_NUMBER
        return
    theirs, mine = float(paper["estimate"]), float(ours["estimate"])
    spread = float(norm.ppf(0.5 + CONFIDENCE / 2)) * float(ours.get("std_error") or 0.0)
    row.key_intervals["estimate"] = [mine - spread, mine + spread]
    region = sorted((theirs / tolerance, theirs * tolerance))
    row.rule = (f"estimate: our {CONFIDENCE:.0%} interval (± {norm.ppf(0.5 + CONFIDENCE / 2):.3g} standard errors) within {factor} of "
                f"the paper's {_text(theirs)}, same sign, i.e. in [{_text(region[0])}, {_text(region[1])}] (other keys shown, not judged)")
    row.ratio, row.difference = (mine / theirs if theirs else None), mine - theirs
    low, high = row.key_intervals["estimate"]
    row.status = (AGREES if region[0] <= low and high <= region[1]
                  else DISAGREES if high < region[0] or low > region[1] else CANNOT_TELL)


def _interval_status(row: FigureRow, region: tuple[float, float]) -> None:
    """With an interval on ours: agrees when it lies wholly in the region, disagrees when wholly
    outside, else cannot tell (one run, or no interval: the point decides, and the page says so)."""
    if row.interval is None:
        return
    row.rule += ": our interval wholly inside (wholly outside: disagrees; across an edge: cannot tell)"
    low, high = row.interval
    if region[0] <= low and high <= region[1]:
        row.status = AGREES
    elif high < region[0] or low > region[1]:
        row.status = DISAGREES
    else:
        row.status = CANNOT_TELL


def _judge_values(row: FigureRow, paper: dict[str, Any], ours: dict[str, Any], tolerance: float) -> list[str]:
    """Key by key on the numeric keys both have (the keys it compared, which the rule names);
    exact figures must be equal except in host-dependent keys."""
    compared, differing = [], []
    for key, theirs in paper.items():
        mine = ours.get(key, ours.get(str(key)))
        if not number(theirs) or not number(mine):
            continue
        compared.append(str(key))
        same = (math.isclose(float(mine), float(theirs), rel_tol=1e-9, abs_tol=1e-9) if row.exact and key not in HOST_DEPENDENT_KEYS
                else _within(float(mine), float(theirs), tolerance))
        if not same:
            differing.append(f"{key}: ours {_text(mine)}, the paper's {_text(theirs)}")
    if not compared:
        row.status = NO_PAPER_NUMBER
        return compared
    if "mean" in paper and number(paper.get("mean")) and number(ours.get("mean")):
        row.difference = float(ours["mean"]) - float(paper["mean"])
        row.ratio = float(ours["mean"]) / float(paper["mean"]) if paper["mean"] else None
    row.status = AGREES if not differing else DISAGREES
    row.reason = "; ".join(differing)
    return compared


def _within(ours: float, paper: float, tolerance: float) -> bool:
    if paper == 0:
        return ours == 0
    ratio = ours / paper
    return 1 / tolerance <= ratio <= tolerance


def _why(row: FigureRow, figure: Figure, inputs: str) -> str:
    """Why an exact figure differs: what ours was computed from, and the paper's configuration for it."""
    parts = [f"ours {_text(row.ours)} ≠ the paper's {_text(row.paper)}"]
    if row.reason:
        parts.append(row.reason)
    if inputs:
        parts.append(f"ours from {inputs}")
    stated = {k: v for k, v in figure.config.items() if k in ("topic_bytes", "qos", "packet", "layer", "h0", "h1", "p0", "p1")}
    if stated:
        parts.append("the paper's: " + ", ".join(f"{k} {v}" for k, v in stated.items()))
    if figure.config.get("topic_bytes") is not None and "topic " in inputs:
        mine = int(inputs.split("topic ", 1)[1].split(" B", 1)[0])
        if mine != int(figure.config["topic_bytes"]):
            parts.append(f"the topic differs: {mine} B here, {figure.config['topic_bytes']} B in the paper")
    return "; ".join(parts)


def _text(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 10_000 else f"{value:.4g}"  # 19990, not 1.999e+04
    if isinstance(value, list):
        return "–".join("" if v is None else _text(v) for v in value)  # [20, null]: "20–", open above
    if isinstance(value, dict):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items() if v is not None) or "–"
    return str(value)


value_text = _text


# ------------------------------------------------------------------------------------------------
# Seed 000: a `mqttlab smc paper` directory


def is_smc_directory(path: Path) -> bool:
    """A `mqttlab smc paper` output directory (seed 000), not a results directory."""
    return (Path(path) / "paper.json").is_file() and (Path(path) / "table3-4-sprt.csv").exists()


class SmcPaperResults:
    """The tables `mqttlab smc paper` wrote (smc/paper.py): Table 2, Tables 3/4, predictions,
    each broker's learned coefficients, and paper.json. An SPRT row's configuration is named
    `UP1-t30-c50` (profile, threshold, clients), so that a claim's trend can follow one axis."""

    def __init__(self, directory: Path):
        import pandas as pd

        self.directory = directory
        if not is_smc_directory(directory):
            raise FileNotFoundError(f"{directory}: not a `mqttlab smc paper` directory (no paper.json and table3-4-sprt.csv)")
        self.about = json.loads((directory / "paper.json").read_text(encoding="utf-8"))
        self.table2 = self._csv(pd, "table2-monte-carlo-time.csv")
        self.sprt = self._csv(pd, "table3-4-sprt.csv")
        self.predictions = self._csv(pd, "predictions.csv")

    @property
    def configuration(self) -> str:
        """The broker configuration the run used ("as-shipped", "tuned"), "" when not recorded."""
        configuration = str((self.about.get("settings") or {}).get("broker_config") or "")
        return Path(configuration).name if "/" in configuration else configuration  # a config file by its name

    @property
    def engine_commit(self) -> str:
        """The commit of the engine that ran the pipeline, "" when not recorded."""
        return str(self.about.get("engine_commit") or "")

    def _csv(self, pd: Any, name: str) -> Any:
        path = self.directory / name
        try:
            return pd.read_csv(path)
        except (OSError, ValueError):  # absent, or empty (a step that did not run)
            return pd.DataFrame()

    def values(self, figure: Figure, how: Reproduce) -> list[_Ours]:
        broker = how.broker or str(figure.config.get("broker") or "")
        source = f"smc paper: {how.smc}"
        if how.smc == "table2":
            part = self._rows(self.table2, broker, how.profile, model="paper")
            if part is None:
                return []
            return [_Ours({int(r.clients): float(r.seconds) for r in part.itertuples()}, source + " (the paper's model), seconds",
                          how.profile, broker, None)]
        if how.smc == "sprt":
            part = self._rows(self.sprt, broker, how.profile)
            if part is None:
                return []
            part = part[(part["threshold_ms"] == how.threshold_ms) & (part["clients"] == how.clients)]
            if part.empty:
                return []
            r = part.iloc[0]
            # time_s is this host's wall time: shown, and compared with nothing (the paper file
            # keeps the paper's as time_printed, another key).
            value = {"h0": round(float(r["H0"]), 4), "h1": round(float(r["H1"]), 4), "result": r["result"],
                     "h1_accept_pct": _accept_pct(str(r["result"])), "mean_samples": _float(r.get("samples")),
                     "time_s": _float(r.get("time_s"))}
            where = f"{how.profile}-t{float(how.threshold_ms or 0):g}-c{how.clients}"
            return [_Ours(value, source + " (H1 predicted by the paper's model on our broker)", where, broker, None,
                          key_intervals=self._prediction_interval(broker, how.profile, how.clients, value["h1"]),
                          statistic=f"one SPRT per client, {how.clients} clients")]
        if how.smc == "time_ratio":
            return self._time_ratio(broker, source)
        if how.smc == "predictions":
            # The paper's model (normal delays from the regression, which set the SPRT's H1) and the
            # model chosen on held-out workloads, each as its range over clients × thresholds.
            chosen = str(((self.about.get("learn") or {}).get(broker) or {}).get("chosen") or "")
            found = []
            for model, label in (("paper", "the paper's model"), (chosen, f"the chosen model ({chosen})")):
                part = self._rows(self.predictions, broker, how.profile, model=model) if model else None
                if part is None or (model == chosen and chosen == "paper"):
                    continue
                clients, thresholds = part["clients"].nunique(), part["threshold_ms"].nunique()
                found.append(_Ours([float(part["p"].min()), float(part["p"].max())],
                                   f"{source}: range of P over clients × thresholds, {label}",
                                   f"{how.profile}, {label}, range over {clients} client counts × {thresholds} thresholds", broker, None))
            return found
        learned = (self.about.get("learn") or {}).get(broker)
        if how.smc == "r_squared":
            return [_Ours(learned["r_squared_ols"], source, None, broker)] if learned else []
        return self._coefficient(broker, how.term or "", source)

    def _prediction_interval(self, broker: str, profile: Optional[str], clients: Optional[int], h1: Any) -> dict[str, list[float]]:
        """H1 is a Monte Carlo estimate on the model: its Clopper–Pearson interval from Table 2's
        sample count for the same profile and client count (none when the table lacks it)."""
        from mqttlab.smc.stats import clopper_pearson

        part = self._rows(self.table2, broker, profile, model="paper")
        if part is None or not number(h1) or "samples" not in part:
            return {}
        part = part[part["clients"] == clients]
        samples = int(part["samples"].iloc[0]) if not part.empty and number(float(part["samples"].iloc[0])) else 0
        if samples <= 0:
            return {}
        return {"h1": list(clopper_pearson(min(samples, round(float(h1) * samples)), samples, CONFIDENCE))}

    def _coefficient(self, broker: str, term: str, source: str) -> list[_Ours]:
        import pandas as pd

        path = self.directory / broker.replace("/", "_").replace(":", "_") / "learn" / "coefficients.csv"
        if not path.is_file():
            return []
        table = pd.read_csv(path).set_index("term")
        if term not in table.index:
            return []
        r = table.loc[term]
        # Ours are fitted in µs, the paper's Listing 1.1 in ms. A p value of 0 is one below the
        # smallest double (R prints "< 2e-16" for anything under its machine epsilon).
        value = {"estimate": float(r["Estimate"]) / 1000.0, "std_error": float(r["Std. Error"]) / 1000.0, "t_value": float(r["t value"])}
        if "Pr(>|t|)" in r and _float(r["Pr(>|t|)"]) is not None:
            value["p_value"] = float(r["Pr(>|t|)"])
        return [_Ours(value, source + " (ms)", term, broker)]

    def _time_ratio(self, broker: str, source: str) -> list["_Ours"]:
        """Per profile, the median wall time of an SPRT row on the broker over the median time of
        one Monte Carlo point on the paper's model (1060 samples): both of this host, so their
        ratio does not depend on it as each time does."""
        sprt, table2 = self._rows(self.sprt, broker, None), self._rows(self.table2, broker, None, model="paper")
        if sprt is None or table2 is None or "profile" not in sprt or "profile" not in table2:
            return []
        found = []
        for profile in dict.fromkeys(sprt["profile"]):
            tested = sprt[sprt["profile"] == profile]["time_s"].dropna()
            simulated = table2[table2["profile"] == profile]["seconds"].dropna()
            if tested.empty or simulated.empty or float(simulated.median()) <= 0:
                continue
            found.append(_Ours(float(tested.median()) / float(simulated.median()),
                               f"{source}: median SPRT time of {len(tested)} rows {float(tested.median()):.4g} s over median Monte Carlo "
                               f"time of {len(simulated)} points {float(simulated.median()):.4g} s", profile, broker, None))
        return found

    @staticmethod
    def _rows(table: Any, broker: str, profile: Optional[str], model: Optional[str] = None) -> Any:
        if table.empty or "broker" not in table:
            return None
        part = table[table["broker"] == broker]
        if profile is not None and "profile" in part:
            part = part[part["profile"] == profile]
        if model is not None and "model" in part:
            part = part[part["model"] == model]
        return None if part.empty else part


def _accept_pct(result: str) -> Optional[float]:
    """The share of clients accepting H1 in smc's notation: "H1" (all), "H0" (none), "63% H1"."""
    if result in ("H1", "H0"):
        return 100.0 if result == "H1" else 0.0
    return _float(result.split("%", 1)[0]) if result.endswith("% H1") else None


def _float(value: Any) -> Optional[float]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


__all__ = [
    "AGREES", "CANNOT_TELL", "DEFAULT_TOLERANCE", "DIFFERS", "LIMITED", "DISAGREES", "MATCHES", "MEASURED", "NOT_HERE", "NOT_MEASURED", "NO_PAPER_NUMBER", "FigureRow",
    "SmcPaperResults", "figure_rows", "run_value", "is_smc_directory", "value_text",
]
