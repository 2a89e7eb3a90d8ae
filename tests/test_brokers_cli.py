"""`mqttlab brokers list | install | start | stop` through the real command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from mqttlab.brokers import get_launcher
from mqttlab.brokers.probe import round_trip
from mqttlab.cli import app as cli_app
from mqttlab.cli import brokers as brokers_cmd

PYTHONPATH = str(Path(__file__).resolve().parents[1] / "python")
runner = CliRunner()
app = cli_app.app


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Detached-broker records go to a per-test folder, never the user's ~/.cache.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "mqttlab" / "brokers"


@pytest.fixture
def mosquitto_available() -> None:
    if not get_launcher("mosquitto").availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")


def test_list_names_every_broker_with_availability() -> None:
    result = runner.invoke(brokers_cmd.app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    rows = {row["name"]: row for row in [*listed["brokers"], *listed["gateways"]]}
    assert {"rumqttd", "mosquitto", "rmqtt", "aedes", "amqtt", "moquette", "hivemq", "activemq", "rabbitmq",
            "ejabberd", "mochi", "emqx", "nanomq", "vernemq", "external"} <= set(rows)
    for row in rows.values():
        assert row["available"] or row["detail"], f"{row['name']}: unavailable without a hint"
        assert isinstance(row["tested_by_test_command"], bool) and isinstance(row["tls"], bool)
    # The seeds' brokers no registry here offers say so, and how to measure them anyway: from
    # their image (naming whether a container runtime is here) or by URL.
    for name in ("emqx", "vernemq"):
        assert not rows[name]["available"]
        assert "not in any registry reachable here" in rows[name]["detail"]
        assert f"--broker image:{name}/" in rows[name]["detail"] and "found here" in rows[name]["detail"]
        assert f"?name={name}&container=" in rows[name]["detail"]
        assert not rows[name]["tested_by_test_command"]
    assert rows["mosquitto"]["tested_by_test_command"] and rows["mosquitto"]["mqtt_versions"]
    assert rows["mosquitto"]["source"] and rows["mosquitto"]["install_time"]
    # Built from pinned upstream sources, and tested by the test command: the seeds' NanoMQ and RSMB,
    # and the Paho MQTT-SN gateway listed apart from the brokers.
    for name in ("nanomq", "rsmb", "paho-mqtt-sn-gateway"):
        assert "upstream source" in rows[name]["source"] and "sha256 pinned" in rows[name]["source"]
        assert rows[name]["install_time"] and rows[name]["tested_by_test_command"]
        assert rows[name]["available"] or "../shared/sources" in rows[name]["detail"]
    assert rows["nanomq"]["tls"] and not rows["rsmb"]["tls"]


def test_gateways_are_listed_apart_from_brokers_with_how_they_are_used() -> None:
    listed = json.loads(runner.invoke(brokers_cmd.app, ["list", "--json"]).output)
    assert "paho-mqtt-sn-gateway" not in {row["name"] for row in listed["brokers"]}
    assert [(row["name"], row["used_as"]) for row in listed["gateways"]] == [("paho-mqtt-sn-gateway", "transport.gateway: paho")]
    table = runner.invoke(brokers_cmd.app, ["list"]).output
    brokers, gateways = table.split("MQTT-SN gateways")
    assert "paho-mqtt-sn-gateway" not in brokers and "paho-mqtt-sn-gateway" in gateways and "mosquitto" not in gateways


def test_a_gateway_given_as_the_broker_points_to_transport_gateway() -> None:
    result = runner.invoke(app, ["run", "--broker", "paho-mqtt-sn-gateway"])
    assert result.exit_code == 2
    assert ("paho-mqtt-sn-gateway is an MQTT-SN gateway, not a broker: a scenario puts it in front of a broker with "
            "`transport: {kind: mqtt-sn, gateway: paho}`") in " ".join(result.output.split())


@pytest.mark.parametrize("typed, meant", [("mosquito", "mosquitto"), ("rumqtt", "rumqttd"), ("nanomqq", "nanomq")])
def test_a_mistyped_broker_name_gets_a_did_you_mean(typed: str, meant: str) -> None:
    result = runner.invoke(app, ["run", "--broker", typed])
    assert result.exit_code == 2 and f"unknown broker '{typed}' (did you mean '{meant}'?)" in " ".join(result.output.split())
    assert "did you mean" not in runner.invoke(app, ["run", "--broker", "kafka"]).output


def test_list_prints_a_table() -> None:
    result = runner.invoke(brokers_cmd.app, ["list"])
    assert result.exit_code == 0, result.output
    assert "how to get it" in result.output
    assert "moquette" in result.output and "tested" in result.output


def test_brokers_group_is_registered_in_the_main_command() -> None:
    done = subprocess.run([sys.executable, "-m", "mqttlab", "brokers", "--help"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=PYTHONPATH), timeout=60)
    assert done.returncode == 0, done.stderr
    for command in ("list", "install", "start", "stop"):
        assert command in done.stdout


def test_unknown_broker_is_a_clear_error_without_traceback() -> None:
    result = runner.invoke(brokers_cmd.app, ["start", "nosuchbroker"])
    assert result.exit_code == 2
    assert "unknown broker 'nosuchbroker'" in result.output
    assert "Traceback" not in result.output


def test_install_is_idempotent_for_an_installed_broker(mosquitto_available: None) -> None:
    result = runner.invoke(brokers_cmd.app, ["install", "mosquitto"])
    assert result.exit_code == 0, result.output
    assert "mosquitto: mosquitto 2." in result.output


def test_install_of_an_unknown_broker_installs_nothing() -> None:
    result = runner.invoke(brokers_cmd.app, ["install", "mosquitto", "nosuchbroker"])
    assert result.exit_code == 2
    assert "unknown broker 'nosuchbroker'" in result.output
    assert "installing" not in result.output


def test_stop_without_detached_brokers_says_so() -> None:
    result = runner.invoke(brokers_cmd.app, ["stop"])
    assert result.exit_code == 0
    assert "no detached brokers" in result.output
    result = runner.invoke(brokers_cmd.app, ["stop", "mosquitto"])
    assert result.exit_code == 2
    assert "no detached mosquitto" in result.output


def test_detached_broker_is_recorded_serves_and_is_stopped(private_state: Path, mosquitto_available: None) -> None:
    result = runner.invoke(brokers_cmd.app, ["start", "mosquitto", "--detach"])
    assert result.exit_code == 0, result.output
    record = json.loads((private_state / "mosquitto.json").read_text())
    pid = record["pid"]
    try:
        assert round_trip("127.0.0.1", record["port"]).payload
        again = runner.invoke(brokers_cmd.app, ["start", "mosquitto", "--detach"])
        assert again.exit_code == 2 and "already running" in again.output
        stopped = runner.invoke(brokers_cmd.app, ["stop", "mosquitto"])
        assert stopped.exit_code == 0, stopped.output
        assert f"stopped mosquitto (PID {pid})" in stopped.output
        assert not (private_state / "mosquitto.json").exists()
        deadline = time.monotonic() + 5
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not psutil.pid_exists(pid)
    finally:
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGKILL)


def test_foreground_broker_runs_until_ctrl_c(tmp_path: Path, mosquitto_available: None) -> None:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, XDG_CACHE_HOME=str(tmp_path / "cache"))
    cli = subprocess.Popen(
        [sys.executable, "-m", "mqttlab", "brokers", "start", "mosquitto", "--no-tls",
         "--workdir", str(tmp_path / "w")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        lines = []
        while not lines or not lines[-1].startswith("press Ctrl-C"):  # bounded by the CLI's output
            line = cli.stdout.readline()  # type: ignore[union-attr]
            assert line, "".join(lines) + cli.stderr.read()  # type: ignore[union-attr]
            lines.append(line)
        first, url = lines[0], lines[1].strip()  # "mosquitto (mosquitto 2.x) PID n", "mqtt://..."
        pid = int(first.rsplit(" ", 1)[1])
        port = int(url.rsplit(":", 1)[1])
        assert round_trip("127.0.0.1", port).payload
        cli.send_signal(signal.SIGINT)
        assert cli.wait(timeout=15) == 0
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        cli.kill()
        cli.wait(timeout=10)
