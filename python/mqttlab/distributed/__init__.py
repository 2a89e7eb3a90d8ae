"""Running one plan across many machines on a Dask cluster (docs/distributed.md).

`run_on_dask(plan, "tcp://scheduler:8786")` or `run_on_dask(plan, "local:2")` is the whole API the
commands need; `run_plan` takes a `distributed.Client` you already hold."""

from __future__ import annotations

from typing import Optional

from mqttlab.distributed.cluster import BadClusterSpec, ClusterError, SchedulerUnreachable, check_reachable, connect, parse_spec, shared_scheduler
from mqttlab.distributed.planner import PlanningError, parse_source_addresses
from mqttlab.distributed.runner import (
    ClusterRefused,
    DistributedOutcome,
    NoShardReturned,
    ShardOutcome,
    VersionMismatch,
    judged_without_missing,
    run_plan,
)
from mqttlab.engine import Plan, ProgressCallback

__all__ = [
    "BadClusterSpec",
    "ClusterError",
    "ClusterRefused",
    "DistributedOutcome",
    "NoShardReturned",
    "PlanningError",
    "SchedulerUnreachable",
    "ShardOutcome",
    "VersionMismatch",
    "check_reachable",
    "connect",
    "judged_without_missing",
    "parse_source_addresses",
    "parse_spec",
    "run_on_dask",
    "run_plan",
    "shared_scheduler",
]


def run_on_dask(
    plan: Plan,
    spec: str,
    progress: Optional[ProgressCallback] = None,
    *,
    shards_per_worker: int = 1,
    broker_url: Optional[str] = None,
    source_addresses: Optional[dict[str, list[str]]] = None,
) -> DistributedOutcome:
    """Connects to the cluster `spec` names, runs the whole `plan` on it, and disconnects."""
    with connect(spec) as client:
        return run_plan(
            plan, client, progress, shards_per_worker=shards_per_worker, scheduler=spec, broker_url=broker_url,
            source_addresses=source_addresses,
        )
