"""Reaching a Dask cluster: a scheduler address, or `local:N` for N worker processes on this
machine (a LocalCluster, to try the distributed path without any other host)."""

from __future__ import annotations

import re
import signal
import socket
import threading
from contextlib import contextmanager
from typing import Any, Iterator

LOCAL_SPEC = re.compile(r"^local(?::(\d+))?$")
SCHEMES = ("tcp://", "tls://", "ws://", "wss://", "inproc://", "ucx://")


class ClusterError(Exception):
    """The cluster cannot be used; the message is one line meant for the user."""


class BadClusterSpec(ClusterError, ValueError):
    pass


class SchedulerUnreachable(ClusterError, ConnectionError):
    pass


def parse_spec(spec: str) -> tuple[str, Any]:
    """("local", worker count) or ("scheduler", address)."""
    text = spec.strip()
    local = LOCAL_SPEC.match(text)
    if local:
        workers = int(local.group(1) or 2)
        if workers < 1:
            raise BadClusterSpec(f"--dask {spec}: a local cluster needs at least 1 worker")
        return "local", workers
    if text.startswith(SCHEMES):
        return "scheduler", text
    if re.match(r"^[\w.\-]+:\d+$", text):  # host:port, the form `dask scheduler` prints without scheme
        return "scheduler", f"tcp://{text}"
    raise BadClusterSpec(
        f"--dask {spec}: expected a scheduler address (tcp://HOST:8786) or local:N for N local worker processes"
    )


def check_reachable(spec: str, *, timeout_s: float = 5.0) -> None:
    """Fails fast, before a broker is started or a client built, when nothing listens at the
    scheduler's address (dask's own connect retries until its timeout even when refused)."""
    kind, value = parse_spec(spec)
    if kind != "scheduler" or not value.startswith("tcp://"):
        return
    host, _, port = value[len("tcp://"):].rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error) or "timed out"
        raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {value}: {reason}") from None


@contextmanager
def connect(spec: str, *, timeout_s: float = 10.0) -> Iterator[Any]:
    """A distributed.Client for `spec`, closed (and a local cluster stopped) on exit."""
    kind, value = parse_spec(spec)
    import dask
    from distributed import Client, LocalCluster

    # A shard must run once, at its start instant, on the worker it was planned for: never let
    # the scheduler retry it elsewhere after a worker dies (a local cluster's scheduler is ours
    # to configure; a remote one is guarded by the shard's worker restriction and start check).
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        if kind == "local":
            # One thread per worker process: the engine runs its own threads. The workers are
            # started with SIGINT ignored (they keep that across exec): a Ctrl-C in the terminal
            # reaches the whole process group, and must stop the shards through the client, as
            # on remote workers, rather than kill the workers and their results.
            main = threading.current_thread() is threading.main_thread()  # where signals are set
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
            try:
                cluster = LocalCluster(
                    n_workers=value, threads_per_worker=1, processes=True, dashboard_address=":0",
                    host="127.0.0.1", silence_logs=50,
                )  # fmt: skip
            finally:
                if main:
                    signal.signal(signal.SIGINT, previous)
            try:
                with Client(cluster, timeout=f"{timeout_s}s") as client:
                    yield client
            finally:
                cluster.close()
            return
        try:
            client = Client(value, timeout=f"{timeout_s}s")
        except (OSError, TimeoutError) as error:
            raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {value}: {_first_line(error)}") from None
        with client:
            yield client


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@contextmanager
def shared_scheduler(spec: str) -> Iterator[str]:
    """A scheduler address that several `mqttlab run --dask ADDRESS` processes can share (a
    suite): the address itself, or for `local:N` one LocalCluster kept up for all of them
    instead of one started per run."""
    kind, value = parse_spec(spec)
    if kind == "scheduler":
        check_reachable(spec)
        yield value
        return
    with connect(spec) as client:
        yield str(client.scheduler.address)
