"""The search for the highest offered rate that meets the objectives.

A rate is *sustained* when `repeats` probes at it all meet every objective; one probe that breaks
one is enough to call it not sustained (a rate the broker meets only some of the time is not a
rate it sustains). The search

1. brackets: starting from `start`, multiplies the rate by `factor` while single probes meet the
   objectives (or divides it while they do not), up to `max_rate` / down to `min_rate`;
2. narrows: probes the geometric middle of the bracket once, keeping the half where the boundary
   is, until the bracket's upper end is within `resolution` of its lower end;
3. confirms: repeats the probe at the lower end until `repeats` probes there met the objectives;
   one that does not makes that rate the upper end, and the search narrows again below it.

The capacity is the lower end (the highest rate shown sustained), and its interval is the bracket
[lower end, upper end]: every probe at the lower end met the objectives, a probe at the upper end
broke one, and every rate probed below the lower end passed too. So the rate at which the broker
stops sustaining the objectives lies in that bracket, resolved to `resolution`. How sure each end
is, as the pass probability with its Clopper–Pearson interval, is in `ends()`.

A probe the generator limited (summary.json's generator_limited) judges nothing about the broker:
it is repeated up to `generator_retries` times (a neighbour's burst of CPU on a shared host), and
when it stays limited the search stops there (`GeneratorLimit`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol


class ProbeLike(Protocol):
    rate: float
    attempt: int

    @property
    def met(self) -> bool: ...

    @property
    def generator_limited(self) -> bool: ...


Prober = Callable[[float, int], ProbeLike]


@dataclass(frozen=True)
class Settings:
    start: float  # msg/s offered over all publishers
    max_rate: float
    min_rate: float = 1.0
    factor: float = 2.0
    repeats: int = 3
    resolution: float = 0.1  # stop narrowing when upper / lower <= 1 + resolution
    generator_retries: int = 1
    max_probes: int = 60

    def problems(self) -> list[str]:
        found = []
        if not self.start > 0:
            found.append(f"--start: must be a rate above 0 msg/s (got {self.start:g})")
        if not self.max_rate >= self.start:
            found.append(f"--max-rate: must be at least --start ({self.start:g} msg/s), got {self.max_rate:g}")
        if not 0 < self.min_rate or (self.start > 0 and self.min_rate > self.start):
            found.append(f"--min-rate: must be above 0 and at most --start ({self.start:g} msg/s), got {self.min_rate:g}")
        if not self.factor > 1:
            found.append(f"--factor: the ladder's step must be above 1, such as 2 (got {self.factor:g})")
        if self.repeats < 1:
            found.append(f"--repeats: at least 1 probe at the capacity (got {self.repeats})")
        if not 0 < self.resolution < self.factor - 1:
            found.append(f"--resolution: must be above 0 and below the ladder's step (factor - 1 = {self.factor - 1:g}), got {self.resolution:g}")
        if self.generator_retries < 0:
            found.append(f"--generator-retries: 0 or more (got {self.generator_retries})")
        if self.max_probes < 2:
            found.append(f"--max-probes: at least 2 (got {self.max_probes})")
        return found


@dataclass
class RateRecord:
    rate: float
    passes: int = 0
    fails: int = 0
    limited: int = 0  # probes the generator limited, judging nothing

    @property
    def attempts(self) -> int:
        return self.passes + self.fails + self.limited


@dataclass
class Outcome:
    """How the search ended. `status`:
    - "bracketed": the capacity lies in [lower, upper];
    - "above_max": every rate up to max_rate was sustained: the capacity is above `lower`;
    - "below_min": not even min_rate was sustained (`upper`);
    - "generator_limited": the generator set the pace at `limited_at`; the capacity is above `lower`
      (None when no rate was shown sustained before);
    - "probe_budget": max_probes ran out; [lower, upper] is the bracket reached."""

    status: str
    lower: Optional[float]
    upper: Optional[float]
    records: dict[float, RateRecord] = field(default_factory=dict)
    probes: list[Any] = field(default_factory=list)
    limited_at: Optional[float] = None
    settings: Optional[Settings] = None

    def ends(self, confidence: float = 0.95) -> dict[str, Any]:
        """Each end of the bracket: probes, passes, and the probability that a probe there meets
        the objectives with its Clopper–Pearson interval."""
        found = {}
        for name, rate in (("lower", self.lower), ("upper", self.upper)):
            if rate is None or rate not in self.records:
                continue
            record = self.records[rate]
            judged = record.passes + record.fails
            low, high = clopper_pearson(record.passes, judged, confidence)
            found[name] = {"rate": rate, "probes": judged, "met": record.passes, "broke": record.fails,
                           "generator_limited": record.limited, "pass_probability": [low, high], "confidence": confidence}
        return found


class GeneratorLimit(Exception):
    def __init__(self, rate: float) -> None:
        super().__init__(f"the generator set the pace at {rate:g} msg/s")
        self.rate = rate


class ProbeBudget(Exception):
    pass


def round_rate(rate: float) -> float:
    """Three significant digits: probes at 1,414.2 and 1,414.3 msg/s would measure the same."""
    if rate <= 0:
        return rate
    digits = 2 - int(math.floor(math.log10(rate)))
    return round(rate, digits) if digits > 0 else float(round(rate, digits))


class Search:
    def __init__(self, settings: Settings, probe: Prober) -> None:
        self.settings = settings
        self.probe = probe
        self.records: dict[float, RateRecord] = {}
        self.probes: list[Any] = []

    def run(self) -> Outcome:
        lower: Optional[float] = None
        upper: Optional[float] = None
        try:
            lower, upper = self._bracket()
            if lower is None:
                return self._outcome("below_min", None, upper)
            if upper is None:
                # Every rate up to max_rate met the objectives once; the top is only "sustained"
                # once its repeats met them too, else it is the upper end of a bracket after all.
                if self._sustained(lower, self.settings.repeats):
                    return self._outcome("above_max", lower, None)
                upper = lower
                below = [rate for rate, record in self.records.items() if rate < upper and record.fails == 0 and record.passes > 0]
                if not below:
                    lower, upper = self._descend(upper)
                    if lower is None or upper is None:
                        return self._outcome("below_min", None, upper)
                else:
                    lower = max(below)
            low, high = lower, upper
            while True:
                low, high = self._narrow(low, high)
                lower, upper = low, high
                if self._sustained(low, self.settings.repeats):
                    return self._outcome("bracketed", low, high)
                high = low
                below = [rate for rate, record in self.records.items() if rate < high and record.fails == 0 and record.passes > 0]
                if below:
                    low = max(below)
                    continue
                lower, upper = self._descend(high)
                if lower is None or upper is None:
                    return self._outcome("below_min", None, high)
                low, high = lower, upper
        except GeneratorLimit as limit:
            outcome = self._outcome("generator_limited", self._floor(limit.rate), None)
            outcome.limited_at = limit.rate
            return outcome
        except ProbeBudget:
            return self._outcome("probe_budget", lower, upper)

    def _floor(self, limited_at: float) -> Optional[float]:
        """Below a rate the generator limited: the highest rate sustained with its full repeats
        (probed now if it met the objectives only once on the ladder), so that "capacity above X"
        means as much as a capacity does. None when no rate below holds."""
        passed = sorted((rate for rate, record in self.records.items() if rate < limited_at and record.fails == 0 and record.passes > 0),
                        reverse=True)
        for rate in passed:
            try:
                if self._sustained(rate, self.settings.repeats):
                    return rate
            except (GeneratorLimit, ProbeBudget):
                continue
        return None

    def _outcome(self, status: str, lower: Optional[float], upper: Optional[float]) -> Outcome:
        return Outcome(status, lower, upper, self.records, self.probes, settings=self.settings)

    def _bracket(self) -> tuple[Optional[float], Optional[float]]:
        s = self.settings
        rate = round_rate(s.start)
        if not self._sustained(rate, 1):
            return self._descend(rate)
        while True:
            if rate >= s.max_rate:
                return rate, None
            higher = round_rate(min(rate * s.factor, s.max_rate))
            if not self._sustained(higher, 1):
                return rate, higher
            rate = higher

    def _descend(self, upper: float) -> tuple[Optional[float], Optional[float]]:
        """Down the ladder from a rate that broke the objectives, to one that meets them."""
        rate = upper
        while True:
            lower = round_rate(rate / self.settings.factor)
            if lower < self.settings.min_rate:
                return None, rate
            if self._sustained(lower, 1):
                return lower, rate
            rate = lower

    def _narrow(self, lower: float, upper: float) -> tuple[float, float]:
        while upper / lower > 1 + self.settings.resolution:
            middle = round_rate(math.sqrt(lower * upper))
            if middle <= lower or middle >= upper:
                break
            if self._sustained(middle, 1):
                lower = middle
            else:
                upper = middle
        return lower, upper

    def _sustained(self, rate: float, needed: int) -> bool:
        """Probes `rate` until `needed` probes there met the objectives or one broke them."""
        record = self.records.setdefault(rate, RateRecord(rate))
        while record.passes < needed and record.fails == 0:
            if len(self.probes) >= self.settings.max_probes:
                raise ProbeBudget()
            probe = self.probe(rate, record.attempts + 1)
            self.probes.append(probe)
            if probe.generator_limited:
                record.limited += 1
                if record.limited > self.settings.generator_retries:
                    raise GeneratorLimit(rate)
            elif probe.met:
                record.passes += 1
            else:
                record.fails += 1
        return record.fails == 0


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[Optional[float], Optional[float]]:
    """The exact (Clopper–Pearson) interval of a binomial probability; (None, None) without trials."""
    if trials == 0:
        return None, None
    from scipy.stats import beta

    alpha = 1 - confidence
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high
