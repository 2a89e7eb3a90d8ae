"""The host's CPU load while an SMC step talks to a real broker.

The paper ran clients and broker on one machine and checked that the CPU was no bottleneck: "below
60 % most of the time", with rare peaks above 90 %. We measure the same thing: the share of all the
host's CPUs that was busy (everyone's processes, not only ours, because a busy neighbour slows the
broker just as much), read from the kernel's CPU time counters every `interval` seconds.

A summary keeps busy and total CPU seconds, not only the ratio, so that the summaries of several
runs of one step (explore rounds, one verify run per client count) add up exactly.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass

import psutil

LIMIT = 0.60  # the paper's bound: "the CPU load was below 60 % most of the time"
INTERVAL_S = 0.5


def _idle_and_total() -> tuple[float, float]:
    times = psutil.cpu_times()
    total = sum(times)
    # iowait is waiting, not working; guest time is already counted in user on Linux.
    idle = times.idle + getattr(times, "iowait", 0.0)
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return idle, total


@dataclass(frozen=True)
class HostLoad:
    """CPU load of the host over one step; shares are of all CPUs (1.0 = every CPU busy)."""

    cpus: int
    duration_s: float
    intervals: int
    busy_cpu_s: float
    total_cpu_s: float
    max_share: float
    intervals_above_limit: int
    limit: float = LIMIT

    @property
    def mean_share(self) -> float:
        return self.busy_cpu_s / self.total_cpu_s if self.total_cpu_s > 0 else 0.0

    @property
    def above_limit(self) -> bool:
        """The paper's condition broken: the host was busier than the limit on average."""
        return self.mean_share > self.limit

    def __add__(self, other: HostLoad) -> HostLoad:
        return HostLoad(
            cpus=max(self.cpus, other.cpus),
            duration_s=self.duration_s + other.duration_s,
            intervals=self.intervals + other.intervals,
            busy_cpu_s=self.busy_cpu_s + other.busy_cpu_s,
            total_cpu_s=self.total_cpu_s + other.total_cpu_s,
            max_share=max(self.max_share, other.max_share),
            intervals_above_limit=self.intervals_above_limit + other.intervals_above_limit,
            limit=self.limit,
        )

    def to_dict(self) -> dict[str, float | int | bool]:
        return {
            **asdict(self),
            "mean_share": self.mean_share,
            "share_of_time_above_limit": self.intervals_above_limit / self.intervals if self.intervals else 0.0,
            "above_limit": self.above_limit,
        }

    def describe(self) -> str:
        text = (f"host CPU {self.mean_share:.0%} mean, {self.max_share:.0%} max of {self.cpus} CPUs "
                f"over {self.duration_s:.1f} s")
        if self.above_limit:
            text += f" — above the paper's {self.limit:.0%}: the generator or a neighbour may have slowed the broker"
        return text


NO_LOAD = HostLoad(cpus=psutil.cpu_count() or 1, duration_s=0.0, intervals=0, busy_cpu_s=0.0, total_cpu_s=0.0,
                   max_share=0.0, intervals_above_limit=0)


class HostLoadSampler:
    """Samples the host's CPU counters in a thread between `start()` and `stop()`."""

    def __init__(self, interval: float = INTERVAL_S, limit: float = LIMIT) -> None:
        self.interval = interval
        self.limit = limit
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shares: list[float] = []
        self._last = (0.0, 0.0)
        self._busy_s = self._total_s = 0.0
        self._started = 0.0
        self.result: HostLoad | None = None

    def _read(self) -> None:
        idle, total = _idle_and_total()
        last_idle, last_total = self._last
        self._last = (idle, total)
        elapsed = total - last_total
        if elapsed <= 0:
            return
        # Each interval's busy time is what was not idle, from deltas taken once: the counters are
        # large, and busy and total differenced apart can round a fully busy interval to a share
        # above 1. Linux's iowait may step backwards, so an interval's idle time is never negative.
        busy = elapsed - min(max(idle - last_idle, 0.0), elapsed)
        self._shares.append(busy / elapsed)
        self._busy_s += busy
        self._total_s += elapsed

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._read()

    def start(self) -> HostLoadSampler:
        self._started = time.monotonic()
        self._last = _idle_and_total()
        self._thread = threading.Thread(target=self._run, name="mqttlab-host-load", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> HostLoad:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._read()  # the last partial interval counts too
        self.result = HostLoad(
            cpus=psutil.cpu_count() or 1,
            duration_s=time.monotonic() - self._started,
            intervals=len(self._shares),
            busy_cpu_s=self._busy_s,
            total_cpu_s=self._total_s,
            max_share=max(self._shares, default=0.0),
            intervals_above_limit=sum(share > self.limit for share in self._shares),
            limit=self.limit,
        )
        return self.result

    def __enter__(self) -> HostLoadSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
