"""Kernel timestamps (the engine's rx_stamp.rs and send_stamp.rs): on plain TCP a reception's time
is its arrival in the host's stack and, with direct writes, a send's is its PUBLISH leaving the
stack, so the uncorrected latency leaves out the engine's own wake-up and write; the figure as the
engine saw it is kept beside it (`e2e_client`). TLS reads and writes through its library, io_uring
submits writes later: there the engine's stamps run, and the summary says which ran."""

from __future__ import annotations

from pathlib import Path

import pytest

import mqttlab
from mqttlab.brokers import get_launcher

pytestmark = pytest.mark.skipif(not get_launcher("mosquitto").find(), reason="mosquitto is not installed (scripts/install-brokers.sh)")

ONE_TO_ONE = {"publishers.count": 1, "subscribers.count": 1, "publishers.qos": 1, "publishers.rate": 200, "publishers.messages": 400,
              "load.duration": None, "load.warmup": "0s"}  # fmt: skip


def test_on_plain_tcp_sends_and_receptions_are_stamped_by_the_kernel_and_the_read_is_kept_beside(tmp_path: Path) -> None:
    summary = mqttlab.run(None, broker="mosquitto", set=ONE_TO_ONE, out=tmp_path / "run").summary
    assert (summary["measurement"]["receive_stamp"], summary["measurement"]["send_stamp"]) == ("kernel", "kernel")
    # Each delivery timed from the kernel's send stamp, or from the engine's when the kernel's was
    # not read yet (a publisher's thread preempted right after its write): most from the kernel's.
    stamps = summary["measurement"]["send_stamps"]
    assert stamps["kernel"] + stamps["client"] == 400 and stamps["kernel"] >= 300, stamps
    latency = summary["latency"]
    arrived, read = latency["e2e_uncorrected"], latency["e2e_client"]
    assert arrived["count"] == read["count"] == 400
    # Every message is read after it arrived: each percentile of the read is at least the arrival's.
    for p in ("p50_us", "p90_us", "p99_us", "max_us"):
        assert read[p] >= arrived[p], (p, arrived, read)


def test_without_kernel_timestamps_or_over_tls_sends_and_receptions_are_stamped_by_the_engine(tmp_path: Path) -> None:
    summary = mqttlab.run(None, broker="mosquitto", set={**ONE_TO_ONE, "options.kernel_timestamps": False}, out=tmp_path / "off").summary
    assert (summary["measurement"]["receive_stamp"], summary["measurement"]["send_stamp"]) == ("client", "client")
    assert "send_stamps" not in summary["measurement"]
    assert summary["latency"]["e2e_client"] is None and summary["latency"]["e2e_uncorrected"]["count"] == 400
    summary = mqttlab.run(None, broker="mosquitto", set={**ONE_TO_ONE, "launch.tls": True}, out=tmp_path / "tls").summary
    assert (summary["measurement"]["receive_stamp"], summary["measurement"]["send_stamp"]) == ("client", "client")
    assert summary["latency"]["e2e_client"] is None


def test_batched_sends_are_stamped_by_the_engine_and_receptions_by_the_kernel(tmp_path: Path) -> None:
    summary = mqttlab.run(None, broker="mosquitto", set={**ONE_TO_ONE, "options.submission": "batched"}, out=tmp_path / "batched").summary
    assert (summary["measurement"]["receive_stamp"], summary["measurement"]["send_stamp"]) == ("kernel", "client")
    assert summary["latency"]["e2e_uncorrected"]["count"] == 400


def test_above_the_offered_load_rule_sends_are_stamped_by_the_engine_unless_asked(tmp_path: Path) -> None:
    # 6,000 msg/s offered in all, above the 5,000 up to which the kernel stamps sends by default
    # (each stamp costs the publisher CPU): the engine's stamps, and the summary says why.
    busy = {"publishers.count": 6, "subscribers.count": 6, "publishers.rate": 1000, "publishers.messages": 300,
            "load.duration": None, "load.warmup": "0s"}  # fmt: skip
    measurement = mqttlab.run(None, broker="mosquitto", set=busy, out=tmp_path / "busy").summary["measurement"]
    assert (measurement["send_stamp"], measurement["receive_stamp"]) == ("client", "kernel")
    assert "5,000 msg/s" in measurement["send_stamp_why"] and "send_stamps" not in measurement
    asked = mqttlab.run(None, broker="mosquitto", set={**busy, "options.kernel_send_timestamps": True}, out=tmp_path / "asked").summary
    assert asked["measurement"]["send_stamp"] == "kernel"
    stamps = asked["measurement"]["send_stamps"]
    assert stamps["kernel"] + stamps["client"] == asked["latency"]["e2e_uncorrected"]["count"] == 1800
