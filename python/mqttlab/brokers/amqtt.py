"""amqtt (Python, asyncio) from PyPI. It pins its own dependencies, so it lives in a virtualenv
of its own under mqttlab's broker folder rather than in mqttlab's environment."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mqttlab.brokers.base import Launcher, Ports, data_dir, run_quietly
from mqttlab.tls import TlsMaterial

AMQTT_REQUIREMENT = "amqtt==0.12.1"

# amqtt's own command logs every connection at INFO, which costs CPU under load; configuring the
# root logger first turns its later `basicConfig` into a no-op and keeps warnings and errors.
RUNNER = """
import logging, sys
logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
from amqtt.scripts.broker_script import main
sys.argv[0] = "amqtt"
sys.exit(main())
"""


class AmqttLauncher(Launcher):
    name = "amqtt"
    how_to_get = f"`mqttlab brokers install amqtt` (pip install {AMQTT_REQUIREMENT} into its own virtualenv)"
    source = "PyPI amqtt, in a virtualenv of its own"
    install_time = "about 20 s (pip)"
    accepts_config_file = False
    required_settings = (
        ("plugins: anonymous authentication only", "benchmark clients connect without credentials"),
    )
    tuned_settings = (
        ("log level WARNING", "amqtt logs every connection at INFO, which costs CPU under load"),
    )

    @property
    def home(self) -> Path:
        return data_dir() / "amqtt"

    def _executable(self) -> Path:
        return self.home / "venv" / "bin" / "amqtt"

    def _python(self) -> Path:
        return self.home / "venv" / "bin" / "python"

    def find(self) -> bool:
        return self._executable().is_file()

    def version(self) -> str | None:
        # The dist-info folder names the installed version without starting an interpreter.
        found = sorted((self.home / "venv" / "lib").glob("python*/site-packages/amqtt-*.dist-info"))
        if not found:
            return None
        return "amqtt " + found[-1].name[len("amqtt-"):-len(".dist-info")]

    def install(self) -> None:
        if self.find():
            return
        venv = self.home / "venv"
        self.home.mkdir(parents=True, exist_ok=True)
        run_quietly([sys.executable, "-m", "venv", "--clear", str(venv)], timeout=300)
        run_quietly([str(venv / "bin" / "pip"), "install", "--quiet", AMQTT_REQUIREMENT], timeout=900)

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        listeners: dict[str, dict[str, object]] = {
            "default": {"type": "tcp", "bind": f"{self.placement.listen_host}:{ports.plain}", "max_connections": 0},
        }
        if tls is not None and ports.tls is not None:
            listeners["tls"] = {
                "type": "tcp",
                "bind": f"{self.placement.listen_host}:{ports.tls}",
                "ssl": True,
                "certfile": str(tls.cert_file),
                "keyfile": str(tls.key_file),
            }
        config = {
            "listeners": listeners,
            # Only anonymous access: amqtt's default packet and event loggers would cost CPU on
            # every message and distort the measurement.
            "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
        }
        # JSON is valid YAML, which is what amqtt reads.
        config_file = workdir / "amqtt.yaml"
        config_file.write_text(json.dumps(config, indent=2))
        if self.config.tuned:
            return [str(self._python()), "-c", RUNNER, "-c", str(config_file)]
        return [str(self._executable()), "-c", str(config_file)]
