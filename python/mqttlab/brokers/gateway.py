"""The MQTT-SN gateway in front of a broker: started as a child process on a free loopback UDP
port, ready once it answers an MQTT-SN CONNECT with a CONNACK, stopped with its process group.

    with GatewayLauncher().start(workdir, broker.url()) as gateway:
        gateway.port   # MQTT-SN clients send here

No registry offers an MQTT-SN gateway that installs here, so this is mqttlab's own transparent
gateway (crate mqttlab-gateway): one broker connection per MQTT-SN client."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from mqttlab.brokers import process
from mqttlab.brokers.base import LOOPBACK, BrokerError, BrokerStartError, Placement

if TYPE_CHECKING:
    from mqttlab.brokers.limits import BrokerCgroup

GATEWAY_NAME = "mqttlab-gateway"


def free_udp_port() -> int:
    """A UDP port the kernel picks on 127.0.0.1 (free when picked; the gateway binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _sn_connect(client_id: str) -> bytes:
    # Length, CONNECT (0x04), flags CleanSession, protocol id 0x01, keep-alive 10 s, client id.
    body = struct.pack("!BBBH", 0x04, 0x04, 0x01, 10) + client_id.encode()
    return bytes([len(body) + 1]) + body


_SN_DISCONNECT = bytes([0x02, 0x18])


def probe(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when an MQTT-SN CONNECT to `host:port` is answered by an accepting CONNACK (the
    gateway is up and reaches its broker); the probe session is closed again."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.connect((host, port))
        s.send(_sn_connect(f"mqttlab-gw-probe-{time.monotonic_ns() % 1_000_000}"))
        try:
            answer = s.recv(64)
        except (ConnectionRefusedError, socket.timeout):
            return False
        accepted = answer[:3] == bytes([0x03, 0x05, 0x00])
        if accepted:
            s.send(_SN_DISCONNECT)
        return accepted


def wait_until_answering(host: str, port: int, *, child: subprocess.Popen | None, timeout: float, log_file: Path,
                         name: str = "the MQTT-SN gateway") -> None:
    """Polls until an MQTT-SN CONNECT to udp://host:port is accepted; fails early if the child
    exits, and on timeout, both with its log tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child is not None and child.poll() is not None:
            raise BrokerStartError(f"{name} exited with code {child.returncode} during start-up:\n{process.log_tail(log_file)}")
        if probe(host, port, timeout=0.5):
            return
        time.sleep(0.1)
    raise BrokerStartError(f"{name} did not answer CONNECT on udp://{host}:{port} within {timeout:.0f} s. "
                           f"Log tail:\n{process.log_tail(log_file)}")


@dataclass
class RunningGateway:
    host: str
    port: int
    broker_url: str
    pid: int
    log_file: Path
    config: dict[str, object]
    name: str = GATEWAY_NAME
    version: str | None = None
    #: what ends the gateway cleanly (the Paho gateway leaves only on SIGINT)
    stop_signal: int = signal.SIGTERM
    #: the cgroup of a gateway run with limits (RSMB beside the broker): read when the manifest is
    #: written, after the run, so that its counters cover the run and not only the start
    cgroup: BrokerCgroup | None = field(default=None, repr=False)
    _process: subprocess.Popen | None = field(default=None, repr=False)

    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def to_dict(self) -> dict[str, object]:
        """The gateway as plain data, for a results manifest."""
        return {"name": self.name, "version": self.version, "host": self.host, "port": self.port,
                "broker": self.broker_url, "pid": self.pid, "predefined": self.config.get("predefined", {}),
                **{key: self.config[key] for key in ("role", "serves_clients", "config", "build") if key in self.config},
                **({"limits": self.cgroup.outcome()} if self.cgroup is not None else {})}

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        if self._process is not None:
            process.end(self._process, self.stop_signal)

    def __enter__(self) -> RunningGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class GatewayLauncher:
    """Starts mqttlab's MQTT-SN gateway in front of an MQTT broker."""

    start_timeout: float = 20.0
    #: where the gateway runs: beside the broker (mqttlab.netem sets it to the broker's namespace,
    #: so MQTT-SN datagrams cross the emulated link as MQTT's segments do)
    placement: Placement = Placement()

    def start(
        self,
        workdir: Path,
        broker_url: str,
        *,
        predefined: dict[int, str] | None = None,
        retry_ms: int = 1000,
    ) -> RunningGateway:
        """Starts the gateway on a free UDP port in front of `broker_url` (mqtt://HOST:PORT) and
        returns once it answers a CONNECT."""
        parts = urlsplit(broker_url)
        if parts.scheme not in ("mqtt", "tcp") or not parts.hostname or not parts.port:
            raise BrokerError(f"broker_url: the gateway needs a plain mqtt://HOST:PORT broker, got {broker_url!r}")
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        port = free_udp_port()
        config: dict[str, object] = {
            "listen": f"{self.placement.listen_host}:{port}",
            "broker_host": parts.hostname,
            "broker_port": parts.port,
            "predefined": {str(k): v for k, v in (predefined or {}).items()},
            "retry_ms": retry_ms,
        }
        config_file = workdir / "gateway.json"
        config_file.write_text(json.dumps(config, indent=2))
        log_file = workdir / "gateway.log"
        log_file.write_bytes(b"")
        command = [*self.placement.command_prefix, sys.executable, "-m", "mqttlab.brokers.gateway_main", str(config_file)]
        try:
            child = process.spawn(command, log_file=log_file, cwd=workdir)
        except OSError as exc:
            raise BrokerStartError(f"cannot run the MQTT-SN gateway: {exc}") from None
        host = self.placement.reach_host
        try:
            wait_until_answering(host, port, child=child, timeout=self.start_timeout, log_file=log_file)
        except BaseException:
            process.terminate(child)
            raise
        return RunningGateway(host, port, broker_url, child.pid, log_file, config, _process=child)

