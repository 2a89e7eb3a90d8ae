"""What runs inside a Dask worker: describing itself, answering clock probes, running one shard.

These functions are sent to the workers by reference (module and name), so a worker must have
the same mqttlab installed; `describe` is how the client finds out whether it has."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any, Optional

from mqttlab import source_ports


def describe() -> dict[str, Any]:
    """Who this worker is and what it runs; an engine that cannot load is reported, not raised."""
    from mqttlab._version import VERSION

    from mqttlab import engine

    engine_version: Optional[str] = None
    engine_problem: Optional[str] = None
    try:
        engine_version = str(engine.load_engine().__version__)
    except engine.EngineUnavailable as error:
        engine_problem = str(error)
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "cores": os.cpu_count() or 1,
        "mqttlab_version": VERSION,
        "engine_version": engine_version,
        "engine_problem": engine_problem,
        "ephemeral_ports": source_ports.ephemeral_port_count(),
    }


def clock_reading() -> tuple[int, int]:
    """(wall clock, CLOCK_MONOTONIC) in ns, read back to back; the client brackets the call."""
    return time.time_ns(), time.monotonic_ns()


def run_shard(plan_json: str, shard_index: int, progress_topic: str, expected_pid: int, stop_event: str) -> dict[str, Any]:
    """Runs one shard and returns its raw result (JSON text) with where it ran. When the client
    sets the Dask Event `stop_event` (its Ctrl-C), the shard stops as a local run does on Ctrl-C
    and returns what it measured.

    A worker that was restarted after the client surveyed it (same address, new process) must
    not run the shard late: by then the common start instant has passed and its figures would
    describe another run."""
    plan = json.loads(plan_json)
    start_at = plan["shard"].get("start_at_unix_ns")
    where = {"shard": shard_index, "host": socket.gethostname(), "pid": os.getpid()}
    if os.getpid() != expected_pid:
        return {**where, "refused": f"worker restarted (pid {expected_pid} became {os.getpid()})"}
    if start_at is not None and time.time_ns() > start_at:
        late_ms = (time.time_ns() - start_at) // 1_000_000
        return {**where, "refused": f"the shard reached its worker {late_ms} ms after the common start instant"}

    from distributed import Event, get_worker

    from mqttlab import engine

    worker = get_worker()
    stop = Event(stop_event)

    def forward(snapshot_json: str) -> None:
        # log_event from a task thread is queued onto the worker's event loop: it never blocks
        # the engine, and a lost scheduler costs the display, not the measurement.
        try:
            worker.log_event(progress_topic, {"shard": shard_index, "snapshot": snapshot_json})
            stopped = stop.is_set()
        except Exception:  # noqa: BLE001
            stopped = False
        if stopped:
            raise KeyboardInterrupt  # the engine takes it as Ctrl-C: stop sending, drain, return

    try:
        raw = engine.run_shard_raw(plan_json, forward)
    except ConnectionError as error:
        failure = engine.ConnectFailure.of(error)
        return {**where, "unreachable": failure.message, "details": dict(failure.details)}
    return {**where, "raw": raw}
