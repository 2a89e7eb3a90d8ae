"""Statistics over repetitions: t-intervals of means and Welch intervals of differences, checked
against scipy's own implementations and against values worked out by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mqttlab.analysis.stats import mean_interval, welch_difference


def test_mean_interval_of_five_repetitions_is_the_student_t_interval():
    estimate = mean_interval([1, 2, 3, 4, 5])
    # s = sqrt(2.5), t(0.975, 4) = 2.7764: half-width 2.7764 * 1.5811 / sqrt(5) = 1.9632
    assert estimate.n == 5 and estimate.mean == 3
    assert estimate.stdev == pytest.approx(math.sqrt(2.5))
    assert estimate.low == pytest.approx(3 - 1.9632, abs=1e-4)
    assert estimate.high == pytest.approx(3 + 1.9632, abs=1e-4)


def test_one_repetition_has_a_mean_but_no_interval():
    estimate = mean_interval([7.5])
    assert estimate.mean == 7.5 and estimate.best == 7.5
    assert estimate.stdev is None and estimate.low is None and estimate.high is None
    assert not estimate.has_interval


def test_no_values_give_no_mean():
    assert mean_interval([None, None]).mean is None


def test_best_of_n_follows_the_metric_direction():
    assert mean_interval([3, 1, 2], higher_is_better=False).best == 1
    assert mean_interval([3, 1, 2], higher_is_better=True).best == 3
    assert mean_interval([3, 1, 2], higher_is_better=True).worst == 1


def test_confidence_outside_zero_one_is_refused_naming_it():
    with pytest.raises(ValueError, match="confidence"):
        mean_interval([1, 2], confidence=95)


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(finite, min_size=2, max_size=12).filter(lambda xs: max(xs) - min(xs) > 1e-3)


@settings(max_examples=60, deadline=None)
@given(samples, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_mean_interval_matches_scipy(values, confidence):
    estimate = mean_interval(values, confidence)
    low, high = stats.t.interval(confidence, len(values) - 1, loc=stats.tmean(values), scale=stats.sem(values))
    assert estimate.low == pytest.approx(low, rel=1e-9, abs=1e-6)
    assert estimate.high == pytest.approx(high, rel=1e-9, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(samples, samples)
def test_welch_difference_matches_scipys_unequal_variance_t_test(candidate, baseline):
    difference = welch_difference(candidate, baseline)
    expected = stats.ttest_ind(candidate, baseline, equal_var=False).confidence_interval(0.95)
    assert difference.low == pytest.approx(expected.low, rel=1e-6, abs=1e-6)
    assert difference.high == pytest.approx(expected.high, rel=1e-6, abs=1e-6)


def test_welch_difference_says_when_the_interval_excludes_zero():
    clearly_slower = welch_difference([10.0, 10.5, 11.0, 10.2], [5.0, 5.1, 4.9, 5.2])
    assert clearly_slower.excludes_zero and clearly_slower.low > 0
    assert clearly_slower.relative == pytest.approx((10.425 - 5.05) / 5.05)
    overlapping = welch_difference([5.0, 6.0, 4.0], [5.5, 4.5, 6.5])
    assert not overlapping.excludes_zero


def test_welch_difference_with_a_single_repetition_gives_no_interval():
    single = welch_difference([4.0], [2.0, 3.0])
    assert single.difference == pytest.approx(1.5)
    assert single.low is None and single.high is None and not single.excludes_zero
