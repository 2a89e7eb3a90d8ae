"""Every launcher starts its real broker on loopback, serves a publish/subscribe round trip on
the plain and the TLS listener, reports its version, and stops it (process gone, port closed).

A broker that is not installed is installed first; the test is skipped only when its registry
cannot be reached (and for RMQTT, whose long build is an explicit step), with the reason."""

from __future__ import annotations

import re
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

from mqttlab.brokers import BrokerError, Launcher, RunningBroker, get_launcher
from mqttlab.brokers.base import Placement
from mqttlab.brokers.probe import Message, MqttProbe, ProbeError, client_tls_context, round_trip
from mqttlab.brokers.sources import SourceUnavailable

T = TypeVar("T")

LAUNCHED = ["rumqttd", "mosquitto", "rmqtt", "aedes", "amqtt", "moquette",
            "hivemq", "activemq", "rabbitmq", "ejabberd", "mochi", "nanomq", "rsmb"]

# Messages of npm, pip, apt, maven and cargo when the network or registry is out of reach.
REGISTRY_UNREACHABLE = re.compile(
    r"could not resolve|temporary failure in name resolution|name or service not known|"
    r"network is unreachable|no route to host|connection (refused|timed out|reset)|"
    r"ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|could not transfer artifact|"
    r"failed to fetch|unable to fetch|failed to download|failed to get .* from the registry|"
    r"No matching distribution found",
    re.IGNORECASE,
)


def ensure_installed(launcher: Launcher) -> None:
    if launcher.availability().available:
        return
    if launcher.name == "rumqttd":
        pytest.skip("rumqttd: the compiled engine (mqttlab._engine) is not built in this environment")
    if launcher.name == "rmqtt":
        pytest.skip("rmqtt: not installed; its build takes long, run `mqttlab brokers install rmqtt` "
                    "(or scripts/install-brokers.sh --with-rmqtt)")
    try:
        launcher.install()
    except SourceUnavailable as error:
        pytest.skip(f"{launcher.name}: cannot be built here: {error}")
    except BrokerError as error:
        if REGISTRY_UNREACHABLE.search(str(error)):
            pytest.skip(f"{launcher.name}: its registry cannot be reached: {error}")
        raise


# Moquette 0.17 (the newest release) drops a connection whose SUBSCRIBE follows its CONNACK at
# once, now and then (its log: "SUBSCRIBE received on already closed connection"): it marks the
# connection connected asynchronously. Here that hit 6% of round trips, in bursts. That is the
# broker's defect, for benchmarks to show; these tests, about the launcher, try again after a pause.
# NanoMQ 0.25.3 closes a new TLS connection instead of answering its CONNECT now and then (its
# log: "tlstran_pipe_send_start: pro_ver of the msg is not 3, 4 or 5"), and the process sometimes
# dies with it (its launcher's `connect_crash`): 1 TLS connection in about 25 closed here, and 5 of
# 10 broker lifetimes of 300 sequential connections ended so. Also the broker's defect, retried
# here like Moquette's, the broker started again if it died of it.
# rumqttd 0.20 (the embedded one) closes a connection now and then between its CONNACK and the
# SUBACK on a loaded host: 3 times in about 150 runs of these tests on 2026-11-27, none when the
# host was quiet; its cause not looked into. Retried here too: these tests judge the launcher.
KNOWN_RACES = {"moquette": "closed the connection", "nanomq": "closed the connection", "rumqttd": "closed the connection"}
RACE_TRIES = 4
RACE_PAUSE_S = 0.3


def despite_known_race(broker: RunningBroker, action: Callable[[], T]) -> T:
    """`action()`, tried again (up to RACE_TRIES in all) when it fails by the broker's known race."""
    race = KNOWN_RACES.get(broker.name)
    for attempt in range(1, RACE_TRIES + 1):
        try:
            return action()
        except ProbeError as error:
            if race is None or race not in str(error) or attempt == RACE_TRIES:
                raise
            time.sleep(RACE_PAUSE_S)
            started_again_after_known_crash(broker)
    raise AssertionError("unreachable")


def started_again_after_known_crash(broker: RunningBroker, also: tuple[str, ...] = ()) -> str | None:
    """Starts the broker again if it ended by a known crash (its launcher's `connect_crash`, or a
    line of `also`) and returns that crash's line; None if it is running. Any other death fails."""
    if broker.is_running():
        return None
    log = broker.log_file.read_text(errors="replace") if broker.log_file is not None else ""
    crash = next((line for line in (get_launcher(broker.name).connect_crash, *also) if line and line in log), None)
    assert crash is not None, f"{broker.name} has ended: {log[-1500:]}"
    broker.start_process()
    return crash


def served_round_trip(broker: RunningBroker, port: int, **options: object) -> Message:
    options.setdefault("credentials", broker.credentials)
    return despite_known_race(broker, lambda: round_trip(broker.host, port, **options))  # type: ignore[arg-type]


def login(broker: RunningBroker) -> dict[str, str]:
    return {"username": broker.credentials[0], "password": broker.credentials[1]} if broker.credentials else {}


def port_is_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module", params=LAUNCHED)
def started(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    launcher = get_launcher(request.param)
    ensure_installed(launcher)
    broker = launcher.start(tmp_path_factory.mktemp(request.param), tls=launcher.has_tls)
    yield broker
    broker.stop()


def needs_tls(broker: RunningBroker) -> None:
    if not get_launcher(broker.name).has_tls:
        assert broker.tls_port is None
        pytest.skip(f"{broker.name} has no TLS listener")


def test_broker_reports_name_version_and_loopback_listeners(started: RunningBroker) -> None:
    assert started.version and started.version.split()[0] == started.name
    assert re.search(r"\d+\.\d+", started.version)
    assert started.host == "127.0.0.1"
    assert started.url() == f"mqtt://127.0.0.1:{started.port}"
    if get_launcher(started.name).has_tls:
        assert started.url(tls=True) == f"mqtts://127.0.0.1:{started.tls_port}"
        assert started.ca_file is not None and started.ca_file.is_file()
    assert started.pid is not None and psutil.pid_exists(started.pid)
    for conn in psutil.Process(started.pid).net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN:
            assert conn.laddr.ip in ("127.0.0.1", "::ffff:127.0.0.1"), f"listens beyond loopback: {conn.laddr}"


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_plain_listener_delivers_a_published_message(started: RunningBroker, qos: int) -> None:
    if qos > started.max_qos:
        # The broker's documented defect (RabbitMQ 3.10: PUBACK for a QoS 2 PUBLISH): the exchange
        # must fail visibly, never pass as if QoS 2 had been honoured.
        with pytest.raises(ProbeError, match="answered with packet type 4"):
            served_round_trip(started, started.port, qos=qos, payload=b"x", timeout=3)
        return
    payload = f"hello {started.name} qos {qos}".encode()
    message = served_round_trip(started, started.port, qos=qos, payload=payload)
    assert message.payload == payload
    assert message.qos == qos


def test_tls_listener_delivers_a_published_message(started: RunningBroker) -> None:
    needs_tls(started)
    context = client_tls_context(str(started.ca_file))
    message = served_round_trip(started, started.tls_port, tls_context=context, payload=b"over tls")
    assert message.payload == b"over tls"


def test_tls_listener_is_refused_by_a_client_that_trusts_another_ca(started: RunningBroker) -> None:
    needs_tls(started)
    context = ssl.create_default_context()  # the system CAs, which never signed our throwaway cert
    with pytest.raises(ssl.SSLCertVerificationError):
        MqttProbe(started.host, started.tls_port, client_id="untrusting", tls_context=context)


def test_large_payload_passes_unchanged(started: RunningBroker) -> None:
    # Benchmarks use payloads far above some brokers' defaults (rumqttd: 20 kB).
    payload = bytes(range(256)) * 1024  # 256 KiB
    assert served_round_trip(started, started.port, payload=payload, timeout=15).payload == payload


def _deliver_backlog(broker: RunningBroker, count: int) -> list[int]:
    """Publishes `count` QoS 1 messages while the subscriber reads nothing, then reads them all."""
    with MqttProbe(broker.host, broker.port, client_id="slow-reader", timeout=15, **login(broker)) as reader:
        reader.subscribe("mqttlab/backlog", qos=1)
        with MqttProbe(broker.host, broker.port, client_id="fast-writer", timeout=15, **login(broker)) as writer:
            for sequence in range(count):
                writer.publish("mqttlab/backlog", sequence.to_bytes(4, "big"), qos=1)
        return [int.from_bytes(reader.receive(timeout=15).payload, "big") for _ in range(count)]


def test_backlog_beyond_default_queue_limits_is_delivered(started: RunningBroker) -> None:
    # A subscriber that does not acknowledge makes the broker queue: Mosquitto's defaults
    # (20 in flight + 1000 queued) would drop the rest, and a benchmark would count them as lost.
    count = 1500
    received = despite_known_race(started, lambda: _deliver_backlog(started, count))
    assert sorted(set(received)) == list(range(count))


@pytest.mark.parametrize("name", LAUNCHED)
def test_listeners_bind_the_placements_address(tmp_path: Path, name: str) -> None:
    # A network namespace hands the launcher another listen address (tests/test_netem.py runs
    # that path for mosquitto); 127.0.0.2 is the same check without root: every listener must
    # bind the placement's address, none may stay on 127.0.0.1.
    launcher = get_launcher(name)
    ensure_installed(launcher)
    launcher.placement = Placement(listen_host="127.0.0.2", reach_host="127.0.0.2")
    with launcher.start(tmp_path) as broker:
        assert broker.host == "127.0.0.2"
        assert served_round_trip(broker, broker.port).payload
        # (RMQTT's internal cluster endpoint stays on the namespace's own loopback: not a listener for clients.)
        mqtt = {c.laddr.ip for c in psutil.Process(broker.pid).net_connections(kind="tcp")
                if c.status == psutil.CONN_LISTEN and c.laddr.port == broker.port}  # fmt: skip
        assert mqtt and mqtt <= {"127.0.0.2", "::ffff:127.0.0.2"}, mqtt


def test_rumqttd_serves_mqtt5_on_its_own_port(tmp_path: Path) -> None:
    launcher = get_launcher("rumqttd")
    ensure_installed(launcher)
    with launcher.start(tmp_path) as broker:
        assert broker.v5_port not in (None, broker.port)
        assert broker.tls_port is None
        with MqttProbe(broker.host, broker.v5_port, client_id="v5-client", protocol_level=5) as client:
            client.ping()


def test_stop_ends_the_process_and_closes_its_ports(tmp_path: Path) -> None:
    launcher = get_launcher("mosquitto")
    ensure_installed(launcher)
    with launcher.start(tmp_path, tls=True) as broker:
        pid, ports = broker.pid, (broker.port, broker.tls_port)
        assert round_trip(broker.host, broker.port).payload
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert all(port_is_closed(port) for port in ports)
    broker.stop()  # a second stop is harmless


@pytest.mark.parametrize("defect, error", [("expired", "expired"), ("wrong-name", "mismatch|match")])
def test_broker_can_serve_a_defective_certificate_for_tls_failure_tests(
    tmp_path: Path, defect: str, error: str
) -> None:
    launcher = get_launcher("mosquitto")
    ensure_installed(launcher)
    with launcher.start(tmp_path, tls=True, tls_certificate=defect) as broker:
        context = client_tls_context(str(broker.ca_file))
        with pytest.raises(ssl.SSLCertVerificationError, match=error):
            MqttProbe(broker.host, broker.tls_port, client_id="verifying", tls_context=context)
        # The plain listener is unaffected.
        assert round_trip(broker.host, broker.port).payload


def test_unknown_certificate_kind_is_refused_with_the_choices(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="expired"):
        get_launcher("mosquitto").start(tmp_path, tls=True, tls_certificate="bogus")


def test_mqtt5_connect_is_refused_by_a_3_1_1_only_listener(tmp_path: Path) -> None:
    # amqtt speaks MQTT 3.1.1 only, so a v5 CONNECT must not look like success to the probe.
    launcher = get_launcher("amqtt")
    ensure_installed(launcher)
    with launcher.start(tmp_path) as broker:
        with pytest.raises((ProbeError, OSError)):
            with MqttProbe(broker.host, broker.port, client_id="v5-client", protocol_level=5, timeout=3) as client:
                client.ping()


def test_probe_reports_a_server_that_is_not_mqtt() -> None:
    # A TCP server that accepts and stays silent: CONNECT gets no CONNACK.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        with pytest.raises(ProbeError, match="timed out"):
            MqttProbe("127.0.0.1", port, client_id="x", timeout=0.5)


def _tree_rss(pid: int) -> int:
    """The resident memory of the heaviest process in the broker's tree (a JVM or BEAM under a
    wrapper script, say)."""
    root = psutil.Process(pid)
    return max(p.memory_info().rss for p in [root, *root.children(recursive=True)])


@pytest.mark.parametrize("qos", [1, 2])
def test_a_load_run_is_accounted_exactly_and_samples_the_brokers_process_tree(
    started: RunningBroker, qos: int, tmp_path: Path
) -> None:
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("mqttlab._engine", reason="the compiled engine is not built yet")
    heaviest = _tree_rss(started.pid)
    url = f"mqtt://{started.host}:{started.port}?name={started.name}&pid={started.pid}"
    root = Path(__file__).resolve().parents[1]
    # The grace ends as soon as all are in: long, for a broker a loaded host holds back a while.
    done = subprocess.run(
        [sys.executable, "-m", "mqttlab", "run", "--broker", url, "--pubs", "5", "--subs", "5",
         "--topic", "acct/%i", "--set", "subscribers.filters=[acct/%i]", "--qos", str(qos), "--rate", "50",
         "--duration", "3s", "--warmup", "1s", "--set", "load.grace=10s", "--out", str(tmp_path / "run"), "--json",
         *(["--username", started.credentials[0], "--password", started.credentials[1]] if started.credentials else [])],
        capture_output=True, text=True, timeout=120, cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root / "python")),
    )
    summary = json.loads(done.stdout) if done.stdout.strip() else {}
    messages = summary.get("messages") or {}
    if started.name in KNOWN_RACES and (done.returncode != 0 or messages.get("delivered") != messages.get("expected")):
        # The broker's known defect (see KNOWN_RACES): reported, never retried inside a measurement.
        pytest.xfail(f"{started.name}'s known race: connections {summary.get('connections')}, messages {messages}")
    if qos > started.max_qos:
        # The broker's documented defect (RabbitMQ 3.10: PUBACK for a QoS 2 PUBLISH, QoS 1 granted):
        # the run must name it, never pass it off as QoS 2.
        kinds = {v["kind"] for v in summary.get("violations") or []} | {e["kind"] for e in summary.get("errors") or []}
        assert {"puback_for_qos2", "qos_downgraded"} <= kinds, summary.get("violations")
        return
    assert done.returncode == 0, done.stderr[-2000:]
    assert messages["expected"] == messages["sent"] > 0  # p2p: one subscriber per publisher
    assert messages["delivered"] == messages["expected"], messages
    assert messages["lost"] == 0 and messages["duplicated"] == 0 and messages["out_of_order"] == 0, messages
    assert not summary.get("violations"), summary.get("violations")
    broker = summary["resources"]["broker"]
    assert broker["peak_rss_bytes"] >= 0.8 * heaviest, (broker, heaviest)
    assert broker["mean_cpu_share"] > 0
