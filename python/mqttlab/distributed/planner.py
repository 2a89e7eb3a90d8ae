"""Which worker runs which part of the plan.

The plan is cut into contiguous client index ranges (mqttlab.engine.split_plan), one shard per
worker thread. Worker slots are ordered by clock (host, then measured monotonic offset), so
neighbouring ranges, which are the likeliest to publish to each other (`bench/%i` → `bench/%i`
keeps every pair inside one range), land on the same host and share its clock."""

from __future__ import annotations

import bisect
import ipaddress
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Optional

from mqttlab.distributed.clock import WorkerClock
from mqttlab.routing import Receivers
from mqttlab.engine import Plan, split_plan
from mqttlab.plan_types import Role
from mqttlab.source_ports import addresses_needed, is_loopback, loopback_addresses

# Connecting is paced by the plan's connect rate; without one, assume a host connects this many
# clients a second (generous: a loopback broker does ~10k/s).
ASSUMED_CONNECTS_PER_S = 2_000
# The hand-out itself (Dask sends each worker its shard) took over 2 s on a busy 2-core host.
START_MARGIN_FLOOR_S = 3.0
# Two workers reading one clock give offsets that differ by at most the sum of their bounds; this
# much more covers the instant between reading the wall clock and the monotonic one.
CLOCK_SLACK_NS = 100_000


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
    clock_domain: str = ""  # workers sharing CLOCK_MONOTONIC have the same (assign_clock_domains)

    @property
    def clock_key(self) -> str:
        return self.clock_domain or self.host


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
            "clock_domain": self.worker.clock_key,
            "publishers": self.publishers,
            "subscribers": self.subscribers,
            "source_addresses": list(self.plan["shard"].get("source_addresses") or []),
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
    slots = [w for w in sorted(workers, key=lambda w: (w.clock_key, w.address)) for _ in range(shards_per_worker)]
    pieces = split_plan(plan, len(slots))
    shards_on_host = Counter(w.host for w in slots)
    shards = []
    for index, (worker, piece) in enumerate(zip(slots, pieces)):
        if plan["options"].get("threads", 0) == 0:
            # Engines side by side on one host would each size themselves up to a thread per
            # core; they share the host's cores instead (each still takes fewer if its load is light).
            piece["options"]["max_threads"] = max(1, worker.cores // shards_on_host[worker.host])
        shards.append(Shard(index=index, worker=worker, plan=piece))
    return shards


def parse_source_addresses(texts: list[str]) -> dict[str, list[str]]:
    """`HOST=ADDR,ADDR,...` (one per host, as the workers name their host) into a mapping;
    raises PlanningError naming --source-addresses and the bad part."""
    by_host: dict[str, list[str]] = {}
    for text in texts:
        host, sign, listing = text.partition("=")
        addresses = [part.strip() for part in listing.split(",") if part.strip()]
        if not sign or not host.strip() or not addresses:
            raise PlanningError(f"--source-addresses {text!r}: expected HOST=ADDR[,ADDR...], e.g. load1=10.0.0.21,10.0.0.22")
        for address in addresses:
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise PlanningError(f"--source-addresses {text!r}: {address!r} is not an IP address") from None
        by_host.setdefault(host.strip(), []).extend(addresses)
    return by_host


def assign_source_addresses(shards: list[Shard], given: Optional[dict[str, list[str]]] = None) -> dict[str, list[str]]:
    """Gives every shard the local addresses its host connects from, and refuses a host that
    would run out of source ports.

    The kernel gives each (source address, broker address) pair only the ephemeral port range, so
    a host with more connections than that needs several source addresses. A host named in
    `given` uses those; otherwise, towards a loopback broker, 127.0.0.1, 127.0.0.2, ... (all of
    127/8 is this machine's). The engine spreads a shard's clients over the list by index, so each
    address carries about connections / addresses of them. Returns host -> addresses used."""
    given = given or {}
    connections: Counter[str] = Counter()
    ports: dict[str, int] = {}
    for shard in shards:
        connections[shard.worker.host] += shard.connections
        if shard.worker.ephemeral_ports:
            ports[shard.worker.host] = shard.worker.ephemeral_ports
    broker_host = str(shards[0].plan["broker"]["host"]) if shards else ""
    chosen: dict[str, list[str]] = {}
    problems = [
        f"--source-addresses names host {host}, but no worker runs there (hosts: {', '.join(sorted(connections))})"
        for host in sorted(given) if host not in connections
    ]  # fmt: skip
    for host, count in sorted(connections.items()):
        addresses = list(given.get(host, []))
        needed = addresses_needed(count, ports[host]) if host in ports else 1
        if not addresses and needed > 1:
            if is_loopback(broker_host):
                addresses = loopback_addresses(needed)
            else:
                problems.append(
                    f"host {host} would open {count} connections to the broker but has {ports[host]} source ports "
                    f"per local address: give it {needed} addresses (--source-addresses {host}=ADDR,ADDR,...) "
                    "or add workers on other hosts"
                )
                continue
        if addresses and len(addresses) < needed:
            problems.append(
                f"host {host} would open {count} connections to the broker, {ports[host]} per local address: "
                f"its {len(addresses)} source addresses are not enough, it needs {needed}"
            )
            continue
        if addresses:
            chosen[host] = addresses
    if problems:
        raise PlanningError("; ".join(problems))
    for shard in shards:
        if shard.worker.host in chosen:
            shard.plan["shard"]["source_addresses"] = chosen[shard.worker.host]
    return chosen


def assign_clock_domains(workers: list[WorkerInfo]) -> list[WorkerInfo]:
    """The workers, each with the name of the CLOCK_MONOTONIC it reads (`clock_domain`).

    Workers of different hosts never share one: two machines' monotonic clocks count from their
    own boot and drift apart. Workers of one host name usually do, but not always: a process in
    its own time namespace (a container started with one, `unshare --time`) or a host name given
    to several machines reads another clock. So the measured offsets decide within a host: those
    that agree within their bounds share a clock. A host with one clock keeps its name as the
    domain; with several, they are named `HOST#1`, `HOST#2`, ... in the order of their offsets."""
    domain: dict[str, str] = {}
    for host in sorted({w.host for w in workers}):
        on_host = [w for w in workers if w.host == host]
        unmeasured = [w for w in on_host if w.clock is None]
        measured = sorted((w for w in on_host if w.clock is not None), key=lambda w: _monotonic(w).offset_ns)
        groups: list[list[WorkerInfo]] = []
        for w in measured:
            if groups and _same_clock(groups[-1][-1], w):
                groups[-1].append(w)
            else:
                groups.append([w])
        if unmeasured:  # nothing to tell them apart by: the host's name is all there is
            if not groups:
                groups.append([])
            groups[0].extend(unmeasured)
        for k, group in enumerate(groups, start=1):
            for w in group:
                domain[w.address] = host if len(groups) == 1 else f"{host}#{k}"
    return [replace(w, clock_domain=domain[w.address]) for w in workers]


def _monotonic(worker: WorkerInfo) -> Any:
    assert worker.clock is not None
    return worker.clock.monotonic


def _same_clock(a: WorkerInfo, b: WorkerInfo) -> bool:
    first, second = _monotonic(a), _monotonic(b)
    return abs(first.offset_ns - second.offset_ns) <= first.bound_ns + second.bound_ns + CLOCK_SLACK_NS


def limit_latency_to_shared_clock(shards: list[Shard]) -> None:
    """Each shard records end-to-end latency only for the publishers that read its clock: the
    others' send times are on another clock. Shards are placed in clock order, so the publishers
    of one clock form one contiguous range."""
    domains = {s.worker.clock_key for s in shards}
    if len(domains) < 2:
        return
    for domain in domains:
        ranges = [s.publishers for s in shards if s.worker.clock_key == domain]
        span = [min(low for low, _ in ranges), max(high for _, high in ranges)]
        for shard in shards:
            if shard.worker.clock_key == domain:
                shard.plan["options"]["latency_publishers"] = span


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
    if is_loopback(host):
        elsewhere = sorted({w.host for w in workers if w.host != client_host})
        if elsewhere:
            raise PlanningError(
                f"the broker address {host} is loopback, but workers run on {', '.join(elsewhere)}: "
                "give the broker's address as those hosts reach it (--broker mqtt://HOST:PORT)"
            )


def clock_basis(shards: list[Shard], owed: Optional[Receivers]) -> dict[str, Any]:
    """Whether end-to-end latencies compare readings of one clock ("shared") or whether some
    measured (publisher, receiver) pairs span clocks, and how many. Those pairs are not in the
    latencies: each shard records only the publishers on its own clock (limit_latency_to_shared_clock)."""
    hosts = sorted({s.worker.host for s in shards})
    domains = sorted({s.worker.clock_key for s in shards})
    base: dict[str, Any] = {"hosts": hosts}
    if domains != hosts:
        base["clock_domains"] = domains
        base["clock_note"] = ("workers of one host read different monotonic clocks (their measured offsets differ): "
                              "each clock is a domain of its own")
    if len(domains) == 1:
        return {"basis": "shared", **base, "pairs": None, "cross_host_pairs": 0,
                "note": "every shard ran on one host's clock: publishers and subscribers share its monotonic clock"}  # fmt: skip
    if owed is None:
        return {"basis": "unknown", **base, "pairs": None, "cross_host_pairs": None,
                "note": "too many wildcard filters to tell which pairs span clocks; end-to-end latencies "
                        "cover only deliveries whose publisher ran on the subscriber's clock"}  # fmt: skip
    clock_of_pub = _domain_lookup(shards, "publishers")
    clock_of_sub = _domain_lookup(shards, "subscribers")
    pairs = crossing = 0
    for p, units in enumerate(owed.owed):
        for unit in units:
            pairs += 1
            # A shared group delivers each message to one member: it may cross if any member is elsewhere.
            if any(clock_of_sub(s) != clock_of_pub(p) for s in owed.members.get(unit, ())):
                crossing += 1
    if crossing == 0:
        return {"basis": "shared", **base, "pairs": pairs, "cross_host_pairs": 0,
                "note": "every measured pair has its publisher and subscriber on one clock"}  # fmt: skip
    return {"basis": "across_hosts", **base, "pairs": pairs, "cross_host_pairs": crossing,
            "note": f"{crossing} of {pairs} measured pairs have publisher and subscriber on different hosts "
                    "(or clocks), which are unrelated: their deliveries are counted but left out of the "
                    "end-to-end latencies, which cover deliveries between clients of one clock only"}  # fmt: skip


def _domain_lookup(shards: list[Shard], role: Role) -> Any:
    ranges = sorted((s.plan["shard"][role][0], s.plan["shard"][role][1], s.worker.clock_key) for s in shards)
    starts = [low for low, _, _ in ranges]

    def domain_of(index: int) -> str:
        low, high, domain = ranges[bisect.bisect_right(starts, index) - 1]
        return domain if low <= index < high else "?"

    return domain_of
