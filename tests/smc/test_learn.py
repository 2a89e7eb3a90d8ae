"""learn recovers known generating models and chooses the right family on held-out workloads."""

import numpy as np
import pandas as pd
import pytest
from smc_synthetic import LOG_COEF, synthetic_rows, write_cases

from mqttlab.smc.learn import (
    LearnError,
    crps,
    fit_empirical,
    fit_gamma,
    fit_lognormal,
    fit_normal,
    learn,
    remove_outliers,
    save_learned,
)
from mqttlab.smc.log import read_logs
from mqttlab.smc.models import TERMS, LogNormalModel, load_model

# µs scale, shaped like the paper's Listing 1.1 (connect is the baseline).
LINEAR_COEF = np.array([2000.0, 100.0, 900.0, 800.0, 900.0, 1350.0, 2.5, 300.0])


def _rows(latency, coef, spread, n=30_000, seed=0):
    return synthetic_rows(np.random.default_rng(seed), 100, n, latency, coef, spread)


def test_ols_recovers_linear_coefficients_and_their_standard_errors():
    rows = _rows("normal", LINEAR_COEF, 500.0)
    model, table = fit_normal(rows)
    assert list(table.index) == list(TERMS)
    assert list(table.columns) == ["Estimate", "Std. Error", "t value", "Pr(>|t|)"]
    z = (table["Estimate"].to_numpy() - LINEAR_COEF) / table["Std. Error"].to_numpy()
    assert np.all(np.abs(z) < 4.5)
    assert model.sigma == pytest.approx(500.0, rel=0.03)
    assert 0.99 < model.r_squared <= 1.0


def test_lognormal_fit_recovers_log_scale_coefficients():
    model = fit_lognormal(_rows("lognormal", LOG_COEF, 0.6))
    np.testing.assert_allclose(model.coef, LOG_COEF, atol=0.03)
    assert model.sigma == pytest.approx(0.6, rel=0.03)


def test_gamma_glm_recovers_log_mean_coefficients_and_shape():
    model = fit_gamma(_rows("gamma", LOG_COEF, 3.0, n=15_000))
    np.testing.assert_allclose(model.coef, LOG_COEF, atol=0.03)
    assert model.shape == pytest.approx(3.0, rel=0.05)


def test_outlier_rule_drops_the_top_five_percent_of_each_message_type():
    rows = pd.DataFrame(
        {
            "Msg": ["publish"] * 100 + ["connect"] * 40 + ["subscribe"] * 19,
            "Latency_us": np.r_[np.arange(100.0), np.arange(40.0) * 10, np.arange(19.0)],
        }
    )
    kept = remove_outliers(rows)
    # floor(0.05 * 100) = 5, floor(0.05 * 40) = 2, floor(0.05 * 19) = 0
    assert kept["Msg"].value_counts().to_dict() == {"publish": 95, "connect": 38, "subscribe": 19}
    assert kept.loc[kept["Msg"] == "publish", "Latency_us"].max() == 94.0
    assert kept.loc[kept["Msg"] == "connect", "Latency_us"].max() == 370.0


def test_empirical_model_reproduces_the_quantiles_of_each_load_bin():
    rows = _rows("lognormal", LOG_COEF, 0.6, n=40_000)
    model = fit_empirical(rows)
    rng = np.random.default_rng(4)
    observed = rows[(rows["Msg"] == "subscribe") & (rows["ActiveMsgs"] > 90)]
    n = 20_000
    msg, active, zero = np.full(n, 3), np.full(n, 95.0), np.zeros(n)
    drawn = model.latency_us(model.noise(rng, n), msg, active, zero, zero)
    # The top load bin holds ActiveMsgs 91..100, so its quantiles sit near those of that bin.
    for q in (0.1, 0.5, 0.9):
        assert np.quantile(drawn, q) == pytest.approx(observed["Latency_us"].quantile(q), rel=0.1)
    assert drawn.min() >= 0


def test_empirical_model_separates_publishes_by_their_subscriber_count():
    model = fit_empirical(_rows("lognormal", LOG_COEF, 0.6, n=40_000))
    n = 5000
    publish, active, zero = np.full(n, 2), np.full(n, 50.0), np.zeros(n)
    u = np.random.default_rng(5).random(n)
    few = model.latency_us(u, publish, active, zero, np.full(n, 5.0))
    many = model.latency_us(u, publish, active, zero, np.full(n, 95.0))
    # Truth: each subscriber adds 3 % (log coefficient 0.03), so 90 more multiply the median by ~e^2.7.
    assert np.median(many) / np.median(few) > 5


def test_crps_prefers_the_true_model_over_a_wrongly_spread_one():
    rows = _rows("lognormal", LOG_COEF, 0.6, n=5000, seed=2)
    rng = np.random.default_rng(0)
    truth = LogNormalModel(coef=LOG_COEF.tolist(), stderr=[0.0] * 8, sigma=0.6)
    too_narrow = LogNormalModel(coef=LOG_COEF.tolist(), stderr=[0.0] * 8, sigma=0.2)
    assert crps(truth, rows, rng)["crps_us"] < crps(too_narrow, rows, rng)["crps_us"]


@pytest.mark.parametrize("family, rival, spread", [("lognormal", "gamma", 1.2), ("gamma", "lognormal", 1.0)])
def test_learn_chooses_the_generating_family_on_held_out_workloads_and_saves_models(tmp_path, family, rival, spread):
    (tmp_path / "logs").mkdir()
    write_cases(tmp_path / "logs", seed=3, latency=family, coef=LOG_COEF, spread=spread)
    logs = read_logs([tmp_path / "logs"])
    result = learn(logs, seed=1)
    assert result.chosen == family
    # Not a coin toss: the other parametric family and the paper's normal lose by > 3 paired SEs.
    for loser in (rival, "normal"):
        assert result.scores.loc[loser, "vs_chosen_us"] > 3 * result.scores.loc[loser, "vs_chosen_se_us"]
    assert "workloads held out" in result.holdout
    chosen_path = save_learned(result, tmp_path / "model", sources=["logs"])
    loaded = load_model(chosen_path)
    assert loaded.kind == family
    assert np.all(np.abs(np.asarray(loaded.coef) - LOG_COEF) < 4.5 * np.asarray(loaded.stderr))
    for kind in ("normal", "lognormal", "gamma", "empirical"):
        assert load_model(tmp_path / "model" / f"model-{kind}.json").kind == kind


def test_learn_names_the_message_type_the_logs_lack():
    rows = _rows("lognormal", LOG_COEF, 0.6, n=500)
    rows = rows[rows["Msg"] != "unsubscribe"]
    with pytest.raises(LearnError, match="too few of: unsubscribe"):
        fit_lognormal(rows)


def test_crps_by_sampling_matches_the_closed_form_for_a_normal():
    # CRPS(N(mu, s), y) = s * (z (2 Phi(z) - 1) + 2 phi(z) - 1/sqrt(pi)), z = (y - mu) / s.
    # mu = 50 000 µs, s = 4 000 µs is far from zero, so cutting at 0 never matters.
    from scipy import stats

    from mqttlab.smc.models import NormalModel

    model = NormalModel(coef=[50_000.0] + [0.0] * 7, stderr=[0.0] * 8, sigma=4000.0)
    rows = _rows("normal", np.r_[50_000.0, [0.0] * 7], 6000.0, n=400, seed=9)
    z = (rows["Latency_us"].to_numpy() - 50_000.0) / 4000.0
    exact = np.mean(4000.0 * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi)))
    sampled = crps(model, rows, np.random.default_rng(1), draws=2000)["crps_us"]
    assert sampled == pytest.approx(exact, rel=0.02)
