"""Wills (publishers.will): publishers with a last will leave at a time of the load, ungracefully
or not, watched by subscribers; a will owed once per ungraceful exit and watcher, none after a
DISCONNECT, not before an MQTT 5 delay. On real Mosquitto (each way of leaving), and against a
scripted broker that publishes a will after a graceful DISCONNECT (named with its count)."""

from __future__ import annotations

from pathlib import Path

import pytest

import mqttlab
from mqttlab.brokers import get_launcher
from mqttlab.exits import Exit
from mqttlab.planning import validate_scenario
from mqttlab.scenario import ScenarioError
from scripted_mqtt import ScriptedBroker  # tests/ is on sys.path (no package)

needs_mosquitto = pytest.mark.skipif(not get_launcher("mosquitto").find(), reason="mosquitto is not installed (scripts/install-brokers.sh)")

# 4 publishers (QoS 0, so a reset that cuts a message short breaks no promise), half of them leave
# at 1 s; 2 subscribers watch the wills beside the publishers' own topics.
WILLS = {
    "publishers.count": 4, "publishers.qos": 0, "publishers.rate": 20, "publishers.topic": "w/%i",
    "subscribers.count": 2, "subscribers.filters": ["w/#", "will/#"], "load.duration": "2s", "load.warmup": "0s",
}  # fmt: skip


def will(leave: str, **more) -> dict:
    return {"publishers.will": {"topic": "will/%i", "qos": 1, "leave": leave, "at": "1s", "fraction": 0.5, **more}}


def verdicts(summary: dict) -> dict[str, dict]:
    return {v["name"]: v for v in summary["promises"]}


@needs_mosquitto
@pytest.mark.parametrize("leave", ["close", "reset"])
def test_an_ungraceful_exit_has_its_will_delivered_once_to_every_watcher(leave: str, tmp_path: Path) -> None:
    result = mqttlab.run(None, broker="mosquitto", set={**WILLS, **will(leave)}, out=tmp_path / "run")
    wills = result.summary["wills"]
    # 2 publishers left, 2 watchers each: 4 wills owed, each came once, within a second.
    assert (wills["exits"], wills["expected"], wills["delivered"], wills["missing"], wills["duplicated"], wills["unexpected"]) == (2, 4, 4, 0, 0, 0)
    assert result.summary["latency"]["will"]["count"] == 4 and result.summary["latency"]["will"]["max_us"] < 1_000_000
    assert verdicts(result.summary)["will_missing"]["verdict"] == "kept"
    assert result.summary["messages"]["unexpected"] == 0  # the wills are not taken for stray messages
    assert result.exit_code == Exit.OK


@needs_mosquitto
def test_a_graceful_exit_has_no_will(tmp_path: Path) -> None:
    result = mqttlab.run(None, broker="mosquitto", set={**WILLS, **will("graceful")}, out=tmp_path / "run")
    wills = result.summary["wills"]
    assert (wills["exits"], wills["graceful"], wills["expected"], wills["unexpected"]) == (2, 2, 0, 0)
    assert verdicts(result.summary)["will_unexpected"] == {**verdicts(result.summary)["will_unexpected"], "verdict": "kept", "kept": 2, "broken": 0}


@needs_mosquitto
def test_a_silent_client_has_its_will_and_is_judged_against_one_and_a_half_keep_alives(tmp_path: Path) -> None:
    silent = {**WILLS, **will("silent"), "mqtt.keepalive": 2, "load.grace": "6s"}
    result = mqttlab.run(None, broker="mosquitto", set=silent, out=tmp_path / "run")
    wills, latency = result.summary["wills"], result.summary["latency"]["will"]
    assert wills["delivered"] == 4
    # Not before the broker could know (1.5 x 2 s after the last packet it read, just before the exit).
    assert latency["min_us"] >= 2_900_000
    # The rule: within 1.5 x the keep-alive + 0.1 s; each will past it is counted (Mosquitto 2.0.11
    # here takes about 4 to 5 s: second-granular keep-alive checks).
    deadline_us = 3_100_000
    late = verdicts(result.summary)["will_late"]
    if latency["min_us"] > deadline_us:
        assert (late["verdict"], late["broken"]) == ("broken", 4)
    elif latency["max_us"] <= deadline_us:
        assert (late["verdict"], late["broken"]) == ("kept", 0)
    else:
        assert 0 < late["broken"] < 4


@needs_mosquitto
def test_an_mqtt5_will_delay_is_respected(tmp_path: Path) -> None:
    delayed = {**WILLS, **will("close", delay="1s"), "mqtt.version": 5, "load.grace": "3s"}
    result = mqttlab.run(None, broker="mosquitto", set=delayed, out=tmp_path / "run")
    assert result.summary["wills"]["delivered"] == 4 and result.summary["wills"]["early"] == 0
    assert result.summary["latency"]["will"]["min_us"] >= 1_000_000
    assert verdicts(result.summary)["will_early"]["verdict"] == "kept"


def test_a_broker_that_publishes_a_will_after_disconnect_is_named_with_the_count(tmp_path: Path) -> None:
    with ScriptedBroker(will_on_disconnect=True) as broker:
        result = mqttlab.run(None, broker=f"mqtt://127.0.0.1:{broker.port}", set={**WILLS, **will("graceful")}, out=tmp_path / "run")
    unexpected = verdicts(result.summary)["will_unexpected"]
    assert (unexpected["verdict"], unexpected["broken"]) == ("broken", 4)
    assert result.exit_code == Exit.FINDINGS


def test_wills_that_cannot_work_are_refused_with_every_problem_named() -> None:
    with pytest.raises(ScenarioError) as refused:
        validate_scenario({"load": {"duration": "5s"}, "options": {"reconnect": True},
                           "publishers": {"will": {"topic": "will/%i", "leave": "silent", "at": "4s", "delay": "2s"}}})
    fields = {problem.path for problem in refused.value.problems}
    # A delay without MQTT 5; silent with a 60 s keep-alive cannot be noticed before the run ends;
    # a publisher that leaves must not reconnect.
    assert {"publishers.will.delay", "publishers.will.at", "publishers.will.leave"} <= fields


@needs_mosquitto
def test_the_flags_make_the_common_form(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from mqttlab.cli import app as cli_app

    result = CliRunner().invoke(cli_app.app, ["run", "--broker", "mosquitto", "--pubs", "2", "--subs", "1", "--rate", "10", "--qos", "0",
                                              "--topic", "w/%i", "--filter", "w/+", "--filter", "will/#", "--will-leave", "close",
                                              "--will-at", "1s", "--duration", "2s", "--warmup", "0s", "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output[-2000:]
    wills = json.loads((tmp_path / "run" / "summary.json").read_text())["wills"]
    assert (wills["exits"], wills["expected"], wills["delivered"]) == (2, 2, 2)  # on will/%i, the flag's topic
