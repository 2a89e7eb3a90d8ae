"""Session takeover (subscribers.takeover): subscribers with persistent sessions open a second
connection with their own client id while the first is open. Judged by the printed rules: on real
Mosquitto and NanoMQ (the old connection closed, the session present, no message lost), and against
a scripted broker that keeps the old connection open, named with its count."""

from __future__ import annotations

from pathlib import Path

import pytest

import mqttlab
from mqttlab.brokers import get_launcher
from mqttlab.exits import Exit
from mqttlab.planning import validate_scenario
from mqttlab.scenario import ScenarioError
from scripted_mqtt import ScriptedBroker  # tests/ is on sys.path (no package)

# Two publishers → two subscribers, QoS 1, 100 msg/s each; each subscriber takes its session over
# at 1 s and again at 3.5 s.
TAKEOVER = {
    "publishers.count": 2, "subscribers.count": 2, "publishers.rate": 100, "publishers.topic": "tk/%i",
    "subscribers.filters": ["tk/%i"], "load.duration": "4s", "load.warmup": "0s", "load.grace": "2s", "mqtt.clean_start": False,
    "subscribers.takeover": {"at": "1s", "every": "2.5s"},
}  # fmt: skip


def verdict(summary: dict, promise: str) -> dict:
    return next(v for v in summary["promises"] if v["promise"] == promise)


@pytest.mark.parametrize("broker", [b for b in ("mosquitto", "nanomq") if get_launcher(b).find()])
def test_the_broker_closes_the_old_connection_and_the_session_goes_on(tmp_path: Path, broker: str) -> None:
    result = mqttlab.run(None, broker=broker, set=TAKEOVER, out=tmp_path / "run")
    takeover = result.summary["takeover"]
    # Two subscribers, two takeovers each.
    assert (takeover["taken_over"], takeover["session_present"], takeover["old_closed"], takeover["old_kept"]) == (4, 4, 4, 0)
    assert result.summary["latency"]["takeover"]["count"] == 4
    assert result.summary["messages"]["lost"] == 0 and result.summary["messages"]["delivered"] == result.summary["messages"]["expected"] > 700
    assert verdict(result.summary, "old connection closed on takeover")["verdict"] == "kept"
    assert verdict(result.summary, "session kept on takeover")["verdict"] == "kept"


def test_a_broker_that_keeps_the_old_connection_is_named_with_the_count(tmp_path: Path) -> None:
    with ScriptedBroker(keep_taken_over=True) as broker:
        result = mqttlab.run(None, broker=f"mqtt://127.0.0.1:{broker.port}", set={**TAKEOVER, "subscribers.takeover": {"at": "1s"}},
                             out=tmp_path / "run")
    closed = verdict(result.summary, "old connection closed on takeover")
    assert (closed["verdict"], closed["name"], closed["broken"], closed["kept"]) == ("broken", "takeover_old_kept", 2, 0)
    assert [v["count"] for v in result.summary["violations"] if v["kind"] == "takeover_old_kept"] == [2]
    assert result.exit_code == Exit.FINDINGS


def test_a_takeover_that_cannot_work_is_refused_with_every_problem_named() -> None:
    with pytest.raises(ScenarioError) as refused:
        validate_scenario({"mqtt": {"clean_start": True}, "subscribers": {"count": 1, "takeover": {"at": "9s", "every": "1s"},
                                                                                       "offline": {"at": "1s", "duration": "1s"}},
                           "load": {"duration": "5s"}})
    fields = {p.path for p in refused.value.problems}
    assert {"mqtt.clean_start", "subscribers.takeover.every", "subscribers.takeover.at", "subscribers.takeover"} <= fields, fields
