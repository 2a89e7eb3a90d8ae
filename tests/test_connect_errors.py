"""A broker the load cannot use is named with why and what to do: a peer that is not MQTT, a TLS
certificate from an unknown CA; before anything starts, what a launched broker cannot serve."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest

from cli_runs import SMALL, invoke, said  # tests/ is on sys.path (no package)


@pytest.mark.parametrize("args, says", [
    (["--broker", "aedes", "--mqtt-version", "5"], "mqtt.version (--mqtt-version): aedes speaks MQTT 3.1.1, not 5"),
    (["--broker", "rabbitmq", "-V", "5"], "rabbitmq speaks MQTT 3.1, 3.1.1, not 5 (`mqttlab brokers list`); use --mqtt-version 3"),
    (["--broker", "rsmb", "--tls"], "launch.tls: rsmb has no TLS listener"),
    (["--broker", "nosuch"], "broker (--broker): unknown broker 'nosuch'"),
])
def test_what_a_launched_broker_cannot_serve_is_refused_before_it_starts(tmp_path: Path, args: list[str], says: str):
    out = tmp_path / "run"
    result = invoke("run", *args, "--out", str(out))
    assert result.exit_code == 2 and says in result.output
    assert not out.exists()


def test_scenario_validate_refuses_what_run_refuses(tmp_path: Path):
    file = tmp_path / "v5.yaml"
    file.write_text("broker: aedes\nmqtt: {version: 5}\n")
    result = invoke("scenario", "validate", str(file))
    assert result.exit_code == 2 and "mqtt.version: aedes speaks MQTT 3.1.1, not 5" in said(result)


@pytest.fixture
def http_peer() -> Iterator[int]:
    """A TCP peer that answers anything with an HTTP error, as a web server on the port would."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_a_peer_that_is_not_mqtt_is_named_as_such(tmp_path: Path, http_peer: int):
    url = f"mqtt://127.0.0.1:{http_peer}"
    result = invoke("run", "--broker", url, "--duration", "1s", *SMALL, "--out", str(tmp_path / "run"))
    assert result.exit_code == 3
    assert f"the peer at {url} answered with something that is not MQTT (looks like HTTP)" in said(result)


def test_an_unknown_ca_suggests_ca_or_insecure(tmp_path: Path):
    from mqttlab.brokers import get_launcher

    launcher = get_launcher("mosquitto")
    if not launcher.find():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh)")
    with launcher.start(tmp_path / "broker", tls=True) as broker:
        result = invoke("run", "--broker", broker.url(tls=True), "--duration", "1s", *SMALL, "--out", str(tmp_path / "run"))
    assert result.exit_code == 3
    assert "unknown CA; give its CA with --ca FILE (tls.ca), or --insecure (tls.insecure) to skip verification" in said(result)
