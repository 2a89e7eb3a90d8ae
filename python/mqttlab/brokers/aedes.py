"""Aedes (Node.js) from npm, installed with `npm install --prefix` into mqttlab's broker folder,
run by the small server script `aedes_server.mjs` that ships with mqttlab."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mqttlab.brokers.base import BrokerError, Launcher, Ports, data_dir, run_quietly
from mqttlab.tls import TlsMaterial

AEDES_VERSIONS = ("1.2.0", "0.51.3")
#: the WebSocket server Aedes' own documentation pairs it with (its streams go to broker.handle)
WS_PACKAGE = "ws@8.18.3"
SERVER_SCRIPT = Path(__file__).with_name("aedes_server.mjs")


class AedesLauncher(Launcher):
    name = "aedes"
    memory_only = True
    persistence_refusal = ("Aedes persists through a store module (aedes-persistence-*) and mqttlab runs it with "
                           "the in-memory one")
    how_to_get = f"`mqttlab brokers install aedes` (npm install aedes@{AEDES_VERSIONS[0]}; needs node and npm)"
    source = "npm aedes, run on Debian's Node.js"
    install_time = "about 10 s (npm)"
    versions = AEDES_VERSIONS
    accepts_config_file = False
    has_websocket = True
    tuned_settings = (
        ("concurrency 10000", "Aedes' default of 100 concurrent deliveries throttles fan-out"),
        ("noDelay true on every listener", "Nagle's algorithm would hold small publishes back"),
    )

    @property
    def home(self) -> Path:
        return data_dir() / "aedes" / str(self.pinned_version)

    def _package_json(self, package: str = "aedes") -> Path:
        return self.home / "node_modules" / package / "package.json"

    def find(self) -> bool:
        return shutil.which("node") is not None and self._package_json().is_file()

    def version(self) -> str | None:
        try:
            return f"aedes {json.loads(self._package_json().read_text())['version']}"
        except (OSError, ValueError, KeyError):
            return None

    def install(self) -> None:
        # An install from before the WebSocket listener lacks `ws`: it is added then.
        if self.find() and self._package_json("ws").is_file():
            return
        if shutil.which("npm") is None or shutil.which("node") is None:
            raise BrokerError("installing aedes needs node and npm (apt-get install nodejs npm)")
        self.home.mkdir(parents=True, exist_ok=True)
        run_quietly(["npm", "install", "--prefix", str(self.home), "--no-audit", "--no-fund",
                     "--omit=dev", f"aedes@{self.pinned_version}", WS_PACKAGE], timeout=600)

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        # Node resolves `import 'aedes'` from the script's folder upwards, so the script is
        # copied next to the installed node_modules.
        script = self.home / SERVER_SCRIPT.name
        if not script.exists() or script.read_bytes() != SERVER_SCRIPT.read_bytes():
            shutil.copyfile(SERVER_SCRIPT, script)
        config: dict[str, object] = {"host": self.placement.listen_host, "port": ports.plain}
        if not self.config.tuned:
            config.update(concurrency=100, no_delay=False)  # Aedes' and Node's own defaults
        if tls is not None and ports.tls is not None:
            config.update(tls_port=ports.tls, cert_file=str(tls.cert_file), key_file=str(tls.key_file))
        if ports.ws is not None:
            if not self._package_json("ws").is_file():
                raise BrokerError(f"aedes' WebSocket listener needs the npm package ws: {self.how_to_get}")
            config.update(ws_port=ports.ws, wss_port=ports.wss)
        config_file = workdir / "aedes.json"
        config_file.write_text(json.dumps(config, indent=2))
        node = shutil.which("node")
        if node is None:
            raise BrokerError("node is not installed (apt-get install nodejs)")
        return [node, str(script), str(config_file)]
