"""`smc explore` against real brokers on loopback: the log `learn` reads, the functional checks
passing on a healthy broker, and faults (a killed subscriber, a stopped broker) caught as
functional failures, never mixed into the latencies."""

from __future__ import annotations

import json
import threading
import time

import pytest
from typer.testing import CliRunner

from mqttlab.brokers import get_launcher
from mqttlab.cli.smc import app
from mqttlab.smc.explore import ClientRange, WalkSettings, explore, parse_client_range, parse_think, parse_weights, run_case
from mqttlab.smc.log import FAILURE_OUTCOMES, read_log, read_logs

runner = CliRunner()


@pytest.mark.parametrize("broker", ["mosquitto", "rumqttd"])
def test_explore_logs_every_message_and_all_functional_checks_pass(tmp_path, broker):
    summary = explore(broker, tmp_path, cases=2, clients=ClientRange(low=3, high=6), length=25, seed=4,
                      walk=WalkSettings(topics=3))
    assert summary.failures == {}
    logs = read_logs([tmp_path])
    assert [log.path.name for log in logs] == ["case-000.csv", "case-001.csv"]
    for log in logs:
        rows = log.rows
        assert len(rows) == log.meta.clients * 25
        assert (rows["outcome"] == "ok").all() and log.meta.extra["failures"] == []
        assert rows["ActiveMsgs"].between(1, log.meta.clients).all()
        assert set(rows["Msg"]) == {"connect", "disconnect", "publish", "subscribe", "unsubscribe"}
        publish = rows[rows["Msg"] == "publish"]
        # A subscriber that unsubscribes before the delivery is no longer owed it, so Receivers may
        # fall below Subs on an ok publish; what is owed and missing would have failed the row.
        assert publish["Subs"].sum() > 0 and publish["Receivers"].sum() > 0
        assert publish["Receivers"].between(0, log.meta.clients).all()
        assert (rows["Latency_us"] > 0).all()
        assert log.meta.broker == broker and log.meta.extra["fresh_broker"] is True


@pytest.fixture
def mosquitto(tmp_path):
    with get_launcher("mosquitto").start(tmp_path / "broker") as broker:
        yield broker


def test_the_same_seed_walks_the_same_messages(mosquitto):
    def walks(seed: int) -> dict[int, list[str]]:
        rows = run_case(mosquitto.host, mosquitto.port, 4, 20, seed=seed).rows.sort_values(["client", "k"])
        return {c: list(group["Msg"]) for c, group in rows.groupby("client")}

    first = walks(9)
    assert walks(9) == first  # each client's choices depend on (seed, client) only
    assert walks(10) != first


def test_a_broker_given_by_url_is_used_as_it_is_and_never_restarted(mosquitto, tmp_path):
    url = mosquitto.url()
    summary = explore(url, tmp_path, cases=2, clients=ClientRange(choices=(3,)), length=10, seed=1)
    metas = [read_log(path).meta for path in summary.cases]
    assert [m.broker for m in metas] == [url, url] and not any(m.extra["fresh_broker"] for m in metas)
    assert summary.failures == {} and mosquitto.is_running()


def test_a_killed_subscriber_is_reported_as_missing_delivery(mosquitto, tmp_path):
    # One topic, so every publish after client 0's subscription owes client 0 a delivery that,
    # with its connection cut behind the model's back, never comes.
    walk = WalkSettings(weights={"connect": 1, "disconnect": 0.2, "publish": 4, "subscribe": 4, "unsubscribe": 0.2},
                        topics=1, timeout_ms=300)
    result = run_case(mosquitto.host, mosquitto.port, 3, 12, seed=1, walk=walk, kill_subscriber=0)
    missing = [f for f in result.failures if f["outcome"] == "missing_delivery"]
    assert missing, result.failures
    assert all("[0]" in f["detail"] for f in missing)
    rows = result.rows
    failed = rows[rows["outcome"] == "missing_delivery"]
    assert len(failed) == len({f["row"] for f in missing}) and failed["Msg"].eq("publish").all()
    assert failed["Latency_us"].isna().all()  # no latency for an exchange that never finished
    # Written and read back, the failures stay out of the latencies learn uses.
    from mqttlab.smc.log import CaseMeta, write_log

    write_log(tmp_path / "case.csv", rows, CaseMeta("mosquitto", 3, 1))
    log = read_log(tmp_path / "case.csv")
    assert len(log.failures) == len(failed) and (log.ok_rows["outcome"] == "ok").all()


def test_a_stopped_broker_is_reported_as_functional_failures(tmp_path):
    broker = get_launcher("mosquitto").start(tmp_path / "broker")
    try:
        walk = WalkSettings(think_ms=(2.0, 6.0), topics=2, timeout_ms=500)
        threading.Timer(0.4, broker.stop).start()
        started = time.monotonic()
        result = run_case(broker.host, broker.port, 3, 300, seed=2, walk=walk)
        elapsed = time.monotonic() - started
    finally:
        broker.stop()
    assert elapsed < 20
    outcomes = {f["outcome"] for f in result.failures}
    assert "error" in outcomes and outcomes <= set(FAILURE_OUTCOMES)
    rows = result.rows
    ok = rows[rows["outcome"] == "ok"]
    assert len(ok) > 10  # the broker served before it was stopped
    assert ok["Latency_us"].notna().all()
    after = rows[rows["sent_ms"] > ok["sent_ms"].max()]
    assert len(after) > 0 and (after["outcome"] != "ok").all()
    assert any("refused" in f["detail"] or "closed" in f["detail"] for f in result.failures)


def test_cli_explore_writes_logs_that_smc_learn_reads_unchanged(tmp_path):
    logs = tmp_path / "logs"
    result = runner.invoke(app, ["explore", "--broker", "mosquitto", "--clients", "3..8", "--cases", "5",
                                 "--length", "40", "--seed", "3", "--reuse-broker", "--out", str(logs)])
    assert result.exit_code == 0, result.output
    assert "functional failures: none" in " ".join(result.output.split())
    assert json.loads((logs / "explore.json").read_text())["cases"] == 5
    learned = runner.invoke(app, ["learn", str(logs), "--out", str(tmp_path / "model")])
    assert learned.exit_code == 0, learned.output
    assert (tmp_path / "model" / "model.json").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--think", "5..1"], "--think"),
        (["--weights", "ping=1"], "--weights"),
        (["--clients", "0..4"], "--clients"),
        (["--timeout", "soon"], "--timeout"),
        (["--broker", "mosquitto,rumqttd"], "--broker"),
        (["--broker", "nosuchbroker"], "unknown broker"),
    ],
)
def test_cli_explore_names_bad_input(tmp_path, args, named):
    result = runner.invoke(app, ["explore", *args, "--cases", "1", "--length", "2", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output


def test_parsers():
    assert parse_client_range("3..100") == ClientRange(low=3, high=100)
    assert parse_client_range("5,10").choices == (5, 10)
    assert parse_think("0..500") == (0.0, 500.0) and parse_think("20") == (20.0, 20.0)
    assert parse_weights("publish=5")["publish"] == 5.0 and parse_weights("")["connect"] == 1.0
