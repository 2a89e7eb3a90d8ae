"""Eclipse Mosquitto from the Debian package, run as our own child with our own config (the
Debian service, if any, keeps its default port and is never what we talk to)."""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
from pathlib import Path

from mqttlab.brokers.base import BrokerError, Launcher, Ports, run_quietly
from mqttlab.tls import TlsMaterial

SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])


class MosquittoLauncher(Launcher):
    name = "mosquitto"
    how_to_get = "apt-get install mosquitto (Debian package), or `mqttlab brokers install mosquitto` as root"

    def executable(self) -> str | None:
        return shutil.which("mosquitto", path=SEARCH_PATH)

    def find(self) -> bool:
        return self.executable() is not None

    def version(self) -> str | None:
        exe = self.executable()
        if exe is None:
            return None
        # `mosquitto -h` prints its version in the first line and exits non-zero.
        try:
            done = subprocess.run([exe, "-h"], capture_output=True, text=True, timeout=10,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        match = re.search(r"mosquitto version (\S+)", done.stdout + done.stderr)
        return f"mosquitto {match.group(1)}" if match else None

    def install(self) -> None:
        if self.find():
            return
        if os.geteuid() != 0:
            raise BrokerError("installing mosquitto needs root: sudo apt-get install -y mosquitto")
        env_prefix = ["env", "DEBIAN_FRONTEND=noninteractive"]
        run_quietly([*env_prefix, "apt-get", "update", "-qq"], timeout=600)
        run_quietly([*env_prefix, "apt-get", "install", "-y", "-qq", "mosquitto"], timeout=900)

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        config = workdir / "mosquitto.conf"
        lines = [
            "# written by mqttlab for one run",
            # As root, mosquitto would switch to the `mosquitto` user and lose access to our files.
            f"user {getpass.getuser()}",
            "per_listener_settings false",
            "allow_anonymous true",
            "persistence false",
            # Benchmarks must measure the broker, not its default queue limits: 0 = unlimited.
            "max_queued_messages 0",
            "max_queued_bytes 0",
            "max_inflight_messages 0",
            "max_inflight_bytes 0",
            "max_connections -1",
            # Without it Nagle's algorithm holds small publishes back and inflates latency.
            "set_tcp_nodelay true",
            # Errors and warnings only: a line per connection would cost CPU under load.
            "log_dest stdout",
            "log_type error",
            "log_type warning",
            "log_timestamp true",
            "",
            f"listener {ports.plain} {self.placement.listen_host}",
        ]
        if tls is not None and ports.tls is not None:
            lines += [
                "",
                f"listener {ports.tls} {self.placement.listen_host}",
                f"cafile {tls.ca_file}",
                f"certfile {tls.cert_file}",
                f"keyfile {tls.key_file}",
            ]
        config.write_text("\n".join(lines) + "\n")
        exe = self.executable()
        if exe is None:
            raise BrokerError(f"mosquitto is not installed: {self.how_to_get}")
        return [exe, "-c", str(config)]
