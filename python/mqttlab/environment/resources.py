"""CPU and memory of the broker and of the load generator, sampled on the run's clock.

A sampler thread reads, every `interval` seconds, the CPU seconds (user + system) and the resident
memory of a process and its descendants through psutil. Timestamps come from
`time.monotonic_ns()`, the CLOCK_MONOTONIC the engine uses, so samples line up with the load's
per-second series. `samples_to_series` turns the samples into one row per whole second since
the run's start; `summarize` gives the figures a report shows."""

from __future__ import annotations

import bisect
import math
import os
import threading
import time
from dataclasses import asdict, dataclass
from collections.abc import Iterable, Sequence

import psutil

NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class ResourceSample:
    """One reading. `cpu_seconds` is cumulative since the sampler started watching."""

    mono_ns: int
    cpu_seconds: float
    rss_bytes: int
    processes: int


@dataclass(frozen=True)
class ResourceSummary:
    """`cpu_share` is in cores: 1.0 means one core fully busy (a multi-threaded broker can exceed it)."""

    samples: int
    duration_s: float
    cpu_seconds: float
    mean_cpu_share: float
    max_cpu_share: float
    peak_rss_bytes: int
    mean_rss_bytes: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


class ResourceSampler:
    """Samples one process tree in a background thread until `stop()`.

    CPU time of a descendant that exits is kept at its last reading, so the cumulative figure
    never goes backwards when, say, a broker's worker process ends. `exclude_pids` leaves out
    children (and their subtrees) that belong to someone else: the generator's own process must
    not count the broker it started as a child."""

    def __init__(
        self,
        pid: int,
        *,
        interval: float = 1.0,
        include_children: bool = True,
        exclude_pids: Iterable[int] = (),
        label: str = "process",
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.pid = pid
        self.interval = interval
        self.include_children = include_children
        self.exclude_pids = frozenset(exclude_pids)
        self.label = label
        self.ended = False  # the watched process exited while we sampled
        self._samples: list[ResourceSample] = []
        self._last_cpu: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        try:
            self._root = psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise ValueError(f"no process with PID {pid} to sample") from None

    # -- reading ----------------------------------------------------------------------

    def _tree(self) -> list[psutil.Process]:
        processes = [self._root]
        if not self.include_children:
            return processes
        pending = [self._root]
        while pending:
            parent = pending.pop()
            try:
                children = parent.children(recursive=False)
            except psutil.Error:
                continue
            for child in children:
                if child.pid not in self.exclude_pids:
                    processes.append(child)
                    pending.append(child)
        return processes

    def sample_now(self) -> ResourceSample | None:
        """Takes one reading (also usable without the thread). None once the process is gone."""
        if not self._root.is_running():
            self.ended = True
            return None
        rss = 0
        alive = 0
        mono_ns = time.monotonic_ns()
        for process in self._tree():
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    memory = process.memory_info()
                    key = (process.pid, process.create_time())
            except psutil.Error:
                continue  # exited between listing and reading
            self._last_cpu[key] = times.user + times.system
            rss += memory.rss
            alive += 1
        if alive == 0:
            self.ended = True
            return None
        sample = ResourceSample(mono_ns, sum(self._last_cpu.values()), rss, alive)
        with self._lock:
            self._samples.append(sample)
        return sample

    # -- thread -----------------------------------------------------------------------

    def _run(self, started: float) -> None:
        ticks = 1  # the first reading was taken by start()
        while not self._stop.is_set():
            delay = started + ticks * self.interval - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            if self.sample_now() is None:
                return
            ticks += 1

    def follow(self, pid: int) -> None:
        """Samples `pid` from now on, in place of the process that ended (a restarted broker):
        its CPU time adds to what the earlier one used."""
        self._root = psutil.Process(pid)
        self.ended = False
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            # The thread ends with the process it watched; a new one takes over.
            self._thread = None
            self.start()

    def exclude(self, pid: int) -> None:
        """Leaves `pid` (and its subtree) out from now on."""
        self.exclude_pids = self.exclude_pids | {pid}

    def start(self) -> ResourceSampler:
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        # One reading now, so that a load started after this call is covered from its first second.
        started = time.monotonic()
        self.sample_now()
        # Due times are counted from `started`, so a slow reading does not shift later ones.
        self._thread = threading.Thread(
            target=self._run, args=(started,), name=f"mqttlab-resources-{self.label}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> list[ResourceSample]:
        """Stops the thread after one last reading and returns every sample."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval))
        if not self.ended:
            self.sample_now()
        return self.samples

    @property
    def samples(self) -> list[ResourceSample]:
        with self._lock:
            return list(self._samples)

    def __enter__(self) -> ResourceSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def generator_sampler(interval: float = 1.0, broker_pid: int | None = None, others: Iterable[int] = ()) -> ResourceSampler:
    """A sampler for mqttlab's own process (the load generator), leaving out a broker that
    runs as its child, and `others` (a gateway) likewise."""
    excluded = [*([broker_pid] if broker_pid is not None else []), *others]
    return ResourceSampler(os.getpid(), interval=interval, exclude_pids=excluded, label="generator")


class RunResources:
    """The samplers of one run, started and stopped together: the broker's (when its PID is
    known, i.e. launched by us or given with an external URL), the MQTT-SN gateway's (when it
    runs as a process of its own; one already gone is not sampled) and the generator's, which
    counts neither."""

    def __init__(self, broker_pid: int | None, interval: float = 1.0, *, gateway_pid: int | None = None) -> None:
        self.samplers: dict[str, ResourceSampler] = {}
        if broker_pid is not None:
            self.samplers["broker"] = ResourceSampler(broker_pid, interval=interval, label="broker")
        if gateway_pid is not None:
            try:
                self.samplers["gateway"] = ResourceSampler(gateway_pid, interval=interval, label="gateway")
            except ValueError:
                pass
        self.samplers["generator"] = generator_sampler(interval, broker_pid, others=[gateway_pid] if gateway_pid is not None else [])

    def start(self) -> RunResources:
        for sampler in self.samplers.values():
            sampler.start()
        return self

    def stop(self) -> None:
        for sampler in self.samplers.values():
            sampler.stop()

    def __enter__(self) -> RunResources:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def broker_restarted(self, pid: int) -> None:
        """The broker runs as `pid` now: sampled as the broker, no longer as part of mqttlab."""
        self.samplers["generator"].exclude(pid)
        if "broker" in self.samplers:
            self.samplers["broker"].follow(pid)

    def series(self, start_mono_ns: int) -> dict[str, list[dict[str, float | int]]]:
        """Per-second rows for "broker" and "generator" (see `samples_to_series`)."""
        return {name: samples_to_series(s.samples, start_mono_ns) for name, s in self.samplers.items()}

    def summary(self) -> dict[str, dict[str, float | int]]:
        return {name: summarize(s.samples).to_dict() for name, s in self.samplers.items()}

    def current(self) -> dict[str, dict[str, float | None]]:
        """Per process, the cores used between the last two readings and the last RSS, for a
        live view; processes without two readings yet are left out."""
        figures: dict[str, dict[str, float | None]] = {}
        for name, sampler in self.samplers.items():
            samples = sampler.samples[-2:]
            if len(samples) < 2 or samples[1].mono_ns <= samples[0].mono_ns:
                continue
            seconds = (samples[1].mono_ns - samples[0].mono_ns) / NS_PER_S
            figures[name] = {
                "cpu_cores": max(0.0, samples[1].cpu_seconds - samples[0].cpu_seconds) / seconds,
                "rss_bytes": float(samples[1].rss_bytes),
            }
        return figures


def _cpu_at(samples: Sequence[ResourceSample], times: Sequence[int], at_ns: int) -> float | None:
    """Cumulative CPU seconds at `at_ns`, linearly interpolated between the samples around it
    (`times` holds the samples' `mono_ns`, sorted)."""
    if not samples or at_ns < times[0] or at_ns > times[-1]:
        return None
    index = bisect.bisect_left(times, at_ns)
    after = samples[index]
    if after.mono_ns == at_ns or index == 0:
        return after.cpu_seconds
    before = samples[index - 1]
    weight = (at_ns - before.mono_ns) / (after.mono_ns - before.mono_ns)
    return before.cpu_seconds + weight * (after.cpu_seconds - before.cpu_seconds)


def samples_to_series(samples: Sequence[ResourceSample], start_mono_ns: int) -> list[dict[str, float | int]]:
    """One row per whole second k since `start_mono_ns` (the run's start on the same clock):

    - `cpu_share`: cores used during [k, k+1), from the cumulative CPU interpolated at both ends;
    - `cpu_seconds`: cumulative CPU at the end of that second, counted from the run's start;
    - `rss_bytes`: the last reading at or before the end of that second.

    Only seconds that the samples cover at both ends are given: nothing is extrapolated."""
    ordered = sorted(samples, key=lambda s: s.mono_ns)
    if len(ordered) < 2:
        return []
    times = [s.mono_ns for s in ordered]
    base = _cpu_at(ordered, times, start_mono_ns)
    first_second = max(0, math.ceil((ordered[0].mono_ns - start_mono_ns) / NS_PER_S))
    last_second = math.floor((ordered[-1].mono_ns - start_mono_ns) / NS_PER_S) - 1
    rows: list[dict[str, float | int]] = []
    reading = 0
    for second in range(first_second, last_second + 1):
        begin_ns = start_mono_ns + second * NS_PER_S
        end_ns = begin_ns + NS_PER_S
        cpu_begin = _cpu_at(ordered, times, begin_ns)
        cpu_end = _cpu_at(ordered, times, end_ns)
        if cpu_begin is None or cpu_end is None:
            continue
        while reading + 1 < len(ordered) and ordered[reading + 1].mono_ns <= end_ns:
            reading += 1
        rows.append({
            "second": second,
            "cpu_share": max(0.0, cpu_end - cpu_begin),
            "cpu_seconds": cpu_end - (base if base is not None else ordered[0].cpu_seconds),
            "rss_bytes": ordered[reading].rss_bytes,
        })
    return rows


def summarize(samples: Sequence[ResourceSample]) -> ResourceSummary:
    """Mean and peak CPU share, CPU seconds, and peak and mean RSS over the samples."""
    ordered = sorted(samples, key=lambda s: s.mono_ns)
    if not ordered:
        return ResourceSummary(0, 0.0, 0.0, 0.0, 0.0, 0, 0.0)
    duration = (ordered[-1].mono_ns - ordered[0].mono_ns) / NS_PER_S
    cpu = ordered[-1].cpu_seconds - ordered[0].cpu_seconds
    shares = [
        (b.cpu_seconds - a.cpu_seconds) / ((b.mono_ns - a.mono_ns) / NS_PER_S)
        for a, b in zip(ordered, ordered[1:], strict=False)
        if b.mono_ns > a.mono_ns
    ]
    return ResourceSummary(
        samples=len(ordered),
        duration_s=duration,
        cpu_seconds=cpu,
        mean_cpu_share=cpu / duration if duration > 0 else 0.0,
        max_cpu_share=max(shares, default=0.0),
        peak_rss_bytes=max(s.rss_bytes for s in ordered),
        mean_rss_bytes=sum(s.rss_bytes for s in ordered) / len(ordered),
    )
