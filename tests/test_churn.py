"""Connection churn beside the steady load (the engine's churn.rs): clients that connect at a
rate, subscribe and unsubscribe (subscription flapping), stay a while and leave, on real brokers
(Mosquitto, NanoMQ, HiveMQ, rumqttd, RMQTT), with their CONNACK, SUBACK and UNSUBACK timed apart
from the steady clients' and the steady traffic's accounting untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

import mqttlab
from mqttlab.brokers import get_launcher
from mqttlab.planning import validate_scenario
from mqttlab.scenario import ScenarioError

# RMQTT is not built in CI (a long cargo build): its case, like any broker's not installed, skips.
BROKERS = ("mosquitto", "nanomq", "hivemq", "rumqttd", "rmqtt", "mochi")

STEADY = {"publishers.count": 2, "subscribers.count": 2, "publishers.qos": 1, "publishers.rate": 100, "load.duration": "3s",
          "load.warmup": "0s"}  # fmt: skip


@pytest.mark.parametrize("broker", BROKERS)
def test_churning_clients_are_timed_apart_and_the_steady_traffic_keeps_exact(broker: str, tmp_path: Path) -> None:
    if not get_launcher(broker).find():
        pytest.skip(f"{broker} is not installed: {get_launcher(broker).how_to_get}")
    churn = {"rate": 20, "stay": "100ms", "clients": 10, "subscribe": "churn/%i", "leave": "graceful"}
    summary = mqttlab.run(None, broker=broker, set={**STEADY, "churn": churn}, out=tmp_path / "run").summary
    counts, latency = summary["churn"], summary["latency"]
    # 20 a second over 3 s: 60 visits (the last may still be on its way when the load ends). A
    # visit still there when the next on its id (10 ids: half a second later) connects is taken over
    # by the broker (a slow broker under the parallel test run): it cannot leave, and is counted so.
    assert 55 <= counts["opened"] <= 61 and counts["failed"] == 0
    assert counts["completed"] + counts["taken_over"] == counts["opened"]
    assert not [e for e in summary["errors"] if e["kind"].startswith("churn")], summary["errors"]
    assert latency["churn_connack"]["count"] == counts["opened"]
    assert counts["completed"] <= latency["churn_suback"]["count"] <= counts["opened"]
    assert latency["churn_unsuback"]["count"] == counts["completed"]
    # The steady clients' own CONNACKs and SUBACKs are theirs alone.
    assert latency["connack"]["count"] == 4 and latency["suback"]["count"] == 2
    messages = summary["messages"]
    assert messages["delivered"] == messages["expected"] == messages["sent"] and messages["lost"] == 0


def test_a_visit_whose_id_the_next_visit_reuses_is_taken_over_not_lost(tmp_path: Path) -> None:
    # One id for every visit, each staying 300 ms, one every 50 ms: MQTT has the broker close the
    # earlier connection when the next connects with its client id [MQTT-3.1.4-2], so every visit
    # but the last is taken over, unless its successor's CONNECT reached the broker some 250 ms
    # late (CI's parallel run once had 4 of 60 visits complete with a 100 ms stay, 50 ms of slack).
    # A broker that kept both connections would have every visit complete.
    churn = {"rate": 20, "stay": "300ms", "clients": 1, "subscribe": "churn/%i", "leave": "graceful"}
    summary = mqttlab.run(None, broker="mosquitto", set={**STEADY, "churn": churn}, out=tmp_path / "run").summary
    counts = summary["churn"]
    assert counts["failed"] == 0 and counts["completed"] + counts["taken_over"] == counts["opened"] >= 55
    assert counts["taken_over"] >= 0.9 * counts["opened"] and counts["completed"] >= 1
    # A takeover is the broker keeping MQTT's rule, not an answer that never came.
    assert not [e for e in summary["errors"] if e["kind"].startswith("churn")], summary["errors"]


def test_after_the_broker_stalls_every_visit_went_through_or_was_taken_over(tmp_path: Path) -> None:
    # A frozen broker takes the CONNECTs that piled up in its own order: HiveMQ then closes some
    # visits for an *earlier* visit on their id (5 in each of 3 runs were errors when only a later
    # visit counted), so any other visit on the id under way makes a close a takeover.
    if not get_launcher("hivemq").find():
        pytest.skip(f"hivemq is not installed: {get_launcher('hivemq').how_to_get}")
    churn = {"rate": 20, "stay": "100ms", "clients": 10, "subscribe": "churn/%i", "leave": "graceful"}
    stalled = {**STEADY, "load.duration": "5s", "churn": churn, "faults": [{"kind": "broker-stall", "at": "1s", "duration": "1500ms"}]}
    summary = mqttlab.run(None, broker="hivemq", set=stalled, out=tmp_path / "run").summary
    counts = summary["churn"]
    assert counts["opened"] + counts["failed"] == 100 and counts["taken_over"] >= 10
    assert counts["completed"] + counts["taken_over"] == counts["opened"]
    # HiveMQ may also close a visit's connection before its CONNACK when a later CONNECT on its id
    # comes first (seen in 1 run of 5): a failed connect, named as one. No visit that connected is
    # an error.
    churn_errors = {e["kind"]: e["count"] for e in summary["errors"] if e["kind"].startswith("churn")}
    assert churn_errors == ({"churn_connect_closed": counts["failed"]} if counts["failed"] else {}), summary["errors"]
    messages = summary["messages"]
    assert messages["delivered"] == messages["expected"] == messages["sent"] and messages["lost"] == 0


def test_churn_that_cannot_work_is_refused_with_every_problem_named() -> None:
    with pytest.raises(ScenarioError) as refused:
        validate_scenario({"churn": {"rate": 0, "clients": 0}})
    assert {p.path for p in refused.value.problems} >= {"churn.rate", "churn.clients"}
    with pytest.raises(ScenarioError) as refused:
        validate_scenario({"mqtt": {"version": 5}, "churn": {"rate": 10, "clean_start": False, "subscribe": "$share/g/x"}})
    assert {p.path for p in refused.value.problems} >= {"churn.clean_start", "churn.subscribe"}
