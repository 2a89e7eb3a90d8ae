"""The Dask path against a real LocalCluster (worker processes) and a real Mosquitto on loopback:
the same counts as one process, a lost worker reported as a missing shard, refusals before load."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import psutil
import pytest
import yaml
from typer.testing import CliRunner

from mqttlab import _version, engine
from mqttlab.brokers import get_launcher
from mqttlab.brokers.base import free_ports
from mqttlab.cli.app import app
from mqttlab.distributed import VersionMismatch, connect, run_plan
from mqttlab.distributed.runner import DistributedOutcome, judged_without_missing
from mqttlab.planning import bind_broker, load_scenario, plan_of

from conftest import run_losing_a_worker


@pytest.fixture(scope="module")
def mosquitto(tmp_path_factory):
    with get_launcher("mosquitto").start(tmp_path_factory.mktemp("mosquitto")) as broker:
        yield broker


@pytest.fixture(scope="module")
def cluster():
    with connect("local:2") as client:
        yield client


def fan_in_plan(port: int, **fields) -> engine.Plan:
    # Every subscriber is owed every publisher's messages, so pairs span the two shards.
    overrides = {
        "publishers.count": 4, "subscribers.count": 4, "publishers.topic": "dist/%i",
        "subscribers.filters": ["dist/+"], "publishers.qos": 1, "subscribers.qos": 1,
        "publishers.rate": 100, "publishers.messages": 60, "load.warmup": 0, "load.grace": "2s",
        "load.seed": 11, **fields,
    }  # fmt: skip
    scenario = load_scenario(None, overrides=overrides)
    return bind_broker(plan_of(scenario), f"mqtt://127.0.0.1:{port}", scenario)


def test_two_workers_count_the_same_as_one_process(mosquitto, cluster):
    plan = fan_in_plan(mosquitto.port)
    single = engine.run(plan)
    shown: list[dict] = []
    spread = run_plan(plan, cluster, progress=shown.append)

    for key in ("sent", "expected", "delivered", "lost", "duplicated"):
        assert spread.summary["messages"][key] == single.summary["messages"][key], key
    assert spread.summary["messages"]["delivered"] == 4 * 60 * 4
    assert spread.summary["latency"]["e2e"]["count"] == single.summary["latency"]["e2e"]["count"] == 960
    assert [s["state"] for s in spread.summary["distributed"]["shards"]] == ["completed", "completed"]
    assert spread.summary["distributed"]["latency_clock"]["basis"] == "shared"
    # The display was fed the sum of both shards' totals.
    assert shown and shown[-1]["total"]["sent"] == 240 and shown[-1]["shards_reporting"] == 2
    # Every worker is named with its share in the manifest section.
    section = spread.manifest_section()
    assert sorted(s for w in section["workers"] for s in w["shards"]) == [0, 1]
    assert all(w["host"] and w["clock_offset"]["wall"]["bound_ms"] >= 0 for w in section["workers"])


def test_shards_connect_from_the_given_source_addresses(mosquitto, cluster):
    # Both local workers run on this host; giving it two loopback addresses, the broker must see
    # clients from both and from no other.
    host = socket.gethostname()
    seen: set[str] = set()
    done = threading.Event()

    def watch_peers() -> None:
        broker = psutil.Process(mosquitto.pid)
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            seen.update(c.raddr.ip for c in broker.net_connections(kind="tcp") if c.raddr and c.status == psutil.CONN_ESTABLISHED)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_peers, daemon=True)
    watcher.start()
    try:
        spread = run_plan(fan_in_plan(mosquitto.port), cluster, source_addresses={host: ["127.0.0.2", "127.0.0.3"]})
    finally:
        done.set()
        watcher.join(10)
    assert spread.summary["messages"]["delivered"] == 4 * 60 * 4
    assert seen == {"127.0.0.2", "127.0.0.3"}
    assert [s["source_addresses"] for s in spread.summary["distributed"]["shards"]] == [["127.0.0.2", "127.0.0.3"]] * 2


def test_latency_is_recorded_only_for_the_publishers_sharing_the_clock(mosquitto):
    # What a shard on a host with publishers 0 and 1 does: deliveries of 2 and 3 count, their
    # latencies (another host's clock) do not.
    plan = fan_in_plan(mosquitto.port)
    plan["options"]["latency_publishers"] = [0, 2]
    outcome = engine.run(plan)
    assert outcome.summary["messages"]["delivered"] == 4 * 60 * 4
    assert outcome.summary["latency"]["e2e"]["count"] == 2 * 60 * 4


def test_workers_with_another_mqttlab_version_are_refused_by_name(mosquitto, cluster):
    address = sorted(cluster.nthreads())[0]
    real = _version.VERSION

    def set_version(value: str) -> None:
        _version.VERSION = value

    cluster.run(set_version, "0.0.0-other", workers=[address])
    try:
        with pytest.raises(VersionMismatch) as refused:
            run_plan(fan_in_plan(mosquitto.port), cluster)
    finally:
        cluster.run(set_version, real, workers=[address])
    assert address in str(refused.value) and "0.0.0-other" in str(refused.value) and real in str(refused.value)


def test_unreachable_scheduler_fails_with_one_line(tmp_path):
    (port,) = free_ports(1)
    outcome = CliRunner().invoke(app, ["run", "--dask", f"tcp://127.0.0.1:{port}", "-o", str(tmp_path / "r")])
    assert outcome.exit_code == 3
    lines = outcome.output.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0]
    assert not (tmp_path / "r").exists()


def test_killed_worker_leaves_its_shard_missing_and_the_run_failed(mosquitto, tmp_path):
    with connect("local:2") as client:
        pids = client.run(os.getpid)
        scheduler = client.scheduler.address
        # Shards are placed on workers in address order: shard 1 lives on the last one.
        victim = pids[sorted(pids)[-1]]
        outcome = run_losing_a_worker(client, scheduler, f"mqtt://127.0.0.1:{mosquitto.port}", victim, tmp_path / "run")
    assert outcome.exit_code == 4, outcome.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    section = summary["distributed"]
    assert summary["status"] == "incomplete" and "1 of 2 shards missing" in summary["error"]
    # The engine wrote that status (the runner marked the merged result before summarising), so
    # the summary is one the engine's schema allows.
    schema = json.loads((Path(__file__).resolve().parent.parent / "docs" / "schema" / "summary.schema.json").read_text())
    jsonschema.validate(summary, schema)
    assert section["missing_shards"] == [1]
    assert [s["state"] for s in section["shards"]] == ["completed", "missing"]
    # Shard 0 (publishers 0, 1 → subscribers 0, 1) kept its load (2 × 50/s × 4 s when unhurried).
    assert 0 < summary["messages"]["sent"] <= 404
    assert summary["messages"]["delivered"] == summary["messages"]["sent"]
    assert section["owed_to_missing_subscribers"] == 0
    assert {w["host"] for w in manifest["distributed"]["workers"]} == set(section["hosts"])

    # Asked to accept missing shards, the same figures judge the run by what came back.
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    accepted = DistributedOutcome(plan={}, result=result, summary=summary)
    assert judged_without_missing(accepted)["status"] == "completed"


def test_a_suite_with_dask_local_runs_every_run_on_one_shared_cluster(tmp_path):
    suite = {
        "name": "dask-suite", "brokers": ["mosquitto"], "repetitions": 2,
        "base": {"publishers": {"count": 2, "topic": "ds/%i", "rate": 50, "messages": 40},
                 "subscribers": {"count": 2, "filters": ["ds/%i"]}, "load": {"warmup": "0s", "grace": "1s"}},
        "scenarios": {"p2p": {}},
    }  # fmt: skip
    suite_file = tmp_path / "dask-suite.yaml"
    suite_file.write_text(yaml.safe_dump(suite))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "mqttlab", "suite", "run", str(suite_file), "--out", str(out), "--dask", "local:2", "--no-report"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = sorted((out / "runs").rglob("manifest.json"))
    assert len(runs) == 2
    schedulers = set()
    for path in runs:
        manifest = json.loads(path.read_text())
        summary = json.loads((path.parent / "summary.json").read_text())
        assert summary["messages"]["delivered"] == 2 * 40
        assert [s["state"] for s in manifest["distributed"]["shards"]] == ["completed", "completed"]
        schedulers.add(manifest["distributed"]["scheduler"])
    # One local cluster served both runs: both name the same scheduler address.
    (scheduler,) = schedulers
    assert scheduler.startswith("tcp://127.0.0.1:")



def test_ctrl_c_stops_the_shards_on_the_workers_and_keeps_what_they_measured(mosquitto, cluster, tmp_path, start_until_load):
    # Only the client gets the SIGINT, as when the workers run on other hosts: the shards must
    # stop because the client asked them to, not run out their 60 s.
    out = tmp_path / "run"
    child = start_until_load(
        [sys.executable, "-m", "mqttlab", "run", "--dask", cluster.scheduler.address,
         "--broker", f"mqtt://127.0.0.1:{mosquitto.port}", "-P", "4", "-S", "4", "-t", "stop/%i", "-f", "stop/%i",
         "-q", "1", "-r", "50", "-d", "60s", "--warmup", "0s", "-o", str(out)],
    )  # fmt: skip
    try:
        interrupted_at = time.monotonic()
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
        took = time.monotonic() - interrupted_at
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert child.returncode == 130, stderr
    assert took < 20, f"the run took {took:.0f} s to stop"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert [s["state"] for s in summary["distributed"]["shards"]] == ["completed", "completed"]
    # A few seconds of 4 × 50 msg/s, not a minute's; what was sent before the stop arrived (QoS 1).
    assert 0 < summary["messages"]["sent"] < 4 * 50 * 30
    assert summary["messages"]["delivered"] == summary["messages"]["sent"]
    assert not any(cluster.processing().values()), "a shard is still running on a worker"


def test_ctrl_c_in_a_terminal_with_a_local_cluster_keeps_the_results(tmp_path, start_until_load):
    # A terminal sends Ctrl-C to the whole process group, local worker processes included: they
    # must leave it to the client, which stops the shards and writes what they measured.
    out = tmp_path / "run"
    child = start_until_load(
        [sys.executable, "-m", "mqttlab", "run", "--dask", "local:2", "--broker", "mosquitto",
         "-P", "4", "-S", "4", "-t", "pg/%i", "-f", "pg/%i", "-q", "1", "-r", "50", "-d", "60s", "--warmup", "0s",
         "-o", str(out)],
        start_new_session=True,
    )  # fmt: skip
    try:
        os.killpg(child.pid, signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
    assert child.returncode == 130, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert [s["state"] for s in summary["distributed"]["shards"]] == ["completed", "completed"]
    assert 0 < summary["messages"]["delivered"] == summary["messages"]["sent"] < 4 * 50 * 30
