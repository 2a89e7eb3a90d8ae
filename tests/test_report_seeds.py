"""The seeds' own statistics and tables in the report, from real short runs against the embedded
broker: seed 002's 46-byte PUBLISH overhead with the suite's 42-byte topic and its connection
overhead, seed 001's SD over per-run means for one-message runs, seed 003's mean broker memory,
and a capture asked for by the scenario that the host cannot make."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mqttlab.analysis import compare_directories
from mqttlab.reports.tables import all_tables
from mqttlab.suite import expand_suite, load_suite

pytestmark = pytest.mark.slow


def run(tmp: Path, name: str, scenario: dict) -> Path:
    source = tmp / f"{name}.yaml"
    source.write_text(yaml.safe_dump(dict(scenario, name=name)))
    out = tmp / "runs" / name
    done = subprocess.run([sys.executable, "-m", "mqttlab", "run", str(source), "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out


def seed002_scenario() -> dict:
    """seed002's full-bandwidth round trip at QoS 0 with its smallest payload, made short."""
    planned = next(r for r in expand_suite(load_suite("seed002")) if r.scenario_name == "full-bandwidth-qos0-p1B-r10")
    scenario = json.loads(json.dumps(planned.scenario))
    scenario.pop("broker", None)
    # 2.5 s measured: the broker's memory is sampled once a second, so the window holds samples
    scenario["load"] = {"duration": "3s", "warmup": "0.5s", "grace": "1s"}
    scenario["options"] = dict(scenario.get("options") or {}, capture=True)
    return scenario


def test_seed002_topic_gives_the_seeds_46_byte_publish_overhead_and_the_connection_table(tmp_path):
    directory = run(tmp_path, "seed002-qos0", seed002_scenario())
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["round_trip"]["replies"] > 0
    tables = all_tables(compare_directories([directory]))
    (publish,) = tables["overhead_publish"]
    assert (publish["topic_bytes"], publish["qos"], publish["publish_overhead_bytes"]) == (42, 0, 46)
    assert publish["publish_frame_overhead_bytes"] == 46 + 66
    sizes = {row["packet"]: (row["mqtt_bytes"], row["frame_bytes"]) for row in tables["overhead_connection"]}
    # client id "mqttlabpub0" (11 B, as the seed's): 2 + 10 + 2 + 11 = the seed's CONNECT 25/91,
    # CONNACK 4/70 and DISCONNECT 2/68
    assert sizes["CONNECT"] == (25, 91) and sizes["CONNACK"] == (4, 70) and sizes["DISCONNECT"] == (2, 68)
    # seed 003's memory is the broker's mean over the run, ours its peak: both are there
    (statistics_row,) = tables["paper_statistics"]
    broker = summary["resources"]["broker"]
    assert statistics_row["broker_rss_mean_mb"] == pytest.approx(broker["mean_rss_bytes"] / 1e6)
    assert statistics_row["broker_rss_peak_mb"] == pytest.approx(broker["peak_rss_bytes"] / 1e6)
    (rtt,) = tables["rtt"]
    assert rtt["qos"] == 0 and rtt["payload_bytes"] == 1 and rtt["rtt_mean_ms"] > 0  # one byte, as the seed's
    # The scenario asked for a capture: made when tshark is here, else the run went on and says why.
    (first, *_) = tables["bundling"]
    if summary["capture"].get("error"):
        assert "options.capture" in first["note"]
    else:
        assert {row["type"] for row in tables["bundling"]} >= {"PUBLISH"}


def test_one_message_runs_get_the_sd_of_their_means_as_seed001s_diffusion(tmp_path):
    scenario = {
        "publishers": {"count": 1, "topic": "diffusion/0", "qos": 1, "rate": 50, "messages": 1, "inflight": 1},
        "subscribers": {"count": 5, "filters": ["diffusion/0"], "qos": 1},
        "load": {"duration": "5s", "warmup": "0s", "grace": "1s"},
    }
    directories = []
    for repetition in range(3):  # one scenario name, three repetitions
        (tmp_path / f"rep-{repetition}").mkdir()
        directories.append(run(tmp_path / f"rep-{repetition}", "diffusion", scenario))
    comparison = compare_directories(directories)
    (row,) = all_tables(comparison)["paper_statistics"]
    means = [json.loads((d / "summary.json").read_text())["latency"]["e2e"]["mean_us"] / 1000 for d in directories]
    assert row["runs"] == 3 and row["paper_sd"] == "run means"
    assert row["latency_mean_ms"] == pytest.approx(statistics.mean(means))
    assert row["latency_sd_of_run_means_ms"] == pytest.approx(statistics.stdev(means))
    assert row["latency_sd_of_samples_ms"] is not None
