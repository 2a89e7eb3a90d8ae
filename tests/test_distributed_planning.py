"""The parts of the distributed runner that need no cluster: who is owed what, where shards go,
clock offsets from round trips, and the combined live display."""

from __future__ import annotations

import pytest

from mqttlab import engine
from mqttlab._engine import expand_template as expand
from mqttlab._engine import topic_matches as matches
from mqttlab.distributed.clock import Offset, Sample, WorkerClock, best_estimate
from mqttlab.distributed.cluster import BadClusterSpec, parse_spec
from mqttlab.distributed.planner import (
    PlanningError,
    WorkerInfo,
    assign_source_addresses,
    check_broker_reachable_from,
    clock_basis,
    assign_clock_domains,
    limit_latency_to_shared_clock,
    parse_source_addresses,
    place_shards,
    start_margin_s,
)
from mqttlab.distributed.progress import ProgressCombiner
from mqttlab.routing import MATCH_BUDGET, owed_receivers as receivers
from mqttlab.planning import bind_broker, load_scenario, plan_of
from mqttlab.source_ports import addresses_needed


def make_plan(pubs=4, subs=4, topic="b/%i", filters=("b/%i",), host="127.0.0.1") -> engine.Plan:
    overrides = {"publishers.count": pubs, "subscribers.count": subs, "publishers.topic": topic,
                 "subscribers.filters": list(filters), "mqtt.version": 5}  # fmt: skip
    scenario = load_scenario(None, overrides=overrides)
    return bind_broker(plan_of(scenario), f"mqtt://{host}:1883", scenario)


def worker(address: str, host: str, cores: int = 4, nthreads: int = 1, ports: int = 28232) -> WorkerInfo:
    return WorkerInfo(address=address, host=host, pid=1, cores=cores, nthreads=nthreads, ephemeral_ports=ports)


def test_templates_and_wildcards_follow_the_engine():
    assert expand("bench/%i", 7, "c") == "bench/7"
    assert expand("t/%c/x", 1, "pub-1") == "t/pub-1/x"
    assert expand("100%%/%i", 2, "") == "100%/2"
    assert matches("a/+", "a/b") and not matches("a/+", "a/b/c")
    assert matches("a/#", "a") and matches("#", "a/b") and matches("+/+", "/x")
    assert not matches("#", "$SYS/x") and matches("$SYS/#", "$SYS/x")


def test_receivers_of_point_to_point_fan_in_fan_out_and_shared_groups():
    assert receivers(make_plan()).owed == [["sub:0"], ["sub:1"], ["sub:2"], ["sub:3"]]
    assert receivers(make_plan(pubs=3, subs=1, filters=("b/+",))).owed == [["sub:0"]] * 3
    assert receivers(make_plan(pubs=1, subs=3, topic="b/0", filters=("b/0",))).owed == [["sub:0", "sub:1", "sub:2"]]
    shared = receivers(make_plan(pubs=2, subs=3, filters=("$share/g/b/+",)))
    assert shared.owed == [["share:g:b/+"], ["share:g:b/+"]]
    assert shared.members["share:g:b/+"] == [0, 1, 2]


def test_receivers_past_the_match_budget_are_unknown():
    # Every publisher's topic against every distinct wildcard filter: 20,001 x 1,000 checks.
    plan = make_plan(pubs=20_001, subs=1_000, filters=("b/+/%i",))
    assert 20_001 * 1_000 > MATCH_BUDGET
    assert receivers(plan) is None
    assert receivers(make_plan(pubs=2_000, subs=1_000, filters=("b/+/%i",))) is not None


def test_shards_go_to_workers_in_host_order_with_threads_shared_per_host():
    workers = [worker("tcp://b:1", "hostB"), worker("tcp://a:2", "hostA"), worker("tcp://a:1", "hostA")]
    shards = place_shards(make_plan(pubs=6, subs=6), workers)
    assert [s.worker.address for s in shards] == ["tcp://a:1", "tcp://a:2", "tcp://b:1"]
    assert [s.publishers for s in shards] == [[0, 2], [2, 4], [4, 6]]
    # Two engines on hostA split its 4 cores; the one on hostB has them all.
    assert [s.plan["options"]["max_threads"] for s in shards] == [2, 2, 4]
    assert all(s.plan["options"].get("threads", 0) == 0 for s in shards)  # sized by each shard's load


def test_more_shards_per_worker_than_threads_is_refused():
    with pytest.raises(PlanningError, match="tcp://a:1 has 1"):
        place_shards(make_plan(), [worker("tcp://a:1", "a")], shards_per_worker=2)


def test_pairs_spanning_hosts_are_counted_and_point_to_point_stays_local():
    two_hosts = [worker("tcp://a:1", "hostA"), worker("tcp://b:1", "hostB")]
    local = place_shards(make_plan(), two_hosts)
    assert clock_basis(local, receivers(make_plan()))["basis"] == "shared"
    fan_in = make_plan(filters=("b/+",))
    crossing = clock_basis(place_shards(fan_in, two_hosts), receivers(fan_in))
    # Each subscriber is owed all 4 publishers, 2 of which run on the other host.
    assert (crossing["basis"], crossing["pairs"], crossing["cross_host_pairs"]) == ("across_hosts", 16, 8)


def test_loopback_broker_is_refused_for_workers_on_other_hosts():
    check_broker_reachable_from(make_plan(), [worker("tcp://a:1", "here")], "here")
    with pytest.raises(PlanningError, match="loopback, but workers run on there"):
        check_broker_reachable_from(make_plan(), [worker("tcp://a:1", "here"), worker("tcp://b:1", "there")], "here")


def test_a_crowded_host_connects_from_several_loopback_addresses_to_a_loopback_broker():
    plan = make_plan(pubs=300, subs=300)
    roomy = place_shards(plan, [worker("tcp://a:1", "a", ports=600)])
    assert assign_source_addresses(roomy) == {} and "source_addresses" not in roomy[0].plan["shard"]
    crowded = place_shards(plan, [worker("tcp://a:1", "a", ports=250), worker("tcp://a:2", "a", ports=250)])
    # 600 connections, 250 ports per address: three addresses, the same list for both shards
    # (the engine picks by the client's index in the whole plan).
    assert assign_source_addresses(crowded) == {"a": ["127.0.0.1", "127.0.0.2", "127.0.0.3"]}
    assert [s.plan["shard"]["source_addresses"] for s in crowded] == [["127.0.0.1", "127.0.0.2", "127.0.0.3"]] * 2
    assert crowded[0].as_dict()["source_addresses"] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert addresses_needed(150_000, 28_232) == 6


def test_a_crowded_host_of_a_remote_broker_needs_addresses_given_per_host():
    plan = make_plan(pubs=300, subs=300, host="10.0.0.9")
    with pytest.raises(PlanningError, match=r"host a would open 600 connections.*--source-addresses a=ADDR"):
        assign_source_addresses(place_shards(plan, [worker("tcp://a:1", "a", ports=500)]))
    with pytest.raises(PlanningError, match="its 1 source addresses are not enough, it needs 2"):
        assign_source_addresses(place_shards(plan, [worker("tcp://a:1", "a", ports=500)]), {"a": ["10.0.0.21"]})
    with pytest.raises(PlanningError, match="names host elsewhere, but no worker runs there"):
        assign_source_addresses(place_shards(plan, [worker("tcp://a:1", "a")]), {"elsewhere": ["10.0.0.21"]})
    shards = place_shards(plan, [worker("tcp://a:1", "a", ports=500)])
    assert assign_source_addresses(shards, {"a": ["10.0.0.21", "10.0.0.22"]}) == {"a": ["10.0.0.21", "10.0.0.22"]}
    assert shards[0].plan["shard"]["source_addresses"] == ["10.0.0.21", "10.0.0.22"]


def test_source_addresses_option_is_parsed_or_refused_naming_it():
    assert parse_source_addresses(["a=10.0.0.1, 10.0.0.2", "b=::1", "a=10.0.0.3"]) == {
        "a": ["10.0.0.1", "10.0.0.2", "10.0.0.3"], "b": ["::1"]}  # fmt: skip
    for bad, reason in (("10.0.0.1", "expected HOST=ADDR"), ("a=", "expected HOST=ADDR"), ("a=10.0.0.300", "'10.0.0.300' is not an IP address")):
        with pytest.raises(PlanningError, match=f"--source-addresses '{bad}': {reason}"):
            parse_source_addresses([bad])


def test_each_shard_records_latency_only_of_publishers_on_its_own_host():
    fan_in = make_plan(pubs=6, subs=6, filters=("b/+",))
    three = [worker("tcp://a:1", "hostA"), worker("tcp://a:2", "hostA"), worker("tcp://b:1", "hostB")]
    shards = place_shards(fan_in, three)
    limit_latency_to_shared_clock(shards)
    assert [s.plan["options"]["latency_publishers"] for s in shards] == [[0, 4], [0, 4], [4, 6]]
    basis = clock_basis(shards, receivers(fan_in))
    assert basis["basis"] == "across_hosts" and "left out of the end-to-end latencies" in basis["note"]
    # On one host every publisher shares the clock: no limit.
    alone = place_shards(fan_in, three[:2])
    limit_latency_to_shared_clock(alone)
    assert all("latency_publishers" not in s.plan["options"] for s in alone)


def timed(address: str, host: str, monotonic_s: float, bound_ms: float = 1.0) -> WorkerInfo:
    clock = WorkerClock(wall=Offset(0, int(bound_ms * 1e6)), monotonic=Offset(int(monotonic_s * 1e9), int(bound_ms * 1e6)))
    return WorkerInfo(address=address, host=host, pid=1, cores=2, nthreads=1, ephemeral_ports=28232, clock=clock)


def test_workers_of_one_host_name_with_different_monotonic_clocks_are_kept_apart():
    # hostA's two workers agree within their bounds (one clock, a little noise); hostB's two
    # report one name but read clocks 250 ms apart: a time namespace, or a name given twice.
    workers = assign_clock_domains([
        timed("tcp://a:1", "hostA", 1000.0), timed("tcp://a:2", "hostA", 1000.0015),
        timed("tcp://b:2", "hostB", 2000.25), timed("tcp://b:1", "hostB", 2000.0),
    ])  # fmt: skip
    assert {w.address: w.clock_domain for w in workers} == {
        "tcp://a:1": "hostA", "tcp://a:2": "hostA", "tcp://b:1": "hostB#1", "tcp://b:2": "hostB#2"}  # fmt: skip
    fan_in = make_plan(pubs=8, subs=8, filters=("b/+",))
    shards = place_shards(fan_in, workers)
    # Shards go out in clock order, so each clock's publishers are one contiguous range.
    assert [s.worker.address for s in shards] == ["tcp://a:1", "tcp://a:2", "tcp://b:1", "tcp://b:2"]
    limit_latency_to_shared_clock(shards)
    assert [s.plan["options"]["latency_publishers"] for s in shards] == [[0, 4], [0, 4], [4, 6], [6, 8]]
    basis = clock_basis(shards, receivers(fan_in))
    assert basis["hosts"] == ["hostA", "hostB"] and basis["clock_domains"] == ["hostA", "hostB#1", "hostB#2"]
    # Each subscriber is owed all 8 publishers: those of the other clocks are left out.
    assert (basis["pairs"], basis["cross_host_pairs"]) == (64, 4 * 4 + 2 * 6 + 2 * 6)


def test_offsets_further_apart_than_their_bounds_mean_another_clock():
    # The decision follows the bounds: 3 ms apart is one clock for bounds of 2 ms, two for 1 ms.
    loose = assign_clock_domains([timed("tcp://a:1", "h", 0.0, bound_ms=2), timed("tcp://a:2", "h", 0.003, bound_ms=2)])
    tight = assign_clock_domains([timed("tcp://a:1", "h", 0.0, bound_ms=1), timed("tcp://a:2", "h", 0.003, bound_ms=1)])
    assert {w.clock_domain for w in loose} == {"h"}
    assert [w.clock_domain for w in tight] == ["h#1", "h#2"]
    # Unmeasured workers (no clock) fall back on the host's name.
    assert [w.clock_domain for w in assign_clock_domains([worker("tcp://a:1", "h"), worker("tcp://b:1", "g")])] == ["h", "g"]


def test_start_margin_grows_with_the_busiest_shard():
    small = start_margin_s(place_shards(make_plan(pubs=2, subs=2), [worker("tcp://a:1", "a")]), connect_rate=0)
    big = start_margin_s(place_shards(make_plan(pubs=2, subs=2), [worker("tcp://a:1", "a")]), connect_rate=1)
    assert small >= 2.0 and big == pytest.approx(small - 4 / 2000 + 4)


def test_clock_offset_comes_from_the_shortest_round_trip():
    samples = [Sample(0, 1_000_500, 1_000), Sample(10_000, 1_010_050, 10_100), Sample(20_000, 1_021_000, 22_000)]
    assert best_estimate(samples) == Offset(offset_ns=1_000_000, bound_ns=50)
    with pytest.raises(ValueError):
        best_estimate([])
    clock = WorkerClock(wall=Offset(5_000_000, 250_000), monotonic=Offset(0, 250_000))
    assert clock.as_dict()["wall"] == {"offset_ms": 5.0, "bound_ms": 0.25}


def test_combined_display_waits_for_a_round_and_sums_interval_growth():
    combiner = ProgressCombiner(2, silence_s=60)

    def snapshot(sent: int, p99: int, phase: str = "measuring") -> dict:
        return {"t_s": 1.0, "phase": phase, "connected": {"publishers": 2, "subscribers": 2},
                "total": {"sent": sent}, "interval": {"e2e_p50_us": 10, "e2e_p99_us": p99}}  # fmt: skip

    combiner.add(0, snapshot(100, 500))
    assert not combiner.due()  # shard 1 has not reported this round
    combiner.add(1, snapshot(120, 900, phase="warmup"))
    assert combiner.due()
    first = combiner.combined()
    assert first["total"]["sent"] == 220 and first["interval"]["sent"] == 220
    assert first["interval"]["e2e_p99_us"] == 900 and first["phase"] == "warmup"
    assert first["connected"] == {"publishers": 4, "subscribers": 4}
    combiner.add(0, snapshot(200, 400))
    combiner.finished(1)  # a shard that is done no longer holds the round back
    assert combiner.due() and combiner.combined()["interval"]["sent"] == 100


def test_cluster_specs_are_parsed_or_refused_clearly():
    assert parse_spec("local:3") == ("local", 3)
    assert parse_spec("local") == ("local", 2)
    assert parse_spec("tcp://10.0.0.1:8786") == ("scheduler", "tcp://10.0.0.1:8786")
    assert parse_spec("sched:8786") == ("scheduler", "tcp://sched:8786")
    for bad in ("local:0", "nonsense", "http://x"):
        with pytest.raises(BadClusterSpec, match="--dask"):
            parse_spec(bad)
