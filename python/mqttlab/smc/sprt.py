"""Wald's sequential probability ratio test on a stream of Bernoulli outcomes.

H1 says the success probability is ``p1`` (the prediction), H0 says it is ``p0`` (the prediction
minus an indifference margin). After each outcome the log-likelihood ratio moves by
``log(p1/p0)`` on a success and ``log((1-p1)/(1-p0))`` on a failure; the test stops when it leaves
``(log(beta/(1-alpha)), log((1-beta)/alpha))``. Nothing here knows where outcomes come from:
`verify` feeds real measurements, the tests feed random streams of known p.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

ACCEPT_H0 = "H0"
ACCEPT_H1 = "H1"


@dataclass(frozen=True)
class SPRTResult:
    decision: str | None  # "H0", "H1", or None when the stream ended first
    samples: int
    log_ratio: float


@dataclass(frozen=True)
class SPRT:
    """Parameters of one test; `run` or `SequentialTest` apply it."""

    p0: float
    p1: float
    alpha: float = 0.01
    beta: float = 0.01

    def __post_init__(self) -> None:
        problems = []
        if not (0.0 < self.p0 < 1.0):
            problems.append(f"p0 must be strictly between 0 and 1, got {self.p0!r}")
        if not (0.0 <= self.p1 <= 1.0):
            problems.append(f"p1 must be between 0 and 1, got {self.p1!r}")
        if self.p0 == self.p1:
            problems.append("p0 and p1 must differ (the indifference region cannot be empty)")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not (0.0 < value < 0.5):
                problems.append(f"{name} must be strictly between 0 and 0.5, got {value!r}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def lower(self) -> float:
        """Accept H0 at or below this log-likelihood ratio."""
        return math.log(self.beta / (1.0 - self.alpha))

    @property
    def upper(self) -> float:
        """Accept H1 at or above this log-likelihood ratio."""
        return math.log((1.0 - self.beta) / self.alpha)

    @property
    def success_step(self) -> float:
        return math.log(self.p1 / self.p0) if self.p1 > 0 else -math.inf

    @property
    def failure_step(self) -> float:
        # p1 = 1 (the paper's "H1: 1.0") makes a single failure decide for H0.
        return math.log((1.0 - self.p1) / (1.0 - self.p0)) if self.p1 < 1 else -math.inf

    def start(self) -> SequentialTest:
        return SequentialTest(self)

    def run(self, outcomes: Iterable[bool], max_samples: int | None = None) -> SPRTResult:
        """Consume outcomes until a decision, the end of the stream, or ``max_samples``."""
        test = self.start()
        for outcome in outcomes:
            if test.observe(outcome) is not None:
                break
            if max_samples is not None and test.samples >= max_samples:
                break
        return test.result()

    def run_many(self, outcomes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run one test per row of a boolean matrix at once.

        Returns ``(decisions, samples)``: decisions are +1 (H1), -1 (H0) or 0 (row ran out).
        """
        outcomes = np.asarray(outcomes, dtype=bool)
        if outcomes.ndim != 2:
            raise ValueError("outcomes must be a 2-d matrix: one stream per row")
        steps = np.where(outcomes, self.success_step, self.failure_step)
        with np.errstate(invalid="ignore"):
            paths = np.cumsum(steps, axis=1)
        crossed = (paths >= self.upper) | (paths <= self.lower)
        decided = crossed.any(axis=1)
        first = np.argmax(crossed, axis=1)
        rows = np.arange(outcomes.shape[0])
        final = paths[rows, first]
        decisions = np.where(decided, np.where(final >= self.upper, 1, -1), 0)
        samples = np.where(decided, first + 1, outcomes.shape[1])
        return decisions, samples

    # Wald's approximations (they ignore the overshoot over the boundaries) ----------------

    def _mean_step(self, p: float) -> float:
        return p * self.success_step + (1.0 - p) * self.failure_step

    def _wald_h(self, p: float) -> float:
        """The non-zero root h of ``p r1^h + (1-p) r0^h = 1`` (r = the likelihood ratios)."""
        r1 = self.p1 / self.p0
        r0 = (1.0 - self.p1) / (1.0 - self.p0)

        def equation(h: float) -> float:
            return p * r1**h + (1.0 - p) * r0**h - 1.0

        # h has the sign opposite to the mean step; search on that side of zero.
        mean = self._mean_step(p)
        sign = -1.0 if mean > 0 else 1.0
        far = sign
        for _ in range(200):  # |h| grows geometrically; the bound only guards against p at 0 or 1
            if equation(far) >= 0:
                break
            far *= 2.0
        # The bracket's near end must sit clearly inside the dip between the trivial root 0 and h:
        # next to 0 the equation's value drowns in rounding and its sign is a coin toss. Near zero
        # drift h ≈ -2·mean/second, so start a fraction of that away from 0.
        second = p * math.log(r1) ** 2 + (1.0 - p) * math.log(r0) ** 2
        near = sign * min(abs(far) / 2.0, abs(2.0 * mean / second) / 4.0)
        while equation(near) >= 0 and abs(near) > 1e-300:
            near /= 2.0
        return optimize.brentq(equation, near, far, xtol=1e-15, rtol=1e-13)

    def _require_interior(self, p: float) -> None:
        if not (0.0 < self.p1 < 1.0):
            raise ValueError("Wald's approximations need 0 < p1 < 1")
        if not (0.0 < p < 1.0):
            raise ValueError(f"the true probability must be strictly between 0 and 1, got {p!r}")

    def wald_accept_h0(self, p: float) -> float:
        """Operating characteristic: probability of accepting H0 when the true probability is p."""
        self._require_interior(p)
        a, b = self.lower, self.upper
        second = p * self.success_step**2 + (1.0 - p) * self.failure_step**2
        if abs(self._mean_step(p)) < 1e-9 * second:
            return b / (b - a)
        h = self._wald_h(p)
        return (math.exp(b * h) - 1.0) / (math.exp(b * h) - math.exp(a * h))

    def wald_expected_samples(self, p: float) -> float:
        """Average sample number when the true probability is p."""
        self._require_interior(p)
        a, b = self.lower, self.upper
        mean = self._mean_step(p)
        second = p * self.success_step**2 + (1.0 - p) * self.failure_step**2
        # At (almost) zero drift the general formula divides a vanishing difference by a
        # vanishing mean; its limit is the second-moment form.
        if abs(mean) < 1e-9 * second:
            return -a * b / second
        oc = self.wald_accept_h0(p)
        return (oc * a + (1.0 - oc) * b) / mean


@dataclass
class SequentialTest:
    """One running test: feed outcomes with `observe` until it returns a decision."""

    spec: SPRT
    samples: int = 0
    log_ratio: float = 0.0
    decision: str | None = field(default=None)

    def observe(self, success: bool) -> str | None:
        if self.decision is not None:
            raise RuntimeError("the test has already decided; start a new one")
        self.samples += 1
        self.log_ratio += self.spec.success_step if success else self.spec.failure_step
        if self.log_ratio >= self.spec.upper:
            self.decision = ACCEPT_H1
        elif self.log_ratio <= self.spec.lower:
            self.decision = ACCEPT_H0
        return self.decision

    def result(self) -> SPRTResult:
        return SPRTResult(self.decision, self.samples, self.log_ratio)


@dataclass(frozen=True)
class ClientSummary:
    """The paper's per-client view of many concurrent tests (its Tables 3 and 4)."""

    clients: int
    share_h1: float
    share_h0: float
    share_undecided: float
    mean_samples: float


def summarise(results: list[SPRTResult]) -> ClientSummary:
    if not results:
        raise ValueError("no test results to summarise")
    count = len(results)
    return ClientSummary(
        clients=count,
        share_h1=sum(r.decision == ACCEPT_H1 for r in results) / count,
        share_h0=sum(r.decision == ACCEPT_H0 for r in results) / count,
        share_undecided=sum(r.decision is None for r in results) / count,
        mean_samples=sum(r.samples for r in results) / count,
    )
