"""Suite files: validation that names every problem, and expansion into runs (no broker needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli_runs import invoke, said  # tests/ is on sys.path (no package)
from mqttlab.cli import app as cli_app
from mqttlab.suite import (
    PlannedRun, SuiteConflict, SuiteError, SuiteInterrupted, builtin_suites, expand_suite, load_suite, prepare_directory, run_suite,
    validate_suite,
)
from mqttlab.suite import runner

ROOT = Path(__file__).resolve().parent.parent

SMALL = {
    "name": "small",
    "brokers": ["mosquitto", "rumqttd"],
    "repetitions": 2,
    "base": {"publishers": {"count": 2, "topic": "t/%i"}, "subscribers": {"count": 2, "filters": ["t/%i"]},
             "load": {"duration": "2s", "warmup": "0.5s"}},
    "scenarios": {"p2p": {}, "one": {"only": {"qos": ["qos1"]}, "repetitions": 1,
                                     "publishers": {"count": 1}, "subscribers": {"count": 1}}},
    "variants": {"qos": {"qos0": {"publishers.qos": 0, "subscribers.qos": 0},
                         "qos1": {"publishers.qos": 1, "subscribers.qos": 1}},
                 "transport": {"plain": {}, "tls": {"transport": "tls"}}},
    "quick": {"repetitions": 1, "set": {"load.duration": "1s", "load.warmup": "0.2s"}},
}


def small(**changes) -> dict:
    data = json.loads(json.dumps(SMALL))
    data.update(changes)
    return data


def test_every_combination_of_cases_variants_brokers_and_repetitions_is_planned():
    runs = expand_suite(validate_suite(small()))
    # p2p: 2 qos × 2 transports × 2 brokers × 2 repetitions; one: 1 qos × 2 transports × 2 brokers × 1
    assert len(runs) == 16 + 4
    assert len({run.id for run in runs}) == len(runs)
    names = {run.scenario_name for run in runs}
    assert names == {"p2p-qos0-plain", "p2p-qos0-tls", "p2p-qos1-plain", "p2p-qos1-tls", "one-qos1-plain", "one-qos1-tls"}


def test_runs_interleave_brokers_and_finish_a_repetition_before_the_next():
    runs = expand_suite(validate_suite(small()))
    assert [run.broker for run in runs[:2]] == ["mosquitto", "rumqttd"]
    repetitions = [run.repetition for run in runs]
    assert repetitions == sorted(repetitions)


def test_variant_settings_and_quick_settings_reach_the_scenario():
    runs = expand_suite(validate_suite(small()), quick=True)
    assert all(run.repetition == 1 for run in runs)
    qos0 = next(run for run in runs if run.scenario_name == "p2p-qos0-tls")
    assert qos0.scenario["publishers"]["qos"] == 0 and qos0.scenario["subscribers"]["qos"] == 0
    assert qos0.scenario["load"]["duration"] == "1s"
    assert qos0.transport == "tls" and "transport" not in qos0.scenario
    # base keys survive a case that overrides only some of the same section
    one = next(run for run in runs if run.case == "one")
    assert one.scenario["publishers"] == {"count": 1, "topic": "t/%i", "qos": 1}


def test_command_line_assignments_and_repetitions_apply_last():
    runs = expand_suite(validate_suite(small()), quick=True, assignments=["load.duration=3s"], repetitions=3, brokers=["rumqttd"])
    assert {run.scenario["load"]["duration"] for run in runs} == {"3s"}
    assert {run.broker for run in runs} == {"rumqttd"}
    assert max(run.repetition for run in runs) == 3


def test_scenarios_and_only_narrow_the_suite_under_the_same_run_names():
    runs = expand_suite(validate_suite(small()), cases=["one", "p2p"], only={"transport": ["tls"], "qos": ["qos1"]})
    assert {run.scenario_name for run in runs} == {"one-qos1-tls", "p2p-qos1-tls"}
    # the command line narrows a case's own `only`, never widens it: `one` is QoS 1 only
    assert not expand_suite(validate_suite(small()), cases=["p2p"], only={"qos": ["qos0"]}) == []
    with pytest.raises(SuiteError) as caught:
        expand_suite(validate_suite(small()), cases=["one"], only={"qos": ["qos0"]})
    assert "--only: leaves no run of the chosen cases" in caught.value.listing()
    with pytest.raises(SuiteError) as caught:
        expand_suite(validate_suite(small()), cases=["p3p"], only={"speed": ["fast"], "qos": ["qos9"]})
    paths = [problem.path for problem in caught.value.problems]
    assert paths == ["--scenarios", "--only speed", "--only qos"]


def test_only_on_the_command_line_is_written_axis_equals_values():
    done = CliRunner().invoke(cli_app.app, ["suite", "show", "seed003", "--only", "rate=r200", "--only", "qos=qos2",
                                            "--scenarios", "p2p,p2p-window1", "-b", "mosquitto", "-n", "1"])
    assert done.exit_code == 0, done.output
    assert "2 runs" in done.output and "window1" in done.output
    done = CliRunner().invoke(cli_app.app, ["suite", "show", "seed003", "--only", "r200"])
    assert done.exit_code == 2 and "--only r200: write AXIS=VALUE" in done.output


def test_structure_problems_are_all_listed_with_their_field():
    data = small(brokers=["mosquitto", "nosuchbroker"], repetitions=0, colour="blue")
    data["scenarios"]["p2p"] = {"only": {"speed": ["fast"]}}
    with pytest.raises(SuiteError) as caught:
        validate_suite(data, "bad.yaml")
    listing = caught.value.listing()
    assert "repetitions: must be 1 or more" in listing
    assert "colour: unknown key" in listing
    # the pydantic problems come first and stop there; the broker check needs a valid structure
    data = small(brokers=["mosquitto", "nosuchbroker"])
    data["scenarios"]["p2p"] = {"only": {"speed": ["fast"]}, "broker": "mosquitto"}
    data["variants"]["transport"]["tls"] = {"transport": "quic"}
    with pytest.raises(SuiteError) as caught:
        validate_suite(data, "bad.yaml")
    paths = [problem.path for problem in caught.value.problems]
    assert paths == ["brokers[1]", "variants.transport.tls.transport", "scenarios.p2p.broker", "scenarios.p2p.only.speed"]


def test_scenario_problems_name_the_run_and_the_field_before_anything_runs():
    data = small()
    data["variants"]["qos"]["qos3"] = {"publishers.qos": 3}
    data["scenarios"]["p2p"]["load"] = {"warmup": "5s"}
    with pytest.raises(SuiteError) as caught:
        expand_suite(validate_suite(data, "bad.yaml"))
    text = caught.value.listing()
    assert "[p2p-qos3-plain] publishers.qos: must be 0, 1 or 2" in text
    assert "[p2p-qos0-plain] load.warmup: must be shorter than load.duration" in text


@pytest.mark.parametrize("name", ["seed001", "seed003"])
def test_builtin_suites_are_valid_in_full_and_quick(name):
    assert name in builtin_suites()
    suite = load_suite(name)
    assert expand_suite(suite) and expand_suite(suite, quick=True)


def test_seed003_has_the_seed_topologies_qos_levels_and_repetitions():
    runs = expand_suite(load_suite("seed003"))
    names = {run.scenario_name for run in runs}
    assert names == {f"{case}-{rate}" for case in ("p2p-qos0", "p2p-qos1", "p2p-qos2", "fan-in-qos1", "fan-out-qos1") for rate in ("r20", "r200")} | {
        "p2p-window1-qos1-r200", "p2p-window1-qos2-r200"}
    # the control matched to emqtt-bench: one message in flight per publisher
    assert {run.scenario["publishers"]["inflight"] for run in runs if "window1" in run.scenario_name} == {1}
    # broker and generator on cores of their own, the generator on a 1 ms grid
    assert all(run.scenario["launch"]["limits"]["cpuset"] == "0" and run.scenario["options"]["generator_cpus"] == "1" for run in runs)
    p2p = next(run for run in runs if run.scenario_name == "p2p-qos1-r20").scenario
    assert (p2p["publishers"]["count"], p2p["subscribers"]["count"], p2p["publishers"]["rate"], p2p["publishers"]["payload"]) == (100, 100, 20, 64)
    # the reading that matches the seed's reported 13-20k msg/s: 100 publishers x 200 msg/s
    assert next(run for run in runs if run.scenario_name == "p2p-qos1-r200").scenario["publishers"]["rate"] == 200
    assert p2p["load"]["duration"] == "5m"
    assert max(run.repetition for run in runs) == 5


def test_seed001_sends_one_byte_messages_measured_by_topic_and_sequence_and_paces_as_mqttperf():
    runs = expand_suite(load_suite("seed001"))
    sizes = {run.scenario["publishers"]["payload"]: run.scenario["publishers"].get("measure", "header") for run in runs}
    assert sizes == {1: "topic-sequence", 1000: "header"}
    assert {run.scenario["publishers"]["arrival"] for run in runs} == {"closed", "constant"}
    assert all(run.scenario["publishers"]["arrival"] == "closed" for run in runs if run.case.startswith("diffusion"))
    diffusion = {run.scenario["subscribers"]["count"] for run in runs if run.case.startswith("diffusion")}
    assert diffusion == {10, 50, 100, 200}
    assert {run.transport for run in runs} == {"plain", "tls"}


def test_a_finished_run_is_not_mixed_with_a_changed_definition(tmp_path):
    suite = validate_suite(small())
    runs = expand_suite(suite, brokers=["mosquitto"], quick=True)
    prepare_directory(tmp_path, "x", runs)
    finished = runs[0].directory(tmp_path)
    finished.mkdir(parents=True)
    (finished / "manifest.json").write_text(json.dumps({"status": "completed"}))
    prepare_directory(tmp_path, "x", runs)  # same definition: fine
    changed = expand_suite(suite, brokers=["mosquitto"], quick=True, assignments=["publishers.rate=7"])
    with pytest.raises(SuiteConflict, match=runs[0].id):
        prepare_directory(tmp_path, "x", changed)


def test_ctrl_c_after_a_run_wrote_its_results_still_records_it_finished(tmp_path, monkeypatch):
    # The window the real interrupted-suite test can hit by chance: the run's results are on disk,
    # its broker is still stopping, and Ctrl-C lands before the suite recorded the run.
    runs = expand_suite(validate_suite(small()), brokers=["mosquitto"], quick=True)
    prepare_directory(tmp_path, "x", runs)

    def results_then_ctrl_c(run, directory, python, dask=None):
        directory.mkdir(parents=True)
        (directory / "manifest.json").write_text(json.dumps({"status": "completed"}))
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_run_one", results_then_ctrl_c)
    try:
        with pytest.raises(SuiteInterrupted):
            run_suite(tmp_path, runs)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped the suite runner without recording the runs")
    statuses = [entry["status"] for entry in json.loads((tmp_path / "runs.json").read_text())["runs"]]
    assert statuses == ["completed"] + ["pending"] * (len(runs) - 1)


def test_cli_show_lists_runs_and_bad_suites_exit_2(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli_app.app, ["suite", "show", "seed003", "--quick", "--brokers", "mosquitto"])
    assert result.exit_code == 0, result.output
    assert "14 runs" in result.output and "fan-out-qos1" in result.output  # 7 cases x 2 repetitions
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"scenarios": {"a": {"publishers": {"qos": 9}}}}))
    result = runner.invoke(cli_app.app, ["suite", "run", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "publishers.qos" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    result = runner.invoke(cli_app.app, ["suite", "show", "no-such-suite"])
    assert result.exit_code == 2 and "built-in" in result.output


def test_planned_run_directories_are_distinct_per_broker_and_repetition(tmp_path):
    run = PlannedRun("p2p", (("qos", "qos1"),), "p2p-qos1", "mosquitto", 2, "plain", {})
    assert run.directory(tmp_path) == tmp_path / "runs" / "p2p-qos1" / "mosquitto" / "rep-2"


def test_quick_can_pick_cases_and_axis_values_while_a_case_keeps_its_own_choice():
    data = small(quick={"scenarios": ["one", "p2p"], "only": {"qos": ["qos0"], "transport": ["plain"]}})
    runs = expand_suite(validate_suite(data), quick=True)
    # `one` chose qos1 itself; p2p takes the quick choice qos0; both plain only; cases in quick order.
    assert sorted({run.scenario_name for run in runs}) == ["one-qos1-plain", "p2p-qos0-plain"]
    assert len(expand_suite(validate_suite(data))) == 2 * 2 * 2 * 2 + 1 * 2 * 2  # the full suite is unchanged
    bad = small(quick={"scenarios": ["p2q"], "only": {"qos": ["qos3"]}})
    with pytest.raises(SuiteError) as caught:
        validate_suite(bad, "bad.yaml")
    listing = caught.value.listing()
    assert "quick.scenarios[0]: no case 'p2q'" in listing and "quick.only.qos: no value 'qos3'" in listing


def test_a_tls_variant_over_network_conditions_is_planned_for_the_brokers_tls_listener():
    # Seed 001 measured plain and TLS over its links: `mqttlab run` launches the broker in the
    # emulated network with its TLS listener (launch.tls), so the combination is allowed.
    data = small()
    data["scenarios"]["p2p"]["network"] = {"delay": "5ms"}
    runs = expand_suite(validate_suite(data))
    assert {run.transport for run in runs if run.case == "p2p"} == {"plain", "tls"}
    assert all(run.scenario["network"] == {"delay": "5ms"} for run in runs if run.case == "p2p")


def test_suite_show_marks_skipped_brokers_estimates_time_and_writes_sizes_once():
    result = invoke("suite", "show", "seed003", "--quick")
    assert result.exit_code == 0, result.output
    text = said(result)
    assert "1KB B" not in text and "64 B" in text
    assert re.search(r"time: about \S+ of load for the \d+ runs made here", text)
    skipped = re.findall(r"skipped: (\w+), not available here", text)
    assert "emqx" in skipped and "emqx (skipped)" in result.output
    assert "…" not in result.output
