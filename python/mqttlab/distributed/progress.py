"""One progress snapshot for the live display out of the latest snapshot of every shard.

Totals and connected counts add. Per-interval counts are the growth of the summed totals since
the last combined snapshot, so shards that report at slightly different moments are neither
counted twice nor missed. A combined snapshot is due once every shard still running has reported
again (a round), or when one stays silent too long. Percentiles cannot be added: the display shows
the slowest shard's."""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

PHASE_ORDER = ("connecting", "warmup", "measuring", "draining", "done")
TOTAL_KEYS = ("sent", "acked", "received", "dropped", "errors")


class ProgressCombiner:
    def __init__(self, shards: int, silence_s: float = 1.5) -> None:
        self.latest: dict[int, Mapping[str, Any]] = {}
        self.running = set(range(shards))
        self.silence_s = silence_s
        self._fresh: set[int] = set()
        self._last_emit = time.monotonic()
        self._last_totals = dict.fromkeys(TOTAL_KEYS, 0)

    def add(self, shard: int, snapshot: Mapping[str, Any]) -> None:
        self.latest[shard] = snapshot
        self._fresh.add(shard)

    def finished(self, shard: int) -> None:
        """The shard will report no more (it returned, or it was lost)."""
        self.running.discard(shard)

    def due(self) -> bool:
        if not self._fresh:
            return False
        return self.running <= self._fresh or time.monotonic() - self._last_emit >= self.silence_s

    def combined(self) -> Optional[dict[str, Any]]:
        if not self.latest:
            return None
        snapshots = list(self.latest.values())
        totals = {key: sum((s.get("total") or {}).get(key, 0) for s in snapshots) for key in TOTAL_KEYS}
        interval: dict[str, Any] = {key: max(0, totals[key] - self._last_totals[key]) for key in ("sent", "acked", "received")}
        for key in ("e2e_p50_us", "e2e_p99_us"):
            values = [(s.get("interval") or {}).get(key) for s in snapshots]
            present = [v for v in values if v is not None]
            interval[key] = max(present) if present else None
        self._last_totals = totals
        self._fresh.clear()
        self._last_emit = time.monotonic()
        phases = [str(s.get("phase", "connecting")) for s in snapshots]
        # The display shows the least advanced phase: the run is as far as its slowest shard.
        phase = min(phases, key=lambda p: PHASE_ORDER.index(p) if p in PHASE_ORDER else 0)
        return {
            "t_s": max(float(s.get("t_s", 0.0)) for s in snapshots),
            "phase": phase,
            "connected": {
                role: sum((s.get("connected") or {}).get(role, 0) for s in snapshots) for role in ("publishers", "subscribers")
            },
            "total": totals,
            "interval": interval,
            "shards_reporting": len(snapshots),
        }
