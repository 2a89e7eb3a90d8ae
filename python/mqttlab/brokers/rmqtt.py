"""RMQTT (Rust) from crates.io: `cargo install rmqttd` into mqttlab's broker folder.

The build compiles several hundred crates (Kafka, Pulsar and gRPC bridges included), which takes
long on a small machine, so it is never started implicitly: `mqttlab brokers install rmqtt`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from mqttlab.brokers.base import BrokerError, Launcher, Ports, data_dir
from mqttlab.tls import TlsMaterial

RMQTTD_CRATE = "rmqttd"
RMQTTD_VERSION = "0.24.0"

# rmqtt's defaults (16 in flight, 1000 queued messages per session, 1 MB packets, Nagle on)
# would cap a benchmark before the broker itself does.
LISTENER_LIMITS = """nodelay = true
max_connections = 1024000
max_handshaking_limit = 100000
max_inflight = 65535
max_mqueue_len = 1000000
max_packet_size = "4M"
backlog = 4096
"""


def _quote(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


class RmqttLauncher(Launcher):
    name = "rmqtt"
    how_to_get = (
        f"`mqttlab brokers install rmqtt` (cargo install {RMQTTD_CRATE} {RMQTTD_VERSION}; "
        "a long build: 52 minutes with one compile job on a shared 2-core machine; needs protoc)"
    )
    extra_ports = 1  # its cluster gRPC endpoint, kept on loopback too
    source = f"crates.io {RMQTTD_CRATE} {RMQTTD_VERSION}, built with cargo install"
    install_time = "52 min (one compile job on a shared 2-core machine)"
    mqtt_versions = ("3.1", "3.1.1", "5")
    tested_by_test_command = False
    accepts_config_file = False
    required_settings = (("allow_anonymous = true", "benchmark clients connect without credentials"),)
    tuned_settings = (
        ("nodelay = true", "Nagle's algorithm would hold small publishes back"),
        ("max_inflight = 65535", "the default 16 caps QoS 1/2 throughput per client"),
        ("max_mqueue_len = 1000000", "the default 1000 queued messages per session would drop a backlog"),
        ('max_packet_size = "4M"', "the default 1 MB refuses larger payloads"),
        ("max_connections, max_handshaking_limit, backlog raised", "room for large connection counts"),
    )

    @property
    def home(self) -> Path:
        return data_dir() / "rmqtt"

    def executable(self) -> Path | None:
        installed = self.home / "bin" / "rmqttd"
        if installed.is_file():
            return installed
        found = shutil.which("rmqttd")
        return Path(found) if found else None

    def find(self) -> bool:
        return self.executable() is not None

    def version(self) -> str | None:
        exe = self.executable()
        if exe is None:
            return None
        try:
            done = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=10,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        match = re.search(r"(\d+\.\d+\.\d+)", done.stdout)
        return f"rmqtt {match.group(1)}" if match else None

    def install(self) -> None:
        if self.find():
            return
        if shutil.which("cargo") is None:
            raise BrokerError("installing rmqtt needs a Rust toolchain (cargo)")
        if shutil.which("protoc") is None:
            raise BrokerError("installing rmqtt needs protoc for its gRPC parts (apt-get install protobuf-compiler)")
        self.home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        # One compile job at a time: the machine is shared with the tests and other builds.
        env.setdefault("CARGO_BUILD_JOBS", "1")
        command = ["nice", "cargo", "install", RMQTTD_CRATE, "--version", RMQTTD_VERSION,
                   "--locked", "--root", str(self.home)]
        done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=4 * 3600)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise BrokerError(f"`{' '.join(command)}` exited with {done.returncode}:\n{tail}")

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        exe = self.executable()
        if exe is None:
            raise BrokerError(f"rmqtt is not installed: {self.how_to_get}")
        listener_settings = "allow_anonymous = true\n" + (LISTENER_LIMITS if self.config.tuned else "")
        plugins_dir = workdir / "rmqtt-plugins"
        plugins_dir.mkdir(exist_ok=True)
        sections = [
            "[node]\nid = 1\n",
            # The cluster endpoint would otherwise listen on every interface at a fixed port.
            f'[rpc]\nserver_addr = "127.0.0.1:{ports.extra[0]}"\n',
            '[log]\nto = "console"\nlevel = "warn"\n',
            # The HTTP API would bind a fixed port on every interface, and the ACL plugin ships
            # rules we do not want in a benchmark.
            f'[plugins]\ndir = {_quote(plugins_dir)}\n'
            'disabled_default_startups = ["rmqtt-http-api", "rmqtt-acl"]\n',
            f'[listener.tcp.external]\naddr = "{self.placement.listen_host}:{ports.plain}"\n{listener_settings}',
        ]
        if tls is not None and ports.tls is not None:
            sections.append(
                f'[listener.tls.external]\naddr = "{self.placement.listen_host}:{ports.tls}"\n{listener_settings}'
                f"cross_certificate = false\ncert = {_quote(tls.cert_file)}\nkey = {_quote(tls.key_file)}\n"
            )
        config = workdir / "rmqtt.toml"
        config.write_text("\n".join(sections))
        return [str(exe), "-f", str(config)]
