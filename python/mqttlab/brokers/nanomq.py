"""NanoMQ (C, on NNG) built from its upstream source with cmake, TLS on (Debian's mbedTLS), into
mqttlab's broker folder; the source is the pinned 0.25.3 snapshot (mqttlab.brokers.sources).

What NanoMQ's as-shipped settings (its etc/nanomq.conf) do under load, read from its source and
measured here (docs/brokers.md, "NanoMQ"):
- `mqtt.max_mqueue_len = 2048` is the starting length of each subscriber's send cache, the
  messages waiting while its connection is busy writing. A full cache doubles only while it holds
  at most 1024 (NNG's NANO_MAX_QOS_PACKET), so at 2048 it never grows: the next message for that
  subscriber is dropped ("msg lost due to reach the limit of lmq"), at any QoS. A subscriber that
  falls 2048 messages behind loses messages: of a QoS 1 backlog of 20,000 messages of 1 kB to a
  subscriber that reads late, 5,868 arrived as shipped, all 20,000 tuned (tests/test_brokers_built.py).
- `mqtt.max_inflight_window = 2048`, `max_awaiting_rel` and `await_rel_timeout` are parsed and
  never used by 0.25.3 (its own example config says "Unsupported now"): no in-flight window
  limits QoS 1/2 throughput.
- `mqtt.retry_interval = 10s` re-sends unacknowledged QoS 1/2 messages after 10-12.5 s (a
  slow subscriber then sees duplicates), and is the tick of the keep-alive timer.
- `system.parallel`, `num_taskq_thread`, `max_taskq_thread` = 0: twice the CPU count of work
  contexts and threads.
- `http_server` on port 8081 (the REST API): left out in every mode, see `required_settings`."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mqttlab.brokers import sources
from mqttlab.brokers.base import BrokerError, Ports, quoted, run_quietly
from mqttlab.brokers.sources import SourceBuiltLauncher, install_build_tools, keep_built
from mqttlab.tls import TlsMaterial

VERSION = "0.25.3"
#: the as-shipped value of the send cache; tuned raises it past any backlog a benchmark builds
AS_SHIPPED_MQUEUE = 2048
TUNED_MQUEUE = 65536
#: the WebSocket listener's path, as NanoMQ ships it
WS_PATH = "/mqtt"
#: where the IPC sockets' private directory goes: short, unlike TMPDIR or a work directory may be
SOCKET_PARENT = "/tmp"


class NanomqLauncher(SourceBuiltLauncher):
    name = "nanomq"
    source_version = VERSION
    binary = "nanomq"
    upstream = sources.NANOMQ
    how_to_get = f"`mqttlab brokers install nanomq` (cmake build of NanoMQ {VERSION} from {sources.fetched_from(sources.NANOMQ)})"
    source = f"upstream source {sources.NANOMQ.tarball} (sha256 pinned), built with cmake, TLS by Debian's mbedTLS"
    install_time = "22-42 s here from nothing (apt libmbedtls-dev, cmake, make -j2; 42 s with other builds on the 2 cores)"
    mqtt_versions = ("3.1.1", "5")
    has_tls = True
    has_websocket = True
    # Its TLS transport hands a new connection to the protocol layer before recording the
    # connection's MQTT version, so a CONNACK sent in between is refused and the connection closed;
    # now and then the process dies with it (docs/brokers.md).
    connect_crash = "pro_ver of the msg is not 3, 4 or 5"
    start_timeout = 20.0
    #: the WebSocket listeners' ports, ws and wss (until Ports has them)
    extra_ports = 2
    _workdir = Path(".")
    memory_only = True
    persistence_refusal = ("its persistence (SQLite) needs a build with cmake -DNNG_ENABLE_SQLITE=ON, "
                           f"and the NanoMQ {VERSION} mqttlab builds has none")
    tuned_settings = (
        (f"mqtt.max_mqueue_len {TUNED_MQUEUE}",
         f"each subscriber's send cache; at the shipped {AS_SHIPPED_MQUEUE} it never grows and a subscriber "
         "that falls that far behind loses messages at any QoS (pointers only: 512 KiB of address space "
         "per client, touched as it fills)"),
        ("mqtt.retry_interval 60s",
         "unacknowledged QoS 1/2 messages are re-sent after 10 s as shipped, which a loaded subscriber "
         "sees as duplicates; 60 s keeps retries for lost connections only"),
        ("log.level error", "the shipped `warn` logs each dropped or late message under load"),
    )
    required_settings = (
        ("no http_server", "the shipped REST API binds port 8081 on every address: two runs would collide"),
        ("system.cmd_ipc_url, system.hook_ipc_url in a private directory of the run's (/tmp/mqttlab-nanomq-*, removed at stop)",
         "the shipped /tmp/nanomq_*.ipc sockets are shared by every instance on the machine, and a Unix socket's path "
         "holds at most 107 bytes, which a deep work directory exceeds (NanoMQ then fails: \"nng_listen ipc: Address invalid\")"),
        ("NANOMQ_PID_FILE in the work directory",
         "NanoMQ refuses to start while /tmp/nanomq/nanomq.pid names a running process"),
        ("log.to console", "the log goes to the run's broker log, not /tmp/nanomq.log"),
        ("auth.allow_anonymous true", "as shipped: clients without credentials"),
    )

    def install(self) -> None:
        if self.find():
            return
        install_build_tools(cmake=True, mbedtls=True)
        self.home.mkdir(parents=True, exist_ok=True)
        tree = sources.unpack(sources.NANOMQ, self.home / "src")
        build = tree / "build"
        run_quietly(["cmake", "-S", str(tree), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     "-DNNG_ENABLE_TLS=ON", "-DNNG_TESTS=OFF", "-DNNG_TOOLS=OFF"], timeout=600)
        jobs = str(max(1, min(4, os.cpu_count() or 1)))
        run_quietly(["cmake", "--build", str(build), "--target", "nanomq", "-j", jobs], timeout=3600)
        keep_built(build / "nanomq" / "nanomq", self.executable(), source_tree=self.home / "src")

    def environment(self) -> dict[str, str] | None:
        return {**os.environ, "NANOMQ_PID_FILE": str(self._workdir / "nanomq.pid")}

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        self._workdir = workdir
        if not self.find():
            raise BrokerError(f"nanomq is not installed: {self.how_to_get}")
        # Short and private (mode 0700), whatever the length of the work directory's path.
        self.scratch = Path(tempfile.mkdtemp(prefix="mqttlab-nanomq-", dir=SOCKET_PARENT))
        config = workdir / "nanomq.conf"
        config.write_text(self.config_text(workdir, ports, tls))
        return [str(self.executable()), "start", "--conf", str(config)]

    def ws_port(self, ports: Ports) -> int:
        """The plain WebSocket listener's port (path /mqtt). Hook: once `Ports` carries a `ws`
        port of its own, take that one here."""
        return getattr(ports, "ws", None) or ports.extra[0]

    def wss_port(self, ports: Ports) -> int:
        """The WebSocket-over-TLS listener's port (path /mqtt), served with the TLS listener's
        certificate; bound in every TLS run, since NanoMQ would otherwise open 0.0.0.0:8086."""
        return getattr(ports, "wss", None) or ports.extra[1]

    def config_text(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> str:
        host = self.placement.listen_host
        sockets = self.scratch or workdir
        mqtt: dict[str, object] = {"max_packet_size": "256MB", "max_mqueue_len": AS_SHIPPED_MQUEUE,
                                   "retry_interval": "10s", "keepalive_multiplier": 1.25,
                                   "property_size": 32, "max_inflight_window": 2048,
                                   "max_awaiting_rel": "10s", "await_rel_timeout": "10s"}
        level = "warn"
        if self.config.tuned:
            mqtt.update(max_mqueue_len=TUNED_MQUEUE, retry_interval="60s")
            level = "error"
        lines = [
            "# written by mqttlab for one run",
            "system {",
            f"  cmd_ipc_url = {quoted(f'ipc://{sockets}/cmd.ipc')}",
            f"  hook_ipc_url = {quoted(f'ipc://{sockets}/hook.ipc')}",
            "}",
            "mqtt {",
            *(f"  {key} = {value}" for key, value in mqtt.items()),
            "}",
            "auth { allow_anonymous = true, no_match = allow, deny_action = ignore }",
            f"log {{ to = [console], level = {level} }}",
        ]
        if self.config.mode == "file":
            # HOCON: a later key overrides an earlier one, so the user's settings win over the
            # defaults above and mqttlab's listeners (after them) win over the user's.
            lines += [f"# --- from {self.config.file}", self.config.user_text(), "# --- mqttlab's listeners"]
        lines += [f"listeners.tcp {{ bind = {quoted(f'{host}:{ports.plain}')} }}",
                  f"listeners.ws {{ bind = {quoted(f'{host}:{self.ws_port(ports)}{WS_PATH}')} }}"]
        if tls is not None and ports.tls is not None:
            lines += [
                "listeners.ssl {",
                f"  bind = {quoted(f'{host}:{ports.tls}')}",
                f"  keyfile = {quoted(tls.key_file)}",
                f"  certfile = {quoted(tls.cert_file)}",
                f"  cacertfile = {quoted(tls.ca_file)}",
                "  verify_peer = false",
                "  fail_if_no_peer_cert = false",
                "}",
                f"listeners.wss {{ bind = {quoted(f'{host}:{self.wss_port(ports)}{WS_PATH}')} }}",
            ]
        return "\n".join(lines) + "\n"

