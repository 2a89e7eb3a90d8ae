"""`mqttlab brokers probe`: each feature checked by a tiny real run and judged by its rule. On real
brokers (Mosquitto supports every feature; rumqttd MQTT 5 on its own listener and shared
subscriptions; Aedes, MQTT 3.1.1 only, refuses MQTT 5 and takes a $share filter literally), on a
scripted broker that breaks a promise (broken, named with its count), at an address where nothing
answers (one line, exit 3), and docs/brokers.md's matrix held to the command's output."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.brokers import available_launcher_names, get_launcher
from mqttlab.cli import brokers as brokers_cmd
from mqttlab.features import matrix
from mqttlab.features.checks import FEATURES, Measured, delivered_exactly, split_over_group
from mqttlab.features.probe import BrokerProbe, probe, select
from scripted_mqtt import ScriptedBroker  # tests/ is on sys.path (no package)

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def needs(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not get_launcher(name).find(), reason=f"{name} is not installed (scripts/install-brokers.sh)")


def results(probed: BrokerProbe) -> dict[str, tuple[str, str, str]]:
    return {entry.key: (found.result, found.reason, found.evidence) for entry, found in probed.findings}


@pytest.fixture(scope="module")
def mosquitto_probe() -> BrokerProbe:
    return probe("mosquitto")


@needs("mosquitto")
def test_mosquitto_supports_every_feature_with_the_counts_behind_it(mosquitto_probe: BrokerProbe) -> None:
    found = results(mosquitto_probe)
    assert list(found) == [entry.key for entry in FEATURES]
    assert {result for result, _, _ in found.values()} == {"supported"}
    # 2 publishers x 5 messages to 2 subscribers each; a shared group gets each message once.
    assert found["qos2"][2] == "20 of 20 delivered, 0 duplicated"
    assert found["shared"][2] == "10 of 10 delivered, 0 duplicated"
    assert found["will"][2] == "will delivered on an ungraceful exit: kept 2, broken 0"
    assert found["no-will-after-disconnect"][2] == "no will after DISCONNECT: kept 1, broken 0"
    assert mosquitto_probe.version and mosquitto_probe.configuration == "tuned; TCP, TLS, WebSocket listeners"


@needs("rumqttd")
def test_rumqttd_speaks_mqtt5_on_its_own_listener_and_shares_subscriptions_but_has_no_websocket_here() -> None:
    found = results(probe("rumqttd", select(["mqtt-5", "shared", "websocket"])))
    assert found["mqtt-5"] == ("supported", "", "20 of 20 delivered, 0 duplicated")
    assert found["shared"] == ("supported", "", "10 of 10 delivered, 0 duplicated")
    assert found["websocket"][0] == "not probed" and "without a WebSocket listener" in found["websocket"][1]


@needs("aedes")
def test_aedes_refuses_mqtt5_and_shared_subscriptions_with_the_reason() -> None:
    found = results(probe("aedes", select(["mqtt-3.1.1", "mqtt-5", "shared"])))
    assert found["mqtt-3.1.1"][0] == "supported"
    assert found["mqtt-5"][0] == "refused" and "does not speak MQTT 5" in found["mqtt-5"][1]
    assert found["shared"] == ("refused", "SUBSCRIBE to $share/... accepted, but no message came: the filter was taken literally",
                               "0 of 10 delivered, 0 duplicated")


def test_a_broker_that_loses_queued_messages_or_sends_a_will_after_disconnect_is_broken_with_the_count() -> None:
    with ScriptedBroker(drop_every=4) as broker:
        queue = results(probe(f"mqtt://127.0.0.1:{broker.port}", select(["persistent-session"])))["persistent-session"]
    assert broker.dropped > 0
    assert queue[:2] == ("broken", f"queued_lost {broker.dropped}")
    with ScriptedBroker(will_on_disconnect=True) as broker:
        will = results(probe(f"mqtt://127.0.0.1:{broker.port}", select(["no-will-after-disconnect", "tls"])))
    # The one leaver's will, after its DISCONNECT, reached both subscribers.
    assert will["no-will-after-disconnect"] == ("broken", "will_unexpected 2", "no will after DISCONNECT: kept 1, broken 2")
    assert will["tls"][0] == "not probed"  # a broker given by URL is probed at that URL only


def test_an_address_where_nothing_answers_is_one_line_and_exit_3() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed again before the probe: nothing listens there
    result = runner.invoke(brokers_cmd.app, ["probe", f"mqtt://127.0.0.1:{port}"])
    assert result.exit_code == 3
    assert result.stderr.strip() == f"error: cannot connect to mqtt://127.0.0.1:{port}: connection refused"


def test_bad_input_names_every_problem_at_once() -> None:
    result = runner.invoke(brokers_cmd.app, ["probe", "mosquitto", "--all", "--feature", "qos9,tls,nope"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: BROKER: give one broker, or --all; --feature: unknown features qos9, nope; known: "
                                     + ", ".join(entry.key for entry in FEATURES))


def test_the_judges_name_what_broke_or_refused_with_its_count() -> None:
    lost = {"messages": {"expected": 20, "delivered": 17, "received": 17, "duplicated": 0, "lost": 3},
            "violations": [{"kind": "qos1_loss", "count": 3, "detail": "..."}], "connections": {}}
    assert delivered_exactly(Measured(lost)).reason == "qos1_loss 3"
    qos0 = {"messages": {"expected": 20, "delivered": 19, "received": 19, "duplicated": 0, "lost": 1}, "violations": [], "connections": {}}
    assert (delivered_exactly(Measured(qos0)).result, delivered_exactly(Measured(qos0)).reason) == ("broken", "lost 1")
    refused = {"messages": {"expected": 10, "received": 0}, "connections": {"subscribers": {"ok": 1, "failed": 1}, "publishers": {"ok": 2, "failed": 0}},
               "errors": [{"kind": "subscribe", "count": 1, "example": "the broker refused the subscription (SUBACK reason 0x80)"}]}
    found = split_over_group(Measured(refused))
    assert (found.result, found.reason, found.evidence) == ("refused", "the broker refused the subscription (SUBACK reason 0x80)", "1 of 4 clients failed")


@needs("mosquitto")
def test_the_docs_matrix_has_the_commands_layout_and_every_available_broker(mosquitto_probe: BrokerProbe) -> None:
    doc = (ROOT / "docs" / "brokers.md").read_text()
    assert f"\n{matrix.COMMAND}\n" in doc  # the one command that regenerates it is named
    table = matrix.table_of(doc)
    fresh = matrix.table_of(f"{matrix.BEGIN}\n{matrix.markdown([mosquitto_probe], {})}\n{matrix.END}")
    assert [row[0] for row in table] == [row[0] for row in fresh]  # header, version, configuration, status, the features
    assert all(len(row) == len(table[0]) for row in table)
    assert set(available_launcher_names()) <= set(table[0][1:])
    # Mosquitto's column says what a probe of it finds now, feature by feature.
    column = table[0].index("mosquitto")
    word = lambda text: text.split(":")[0].split(" (")[0]  # noqa: E731
    assert [word(row[column]) for row in table[4:]] == [word(row[1]) for row in fresh[4:]]
    assert table[2][column] == fresh[2][1]  # its configuration


def test_the_matrix_is_written_between_its_markers_only(tmp_path: Path) -> None:
    doc = tmp_path / "brokers.md"
    doc.write_text(f"before\n{matrix.BEGIN}\nold\n{matrix.END}\nafter\n")
    matrix.write(doc, "new")
    assert doc.read_text() == f"before\n{matrix.BEGIN}\nnew\n{matrix.END}\nafter\n"
    doc.write_text("no section\n")
    with pytest.raises(matrix.MatrixError, match="no feature matrix section"):
        matrix.write(doc, "new")
