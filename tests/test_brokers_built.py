"""The brokers built from their pinned upstream sources (NanoMQ, RSMB): the source is checked
before it is built, an interrupted build is never taken for an install, each `as-shipped`
configuration shows its documented limit under a backlog that `tuned` delivers whole, and a run
under load delivers exactly with the broker's resources sampled. (The round trips, TLS and
backlog of every launcher are in tests/test_brokers_launchers.py.)"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

import mqttlab
from mqttlab.brokers import BrokerError, get_launcher
from mqttlab.brokers.base import START_TRIES, BrokerStartError
from mqttlab.brokers import sources
from mqttlab.brokers.probe import MqttProbe, ProbeError, client_tls_context
from mqttlab.brokers.sources import SourceUnavailable


def built(name: str):
    launcher = get_launcher(name)
    try:
        launcher.install()
    except SourceUnavailable as error:
        pytest.skip(f"{name}: cannot be built here: {error}")
    return launcher


def test_a_tarball_whose_sha256_differs_from_the_pin_is_refused(tmp_path, monkeypatch):
    given = tmp_path / "sources"
    given.mkdir()
    with tarfile.open(given / sources.RSMB.tarball, "w:gz") as archive:
        archive.add(__file__, arcname=f"{sources.RSMB.top}/not-rsmb.py")
    monkeypatch.setenv(sources.SOURCES_ENV, str(given))
    with pytest.raises(BrokerError, match="not the pinned 1be9bf64"):
        sources.unpack(sources.RSMB, tmp_path / "tree")


def test_a_matching_tarball_is_unpacked_from_the_sources_directory(tmp_path, monkeypatch):
    given = tmp_path / "sources"
    given.mkdir()
    with tarfile.open(given / "x-1.tar.gz", "w:gz") as archive:
        archive.add(__file__, arcname="x-1/file.py")
    pinned = replace(sources.RSMB, tarball="x-1.tar.gz",
                     sha256=hashlib.sha256((given / "x-1.tar.gz").read_bytes()).hexdigest())
    monkeypatch.setenv(sources.SOURCES_ENV, str(given))
    tree = sources.unpack(pinned, tmp_path / "tree")
    assert (tree / "file.py").read_bytes() == Path(__file__).read_bytes()


def test_without_a_tarball_the_upstream_fetch_failure_is_one_line_saying_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv(sources.SOURCES_ENV, str(tmp_path / "empty"))
    unreachable = replace(sources.NANOMQ, repository=f"file://{tmp_path}/no-such-repository")
    with pytest.raises(SourceUnavailable) as failure:
        sources.unpack(unreachable, tmp_path / "tree")
    message = str(failure.value)
    assert "\n" not in message
    assert sources.NANOMQ.tarball in message and sources.SOURCES_ENV in message and "no-such-repository" in message


@pytest.mark.parametrize("name", ["nanomq", "rsmb"])
def test_an_interrupted_build_is_not_taken_for_an_install(tmp_path, monkeypatch, name):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    launcher = get_launcher(name)
    launcher.home.mkdir(parents=True)
    (launcher.home / (launcher.binary + ".partial")).write_bytes(b"half a binary")
    assert not launcher.find()
    assert not launcher.availability().available


def _backlog(broker, count: int, payload: int) -> int:
    """QoS 1 messages published to a subscriber that reads nothing until the end: how many arrive."""
    received = 0
    with MqttProbe(broker.host, broker.port, client_id="slow-reader", timeout=5) as reader:
        reader.subscribe("built/backlog", qos=1)
        with MqttProbe(broker.host, broker.port, client_id="fast-writer", timeout=10) as writer:
            for sequence in range(count):
                writer.publish("built/backlog", sequence.to_bytes(4, "big") + bytes(payload), qos=1)
        try:
            while received < count:
                reader.receive(timeout=3)
                received += 1
        except Exception:
            pass
    return received


@pytest.mark.parametrize("name, count, payload, shipped_limit", [
    # NanoMQ: a subscriber's send cache of max_mqueue_len = 2048 never grows; beyond it and what
    # the sockets hold, messages are dropped (here 5,868 of 20,000 arrived).
    ("nanomq", 20000, 1000, None),
    # RSMB: 10 in flight + 1000 queued per client, the rest discarded.
    ("rsmb", 5000, 0, 1010),
])
def test_as_shipped_limits_drop_a_backlog_that_tuned_delivers_whole(tmp_path, name, count, payload, shipped_limit):
    launcher = built(name)
    with launcher.start(tmp_path / "tuned") as broker:
        assert _backlog(broker, count, payload) == count
    launcher.configure("as-shipped")
    with launcher.start(tmp_path / "shipped") as broker:
        assert broker.config["mode"] == "as-shipped" and broker.config["settings"]
        received = _backlog(broker, count, payload)
    if shipped_limit is not None:
        assert received == shipped_limit
    else:
        assert received < count


@pytest.mark.parametrize("name", ["nanomq", "rsmb"])
def test_a_run_under_load_delivers_exactly_and_samples_the_broker(tmp_path, name):
    built(name)
    result = mqttlab.run(None, broker=name, out=tmp_path / "run", set={
        "publishers.count": 4, "subscribers.count": 4, "publishers.qos": 1, "subscribers.qos": 1,
        "publishers.rate": 500, "load.duration": "2s", "load.warmup": "500ms",
    })
    messages = result.summary["messages"]
    assert result.status == "completed"
    assert messages["lost"] == 0 and messages["duplicated"] == 0 and messages["delivered"] == messages["expected"] > 0
    manifest = json.loads((result.directory / "manifest.json").read_text())
    assert manifest["broker"]["version"] == get_launcher(name).version()
    # The build names the upstream tree's commits the binary was made from, the pinned ones.
    upstream = {"nanomq": sources.NANOMQ, "rsmb": sources.RSMB}[name]
    assert manifest["broker"]["build"]["commits"] == dict(upstream.commits) and manifest["broker"]["build"]["repository"] == upstream.repository
    broker_rows = result.resources().query("process == 'broker'")
    assert len(broker_rows) > 0 and broker_rows["rss_bytes"].max() > 0


def test_nanomq_serves_mqtt_over_websocket_on_its_own_port(tmp_path):
    launcher = built("nanomq")
    with launcher.start(tmp_path) as broker:
        text = (tmp_path / "nanomq.conf").read_text()
        port = int(text.split("listeners.ws { bind = \"127.0.0.1:")[1].split("/")[0])
        key = base64.b64encode(b"mqttlab-ws-test!").decode()
        request = (f"GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n")
        with socket.create_connection((broker.host, port), timeout=5) as s:
            s.sendall(request.encode())
            answer = s.recv(1024).decode(errors="replace")
        assert answer.startswith("HTTP/1.1 101"), answer
        expected = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        assert expected in answer


def test_nanomq_starts_under_a_work_directory_too_deep_for_a_unix_socket_and_removes_its_sockets_at_stop(tmp_path):
    # A Unix socket's path holds at most 107 bytes: NanoMQ's IPC sockets under this work
    # directory would not fit ("nng_listen ipc: Address invalid"), so they live elsewhere.
    workdir = tmp_path / ("results-of-a-suite-with-a-long-name-" * 3) / "runs" / "offline-sessions" / "nanomq" / "rep-1" / "broker"
    assert len(str(workdir / "cmd.ipc")) > 107
    launcher = built("nanomq")
    with launcher.start(workdir) as broker:
        sockets = broker.scratch
        assert sockets is not None and len(str(sockets / "hook.ipc")) <= 107
        assert (sockets / "cmd.ipc").exists() and oct(sockets.stat().st_mode & 0o777) == "0o700"
        with MqttProbe(broker.host, broker.port, client_id="long-path") as probe:
            probe.subscribe("built/long-path", qos=1)
            probe.publish("built/long-path", b"here", qos=1)
            assert probe.receive(timeout=5).payload == b"here"
    assert not sockets.exists()


def test_a_start_whose_readiness_check_met_the_known_defect_is_not_handed_out(tmp_path, capfd):
    # NanoMQ can survive its TLS defect for a moment and then abort (CI: the readiness check was
    # refused once, tried again, accepted, and the broker died of a heap abort before the first
    # test). Every start here "meets" a stand-in for the defect: a line NanoMQ writes at each start
    # to stderr, unbuffered like its error lines (its stdout reaches the log only at exit).
    launcher = built("nanomq")
    launcher.connect_crash = "Abort finding default config path"
    with pytest.raises(BrokerStartError, match="met its known defect"):
        launcher.start(tmp_path, tls=True)
    assert capfd.readouterr().err.count("readiness was checked; started again") == START_TRIES - 1
    assert (tmp_path / "nanomq.log").read_text().count(launcher.connect_crash) >= 1  # the last start's log


def test_nanomq_still_refuses_a_tls_connect_now_and_then_as_its_launcher_declares(tmp_path):
    # The launcher starts NanoMQ again when its readiness check meets this defect, and the
    # launcher tests retry it: both rest on the defect being there. A release that fixes it fails
    # here, and the retries go.
    launcher = built("nanomq")
    assert launcher.connect_crash is not None
    with launcher.start(tmp_path, tls=True) as broker:
        context = client_tls_context(str(broker.ca_file))
        refused = None
        for attempt in range(600):  # about 1 in 25 is refused here; 600 miss it with odds of 1e-10
            try:
                with MqttProbe(broker.host, broker.tls_port, client_id=f"tls-{attempt}", tls_context=context, timeout=5):
                    pass
            except (ProbeError, OSError) as error:
                refused = attempt, str(error)
                break
        assert refused is not None, "600 sequential TLS connections were all accepted: the defect is gone"
        log = broker.log_file.read_text(errors="replace")
        assert launcher.connect_crash in log, (refused, log[-1500:])
