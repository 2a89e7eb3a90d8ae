"""Broker back-pressure told apart from a late generator: a broker that stops reading fills the
publishers' sockets, which is the broker's doing (generator.back_pressure_share, the summary's
back-pressure line, capacity's `back_pressure` limit), while a generator that is itself held up
sends late and is flagged generator-limited, with no back-pressure. Both judge timing: serial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mqttlab
from mqttlab.brokers import get_launcher

pytestmark = [pytest.mark.serial,
              pytest.mark.skipif(not get_launcher("mosquitto").find(), reason="mosquitto is not installed (scripts/install-brokers.sh)")]

# 2,000 messages of 16 KB a second: 32 MB/s, which fills loopback's socket buffers in a fraction of
# a second once the broker stops reading. 8 s of load: a pause of the host under 80 ms (1% of the
# sends late) is no evidence against the generator.
HEAVY = {"publishers.count": 1, "subscribers.count": 1, "publishers.qos": 0, "publishers.rate": 2000, "publishers.payload": "16KB",
         "load.duration": "8s", "load.warmup": "0s", "load.grace": "5s"}  # fmt: skip


def test_a_frozen_broker_is_back_pressure_not_a_late_generator(tmp_path: Path) -> None:
    # Publishers only: what the broker held back comes out at once when it thaws, and a subscriber
    # in the engine would then be busy with that flood (which would be the engine's own lateness).
    stall = {"kind": "broker-stall", "at": "1s", "duration": "2s"}
    summary = mqttlab.run(None, broker="mosquitto", set={**HEAVY, "subscribers.count": 0, "faults": [stall]}, out=tmp_path / "stall").summary
    generator = summary["generator"]
    # Frozen 2 s of the publisher's 8: its socket full for most of the stall.
    assert 1.0 <= generator["socket_full_s"] <= 2.5 and generator["back_pressure_share"] >= 0.12
    assert not summary["generator_limited"], summary["generator_limited_reasons"]


def test_a_generator_held_up_is_generator_limited_with_no_back_pressure(tmp_path: Path) -> None:
    # The engine's own process stopped for 0.5 s: the sends due meanwhile leave late, the broker
    # reads all the while.
    out = tmp_path / "held"
    command = [sys.executable, "-m", "mqttlab", "run", "--broker", "mosquitto", "--pubs", "1", "--subs", "1", "--qos", "0",
               "--rate", "2000", "--duration", "4s", "--warmup", "0s", "--out", str(out)]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ})
    try:
        deadline = time.monotonic() + 60
        while not (out / "live.json").exists() and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.05)
        time.sleep(1.5)  # into the load
        os.kill(run.pid, signal.SIGSTOP)
        time.sleep(0.5)
        os.kill(run.pid, signal.SIGCONT)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["generator_limited"], err
    assert summary["generator_limited_reasons"][0].startswith("p99 send lag")
    assert summary["generator"]["back_pressure_share"] < 0.01
