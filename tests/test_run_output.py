"""What `mqttlab run` and `mqttlab report` say about a real run, through the command line as a
user types it: the broker's start time, what ran, too few samples, a broker not sampled, the
metrics linger, fault times, a results path as typed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli_runs import SMALL, invoke, said  # tests/ is on sys.path (no package)


def test_a_launched_broker_is_said_to_start_with_the_time_it_took(tmp_path: Path):
    from mqttlab.brokers import get_launcher

    if not get_launcher("mosquitto").find():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh)")
    result = invoke("run", "--broker", "mosquitto", "--duration", "1s", *SMALL, "--out", str(tmp_path / "run"))
    assert result.exit_code in (0, 1), result.output
    assert re.search(r"mosquitto started in \d+\.\d s", result.output)


def test_report_opens_with_what_ran(tmp_path: Path):
    out = tmp_path / "run"
    assert invoke("run", "--duration", "1s", *SMALL, "--qos", "2", "--mqtt-version", "5", "--out", str(out)).exit_code in (0, 1)
    lines = invoke("report", str(out)).output.splitlines()
    opening = " ".join(" ".join(lines[:4]).split())
    assert re.search(r"p2p-1-1-qos2-20ps against rumqttd \S+ at mqtt://127\.0\.0\.1:\d+: MQTT 5 over TCP", opening)
    assert "plan: 1 publisher × 20 msg/s = 20 msg/s for 1 s (0.2 s warm-up) → 1 subscriber of bench/%i, QoS 2/2" in opening
    assert "plan:" not in invoke("report", "--json", str(out)).output


def test_too_few_samples_are_flagged_and_counts_stand_beside_percentiles(tmp_path: Path):
    result = invoke("run", "--rate", "0.5", "--duration", "3s", "--pubs", "1", "--subs", "1", "--out", str(tmp_path / "run"))
    assert result.exit_code in (0, 1), result.output
    text = said(result)
    assert re.search(r"only \d messages? measured: too few for the percentiles \(p99 needs at least 100", text)
    assert "count" in result.output.split("Latency (ms)")[1].splitlines()[2]  # the table's header row
    assert "1 publisher ×" in text and "→ 1 subscriber of" in text  # and no "1 publishers"
    many = invoke("run", "--duration", "2s", "--pubs", "2", "--subs", "2", "--rate", "100", "--out", str(tmp_path / "many"))
    assert many.exit_code in (0, 1) and "too few for the percentiles" not in said(many)


def test_a_broker_given_by_url_hints_at_pid_for_its_resources(tmp_path: Path):
    from mqttlab.brokers import get_launcher

    launcher = get_launcher("mosquitto")
    if not launcher.find():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh)")
    with launcher.start(tmp_path / "broker") as broker:
        from mqttlab.cli.brokers import _describe

        assert f"mqttlab run --broker '{broker.url()}?pid={broker.pid}'" in _describe(broker)  # `brokers start` says how
        result = invoke("run", "--broker", broker.url(), "--duration", "3s", *SMALL, "--out", str(tmp_path / "run"))
        sampled = invoke("run", "--broker", f"{broker.url()}?pid={broker.pid}", "--duration", "3s", *SMALL, "--out", str(tmp_path / "pid"))
    assert result.exit_code in (0, 1), result.output
    assert "broker not sampled (a broker given by URL: add ?pid=PID" in said(result)
    assert sampled.exit_code in (0, 1) and "broker not sampled" not in said(sampled) and "resources: broker" in said(sampled)


def test_the_metrics_linger_is_announced(tmp_path: Path):
    result = invoke("run", "--metrics", "127.0.0.1:0", "--metrics-linger", "1s", "--duration", "1s", *SMALL, "--out", str(tmp_path / "run"))
    assert result.exit_code in (0, 1), result.output
    assert "the final figures stay at http://127.0.0.1:" in said(result) and "for 1 s, one scrape interval (--metrics-linger 0" in said(result)
    text = said(result)
    assert text.index("results:") < text.index("the final figures stay")  # after the summary, before the wait


def test_fault_lines_say_every_time_on_the_loads_clock():
    from mqttlab.cli.run import _fault_line

    fault = {"kind": "broker-stall", "asked_at_s": 4.0, "duration_s": 2.0, "applied": True, "lasted_s": 2.0, "start_s": 2.0,
             "received_during": 0, "worst_e2e_us": None, "recovered_after_s": 0.5, "band_us": 900.0, "verdict": None}
    assert "at 4 s for 2 s: 2.00 s from 4.00 s;" in _fault_line(fault, warmup_s=2.0)  # start_s counts from the measured window


def test_a_results_path_with_brackets_is_printed_as_typed(tmp_path: Path):
    out = tmp_path / "[bold]" / "run"
    result = invoke("run", "--duration", "1s", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    # A long path may be folded at the terminal's width: compared without any whitespace.
    assert f"results:{out}" in "".join(result.output.split())
