"""MQTT-SN through the other gateways, with the same exact accounting as through mqttlab's own
(tests/test_mqttsn.py): the Eclipse Paho MQTT-SN gateway in front of a real Mosquitto, and RSMB's
own MQTT-SN listener (seed 004's setup). Both are built from their pinned upstream sources; the
tests skip, with the reason, only where that build cannot happen (no source tarball, no network)."""

from __future__ import annotations

import json
import os

import pytest
from cli_runs import mqttlab, run_scenario  # tests/ is on sys.path (no package)
from test_mqttsn import PREDEFINED, assert_exact, hist_count, run, sn_plan

from mqttlab.analysis.runs import read_run, served_beside
from mqttlab.brokers import BrokerError, get_launcher
from mqttlab.brokers.paho_gateway import PahoGatewayLauncher
from mqttlab.brokers.sources import SourceUnavailable


def built(launcher):
    """The launcher, its program built first if needed."""
    try:
        launcher.install()
    except SourceUnavailable as error:
        pytest.skip(f"{launcher.name}: cannot be built here: {error}")
    return launcher


@pytest.fixture(scope="module", params=["paho", "rsmb"])
def gateway_port(request, tmp_path_factory):
    """(gateway name, UDP port) of a running gateway: Paho in front of Mosquitto, or RSMB."""
    workdir = tmp_path_factory.mktemp(request.param)
    if request.param == "rsmb":
        with built(get_launcher("rsmb")).start(workdir) as broker:
            yield "rsmb", broker.mqtt_sn_port
        return
    mosquitto = get_launcher("mosquitto")
    if not mosquitto.availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")
    with mosquitto.start(workdir / "broker") as broker:
        with built(PahoGatewayLauncher()).start(workdir / "gateway", broker.url(), predefined=PREDEFINED) as gw:
            assert gw.is_running()
            yield "paho", gw.port


#: RSMB 1.3.0.2 holds back QoS 1/2 messages for an MQTT-SN subscriber once a second one arrives
#: while the first is unacknowledged: the queued ones are never sent (captured: PUBLISH 43 sent,
#: 44 queued, PUBACK 43 received, nothing after; "N queued messages discarded" at DISCONNECT).
#: About one run in six of 100 messages at 200 msg/s here. Seed 004 ran QoS 0, which has no such window.
RSMB_QOS_STALL = "RSMB 1.3.0.2 stalls QoS 1/2 delivery to MQTT-SN subscribers (docs/mqtt-sn.md); seed 004 ran QoS 0"


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_subscribe_through_the_gateway_is_exact(gateway_port, qos):
    name, port = gateway_port
    if name == "rsmb" and qos > 0:
        pytest.skip(RSMB_QOS_STALL)
    raw, summary = run(sn_plan(port, qos=qos))
    assert_exact(raw, summary, sent=100, owed=100, qos=qos)
    if qos:
        assert raw["counters"]["acked"] == 100
        assert hist_count(raw["histograms"]["puback" if qos == 1 else "pubcomp"]) == 100
    assert hist_count(raw["histograms"]["connack"]) == 4


#: The Paho gateway holds a topic's first PUBLISH to a subscriber until the subscriber's REGACK
#: for it, and forwards the topic's next messages at once (MQTTGWPublishHandler.cpp): those that
#: reach it before the REGACK overtake the first. A subscriber answering REGISTER only after 5
#: messages were published received m1-m4, then m0; under the parallel test run's load the
#: engine's REGACK came after message 1 for 2 of 3 publishers. An ordering violation the engine
#: rightly counts (docs/mqtt-sn.md); allowed here only so, one a publisher, each a message 0.
PAHO_FIRST_HELD_FOR_REGACK = {"paho": 3, "rsmb": 0}


def test_fan_in_to_a_wildcard_subscriber_is_exact(gateway_port):
    # The gateway REGISTERs each publisher's topic to the subscriber, whose filter has no id.
    name, port = gateway_port
    qos = 0 if name == "rsmb" else 1
    raw, summary = run(sn_plan(port, qos=qos, pubs=3, subs=1, filters=("sn/+",), messages=20))
    assert_exact(raw, summary, sent=60, owed=60, qos=qos, first_held=PAHO_FIRST_HELD_FOR_REGACK[name])


@pytest.mark.parametrize("topic_ids", ["short", "predefined"])
def test_the_paho_gateway_maps_short_and_predefined_topic_ids(gateway_port, topic_ids):
    name, port = gateway_port
    if name != "paho":
        pytest.skip("RSMB has no predefined topic ids (refused by validation), and its short topics are measured in docs/mqtt-sn.md")
    topic, filters = ("s%i", ("s%i",)) if topic_ids == "short" else ("sn/%i", ("sn/%i",))
    raw, summary = run(sn_plan(port, qos=1, topic_ids=topic_ids, topic=topic, filters=filters))
    assert_exact(raw, summary, sent=100, owed=100, qos=1)


def test_rsmb_takes_qos_minus_one_publishes_without_a_connection(tmp_path):
    with built(get_launcher("rsmb")).start(tmp_path) as broker:
        raw, summary = run(sn_plan(broker.mqtt_sn_port, qos=0, topic_ids="short", topic="s%i", filters=("s%i",),
                                   qos_minus_one=True))
        assert_exact(raw, summary, sent=100, owed=100)
        assert hist_count(raw["histograms"]["connack"]) == 2  # only the subscribers connected


@pytest.mark.parametrize("gateway, expected_name", [("paho", "paho-mqtt-sn-gateway"), ("rsmb", "rsmb")])
def test_mqttlab_run_through_the_chosen_gateway_counts_every_message(tmp_path, gateway, expected_name):
    built(get_launcher("rsmb") if gateway == "rsmb" else PahoGatewayLauncher())
    qos = 0 if gateway == "rsmb" else 1  # RSMB_QOS_STALL
    if not get_launcher("mosquitto").availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")
    done, out = run_scenario(
        tmp_path,
        f"name: sn-{gateway}\nbroker: mosquitto\ntransport: {{kind: mqtt-sn, gateway: {gateway}}}\n"
        f"publishers: {{count: 2, topic: 'sn/%i', qos: {qos}, rate: 100, payload: 20}}\n"
        f"subscribers: {{count: 2, filters: ['sn/%i'], qos: {qos}}}\n"
        "load: {duration: 1.5s, warmup: 0.5s, grace: 1s}\n",
        "--json", timeout=120,
    )
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)["messages"]
    assert messages["sent"] > 0 and messages["lost"] == 0
    assert messages["delivered"] == messages["expected"] == messages["sent"] * 1  # one subscriber per topic
    # QoS 1 is at least once: a PUBLISH our client sent again after Tretry (its PUBACK late, as on
    # a busy host: CI once saw 74 of 300) reaches the broker as a new message, and the Paho gateway
    # resends nothing itself. So every duplicate has a retransmission of ours behind it.
    assert messages["duplicated"] <= messages["retransmitted"], messages
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["gateway"]["name"] == expected_name
    assert manifest["gateway"]["version"]
    if gateway == "rsmb":
        assert "carries none of their messages" in manifest["gateway"]["role"]


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroup limits need root")
def test_rsmb_beside_the_broker_is_held_to_its_limit_and_sampled_on_its_own(tmp_path):
    # 8 -> 8 at 1000 msg/s is 64,000 datagrams a second for RSMB to send, far more than 0.05 of a
    # core serves: a confined RSMB is throttled in most of the run's CFS periods. Read at its
    # start (as the manifest once did) its cgroup showed 1-2 periods whatever the load.
    built(get_launcher("rsmb"))
    if not get_launcher("mosquitto").availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")
    done, out = run_scenario(
        tmp_path,
        "name: sn-rsmb-limited\nbroker: mosquitto\ntransport: {kind: mqtt-sn, gateway: rsmb}\n"
        "publishers: {count: 8, topic: 'sn/t', qos: 0, rate: 1000, payload: 20}\n"
        "subscribers: {count: 8, filters: ['sn/t'], qos: 0}\n"
        "load: {duration: 3s, warmup: 0s, grace: 1s, deadline: 1s}\n"
        "launch: {limits: {cpus: 0.05, memory: 256MiB}}\n",
        "--json", timeout=180,
    )
    assert done.returncode in (0, 1), done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    resources = json.loads(done.stdout)["resources"]
    limits = manifest["gateway"]["limits"]
    assert limits["cpus"] == 0.05 and limits["memory_bytes"] == 256 * 2**20
    assert limits["periods"] >= 10 and limits["throttled_periods"] > 0, limits
    # RSMB sampled as the gateway, held to its quota (a little slack for the sampling's edges);
    # the named broker beside it carried nothing.
    assert 0 < resources["gateway"]["mean_cpu_share"] <= 0.05 * 1.3, resources
    assert resources["broker"]["mean_cpu_share"] < 0.02, resources
    # A comparison shows the run as RSMB's, with RSMB's CPU and memory, never the idle broker's.
    assert served_beside(manifest)
    run = read_run(out)
    assert run.broker.startswith("rsmb (0.05 CPU")
    assert run.figures["broker_cpu"] == resources["gateway"]["mean_cpu_share"]
    assert run.figures["broker_rss_peak"] == resources["gateway"]["peak_rss_bytes"] / 1e6


def test_runs_recorded_before_serves_clients_are_known_by_the_gateways_name():
    # Seed 004's evidence: RSMB beside Mosquitto, a gateway entry without `serves_clients`.
    beside = {"broker": {"name": "mosquitto", "pid": 495}, "gateway": {"name": "rsmb", "pid": 496}}
    assert served_beside(beside)
    assert not served_beside({"broker": {"name": "rsmb", "pid": 7}, "gateway": {"name": "rsmb", "pid": 7, "serves_clients": True}})
    assert not served_beside({"broker": {"name": "mosquitto", "pid": 5}, "gateway": {"name": "paho-mqtt-sn-gateway", "pid": 6}})
    assert not served_beside({"broker": {"name": "mosquitto", "pid": 5}})


@pytest.mark.parametrize("transport, field", [
    ("{kind: mqtt-sn, gateway: hivemq}", "transport.gateway"),
    ("{kind: mqtt-sn, gateway: paho, qos_minus_one: true, topic_ids: short}", "transport.qos_minus_one"),
    ("{kind: mqtt-sn, gateway: rsmb, topic_ids: predefined, predefined: {1: a}}", "transport.topic_ids"),
])
def test_a_gateway_that_cannot_serve_the_scenario_is_refused_naming_the_field(tmp_path, transport, field):
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(f"name: bad\nbroker: mosquitto\ntransport: {transport}\n"
                        "publishers: {count: 1, topic: 's%i', qos: 0}\nsubscribers: {count: 1, filters: ['s%i']}\n")
    done = mqttlab("scenario", "validate", str(scenario), timeout=60)
    assert done.returncode == 2
    assert field in done.stdout + done.stderr


def test_the_paho_gateway_refuses_a_tls_broker_url(tmp_path):
    with pytest.raises(BrokerError, match="broker_url"):
        PahoGatewayLauncher().start(tmp_path, "mqtts://127.0.0.1:8883")
