"""The command line without a load run: scenario commands, input errors, report, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from mqttlab.cli.run import Exit, exit_code_for, flag_overrides
from cli_runs import said  # tests/ is on sys.path (no package)
from test_results import write_example

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def invoke(*args: str):
    return runner.invoke(cli_app.app, list(args))


def realistic_summary(**changes) -> dict:
    latency = {"count": 8000, "min_us": 90, "max_us": 4100, "mean_us": 310.5, "stdev_us": 80.1, "p50_us": 287, "p90_us": 402, "p99_us": 1210, "p999_us": 3900, "p9999_us": 4100}
    summary = {
        "status": "completed", "error": None, "generator_limited": False, "generator_limited_reasons": [],
        "warmup_s": 2.0, "measured_s": 8.0,
        "connections": {"publishers": {"ok": 10, "failed": 0}, "subscribers": {"ok": 10, "failed": 0}},
        "messages": {"sent": 8000, "acked": 8000, "dropped": 0, "received": 8000, "expected": 8000, "delivered": 8000, "lost": 0, "duplicated": 0, "out_of_order": 0, "unexpected": 0},
        "rates": {"sent_per_s": 1000.0, "acked_per_s": 1000.0, "received_per_s": 1000.0},
        "latency": {"e2e": latency, "e2e_uncorrected": latency, "puback": latency, "pubcomp": None, "connect": latency, "tls": None, "connack": latency, "suback": latency},
        "violations": [], "errors": [],
        "generator": {"cpu_user_s": 0.4, "cpu_sys_s": 0.2, "cpu_per_msg_us": 7.5, "schedule_lag_p99_us": 120, "schedule_lag_max_us": 900, "late_sends": 0,
                      "socket_full_s": 0.0, "back_pressure_share": 0.0},
        "bytes": {"mqtt_out": 1_000_000, "mqtt_in": 1_000_000},
    }  # fmt: skip
    summary.update(changes)
    return summary


# --- scenario commands ---------------------------------------------------------------------


def test_scenario_validate_accepts_the_shipped_files():
    result = invoke("scenario", "validate", *map(str, sorted(SCENARIOS.glob("*.yaml"))))
    assert result.exit_code == 0, result.output
    assert "ok: " in result.output and "(default)" in result.output


def test_scenario_validate_lists_every_problem_and_exits_2(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\npublishers: {qos: 3, payload: 8}\nlaod: {duration: 5s}\n")
    result = invoke("scenario", "validate", str(bad))
    assert result.exit_code == 2
    assert "publishers.qos: must be 0, 1 or 2 (got 3)" in result.output
    assert "laod: unknown key (did you mean 'load'?)" in result.output
    assert "Traceback" not in result.output


def test_a_key_naming_something_else_is_not_sent_to_a_lookalike(tmp_path: Path):
    # A message rate is no key here (it is `rate`): `messages` shares letters with it, not meaning.
    written = tmp_path / "rate.yaml"
    written.write_text("publishers: {message_rate: 60}\n")
    result = invoke("scenario", "validate", str(written))
    assert result.exit_code == 2 and "did you mean" not in result.output
    assert "publishers.message_rate: unknown key (allowed: count, client_id, topic, qos" in " ".join(result.output.split())


def test_scenario_schema_prints_the_json_schema():
    result = invoke("scenario", "schema")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["title"] == "Scenario"


# --- run: input errors (all caught before any engine or broker is needed) ------------------


def test_run_reports_bad_flags_together_with_exit_code_2():
    result = invoke("run", "--qos", "3", "--size", "8", "--duration", "1s", "--warmup", "2s")
    assert result.exit_code == 2
    # --qos sets both QoS fields: its problem is said once, naming the flag.
    assert "publishers.qos (--qos): must be 0, 1 or 2 (got 3)" in result.output
    assert "subscribers.qos" not in result.output and "2 problems" in result.output
    assert "load.warmup (--warmup): must be shorter than load.duration" in result.output
    assert "Traceback" not in result.output


def test_run_rejects_unknown_set_paths_with_a_suggestion():
    result = invoke("run", "--set", "publishers.rat=5")
    assert result.exit_code == 2
    assert "publishers.rat: unknown key (did you mean 'rate'?)" in result.output


def test_run_with_a_missing_scenario_file_exits_2(tmp_path: Path):
    result = invoke("run", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "nope.yaml: 1 problem" in result.output and "file not found" in result.output


def test_run_refuses_an_out_directory_that_holds_a_run(tmp_path: Path):
    directory = write_example(tmp_path / "old")
    result = invoke("run", "--out", str(directory))
    assert result.exit_code == 2
    assert "already holds the results of a run" in result.output


def test_flags_override_the_matching_scenario_fields(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    overrides = flag_overrides(qos=2, pubs=3, filters=["a/#"], ca="ca.pem", size="1KB", seed=None, topic=None)
    assert overrides == {
        "publishers.qos": 2,
        "subscribers.qos": 2,
        "publishers.count": 3,
        "subscribers.filters": ["a/#"],
        "tls.ca": str(tmp_path / "ca.pem"),
        "publishers.payload": "1KB",
    }


# --- report --------------------------------------------------------------------------------


def test_report_prints_the_summary_tables(tmp_path: Path):
    directory = write_example(tmp_path / "run")
    (directory / "summary.json").write_text(json.dumps(realistic_summary()))
    result = invoke("report", str(directory))
    assert result.exit_code == 0, result.output
    for expected in ("completed", "warm-up", "Latency (ms)", "e2e uncorrected", "→ PUBACK", "0.287", "1.210", "7.50 µs CPU per message", str(directory)):
        assert expected in result.output, expected
    assert "GENERATOR-LIMITED" not in result.output


def test_report_makes_a_generator_limited_run_loud(tmp_path: Path):
    directory = write_example(tmp_path / "run")
    summary = realistic_summary(generator_limited=True, generator_limited_reasons=["schedule lag p99 12 ms"])
    (directory / "summary.json").write_text(json.dumps(summary))
    result = invoke("report", str(directory))
    assert "GENERATOR-LIMITED" in result.output and "schedule lag p99 12 ms" in result.output


def test_report_json_prints_summary_json_with_whose_figures_they_are(tmp_path: Path):
    directory = write_example(tmp_path / "run")
    (directory / "summary.json").write_text(json.dumps(realistic_summary()))
    result = invoke("report", str(directory), "--json")
    assert result.exit_code == 0
    broker = {"name": "rumqttd", "version": "0.19.0", "url": "mqtt://127.0.0.1:1883"}
    assert json.loads(result.stdout) == {**realistic_summary(), "scenario": "default", "broker": broker}


def test_report_of_a_missing_directory_exits_2(tmp_path: Path):
    result = invoke("report", str(tmp_path / "absent"))
    assert result.exit_code == 2 and "no such results directory" in result.output


# --- exit codes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, code",
    [
        ({}, Exit.OK),
        ({"violations": [{"kind": "qos1_lost", "count": 1, "detail": "x"}]}, Exit.FINDINGS),
        ({"messages": {"lost": 3}}, Exit.FINDINGS),
        ({"connections": {"publishers": {"ok": 9, "failed": 1}}}, Exit.FINDINGS),
        # Connections lost and reconnected, nothing lost: a clean run (`lost` is a count, not a role).
        ({"connections": {"publishers": {"ok": 1, "failed": 0}, "subscribers": {"ok": 1, "failed": 0}, "lost": 2}}, Exit.OK),
        ({"status": "broker_lost"}, Exit.ABNORMAL),
        ({"status": "failed"}, Exit.ABNORMAL),
        ({"status": "interrupted"}, Exit.INTERRUPTED),
    ],
)
def test_exit_code_follows_status_violations_and_losses(changes, code):
    assert exit_code_for(realistic_summary(**changes)) == code


def test_python_dash_m_runs_the_cli():
    completed = subprocess.run(
        [sys.executable, "-m", "mqttlab", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"},
    )
    assert completed.returncode == 0 and completed.stdout.startswith("mqttlab ")


@pytest.mark.parametrize("brokers", [["--broker", "mosquitto", "--broker", "aedes"], ["--broker", "mosquitto,aedes"]])
def test_several_brokers_in_run_point_to_suite_and_compare(brokers: list[str]):
    result = invoke("run", *brokers)
    assert result.exit_code == 2
    assert "`run` measures one broker (got mosquitto, aedes)" in said(result)
    assert "suite run SUITE --brokers mosquitto,aedes" in said(result) and "mqttlab compare" in said(result)


def test_a_set_without_equals_is_refused_not_taken_for_the_scenario_file():
    result = invoke("run", "--set", "publishers.qos", "2")
    assert result.exit_code == 2
    assert "error: --set publishers.qos: expected KEY=VALUE without spaces, e.g. --set publishers.qos=2" in said(result)
    assert "file not found" not in result.output


def test_qos_3_is_reported_once():
    result = invoke("run", "--qos", "3")
    assert result.exit_code == 2 and result.output.count("must be 0, 1 or 2") == 1 and "(--qos)" in said(result)
