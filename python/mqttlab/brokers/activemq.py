"""Apache ActiveMQ 5 ("Classic") from the Debian package, run as our own child: the broker's
console main (activemq.jar `start xbean:file:...`) with an activemq.xml written into the run's
workdir that has only our MQTT listeners. The Debian service is never what we talk to."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from mqttlab.brokers.base import BrokerError, Launcher, Ports, apt_install
from mqttlab.brokers.java import KEYSTORE_PASSWORD, java
from mqttlab.tls import TlsMaterial, write_pkcs12

ACTIVEMQ_HOME = Path("/usr/share/activemq")
RUN_JAR = ACTIVEMQ_HOME / "bin" / "activemq.jar"
# Debian's activemq ships activemq-mqtt.jar without the FuseSource MQTT codec it is built on
# (every MQTT connection fails with NoClassDefFoundError: org/fusesource/mqtt/codec/...); the
# codec comes with libmqtt-client-java and is put on the broker's classpath by us.
MQTT_CODEC_JAR = Path("/usr/share/java/mqtt-client.jar")
PACKAGES = ("activemq", "libmqtt-client-java")

BEANS_NS = "http://www.springframework.org/schema/beans"
CORE_NS = "http://activemq.apache.org/schema/core"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA_LOCATION = (
    f"{BEANS_NS} http://www.springframework.org/schema/beans/spring-beans-2.0.xsd "
    f"{CORE_NS} http://activemq.apache.org/schema/core/activemq-core.xsd"
)

# As Debian's /usr/share/activemq/activemq-options starts the service.
SHIPPED_JVM = ("-Xms512M", "-Xmx512M", "-Dorg.apache.activemq.UseDedicatedTaskRunner=true")
# A bounded heap, because several JVM brokers may share the machine; 1 GiB leaves ActiveMQ's
# memory limit (70 % of it) room for the backlog of a benchmark. Pooled task runners instead of
# a thread per connection and destination (the upstream default).
TUNED_JVM = ("-Xmx1g", "-Dorg.apache.activemq.UseDedicatedTaskRunner=false")

# Debian's ActiveMQ logs through log4j 1.2 (slf4j-log4j12), which reads log4j.properties from the
# conf folder on the classpath.
LOG4J = """log4j.rootLogger={level}, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=%d %-5p %c{{1}} - %m%n
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
"""

ET.register_namespace("", BEANS_NS)
ET.register_namespace("amq", CORE_NS)
ET.register_namespace("xsi", XSI_NS)


def _core(tag: str) -> str:
    return f"{{{CORE_NS}}}{tag}"


class ActivemqLauncher(Launcher):
    name = "activemq"
    source = "Debian package activemq 5.17 (+ libmqtt-client-java for its MQTT codec)"
    install_time = "about 20 s (apt)"
    mqtt_versions = ("3.1", "3.1.1")
    has_tls = True
    start_timeout = 90.0  # a cold JVM and Spring/XBean context on a busy 2-core machine
    how_to_get = f"apt-get install {' '.join(PACKAGES)} (Debian), or `mqttlab brokers install activemq` as root"
    required_settings = (
        ("broker useJmx=false", "JMX would open an RMI connector on the fixed port 1099"),
        ("only our mqtt:// (and mqtt+ssl://) transport connectors, on the placement's address",
         "the shipped activemq.xml opens OpenWire on 61616; runs must coexist"),
        ("dataDirectory, activemq.base/conf/data in the run's workdir", "runs never share state"),
        ("sslContext keyStore = our throwaway PKCS#12, no truststore",
         "the TLS listener serves our certificate; clients are not asked for one"),
        ("libmqtt-client-java on the classpath",
         "Debian's activemq lacks the MQTT codec its MQTT transport needs"),
        ("as-shipped: JVM " + " ".join(SHIPPED_JVM), "what Debian's activemq-options gives the service"),
    )
    tuned_settings = (
        ("broker persistent=false",
         "no KahaDB journal on disk: the benchmark measures the broker, not the disk "
         "(QoS 1/2 are then kept in memory only, as for the other brokers' tuned configs)"),
        ("broker advisorySupport=false", "advisory messages on every connect and subscribe cost CPU"),
        ("transport.tcpNoDelay=true on both listeners", "Nagle's algorithm would hold small publishes back"),
        ("wireFormat.maxFrameSize=268435456",
         "MQTT's maximum packet size (ActiveMQ's default too); stated for the record"),
        ("systemUsage memoryUsage percentOfJvmHeap=70",
         "ActiveMQ's 1 GiB default exceeds the heap and is cut to 70 % with a warning; producer flow "
         "control starts only at this limit"),
        ("JVM " + " ".join(TUNED_JVM),
         "bounded heap beside other brokers; pooled threads instead of one per connection"),
        ("log4j root level WARN", "INFO logs every MQTT connection"),
    )

    def find(self) -> bool:
        return shutil.which("java") is not None and RUN_JAR.is_file() and MQTT_CODEC_JAR.is_file()

    def version(self) -> str | None:
        try:
            with zipfile.ZipFile(RUN_JAR) as jar:
                manifest = jar.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
        except (OSError, KeyError, zipfile.BadZipFile):
            return None
        for line in manifest.splitlines():
            if line.startswith("Implementation-Version:"):
                return f"activemq {line.split(':', 1)[1].strip()}"
        return None

    def install(self) -> None:
        if self.find():
            return
        apt_install(*PACKAGES)

    def _user_broker(self) -> tuple[ET.Element, ET.Element]:
        try:
            root = ET.fromstring(self.config.user_text())
        except ET.ParseError as exc:
            raise BrokerError(f"activemq config file {self.config.file}: {exc}") from None
        broker = root if root.tag == _core("broker") else root.find(f".//{_core('broker')}")
        if broker is None:
            raise BrokerError(f"activemq config file {self.config.file}: no <broker xmlns=\"{CORE_NS}\"> element")
        return root, broker

    def _config(self, base: Path, ports: Ports, tls: TlsMaterial | None) -> ET.Element:
        if self.config.mode == "file":
            root, broker = self._user_broker()
            # The file's listeners and TLS context give way to ours.
            for tag in ("transportConnectors", "sslContext"):
                for old in broker.findall(_core(tag)):
                    broker.remove(old)
        else:
            root = ET.Element(f"{{{BEANS_NS}}}beans", {f"{{{XSI_NS}}}schemaLocation": SCHEMA_LOCATION})
            # Lets ${activemq.base} and friends in the file resolve from our -D options.
            ET.SubElement(root, f"{{{BEANS_NS}}}bean", {
                "class": "org.springframework.beans.factory.config.PropertyPlaceholderConfigurer"})
            broker = ET.SubElement(root, _core("broker"))
        broker.set("brokerName", broker.get("brokerName", "mqttlab"))
        broker.set("useJmx", "false")
        broker.set("dataDirectory", str(base / "data"))
        query = ""
        if self.config.tuned:
            broker.set("persistent", "false")
            broker.set("advisorySupport", "false")
            usage = ET.SubElement(ET.SubElement(broker, _core("systemUsage")), _core("systemUsage"))
            ET.SubElement(ET.SubElement(usage, _core("memoryUsage")), _core("memoryUsage"),
                          {"percentOfJvmHeap": "70"})
            query = "?transport.tcpNoDelay=true&wireFormat.maxFrameSize=268435456"
        host = self.placement.listen_host
        connectors = ET.SubElement(broker, _core("transportConnectors"))
        ET.SubElement(connectors, _core("transportConnector"),
                      {"name": "mqtt", "uri": f"mqtt://{host}:{ports.plain}{query}"})
        if tls is not None and ports.tls is not None:
            keystore = write_pkcs12(tls.cert_file, tls.key_file, tls.ca_file, base / "server.p12", KEYSTORE_PASSWORD)
            ET.SubElement(ET.SubElement(broker, _core("sslContext")), _core("sslContext"), {
                "keyStore": str(keystore),
                "keyStorePassword": KEYSTORE_PASSWORD,
                "keyStoreKeyPassword": KEYSTORE_PASSWORD,
                "keyStoreType": "pkcs12",
            })
            ET.SubElement(connectors, _core("transportConnector"),
                          {"name": "mqtt+ssl", "uri": f"mqtt+ssl://{host}:{ports.tls}{query}"})
        return root

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        base = workdir / "activemq"
        conf = base / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (base / "data").mkdir(exist_ok=True)
        root = self._config(base, ports, tls)
        ET.indent(root)
        config = conf / "activemq.xml"
        config.write_text('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n")
        (conf / "log4j.properties").write_text(LOG4J.format(level="WARN" if self.config.tuned else "INFO"))
        return [
            java(),
            *(TUNED_JVM if self.config.tuned else SHIPPED_JVM),
            # The console main puts activemq.classpath on the broker's class loader.
            f"-Dactivemq.classpath={conf}:{MQTT_CODEC_JAR}",
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            f"-Dactivemq.base={base}",
            f"-Dactivemq.conf={conf}",
            f"-Dactivemq.data={base / 'data'}",
            f"-Djava.io.tmpdir={base / 'data'}",
            "-jar", str(RUN_JAR),
            "start", f"xbean:file:{config}",
        ]
