"""Eclipse Mosquitto from the Debian package, run as our own child with our own config (the
Debian service, if any, keeps its default port and is never what we talk to)."""

from __future__ import annotations

import getpass
import os
import re
import shutil
from pathlib import Path

from mqttlab.brokers.base import RESTART_STATE, BrokerError, Launcher, Ports, apt_install, printed_version
from mqttlab.tls import TlsMaterial

SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
#: seconds between saves of the persistence database (Mosquitto's default, stated in the config)
AUTOSAVE_S = 1800


class MosquittoLauncher(Launcher):
    name = "mosquitto"
    how_to_get = "apt-get install mosquitto (Debian package), or `mqttlab brokers install mosquitto` as root"
    source = "Debian package mosquitto"
    install_time = "about 10 s (apt)"
    mqtt_versions = ("3.1", "3.1.1", "5")
    # Debian builds Mosquitto with libwebsockets: `protocol websockets` on a listener of its own.
    has_websocket = True
    required_settings = (
        # As root, mosquitto would switch to the `mosquitto` user and lose access to our files.
        ("user <the current user>", "run as the user who started mqttlab, with access to the work directory"),
        ("allow_anonymous true", "Mosquitto 2 refuses clients without credentials once a listener is configured"),
        ("log_dest stdout", "the log goes to the run's broker log, not /var/log"),
    )
    tuned_settings = (
        ("persistence false", "no disk writes during a benchmark (the Debian package turns persistence on)"),
        ("max_queued_messages 0", "no queue limit: the default 1000 would drop messages a benchmark then counts as lost"),
        ("max_queued_bytes 0", "no queue limit in bytes"),
        ("max_inflight_messages 0", "no in-flight window: the default 20 caps QoS 1/2 throughput per client"),
        ("max_inflight_bytes 0", "no in-flight limit in bytes"),
        ("max_connections -1", "no connection limit"),
        ("set_tcp_nodelay true", "Nagle's algorithm would hold small publishes back and inflate latency"),
        ("log_type error, log_type warning", "a log line per connection would cost CPU under load"),
    )

    # mosquitto.conf(5): with persistence, "the data will be written to disk when mosquitto closes
    # and also at periodic intervals as defined by autosave_interval" (default 1800 s).
    persistence_on_settings = (
        ("persistence true", "launch.persistence: sessions, subscriptions, queued and retained messages written to mosquitto.db"),
        ("persistence_location <the run's broker directory>/", "the database stays with the run, never shared with another"),
        (f"autosave_interval {AUTOSAVE_S}", "Mosquitto's default, stated: the database is written on exit and every "
         f"{AUTOSAVE_S} s, so a crash loses what changed since the last save"),
    )
    persistence_off_settings = (("persistence false", "launch.persistence false: the state in memory only"),)
    # Debian's /etc/mosquitto/mosquitto.conf turns it on.
    shipped_persistence = True

    def persists(self) -> bool | None:
        if self.persistence is None and self.config.mode == "file":
            found = re.findall(r"^\s*persistence\s+(\S+)", self.config.user_text(), re.M)
            return bool(found) and found[-1].lower() in ("true", "1")
        return super().persists()

    def persisted_promises(self) -> dict[str, object]:
        found = re.findall(r"^\s*autosave_interval\s+(\d+)", self.config.user_text(), re.M)
        autosave = int(found[-1]) if found else AUTOSAVE_S
        kept = dict.fromkeys(RESTART_STATE, True)
        return {"clean": kept, "crash": dict.fromkeys(RESTART_STATE, False),
                "source": "mosquitto.conf(5), persistence: connection, subscription and message data written to mosquitto.db "
                          f"when mosquitto closes and every autosave_interval ({autosave} s here); a crash keeps only the last save"}

    def state_limits(self) -> dict[str, int | None]:
        # mosquitto.conf(5): max_queued_messages, 1000 when not set, 0 for no limit.
        if self.config.tuned:
            return {"queued_messages": None}
        found = re.findall(r"^\s*max_queued_messages\s+(\d+)", self.config.user_text(), re.M)
        limit = int(found[-1]) if found else 1000
        return {"queued_messages": limit or None}

    def executable(self) -> str | None:
        return shutil.which("mosquitto", path=SEARCH_PATH)

    def find(self) -> bool:
        return self.executable() is not None

    def version(self) -> str | None:
        exe = self.executable()
        # `mosquitto -h` prints its version in the first line and exits non-zero.
        return printed_version("mosquitto", [exe, "-h"], r"mosquitto version (\S+)") if exe else None

    def install(self) -> None:
        if self.find():
            return
        apt_install("mosquitto")

    def _settings(self, workdir: Path) -> list[str]:
        """Everything but the listeners, for the configured mode."""
        lines = ["# written by mqttlab for one run", f"user {getpass.getuser()}", "allow_anonymous true"]
        if self.config.tuned:
            lines += [
                *self._persistence_lines(workdir),
                "max_queued_messages 0",
                "max_queued_bytes 0",
                "max_inflight_messages 0",
                "max_inflight_bytes 0",
                "max_connections -1",
                "set_tcp_nodelay true",
                "log_type error",
                "log_type warning",
            ]
        elif self.config.mode == "as-shipped":
            # Debian's /etc/mosquitto/mosquitto.conf, with its paths moved into the work directory.
            lines += self._persistence_lines(workdir)
        else:
            lines += ["# --- from " + str(self.config.file), self.config.user_text(), "# --- mqttlab's listeners"]
        lines += ["log_dest stdout", "log_timestamp true"]
        return lines

    def _persistence_lines(self, workdir: Path) -> list[str]:
        if not self.persists():
            return ["persistence false"]
        lines = ["persistence true", f"persistence_location {workdir}/"]
        return lines + ([f"autosave_interval {AUTOSAVE_S}"] if self.persistence else [])

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        config = workdir / "mosquitto.conf"
        lines = [*self._settings(workdir), "", f"listener {ports.plain} {self.placement.listen_host}"]
        tls_files = [f"cafile {tls.ca_file}", f"certfile {tls.cert_file}", f"keyfile {tls.key_file}"] if tls is not None else []
        if tls_files and ports.tls is not None:
            lines += ["", f"listener {ports.tls} {self.placement.listen_host}", *tls_files]
        for port, secure in ((ports.ws, False), (ports.wss, True)):
            if port is not None:
                # libwebsockets answers the upgrade on any path, /mqtt included.
                lines += ["", f"listener {port} {self.placement.listen_host}", "protocol websockets"]
                if secure:
                    lines += tls_files
        config.write_text("\n".join(lines) + "\n")
        exe = self.executable()
        if exe is None:
            raise BrokerError(f"mosquitto is not installed: {self.how_to_get}")
        return [exe, "-c", str(config)]
