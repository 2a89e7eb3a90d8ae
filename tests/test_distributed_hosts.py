"""The Dask path across simulated hosts (tests/simulated_hosts.py): workers in network namespaces
of their own, each with its own address, host name and CLOCK_MONOTONIC (time namespaces 1000 s
and 2000 s ahead of this machine's), the broker (Mosquitto) in another namespace, the client and
the scheduler on this machine's side of the bridge.

What only happens across hosts: clock offsets measured and used, end-to-end latency recorded only
where publisher and subscriber read one clock (a host name given to two clocks included), source
addresses spread past one address's port range, and a lost host's shard marked missing."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from mqttlab import engine
from mqttlab.brokers import get_launcher
from mqttlab.distributed import connect, run_plan
from mqttlab.distributed.runner import ClusterRefused, survey
from mqttlab.planning import bind_broker, load_scenario, plan_of

from conftest import run_losing_a_worker
from simulated_hosts import SimulatedHosts, missing

_missing = missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

OFFSET_A_S, OFFSET_B_S = 1000, 2000


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hosts")
    hosts = SimulatedHosts(workdir)
    try:
        broker_host = hosts.add_host("brokerhost")
        a = hosts.add_host("hostA", addresses=2)
        b = hosts.add_host("hostB")
        launcher = get_launcher("mosquitto")
        launcher.placement = hosts.placement(broker_host)
        with launcher.start(workdir / "mosquitto") as broker:
            scheduler = hosts.start_scheduler()
            hosts.start_worker(a, scheduler, monotonic_offset_s=OFFSET_A_S)
            hosts.start_worker(b, scheduler, monotonic_offset_s=OFFSET_B_S)
            with connect(scheduler) as client:
                client.wait_for_workers(2, timeout=60)
                yield {"hosts": hosts, "a": a, "b": b, "broker": broker, "broker_ns": broker_host.namespace,
                       "scheduler": scheduler, "client": client}  # fmt: skip
    finally:
        hosts.close()


def plan_for(lab, **fields) -> engine.Plan:
    overrides = {
        "publishers.count": 4, "subscribers.count": 4, "publishers.topic": "hosts/%i",
        "subscribers.filters": ["hosts/+"], "publishers.qos": 1, "subscribers.qos": 1,
        "publishers.rate": 50, "publishers.messages": 60, "load.warmup": 0, "load.grace": "2s", "load.seed": 5,
        **fields,
    }  # fmt: skip
    broker = lab["broker"]
    scenario = load_scenario(None, overrides=overrides)
    return bind_broker(plan_of(scenario), f"mqtt://{broker.host}:{broker.port}", scenario)


def test_each_hosts_clock_offset_is_measured(lab):
    workers = {w.host: w for w in survey(lab["client"])}
    assert sorted(workers) == ["hostA", "hostB"]
    for host, offset_s in (("hostA", OFFSET_A_S), ("hostB", OFFSET_B_S)):
        clock = workers[host].clock
        assert clock is not None
        # The time namespace's offset, within the measurement's own bound (and 1 ms for the
        # readings on either side of it).
        assert abs(clock.monotonic.offset_ns - offset_s * 1e9) <= clock.monotonic.bound_ns + 1_000_000, host
        assert abs(clock.wall.offset_ns) <= clock.wall.bound_ns + 1_000_000, host  # one machine's wall clock
        assert workers[host].clock_domain == host


def test_latency_is_recorded_only_between_clients_of_one_clock(lab):
    # Fan-in: every subscriber is owed all four publishers, two of them on the other host.
    spread = run_plan(plan_for(lab), lab["client"], scheduler=lab["scheduler"])
    summary = spread.summary
    assert summary["messages"]["delivered"] == 4 * 60 * 4 and summary["messages"]["lost"] == 0
    clock = summary["distributed"]["latency_clock"]
    assert (clock["basis"], clock["pairs"], clock["cross_host_pairs"]) == ("across_hosts", 16, 8)
    assert clock["hosts"] == ["hostA", "hostB"]
    # Only same-host deliveries are timed; a latency read across the two clocks would be off by
    # 1000 s, so the largest one shows that none was.
    assert summary["latency"]["e2e"]["count"] == 4 * 60 * 2
    assert 0 < summary["latency"]["e2e"]["max_us"] < 1_000_000
    shards = summary["distributed"]["shards"]
    assert [(s["host"], s["state"]) for s in shards] == [("hostA", "completed"), ("hostB", "completed")]
    workers = {w["host"]: w for w in spread.manifest_section()["workers"]}
    assert workers["hostB"]["clock_offset"]["monotonic"]["offset_ms"] == pytest.approx(OFFSET_B_S * 1e3, abs=50)

    # Point to point keeps every pair on one host: everything is timed.
    local = run_plan(plan_for(lab, **{"subscribers.filters": ["hosts/%i"]}), lab["client"])
    assert local.summary["distributed"]["latency_clock"]["basis"] == "shared"
    assert local.summary["latency"]["e2e"]["count"] == local.summary["messages"]["delivered"] == 4 * 60


@pytest.fixture
def twin(lab):
    """A third worker on hostB's network, answering to hostB's name but reading another clock
    (a second further ahead): what a wrongly trusted clock offset looks like."""
    hosts, client = lab["hosts"], lab["client"]
    worker = hosts.start_worker(lab["b"], lab["scheduler"], monotonic_offset_s=OFFSET_B_S + 1, hostname="hostB")
    try:
        client.wait_for_workers(3, timeout=60)
        yield
    finally:
        worker.kill()
        worker.wait(timeout=10)
        deadline = time.monotonic() + 60
        while len(client.nthreads()) > 2 and time.monotonic() < deadline:
            time.sleep(0.2)


def test_a_host_name_with_two_clocks_is_caught_by_the_measured_offsets(lab, twin):
    spread = run_plan(plan_for(lab, **{"publishers.count": 6, "subscribers.count": 6}), lab["client"])
    summary = spread.summary
    assert summary["messages"]["delivered"] == 6 * 60 * 6 and summary["messages"]["lost"] == 0
    # Six subscribers, each timing only the two publishers of its own clock. Trusting the host
    # name alone would time hostB#2's messages on hostB#1's clock, a second off.
    assert summary["latency"]["e2e"]["count"] == 6 * 60 * 2
    assert summary["latency"]["e2e"]["max_us"] < 250_000
    assert summary["distributed"]["latency_clock"]["clock_domains"] == ["hostA", "hostB#1", "hostB#2"]
    assert sorted(w.clock_domain for w in survey(lab["client"])) == ["hostA", "hostB#1", "hostB#2"]


def broker_peers(lab, seen: set[str], done: threading.Event) -> None:
    port = lab["broker"].port
    while not done.is_set():
        listing = subprocess.run(["ip", "netns", "exec", lab["broker_ns"], "ss", "-Htn", "state", "established", f"( sport = :{port} )"],
                                 capture_output=True, text=True).stdout  # fmt: skip
        seen.update(line.split()[-1].rsplit(":", 1)[0] for line in listing.splitlines() if line.strip())
        time.sleep(0.05)


def test_a_host_with_more_connections_than_ports_connects_from_several_addresses(lab):
    # 60 connections per host; hostA's namespace hands out 50 source ports per address (for this
    # test only: its connections stay in TIME_WAIT for a minute, holding those ports).
    plan = plan_for(lab, **{"publishers.count": 60, "subscribers.count": 60, "subscribers.filters": ["hosts/%i"],
                            "publishers.rate": 5, "publishers.messages": 10, "publishers.qos": 0, "subscribers.qos": 0})  # fmt: skip
    a = lab["a"]
    seen: set[str] = set()
    done = threading.Event()
    watcher = threading.Thread(target=broker_peers, args=(lab, seen, done), daemon=True)
    lab["hosts"].set_port_range(a, 50000, 50049)
    try:
        with pytest.raises(ClusterRefused, match=r"host hostA would open 60 connections .* 50 source ports .* give it 2 addresses"):
            run_plan(plan, lab["client"])
        watcher.start()
        spread = run_plan(plan, lab["client"], source_addresses={"hostA": a.addresses})
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join(10)
        lab["hosts"].set_port_range(a, 32768, 60999)
    connections = spread.summary["connections"]
    assert connections["publishers"]["ok"] == connections["subscribers"]["ok"] == 60
    assert spread.summary["messages"]["delivered"] == 60 * 10
    # hostA's clients came from both of its addresses, hostB's from its one.
    assert seen == {*a.addresses, lab["b"].address}
    assert [s["source_addresses"] for s in spread.summary["distributed"]["shards"]] == [a.addresses, []]


def test_a_lost_host_leaves_its_shard_missing_and_keeps_the_rest(lab, tmp_path):
    # Last in this file: hostB's only worker is killed for good.
    client = lab["client"]
    pids = client.run(os.getpid)
    hostb_pid = next(pid for address, pid in pids.items() if f"//{lab['b'].address}:" in address)
    broker = lab["broker"]
    outcome = run_losing_a_worker(client, lab["scheduler"], f"mqtt://{broker.host}:{broker.port}", hostb_pid, tmp_path / "run")
    assert outcome.exit_code == 4, outcome.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    section = summary["distributed"]
    assert summary["status"] == "incomplete" and "1 of 2 shards missing" in summary["error"]
    assert section["missing_shards"] == [1] and [s["host"] for s in section["shards"]] == ["hostA", "hostB"]
    assert "on hostB was lost" in section["shards"][1]["reason"]
    # hostA's shard (publishers 0, 1 → subscribers 0, 1) kept everything it measured.
    assert 0 < summary["messages"]["sent"] <= 2 * 50 * 4 + 4
    assert summary["messages"]["delivered"] == summary["messages"]["sent"]
    assert section["owed_to_missing_subscribers"] == 0
