"""RMQTT (Rust): the `rmqtt` broker library from crates.io, run by our small runner (rmqtt_main/).

Upstream's `rmqttd` binary links every bridge and storage plugin (Kafka, Pulsar, NATS, redis,
raft, the HTTP API), has no features to leave them out, and took 52 minutes to build on a shared
2-core machine. None of those plugins routes MQTT messages: sessions, QoS flows, queues, shared
subscriptions and the listeners are the library's, and the runner wires exactly those, reading
the same TOML file rmqttd reads (parsed by upstream's `rmqtt-conf`), with two of rmqttd's plugins:
the retainer (in memory) and shared subscriptions, without which the core keeps no retained
message and serves no `$share/` group. It is built with `cargo build --locked` against the lock file kept
beside it, into mqttlab's broker folder, by `mqttlab brokers install rmqtt` only: still minutes
of compiling, so the test command never starts it and its tests skip until it is built."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from mqttlab.brokers.base import BrokerError, Launcher, Ports, data_dir, printed_version, quoted
from mqttlab.tls import TlsMaterial

RMQTT_VERSION = "0.24.0"  # the `rmqtt` crate, pinned in rmqtt_main/Cargo.toml and its lock file
MAIN_SOURCES = Path(__file__).with_name("rmqtt_main")
RUNNER = "rmqtt-runner"
RETAINER = "rmqtt-retainer"
SHARED_SUBSCRIPTION = "rmqtt-shared-subscription"
# Each plugin's config file: retained messages in memory, $share/ groups served round robin.
PLUGIN_CONFIGS = {RETAINER: 'storage.type = "ram"\n', SHARED_SUBSCRIPTION: 'strategy = "round_robin"\n'}

#: each session's queue (`max_mqueue_len`): what waits for an offline session or beyond the
#: in-flight window; a message for a full queue is dropped (rmqtt's session.rs: MessageQueueFull)
SHIPPED_MQUEUE = 1000
TUNED_MQUEUE = 1_000_000

# rmqtt's defaults (16 in flight, 1000 queued messages per session, 1 MB packets, Nagle on)
# would cap a benchmark before the broker itself does. max_handshaking_limit stays at its 500:
# it is the number of handshake worker tasks, started with the first connection and kept, and
# 100,000 of them held 68 MB more RSS here, which a memory comparison would charge to RMQTT;
# handshakes beyond 500 wait in its queue (max_connections long).
LISTENER_LIMITS = f"""nodelay = true
max_connections = 1024000
max_inflight = 65535
max_mqueue_len = {TUNED_MQUEUE}
max_packet_size = "4M"
backlog = 4096
"""

# As shipped, RMQTT refuses every new connection (CONNACK "server unavailable") while the whole
# host's CPU is above 90% or its 1-minute load average above 80, measured every 2 s; on a machine
# that also runs the load generator that is the generator's load as much as the broker's.
NODE_TUNED = "[node.busy]\ncheck_enable = false\n"


class RmqttLauncher(Launcher):
    name = "rmqtt"
    how_to_get = (
        f"`mqttlab brokers install rmqtt` (builds the rmqtt {RMQTT_VERSION} library with mqttlab's runner: "
        "14 minutes on a shared 2-core machine; needs cargo and a C compiler)"
    )
    source = f"crates.io rmqtt {RMQTT_VERSION} (library) with mqttlab's runner, cargo build --locked"
    install_time = "14 min (from empty caches, 2 compile jobs, a shared 2-core machine)"
    mqtt_versions = ("3.1", "3.1.1", "5")
    tested_by_test_command = False
    accepts_config_file = False
    # Its WebSocket listeners serve any path (so /mqtt) and require the `mqtt` subprotocol.
    has_websocket = True
    # The runner's retainer keeps retained messages in RAM and it links no session storage, so
    # sessions, their queues and retained messages live in the process only.
    memory_only = True
    persistence_refusal = (
        "RMQTT persists through plugins (rmqtt-session-storage for sessions and their queues, the retainer's "
        "`sled` storage for retained messages) that mqttlab's runner does not link: it needs a rebuild with them"
    )
    required_settings = (
        ("allow_anonymous = true", "benchmark clients connect without credentials"),
        (f'plugins.default_startups = ["{RETAINER}", "{SHARED_SUBSCRIPTION}"]',
         "retained messages (kept in memory) and $share/ groups (round robin): RMQTT serves them only through "
         "these plugins, which rmqttd too starts only when its config lists them"),
    )
    tuned_settings = (
        ("nodelay = true", "Nagle's algorithm would hold small publishes back"),
        ("max_inflight = 65535", "the default 16 caps QoS 1/2 throughput per client"),
        (f"max_mqueue_len = {TUNED_MQUEUE}", f"the default {SHIPPED_MQUEUE} queued messages per session would drop a backlog"),
        ('max_packet_size = "4M"', "the default 1 MB refuses larger payloads"),
        ("max_connections = 1024000, backlog = 4096", "room for large connection counts and connection storms"),
        ("node.busy.check_enable = false",
         "as shipped, new connections are refused while the host's CPU (the generator's included) is above 90%"),
    )

    def state_limits(self) -> dict[str, int | None]:
        # rmqtt-conf's listener default, and the tuned value; the queue drops what a full one cannot take.
        return {"queued_messages": TUNED_MQUEUE if self.config.tuned else SHIPPED_MQUEUE}

    @property
    def home(self) -> Path:
        return data_dir() / "rmqtt"

    def executable(self) -> Path | None:
        runner = self.home / "bin" / RUNNER
        return runner if runner.is_file() else None

    def find(self) -> bool:
        return self.executable() is not None

    def version(self) -> str | None:
        exe = self.executable()
        return printed_version("rmqtt", [str(exe), "--version"], r"rmqtt/(\d+\.\d+\.\d+)") if exe else None

    def install(self) -> None:
        if self.find():
            return
        if shutil.which("cargo") is None:
            raise BrokerError("building rmqtt needs a Rust toolchain (cargo): https://rustup.rs")
        if shutil.which("cc") is None:
            raise BrokerError("building rmqtt needs a C compiler for its TLS library: apt-get install build-essential")
        source = self.home / "src"
        if source.exists():
            shutil.rmtree(source)
        (source / "src").mkdir(parents=True)
        for name in ("Cargo.toml", "Cargo.lock", "src/main.rs"):
            shutil.copyfile(MAIN_SOURCES / name, source / name)
        target = self.home / "target"
        env = dict(os.environ, CARGO_TARGET_DIR=str(target))
        # Niced: the machine is usually shared with tests or other builds.
        command = ["nice", "-n", "15", "cargo", "build", "--release", "--locked"]
        try:
            done = subprocess.run(command, cwd=source, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=3 * 3600)
        except subprocess.TimeoutExpired:
            raise BrokerError(f"`{' '.join(command)}` in {source} did not finish in 3 hours") from None
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise BrokerError(f"`{' '.join(command)}` in {source} exited with {done.returncode}:\n{tail}")
        bin_dir = self.home / "bin"
        bin_dir.mkdir(exist_ok=True)
        partial = bin_dir / (RUNNER + ".tmp")
        shutil.copyfile(target / "release" / RUNNER, partial)
        partial.chmod(0o755)
        # Renamed only when complete, so that an interrupted build is not taken for an install.
        partial.replace(bin_dir / RUNNER)
        # The build's intermediate files (over a gigabyte) are not needed to run it.
        shutil.rmtree(target, ignore_errors=True)

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        exe = self.executable()
        if exe is None:
            raise BrokerError(f"rmqtt is not installed: {self.how_to_get}")
        listener_settings = "allow_anonymous = true\n" + (LISTENER_LIMITS if self.config.tuned else "")
        plugins_dir = workdir / "rmqtt-plugins"
        plugins_dir.mkdir(exist_ok=True)
        for plugin, settings in PLUGIN_CONFIGS.items():
            (plugins_dir / f"{plugin}.toml").write_text(settings)
        host = self.placement.listen_host
        sections = [
            "[node]\nid = 1\n",
            *([NODE_TUNED] if self.config.tuned else []),
            '[log]\nto = "console"\nlevel = "warn"\n',
            f'[plugins]\ndir = {quoted(plugins_dir)}\ndefault_startups = {json.dumps(list(PLUGIN_CONFIGS))}\n',
            f'[listener.tcp.external]\naddr = "{host}:{ports.plain}"\n{listener_settings}',
        ]
        tls_files = "" if tls is None else (
            f"cross_certificate = false\ncert = {quoted(tls.cert_file)}\nkey = {quoted(tls.key_file)}\n"
        )
        if tls is not None and ports.tls is not None:
            sections.append(f'[listener.tls.external]\naddr = "{host}:{ports.tls}"\n{listener_settings}{tls_files}')
        if ports.ws is not None:
            sections.append(f'[listener.ws.external]\naddr = "{host}:{ports.ws}"\n{listener_settings}')
        if tls is not None and ports.wss is not None:
            sections.append(f'[listener.wss.external]\naddr = "{host}:{ports.wss}"\n{listener_settings}{tls_files}')
        config = workdir / "rmqtt.toml"
        config.write_text("\n".join(sections))
        return [str(exe), "-f", str(config)]
