"""`smc validate`: the interval of a measured point (replications as clusters), and predicted vs
measured on a real broker with the paper's model and ours."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mqttlab.cli.smc import app
from mqttlab.smc.models import LogNormalModel, NormalModel, save_model
from mqttlab.smc.profiles import UsageProfile
from mqttlab.smc.stats import clopper_pearson
from mqttlab.smc.validate import ValidateSettings, cluster_interval, models_from, region_errors, validate

runner = CliRunner()
FAST = UsageProfile("fast", 0, 2, {"connect": 1, "disconnect": 1, "publish": 5, "subscribe": 3, "unsubscribe": 2}, topics=3)


def test_identical_outcomes_count_one_sample_per_replication():
    p, low, high, n_eff = cluster_interval(np.ones((8, 20), dtype=bool), 0.95)
    assert (p, n_eff) == (1.0, 8.0)
    assert (low, high) == pytest.approx(clopper_pearson(8, 8, 0.95))


def test_independent_clients_count_almost_fully_and_correlated_ones_do_not():
    rng = np.random.default_rng(1)
    independent = rng.random((40, 25)) < 0.7
    _, _, _, n_ind = cluster_interval(independent, 0.95)
    assert n_ind > 0.5 * independent.size
    # Whole replications succeed or fail together: no more information than one client each.
    together = np.repeat(rng.random((40, 1)) < 0.7, 25, axis=1)
    p, low, high, n_tog = cluster_interval(together, 0.95)
    assert n_tog == 40 and low < p < high


@pytest.fixture
def model_dir(tmp_path):
    """Both models put every message near 0.2 ms, far from the test's thresholds of 1 µs and 1 s."""
    folder = tmp_path / "model"
    folder.mkdir()
    coef = [math.log(200.0)] + [0.0] * 7
    save_model(LogNormalModel(coef=coef, stderr=[0.01] * 8, sigma=0.2), folder / "model.json")
    save_model(NormalModel(coef=[200.0] + [0.0] * 7, stderr=[1.0] * 8, sigma=30.0), folder / "model-normal.json")
    return folder


def test_validate_measures_with_fresh_brokers_and_scores_both_models(tmp_path, model_dir):
    models = models_from(model_dir)
    assert set(models) == {"paper", "ours"}
    settings = ValidateSettings(length=3, replications=3, prediction_samples=200, many_clients=4)
    table = validate("mosquitto", models, FAST, [2, 4], [0.001, 1000.0], tmp_path / "work", settings)
    assert len(table) == 4 and (table["samples"] == table["clients"] * 3).all()
    # One fresh broker per replication: 2 client counts × 3 replications.
    assert len(list((tmp_path / "work" / "brokers").iterdir())) == 6
    loose = table[table["threshold_ms"] == 1000.0]
    tight = table[table["threshold_ms"] == 0.001]
    assert (loose["p"] == 1.0).all() and (tight["p"] == 0.0).all()
    for name in ("paper", "ours"):
        assert np.allclose(table[f"error_{name}"], table[f"predicted_{name}"] - table["p"])
        assert table[f"inside_{name}"].all()  # both models are right this far from 0.2 ms
    assert list(table["small_threshold"]) == [True, False, True, False]
    assert list(table["many_clients"]) == [False, False, True, True]
    regions = region_errors(table, ["paper", "ours"]).set_index("region")
    assert regions.loc["all points", "points"] == 4


def test_cli_validate_writes_the_table_and_the_region_summary(tmp_path, model_dir):
    out = tmp_path / "v"
    profile = tmp_path / "fast.yaml"
    profile.write_text("min_wait_ms: 0\nmax_wait_ms: 2\nweights: {connect: 1, disconnect: 1, publish: 5}\ntopics: 2\n")
    result = runner.invoke(app, ["validate", str(model_dir), "--broker", "rumqttd", "--profile", str(profile),
                                 "--clients", "3", "--threshold", "1s", "--length", "2", "--replications", "2",
                                 "--samples", "100", "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "validate.csv")
    assert table.loc[0, "broker"] == "rumqttd" and table.loc[0, "replications"] == 2
    assert json.loads((out / "validate.json").read_text())["points"][0]["clients"] == 3
    assert "Mean absolute error by region" in result.output


def test_cli_validate_names_bad_input(tmp_path):
    result = runner.invoke(app, ["validate", str(tmp_path), "--clients", "2", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "MODEL" in result.output
