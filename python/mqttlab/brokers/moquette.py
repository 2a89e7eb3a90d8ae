"""Moquette (Java, Netty) from Maven Central: the jar and its dependencies are fetched by
`mvn dependency:copy-dependencies` from a small generated pom and run with `java`."""

from __future__ import annotations

import shutil
from pathlib import Path

from mqttlab.brokers.base import Launcher, Ports, apt_install, data_dir
from mqttlab.brokers.java import KEYSTORE_PASSWORD, fetch_from_maven, java
from mqttlab.tls import TlsMaterial, write_pkcs12

MOQUETTE_VERSIONS = ("0.17", "0.16")
MAIN_CLASS = "io.moquette.broker.Server"

# Warnings only: Moquette's INFO logging on every connection would cost CPU under load.
LOG4J_PROPERTIES = """log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=%d %-5p %c{1} - %m%n
"""


class MoquetteLauncher(Launcher):
    name = "moquette"
    how_to_get = (
        f"`mqttlab brokers install moquette` (io.moquette:moquette-broker:{MOQUETTE_VERSIONS[0]} "
        "from Maven Central; needs java and mvn)"
    )
    source = "Maven Central io.moquette:moquette-broker"
    install_time = "about 20 s (mvn)"
    versions = MOQUETTE_VERSIONS
    start_timeout = 60.0  # a cold JVM on a busy 2-core machine
    required_settings = (
        ("allow_anonymous true", "benchmark clients connect without credentials"),
        ("websocket_port disabled", "no listener beyond mqttlab's own"),
        ("telemetry_enabled false", "Moquette otherwise reports usage to its authors' server; the lab talks only to loopback"),
    )
    tuned_settings = (
        ("persistence_enabled false", "no disk writes during a benchmark (on by default)"),
        ("netty.mqtt.message_size 4194304", "4 MB payloads; the default 8 KB refuses larger messages"),
        ("netty.tcp_nodelay true", "Nagle's algorithm would hold small publishes back"),
        ("session_queue_size 100000", "the default 1024 queued messages per session would drop a backlog"),
        ("immediate_buffer_flush true", "write each packet at once instead of on Netty's flush timer"),
    )

    @property
    def home(self) -> Path:
        return data_dir() / "moquette" / str(self.pinned_version)

    def _jar(self) -> Path:
        return self.home / "lib" / f"moquette-broker-{self.pinned_version}.jar"

    def find(self) -> bool:
        return shutil.which("java") is not None and self._jar().is_file()

    def version(self) -> str | None:
        return f"moquette {self.pinned_version}" if self._jar().is_file() else None

    def install(self) -> None:
        if self.find():
            return
        if shutil.which("mvn") is None or shutil.which("java") is None:
            apt_install("default-jdk-headless", "maven")
        self.home.mkdir(parents=True, exist_ok=True)
        fetch_from_maven("moquette", self.home, "io.moquette", "moquette-broker", str(self.pinned_version))

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        # Moquette reads $moquette.path/config/moquette.conf.
        config_dir = workdir / "config"
        config_dir.mkdir(exist_ok=True)
        lines = []
        if self.config.tuned:
            lines += [setting for setting, _ in self.tuned_settings]
        elif self.config.mode == "as-shipped":
            lines.append(f"data_path {workdir / 'data'}")  # its default persistence, in the work directory
        else:
            lines.append(self.config.user_text())
        # Ours come last: Moquette keeps the last value of a key, so the listeners stay ours.
        lines += [setting for setting, _ in self.required_settings]
        lines += [f"port {ports.plain}", f"host {self.placement.listen_host}"]
        if tls is not None and ports.tls is not None:
            keystore = write_pkcs12(tls.cert_file, tls.key_file, tls.ca_file, workdir / "server.p12", KEYSTORE_PASSWORD)
            lines += [
                f"ssl_port {ports.tls}",
                "ssl_provider JDK",
                f"jks_path {keystore}",
                "key_store_type pkcs12",
                f"key_store_password {KEYSTORE_PASSWORD}",
                f"key_manager_password {KEYSTORE_PASSWORD}",
            ]
        (config_dir / "moquette.conf").write_text("\n".join(lines) + "\n")
        log_config = workdir / "log4j.properties"
        log_config.write_text(LOG4J_PROPERTIES)
        return [
            java(),
            f"-Dmoquette.path={workdir}",
            f"-Dlog4j.configuration={log_config.as_uri()}",
            "-cp", f"{self.home / 'lib'}/*",
            MAIN_CLASS,
        ]
