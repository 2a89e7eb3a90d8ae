"""MQTT-SN through mqttlab's gateway to a real Mosquitto on loopback: the engine's MQTT-SN clients
publish and subscribe over UDP at QoS -1, 0, 1 and 2 with every topic id kind, and the delivery
accounting must come out exact."""

from __future__ import annotations

import json
import socket

import pytest

from mqttlab import _engine
from mqttlab.brokers import get_launcher
from mqttlab.brokers.gateway import GatewayLauncher, probe

PREDEFINED = {1: "sn/0", 2: "sn/1"}


def sn_plan(port: int, *, qos: int, topic_ids: str = "normal", topic="sn/%i", filters=("sn/%i",), pubs=2, subs=2,
            messages=50, rate=200.0, qos_minus_one=False) -> dict:
    return {
        "broker": {"host": "127.0.0.1", "port": port, "tls": None},
        "mqtt": {"version": 4, "username": None, "password": None, "keepalive_s": 30, "clean_start": True,
                 "session_expiry_s": 0, "connect_timeout_ms": 3000},
        "publishers": {"count": pubs, "client_id": "sn-pub-%i", "topic": topic, "qos": qos, "retain": False,
                       "rate": rate, "arrival": "constant", "messages": messages,
                       "payload": {"dist": "fixed", "size": 20}, "inflight": 100},
        "subscribers": {"count": subs, "client_id": "sn-sub-%i", "filters": list(filters), "qos": max(qos, 0)},
        "load": {"duration_ms": 0, "warmup_ms": 0, "grace_ms": 3000, "connect_rate": 0.0, "seed": 4},
        "shard": {"publishers": [0, pubs], "subscribers": [0, subs]},
        "options": {"record_latency": True, "reconnect": False, "progress_interval_ms": 200},
        "transport": {"kind": "mqtt-sn", "topic_ids": topic_ids, "predefined": {str(k): v for k, v in PREDEFINED.items()},
                      "retry_ms": 500, "qos_minus_one": qos_minus_one},
    }


def run(p: dict) -> tuple[dict, dict]:
    raw = _engine.run_shard(json.dumps(p), None)
    return json.loads(raw), json.loads(_engine.summarize(json.dumps(p), raw))


def hist_count(encoded: str) -> int:
    stats = json.loads(_engine.histogram_stats(encoded))
    return 0 if stats is None else stats["count"]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("mqttsn")
    with get_launcher("mosquitto").start(workdir / "broker") as broker:
        with GatewayLauncher().start(workdir / "gateway", broker.url(), predefined=PREDEFINED, retry_ms=500) as gw:
            yield gw


def assert_exact(raw: dict, summary: dict, *, sent: int, owed: int, qos: int = 0, first_held: int = 0) -> None:
    """Every message sent once and delivered once; at QoS 1, "at least once", a duplicate is allowed
    where the client itself sent the PUBLISH again (its PUBACK late: seen under the parallel test
    run's load), never more duplicates than retransmissions. `first_held`: at most that many
    ordering violations, each a publisher's message 0 (a gateway holding a topic's first message
    for its REGISTER, tests/test_mqttsn_gateways.py)."""
    c = raw["counters"]
    assert raw["status"] == "completed", raw.get("error")
    assert c["sent"] == sent
    assert raw["connections"]["publishers_failed"] == 0 and raw["connections"]["subscribers_failed"] == 0
    unique = sum(d["unique"] for d in raw["deliveries"])
    dups = sum(d["duplicates"] for d in raw["deliveries"])
    assert unique == owed, f"{unique} unique deliveries, {owed} owed"
    assert dups <= (c.get("retransmitted", 0) if qos == 1 else 0), f"{dups} duplicates, {c.get('retransmitted', 0)} retransmitted"
    assert c["unexpected"] == 0
    violations = dict(raw.get("violations") or {})
    ordering = violations.pop("ordering", None) if first_held else None
    assert not violations, violations
    if ordering is not None:
        assert ordering["count"] <= first_held and " message 0 arrived after" in ordering["example"], ordering
    assert hist_count(raw["histograms"]["e2e"]) == owed


@pytest.mark.parametrize("qos,topic_ids", [(0, "normal"), (1, "short"), (2, "predefined"), (1, "normal"), (2, "normal")])
def test_publish_subscribe_through_the_gateway_is_exact(gateway, qos, topic_ids):
    topic, filters = ("s%i", ("s%i",)) if topic_ids == "short" else ("sn/%i", ("sn/%i",))
    raw, summary = run(sn_plan(gateway.port, qos=qos, topic_ids=topic_ids, topic=topic, filters=filters))
    assert_exact(raw, summary, sent=100, owed=100, qos=qos)
    if qos == 1:
        assert raw["counters"]["acked"] == 100
        assert hist_count(raw["histograms"]["puback"]) == 100
    if qos == 2:
        assert raw["counters"]["acked"] == 100
        assert hist_count(raw["histograms"]["pubcomp"]) == 100
    assert hist_count(raw["histograms"]["connack"]) == 4
    assert hist_count(raw["histograms"]["suback"]) == 2


@pytest.mark.parametrize("qos,complete_on", [(0, "delivery"), (1, "ack"), (2, "delivery")])
def test_a_closed_loop_publisher_sends_each_message_when_the_one_before_completed(gateway, qos, complete_on):
    # MQTT-SN on the same pacing seam as MQTT: no rate, one message at a time; had the publisher
    # not been told of each completion, it would stop after its first message.
    p = sn_plan(gateway.port, qos=qos, messages=30)
    p["publishers"] |= {"arrival": "closed", "complete_on": complete_on, "rate": 0.0}
    raw, summary = run(p)
    assert_exact(raw, summary, sent=60, owed=60, qos=qos)
    assert raw["counters"]["completion_timeouts"] == 0 and raw["counters"]["dropped"] == 0


def test_qos_minus_one_publishes_without_a_connection(gateway):
    raw, summary = run(sn_plan(gateway.port, qos=0, topic_ids="predefined", qos_minus_one=True))
    assert_exact(raw, summary, sent=100, owed=100)
    # Only the two subscribers connected: QoS -1 publishers send no CONNECT.
    assert hist_count(raw["histograms"]["connack"]) == 2


def test_a_wildcard_subscriber_learns_topic_ids_from_the_gateways_register(gateway):
    # Fan-in: the subscriber's filter has no id, so the gateway REGISTERs each topic to it.
    raw, summary = run(sn_plan(gateway.port, qos=1, pubs=3, subs=1, filters=("sn/+",), messages=20))
    assert_exact(raw, summary, sent=60, owed=60, qos=1)


def test_the_gateway_answers_connect_and_rejects_garbage(gateway):
    assert probe(gateway.host, gateway.port)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1.0)
        s.connect((gateway.host, gateway.port))
        # A PINGREQ from a client without a session is answered with DISCONNECT.
        s.send(bytes([0x02, 0x16]))
        assert s.recv(16) == bytes([0x02, 0x18])
        # A malformed datagram (length says 9, 2 bytes arrive) gets no answer at all.
        s.send(bytes([0x09, 0x16]))
        with pytest.raises(socket.timeout):
            s.recv(16)
    assert gateway.is_running()


def test_a_plan_with_mqtt_sn_problems_is_refused_naming_the_fields(gateway):
    p = sn_plan(gateway.port, qos=1, topic_ids="normal", qos_minus_one=True)
    with pytest.raises(ValueError) as e:
        run(p)
    assert "publishers.qos" in str(e.value) and "transport.topic_ids" in str(e.value)
    p = sn_plan(gateway.port, qos=0, topic_ids="short", topic="long/%i")
    with pytest.raises(ValueError, match="publishers.topic"):
        run(p)


def test_mqttlab_run_with_transport_mqtt_sn_starts_the_gateway_and_counts_every_message(tmp_path):
    # `mqttlab run` as a user runs it: a scenario with transport mqtt-sn against mosquitto.
    from cli_runs import run_scenario  # tests/ is on sys.path (no package)

    done, out = run_scenario(
        tmp_path,
        "name: sn-smoke\nbroker: mosquitto\ntransport: {kind: mqtt-sn, topic_ids: short}\n"
        "publishers: {count: 2, topic: 's%i', qos: 1, rate: 50, payload: 20}\n"
        "subscribers: {count: 2, filters: ['s%i'], qos: 1}\n"
        "load: {duration: 1.5s, warmup: 0.5s, grace: 1s}\n",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    messages = summary["messages"]
    assert summary["status"] == "completed"
    assert messages["sent"] > 0 and messages["lost"] == 0 and messages["duplicated"] == 0
    assert messages["delivered"] == messages["expected"]
    assert summary["latency"]["puback"]["count"] > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["gateway"]["name"] == "mqttlab-gateway"
    assert "datagrams in" in (out / "gateway" / "gateway.log").read_text()  # stopped cleanly, counters written
