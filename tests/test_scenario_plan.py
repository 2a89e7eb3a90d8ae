"""Compiling a scenario into the engine's RunPlan, and splitting plans into shards."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttlab.engine import split_plan
from mqttlab.planning import bind_broker, default_scenario, plan_of, validate_scenario


def test_default_scenario_compiles_to_the_documented_plan():
    plan = plan_of(default_scenario())
    assert plan == {
        "broker": {"tls": None},  # where it is: bound when the broker is up
        "mqtt": {"version": 4, "username": None, "password": None, "keepalive_s": 60, "clean_start": True, "session_expiry_s": 0, "connect_timeout_ms": 10000},
        "publishers": {
            "count": 10, "client_id": "mqttlab-pub-%i", "topic": "bench/%i", "qos": 1, "retain": False, "rate": 100.0,
            "arrival": "constant", "messages": None, "payload": {"dist": "fixed", "size": 64}, "inflight": 100,
        },
        "subscribers": {"count": 10, "client_id": "mqttlab-sub-%i", "filters": ["bench/%i"], "qos": 1},
        "load": {"duration_ms": 10000, "warmup_ms": 2000, "grace_ms": 2000, "connect_rate": 0.0, "seed": 1},
        "shard": {"publishers": [0, 10], "subscribers": [0, 10]},
        "options": {"record_latency": True, "reconnect": False, "progress_interval_ms": 1000, "send_ahead_us": 50},
    }  # fmt: skip
    json.dumps(plan)  # plain JSON data only
    assert bind_broker(plan, "mqtt://127.0.0.1:1883", default_scenario())["broker"] == {"host": "127.0.0.1", "port": 1883, "tls": None}


def test_mqtts_urls_carry_the_tls_settings_and_default_port_8883():
    scenario = validate_scenario({"broker": "mqtts://localhost", "tls": {"insecure": True, "server_name": "broker"}, "mqtt": {"version": 5}})
    plan = bind_broker(plan_of(scenario), "mqtts://localhost", scenario)
    assert plan["broker"] == {
        "host": "localhost",
        "port": 8883,
        "tls": {"ca_file": None, "cert_file": None, "key_file": None, "insecure": True, "server_name": "broker"},
    }
    assert plan["mqtt"]["version"] == 5


@pytest.mark.parametrize(
    "payload, expected",
    [
        ("1KiB", {"dist": "fixed", "size": 1024}),
        ({"dist": "uniform", "min": 16, "max": "1KB"}, {"dist": "uniform", "min": 16, "max": 1000}),
        ({"dist": "normal", "mean": 64, "std": 8}, {"dist": "normal", "mean": 64.0, "std": 8.0}),
        ({"dist": "exponential", "mean": "100B"}, {"dist": "exponential", "mean": 100.0}),
    ],
)
def test_payload_settings_compile_to_the_engine_distributions(payload, expected):
    plan = plan_of(validate_scenario({"publishers": {"payload": payload}}))
    assert plan["publishers"]["payload"] == expected


def test_durations_compile_to_milliseconds():
    scenario = validate_scenario({"load": {"duration": "1m30s", "warmup": "250ms", "grace": 0}, "mqtt": {"connect_timeout": "1.5s"}})
    plan = plan_of(scenario)
    assert (plan["load"]["duration_ms"], plan["load"]["warmup_ms"], plan["load"]["grace_ms"]) == (90000, 250, 0)
    assert plan["mqtt"]["connect_timeout_ms"] == 1500


def test_split_follows_k6_segments():
    plan = plan_of(validate_scenario({"publishers": {"count": 10}, "subscribers": {"count": 3}}))
    shards = split_plan(plan, 4)
    assert [shard["shard"]["publishers"] for shard in shards] == [[0, 2], [2, 5], [5, 7], [7, 10]]
    assert [shard["shard"]["subscribers"] for shard in shards] == [[0, 0], [0, 1], [1, 2], [2, 3]]
    assert plan["shard"] == {"publishers": [0, 10], "subscribers": [0, 3]}  # the input is left alone


def test_splitting_a_shard_again_stays_inside_it():
    plan = plan_of(default_scenario())
    second_half = split_plan(plan, 2)[1]
    assert [shard["shard"]["publishers"] for shard in split_plan(second_half, 2)] == [[5, 7], [7, 10]]


@pytest.mark.parametrize("shards", [0, -1, 1.5])
def test_split_rejects_fewer_than_one_shard(shards):
    with pytest.raises(ValueError, match="shards"):
        split_plan(plan_of(default_scenario()), shards)


@given(st.integers(min_value=0, max_value=500), st.integers(min_value=0, max_value=500), st.integers(min_value=1, max_value=64))
def test_shards_tile_every_client_range_exactly_once(publishers, subscribers, shards):
    scenario = validate_scenario({"publishers": {"count": publishers}, "subscribers": {"count": max(subscribers, 1 - min(publishers, 1))}})
    plan = plan_of(scenario)
    pieces = split_plan(plan, shards)
    for role in ("publishers", "subscribers"):
        ranges = [piece["shard"][role] for piece in pieces]
        assert ranges[0][0] == 0 and ranges[-1][1] == plan[role]["count"]
        assert all(low <= high for low, high in ranges)
        assert all(ranges[k][1] == ranges[k + 1][0] for k in range(len(ranges) - 1))
        widths = [high - low for low, high in ranges]
        assert max(widths) - min(widths) <= 1  # balanced
