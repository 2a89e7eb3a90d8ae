"""Service level objectives: what a probe must meet for its offered rate to count as sustained.

One objective is `[SOURCE.]METRIC OP VALUE`:

- a latency percentile, mean or maximum: `p99<10ms`, `p50<=2ms`, `p99.9<50ms` (also `p999`),
  `mean<5ms`, `max<1s`; SOURCE is the histogram, `e2e` by default, or `puback`, `pubcomp`,
  `connack`, `connect`, `tls`, `suback`, `e2e_uncorrected`, `rtt`, `e2e_queued` (the messages an
  offline session held, from their intended send time) (`puback.p99<5ms`);
- a time of the state workloads, p50, p99 or max over the sessions or subscribers (not a
  histogram: the summary's spread): `drain.p99<1s` (an offline session's drain, from its return's
  CONNACK to its last held message), `retained.p99<500ms` (a retained read's time to all, from a
  subscriber's SUBSCRIBE to its last retained message);
- `loss`: the share of owed deliveries that never arrived (0..1), `loss==0`, `loss<=0.001`; in a
  retained read, where no live delivery is owed, the share of the retained values owed that did
  not arrive or arrived stale;
- `lost`: the same as a count of messages;
- `failed`: connections that could not be opened (CONNACK refused, timed out, reset), a count;
- `delivered`: the share of owed deliveries that arrived, `delivered>=0.999`;
- `dropped`: the share of scheduled sends the generator had to drop because the QoS window stayed
  full (the broker acknowledged too slowly), `dropped==0`.

Percentiles are read from the probe's HDR histogram, so any percentile can be asked for, at the
histogram's resolution (microseconds, 3 significant digits)."""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

LATENCY_SOURCES = ("e2e", "e2e_uncorrected", "puback", "pubcomp", "connack", "connect", "tls", "suback", "rtt", "e2e_queued")
# The state workloads' times, read from the summary's spreads over sessions or subscribers:
# source -> (summary section, spread).
SPREAD_SOURCES = {"drain": ("offline", "drain_s"), "retained": ("retained", "all_s")}
SPREAD_METRICS = ("p50", "p99", "max")
SHARES = ("loss", "delivered", "dropped")
COUNTS = ("lost", "failed")
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "<": operator.lt, ">": operator.gt,
}
_SHAPE = re.compile(r"^\s*(?:(?P<source>[a-z_]+)\.)?(?P<metric>p[0-9.]+|mean|max|[a-z_]+)\s*(?P<op><=|>=|==|<|>)\s*(?P<value>\S.*?)\s*$")


class SloError(ValueError):
    """Every problem of the objectives (and the search's options), each naming its field."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__(self.listing())

    def listing(self) -> str:
        count = len(self.problems)
        return "\n".join([f"capacity: {count} problem{'s' if count != 1 else ''}"] + [f"  {problem}" for problem in self.problems])


@dataclass(frozen=True)
class Objective:
    text: str  # as the user wrote it
    kind: str  # "latency", "share" or "count"
    metric: str  # "p99.9", "mean", "max", "loss", "delivered", "dropped", "lost"
    op: str
    threshold: float  # µs for a latency, a share 0..1, or a count
    source: str = "e2e"  # the latency histogram

    @property
    def percentile(self) -> Optional[float]:
        return float(self.metric[1:]) if self.metric.startswith("p") else None

    @property
    def is_upper_bound(self) -> bool:
        """More of the metric is worse: latency, loss, dropped; `delivered` is the other way."""
        return self.metric != "delivered"

    def holds(self, observed: float) -> bool:
        return OPERATORS[self.op](observed, self.threshold)

    def label(self) -> str:
        return f"{self.source}.{self.metric}" if self.kind == "latency" else self.metric

    def to_dict(self) -> dict[str, Any]:
        return {"slo": self.text, "kind": self.kind, "metric": self.metric, "source": self.source if self.kind == "latency" else None,
                "op": self.op, "threshold": self.threshold, "unit": "us" if self.kind == "latency" else ("messages" if self.kind == "count" else "share")}


@dataclass(frozen=True)
class Check:
    """One objective judged on one probe: what was observed, and whether it held."""

    objective: Objective
    observed: Optional[float]  # None: nothing to judge (no such histogram, nothing owed)
    met: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"slo": self.objective.text, "observed": self.observed, "met": self.met, "note": self.note}


def parse_objectives(texts: Iterable[str]) -> list[Objective]:
    """The objectives in `texts`; every malformed one is reported at once (SloError)."""
    objectives, problems = [], []
    for text in texts:
        try:
            objectives.append(parse_objective(text))
        except ValueError as error:
            problems.append(f"--slo {text!r}: {error}")
    if problems:
        raise SloError(problems)
    return objectives


def parse_objective(text: str) -> Objective:
    match = _SHAPE.match(text)
    if match is None:
        raise ValueError("expected METRIC OP VALUE, such as 'p99<10ms', 'puback.p50<=2ms', 'loss==0' or 'delivered>=0.999'")
    source, metric, op, raw = match.group("source"), match.group("metric"), match.group("op"), match.group("value")
    if metric.startswith("p") or metric in ("mean", "max"):
        if source is not None and source not in LATENCY_SOURCES + tuple(SPREAD_SOURCES):
            raise ValueError(f"unknown latency {source!r}; one of {', '.join(LATENCY_SOURCES + tuple(SPREAD_SOURCES))}")
        if op == "==":
            raise ValueError("a latency is compared with <, <=, > or >=, not ==")
        name = _percentile_name(metric) if metric.startswith("p") else metric
        if source in SPREAD_SOURCES and name not in SPREAD_METRICS:
            raise ValueError(f"{source} is a spread over sessions or subscribers: p50, p99 or max (got {metric})")
        from mqttlab.scenario.units import parse_duration

        try:
            seconds = parse_duration(raw)
        except ValueError:
            raise ValueError(f"the latency bound {raw!r} needs a unit, such as 10ms, 500us or 1s") from None
        if not re.search(r"[a-zµ]", raw.lower()):
            raise ValueError(f"the latency bound {raw!r} needs a unit, such as 10ms, 500us or 1s")
        return Objective(text, "latency", name, op, seconds * 1e6, source or "e2e")
    if source is not None:
        raise ValueError(f"{metric} takes no histogram prefix ({source}.)")
    if metric not in SHARES + COUNTS:
        raise ValueError(f"unknown metric {metric!r}; one of pNN (any percentile), mean, max, {', '.join(SHARES + COUNTS)}")
    try:
        value = float(raw.rstrip("%")) / (100 if raw.endswith("%") else 1)
    except ValueError:
        raise ValueError(f"{metric} is compared with a number (got {raw!r})") from None
    if metric in SHARES and not 0 <= value <= 1:
        raise ValueError(f"{metric} is a share between 0 and 1 (or a percentage such as 99.9%), got {raw!r}")
    if metric in COUNTS and value < 0:
        raise ValueError(f"{metric} is a count of 0 or more, got {raw!r}")
    return Objective(text, "count" if metric in COUNTS else "share", metric, op, value)


def _percentile_name(metric: str) -> str:
    """`p99` → p99, `p99.9` and `p999` → p99.9, `p9999` → p99.99: digits past the second are
    decimals, as the field writes them."""
    digits = metric[1:]
    if "." not in digits and len(digits) > 2:
        digits = digits[:2] + "." + digits[2:]
    try:
        value = float(digits)
    except ValueError:
        raise ValueError(f"{metric!r} is not a percentile such as p50, p99 or p99.9") from None
    if not 0 < value <= 100:
        raise ValueError(f"{metric!r}: a percentile lies in (0, 100]")
    return f"p{value:g}"


def judge(objective: Objective, summary: dict[str, Any], result: dict[str, Any]) -> Check:
    """The objective on one probe: its summary.json and result.json (for the histograms)."""
    messages = _owed(summary)
    observed: Optional[float]
    if objective.kind == "latency" and objective.source in SPREAD_SOURCES:
        section, key = SPREAD_SOURCES[objective.source]
        spread = (summary.get(section) or {}).get(key)
        if not spread:
            return Check(objective, None, False, f"no {objective.source} time was measured")
        observed = float(spread[objective.metric]) * 1e6
    elif objective.kind == "latency":
        observed = latency_us(result, objective.source, objective.metric)
        if observed is None:
            return Check(objective, None, False, f"no {objective.source} latency was measured")
    elif objective.metric == "dropped":
        scheduled = messages.get("sent", 0) + messages.get("dropped", 0)
        observed = messages.get("dropped", 0) / scheduled if scheduled else 0.0
    elif objective.metric == "lost":
        observed = float(messages.get("lost", 0))
    elif objective.metric == "failed":
        connections = summary.get("connections") or {}
        observed = float(sum((connections.get(side) or {}).get("failed", 0) for side in ("publishers", "subscribers")))
    else:
        expected = messages.get("expected", 0)
        if not expected:
            return Check(objective, None, False, "no delivery was owed (no subscriber follows the publishers)")
        lost_share = messages.get("lost", 0) / expected
        observed = lost_share if objective.metric == "loss" else messages.get("delivered", 0) / expected
    return Check(objective, observed, objective.holds(observed))


def _owed(summary: dict[str, Any]) -> dict[str, Any]:
    """The run's message counts; for a retained read, where no live delivery is owed, the retained
    values owed in their place (a stale one counts as not delivered: it is not the value owed)."""
    messages = dict(summary.get("messages") or {})
    retained = summary.get("retained")
    if not messages.get("expected") and retained and retained.get("expected"):
        lost = int(retained["missing"]) + int(retained["stale"])
        messages.update(expected=retained["expected"], delivered=int(retained["expected"]) - lost, lost=lost)
    return messages


def latency_us(result: dict[str, Any], source: str, metric: str) -> Optional[float]:
    """A percentile (`p99.9`), the mean or the maximum of one latency histogram, µs; None when
    the probe recorded none."""
    encoded = (result.get("histograms") or {}).get(source)
    if not encoded:
        return None
    from hdrh.histogram import HdrHistogram

    histogram = HdrHistogram.decode(encoded)
    if histogram.get_total_count() == 0:
        return None
    if metric == "mean":
        return float(histogram.get_mean_value())
    if metric == "max":
        return float(histogram.get_max_value())
    return float(histogram.get_value_at_percentile(float(metric[1:])))


def describe(check: Check) -> str:
    """`e2e.p99 = 12.3 ms (SLO p99<10ms: broken)`."""
    objective = check.objective
    if check.observed is None:
        value = check.note
    elif objective.kind == "latency":
        value = f"{check.observed / 1000:.3g} ms"
    elif objective.kind == "count":
        value = f"{check.observed:.0f}"
    else:
        value = f"{check.observed:.4g}" if not math.isnan(check.observed) else "n/a"
    return f"{objective.label()} = {value} ({objective.text}: {'met' if check.met else 'broken'})"
