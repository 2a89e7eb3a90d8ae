"""The live progress line says what the run is doing (issue 39, 5): once the load is over and
only deliveries are awaited it says so and counts the wait down, never "100% done, 4s left".
A real run of Mosquitto behind an emulated link whose 1.5 s delay holds the deliveries back."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mqttlab.netem import capability

_missing = capability.detect().missing()


@pytest.mark.skipif(_missing is not None, reason=_missing or "")
def test_the_wait_for_deliveries_after_the_load_is_said_as_such(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "mqttlab", "run", "--broker", "mosquitto", "--pubs", "1", "--subs", "1", "--rate", "20", "--duration", "1s",
         "--set", "network.down.delay=1500ms", "--set", "load.grace=4s", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    draining = [line for line in done.stderr.splitlines() if re.match(r"\[\s*[\d.]+s\] draining", line)]
    assert draining, done.stderr  # the delay keeps the deliveries in flight for over a second after the load
    assert all("load done, waiting at most" in line and "% done" not in line for line in draining), draining
    waits = [int(re.search(r"waiting at most (\d+)s", line).group(1)) for line in draining]
    assert waits == sorted(waits, reverse=True) and waits[0] <= 4
