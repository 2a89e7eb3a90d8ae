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


def test_a_run_held_back_by_other_processes_blames_the_host_not_the_generator(mosquitto: str, tmp_path: Path):
    import os
    import signal
    import subprocess
    import sys

    # Other processes at a higher priority on every core: the generator wakes to send and waits
    # for a core, with CPU of its own to spare. Started by a shell that leaves them, so that they
    # are not this process's children, which the generator's CPU sampling would count.
    spin = f"nice -n -10 {sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"
    burners = [int(subprocess.run(["sh", "-c", spin], capture_output=True, text=True, check=True).stdout) for _ in range(os.cpu_count() or 1)]
    try:
        result = invoke("run", "--broker", mosquitto, "--pubs", "10", "--subs", "1", "--topic", "busy/%i", "--filter", "busy/#",
                        "--rate", "200", "--duration", "2s", "--out", str(tmp_path / "run"))
    finally:
        for pid in burners:
            os.kill(pid, signal.SIGKILL)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    host = json.loads((tmp_path / "run" / "host-load.json").read_text())
    shown = " ".join(result.output.split())
    assert f"host: {host['busy_cores']:.2f} of {host['cores']} cores busy while the run went" in shown, result.output
    if not summary["generator_limited"]:
        pytest.skip("the generator kept its schedule on this host despite the load beside it")
    ours = summary["resources"]["generator"]["mean_cpu_share"]  # a broker given by URL is not sampled
    assert summary["generator"]["max_thread_cpu_share"] < 0.5 and host["busy_cores"] >= 0.9 * host["cores"], (summary["generator"], host)
    assert "HOST CONTENTION" in shown and f"{max(0.0, host['busy_cores'] - ours):.2f} of them by processes other than the generator" in shown, result.output
    assert "GENERATOR-LIMITED" not in shown and "describe mqttlab's limits" not in shown
