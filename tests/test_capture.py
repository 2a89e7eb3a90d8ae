"""Message bundling from a tshark capture around `mqttlab run --capture` (seed 002's tables):
real mosquitto on loopback, real tshark. Capturing needs tshark and the right to capture on `lo`
(root / CAP_NET_RAW); without them the run test skips and says why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_unless_capture_on_lo
from mqttlab.netem.capture import bundling, parse_fields, tshark_path

ROOT = Path(__file__).resolve().parent.parent


def test_fields_output_is_split_per_direction_and_message_type():
    # tshark -T fields rows: frame, tcp.dstport, tcp.len, retransmission flag, mqtt.msgtype list.
    text = "1\t1883\t60\t\t3,3,3\n2\t50000\t0\t\t\n3\t50000\t8\t\t4,4\n4\t1883\t20\t1\t3\n5\t1883\t24\t\t3,6\n"
    table = bundling(parse_fields(text, 1883))
    up, down = table["directions"]["up"], table["directions"]["down"]
    assert (up["segments"], up["data_segments"], up["retransmitted_segments"]) == (3, 2, 1)
    assert (up["mqtt_packets"], up["max_packets_per_segment"], up["bundled_segments"]) == (5, 3, 2)
    assert up["packets_per_segment"] == 2.5
    assert (down["bare_ack_segments"], down["mqtt_packets"]) == (1, 2)
    rows = {(r["direction"], r["type"]): r for r in table["by_type"]}
    assert rows[("up", "PUBLISH")]["packets"] == 4  # the retransmitted copy is not counted again
    assert rows[("up", "PUBLISH")]["shared_segments"] == 1 and rows[("up", "PUBREL")]["shared_segments"] == 1
    assert rows[("down", "PUBACK")]["packets_per_segment"] == 2.0


def test_capture_of_a_qos1_run_counts_every_publish_and_ack(tmp_path):
    skip_unless_capture_on_lo()
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "mqttlab", "run", "--broker", "mosquitto", "--pubs", "2", "--subs", "2",
         "--topic", "b/%i", "--filter", "b/%i", "--qos", "1", "--rate", "200", "--duration", "1.5s",
         "--warmup", "0s", "--capture", "--out", str(out)],
        capture_output=True, text=True, timeout=90, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    assert "Message bundling (tshark on lo" in done.stdout and "MQTT packets per TCP segment" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    sent, delivered = summary["messages"]["sent"], summary["messages"]["delivered"]
    assert sent > 0 and delivered == sent  # one subscriber per topic
    capture = summary["capture"]
    assert capture["capture_dropped"] == 0
    rows = {(r["direction"], r["type"]): r for r in capture["by_type"]}
    # QoS 1: PUBLISH up and PUBACK down once per message sent; PUBLISH down and PUBACK up once
    # per delivery; one CONNECT per client.
    assert rows[("up", "PUBLISH")]["packets"] == sent
    assert rows[("down", "PUBACK")]["packets"] == sent
    assert rows[("down", "PUBLISH")]["packets"] == delivered
    assert rows[("up", "PUBACK")]["packets"] == delivered
    assert rows[("up", "CONNECT")]["packets"] == 4 and rows[("down", "CONNACK")]["packets"] == 4
    for direction in ("up", "down"):
        d = capture["directions"][direction]
        assert d["segments_with_mqtt"] <= d["mqtt_packets"] <= d["segments_with_mqtt"] * d["max_packets_per_segment"]
        assert d["segments"] >= d["data_segments"] >= d["segments_with_mqtt"]
    for row in capture["by_type"]:
        assert row["segments"] <= row["packets"]
    assert (out / "capture" / "capture.pcapng").stat().st_size > 0
    assert (out / "capture" / "bundling.csv").read_text().startswith("direction,type,packets,segments")
    assert json.loads((out / "manifest.json").read_text())["capture"]["device"] == "lo"
    # `report` prints from disk what the run printed at its end, the bundling table included.
    again = subprocess.run([sys.executable, "-m", "mqttlab", "report", str(out)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert again.returncode == 0, again.stderr
    assert "Message bundling (tshark on lo" in again.stdout and "MQTT packets per TCP segment" in again.stdout


def test_capture_of_an_mqtt_sn_run_is_refused_before_any_load(tmp_path):
    if tshark_path() is None:
        pytest.skip("tshark is not installed (scripts/install-test-tools.sh)")
    scenario = tmp_path / "sn.yaml"
    scenario.write_text("name: sn\nbroker: mosquitto\ntransport: mqtt-sn\n")
    done = subprocess.run([sys.executable, "-m", "mqttlab", "run", str(scenario), "--capture", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "--capture: MQTT over TCP only" in done.stderr
    assert not (tmp_path / "o").exists()


def test_the_python_api_captures_what_the_scenario_asks_for_as_the_cli_does(tmp_path):
    # mqttlab.run() honours options.capture: the session decides capture from the scenario, not
    # the command line.
    skip_unless_capture_on_lo()
    import mqttlab

    scenario = tmp_path / "captured.yaml"
    scenario.write_text("name: captured\nbroker: mosquitto\npublishers: {count: 1, topic: c/%i, qos: 1, rate: 100}\n"
                        "subscribers: {count: 1, filters: [c/%i]}\nload: {duration: 1s, warmup: 0s}\noptions: {capture: true}\n")
    result = mqttlab.run(scenario, out=tmp_path / "run")
    capture = result.summary["capture"]
    assert "error" not in capture, capture
    sent = result.summary["messages"]["sent"]
    rows = {(r["direction"], r["type"]): r for r in capture["by_type"]}
    assert sent > 0 and rows[("up", "PUBLISH")]["packets"] == sent
    assert (result.directory / "capture" / "capture.pcapng").stat().st_size > 0
    assert (result.directory / "capture" / "bundling.csv").is_file()


def test_capture_over_a_launched_brokers_tls_listener_is_refused_before_any_load(tmp_path):
    if tshark_path() is None:
        pytest.skip("tshark is not installed (scripts/install-test-tools.sh)")
    done = subprocess.run([sys.executable, "-m", "mqttlab", "run", "--broker", "mosquitto", "--tls", "--capture", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "--capture: not over TLS" in done.stderr
    assert not (tmp_path / "o").exists()
