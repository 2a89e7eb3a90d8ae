"""`mqttlab run` end to end: the real engine against real brokers on loopback, as a user runs it
(`python -m mqttlab` in a child process), then the results directory it leaves behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

pytest.importorskip("mqttlab._engine", reason="the compiled engine is not built yet")

from mqttlab.engine import load_engine  # noqa: E402
from mqttlab.results import load_results  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SHORT = ["--duration", "2s", "--warmup", "500ms", "--set", "load.grace=1s"]


def mqttlab(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mqttlab", *args], capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_a_short_run_on_the_embedded_broker_delivers_everything_and_records_it(tmp_path: Path):
    out = tmp_path / "run"
    completed = mqttlab("run", "--pubs", "2", "--subs", "2", "--rate", "50", *SHORT, "--out", str(out), "--json")
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    assert summary["status"] == "completed"
    messages = summary["messages"]
    assert messages["sent"] > 0
    assert messages["lost"] == 0 and messages["duplicated"] == 0
    assert messages["delivered"] == messages["expected"]
    assert summary["latency"]["e2e"]["count"] > 0
    assert summary["latency"]["puback"]["count"] > 0

    loaded = load_results(out)
    # --json adds whose run it was (the scenario's name, the broker) and the host's load while it
    # went to summary.json's figures.
    assert {key: value for key, value in summary.items() if key not in ("scenario", "broker", "host_load")} == loaded.summary
    assert summary["host_load"]["cores"] >= 1
    assert summary["broker"]["name"] == loaded.manifest["broker"]["name"]
    assert loaded.manifest["status"] == "completed"
    assert loaded.manifest["broker"]["name"] and loaded.manifest["broker"]["pid"]
    assert loaded.manifest["engine_version"]
    # Which engine measured it: the commit the compiled module was built from (build.rs).
    commit = loaded.manifest["engine_commit"]
    assert commit == load_engine().__commit__ and re.fullmatch(r"([0-9a-f]{40}(\+modified)?|unknown)", commit), commit
    assert loaded.manifest["broker"]["build"] == {"source": "crates.io rumqttd, compiled into mqttlab's engine"}
    assert loaded.plan["publishers"]["count"] == 2
    # The histogram files are standard HdrHistogram V2: another implementation reads them.
    e2e = HdrHistogram.decode((out / "histograms" / "e2e.hdr").read_text().strip())
    assert e2e.get_total_count() == summary["latency"]["e2e"]["count"]
    assert any(row["t_s"] == 0 for row in loaded.series)


def test_report_prints_the_stored_summary_again(tmp_path: Path):
    out = tmp_path / "run"
    run = mqttlab("run", "--pubs", "1", "--subs", "1", "--rate", "20", *SHORT, "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    report = mqttlab("report", str(out), "--json")
    assert report.returncode == 0
    assert json.loads(report.stdout) == json.loads(run.stdout)
    tables = mqttlab("report", str(out))
    assert "Latency (ms)" in tables.stdout and "completed" in tables.stdout


def test_publishers_only_measures_the_write_path(tmp_path: Path):
    completed = mqttlab("run", str(ROOT / "scenarios" / "publishers-only.yaml"), "--rate", "20", *SHORT, "--out", str(tmp_path / "r"), "--json")
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    assert summary["messages"]["received"] == 0
    assert summary["latency"]["puback"]["count"] > 0


def test_mqtt5_reaches_the_brokers_mqtt5_listener(tmp_path: Path):
    completed = mqttlab("run", "--pubs", "1", "--subs", "1", "--rate", "20", "--mqtt-version", "5", *SHORT, "--out", str(tmp_path / "r"), "--json")
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["messages"]["delivered"] > 0


def test_an_unreachable_broker_is_one_line_and_exit_code_3(tmp_path: Path):
    completed = mqttlab("run", "--broker", "mqtt://127.0.0.1:1", *SHORT, "--out", str(tmp_path / "r"))
    assert completed.returncode == 3, completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: cannot connect to mqtt://127.0.0.1:1: ")
    assert "refused" in lines[0].lower()


@pytest.mark.skipif(shutil.which("mosquitto") is None and not Path("/usr/sbin/mosquitto").exists(), reason="mosquitto is not installed")
def test_qos2_against_mosquitto_by_name(tmp_path: Path):
    completed = mqttlab("run", "--broker", "mosquitto", "--qos", "2", "--pubs", "2", "--subs", "2", "--rate", "20", *SHORT, "--out", str(tmp_path / "r"), "--json")
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    assert summary["latency"]["pubcomp"]["count"] > 0
    assert summary["messages"]["duplicated"] == 0
    assert load_results(tmp_path / "r").manifest["broker"]["name"] == "mosquitto"


def test_ctrl_c_writes_partial_results_marked_interrupted(tmp_path: Path, start_until_load):
    out = tmp_path / "run"
    child = start_until_load(
        [sys.executable, "-m", "mqttlab", "run", "--pubs", "1", "--subs", "1", "--rate", "20", "--duration", "60s", "--warmup", "0s", "--out", str(out)],
        env=_env(),
        cwd=ROOT,
    )
    try:
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert child.returncode == 130, stderr
    loaded = load_results(out)
    assert loaded.manifest["status"] == "interrupted"
    assert loaded.summary["status"] == "interrupted"
    assert loaded.summary["messages"]["sent"] > 0


def test_tls_run_verifies_the_broker_with_the_given_ca(tmp_path: Path):
    from mqttlab.brokers import get_launcher

    with get_launcher("rumqttd").start(tmp_path / "broker", tls=True) as broker:
        completed = mqttlab(
            "run", "--broker", broker.url(tls=True), "--ca", str(broker.ca_file),
            "--pubs", "1", "--subs", "1", "--rate", "20", *SHORT, "--out", str(tmp_path / "r"), "--json",
        )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    assert summary["latency"]["tls"]["count"] == 2  # one handshake per client
    assert load_results(tmp_path / "r").plan["broker"]["tls"]["ca_file"] == str(broker.ca_file)
