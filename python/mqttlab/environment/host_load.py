"""The whole host's CPU use while a run or a capacity probe went (every process: ours, the
broker's, others'), kept beside its results as host-load.json.

On a shared machine a figure is only as good as the quiet it was measured in. A generator that
fell behind its schedule while it used little CPU, on a host whose cores were all busy and not
with the generator and the broker alone, was kept waiting by others' load: that is host
contention, not the generator's limit (a broker and a generator that fill the host between them
are the generator's limit on this host). The engine's generator-limited flag stays as the engine
set it; this reading says which of the two it was."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Mapping

HOST_LOAD = "host-load.json"
# The host's cores this busy (a share of them all) leave a thread that wakes to send waiting for one.
BUSY_SHARE = 0.9
# A generator thread under this share of a core had CPU to spare: its lateness was not its own work.
SPARE_THREAD_SHARE = 0.5
# Cores taken by processes other than the generator and the broker it measured: beyond this, the
# host was busy with something else (below it, broker and generator shared the host between them).
OTHERS_CORES = 0.5


def cpu_times() -> tuple[float, float, float]:
    """(busy, total) jiffies of all CPUs, and the wall clock."""
    fields = [int(value) for value in open("/proc/stat", encoding="ascii").readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return float(sum(fields) - idle), float(sum(fields)), time.monotonic()


def host_load(before: tuple[float, float, float], after: tuple[float, float, float]) -> dict[str, Any]:
    """The host's CPU use between two `cpu_times()`, in cores, and the load average at its end."""
    busy, total = after[0] - before[0], after[1] - before[1]
    cores = os.cpu_count() or 1
    return {
        "cores": cores,
        "busy_cores": round(busy / total * cores, 3) if total > 0 else None,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "seconds": round(after[2] - before[2], 2),
    }


def write(directory: Path, load: Mapping[str, Any]) -> None:
    (directory / HOST_LOAD).write_text(json.dumps(load, indent=2) + "\n", encoding="utf-8")


def read(directory: Path) -> dict[str, Any]:
    """The host load kept beside a run's results; empty when it has none (older runs, suites)."""
    try:
        return dict(json.loads((directory / HOST_LOAD).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def others_cores(summary: Mapping[str, Any], load: Mapping[str, Any]) -> float | None:
    """Cores the host spent on processes other than the generator and the broker (as far as the
    broker was sampled): the host's busy cores less the run's own."""
    if load.get("busy_cores") is None:
        return None
    resources = summary.get("resources") or {}
    ours = sum((resources.get(role) or {}).get("mean_cpu_share") or 0.0 for role in ("generator", "broker"))
    return max(0.0, float(load["busy_cores"]) - ours)


def contention(summary: Mapping[str, Any], load: Mapping[str, Any]) -> bool:
    """Whether a run flagged generator-limited was held back by the host's other load: its busiest
    generator thread had CPU to spare while the host's cores were (nearly) all busy, and not with
    the generator and the broker alone."""
    others, cores = others_cores(summary, load), load.get("cores")
    thread = (summary.get("generator") or {}).get("max_thread_cpu_share")
    if not summary.get("generator_limited") or others is None or not cores or thread is None:
        return False
    return bool(thread < SPARE_THREAD_SHARE and load["busy_cores"] >= BUSY_SHARE * cores and others >= OTHERS_CORES)


def busy_cores(load: Mapping[str, Any]) -> str:
    """`1.95 of 2 cores busy`, as a run's summary and each capacity probe print it."""
    return f"{load['busy_cores']:.2f} of {load.get('cores')} cores busy"
