"""Resource sampling: real processes that burn CPU, sleep or hold memory are sampled through
psutil; the per-second alignment and the summary are checked on samples whose answer is known."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from mqttlab.environment.resources import (
    NS_PER_S,
    ResourceSample,
    ResourceSampler,
    RunResources,
    generator_sampler,
    samples_to_series,
    summarize,
)

BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"
SLEEP = "import time; time.sleep({seconds})"


def _python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def _parent_of_burner(seconds: float) -> subprocess.Popen:
    """A sleeping parent whose only child burns CPU: the tree's CPU is all in the child."""
    code = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {BURN.format(seconds=seconds)!r}])\n"
        "child.wait()\n"
    )
    return _python(code)


def _finish(process: subprocess.Popen) -> None:
    process.kill()
    process.wait(timeout=10)


@pytest.mark.serial  # judges a CPU share
def test_busy_process_uses_about_one_core() -> None:
    burner = _python(BURN.format(seconds=3))
    try:
        with ResourceSampler(burner.pid, interval=0.25, label="burner") as sampler:
            time.sleep(2.0)
        samples = sampler.samples
    finally:
        _finish(burner)
    summary = summarize(samples)
    assert summary.samples >= 6
    # One thread cannot use more than one core; on a shared, loaded machine it may get much less
    # than a whole one, so the lower bound only separates "busy" from idle (near 0, see below).
    assert 0.2 < summary.mean_cpu_share <= 1.1
    assert summary.cpu_seconds == pytest.approx(summary.mean_cpu_share * summary.duration_s)
    assert summary.peak_rss_bytes > 1_000_000
    cumulative = [s.cpu_seconds for s in samples]
    assert cumulative == sorted(cumulative), "cumulative CPU never goes backwards"


def test_sleeping_process_uses_almost_no_cpu() -> None:
    sleeper = _python(SLEEP.format(seconds=5))
    try:
        time.sleep(0.3)  # let the interpreter finish starting
        with ResourceSampler(sleeper.pid, interval=0.25) as sampler:
            time.sleep(1.2)
    finally:
        _finish(sleeper)
    assert summarize(sampler.samples).mean_cpu_share < 0.1


def test_children_count_unless_excluded() -> None:
    parent = _parent_of_burner(4)
    try:
        time.sleep(0.5)  # the child exists by now
        children = [c.pid for c in __import__("psutil").Process(parent.pid).children()]
        assert len(children) == 1
        with ResourceSampler(parent.pid, interval=0.25) as whole_tree, \
                ResourceSampler(parent.pid, interval=0.25, exclude_pids=children) as parent_only:
            time.sleep(1.5)
    finally:
        _finish(parent)
        for pid in children:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
    assert summarize(whole_tree.samples).mean_cpu_share > 0.2
    assert summarize(parent_only.samples).mean_cpu_share < 0.1
    assert whole_tree.samples[-1].processes == 2
    assert parent_only.samples[-1].processes == 1


def test_sampler_ends_quietly_when_its_process_exits() -> None:
    short = _python(SLEEP.format(seconds=0.6))
    sampler = ResourceSampler(short.pid, interval=0.1).start()
    short.wait(timeout=10)
    deadline = time.monotonic() + 5
    while not sampler.ended and time.monotonic() < deadline:
        time.sleep(0.05)
    samples = sampler.stop()
    assert sampler.ended
    assert len(samples) >= 3


def test_sampler_refuses_a_pid_that_does_not_exist() -> None:
    gone = _python("pass")
    gone.wait(timeout=10)
    with pytest.raises(ValueError, match=str(gone.pid)):
        ResourceSampler(gone.pid)


def test_generator_sampler_watches_this_process_without_the_broker_child() -> None:
    burner = _python(BURN.format(seconds=3))
    try:
        with generator_sampler(interval=0.25, broker_pid=burner.pid) as sampler:
            time.sleep(1.0)
    finally:
        _finish(burner)
    assert sampler.pid == os.getpid()
    # This test process mostly sleeps; the burning child must not be counted as generator CPU.
    assert summarize(sampler.samples).mean_cpu_share < 0.3
    assert all(s.mono_ns > 0 for s in sampler.samples)


@pytest.mark.serial  # judges a CPU share
def test_run_resources_give_broker_and_generator_rows_on_the_run_clock() -> None:
    burner = _python(BURN.format(seconds=4))
    try:
        with RunResources(burner.pid, interval=0.2) as resources:
            start_ns = time.monotonic_ns()  # the load starts after the samplers, as in a run
            time.sleep(2.3)
    finally:
        _finish(burner)
    series = resources.series(start_ns)
    assert set(series) == {"broker", "generator"}
    assert [row["second"] for row in series["broker"]] == [0, 1]
    assert all(row["cpu_share"] > 0.2 for row in series["broker"])
    assert all(row["cpu_share"] < 0.3 for row in series["generator"])
    summary = resources.summary()
    assert summary["broker"]["cpu_seconds"] > summary["generator"]["cpu_seconds"]


def test_run_resources_without_a_broker_pid_sample_only_the_generator() -> None:
    with RunResources(None, interval=0.2) as resources:
        time.sleep(0.5)
    assert set(resources.summary()) == {"generator"}


def _sample(seconds: float, cpu: float, rss: int, start_ns: int = 0) -> ResourceSample:
    return ResourceSample(start_ns + int(seconds * NS_PER_S), cpu, rss, 1)


def test_series_interpolates_cpu_onto_whole_seconds_since_start() -> None:
    start = 5 * NS_PER_S
    # Half a core during the first seconds, then two cores; samples off the second boundaries.
    samples = [
        _sample(-0.5, 10.0, 100, start),
        _sample(0.5, 10.5, 200, start),
        _sample(1.5, 11.0, 300, start),
        _sample(2.5, 13.0, 400, start),
        _sample(3.5, 15.0, 500, start),
    ]
    series = samples_to_series(samples, start)
    assert [row["second"] for row in series] == [0, 1, 2]
    assert [row["cpu_share"] for row in series] == pytest.approx([0.5, 1.25, 2.0])
    assert [row["cpu_seconds"] for row in series] == pytest.approx([0.5, 1.75, 3.75])
    # RSS is the last reading taken by the end of each second.
    assert [row["rss_bytes"] for row in series] == [200, 300, 400]


def test_series_leaves_out_seconds_the_samples_do_not_cover() -> None:
    samples = [_sample(1.2, 0.0, 10), _sample(2.2, 1.0, 10), _sample(3.2, 2.0, 10), _sample(4.2, 3.0, 10)]
    series = samples_to_series(samples, 0)
    assert [row["second"] for row in series] == [2, 3]
    assert samples_to_series(samples[:1], 0) == []


def test_summary_reports_mean_and_peak_share_and_memory() -> None:
    samples = [_sample(0, 0.0, 100), _sample(1, 0.5, 300), _sample(2, 2.0, 200)]
    summary = summarize(samples)
    assert summary.samples == 3
    assert summary.duration_s == pytest.approx(2.0)
    assert summary.cpu_seconds == pytest.approx(2.0)
    assert summary.mean_cpu_share == pytest.approx(1.0)
    assert summary.max_cpu_share == pytest.approx(1.5)
    assert summary.peak_rss_bytes == 300
    assert summary.mean_rss_bytes == pytest.approx(200.0)
    assert summarize([]).samples == 0
