"""Broker back-pressure told apart from a late generator: a broker that stops reading fills the
publishers' sockets, which is the broker's doing (generator.back_pressure_share, the summary's
back-pressure line, the live display's and the metrics' publishers held back, capacity's
`back_pressure` limit), while a generator that is itself held up sends late and is flagged
generator-limited, with no back-pressure. Both judge timing: serial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from mqttlab import session
from mqttlab.brokers import get_launcher
from mqttlab.capacity.knee import limits_at_knee
from mqttlab.cli.app import app
from mqttlab.live.view import snapshot_line
from mqttlab.planning import load_scenario
from test_live_metrics import free_port, scrape  # tests/ is on sys.path (no package)

pytestmark = [pytest.mark.serial,
              pytest.mark.skipif(not get_launcher("mosquitto").find(), reason="mosquitto is not installed (scripts/install-brokers.sh)")]

# 2,000 messages of 16 KB a second: 32 MB/s, which fills loopback's socket buffers in a fraction of
# a second once the broker stops reading. 8 s of load: a pause of the host under 80 ms (1% of the
# sends late) is no evidence against the generator.
HEAVY = {"publishers.count": 1, "subscribers.count": 1, "publishers.qos": 0, "publishers.rate": 2000, "publishers.payload": "16KB",
         "load.duration": "8s", "load.warmup": "0s", "load.grace": "5s"}  # fmt: skip


@dataclass
class Frozen:
    """A run whose broker was frozen 2 s of 8, with what its live state and metrics said meanwhile."""

    directory: Path
    summary: dict
    manifest: dict
    seen: list[tuple[dict, float]]  # each progress snapshot, with the held-back gauge scraped at it
    final: dict  # the metrics scraped once the run had ended


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Frozen:
    # Publishers only: what the broker held back comes out at once when it thaws, and a subscriber
    # in the engine would then be busy with that flood (which would be the engine's own lateness).
    stall = {"kind": "broker-stall", "at": "1s", "duration": "2s"}
    scenario = load_scenario(None, overrides={**HEAVY, "subscribers.count": 0, "faults": [stall], "broker": "mosquitto"})
    directory = tmp_path_factory.mktemp("frozen") / "run"
    port = free_port()
    seen: list[tuple[dict, float]] = []

    def observe(snapshot: dict) -> None:
        # Called after the run's live state took the snapshot in (session._observed): the endpoint serves it.
        seen.append((snapshot, scrape(port).get(("mqttlab_publishers_held_back", ()), -1.0)))

    states: list = []
    with session.metrics_server(f"127.0.0.1:{port}", states, linger=0):
        result = session.execute(scenario, directory, display=lambda header, state: nullcontext(observe), states=states)
        final = scrape(port)
    return Frozen(directory, dict(result.summary), result.manifest, seen, final)


def test_a_frozen_broker_is_back_pressure_not_a_late_generator(frozen: Frozen) -> None:
    generator = frozen.summary["generator"]
    # Frozen 2 s of the publisher's 8: its socket full for most of the stall.
    assert 1.0 <= generator["socket_full_s"] <= 2.5 and generator["back_pressure_share"] >= 0.12
    assert not frozen.summary["generator_limited"], frozen.summary["generator_limited_reasons"]


def test_the_live_state_and_the_metrics_show_the_publisher_held_back_while_the_broker_is_frozen(frozen: Frozen) -> None:
    held = [(snapshot, gauge) for snapshot, gauge in frozen.seen if snapshot["connected"].get("held_back")]
    assert held and all(str(snapshot.get("fault")).startswith("broker-stall") for snapshot, _ in held), [s["connected"] for s, _ in frozen.seen]
    assert all(gauge == snapshot["connected"]["held_back"] == 1 for snapshot, gauge in held)
    assert "broker back-pressure: 1 of 1 publishers' sockets full now" in snapshot_line(held[0][0])
    # Before the freeze the broker read everything: nobody held back, and the display says nothing of it.
    before = [snapshot for snapshot, _ in frozen.seen if snapshot.get("phase") == "measuring" and not snapshot.get("fault")][:1]
    assert before and before[0]["connected"]["held_back"] == 0 and "back-pressure" not in snapshot_line(before[0])
    # Once ended, the run's socket-full time and share, as summary.json has them.
    generator = frozen.summary["generator"]
    assert frozen.final[("mqttlab_broker_back_pressure_seconds", ())] == pytest.approx(generator["socket_full_s"])
    assert frozen.final[("mqttlab_broker_back_pressure_ratio", ())] == pytest.approx(generator["back_pressure_share"])


def test_report_and_capacity_name_it_as_the_brokers(frozen: Frozen) -> None:
    shown = CliRunner().invoke(app, ["report", str(frozen.directory)])
    share = frozen.summary["generator"]["back_pressure_share"]
    assert shown.exit_code == 0 and f"broker back-pressure: the broker left the publishers' bytes unread {share:.0%}" in " ".join(shown.output.split())
    # At a capacity search's knee, a probe like this one is limited by the broker's back-pressure.
    limits = limits_at_knee([], [SimpleNamespace(summary=frozen.summary, manifest=frozen.manifest)])
    assert "back_pressure" in [item["limit"] for item in limits], limits


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
