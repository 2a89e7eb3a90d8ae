"""`mqttlab smc learn|predict` through typer's runner: files written, errors named, no tracebacks."""

import json

import numpy as np
import pandas as pd
import pytest
from cli_runs import invoke  # tests/ is on sys.path (no package)
from smc_synthetic import LOG_COEF, write_cases
from typer.testing import CliRunner

from mqttlab.cli.smc import app, parse_clients, parse_thresholds
from mqttlab.smc.models import GammaModel, LogNormalModel, save_model

runner = CliRunner()


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    root = tmp_path_factory.mktemp("smc")
    (root / "logs").mkdir()
    write_cases(root / "logs", seed=5, latency="lognormal", coef=LOG_COEF, spread=0.7, cases=5, rows=1500)
    result = runner.invoke(app, ["learn", str(root / "logs"), "--out", str(root / "model")])
    return root, result


def test_learn_prints_the_coefficient_table_and_the_chosen_model(learned):
    root, result = learned
    assert result.exit_code == 0, result.output
    assert "Msg[publish]" in result.output and "R² =" in result.output
    summary = json.loads((root / "model" / "summary.json").read_text())
    assert f"default model: {summary['chosen']}" in result.output
    for name in ("model.json", "coefficients.csv", "scores.csv", "correlation.csv", "learn.html", "learn.png"):
        assert (root / "model" / name).stat().st_size > 0
    assert "plotly" in (root / "model" / "learn.html").read_text()[:200_000].lower()


def test_predict_from_a_learn_folder_writes_table_and_figures_and_repeats_with_the_seed(learned):
    root, _ = learned
    args = ["predict", str(root / "model"), "--clients", "2,8", "--threshold", "5ms,20ms", "--samples", "120", "--seed", "3"]
    first = runner.invoke(app, [*args, "--out", str(root / "p1")])
    second = runner.invoke(app, [*args, "--out", str(root / "p2")])
    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    table = pd.read_csv(root / "p1" / "predict.csv")
    assert list(zip(table["clients"], table["threshold_ms"])) == [(2, 5.0), (2, 20.0), (8, 5.0), (8, 20.0)]
    assert (table["cp_low"] <= table["p"]).all() and (table["p"] <= table["cp_high"]).all()
    pd.testing.assert_frame_equal(table, pd.read_csv(root / "p2" / "predict.csv"))
    assert (root / "p1" / "predict.png").stat().st_size > 0
    assert json.loads((root / "p1" / "predict.json").read_text())["samples"] == 120


def test_paper_delay_uses_the_ols_model_of_a_learn_folder(learned):
    root, _ = learned
    result = runner.invoke(app, ["predict", str(root / "model"), "--delay", "paper", "--clients", "3", "--samples", "50", "--out", str(root / "pp")])
    assert result.exit_code == 0, result.output
    assert json.loads((root / "pp" / "predict.json").read_text())["model"].endswith("model-normal.json")


def test_paper_delay_on_a_lognormal_file_is_refused_by_name(tmp_path):
    path = tmp_path / "m.json"
    save_model(LogNormalModel(coef=LOG_COEF.tolist(), stderr=[0.0] * 8, sigma=0.5), path)
    result = runner.invoke(app, ["predict", str(path), "--delay", "paper"])
    assert result.exit_code == 2
    assert "--delay paper needs the OLS model" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--threshold", "fast", "--threshold: 'fast'"),
        ("--clients", "9..3", "--clients: range '9..3'"),
        ("--profile", "UP9", "UP9: neither a built-in profile"),
        ("--epsilon", "1.5", "epsilon must be strictly between 0 and 1"),
        ("--delay", "exact", "--delay must be model or paper"),
    ],
)
def test_bad_predict_options_are_named_without_traceback(tmp_path, option, value, message):
    path = tmp_path / "m.json"
    save_model(GammaModel(coef=[7.0] + [0.0] * 7, stderr=[0.0] * 8, shape=2.0), path)
    result = runner.invoke(app, ["predict", str(path), option, value, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_profile_file_problems_are_named_together(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("min_wait_ms: 300\nmax_wait_ms: 100\nweights: {connect: 1, ping: 2}\ncolour: red\n")
    path = tmp_path / "m.json"
    save_model(GammaModel(coef=[7.0] + [0.0] * 7, stderr=[0.0] * 8, shape=2.0), path)
    result = runner.invoke(app, ["predict", str(path), "--profile", str(profile)])
    assert result.exit_code == 2
    for fragment in ("unknown field 'colour'", "min_wait_ms (300) must not exceed max_wait_ms (100)", "weights.ping is not a message type"):
        assert fragment in result.output


def test_learn_on_a_bad_log_names_the_column_and_exits_2(tmp_path):
    write_cases(tmp_path, seed=1, latency="lognormal", coef=LOG_COEF, spread=0.5, cases=1, rows=20)
    csv = tmp_path / "case-000.csv"
    csv.write_text(csv.read_text().replace("Latency_us", "Latency"))
    result = runner.invoke(app, ["learn", str(csv), "--out", str(tmp_path / "m")])
    assert result.exit_code == 2
    assert "missing column(s) Latency_us" in result.output
    assert "Traceback" not in result.output


def test_client_and_threshold_syntax():
    assert parse_clients("50..150") == [50, 70, 90, 110, 130, 150]
    assert parse_clients("10..30:10,5") == [5, 10, 20, 30]
    assert parse_thresholds("30ms,0.05s,800us,70") == [0.8, 30.0, 50.0, 70.0]
    assert np.isclose(parse_thresholds("1.5ms")[0], 1.5)


def test_smc_tables_fold_at_80_columns_instead_of_cutting_headers(tmp_path):
    (tmp_path / "logs").mkdir()
    write_cases(tmp_path / "logs", seed=5, latency="lognormal", coef=LOG_COEF, spread=0.7, cases=5, rows=1500)
    result = invoke("smc", "learn", str(tmp_path / "logs"), "--out", str(tmp_path / "model"))
    assert result.exit_code == 0, result.output
    assert "R² =" in result.output and "…" not in result.output


@pytest.mark.parametrize(("command", "said"), [(["explore"], "explore runs"), (["validate", "model"], "validate measures")])
def test_explore_and_validate_refuse_several_brokers_before_starting_any(tmp_path, command, said):
    result = runner.invoke(app, [*command, "--broker", "mosquitto,rumqttd", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert f"--broker: {said} one broker at a time" in result.output
    assert not (tmp_path / "out").exists()
