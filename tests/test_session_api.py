"""mqttlab.run() as a notebook user calls it: a scenario against a real broker, then the figures
read back as Python objects and pandas frames, and the failures that leave nothing to measure."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import mqttlab
from mqttlab.exits import Exit

SHORT = {
    "publishers.count": 2,
    "subscribers.count": 2,
    "publishers.rate": 200,
    "publishers.inflight": 500,  # the whole run's sends: a busy host's pause of the broker drops none
    "load.duration": "2s",
    "load.warmup": "500ms",
}


def test_a_scenario_runs_from_python_and_its_figures_read_back(tmp_path):
    result = mqttlab.run(None, broker="mosquitto", set=SHORT, out=tmp_path / "run")

    assert isinstance(result, mqttlab.RunResult)
    assert result.status == "completed" and result.exit_code == Exit.OK
    messages = result.summary["messages"]
    assert messages["sent"] == 2 * 200 * 2 and messages["lost"] == 0 and messages["delivered"] == messages["expected"]
    # The same summary is on disk, as `mqttlab report` reads it, in the shape the engine's schema gives.
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == result.summary
    schema = json.loads((Path(__file__).resolve().parent.parent / "docs" / "schema" / "summary.schema.json").read_text())
    jsonschema.validate(result.summary, schema)
    # The manifest too: the caller holds what the run wrote (the broker, the host), nothing to read back.
    assert json.loads((tmp_path / "run" / "manifest.json").read_text()) == result.manifest
    assert result.manifest["broker"]["name"] == "mosquitto" and result.manifest["status"] == "completed"

    latency = result.latency()
    assert latency.loc["e2e", "count"] == result.summary["latency"]["e2e"]["count"] > 0
    assert latency.loc["e2e", "p50_us"] <= latency.loc["e2e", "p99_us"] <= latency.loc["e2e", "max_us"]
    histogram = result.histogram("e2e")
    assert histogram.get_total_count() == latency.loc["e2e", "count"]

    series = result.series()
    # Per second from the start of the warm-up: every message sent is in some second.
    assert series["sent"].sum() == messages["sent"]
    assert set(result.resources()["process"]) >= {"broker", "generator"}


def test_progress_snapshots_reach_the_callback(tmp_path):
    seen: list[dict] = []
    mqttlab.run(None, broker="mosquitto", set=SHORT, out=tmp_path / "run", progress=seen.append)
    assert seen and seen[-1]["total"]["sent"] > 0


def test_an_unreachable_broker_raises_with_its_exit_code(tmp_path):
    with pytest.raises(mqttlab.RunFailed) as failure:
        mqttlab.run(None, broker="mqtt://127.0.0.1:9", set=SHORT, out=tmp_path / "run")
    assert failure.value.code == Exit.UNREACHABLE
    assert "127.0.0.1:9" in str(failure.value)
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_a_bad_scenario_names_its_fields_at_once(tmp_path):
    from mqttlab.scenario import ScenarioError

    with pytest.raises(ScenarioError) as failure:
        mqttlab.run(None, set={"publishers.qos": 7, "publishers.rate": -1}, out=tmp_path / "run")
    listing = failure.value.listing()
    assert "publishers.qos" in listing and "publishers.rate" in listing


def _engine_thread_cpus() -> set[str]:
    """The CPU lists of this process's engine threads (named mqttlab-*), read from /proc."""
    found = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            if not (task / "comm").read_text().startswith("mqttlab-"):
                continue
            status = (task / "status").read_text()
        except OSError:  # a thread that ended meanwhile
            continue
        found.add(next(line.split()[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list")))
    return found


def test_generator_cpus_pins_the_engine_threads_and_gives_the_caller_its_cpus_back(tmp_path):
    import os

    before = os.sched_getaffinity(0)
    last = max(before)
    seen: set[str] = set()
    result = mqttlab.run(None, broker="mosquitto", set={**SHORT, "options.generator_cpus": str(last)}, out=tmp_path / "run",
                         progress=lambda _: seen.update(_engine_thread_cpus()))
    assert result.summary["messages"]["lost"] == 0
    assert seen == {str(last)}
    assert os.sched_getaffinity(0) == before


def test_generator_cpus_not_on_this_host_is_refused_before_anything_starts(tmp_path):
    import os

    absent = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(mqttlab.RunFailed) as failure:
        mqttlab.run(None, broker="mosquitto", set={**SHORT, "options.generator_cpus": f"0,{absent}"}, out=tmp_path / "run")
    assert failure.value.code == Exit.BAD_INPUT
    assert "options.generator_cpus" in str(failure.value) and f"CPU {absent}" in str(failure.value)


def test_a_scenarios_metrics_endpoint_is_served_from_python_as_by_the_cli(tmp_path):
    # options.metrics is the scenario's: mqttlab.run() serves it during the run, as `mqttlab run` does.
    import urllib.request

    from mqttlab.brokers.base import free_ports

    (port,) = free_ports(1)
    scraped: list[str] = []

    def scrape(snapshot: dict) -> None:
        if not scraped and snapshot["total"]["sent"] > 0:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                scraped.append(response.read().decode())

    result = mqttlab.run(None, broker="mosquitto", set={**SHORT, "options.metrics": f"127.0.0.1:{port}"}, out=tmp_path / "run",
                         progress=scrape, metrics_linger=0)
    assert result.status == "completed"
    assert scraped and 'mqttlab_messages_total{broker="mosquitto"' in scraped[0].replace(", ", ",")
