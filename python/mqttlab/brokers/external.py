"""A broker that runs elsewhere (EMQX, NanoMQ or VerneMQ in a container, another host) and
joins by URL. We never start or stop it; given a PID or a container name we can sample it.

    mqtt://127.0.0.1:1883?name=emqx&container=emqx
    mqtt://127.0.0.1:1883?pid=4242&tls_port=8883&ca=/path/ca.pem&version=5.8.0
    mqtts://broker.lab:8883?ca=/path/ca.pem
    ws://127.0.0.1:8083/mqtt?container=emqx      (MQTT over WebSocket; wss:// over TLS)
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from mqttlab.brokers.base import (
    WEBSOCKET_PATH,
    Availability,
    BrokerError,
    BrokerUnavailable,
    Launcher,
    RunningBroker,
    run_quietly,
    wait_until_listening,
    wait_until_serving,
)

URL_HELP = (
    "give the broker as a URL: mqtt://HOST:PORT (mqtts:// for TLS, ws://HOST:PORT/PATH or wss:// for WebSocket) with optional "
    "?name=LABEL&pid=N or &container=NAME (to sample its CPU and memory)&tls_port=N&ca=CA.pem&version=V"
)
KNOWN_PARAMETERS = {"name", "pid", "container", "tls_port", "ca", "version"}


def _single(params: dict[str, list[str]], key: str) -> str | None:
    values = params.get(key)
    return values[-1] if values else None


def _port(value: str | None, field: str) -> int | None:
    if value is None:
        return None
    try:
        port = int(value)
    except ValueError:
        raise BrokerError(f"external broker URL: {field} must be a port number, got {value!r}") from None
    if not 0 < port < 65536:
        raise BrokerError(f"external broker URL: {field} must be between 1 and 65535, got {port}")
    return port


def container_pid(container: str) -> int:
    """The host PID of a running container's main process (docker or podman)."""
    for tool in ("docker", "podman"):
        try:
            out = run_quietly([tool, "inspect", "--format", "{{.State.Pid}}", container], timeout=15)
        except BrokerError:
            continue
        if out.strip().isdigit() and int(out.strip()) > 0:
            return int(out.strip())
    raise BrokerError(f"container {container!r} is not running (docker/podman inspect found no PID)")


class ExternalLauncher(Launcher):
    """`start` only checks that the broker answers MQTT and describes it."""

    name = "external"
    how_to_get = URL_HELP

    def __init__(self, url: str | None = None) -> None:
        self.url = url
        self.start_timeout = 10.0

    def find(self) -> bool:
        return self.url is not None

    def version(self) -> str | None:
        return None

    def install(self) -> None:
        raise BrokerError("an external broker is installed and run by you; mqttlab only connects to it")

    def availability(self) -> Availability:
        if self.url is None:
            return Availability(False, None, URL_HELP)
        return Availability(True, None, f"runs elsewhere: {self.url}")

    def describe(self) -> RunningBroker:
        """The RunningBroker the URL describes, without contacting it."""
        if self.url is None:
            raise BrokerUnavailable(URL_HELP)
        parts = urlsplit(self.url)
        if parts.scheme not in ("mqtt", "mqtts", "tcp", "ssl", "ws", "wss"):
            raise BrokerError(f"external broker URL: scheme must be mqtt://, mqtts://, ws:// or wss://, got {parts.scheme!r}")
        if not parts.hostname:
            raise BrokerError(f"external broker URL: missing host in {self.url!r}")
        params = parse_qs(parts.query)
        unknown = sorted(set(params) - KNOWN_PARAMETERS)
        if unknown:
            raise BrokerError(f"external broker URL: unknown parameter(s) {', '.join(unknown)}; {URL_HELP}")
        try:
            url_port = parts.port
        except ValueError:
            raise BrokerError(f"external broker URL: port is not a number in {self.url!r}") from None
        secure = parts.scheme in ("mqtts", "ssl", "wss")
        websocket = parts.scheme in ("ws", "wss")
        tls_port = _port(_single(params, "tls_port"), "tls_port")
        ws_port = wss_port = None
        if websocket:
            # The URL names the WebSocket listener; `port` stands for it where one port is asked.
            ws_port = url_port or (443 if secure else 80)
            wss_port = ws_port if secure else None
            plain_port = ws_port
        elif secure:
            tls_port = url_port or tls_port or 8883
            plain_port = tls_port
        else:
            plain_port = url_port or 1883
        pid_text = _single(params, "pid")
        if pid_text is not None and not pid_text.isdigit():
            raise BrokerError(f"external broker URL: pid must be a number, got {pid_text!r}")
        container = _single(params, "container")
        pid = int(pid_text) if pid_text else (container_pid(container) if container else None)
        ca = _single(params, "ca")
        version = _single(params, "version")
        label = _single(params, "name") or container or "external"
        return RunningBroker(
            name=label,
            version=f"{label} {version}" if version else None,
            host=parts.hostname,
            port=plain_port,
            tls_port=tls_port,
            ca_file=Path(ca) if ca else None,
            pid=pid,
            container=container,
            managed=False,
            tls_only=secure and not websocket,
            ws_port=ws_port if not secure else None,
            wss_port=wss_port,
            websocket_path=parts.path if websocket and parts.path not in ("", "/") else WEBSOCKET_PATH,
        )

    def start(
        self, workdir: Path, tls: bool = False, *, detach: bool = False, tls_certificate: str = "valid"
    ) -> RunningBroker:
        broker = self.describe()
        if broker.ws_port is not None or broker.wss_port is not None:
            # MQTT over WebSocket: our probe speaks MQTT over TCP only; the engine's upgrade checks the rest.
            wait_until_listening(broker.host, broker.port, child=None, timeout=self.start_timeout, name=broker.name)
            return broker
        if tls and broker.tls_port is None:
            raise BrokerError("external broker URL: TLS was asked for but the URL gives no tls_port")
        wait_until_serving(broker.host, broker.port, child=None, timeout=self.start_timeout,
                           tls=broker.tls_only, tls_ca_file=broker.ca_file,
                           name=broker.name)
        return broker
