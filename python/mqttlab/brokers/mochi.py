"""Mochi MQTT (Go) from the Go module proxy. Mochi is a library without a released broker binary,
so mqttlab builds its own small runner (the Go sources in `mochi_main/`) against the pinned
`github.com/mochi-mqtt/server/v2` release with `go build`, into mqttlab's broker folder.

Go comes from PATH (or /usr/local/go), else from Debian's golang-go. Debian 12's Go is 1.19 and
Mochi needs Go 1.21 from v2.4 on (log/slog), so with only that Go the default is v2.3.0, the
newest release that builds with it."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from mqttlab.brokers.base import BrokerError, Launcher, Ports, apt_install, data_dir, printed_version, run_quietly
from mqttlab.tls import TlsMaterial

MODULE = "github.com/mochi-mqtt/server/v2"
#: releases built and tested here, newest (the default) first
MOCHI_VERSIONS = ("2.7.9", "2.6.6", "2.3.0")
#: the newest release whose go.mod (and code: zerolog, no log/slog) suits Debian 12's Go 1.19
GO_1_19_VERSION = "2.3.0"
MAIN_SOURCES = Path(__file__).with_name("mochi_main")
RUNNER = "mochi-main"
#: Go installed outside PATH by the official tarball, and Debian's golang-go
GO_PLACES = ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")

# Mochi drops a QoS 1/2 message for a subscriber whose in-flight store (8192) or outbound queue
# (8192 writes) is full, and disconnects a publisher with more than 1024 unacknowledged QoS 1/2
# publishes: a benchmark would see losses and disconnects caused by those defaults.
TUNED_CAPABILITIES: dict[str, int] = {
    "maximum_inflight": 65535,
    "receive_maximum": 65535,
    "maximum_client_writes_pending": 65536,
    "maximum_message_expiry_interval": 0,
}


def _needs_go_1_21(version: str) -> bool:
    return tuple(int(p) for p in version.split(".")[:2]) >= (2, 4)


class MochiLauncher(Launcher):
    name = "mochi"
    how_to_get = (
        f"`mqttlab brokers install mochi` (go build of {MODULE} {MOCHI_VERSIONS[0]} from the Go module "
        f"proxy; needs Go >= 1.21, or Debian's golang-go, with which it builds {GO_1_19_VERSION})"
    )
    source = f"Go module {MODULE} (Go module proxy), built with mqttlab's runner by go build"
    install_time = "30-50 s (go build from empty caches)"
    mqtt_versions = ("3.1.1", "5")
    has_tls = True
    versions = MOCHI_VERSIONS
    start_timeout = 30.0
    tuned_settings = (
        ("capabilities.maximum_inflight 65535",
         "the per-client in-flight store (default 8192) drops QoS 1/2 messages when full; 65535 is "
         "the packet-identifier limit"),
        ("capabilities.receive_maximum 65535",
         "the default 1024 disconnects a publisher with more unacknowledged QoS 1/2 publishes"),
        ("capabilities.maximum_client_writes_pending 65536",
         "a subscriber's outbound queue (default 8192) drops messages when full; costs 512 KiB of "
         "address space per client"),
        ("capabilities.maximum_message_expiry_interval 0",
         "no forced expiry of queued messages (default one day) during long runs"),
        ("logging.level WARN", "Mochi logs at INFO by default"),
    )
    required_settings = (
        ("hook auth.AllowHook", "Mochi refuses every client unless an auth hook allows it: anonymous clients"),
        ("no storage hook", "persistence is a hook in Mochi and none is built in: nothing is written to disk"),
    )

    # -- where things are ------------------------------------------------------------------

    @property
    def root(self) -> Path:
        return data_dir() / "mochi"

    def home(self, version: str | None = None) -> Path:
        return self.root / (version or self.pinned_version or MOCHI_VERSIONS[0])

    def _runner(self, version: str | None = None) -> Path:
        return self.home(version) / RUNNER

    @staticmethod
    def _go() -> str | None:
        found = shutil.which("go")
        if found:
            return found
        return next((p for p in GO_PLACES if os.access(p, os.X_OK)), None)

    @staticmethod
    def _go_release(go: str) -> tuple[int, int] | None:
        try:
            text = run_quietly([go, "env", "GOVERSION"], timeout=30)
        except BrokerError:
            return None
        match = re.search(r"go(\d+)\.(\d+)", text)
        return (int(match.group(1)), int(match.group(2))) if match else None

    @property
    def pinned_version(self) -> str | None:
        # Without a pin, a machine whose only Go is older than 1.21 gets the release it can build.
        if self.config.version:
            return self.config.version
        default = MOCHI_VERSIONS[0]
        if self._runner(default).is_file():
            return default
        go = self._go()
        release = self._go_release(go) if go else None
        if release is not None and release < (1, 21):
            return GO_1_19_VERSION
        return default

    # -- the launcher interface --------------------------------------------------------------

    def find(self) -> bool:
        return self._runner().is_file()

    def version(self) -> str | None:
        runner = self._runner()
        return printed_version("mochi", [str(runner), "--version"], r"mochi (\d+\.\d+\.\d+)") if runner.is_file() else None

    def install(self) -> None:
        if self.find():
            return
        go = self._go()
        if go is None:
            apt_install("golang-go")
            go = self._go()
            if go is None:
                raise BrokerError("golang-go was installed but no `go` command was found")
        version = self.pinned_version or MOCHI_VERSIONS[0]
        release = self._go_release(go)
        if _needs_go_1_21(version) and release is not None and release < (1, 21):
            raise BrokerError(
                f"mochi {version} needs Go >= 1.21 (log/slog) but {go} is Go {release[0]}.{release[1]}; "
                f"pin mochi {GO_1_19_VERSION}, or put a newer Go first on PATH"
            )
        home = self.home(version)
        source = home / "src"
        if source.exists():
            shutil.rmtree(source)
        source.mkdir(parents=True)
        # Only the API file of this release: `go mod tidy` would otherwise resolve the imports
        # of the other one (zerolog, or log/slog, which Go 1.19 does not have).
        v23 = not _needs_go_1_21(version)
        for name in ("main.go", "server_v23.go" if v23 else "server_v26.go"):
            shutil.copyfile(MAIN_SOURCES / name, source / name)
        go_line = "1.19" if v23 else "1.21"
        template = (MAIN_SOURCES / "go.mod").read_text()
        go_mod = re.sub(r"(?m)^go \S+$", f"go {go_line}", template)
        go_mod = re.sub(rf"(?m)^require {re.escape(MODULE)} \S+$", f"require {MODULE} v{version}", go_mod)
        (source / "go.mod").write_text(go_mod)
        env = ["env", *(f"{key}={value}" for key, value in self._build_environment().items())]
        run_quietly([*env, go, "mod", "tidy"], cwd=source, timeout=900)
        command = [*env, go, "build", "-trimpath", "-o", str(home / (RUNNER + ".tmp"))]
        if v23:
            command += ["-tags", "mochi_v23"]
        run_quietly([*command, "."], cwd=source, timeout=1800)
        # Renamed only when complete, so that an interrupted build is not taken for an install.
        (home / (RUNNER + ".tmp")).replace(self._runner(version))

    def _build_environment(self) -> dict[str, str]:
        # Module and build caches stay in mqttlab's broker folder (removable with rm -rf thanks to
        # -modcacherw), and Go never fetches another toolchain: it builds with the one found.
        gopath = self.root / "go"
        return {
            "GOPATH": str(gopath),
            "GOMODCACHE": str(gopath / "pkg" / "mod"),
            "GOCACHE": str(gopath / "cache"),
            "GOFLAGS": "-modcacherw -buildvcs=false",
            "GOTOOLCHAIN": "local",
            # A static binary: no C compiler needed, no libc coupling.
            "CGO_ENABLED": "0",
        }

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        host = self.placement.listen_host
        listeners: list[dict[str, str]] = [{"id": "plain", "address": f"{host}:{ports.plain}"}]
        if tls is not None and ports.tls is not None:
            listeners.append({"id": "tls", "address": f"{host}:{ports.tls}",
                              "cert_file": str(tls.cert_file), "key_file": str(tls.key_file)})
        config: dict[str, Any] = {"listeners": listeners, "logging": {}, "options": {}}
        if self.config.tuned:
            config["logging"] = {"level": "WARN"}
            config["options"] = {"capabilities": dict(TUNED_CAPABILITIES)}
        elif self.config.mode == "file":
            config.update(self._user_sections())
        config_file = workdir / "mochi.json"
        config_file.write_text(json.dumps(config, indent=2))
        runner = self._runner()
        if not runner.is_file():
            raise BrokerError(f"mochi is not installed: {self.how_to_get}")
        return [str(runner), str(config_file)]

    def _user_sections(self) -> dict[str, Any]:
        """The `options` and `logging` of the user's file in Mochi's own format (YAML or JSON)."""
        try:
            given = yaml.safe_load(self.config.user_text()) or {}
        except yaml.YAMLError as exc:
            raise BrokerError(f"mochi config file {self.config.file}: {exc}") from None
        if not isinstance(given, dict):
            raise BrokerError(f"mochi config file {self.config.file}: expected a mapping at the top")
        unknown = set(given) - {"options", "logging", "listeners", "hooks"}
        if unknown:
            raise BrokerError(f"mochi config file {self.config.file}: unknown sections {', '.join(sorted(unknown))}")
        hooks = given.get("hooks") or {}
        # The listeners are mqttlab's; anonymous access is all the runner offers.
        if hooks and hooks != {"auth": {"allow_all": True}}:
            raise BrokerError(f"mochi config file {self.config.file}: mqttlab's runner has only the "
                              "allow-all auth hook (no ledger, storage or debug hooks)")
        options = dict(given.get("options") or {})
        for key in ("listeners", "hooks"):
            if options.pop(key, None):
                raise BrokerError(f"mochi config file {self.config.file}: options.{key} is mqttlab's to set")
        logging = given.get("logging") or {}
        return {"options": options, "logging": {"level": str(logging["level"])} if logging.get("level") else {}}
