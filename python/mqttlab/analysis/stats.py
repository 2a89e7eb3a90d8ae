"""Statistics over repetitions: the mean with its Student t confidence interval, and the
difference of two means with Welch's interval (unequal variances, Welch–Satterthwaite degrees of
freedom). With fewer than two values on a side there is no interval, and we say so with None
rather than inventing one."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

from scipy import stats as scipy_stats


@dataclass(frozen=True)
class Estimate:
    """The mean of `n` repetitions with its two-sided `confidence` interval (t distribution)."""

    n: int
    mean: Optional[float]
    stdev: Optional[float]  # sample standard deviation (n - 1); None for n < 2
    low: Optional[float]
    high: Optional[float]
    confidence: float
    best: Optional[float]  # best of the n, as the seeds reported ("best-of-N")
    worst: Optional[float]

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> Optional[float]:
        if not self.has_interval or self.mean is None:
            return None
        return (self.high - self.low) / 2  # type: ignore[operator]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Difference:
    """`mean(candidate) - mean(baseline)` with Welch's interval; `relative` is that difference
    as a fraction of the baseline's mean (None when the baseline's mean is 0)."""

    difference: Optional[float]
    low: Optional[float]
    high: Optional[float]
    relative: Optional[float]
    degrees_of_freedom: Optional[float]
    confidence: float

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly on one side of zero: a difference at this confidence."""
        return self.has_interval and (self.low > 0 or self.high < 0)  # type: ignore[operator]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _clean(values: Sequence[Optional[float]]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def mean_interval(values: Sequence[Optional[float]], confidence: float = 0.95, higher_is_better: bool = False) -> Estimate:
    """Mean, standard deviation and t-interval of the repetitions' values (None values ignored)."""
    _check_confidence(confidence)
    data = _clean(values)
    n = len(data)
    if n == 0:
        return Estimate(0, None, None, None, None, confidence, None, None)
    mean = sum(data) / n
    best = max(data) if higher_is_better else min(data)
    worst = min(data) if higher_is_better else max(data)
    if n < 2:
        return Estimate(n, mean, None, None, None, confidence, best, worst)
    stdev = math.sqrt(sum((x - mean) ** 2 for x in data) / (n - 1))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * stdev / math.sqrt(n)
    return Estimate(n, mean, stdev, mean - half, mean + half, confidence, best, worst)


def welch_difference(candidate: Sequence[Optional[float]], baseline: Sequence[Optional[float]], confidence: float = 0.95) -> Difference:
    """`mean(candidate) - mean(baseline)` with Welch's t-interval."""
    _check_confidence(confidence)
    a, b = _clean(candidate), _clean(baseline)
    if not a or not b:
        return Difference(None, None, None, None, None, confidence)
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    difference = mean_a - mean_b
    relative = difference / mean_b if mean_b != 0 else None
    if len(a) < 2 or len(b) < 2:
        return Difference(difference, None, None, relative, None, confidence)
    var_a = sum((x - mean_a) ** 2 for x in a) / (len(a) - 1) / len(a)
    var_b = sum((x - mean_b) ** 2 for x in b) / (len(b) - 1) / len(b)
    spread = var_a + var_b
    if spread == 0:
        # Identical repetitions on both sides: the difference is known exactly.
        return Difference(difference, difference, difference, relative, math.inf, confidence)
    freedom = spread**2 / ((var_a**2 / (len(a) - 1) if var_a else 0.0) + (var_b**2 / (len(b) - 1) if var_b else 0.0))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, freedom)) * math.sqrt(spread)
    return Difference(difference, difference - half, difference + half, relative, freedom, confidence)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: must be between 0 and 1, e.g. 0.95 (got {confidence})")
