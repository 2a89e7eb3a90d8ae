"""Helpers shared by test files."""

from __future__ import annotations

import signal
import subprocess
import time
from typing import Callable

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
