"""The terminal summary says what arrived and what its words mean (issue 39, 5): a subscribers-only
run shows the retained messages it received, and late sends say their threshold. Real runs
against Mosquitto on loopback, which keeps the retained messages between the two runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.brokers import get_launcher
from mqttlab.cli import app as cli_app


def invoke(*args: str):
    return CliRunner().invoke(cli_app.app, list(args), env={"COLUMNS": "120"})


@pytest.fixture
def mosquitto(tmp_path: Path):
    launcher = get_launcher("mosquitto")
    if not launcher.availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")
    with launcher.start(tmp_path / "broker", tls=False) as broker:
        yield broker.url()


def test_a_subscribers_only_run_shows_the_retained_messages_it_received(mosquitto: str, tmp_path: Path):
    stored = invoke("run", "--broker", mosquitto, "--pubs", "5", "--subs", "0", "--topic", "kept/%i", "--messages", "2",
                    "--set", "publishers.retain=true", "--out", str(tmp_path / "store"))
    assert stored.exit_code == 0, stored.output
    result = invoke("run", "--broker", mosquitto, "--pubs", "0", "--subs", "2", "--filter", "kept/#", "--duration", "1s",
                    "--out", str(tmp_path / "receive"))
    assert result.exit_code == 0, result.output
    # Each of the 2 subscribers gets the last retained message of each of the 5 topics.
    assert re.search(r"│ received\s*│\s*10 │", result.output), result.output
    assert re.search(r"│ retained \(stored before, in received\)\s*│\s*10 │", result.output), result.output
    # Without publishers the load still lasts its planned duration (1 s, of which 0.2 s warm-up).
    summary = json.loads((tmp_path / "receive" / "summary.json").read_text())
    assert summary["measured_s"] == pytest.approx(0.8, abs=0.05)


def test_late_sends_say_their_threshold(tmp_path: Path):
    from test_results import write_example  # tests/ is on sys.path (no package)

    run = write_example(tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    summary["generator"] = {"cpu_per_msg_us": 5.0, "late_sends": 12}  # as the engine counts them (sending.rs)
    (run / "summary.json").write_text(json.dumps(summary))
    result = invoke("report", str(run))
    assert result.exit_code == 0, result.output
    assert "12 late sends (left over 1 ms after their intended time)" in " ".join(result.output.split())
