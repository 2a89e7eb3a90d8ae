"""A run from flags is named by its shape (issue 39, 2): fan-in-4-1-qos1-20ps in its results
directory, `report`, `compare` and the HTML report; a scenario file and the default scenario's
shape keep their names. Real runs against launched brokers on loopback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.cli import app as cli_app

ROOT = Path(__file__).resolve().parent.parent
FAN_IN = ["--pubs", "4", "--subs", "1", "--topic", "fi/%i", "--filter", "fi/+", "--rate", "20"]


def invoke(*args: str):
    return CliRunner().invoke(cli_app.app, list(args))


def said(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Under results/ of a fresh directory, as a user's default: a fan-in from flags (Mosquitto),
    a run of the default scenario's shape changed only in its length, and a scenario file given
    other counts by flags."""
    root = tmp_path_factory.mktemp("named")
    here = Path.cwd()
    os.chdir(root)
    try:
        for args in (["--broker", "mosquitto", *FAN_IN], ["--rate", "100"],
                     [str(ROOT / "scenarios" / "fan-in.yaml"), "--pubs", "2", "--rate", "20", "--warmup", "0.2s"]):
            result = invoke("run", *args, "--duration", "1s")
            assert result.exit_code in (0, 1), result.output  # 1 only for findings a loaded host can cause
    finally:
        os.chdir(here)
    return root / "results"


def _named(results: Path, name: str) -> Path:
    found = [path for path in results.iterdir() if path.name.endswith(f"-{name}")]
    assert len(found) == 1, sorted(path.name for path in results.iterdir())
    return found[0]


def test_a_run_from_flags_is_named_by_its_shape_in_its_directory_and_manifest(runs: Path):
    fan_in = _named(runs, "fan-in-4-1-qos1-20ps")
    assert json.loads((fan_in / "manifest.json").read_text())["scenario"] == "fan-in-4-1-qos1-20ps"
    assert json.loads((_named(runs, "default") / "manifest.json").read_text())["scenario"] == "default"
    assert json.loads((_named(runs, "fan-in") / "manifest.json").read_text())["scenario"] == "fan-in"  # the file's own name


def test_report_and_compare_name_the_shape(runs: Path, tmp_path: Path):
    fan_in = _named(runs, "fan-in-4-1-qos1-20ps")
    report = invoke("report", str(fan_in))
    assert report.exit_code == 0 and said(report).startswith("fan-in-4-1-qos1-20ps against mosquitto")
    compared = invoke("compare", str(fan_in), str(_named(runs, "default")), "--out", str(tmp_path / "report"), "--no-png")
    assert compared.exit_code == 0, compared.output
    assert "fan-in-4-1-qos1-20ps: offered 80 msg/s; mean" in said(compared) and "default: offered 1,000 msg/s; mean" in said(compared)
    assert ">fan-in-4-1-qos1-20ps<" in (tmp_path / "report" / "report.html").read_text()


def test_a_capacity_search_from_flags_is_named_by_its_shape_without_the_rate_it_searches(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default results/ of a user's directory
    result = invoke("capacity", "--broker", "mosquitto", *FAN_IN[:-2], "--slo", "p99<1s", "--start", "40", "--max-rate", "80",
                    "--probe-duration", "1s", "--warmup", "0s", "--repeats", "1")
    assert result.exit_code in (0, 1), result.output
    (search,) = (tmp_path / "results").iterdir()
    assert search.name.endswith("-capacity-fan-in-4-1-qos1"), search.name
    # The probes' runs carry the name too, so that compare names them as run does.
    probes = sorted((search / "probes").glob("*/manifest.json"))
    assert probes and {json.loads(path.read_text())["scenario"] for path in probes} == {"fan-in-4-1-qos1"}
