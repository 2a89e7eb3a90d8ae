"""RSMB, the Really Small Message Broker (Eclipse mosquitto.rsmb 1.3.0.2), built from the pinned
upstream snapshot (mqttlab.brokers.sources) with `make broker_mqtts`: an MQTT 3.1/3.1.1 broker with
an MQTT-SN listener on UDP, what seed 004 ran its MQTT-SN side on (commit 36fd4ba, the one pinned).

RSMB has no TLS and no WebSocket. As shipped (no config file: its compiled-in defaults) it keeps
at most 10 QoS 1/2 messages in flight per client and queues at most 1000 more; past that it
discards new messages for that client, and disconnects it once it has discarded ten times the
queue limit (MQTTProtocolClient.c). A subscriber that falls 1010 messages behind loses messages
(a 5,000-message backlog: 1,010 delivered as shipped, 5,000 tuned).

Over MQTT-SN it stalls QoS 1/2 delivery to a subscriber once a second message arrives while the
first is unacknowledged (the rest stay queued until the client leaves); QoS 0 and -1 are exact
(docs/mqtt-sn.md)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mqttlab.brokers import sources
from mqttlab.brokers.base import BrokerError, Ports, RunningBroker, run_quietly
from mqttlab.brokers.sources import SourceBuiltLauncher, install_build_tools, keep_built
from mqttlab.tls import TlsMaterial

VERSION = "1.3.0.2"
BINARY = "broker_mqtts"
#: RSMB reads its message catalogue from a file of this name beside the binary
MESSAGES = f"Messages.{VERSION}"


class RsmbLauncher(SourceBuiltLauncher):
    name = "rsmb"
    source_version = VERSION
    binary = BINARY
    upstream = sources.RSMB
    how_to_get = f"`mqttlab brokers install rsmb` (make of RSMB {VERSION} from {sources.fetched_from(sources.RSMB)})"
    source = f"upstream source {sources.RSMB.tarball} (sha256 pinned), built with make (broker_mqtts)"
    install_time = "4-7 s here (make, one compiler run)"
    mqtt_versions = ("3.1", "3.1.1")
    has_tls = False
    start_timeout = 15.0
    #: the MQTT-SN UDP listener's port
    extra_ports = 1
    tuned_settings = (
        ("max_inflight_messages 65535",
         "the default 10 QoS 1/2 messages in flight per client caps a subscriber's throughput to 10 per round trip"),
        ("max_queued_messages 1000000",
         "the default 1000 queued messages per client: past them RSMB discards, then disconnects the client"),
    )
    required_settings = (
        ("listener PORT ADDRESS mqtt", "the MQTT listener on mqttlab's port and address"),
        ("listener UDPPORT ADDRESS mqtts", "the MQTT-SN listener (UDP) on mqttlab's port and address"),
        ("persistence_location <work directory>/", "nothing is written outside the run's directory"),
    )

    def find(self) -> bool:
        return super().find() and (self.home / MESSAGES).is_file()

    def install(self) -> None:
        if self.find():
            return
        install_build_tools(cmake=False)
        self.home.mkdir(parents=True, exist_ok=True)
        tree = sources.unpack(sources.RSMB, self.home / "src")
        src = tree / "rsmb" / "src"
        run_quietly(["make", "-C", str(src), BINARY], timeout=900)
        shutil.copyfile(src / MESSAGES, self.home / MESSAGES)
        keep_built(src / BINARY, self.executable(), source_tree=self.home / "src")

    def mqtt_sn_port(self, ports: Ports) -> int | None:
        return ports.extra[0]

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        if not self.find():
            raise BrokerError(f"rsmb is not installed: {self.how_to_get}")
        host = self.placement.listen_host
        # Global settings first: after a `listener` line RSMB reads the listener's own settings.
        lines = ["# written by mqttlab for one run", f"persistence_location {workdir}{os.sep}"]
        if self.config.tuned:
            # (Not `connection_messages false`: RSMB 1.3.0.2 then logs an MQTT-SN DISCONNECT with the
            # wrong message's format and crashes, MQTTSProtocol.c handleDisconnects.)
            lines += ["max_inflight_messages 65535", "max_queued_messages 1000000"]
        elif self.config.mode == "file":
            lines += [f"# --- from {self.config.file}", self.config.user_text(), "# --- mqttlab's listeners"]
        lines += [f"listener {ports.plain} {host} mqtt", f"listener {self.mqtt_sn_port(ports)} {host} mqtts"]
        config = workdir / "rsmb.conf"
        config.write_text("\n".join(lines) + "\n")
        return [str(self.executable()), str(config)]

    def start(self, workdir: Path, tls: bool = False, *, detach: bool = False,
              tls_certificate: str = "valid") -> RunningBroker:
        if tls:
            raise BrokerError("rsmb has no TLS listener; run it without TLS")
        broker = super().start(workdir, tls, detach=detach, tls_certificate=tls_certificate)
        from mqttlab.brokers.gateway import wait_until_answering

        try:
            assert broker.mqtt_sn_port is not None and broker.log_file is not None
            wait_until_answering(broker.host, broker.mqtt_sn_port, child=broker._process,
                                 timeout=self.start_timeout, log_file=broker.log_file, name="rsmb (MQTT-SN)")
        except BaseException:
            broker.stop()
            raise
        return broker
