"""The Eclipse Paho MQTT-SN Gateway (paho.mqtt-sn.embedded-c, commit 07a9512) as a transparent
gateway in front of any broker: one broker connection per MQTT-SN client, like mqttlab's own.
Built from the pinned upstream snapshot (mqttlab.brokers.sources) by its `build.sh udp` (cmake,
C++, OpenSSL headers) into mqttlab's broker folder; configured per run by its `gateway.conf`.

    with PahoGatewayLauncher().start(workdir, broker.url()) as gateway:
        gateway.port   # MQTT-SN clients send here (UDP)

What it cannot do here: bind one address (its UDP sockets take every address of the host or
network namespace it runs in), and QoS -1 from clients not listed by address in its clients.conf."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from urllib.parse import urlsplit

from mqttlab.brokers import process, sources
from mqttlab.brokers.base import Availability, BrokerError, BrokerStartError, Placement, apt_install, data_dir, run_quietly
from mqttlab.brokers.gateway import RunningGateway, free_udp_port, wait_until_answering
from mqttlab.brokers.sources import install_build_tools, keep_built

NAME = "paho-mqtt-sn-gateway"
VERSION = "07a9512"
BINARY = "MQTT-SNGateway"
LIBRARY = "libMQTTSNPacket.so"
HOW_TO_GET = (f"`mqttlab brokers install paho-mqtt-sn-gateway` or scripts/install-brokers.sh (builds the Paho MQTT-SN gateway "
              f"from {sources.fetched_from(sources.PAHO_GATEWAY)})")
INSTALL_TIME = "27-31 s here from nothing, other builds sharing the 2 cores (build.sh udp: cmake, make, C++)"
#: the gateway refuses clients past this many; a benchmark's clients must all fit
MAX_CLIENTS = 10000


class PahoGatewayLauncher:
    """Builds and starts the Paho MQTT-SN gateway in front of an MQTT broker."""

    name = NAME
    # what `mqttlab brokers list` shows of it, as of a broker launcher
    how_to_get = HOW_TO_GET
    source = f"upstream source {sources.PAHO_GATEWAY.tarball} (sha256 pinned), built by its build.sh udp"
    install_time = INSTALL_TIME
    mqtt_versions = ("MQTT-SN 1.2 -> MQTT 3.1.1",)
    has_tls = False
    tested_by_test_command = True
    accepts_config_file = False
    versions: tuple[str, ...] = ()
    start_timeout: float = 20.0
    #: where the gateway runs (mqttlab.netem sets the broker's namespace)
    placement: Placement = Placement()

    @property
    def home(self) -> Path:
        return data_dir() / NAME / VERSION

    def executable(self) -> Path:
        return self.home / BINARY

    def find(self) -> bool:
        return self.executable().is_file() and (self.home / LIBRARY).is_file()

    def version(self) -> str | None:
        return f"{NAME} {VERSION}" if self.find() else None

    def availability(self) -> Availability:
        if not self.find():
            return Availability(False, None, HOW_TO_GET)
        return Availability(True, self.version(), "installed")

    def install(self) -> None:
        if self.find():
            return
        install_build_tools(cmake=True, cxx=True)
        if not Path("/usr/include/openssl/ssl.h").is_file():
            apt_install("libssl-dev")
        self.home.mkdir(parents=True, exist_ok=True)
        tree = sources.unpack(sources.PAHO_GATEWAY, self.home / "src")
        run_quietly(["bash", "./build.sh", "udp"], cwd=tree / "MQTTSNGateway", timeout=3600)
        # The gateway links its packet library dynamically, found through the build tree's path
        # baked in; kept beside the binary instead (LD_LIBRARY_PATH at start), before the binary.
        shutil.copy2(tree / "build.gateway" / "MQTTSNPacket" / "src" / LIBRARY, self.home / LIBRARY)
        keep_built(tree / "MQTTSNGateway" / "bin" / BINARY, self.executable(), source_tree=self.home / "src")

    def config_text(self, workdir: Path, host: str, port: int, udp_port: int, multicast_port: int,
                    predefined: dict[int, str]) -> str:
        lines = [
            "# written by mqttlab for one run",
            "GatewayID=1",
            "GatewayName=mqttlab-paho",
            f"MaxNumberOfClients={MAX_CLIENTS}",
            "KeepAlive=60",
            f"BrokerName={host}",
            f"BrokerPortNo={port}",
            "AggregatingGateway=NO",
            "QoS-1=NO",
            "Forwarder=NO",
            "ClientAuthentication=NO",
            f"GatewayPortNo={udp_port}",
            # Its multicast socket (SEARCHGW/ADVERTISE) needs a port too: a free one, never 1883.
            f"MulticastPortNo={multicast_port}",
            "MulticastIP=225.1.1.1",
            "MulticastTTL=1",
            "ShearedMemory=NO",
        ]
        if predefined:
            topics = workdir / "predefinedTopic.conf"
            topics.write_text("".join(f"*,{name},{topic_id}\n" for topic_id, name in sorted(predefined.items())))
            lines += ["PredefinedTopic=YES", f"PredefinedTopicList={topics}"]
        else:
            lines += ["PredefinedTopic=NO"]
        return "\n".join(lines) + "\n"

    def start(self, workdir: Path, broker_url: str, *, predefined: dict[int, str] | None = None,
              retry_ms: int = 1000) -> RunningGateway:
        """Starts the gateway on a free UDP port in front of `broker_url` (mqtt://HOST:PORT) and
        returns once it answers a CONNECT. (`retry_ms` is the clients' business: the Paho gateway
        has no setting for it.)"""
        parts = urlsplit(broker_url)
        if parts.scheme not in ("mqtt", "tcp") or not parts.hostname or not parts.port:
            raise BrokerError(f"broker_url: the gateway needs a plain mqtt://HOST:PORT broker, got {broker_url!r}")
        if not self.find():
            raise BrokerError(f"the Paho MQTT-SN gateway is not built here: {HOW_TO_GET}")
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        port, multicast_port = free_udp_port(), free_udp_port()
        config_file = workdir / "gateway.conf"
        config_file.write_text(self.config_text(workdir, parts.hostname, parts.port, port, multicast_port,
                                                predefined or {}))
        log_file = workdir / "gateway.log"
        log_file.write_bytes(b"")
        if self.placement.command_prefix:
            # The gateway joins a multicast group (for SEARCHGW) at start and aborts without a
            # route for it ("Can't open a UDP", ENODEV), which a fresh network namespace lacks.
            run_quietly([*self.placement.command_prefix, "ip", "route", "replace", "224.0.0.0/4", "dev", "lo"])
        command = [*self.placement.command_prefix, str(self.executable()), "-f", str(config_file)]
        try:
            child = process.spawn(command, log_file=log_file, cwd=workdir,
                                  env={**os.environ, "LD_LIBRARY_PATH": str(self.home)})
        except OSError as exc:
            raise BrokerStartError(f"cannot run the Paho MQTT-SN gateway: {exc}") from None
        host = self.placement.reach_host
        try:
            wait_until_answering(host, port, child=child, timeout=self.start_timeout, log_file=log_file,
                                 name="the Paho MQTT-SN gateway")
        except BaseException:
            process.terminate(child)
            raise
        config: dict[str, object] = {"listen": f"0.0.0.0:{port}", "broker_host": parts.hostname,
                                     "broker_port": parts.port,
                                     "predefined": {str(k): v for k, v in (predefined or {}).items()},
                                     "build": sources.provenance(sources.PAHO_GATEWAY, self.source)}
        # It records SIGTERM but leaves only on SIGINT (MQTTSNGWProcess.cpp): stopped with SIGINT.
        return RunningGateway(host, port, broker_url, child.pid, log_file, config, name=NAME,
                              version=self.version(), stop_signal=signal.SIGINT, _process=child)
