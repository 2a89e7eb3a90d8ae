"""Persistence (launch.persistence, docs/state.md): brokers launched with their persistence on or
off, and what survives a broker restart (the broker-restart fault) judged against what the
broker's documentation promises: on real Mosquitto and HiveMQ, persistence on keeps the
sessions, the queued messages of subscribers away across a clean stop and the retained
messages, persistence off keeps none of them (not promised, so no broken promise); a broker
without persistence (RMQTT as run here) keeps nothing either, and refuses the option with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mqttlab
from cli_runs import invoke, said  # tests/ is on sys.path (no package)
from mqttlab.brokers import get_launcher
from mqttlab.brokers.mosquitto import MosquittoLauncher
from mqttlab.brokers.base import Ports
from mqttlab.planning import load_scenario
from mqttlab.preflight import broker_problems
from mqttlab.restart_survival import judge, without_explained

needs_mosquitto = pytest.mark.skipif(not get_launcher("mosquitto").find(), reason="mosquitto is not installed (scripts/install-brokers.sh)")
needs_rmqtt = pytest.mark.skipif(not get_launcher("rmqtt").find(), reason="rmqtt is not installed (mqttlab brokers install rmqtt: a long cargo build)")
needs_hivemq = pytest.mark.skipif(not get_launcher("hivemq").find(), reason="hivemq is not installed (mqttlab brokers install hivemq)")

CLEAN_STOP = {"kind": "broker-restart", "at": "2s", "duration": "1s", "signal": "term"}
# Five subscribers leave their persistent sessions at 1 s and are due back while the broker is
# down (it stops at 2 s), so they come back as soon as it serves again: what they are owed was
# published before the restart and had to survive it.
AWAY_ACROSS = {
    "mqtt.clean_start": False, "options.reconnect": True, "load.warmup": "0s", "load.grace": "1s",
    "publishers.count": 5, "subscribers.count": 5, "publishers.rate": 100, "publishers.topic": "state/%i",
    "subscribers.filters": ["state/%i"], "subscribers.offline": {"at": "1s", "duration": "1.5s"},
}  # fmt: skip
# Twenty retained topics set twice before a clean stop at 1.5 s, read by five subscribers at 3.5 s.
READ_AFTER = {
    "options.reconnect": True, "load.warmup": "0s", "load.duration": "4s", "load.grace": "1s",
    "publishers.count": 20, "publishers.topic": "stored/%i", "publishers.rate": 2, "publishers.messages": 2, "publishers.retain": True,
    "subscribers.count": 5, "subscribers.filters": ["stored/#"], "subscribers.retained": {"at": "3.5s"},
    "faults": [{**CLEAN_STOP, "at": "1.5s"}],
}  # fmt: skip


def restart_verdicts(summary: dict) -> dict[str, dict]:
    return {v["what"]: v for v in summary["promises"] if v["name"].startswith("restart_")}


@needs_mosquitto
@pytest.mark.parametrize("persistence", [True, False])
def test_mosquitto_keeps_sessions_and_queues_across_a_clean_stop_only_with_persistence(tmp_path: Path, persistence: bool) -> None:
    result = mqttlab.run(None, broker="mosquitto", set={**AWAY_ACROSS, "load.duration": "5s", "faults": [CLEAN_STOP],
                                                        "launch.persistence": persistence}, out=tmp_path / "run")
    verdicts = restart_verdicts(result.summary)
    sessions, queued = verdicts["sessions"], verdicts["queued"]
    assert sessions["of"] == 5 and queued["of"] >= 300  # 100 msg/s from each of 5 publishers for 1 s before the stop
    if persistence:
        # mosquitto.conf(5): the database is written when mosquitto closes, so a clean stop keeps all.
        assert (sessions["verdict"], sessions["kept"]) == ("kept", 5)
        assert (queued["verdict"], queued["kept"], queued["broken"]) == ("kept", queued["of"], 0)
        assert queued["allowed"] == "mosquitto persistence on, clean stop (SIGTERM): promised"
        assert result.summary["messages"]["lost"] == 0
    else:
        # In memory only: nothing survives, and nothing was promised, so nothing is broken.
        assert (sessions["verdict"], sessions["kept"], sessions["broken"], sessions["lost"]) == ("not promised", 0, 0, 5)
        assert (queued["verdict"], queued["kept"], queued["lost"]) == ("not promised", 0, queued["of"])
        assert queued["allowed"] == "mosquitto persistence off, clean stop (SIGTERM): documented lost"
    # The sessions lost with the restart are the restart's verdict, not a protocol violation, and
    # the protocol's own offline rules judge no period that spanned it.
    assert not [v for v in result.summary["violations"] if v["kind"] == "session_lost"]
    assert not [v for v in result.summary["promises"] if v["name"] in ("session_lost", "queued_lost")]
    assert not [v for v in result.summary["promises"] if v["verdict"] == "broken"]
    manifest = json.loads((result.directory / "manifest.json").read_text())
    settings = [s["setting"] for s in manifest["broker"]["config"]["settings"]]
    assert ("persistence true" in settings) is persistence and ("persistence false" in settings) is not persistence


@needs_mosquitto
def test_mosquitto_keeps_nothing_across_a_crash_between_its_saves(tmp_path: Path) -> None:
    crash = {**CLEAN_STOP, "signal": "kill"}
    result = mqttlab.run(None, broker="mosquitto", set={**AWAY_ACROSS, "load.duration": "5s", "faults": [crash], "launch.persistence": True},
                         out=tmp_path / "run")
    queued = restart_verdicts(result.summary)["queued"]
    # Saved on exit and every 1800 s: a crash 2 s in finds nothing saved, and was promised nothing.
    assert (queued["verdict"], queued["kept"]) == ("not promised", 0)
    assert queued["allowed"] == "mosquitto persistence on, crash (SIGKILL): documented lost"


@needs_mosquitto
@pytest.mark.parametrize("persistence", [True, False])
def test_mosquitto_retained_messages_survive_a_clean_stop_only_with_persistence(tmp_path: Path, persistence: bool) -> None:
    result = mqttlab.run(None, broker="mosquitto", set={**READ_AFTER, "launch.persistence": persistence}, out=tmp_path / "run")
    retained = restart_verdicts(result.summary)["retained"]
    assert retained["of"] == 100  # 20 topics for each of 5 subscribers
    if persistence:
        assert (retained["verdict"], retained["kept"]) == ("kept", 100)
    else:
        assert (retained["verdict"], retained["kept"]) == ("not promised", 0)
    # The read after the restart is judged by the restart's promise, not the protocol's retained rules.
    assert not [v for v in result.summary["promises"] if v["name"] == "retained_missing"]


@needs_hivemq
@pytest.mark.serial  # the restart must fit in the load: a JVM starting on a busy host once ran past it
def test_hivemq_in_file_mode_keeps_sessions_and_queues_across_a_clean_stop(tmp_path: Path) -> None:
    # HiveMQ stops cleanly in seconds and its JVM starts again in seconds more (docs/faults.md):
    # the subscribers stay away 4 s, so a slow stop on a busy host cannot see them back before it
    # (then their period would not span the restart), and the load lasts for them to find it again.
    # (Persistence off keeps nothing, as Mosquitto's pair above shows.)
    away = {"at": "1s", "duration": "4s"}
    result = mqttlab.run(None, broker="hivemq", set={**AWAY_ACROSS, "subscribers.offline": away, "load.duration": "16s", "faults": [CLEAN_STOP],
                                                     "launch.persistence": True}, out=tmp_path / "run")
    verdicts = restart_verdicts(result.summary)
    assert {"sessions", "queued"} <= set(verdicts), (result.summary.get("faults"), result.summary.get("offline"), result.summary.get("status"))
    sessions, queued = verdicts["sessions"], verdicts["queued"]
    # A JVM stopping slowly on a busy host may still serve a returning subscriber before it goes:
    # that period does not span the restart and is judged by the protocol's rules instead. The
    # periods that did span it are judged here, and there must be some.
    assert 1 <= sessions["of"] <= 5 and queued["of"] >= 100
    assert (sessions["verdict"], sessions["kept"]) == ("kept", sessions["of"])
    assert (queued["verdict"], queued["kept"]) == ("kept", queued["of"])


@needs_rmqtt
def test_rmqtt_keeps_its_state_in_memory_only_so_nothing_survives_and_nothing_was_promised(tmp_path: Path) -> None:
    # RMQTT as mqttlab runs it links none of its persistence plugins: a restart takes every
    # session and its queue, which the protocol, silent on restarts, does not forbid.
    result = mqttlab.run(None, broker="rmqtt", set={**AWAY_ACROSS, "load.duration": "5s", "faults": [CLEAN_STOP]}, out=tmp_path / "run")
    sessions, queued = restart_verdicts(result.summary)["sessions"], restart_verdicts(result.summary)["queued"]
    assert (sessions["verdict"], sessions["kept"], sessions["of"], sessions["broken"]) == ("not promised", 0, 5, 0)
    assert (queued["verdict"], queued["kept"], queued["broken"]) == ("not promised", 0, 0) and queued["of"] >= 300
    assert queued["allowed"] == "rmqtt persistence off, clean stop (SIGTERM): documented lost"
    assert "the protocol does not speak of restarts" in queued["rule"] and "MQTT 5 §4.1.1" in queued["rule"]
    assert not [v for v in result.summary["violations"] if v["kind"] == "session_lost"]


def test_a_kept_promise_broken_is_named_with_its_count() -> None:
    # A broker whose documentation promises its queues across a clean stop, and that delivered 90
    # of 100 messages owed to a subscriber away across it: judged from the figures as a run has them.
    plan = {"publishers": {"qos": 1}, "subscribers": {"qos": 1, "retained": None}}
    fault = {"kind": "broker-restart", "signal": "term", "applied": True, "start_s": 2.0, "end_s": 3.1}
    away = {"subscriber": 0, "left_s": 1.0, "offline_s": 2.5, "returned": True, "session_present": True, "owed": 100, "delivered": 90}
    promises = {"persistence": True, "clean": {"sessions": True, "queued": True, "retained": True}, "source": "its documentation"}
    verdicts = {v["what"]: v for v in judge(plan, fault, [away], 0.0, None, promises, "abroker")}
    assert (verdicts["sessions"]["verdict"], verdicts["sessions"]["kept"]) == ("kept", 1)
    assert (verdicts["queued"]["verdict"], verdicts["queued"]["name"], verdicts["queued"]["broken"]) == ("broken", "restart_queued_lost", 10)
    # A period that came back before the restart is not across it.
    before = {**away, "offline_s": 0.5}
    assert judge(plan, fault, [before], 0.0, None, promises, "abroker") == []
    # The sessions the restart took are the restart's to judge: the engine's session_lost less them.
    lost = judge(plan, fault, [{**away, "session_present": False}, {**away, "subscriber": 1, "session_present": False}], 0.0, None, promises, "b")
    engine_counted = [{"kind": "session_lost", "count": 3, "detail": "..."}, {"kind": "ordering", "count": 1, "detail": "..."}]
    assert without_explained(engine_counted, lost) == [{"kind": "session_lost", "count": 1, "detail": "..."}, engine_counted[1]]


def test_persistence_is_refused_with_every_problem_named_where_it_cannot_be_set(tmp_path: Path) -> None:
    rumqttd = load_scenario(None, overrides={"broker": "rumqttd", "launch.persistence": True})
    (problem,) = broker_problems(rumqttd)
    assert problem.path == "launch.persistence"
    assert problem.message == ("rumqttd cannot be launched with persistence on: rumqttd keeps its sessions and retained messages "
                               "in memory only (it has no persistence setting)")
    assert broker_problems(load_scenario(None, overrides={"broker": "rumqttd", "launch.persistence": False})) == []
    mine = tmp_path / "mosquitto.conf"
    mine.write_text("persistence true\n")
    from_file = load_scenario(None, overrides={"broker": "mosquitto", "launch.config": str(mine), "launch.persistence": True})
    assert "does not apply to a config file" in broker_problems(from_file)[0].message
    # From the command line: the flag named beside the field, with the other problems of the run.
    refused = invoke("run", "-b", "aedes", "--persistence", "--mqtt-version", "5", "--out", str(tmp_path / "run"))
    assert refused.exit_code == 2
    assert "launch.persistence (--persistence): aedes cannot be launched with persistence on: Aedes persists through" in said(refused)
    assert "mqtt.version (--mqtt-version): aedes speaks MQTT 3.1.1, not 5" in said(refused)
    nanomq = broker_problems(load_scenario(None, overrides={"broker": "nanomq", "launch.persistence": True}))
    assert "its persistence (SQLite) needs a build with cmake -DNNG_ENABLE_SQLITE=ON" in nanomq[0].message
    rmqtt = broker_problems(load_scenario(None, overrides={"broker": "rmqtt", "launch.persistence": True}))
    assert "RMQTT persists through plugins (rmqtt-session-storage for sessions and their queues" in rmqtt[0].message


def test_a_url_broker_takes_no_persistence() -> None:
    from mqttlab.scenario import ScenarioError

    with pytest.raises(ScenarioError) as refused:
        load_scenario(None, overrides={"broker": "mqtt://127.0.0.1:1883", "launch.persistence": True})
    assert "launch: applies to a broker mqttlab launches" in str(refused.value)


def test_the_launchers_write_their_persistence_settings_and_document_them(tmp_path: Path) -> None:
    mosquitto = MosquittoLauncher().configure("tuned", persistence=True)
    assert mosquitto._settings(tmp_path)[3:6] == ["persistence true", f"persistence_location {tmp_path}/", "autosave_interval 1800"]
    record = mosquitto.config_record()
    settings = [s["setting"] for s in record["settings"]]  # type: ignore[index]
    assert "persistence false" not in settings and "autosave_interval 1800" in settings
    promises = record["restart_promises"]
    assert promises["clean"] == {"sessions": True, "queued": True, "retained": True}  # type: ignore[index]
    assert promises["crash"] == {"sessions": False, "queued": False, "retained": False}  # type: ignore[index]
    # As Debian ships it, Mosquitto persists; persistence false turns that off.
    shipped = MosquittoLauncher().configure("as-shipped", persistence=False)
    assert "persistence false" in shipped._settings(tmp_path)
    assert shipped.config_record()["restart_promises"]["persistence"] is False  # type: ignore[index]
    hivemq = get_launcher("hivemq").configure("tuned", persistence=True)
    config = hivemq._config(tmp_path, Ports(plain=1883, tls=None), None)  # type: ignore[attr-defined]
    assert config.findtext("persistence/mode") == "file"
    assert get_launcher("hivemq").configure("tuned")._config(tmp_path, Ports(plain=1883, tls=None), None).findtext("persistence/mode") == "in-memory"  # type: ignore[attr-defined]
    # RMQTT as mqttlab runs it: memory only, and its per-session queue limit as configured.
    rmqtt = get_launcher("rmqtt").configure("tuned").config_record()
    assert rmqtt["restart_promises"]["persistence"] is False  # type: ignore[index]
    assert rmqtt["state_limits"] == {"queued_messages": 1_000_000}
    assert get_launcher("rmqtt").configure("as-shipped").state_limits() == {"queued_messages": 1000}
    # A broker mqttlab knows nothing about keeps its restart promises unknown rather than guessed.
    assert get_launcher("mochi").configure("tuned").config_record()["restart_promises"] == {}
