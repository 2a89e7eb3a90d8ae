"""Which worker runs which part of the plan.

The plan is cut into contiguous client index ranges (mqttlab.engine.split_plan), one shard per
worker thread. Worker slots are ordered by host, so neighbouring ranges, which are the likeliest to
publish to each other (`bench/%i` → `bench/%i` keeps every pair inside one range), land on the
same host and share its clock."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

from mqttlab.distributed.clock import WorkerClock
from mqttlab.distributed.pairs import Receivers
from mqttlab.engine import Plan, split_plan

# Connecting is paced by the plan's connect rate; without one, assume a host connects this many
# clients a second (generous: a loopback broker does ~10k/s).
ASSUMED_CONNECTS_PER_S = 2_000
START_MARGIN_FLOOR_S = 2.0


class PlanningError(Exception):
    """The plan cannot be run on this cluster as it is; the message says why and what to change."""


@dataclass(frozen=True)
class WorkerInfo:
    address: str
    host: str
    pid: int
    cores: int
    nthreads: int
    ephemeral_ports: Optional[int] = None
    clock: Optional[WorkerClock] = None


@dataclass(frozen=True)
class Shard:
    index: int
    worker: WorkerInfo
    plan: Plan

    @property
    def publishers(self) -> list[int]:
        return list(self.plan["shard"]["publishers"])

    @property
    def subscribers(self) -> list[int]:
        return list(self.plan["shard"]["subscribers"])

    @property
    def connections(self) -> int:
        (a, b), (c, d) = self.publishers, self.subscribers
        return (b - a) + (d - c)

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "worker": self.worker.address,
            "host": self.worker.host,
            "publishers": self.publishers,
            "subscribers": self.subscribers,
        }


def place_shards(plan: Plan, workers: list[WorkerInfo], shards_per_worker: int = 1) -> list[Shard]:
    if not workers:
        raise PlanningError("the Dask cluster has no workers")
    if shards_per_worker < 1:
        raise PlanningError("shards per worker: must be 1 or more")
    short = [w for w in workers if w.nthreads < shards_per_worker]
    if short:
        # Shards of one worker must run at the same time, or the common start is missed.
        raise PlanningError(
            f"{shards_per_worker} shards per worker need as many worker threads; "
            + ", ".join(f"{w.address} has {w.nthreads}" for w in short)
        )
    slots = [w for w in sorted(workers, key=lambda w: (w.host, w.address)) for _ in range(shards_per_worker)]
    pieces = split_plan(plan, len(slots))
    shards_on_host = Counter(w.host for w in slots)
    shards = []
    for index, (worker, piece) in enumerate(zip(slots, pieces)):
        if plan["options"].get("threads", 0) == 0:
            # Engines side by side on one host would each start a thread per core.
            piece["options"]["threads"] = max(1, worker.cores // shards_on_host[worker.host])
        shards.append(Shard(index=index, worker=worker, plan=piece))
    return shards


def check_source_ports(shards: list[Shard]) -> None:
    """Refuses a placement that would exhaust a host's source ports towards the one broker
    address: the kernel gives each (source address, destination) pair only the ephemeral range."""
    per_host = Counter()
    ports: dict[str, int] = {}
    for shard in shards:
        per_host[shard.worker.host] += shard.connections
        if shard.worker.ephemeral_ports:
            ports[shard.worker.host] = shard.worker.ephemeral_ports
    crowded = [(host, n, ports[host]) for host, n in per_host.items() if host in ports and n > ports[host]]
    if crowded:
        raise PlanningError(
            "; ".join(f"host {h} would open {n} connections to the broker but has {p} source ports" for h, n, p in crowded)
            + ": add workers on other hosts (several source addresses per host need an engine option not yet there)"
        )


def source_addresses_needed(connections: int, ephemeral_ports: int) -> int:
    """How many local source addresses a host needs for `connections` to one broker address."""
    return max(1, math.ceil(connections / max(1, ephemeral_ports)))


def start_margin_s(shards: list[Shard], connect_rate: float) -> float:
    """Time to allow between handing out the shards and their common start: the slowest
    shard's connecting plus a floor for the hand-out itself and clock error."""
    rate = connect_rate if connect_rate > 0 else ASSUMED_CONNECTS_PER_S
    busiest = max((s.connections for s in shards), default=0)
    bound_s = max((s.worker.clock.wall.bound_ns / 1e9 for s in shards if s.worker.clock), default=0.0)
    return START_MARGIN_FLOOR_S + busiest / rate + 2 * bound_s


def check_broker_reachable_from(plan: Plan, workers: list[WorkerInfo], client_host: str) -> None:
    """A loopback broker address means this machine's broker only to workers on this machine."""
    host = str(plan["broker"]["host"])
    if host in ("localhost", "::1") or host.startswith("127."):
        elsewhere = sorted({w.host for w in workers if w.host != client_host})
        if elsewhere:
            raise PlanningError(
                f"the broker address {host} is loopback, but workers run on {', '.join(elsewhere)}: "
                "give the broker's address as those hosts reach it (--broker mqtt://HOST:PORT)"
            )


def clock_basis(shards: list[Shard], owed: Optional[Receivers]) -> dict[str, Any]:
    """Whether end-to-end latencies compare clocks of one host ("shared") or of several, with
    how many measured (publisher, receiver) pairs span hosts."""
    hosts = {s.worker.host for s in shards}
    if len(hosts) == 1:
        return {"basis": "shared", "hosts": sorted(hosts), "pairs": None, "cross_host_pairs": 0,
                "note": "every shard ran on one host: publishers and subscribers share its monotonic clock"}  # fmt: skip
    if owed is None:
        return {"basis": "unknown", "hosts": sorted(hosts), "pairs": None, "cross_host_pairs": None,
                "note": "too many wildcard filters to tell which pairs span hosts"}  # fmt: skip
    host_of_pub = _host_lookup(shards, "publishers")
    host_of_sub = _host_lookup(shards, "subscribers")
    pairs = crossing = 0
    for p, units in enumerate(owed.owed):
        for unit in units:
            pairs += 1
            # A shared group delivers each message to one member: it may cross if any member is elsewhere.
            if any(host_of_sub(s) != host_of_pub(p) for s in owed.members.get(unit, ())):
                crossing += 1
    if crossing == 0:
        return {"basis": "shared", "hosts": sorted(hosts), "pairs": pairs, "cross_host_pairs": 0,
                "note": "every measured pair has its publisher and subscriber on one host"}  # fmt: skip
    return {"basis": "across_hosts", "hosts": sorted(hosts), "pairs": pairs, "cross_host_pairs": crossing,
            "note": f"{crossing} of {pairs} measured pairs have publisher and subscriber on different hosts, "
                    "whose monotonic clocks are unrelated: end-to-end latencies are not reported"}  # fmt: skip


def _host_lookup(shards: list[Shard], role: str) -> Any:
    ranges = sorted((s.plan["shard"][role][0], s.plan["shard"][role][1], s.worker.host) for s in shards)
    starts = [low for low, _, _ in ranges]

    def host_of(index: int) -> str:
        low, high, host = ranges[bisect.bisect_right(starts, index) - 1]
        return host if low <= index < high else "?"

    return host_of
