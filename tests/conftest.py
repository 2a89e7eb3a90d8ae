"""Helpers shared by test files."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable

import pytest

# A test command started in the background (`make test &`, a CI step run that way) inherits SIGINT
# ignored, and exec passes "ignored" on to every process the tests start, so the Ctrl-C tests
# would time out. A handler in this process is reset to the default in its children instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _start_until_load(command: list[str], **popen) -> subprocess.Popen:
    """Starts `mqttlab run` and returns once two progress lines show the load on (off a terminal
    the progress is one line per second)."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    assert child.stderr is not None
    deadline = time.monotonic() + 90
    measuring = 0
    while measuring < 2 and time.monotonic() < deadline:
        line = child.stderr.readline()
        if not line:
            break
        measuring += "measuring" in line
    if measuring < 2:
        child.kill()
        child.wait(timeout=10)
        pytest.fail("the load never started")
    return child


@pytest.fixture
def start_until_load() -> Callable[..., subprocess.Popen]:
    return _start_until_load


def run_losing_a_worker(client: Any, scheduler: str, broker_url: str, victim_pid: int, out: Any) -> Any:
    """`mqttlab run --dask` of two shards (4 → 4 clients point to point, QoS 1, 50 msg/s, 4 s)
    whose worker `victim_pid` is SIGKILLed about a second into the load; the CliRunner result."""
    from typer.testing import CliRunner

    from mqttlab.cli.app import app

    called_off = threading.Event()

    def kill_mid_run() -> None:
        # Both shards run once both workers process a task; then the start margin (2 s at least)
        # passes, and the kill lands about a second into the load.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not called_off.is_set():
            if sum(len(keys) for keys in client.processing().values()) == 2:
                time.sleep(3.0)
                if not called_off.is_set():
                    os.kill(victim_pid, signal.SIGKILL)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_mid_run, daemon=True)
    killer.start()
    try:
        return CliRunner().invoke(app, [
            "run", "--dask", scheduler, "--broker", broker_url,
            "-P", "4", "-S", "4", "-t", "kill/%i", "-f", "kill/%i", "-q", "1", "-r", "50",
            "-d", "4s", "--warmup", "0s", "-o", str(out),
        ])  # fmt: skip
    finally:
        called_off.set()
        killer.join(10)


def skip_unless_capture_on_lo() -> None:
    """Skips, saying why, unless a run of mosquitto on loopback can be captured here: tshark,
    root (CAP_NET_RAW) and mosquitto installed."""
    from mqttlab.brokers import get_launcher
    from mqttlab.netem.capture import tshark_path

    if tshark_path() is None:
        pytest.skip("tshark is not installed (scripts/install-test-tools.sh)")
    if os.geteuid() != 0:
        pytest.skip("capturing on lo needs root (CAP_NET_RAW)")
    if not get_launcher("mosquitto").find():
        pytest.skip("mosquitto is not installed")
