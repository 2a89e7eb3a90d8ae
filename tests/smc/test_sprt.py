"""Wald's SPRT on Bernoulli streams of known success probability."""

import math

import numpy as np
import pytest

from mqttlab.smc.sprt import SPRT, summarise


def test_boundaries_are_walds_log_thresholds():
    # alpha = beta = 0.01: upper = ln(0.99/0.01) = ln 99 = 4.595120, lower = ln(0.01/0.99) = -4.595120
    test = SPRT(p0=0.74, p1=0.84, alpha=0.01, beta=0.01)
    assert test.upper == pytest.approx(4.595120, abs=1e-6)
    assert test.lower == pytest.approx(-4.595120, abs=1e-6)


def test_all_successes_with_h1_equal_one_needs_44_samples_as_in_the_papers_tables():
    # H0 = 0.9, H1 = 1: each success adds ln(1/0.9) = 0.1053605; ln 99 / 0.1053605 = 43.61 -> 44.
    # The paper's Tables 3 and 4 report exactly 44 samples for these hypotheses.
    result = SPRT(p0=0.9, p1=1.0).run(iter(lambda: True, None))
    assert (result.decision, result.samples) == ("H1", 44)


def test_a_single_failure_rejects_h1_equal_one():
    result = SPRT(p0=0.9, p1=1.0).run([True, True, False, True])
    assert (result.decision, result.samples) == ("H0", 3)


def test_hand_computed_stream_decides_at_the_expected_sample():
    # p0 = 0.5, p1 = 0.8: success +ln(1.6) = 0.470004, failure ln(0.4) = -0.916291.
    # With alpha = beta = 0.05 the upper bound is ln 19 = 2.944439: 7 successes give 3.290 >= 2.944,
    # 6 give 2.820 < 2.944, so the test decides H1 at sample 7.
    test = SPRT(p0=0.5, p1=0.8, alpha=0.05, beta=0.05)
    result = test.run([True] * 20)
    assert (result.decision, result.samples) == ("H1", 7)
    assert result.log_ratio == pytest.approx(7 * math.log(1.6))
    # Four failures: 4 * -0.916291 = -3.665 <= -2.944, three give -2.749: H0 at sample 4.
    result = test.run([False] * 20)
    assert (result.decision, result.samples) == ("H0", 4)


def test_stream_that_ends_undecided_says_so():
    result = SPRT(p0=0.5, p1=0.8, alpha=0.05, beta=0.05).run([True, False, True])
    assert result.decision is None
    assert result.samples == 3


def test_run_many_agrees_with_the_sequential_run():
    rng = np.random.default_rng(3)
    test = SPRT(p0=0.74, p1=0.84)
    streams = rng.random((200, 400)) < 0.8
    decisions, samples = test.run_many(streams)
    for row, decision, count in zip(streams, decisions, samples):
        one = test.run(row)
        expected = {"H1": 1, "H0": -1, None: 0}[one.decision]
        assert (decision, count) == (expected, one.samples)


@pytest.mark.parametrize("true_p, accept_h1_at_most, accept_h1_at_least", [(0.74, 0.015, 0.0), (0.84, 1.0, 0.985)])
def test_error_rates_at_the_hypotheses_respect_alpha_and_beta(true_p, accept_h1_at_most, accept_h1_at_least):
    # Wald: the real error rates are at most alpha/(1-beta) = 0.0101; with 4000 runs three binomial
    # SEs add 3 * sqrt(0.0101 * 0.99 / 4000) = 0.0047, so the share of wrong decisions stays below 0.015.
    rng = np.random.default_rng(11)
    test = SPRT(p0=0.74, p1=0.84, alpha=0.01, beta=0.01)
    decisions, _ = test.run_many(rng.random((4000, 3000)) < true_p)
    assert (decisions != 0).all()
    share_h1 = float(np.mean(decisions == 1))
    assert accept_h1_at_least <= share_h1 <= accept_h1_at_most


@pytest.mark.parametrize("true_p", [0.70, 0.74, 0.79, 0.84, 0.90])
def test_mean_sample_number_follows_walds_approximation(true_p):
    # Wald neglects the overshoot, so the real mean is a little larger; it stays within 25 %.
    rng = np.random.default_rng(5)
    test = SPRT(p0=0.74, p1=0.84, alpha=0.01, beta=0.01)
    decisions, samples = test.run_many(rng.random((4000, 4000)) < true_p)
    assert (decisions != 0).all()
    expected = test.wald_expected_samples(true_p)
    assert expected <= samples.mean() <= 1.25 * expected


def test_operating_characteristic_matches_simulation_between_the_hypotheses():
    rng = np.random.default_rng(9)
    test = SPRT(p0=0.74, p1=0.84, alpha=0.01, beta=0.01)
    decisions, _ = test.run_many(rng.random((4000, 4000)) < 0.79)
    simulated = float(np.mean(decisions == -1))
    assert simulated == pytest.approx(test.wald_accept_h0(0.79), abs=0.05)


def test_wald_operating_characteristic_at_the_hypotheses_is_one_minus_alpha_and_beta():
    # h = 1 at p0 and h = -1 at p1 give OC(p0) = (99 - 1)/(99 - 1/99) = 0.989899 and OC(p1) = 0.010101.
    test = SPRT(p0=0.74, p1=0.84, alpha=0.01, beta=0.01)
    assert test.wald_accept_h0(0.74) == pytest.approx(98 / (99 - 1 / 99), rel=1e-9)
    assert test.wald_accept_h0(0.84) == pytest.approx(1 - 98 / (99 - 1 / 99), rel=1e-9)


def test_invalid_hypotheses_are_reported_together_by_name():
    with pytest.raises(ValueError) as error:
        SPRT(p0=0.8, p1=0.8, alpha=0.7)
    assert "p0 and p1 must differ" in str(error.value)
    assert "alpha" in str(error.value)


def test_summary_gives_the_share_of_clients_per_decision_and_the_mean_sample_number():
    test = SPRT(p0=0.9, p1=1.0)
    results = [test.run([True] * 100)] * 3 + [test.run([True, False])] + [test.run([True] * 5)]
    summary = summarise(results)
    # three H1 after 44 samples, one H0 after 2, one undecided after 5: mean (132 + 2 + 5) / 5 = 27.8
    assert (summary.share_h1, summary.share_h0, summary.share_undecided) == (0.6, 0.2, 0.2)
    assert summary.mean_samples == pytest.approx(27.8)


def test_wald_approximations_stay_continuous_next_to_zero_drift():
    # SPRT(0.559, 0.659): the mean log-likelihood step vanishes near p = 0.6093. There the
    # general formulas divide vanishing differences; their limit is -a·b / E[step²] ≈ 499 samples
    # and an acceptance probability of b / (b − a) = 0.5 (α = β). Values just beside it must agree.
    from mqttlab.smc.sprt import SPRT

    s = SPRT(0.559, 0.659)
    limit = -s.lower * s.upper / (0.6093 * s.success_step**2 + 0.3907 * s.failure_step**2)
    for p in (0.6085, 0.609, 0.6095, 0.61):
        assert abs(s.wald_expected_samples(p) - limit) / limit < 0.01
        assert abs(s.wald_accept_h0(p) - 0.5) < 0.03
