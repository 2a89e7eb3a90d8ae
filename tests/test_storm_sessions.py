"""`mqttlab storm --persistent` on real brokers (loopback): every subscriber leaves its persistent
session at once and all come back together; the storm reports the sessions resumed and the
messages queued meanwhile that were delivered after the return, each promise judged with its
count: Mosquitto keeps both (MQTT 5, with the session expiry the storm gives), amqtt loses every
session (`session_lost`, named with its count)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mqttlab.brokers import get_launcher
from mqttlab.cli.app import app
from mqttlab.scenario.units import parse_duration

pytestmark = pytest.mark.slow
runner = CliRunner()
# 10 publishers at 10 msg/s and 10 subscribers away 1 s: about 100 messages queued per return.
SHORT = ["--persistent", "--clients", "20", "--at", "2s", "--away", "1s", "--duration", "5s", "--rate", "10"]


def _available(name: str) -> None:
    if not get_launcher(name).availability().available:
        pytest.skip(f"{name} is not installed (scripts/install-brokers.sh installs it)")


def test_a_persistent_storm_resumes_every_session_and_delivers_what_was_queued(tmp_path: Path):
    _available("mosquitto")
    out = tmp_path / "storm"
    result = runner.invoke(app, ["storm", "--broker", "mosquitto", *SHORT, "--set", "mqtt.version=5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "storm.json").read_text())
    assert report["persistent"] and report["away_s"] == 1 and report["all_back"]
    # The subscribers left together and came back together: the publishers stayed.
    assert report["fewest_connected"] == 10
    assert report["reconnected"] == 10 and report["sessions_resumed"] == 10 and report["sessions_lost"] == 0
    queued = report["queued"]
    assert queued["owed"] >= 80 and queued["delivered"] == queued["owed"], queued
    verdicts = {verdict["name"]: verdict for verdict in report["promises"]}
    assert (verdicts["session_lost"]["verdict"], verdicts["session_lost"]["kept"]) == ("kept", 10)
    assert (verdicts["queued_lost"]["verdict"], verdicts["queued_lost"]["kept"]) == ("kept", queued["owed"])
    assert "persistent session kept: kept (10); rule: a client that reconnects with clean start 0" in " ".join(result.output.split())
    # Under MQTT 5 a session of expiry 0 would end with its connection: the storm gave one longer than the run.
    mqtt = yaml.safe_load((out / "run" / "scenario.yaml").read_text())["mqtt"]
    assert mqtt["clean_start"] is False and parse_duration(mqtt["session_expiry"]) > 5 + 3


def test_a_broker_that_loses_the_sessions_of_a_persistent_storm_is_named_with_the_count(tmp_path: Path):
    _available("amqtt")
    out = tmp_path / "storm"
    result = runner.invoke(app, ["storm", "--broker", "amqtt", *SHORT, "--out", str(out)])
    report = json.loads((out / "storm.json").read_text())
    assert result.exit_code == 1, result.output  # a broken promise is a finding
    assert report["reconnected"] == 10 and report["sessions_resumed"] == 0 and report["sessions_lost"] == 10
    (lost,) = [verdict for verdict in report["promises"] if verdict["verdict"] == "broken"]
    assert (lost["name"], lost["broken"]) == ("session_lost", 10)
    assert "persistent session kept: broken (0, session_lost 10)" in " ".join(result.output.split())


def test_persistent_storm_options_are_checked_together():
    result = runner.invoke(app, ["storm", "--persistent", "--fault", "broker-restart", "--away", "9s", "--at", "3s", "--duration", "8s"])
    assert result.exit_code == 2
    assert "--fault: not with --persistent" in result.output and "--away: the subscribers must be back" in result.output
    assert "--away: only with --persistent" in runner.invoke(app, ["storm", "--away", "1s"]).output
