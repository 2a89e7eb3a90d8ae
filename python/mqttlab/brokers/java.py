"""What the Java brokers (ActiveMQ, HiveMQ, Moquette) share: the `java` that runs them, the
keystore their TLS listeners read, and Maven Central, where HiveMQ and Moquette come from."""

from __future__ import annotations

import shutil
from pathlib import Path

from mqttlab.brokers.base import BrokerError, run_quietly

#: the password of the PKCS#12 keystore written for each run's TLS listener (its key is as
#: throwaway as the run's certificate)
KEYSTORE_PASSWORD = "mqttlab-throwaway"

# A pom with one dependency: `mvn dependency:copy-dependencies` then fetches exactly that
# artifact and what it needs at run time.
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>mqttlab</groupId>
  <artifactId>{name}-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def java() -> str:
    """The `java` on PATH that starts a broker."""
    found = shutil.which("java")
    if found is None:
        raise BrokerError("java is not installed (apt-get install default-jre-headless)")
    return found


def fetch_from_maven(name: str, home: Path, group: str, artifact: str, version: str) -> None:
    """`group:artifact:version` and its run-time dependencies from Maven Central into `home`/lib."""
    (home / "pom.xml").write_text(POM.format(name=name, group=group, artifact=artifact, version=version))
    run_quietly(
        ["mvn", "-q", "-B", "dependency:copy-dependencies",
         f"-DoutputDirectory={home / 'lib'}", "-DincludeScope=runtime"],
        cwd=home, timeout=900,
    )
