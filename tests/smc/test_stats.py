"""Sample sizes and bounds against values worked out by hand from their formulas."""

import math

import numpy as np
import pytest

from mqttlab.smc.stats import chernoff_epsilon, chernoff_sample_size, clopper_pearson, dkw_epsilon


def test_chernoff_sample_size_matches_the_papers_1060():
    # n = ceil(ln(2/0.01) / (2 * 0.05^2)) = ceil(5.298317 / 0.005) = ceil(1059.66) = 1060
    assert chernoff_sample_size(0.05, 0.01) == 1060


def test_chernoff_sample_size_other_hand_computed_points():
    # eps=0.1, delta=0.05: ln(40)/0.02 = 3.688879/0.02 = 184.44 -> 185
    assert chernoff_sample_size(0.1, 0.05) == 185
    # eps=0.01, delta=0.001: ln(2000)/0.0002 = 7.600902/0.0002 = 38004.5 -> 38005
    assert chernoff_sample_size(0.01, 0.001) == 38005


def test_chernoff_epsilon_inverts_the_sample_size():
    # sqrt(ln(200) / (2*1060)) = sqrt(5.298317/2120) = sqrt(0.00249921) = 0.0499921
    assert chernoff_epsilon(1060, 0.01) == pytest.approx(0.0499921, abs=1e-6)
    assert dkw_epsilon(1060, 0.01) == chernoff_epsilon(1060, 0.01)


@pytest.mark.parametrize("epsilon, delta", [(0.0, 0.01), (1.0, 0.01), (0.05, 0.0), (0.05, 1.5)])
def test_chernoff_rejects_parameters_outside_the_unit_interval(epsilon, delta):
    with pytest.raises(ValueError, match="epsilon|delta"):
        chernoff_sample_size(epsilon, delta)


def test_clopper_pearson_all_successes_has_closed_form_lower_bound():
    # k = n: lower = (tail)^(1/n) with tail = (1-0.95)/2 = 0.025; n = 10 -> 0.025^0.1 = 0.691503
    lower, upper = clopper_pearson(10, 10, confidence=0.95)
    assert lower == pytest.approx(0.025**0.1, rel=1e-9)
    assert upper == 1.0


def test_clopper_pearson_no_successes_has_closed_form_upper_bound():
    # k = 0: upper = 1 - tail^(1/n); n = 20, tail = 0.005 -> 1 - 0.005^(0.05) = 0.232526
    lower, upper = clopper_pearson(0, 20, confidence=0.99)
    assert lower == 0.0
    assert upper == pytest.approx(1 - 0.005**0.05, rel=1e-9)


def test_clopper_pearson_one_of_two_is_symmetric_with_closed_form():
    # k=1, n=2: lower solves P(X>=1) = 1-(1-p)^2 = 0.025 -> p = 1 - sqrt(0.975) = 0.0125791
    lower, upper = clopper_pearson(1, 2, confidence=0.95)
    assert lower == pytest.approx(1 - math.sqrt(0.975), rel=1e-9)
    assert upper == pytest.approx(math.sqrt(0.975), rel=1e-9)


def test_clopper_pearson_covers_at_least_its_level():
    # Exact interval: coverage over many binomial draws is at least the nominal 95 %.
    rng = np.random.default_rng(7)
    p, n = 0.83, 60
    draws = rng.binomial(n, p, size=2000)
    covered = sum(lo <= p <= hi for lo, hi in (clopper_pearson(int(k), n, 0.95) for k in draws))
    assert covered / len(draws) >= 0.94


def test_clopper_pearson_names_the_bad_argument():
    with pytest.raises(ValueError, match="successes"):
        clopper_pearson(11, 10)
    with pytest.raises(ValueError, match="n must"):
        clopper_pearson(0, 0)
