"""`mqttlab report` says whose figures they are and where to go (issue 39, 5): `--json` carries the
scenario and the broker's name and version; a folder of runs (a suite) is pointed to `compare`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from test_results import write_example  # tests/ is on sys.path (no package)


def invoke(*args: str):
    return CliRunner().invoke(cli_app.app, list(args))


def test_report_json_names_the_scenario_and_the_broker_with_its_version(tmp_path: Path):
    result = invoke("report", str(write_example(tmp_path / "run")), "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["scenario"] == "default"
    assert printed["broker"] == {"name": "rumqttd", "version": "0.19.0", "url": "mqtt://127.0.0.1:1883"}


def test_report_on_a_suite_directory_points_to_compare(tmp_path: Path):
    suite = tmp_path / "suite"
    for name in ("a", "b"):
        write_example(suite / "runs" / name / "rumqttd" / "rep-1")
    result = invoke("report", str(suite))
    assert result.exit_code == 2
    assert " ".join(result.output.split()) == (
        f"error: {suite} is not one run but holds 2 (a suite, or results of several runs): `mqttlab compare {suite}` sets them "
        f"side by side; `mqttlab report {suite / 'runs' / 'a' / 'rumqttd' / 'rep-1'}` reads one")
