"""Sample sizes and confidence bounds for estimating a probability from Bernoulli samples.

Three guarantees are used by `predict`, `verify` and `validate`:

* Chernoff–Hoeffding: how many samples make ``P(|p_hat - p| <= epsilon) >= 1 - delta`` hold
  for *any* p (the paper's Monte Carlo sample size).
* Clopper–Pearson: the exact confidence interval for the p behind k successes in n samples,
  usually much narrower than the Chernoff epsilon when p is near 0 or 1.
* Dvoretzky–Kiefer–Wolfowitz (Massart's constant): a band around a whole empirical CDF, so one
  simulation gives every threshold at once with a simultaneous guarantee.
"""

from __future__ import annotations

import math

from scipy import stats as _stats


def _check_open_unit(name: str, value: float) -> None:
    if not (0.0 < value < 1.0):
        raise ValueError(f"{name} must be strictly between 0 and 1, got {value!r}")


def chernoff_sample_size(epsilon: float, delta: float) -> int:
    """Samples needed so that the sample mean is within ``epsilon`` of p with probability ``1 - delta``."""
    _check_open_unit("epsilon", epsilon)
    _check_open_unit("delta", delta)
    return math.ceil(math.log(2.0 / delta) / (2.0 * epsilon**2))


def chernoff_epsilon(n: int, delta: float) -> float:
    """The half-width that ``n`` samples guarantee with probability ``1 - delta`` (inverse of the above)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n!r}")
    _check_open_unit("delta", delta)
    return math.sqrt(math.log(2.0 / delta) / (2.0 * n))


def dkw_epsilon(n: int, delta: float) -> float:
    """Half-width of the DKW band: ``P(sup_t |F_n(t) - F(t)| > eps) <= delta``.

    With Massart's tight constant this is the same number as the Chernoff half-width, but it holds
    for every threshold simultaneously rather than for one fixed threshold.
    """
    return chernoff_epsilon(n, delta)


def clopper_pearson(successes: int, n: int, confidence: float = 0.99) -> tuple[float, float]:
    """Exact two-sided interval for a binomial proportion (never narrower than its level promises)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n!r}")
    if not (0 <= successes <= n):
        raise ValueError(f"successes must be between 0 and n={n}, got {successes!r}")
    _check_open_unit("confidence", confidence)
    tail = (1.0 - confidence) / 2.0
    lower = 0.0 if successes == 0 else float(_stats.beta.ppf(tail, successes, n - successes + 1))
    upper = 1.0 if successes == n else float(_stats.beta.ppf(1.0 - tail, successes + 1, n - successes))
    return lower, upper
