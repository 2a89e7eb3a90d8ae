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
    # 20 a second over 3 s: 60 visits (the last may still be on its way when the load ends).
    assert 55 <= counts["opened"] <= 61 and counts["failed"] == 0 and counts["completed"] == counts["opened"]
    for measure in ("churn_connack", "churn_suback", "churn_unsuback"):
        assert latency[measure]["count"] == counts["opened"], measure
    # The steady clients' own CONNACKs and SUBACKs are theirs alone.
    assert latency["connack"]["count"] == 4 and latency["suback"]["count"] == 2
    messages = summary["messages"]
    assert messages["delivered"] == messages["expected"] == messages["sent"] and messages["lost"] == 0


def test_churn_that_cannot_work_is_refused_with_every_problem_named() -> None:
    with pytest.raises(ScenarioError) as refused:
        validate_scenario({"churn": {"rate": 0, "clients": 0}})
    assert {p.path for p in refused.value.problems} >= {"churn.rate", "churn.clients"}
    with pytest.raises(ScenarioError) as refused:
        validate_scenario({"mqtt": {"version": 5}, "churn": {"rate": 10, "clean_start": False, "subscribe": "$share/g/x"}})
    assert {p.path for p in refused.value.problems} >= {"churn.clean_start", "churn.subscribe"}
