"""The slow medium of benchmarks/slow_medium.py (seed 002's crash, docs/state.md): an ext4
filesystem on a loop device whose writes a cgroup v1 blkio rule throttles. It is made and removed
whole (also when the host refuses a step half way), the throttle holds back a synchronous write
of the cgroup's processes (and only theirs), and Mosquitto launched in the cgroup keeps its
persistence database on the medium, written through the throttle."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
RATE = 2 * MIB  # the test's throttle, bytes/s
WRITE = 4 * MIB  # a write that takes 2 s through it

pytestmark = pytest.mark.serial  # judges timing


def _bench():
    spec = importlib.util.spec_from_file_location("slow_medium", ROOT / "benchmarks" / "slow_medium.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["slow_medium"] = module
    spec.loader.exec_module(module)
    return module


bench = _bench()


def _attached() -> str:
    return subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"], capture_output=True, text=True).stdout


def _gone(medium) -> None:
    """Nothing of the medium is left on the host."""
    assert medium.scratch is not None and not medium.scratch.exists()
    assert str(medium.scratch) not in _attached()
    assert str(medium.scratch) not in Path("/proc/mounts").read_text()
    assert medium.cgroup is None or not medium.cgroup.exists()


@pytest.fixture
def medium():
    if os.geteuid() != 0:
        pytest.skip("a loop device, a mount and a blkio cgroup need root")
    made = bench.SlowMedium(size_mb=64, write_bps=RATE)
    try:
        made.__enter__()
    except bench.MediumRefused as refused:
        pytest.skip(f"the host refused the slow medium: {refused}")
    try:
        yield made
    finally:
        made.__exit__(None, None, None)
    _gone(made)


def _timed_write(command_prefix: list[str], path: Path) -> float:
    """Seconds a child takes to write WRITE bytes to `path` and fsync them (as Mosquitto saves)."""
    code = ("import os, sys, time; t = time.monotonic(); f = open(sys.argv[1], 'wb'); f.write(b'x' * int(sys.argv[2])); "
            "f.flush(); os.fsync(f.fileno()); f.close(); print(time.monotonic() - t)")
    done = subprocess.run([*command_prefix, sys.executable, "-c", code, str(path), str(WRITE)],
                          capture_output=True, text=True, timeout=60, check=True)
    return float(done.stdout)


def test_a_synchronous_write_through_the_medium_takes_at_least_the_throttled_time(medium):
    before = medium.written_bytes()
    throttled = _timed_write(medium.wrap([]), medium.mount / "inside")
    outside = _timed_write([], medium.mount / "outside")
    print(f"{WRITE / MIB:g} MiB + fsync: {throttled:.2f} s in the cgroup ({RATE / MIB:g} MiB/s), {outside:.2f} s outside it")
    assert throttled >= 0.9 * WRITE / RATE
    assert outside < 0.5 * WRITE / RATE  # the rule is the cgroup's: the same write from outside is not held
    assert medium.written_bytes() - before >= WRITE


def test_mosquitto_keeps_its_persistence_database_on_the_medium(medium, tmp_path):
    from mqttlab.brokers import get_launcher
    from mqttlab.brokers.base import Placement

    launcher = get_launcher("mosquitto")
    if not launcher.find():
        pytest.skip(f"mosquitto is not installed: {launcher.how_to_get}")
    data = medium.mount / "db"
    data.mkdir()
    config = tmp_path / "slow.conf"
    config.write_text(bench.broker_config(data, autosave_s=1))
    launcher.configure(str(config))
    launcher.placement = Placement(command_prefix=tuple(medium.wrap([])))
    before = medium.written_bytes()
    with launcher.start(tmp_path / "broker") as broker:
        assert str(broker.pid) in (medium.cgroup / "cgroup.procs").read_text().split()
        deadline = time.monotonic() + 10
        while not (data / "mosquitto.db").is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (data / "mosquitto.db").is_file()  # an autosave, while it runs
    assert broker.log_file is not None
    assert f"Saving in-memory database to {data}/" in broker.log_file.read_text()
    assert medium.written_bytes() > before  # its saves went through the throttle


def test_a_refused_setup_leaves_nothing_behind():
    if os.geteuid() != 0:
        pytest.skip("a loop device, a mount and a blkio cgroup need root")
    empty = bench.SlowMedium(size_mb=0)  # mkfs refuses a device of size zero, after losetup attached it
    with pytest.raises(bench.MediumRefused, match="mkfs.ext4"):
        empty.__enter__()
    _gone(empty)
