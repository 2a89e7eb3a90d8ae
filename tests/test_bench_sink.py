"""benchmarks/sink, the minimal MQTT server the saturation benchmarks drive generators into: built
with cargo (seconds), then answered by mqttlab's engine at every QoS, as benchmarks/peers.py uses it."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import mqttlab

SINK = Path(__file__).resolve().parent.parent / "benchmarks" / "sink"


@pytest.fixture(scope="module")
def sink_binary() -> Path:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    build = subprocess.run(["cargo", "build", "--release", "--locked", "--quiet", "--manifest-path", str(SINK / "Cargo.toml")],
                           capture_output=True, text=True, timeout=240)  # fmt: skip
    assert build.returncode == 0, build.stderr
    return SINK / "target" / "release" / "sink"


class Sink:
    def __init__(self, binary: Path, *args: str) -> None:
        self.process = subprocess.Popen([str(binary), *args], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def stop(self) -> dict:
        """SIGTERM, and what the sink says it saw."""
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=10)
        assert self.process.returncode == 0
        return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def start_sink(sink_binary: Path) -> Iterator:
    started: list[Sink] = []

    def start(*args: str) -> Sink:
        started.append(Sink(sink_binary, *args))
        return started[-1]

    yield start
    for sink in started:
        if sink.process.poll() is None:
            sink.process.kill()
            sink.process.wait()


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_the_sink_answers_every_publish_at_each_qos(start_sink, tmp_path, qos):
    sink = start_sink()
    result = mqttlab.run(None, broker=f"mqtt://127.0.0.1:{sink.port}", out=tmp_path / "run",
                         set={"publishers.count": 3, "subscribers.count": 0, "publishers.qos": qos,
                              "publishers.rate": 500, "publishers.messages": 100})  # fmt: skip

    assert result.status == "completed" and not result.summary["errors"]
    messages = result.summary["messages"]
    assert messages["sent"] == 300 and messages["dropped"] == 0
    assert messages["acked"] == (300 if qos else 0)  # every PUBACK, or every PUBREC and PUBCOMP
    seen = sink.stop()
    assert seen["connections"] == 3 and seen["publishes"] == 300 and seen["qos"][qos] == 300


def test_with_fanout_every_subscriber_receives_every_publish(start_sink, tmp_path):
    sink = start_sink("--fanout")
    result = mqttlab.run(None, broker=f"mqtt://127.0.0.1:{sink.port}", out=tmp_path / "run",
                         set={"publishers.count": 2, "subscribers.count": 3, "publishers.topic": "bench/%i",
                              "subscribers.filters": ["bench/#"], "publishers.qos": 1, "publishers.rate": 500,
                              "publishers.messages": 100})  # fmt: skip

    messages = result.summary["messages"]
    assert result.status == "completed" and not result.summary["errors"] and not result.summary["violations"]
    assert messages["acked"] == 200
    assert messages["delivered"] == messages["expected"] == 600 and messages["lost"] == messages["duplicated"] == 0
    assert sink.stop()["forwards"] == 600
