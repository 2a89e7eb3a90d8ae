"""HiveMQ Community Edition from Maven Central (com.hivemq:hivemq-community-edition-embedded):
the jar and its dependencies are fetched by `mvn dependency:copy-dependencies` from a small
generated pom, and our own small launcher program (hivemq_main/HivemqMain.java, compiled by
install() against those jars) runs EmbeddedHiveMQ with the run's config, data and extensions
folders until SIGTERM."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from mqttlab.brokers.base import RESTART_STATE, WEBSOCKET_PATH, BrokerError, Launcher, Ports, apt_install, data_dir, run_quietly
from mqttlab.brokers.java import KEYSTORE_PASSWORD, fetch_from_maven, java
from mqttlab.tls import TlsMaterial, write_pkcs12

ARTIFACT = "hivemq-community-edition-embedded"
MAIN_SOURCE = Path(__file__).with_name("hivemq_main") / "HivemqMain.java"
MAIN_CLASS = "HivemqMain"
# Several JVM brokers may run side by side on one machine; without -Xmx each would be allowed a
# quarter of the RAM. 1 GiB holds the in-memory queues of a benchmark with hundreds of clients.
HEAP = "1g"
# HiveMQ's tuned limits: per-client queue, MQTT 5 receive maximum, MQTT 3 inflight window.
QUEUE_SIZE = 1_000_000
RECEIVE_MAXIMUM = 65535
# 1000, not MQTT's 65535: with 65535 HiveMQ 2025.5 stopped delivering to its subscribers after
# about 2 s of a 5x5 QoS 1 run (3 runs of 3 here); 1000 and 10000 delivered everything.
INFLIGHT_WINDOW = 1000
# What HiveMQ's own start script gives the JVM: Netty and HiveMQ's system metrics reach into
# these JDK internals, and without the flags fall back to slower paths or warn.
JDK_OPENS = (
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
)

# Warnings only: HiveMQ's INFO logging of every start-up step and client would cost CPU under load.
LOGBACK_WARN = """<configuration scan="false">
  <appender name="CONSOLE" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d %level %logger{20} - %msg%n%ex</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="CONSOLE"/></root>
  <logger name="jetbrains.exodus" level="ERROR"/>
  <logger name="oshi" level="ERROR"/>
</configuration>
"""


def _child(parent: ET.Element, *path: str) -> ET.Element:
    """The element at `path` below `parent`, created where missing."""
    element = parent
    for tag in path:
        found = element.find(tag)
        element = found if found is not None else ET.SubElement(element, tag)
    return element


def _set(parent: ET.Element, path: str, value: object) -> None:
    _child(parent, *path.split("/")).text = str(value)


class HivemqLauncher(Launcher):
    name = "hivemq"
    source = f"Maven Central com.hivemq:{ARTIFACT}, run by mqttlab's HivemqMain (Java 11+)"
    install_time = "about 30 s (mvn, 100 MB of jars; javac)"
    mqtt_versions = ("3.1", "3.1.1", "5")
    has_tls = True
    has_websocket = True
    # Every one of these is Java 11 bytecode and serves QoS 0/1/2 on plain and TLS on Debian 12's
    # Java 17 (checked here); 2025.5 also passes tests/test_brokers_launchers.py.
    versions = ("2025.5", "2025.4", "2025.1", "2024.6", "2024.3")
    start_timeout = 90.0  # a cold JVM, Guice and persistence set-up on a busy 2-core machine
    how_to_get = (
        f"`mqttlab brokers install hivemq` (com.hivemq:{ARTIFACT} from Maven Central; "
        "needs java, javac and mvn: apt-get install default-jdk-headless maven)"
    )
    required_settings = (
        ("anonymous-usage-statistics enabled=false",
         "HiveMQ would report usage to its makers; the lab talks to loopback only"),
        ("every listener binds the placement's address only",
         "the shipped config.xml binds 0.0.0.0:1883; runs must coexist and stay off the network"),
        ("config, data, extensions (empty), log and tmp folders in the run's workdir",
         "runs never share state; no extension is loaded"),
        (f"JVM -Xmx{HEAP}", "several JVM brokers may share the machine; the default would be 1/4 of RAM"),
        ("JVM --add-opens/--add-exports as HiveMQ's run.sh sets them",
         "Netty and HiveMQ's metrics use these JDK internals"),
    )
    tuned_settings = (
        ("persistence mode=in-memory",
         "queues and sessions stay in the heap instead of RocksDB/Xodus files on disk: the benchmark "
         "measures the broker, not the disk (state is per run anyway)"),
        (f"mqtt queued-messages max-queue-size={QUEUE_SIZE}",
         "default 1000 per client: a subscriber that falls behind loses QoS 1/2 messages beyond it"),
        ("mqtt queued-messages strategy=discard",
         "when a queue is full anyway, new messages are dropped (default), so losses show in the accounting"),
        (f"mqtt receive-maximum server-receive-maximum={RECEIVE_MAXIMUM}",
         "default 10: an MQTT 5 publisher may have only 10 QoS 1/2 publishes unacknowledged"),
        (f"internal MAX_INFLIGHT_WINDOW_SIZE_MESSAGES={INFLIGHT_WINDOW}",
         "default 50 unacknowledged QoS 1/2 messages towards an MQTT 3 subscriber, which caps a "
         "subscriber on a slow link (no config.xml setting; set by HivemqMain before start; 65535 "
         "stalled delivery here)"),
        ("mqtt packets max-packet-size=268435460",
         "already HiveMQ's default and MQTT's maximum; stated so that the record shows no size cap"),
        ("logback root level WARN", "INFO logs every client connect and disconnect"),
        ("TCP_NODELAY", "HiveMQ sets it on every connection itself: nothing to configure"),
    )

    persistence_on_settings = (
        ("persistence mode=file", "launch.persistence: client sessions, subscriptions, queued and retained messages on disk "
         "in the run's data folder (HiveMQ's default mode)"),
    )
    persistence_off_settings = (("persistence mode=in-memory", "launch.persistence false: the state in the heap only"),)
    # HiveMQ CE's default persistence mode is `file`.
    shipped_persistence = True

    def persisted_promises(self) -> dict[str, object]:
        return {"clean": dict.fromkeys(RESTART_STATE, True), "crash": dict.fromkeys(RESTART_STATE),
                "source": "HiveMQ CE configuration, persistence mode file: client sessions, queued messages and retained "
                          "messages are stored in the data folder and survive a restart; what a crash keeps is not said"}

    @property
    def home(self) -> Path:
        return data_dir() / "hivemq" / (self.pinned_version or self.versions[0])

    def _jar(self) -> Path:
        return self.home / "lib" / f"{ARTIFACT}-{self.pinned_version}.jar"

    def _main_is_current(self) -> bool:
        # The compiled launcher is kept beside a copy of the source it came from, so that a
        # newer mqttlab recompiles it.
        copy = self.home / MAIN_SOURCE.name
        return ((self.home / f"{MAIN_CLASS}.class").is_file() and copy.is_file()
                and copy.read_bytes() == MAIN_SOURCE.read_bytes())

    def find(self) -> bool:
        return shutil.which("java") is not None and self._jar().is_file() and self._main_is_current()

    def version(self) -> str | None:
        return f"hivemq {self.pinned_version}" if self._jar().is_file() else None

    def install(self) -> None:
        self.check_config()
        if self.find():
            return
        if any(shutil.which(tool) is None for tool in ("java", "javac", "mvn")):
            apt_install("default-jdk-headless", "maven")
        self.home.mkdir(parents=True, exist_ok=True)
        if not self._jar().is_file():
            fetch_from_maven("hivemq", self.home, "com.hivemq", ARTIFACT, str(self.pinned_version))
        source = self.home / MAIN_SOURCE.name
        shutil.copyfile(MAIN_SOURCE, source)
        # --release 11: the same class runs on every JVM HiveMQ CE supports.
        run_quietly(["javac", "--release", "11", "-nowarn", "-cp", f"{self.home / 'lib'}/*",
                     "-d", str(self.home), str(source)], timeout=300)

    def _config(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> ET.Element:
        if self.config.mode == "file":
            try:
                root = ET.fromstring(self.config.user_text())
            except ET.ParseError as exc:
                raise BrokerError(f"hivemq config file {self.config.file}: {exc}") from None
            if root.tag != "hivemq":
                raise BrokerError(f"hivemq config file {self.config.file}: the root element must be <hivemq>")
        else:
            root = ET.Element("hivemq")
        # Our listeners replace the file's: theirs would bind fixed ports, maybe on every address.
        for old in root.findall("listeners"):
            root.remove(old)
        listeners = ET.Element("listeners")
        root.insert(0, listeners)
        plain = ET.SubElement(listeners, "tcp-listener")
        _set(plain, "port", ports.plain)
        _set(plain, "bind-address", self.placement.listen_host)
        if tls is not None and ports.tls is not None:
            keystore = write_pkcs12(tls.cert_file, tls.key_file, tls.ca_file,
                                    workdir / "hivemq" / "server.p12", KEYSTORE_PASSWORD)
            secure = ET.SubElement(listeners, "tls-tcp-listener")
            _set(secure, "port", ports.tls)
            _set(secure, "bind-address", self.placement.listen_host)
            _set(secure, "tls/keystore/path", keystore)
            _set(secure, "tls/keystore/password", KEYSTORE_PASSWORD)
            _set(secure, "tls/keystore/private-key-password", KEYSTORE_PASSWORD)
        for port, kind in ((ports.ws, "websocket-listener"), (ports.wss, "tls-websocket-listener")):
            if port is None:
                continue
            listener = ET.SubElement(listeners, kind)
            _set(listener, "port", port)
            _set(listener, "bind-address", self.placement.listen_host)
            _set(listener, "path", WEBSOCKET_PATH)
            _set(listener, "subprotocols/subprotocol", "mqtt")
            if kind.startswith("tls"):
                _set(listener, "tls/keystore/path", workdir / "hivemq" / "server.p12")
                _set(listener, "tls/keystore/password", KEYSTORE_PASSWORD)
                _set(listener, "tls/keystore/private-key-password", KEYSTORE_PASSWORD)
        _set(root, "anonymous-usage-statistics/enabled", "false")
        if self.config.tuned:
            _set(root, "mqtt/queued-messages/max-queue-size", QUEUE_SIZE)
            _set(root, "mqtt/queued-messages/strategy", "discard")
            _set(root, "mqtt/packets/max-packet-size", 268435460)
            _set(root, "mqtt/receive-maximum/server-receive-maximum", RECEIVE_MAXIMUM)
        if self.config.tuned or self.persistence is not None:
            _set(root, "persistence/mode", "file" if self.persists() else "in-memory")
        return root

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        base = workdir / "hivemq"
        folders = {name: base / name for name in ("conf", "data", "extensions", "log", "tmp")}
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        root = self._config(workdir, ports, tls)
        ET.indent(root)
        (folders["conf"] / "config.xml").write_text(
            '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n")
        logback = folders["conf"] / "logback.xml"
        if self.config.tuned:
            logback.write_text(LOGBACK_WARN)
        else:
            logback.unlink(missing_ok=True)  # HiveMQ's own logging as shipped (INFO)
        command = [
            java(), f"-Xmx{HEAP}", *JDK_OPENS,
            f"-Dhivemq.home={base}",
            f"-Dhivemq.log.folder={folders['log']}",
            # RocksDB and Netty unpack native libraries here: per run, gone with the workdir.
            f"-Djava.io.tmpdir={folders['tmp']}",
        ]
        if self.config.tuned:
            command.append(f"-Dmqttlab.hivemq.inflightWindow={INFLIGHT_WINDOW}")
        return [
            *command,
            "-cp", f"{self.home}:{self.home / 'lib'}/*",
            MAIN_CLASS, str(folders["conf"]), str(folders["data"]), str(folders["extensions"]),
        ]
