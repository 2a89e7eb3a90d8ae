"""Clock offsets between the client and each worker, estimated the way NTP does.

The client reads its clock (t0), asks the worker for its clock (w), reads again (t2). If the
worker's reading happened anywhere between t0 and t2, its offset to the client lies within
w - t0 - rtt .. w - t0, so w - (t0 + t2) / 2 is off by at most rtt / 2. Of several rounds the one
with the shortest round trip gives the tightest bound."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Sample:
    """One round trip: client clock before and after, worker clock in between (all ns)."""

    before_ns: int
    worker_ns: int
    after_ns: int

    @property
    def rtt_ns(self) -> int:
        return self.after_ns - self.before_ns

    @property
    def offset_ns(self) -> int:
        """Worker clock minus client clock."""
        return self.worker_ns - (self.before_ns + self.after_ns) // 2


@dataclass(frozen=True)
class Offset:
    """Worker clock minus client clock, within ± bound_ns."""

    offset_ns: int
    bound_ns: int

    def as_dict(self) -> dict[str, float]:
        return {"offset_ms": self.offset_ns / 1e6, "bound_ms": self.bound_ns / 1e6}


def best_estimate(samples: list[Sample]) -> Offset:
    if not samples:
        raise ValueError("no clock samples")
    best = min(samples, key=lambda s: s.rtt_ns)
    return Offset(offset_ns=best.offset_ns, bound_ns=(best.rtt_ns + 1) // 2)


@dataclass(frozen=True)
class WorkerClock:
    wall: Offset  # time.time_ns(): what start_at_unix_ns is read against
    monotonic: Offset  # CLOCK_MONOTONIC: what the engine's latencies are taken on

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {"wall": self.wall.as_dict(), "monotonic": self.monotonic.as_dict()}


def measure(read_worker: Callable[[], tuple[int, int]], rounds: int = 8) -> WorkerClock:
    """Offsets of a worker's wall and monotonic clocks; `read_worker` returns both, read on the
    worker. Both come from the same round trips, so they share the bound."""
    wall, mono = [], []
    for _ in range(rounds):
        before_wall, before_mono = time.time_ns(), time.monotonic_ns()
        worker_wall, worker_mono = read_worker()
        after_mono, after_wall = time.monotonic_ns(), time.time_ns()
        wall.append(Sample(before_wall, worker_wall, after_wall))
        mono.append(Sample(before_mono, worker_mono, after_mono))
    return WorkerClock(wall=best_estimate(wall), monotonic=best_estimate(mono))
