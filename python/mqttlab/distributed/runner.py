"""Running one plan on a Dask cluster: survey the workers, place the shards, start them together,
feed the live display, and merge what comes back into one outcome.

The sequence is a barrier in two steps. First every worker is asked to describe itself (engine
importable, same versions) and its clocks are measured; only then is the common start instant
set, far enough ahead for the slowest shard to connect, and every shard handed out at once."""

from __future__ import annotations

import json
import math
import queue
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from mqttlab import engine
from mqttlab._version import VERSION
from mqttlab.distributed import clock as clocks
from mqttlab.distributed import worker_side
from mqttlab.plan_types import Role
from mqttlab.routing import Receivers, owed_receivers
from mqttlab.distributed.planner import (
    PlanningError,
    Shard,
    WorkerInfo,
    assign_clock_domains,
    assign_source_addresses,
    check_broker_reachable_from,
    clock_basis,
    limit_latency_to_shared_clock,
    place_shards,
    start_margin_s,
)
from mqttlab.distributed.progress import ProgressCombiner
from mqttlab.engine import Plan, ProgressCallback, RunOutcome
from mqttlab.summary_types import STATUS_ORDER, add_section

POLL_S = 0.2
LIVENESS_EVERY_S = 0.5
# A shard that has not come back this long after its planned end is given up as missing.
RETURN_ALLOWANCE_S = 60.0
# After Ctrl-C: time for the shards to notice (with their next progress report), let deliveries
# under way arrive and send their results.
STOP_ALLOWANCE_S = 15.0


class ClusterRefused(Exception):
    """The cluster cannot run this plan (versions differ, engine missing, placement impossible);
    the message lists every problem."""


class VersionMismatch(ClusterRefused):
    pass


class NoShardReturned(RuntimeError):
    """Every shard was lost: there is nothing to merge."""


@dataclass
class ShardOutcome:
    shard: Shard
    state: str  # "completed", "missing" or "unreachable"
    raw: Optional[str] = None
    reason: Optional[str] = None
    #: an unreachable shard's connect failure as the engine gave it (engine.ConnectFailure.details)
    details: Optional[dict[str, Any]] = None

    def as_dict(self) -> dict[str, Any]:
        status = json.loads(self.raw)["status"] if self.raw else self.state
        return {**self.shard.as_dict(), "state": self.state, "status": status, "reason": self.reason}


@dataclass
class DistributedOutcome(RunOutcome):
    scheduler: str = ""
    workers: list[WorkerInfo] = field(default_factory=list)
    shards: list[ShardOutcome] = field(default_factory=list)

    @property
    def missing(self) -> list[ShardOutcome]:
        return [s for s in self.shards if s.state != "completed"]

    def manifest_section(self) -> dict[str, Any]:
        """What the manifest says about the cluster: every worker host and its share."""
        return {
            "scheduler": self.scheduler,
            "workers": [
                {
                    "address": w.address,
                    "host": w.host,
                    "pid": w.pid,
                    "cores": w.cores,
                    "clock_offset": w.clock.as_dict() if w.clock else None,
                    "clock_domain": w.clock_key,
                    "shards": [s.shard.index for s in self.shards if s.shard.worker.address == w.address],
                }
                for w in self.workers
            ],
            "shards": [s.as_dict() for s in self.shards],
            "latency_clock": self.summary.get("distributed", {}).get("latency_clock"),
        }


def survey(client: Any) -> list[WorkerInfo]:
    """Every worker's description, clock offsets and clock domain; refuses a cluster that cannot
    run the plan with every problem named at once."""
    described = client.run(worker_side.describe, on_error="return")
    threads = client.nthreads()
    if not described:
        raise ClusterRefused("the Dask cluster has no workers")
    problems, versions = [], []
    here_engine = engine.engine_version()
    for address, info in sorted(described.items()):
        if isinstance(info, BaseException):
            problems.append(f"worker {address} cannot run mqttlab: {type(info).__name__}: {info}")
            continue
        name = f"worker {address} on {info['host']}"
        if info["engine_problem"]:
            problems.append(f"{name}: the compiled engine does not load: {info['engine_problem']}")
        if info["mqttlab_version"] != VERSION or info["engine_version"] != here_engine:
            versions.append(
                f"{name} has mqttlab {info['mqttlab_version']} (engine {info['engine_version']}), "
                f"this client mqttlab {VERSION} (engine {here_engine})"
            )
    if versions:
        raise VersionMismatch("mqttlab versions differ; install the same version everywhere: " + "; ".join(versions))
    if problems:
        raise ClusterRefused("; ".join(problems))
    workers = []
    for address, info in sorted(described.items()):
        # A def rather than a lambda: mypy cannot type a lambda's default argument.
        def read_clock(address: str = address) -> tuple[int, int]:
            return tuple(client.run(worker_side.clock_reading, workers=[address])[address])

        measured = clocks.measure(read_clock)
        workers.append(
            WorkerInfo(
                address=address, host=info["host"], pid=info["pid"], cores=info["cores"],
                nthreads=threads.get(address, 1), ephemeral_ports=info["ephemeral_ports"], clock=measured,
            )
        )  # fmt: skip
    return assign_clock_domains(workers)


def run_plan(
    plan: Plan,
    client: Any,
    progress: Optional[ProgressCallback] = None,
    *,
    shards_per_worker: int = 1,
    scheduler: str = "",
    broker_url: Optional[str] = None,
    source_addresses: Optional[dict[str, list[str]]] = None,
) -> DistributedOutcome:
    """Runs `plan` (the whole plan) across the cluster behind `client` and merges the shards.

    Raises ClusterRefused (VersionMismatch) before any load, engine.BrokerUnreachable when no
    shard reached the broker, NoShardReturned when every shard was lost. Shards lost mid-run are
    listed in the outcome; the rest are merged. `source_addresses` (host -> local addresses)
    is for hosts with more connections than source ports (planner.assign_source_addresses)."""
    workers = survey(client)
    client_host = socket.gethostname()
    try:
        check_broker_reachable_from(plan, workers, client_host)
        shards = place_shards(plan, workers, shards_per_worker)
        assign_source_addresses(shards, source_addresses)
    except PlanningError as error:
        raise ClusterRefused(str(error)) from None
    limit_latency_to_shared_clock(shards)
    receivers = owed_receivers(plan)

    run_id = uuid.uuid4().hex[:12]
    topic = f"mqttlab-progress-{run_id}"
    # Ctrl-C here sets it; each shard checks it with its progress and stops like a local run.
    from distributed import Event

    stop = Event(f"mqttlab-stop-{run_id}", client=client)
    arrivals: queue.Queue[tuple[int, str]] = queue.Queue()
    client.subscribe_topic(topic, lambda event: arrivals.put((event[1]["shard"], event[1]["snapshot"])))
    try:
        start_at = time.time_ns() + int(start_margin_s(shards, float(plan["load"]["connect_rate"])) * 1e9)
        futures = {}
        for shard in shards:
            # The start instant is handed out on each worker's own wall clock.
            local_offset = 0 if shard.worker.host == client_host or shard.worker.clock is None else shard.worker.clock.wall.offset_ns
            shard.plan["shard"]["start_at_unix_ns"] = start_at + local_offset
            futures[shard.index] = client.submit(
                worker_side.run_shard, json.dumps(shard.plan), shard.index, topic, shard.worker.pid, stop.name,
                workers=[shard.worker.address], allow_other_workers=False, pure=False,
                key=f"mqttlab-shard-{run_id}-{shard.index}",
            )  # fmt: skip
        load_s = engine.planned_load_s(plan)
        # A load that lasts as long as the broker takes (closed loop with a count) has no planned end.
        deadline = start_at / 1e9 + (math.inf if load_s is None else load_s + plan["load"]["grace_ms"] / 1000) + RETURN_ALLOWANCE_S
        outcomes = _watch(client, shards, futures, arrivals, progress, deadline, stop)
    finally:
        client.unsubscribe_topic(topic)

    done = [o for o in outcomes if o.state == "completed"]
    if not done:
        unreachable = [o for o in outcomes if o.state == "unreachable"]
        if unreachable:
            first = unreachable[0]
            raise engine.unreachable(plan, engine.ConnectFailure(first.reason or "", first.details or {}), broker_url)
        raise NoShardReturned("no shard came back: " + "; ".join(f"shard {o.shard.index}: {o.reason}" for o in outcomes))
    merged = merge_shards(plan, outcomes, clock_basis(shards, receivers), receivers)
    return DistributedOutcome(
        plan=plan, result=merged.result, summary=merged.summary, scheduler=scheduler, workers=workers, shards=outcomes
    )


def _watch(
    client: Any,
    shards: list[Shard],
    futures: dict[int, Any],
    arrivals: "queue.Queue[tuple[int, str]]",
    progress: Optional[ProgressCallback],
    deadline: float,
    stop: Any,
) -> list[ShardOutcome]:
    """Waits for every shard, feeding the display, and gives up on shards whose worker left.
    The first Ctrl-C asks the shards to stop (they return what they measured, as a local run
    does); a second one gives up waiting."""
    outcome: dict[int, ShardOutcome] = {}
    combiner = ProgressCombiner(len(shards))
    by_index = {s.index: s for s in shards}
    last_liveness = 0.0
    stopping = False
    while len(outcome) < len(shards):
        try:
            last_liveness = _watch_step(client, futures, by_index, arrivals, progress, combiner, outcome, last_liveness)
        except KeyboardInterrupt:
            if stopping:
                raise
            stopping = True
            stop.set()
            deadline = min(deadline, time.time() + STOP_ALLOWANCE_S)
        if time.time() > deadline:
            for index, future in futures.items():
                if index not in outcome:
                    future.cancel()
                    outcome[index] = ShardOutcome(by_index[index], "missing", reason="did not return in time")
    return [outcome[s.index] for s in shards]


def _watch_step(
    client: Any,
    futures: dict[int, Any],
    by_index: dict[int, Shard],
    arrivals: "queue.Queue[tuple[int, str]]",
    progress: Optional[ProgressCallback],
    combiner: ProgressCombiner,
    outcome: dict[int, ShardOutcome],
    last_liveness: float,
) -> float:
    """One round of `_watch`: progress in, finished shards collected, lost workers noticed.
    Returns when liveness was last checked."""
    try:
        shard_index, snapshot = arrivals.get(timeout=POLL_S)
        combiner.add(shard_index, json.loads(snapshot))
        while True:
            shard_index, snapshot = arrivals.get_nowait()
            combiner.add(shard_index, json.loads(snapshot))
    except queue.Empty:
        pass
    if progress is not None and combiner.due():
        combined = combiner.combined()
        if combined is not None:
            progress(combined)
    for index, future in futures.items():
        if index in outcome or not future.done():
            continue
        outcome[index] = _collect(by_index[index], future)
        combiner.finished(index)
    now = time.time()
    if now - last_liveness < LIVENESS_EVERY_S:
        return last_liveness
    alive = set(client.nthreads())
    for index, future in futures.items():
        shard = by_index[index]
        if index not in outcome and shard.worker.address not in alive:
            future.cancel()
            outcome[index] = ShardOutcome(shard, "missing", reason=f"worker {shard.worker.address} on {shard.worker.host} was lost during the run")
            combiner.finished(index)
    return now


def _collect(shard: Shard, future: Any) -> ShardOutcome:
    try:
        answer = future.result()
    except Exception as error:  # noqa: BLE001  (a worker died, the task was cancelled, ...)
        return ShardOutcome(shard, "missing", reason=f"{type(error).__name__}: {error}")
    if "raw" in answer:
        return ShardOutcome(shard, "completed", raw=answer["raw"])
    if "unreachable" in answer:
        return ShardOutcome(shard, "unreachable", reason=answer["unreachable"], details=answer.get("details"))
    return ShardOutcome(shard, "missing", reason=answer.get("refused", "no result"))


def merge_shards(
    plan: Plan,
    outcomes: list[ShardOutcome],
    latency_clock: dict[str, Any],
    receivers: Optional[Receivers],
) -> RunOutcome:
    """One outcome from the shards that came back. With shards missing, the merged raw result is
    marked `incomplete` with the reason before the engine summarises it, so the summary's status
    and error are the engine's own; the cluster's account goes in the `distributed` section."""
    result = json.loads(engine.merge_results([o.raw for o in outcomes if o.state == "completed" and o.raw]))
    missing = [o for o in outcomes if o.state != "completed"]
    section: dict[str, Any] = {
        "shards": [o.as_dict() for o in outcomes],
        "hosts": sorted({o.shard.worker.host for o in outcomes}),
        "missing_shards": [o.shard.index for o in missing],
        "latency_clock": latency_clock,
    }
    if missing:
        section["owed_to_missing_subscribers"] = _owed_to_missing(result, receivers, missing)
        section["received_from_missing_publishers"] = _received_from_missing(result, missing)
        result["status"] = "incomplete"
        result["error"] = (
            f"{len(missing)} of {len(outcomes)} shards missing: "
            + "; ".join(
                f"shard {o.shard.index} (publishers {o.shard.publishers}, subscribers {o.shard.subscribers}) {o.reason}"
                for o in missing
            )
            + f"; the other shards' results are merged. {section['owed_to_missing_subscribers']} of the lost "
            "messages were owed to subscribers of missing shards, and deliveries from their publishers count as unexpected"
        )
    merged = engine.summarize(plan, json.dumps(result))
    add_section(merged.summary, "distributed", section)
    return merged


def _in_missing(index: int, role: Role, missing: list[ShardOutcome]) -> bool:
    return any(o.shard.plan["shard"][role][0] <= index < o.shard.plan["shard"][role][1] for o in missing)


def _owed_to_missing(result: dict[str, Any], receivers: Optional[Receivers], missing: list[ShardOutcome]) -> Optional[int]:
    if receivers is None:
        return None
    sent = {int(p): n for p, n in (result.get("sent_per_publisher") or {}).items()}
    owed = 0
    for p, units in enumerate(receivers.owed):
        for unit in units:
            if all(_in_missing(s, "subscribers", missing) for s in receivers.members.get(unit, [])):
                owed += sent.get(p, 0)
    return owed


def _received_from_missing(result: dict[str, Any], missing: list[ShardOutcome]) -> int:
    return sum(d["unique"] for d in result.get("deliveries") or [] if _in_missing(int(d["publisher"]), "publishers", missing))


def judged_without_missing(outcome: DistributedOutcome) -> dict[str, Any]:
    """The summary as the shards that came back see it: their own status, and losses less those
    owed to subscribers that were never there. For exit codes when missing shards are accepted."""
    summary = dict(outcome.summary)
    # The worst status among the shards that came back (the engine's order of statuses).
    returned = [s["status"] for s in (summary.get("distributed") or {}).get("shards", []) if s.get("state") == "completed"]
    summary["status"] = max(returned, key=STATUS_ORDER.index, default="completed")
    owed = (summary.get("distributed") or {}).get("owed_to_missing_subscribers") or 0
    messages = dict(summary.get("messages") or {})
    messages["lost"] = max(0, int(messages.get("lost", 0)) - owed)
    summary["messages"] = messages
    if messages["lost"] == 0:
        # The engine's QoS-loss violation counted the missing subscribers' share as lost.
        summary["violations"] = [v for v in summary.get("violations") or [] if not str(v.get("kind", "")).endswith("_loss")]
    return summary
