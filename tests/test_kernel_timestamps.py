"""Kernel receive timestamps (the engine's rx_stamp.rs): on plain TCP a reception's time is its
arrival in the host's stack, so the latency leaves out the engine's own wake-up; the figure as
the engine read it is kept beside it (`e2e_client`). TLS decrypts inside its library, which reads
the socket itself: its receptions are stamped when read, and the summary says which ran."""

from __future__ import annotations

from pathlib import Path

import pytest

import mqttlab
from mqttlab.brokers import get_launcher

pytestmark = pytest.mark.skipif(not get_launcher("mosquitto").find(), reason="mosquitto is not installed (scripts/install-brokers.sh)")

ONE_TO_ONE = {"publishers.count": 1, "subscribers.count": 1, "publishers.qos": 1, "publishers.rate": 200, "publishers.messages": 400,
              "load.duration": None, "load.warmup": "0s"}  # fmt: skip


def test_on_plain_tcp_receptions_are_stamped_on_arrival_and_the_read_is_kept_beside(tmp_path: Path) -> None:
    summary = mqttlab.run(None, broker="mosquitto", set=ONE_TO_ONE, out=tmp_path / "run").summary
    assert summary["measurement"]["receive_stamp"] == "kernel"
    latency = summary["latency"]
    arrived, read = latency["e2e_uncorrected"], latency["e2e_client"]
    assert arrived["count"] == read["count"] == 400
    # Every message is read after it arrived: each percentile of the read is at least the arrival's.
    for p in ("p50_us", "p90_us", "p99_us", "max_us"):
        assert read[p] >= arrived[p], (p, arrived, read)


def test_without_kernel_timestamps_or_over_tls_receptions_are_stamped_when_read(tmp_path: Path) -> None:
    summary = mqttlab.run(None, broker="mosquitto", set={**ONE_TO_ONE, "options.kernel_timestamps": False}, out=tmp_path / "off").summary
    assert summary["measurement"]["receive_stamp"] == "client"
    assert summary["latency"]["e2e_client"] is None and summary["latency"]["e2e_uncorrected"]["count"] == 400
    summary = mqttlab.run(None, broker="mosquitto", set={**ONE_TO_ONE, "launch.tls": True}, out=tmp_path / "tls").summary
    assert summary["measurement"]["receive_stamp"] == "client"
    assert summary["latency"]["e2e_client"] is None
