"""`mqttlab smc paper --quick`: seed 000's whole pipeline against a real Mosquitto, every step's
output and the summary tables checked for existence and sane values."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from mqttlab.cli.smc import app
from mqttlab.smc.paper import QUICK, min_s
from mqttlab.smc.stats import chernoff_sample_size

runner = CliRunner()
PROFILES = ("UP1", "UP2")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper") / "run"
    result = runner.invoke(app, ["paper", "--quick", "--out", str(out)], env={"COLUMNS": "220"})
    return out, result


def test_quick_paper_runs_every_step_and_says_where_and_what_it_skipped(quick):
    out, result = quick
    assert result.exit_code == 0, result.output
    assert "skipped emqx" in result.output  # not installable here: a note, not a failure
    assert f"written: {out}" in result.output.replace("\n", "")
    assert "Table 2: Monte Carlo time per point [min:s]" in result.output
    assert "Table 3" in result.output and "Table 4" in result.output
    about = json.loads((out / "paper.json").read_text())
    assert about["brokers"] == ["mosquitto"] and "emqx" in about["skipped"]
    # The command line is on record for the reproduction page (here pytest's: the CLI runs in-process).
    assert [sorted(entry) for entry in json.loads((out / "invocations.json").read_text())] == [["at", "command"]]
    assert [(s["step"], s["profile"]) for s in about["steps"]] == [
        ("explore", ""), ("learn", ""),
        ("predict", "UP1"), ("verify", "UP1"), ("validate", "UP1"),
        ("predict", "UP2"), ("verify", "UP2"), ("validate", "UP2"),
    ]


def test_explore_ran_mosquitto_as_shipped_and_recorded_the_host_load(quick):
    out, _ = quick
    explore = out / "mosquitto" / "explore"
    assert len(list(explore.glob("case-*.csv"))) == QUICK.explore_cases
    summary = json.loads((explore / "explore.json").read_text())
    assert summary["broker_config"]["mode"] == "as-shipped"
    cpu = summary["host_cpu"]
    assert 0 <= cpu["mean_share"] <= cpu["max_share"] <= 1 and cpu["intervals"] >= 1 and cpu["cpus"] >= 1
    case = json.loads((explore / "case-000.json").read_text())
    assert case["broker_config"]["mode"] == "as-shipped"
    # The package's defaults: persistence on, none of the tuned benchmark settings.
    conf = next(explore.glob("brokers/*/mosquitto.conf")).read_text()
    assert "persistence true" in conf and "max_inflight_messages" not in conf


def test_learn_and_predict_write_the_papers_model_and_ours(quick):
    out, _ = quick
    learn = out / "mosquitto" / "learn"
    for name in ("model.json", "model-normal.json", "coefficients.csv", "scores.csv", "summary.json", "learn.png"):
        assert (learn / name).stat().st_size > 0
    predictions = pd.read_csv(out / "predictions.csv")
    assert {"paper", "normal", "lognormal", "gamma", "empirical"} <= set(predictions["model"])
    assert predictions["p"].between(0, 1).all()
    assert ((predictions["cp_low"] <= predictions["p"]) & (predictions["p"] <= predictions["cp_high"])).all()
    assert (predictions["samples"] == chernoff_sample_size(QUICK.epsilon, QUICK.delta)).all()
    for profile in PROFILES:
        folder = out / "mosquitto" / "predict" / profile / "paper"
        assert json.loads((folder / "predict.json").read_text())["samples"] == 118
        assert (folder / "predict.png").stat().st_size > 0


def test_table2_gives_the_monte_carlo_time_of_every_point(quick):
    out, _ = quick
    table2 = pd.read_csv(out / "table2-monte-carlo-time.csv")
    assert len(table2) == len(PROFILES) * 5 * len(QUICK.predict_clients)
    assert (table2["seconds"] > 0).all() and (table2["seconds"] < 60).all()
    summary = (out / "summary.md").read_text()
    assert "## Table 2: Monte Carlo time per point [min:s]" in summary
    assert "| UP1 mosquitto — paper |" in summary


def test_tables_3_and_4_hold_one_sane_sprt_row_per_point(quick):
    out, _ = quick
    sprt = pd.read_csv(out / "table3-4-sprt.csv")
    assert len(sprt) == len(PROFILES) * len(QUICK.verify_clients) * len(QUICK.thresholds_ms)
    assert sprt["H1"].between(0, 1).all()
    assert (sprt["H1"] - sprt["H0"]).round(9).eq(QUICK.indifference).all()
    assert sprt["result"].str.fullmatch(r"H1|H0|\d+% H1.*|undecided|not testable.*").all()
    decided = sprt[sprt["result"].str.startswith(("H", "1", "2", "3", "4", "5", "6", "7", "8", "9"))]
    assert (decided["samples"] >= 1).all() and (decided["time_s"] > 0).all()
    assert {"p_lognormal", "p_empirical"} <= set(sprt.columns)  # our predictions beside the paper's
    summary = (out / "summary.md").read_text()
    assert "## Table 3: SPRT on the real broker, UP1" in summary and "## Table 4: SPRT on the real broker, UP2" in summary
    for profile in PROFILES:
        verify = json.loads((out / "mosquitto" / "verify" / profile / "verify.json").read_text())
        assert verify["broker_config"] == "as-shipped"
        assert 0 <= verify["host_cpu"]["mean_share"] <= verify["host_cpu"]["max_share"] <= 1
        assert {"host_cpu_mean", "host_cpu_max"} <= set(verify["rows"][0])


def test_host_cpu_is_reported_per_step_and_validate_compares_both_models(quick):
    out, _ = quick
    cpu = pd.read_csv(out / "host-cpu.csv").fillna("")
    assert list(zip(cpu["step"], cpu["profile"])) == [
        ("explore", ""), ("verify", "UP1"), ("validate", "UP1"), ("verify", "UP2"), ("validate", "UP2")]
    assert cpu["mean_share"].between(0, 1).all() and (cpu["mean_share"] <= cpu["max_share"]).all()
    validation = pd.read_csv(out / "validate.csv")
    assert {"predicted_paper", "predicted_ours"} <= set(validation.columns)
    assert ((validation["low"] <= validation["p"]) & (validation["p"] <= validation["high"])).all()


def test_paper_names_bad_settings_without_traceback(tmp_path):
    result = runner.invoke(app, ["paper", "--quick", "--profile", "UP9", "--epsilon", "2", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "--profile: UP9" in result.output and "--epsilon must be strictly between 0 and 1" in result.output
    assert "Traceback" not in result.output
    only_emqx = runner.invoke(app, ["paper", "--quick", "--broker", "emqx", "--out", str(tmp_path)])
    assert only_emqx.exit_code == 2 and "none of emqx can run here" in only_emqx.output


def test_min_s_is_the_papers_format():
    assert min_s(267.0) == "4:27" and min_s(0.0123) == "0:00.012" and min_s(float("nan")) == "-"
    assert re.fullmatch(r"\d+:\d\d", min_s(3600.0))
    assert min_s(119.7) == "2:00" and min_s(59.9996) == "1:00" and min_s(59.9994) == "0:59.999"
