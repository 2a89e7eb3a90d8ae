"""RabbitMQ with its MQTT plugin, from the Debian package rabbitmq-server, run as our own child.

The Debian entry point (/usr/sbin/rabbitmq-server) switches to the `rabbitmq` user and logs under
/var/log; we call the package's underlying script (/usr/lib/rabbitmq/bin/rabbitmq-server), which
runs the Erlang VM in the foreground with everything pointed into the run's work directory.

RabbitMQ needs Erlang distribution, hence epmd. Left to itself, `erl` starts epmd as a daemon on
port 4369 that outlives the run and is shared by every node on the machine. A small shell wrapper
instead starts epmd in the foreground on a per-run port, waits until it answers, and runs the
broker beside it, so both are descendants of the launched process and die with its group."""

from __future__ import annotations

import glob
import re
import shutil
from pathlib import Path

from mqttlab.brokers.base import WEBSOCKET_PATH, BrokerError, Launcher, Ports, apt_install
from mqttlab.brokers.erlang import SEARCH_PATH, clean_environment
from mqttlab.tls import TlsMaterial

RABBITMQ_HOME = Path("/usr/lib/rabbitmq")
SERVER_SCRIPT = RABBITMQ_HOME / "bin" / "rabbitmq-server"

# Starts epmd (argument 1) in the foreground on the port in ERL_EPMD_PORT, waits until it answers,
# then becomes the broker (the remaining arguments) by exec, so that the launched PID is the Erlang
# VM itself (its listeners, its CPU) and epmd is its child. epmd dies with the process group when
# the run stops, and, through its own parent-death signal, when the VM dies any other way.
EPMD_WRAPPER = r"""#!/bin/sh
# written by mqttlab: epmd on this run's port, inside this run's process tree
epmd="$1"; shift
setpriv --pdeathsig TERM -- "$epmd" -port "$ERL_EPMD_PORT" -address 127.0.0.1 &
epmd_pid=$!
tries=0
until "$epmd" -port "$ERL_EPMD_PORT" -names >/dev/null 2>&1; do
    if ! kill -0 "$epmd_pid" 2>/dev/null; then
        echo "mqttlab: epmd could not start on port $ERL_EPMD_PORT" >&2
        exit 1
    fi
    tries=$((tries + 1))
    if [ "$tries" -gt 200 ]; then
        echo "mqttlab: epmd did not answer on port $ERL_EPMD_PORT within 10 s" >&2
        kill "$epmd_pid"
        exit 1
    fi
    sleep 0.05
done
exec "$@"
"""

# Keys mqttlab owns in `file` mode: a user's value for one of them would move or open a listener.
OWNED_KEY = re.compile(r"^\s*(listeners\.|mqtt\.listeners\.|web_mqtt\.(tcp|ssl)\.|ssl_options\.|log\.console|log\.file|"
                       r"loopback_users|mqtt\.allow_anonymous|mqtt\.default_user|mqtt\.default_pass)")


class RabbitmqLauncher(Launcher):
    name = "rabbitmq"
    how_to_get = ("apt-get install rabbitmq-server (Debian package, with the MQTT plugin), "
                  "or `mqttlab brokers install rabbitmq` as root")
    source = "Debian package rabbitmq-server (3.10.8 in Debian 12), plugin rabbitmq_mqtt"
    install_time = "about 12 s (apt, with Erlang)"
    mqtt_versions = ("3.1", "3.1.1")
    #: RabbitMQ 3.10's MQTT plugin has no QoS 2: it grants QoS 1 to QoS 2 subscriptions (allowed)
    #: and answers a QoS 2 PUBLISH with PUBACK instead of PUBREC (a protocol violation).
    max_qos = 1
    # The rabbitmq_web_mqtt plugin (in the same package), enabled only when asked for.
    has_websocket = True
    # A cold Erlang VM plus RabbitMQ's boot (Mnesia schema, feature flags, plugins) takes 14-18 s
    # here on a 2-core machine; a busy one needs more.
    start_timeout = 120.0
    started_line = "completed with"  # "Starting broker... completed with N plugins.": every listener bound
    # epmd's per-run port and the node's distribution port
    extra_ports = 2
    required_settings = (
        ("rabbitmq-server run directly (not /usr/sbin/rabbitmq-server), as the current user",
         "the Debian wrapper switches to the `rabbitmq` user and logs under /var/log"),
        ("epmd on a per-run loopback port (ERL_EPMD_PORT), in the foreground as the Erlang VM's child; "
         "erl -start_epmd false; the VM runs as the launched process itself (RUNNING_UNDER_SYSTEMD=true)",
         "erl would otherwise start a daemonized epmd on port 4369 that outlives the run"),
        ("RABBITMQ_NODENAME=mqttlab-<port>@localhost, Erlang distribution on a free port bound to 127.0.0.1",
         "a node of its own per run; the distribution port (default 25672 on all addresses) is not for clients"),
        ("HOME, RABBITMQ_MNESIA_BASE, RABBITMQ_LOG_BASE, RABBITMQ_CONFIG_FILE, RABBITMQ_ENABLED_PLUGINS_FILE "
         "in the work directory; /etc/rabbitmq not read",
         "database, logs, Erlang cookie and configuration belong to the run"),
        ("enabled plugins: rabbitmq_mqtt only",
         "the MQTT adapter without the management UI and its HTTP port"),
        ("listeners.tcp = none", "no AMQP listener (port 5672): MQTT clients do not need it"),
        ("mqtt.allow_anonymous = true, mqtt.default_user = guest",
         "clients without credentials log in as `guest` (the plugin's defaults, stated for the record)"),
        ("loopback_users = none",
         "RabbitMQ admits `guest` only from loopback addresses; in a network-namespace placement the "
         "clients come from the veth address"),
        ("log.console = true, log.file = false, log.console.use_colors = off",
         "the broker's log goes to the run's broker log as plain text"),
    )
    tuned_settings = (
        ("mqtt.prefetch = 10000",
         "unacknowledged QoS 1 deliveries per subscriber: the default 10 stalls a subscriber after 10 "
         "messages until its PUBACKs return, capping QoS 1 throughput per client (kept well below "
         "65535, the number of MQTT packet identifiers)"),
        ("mqtt.tcp_listen_options.backlog = 4096, nodelay = true",
         "room for hundreds of clients connecting at once (default backlog 128); Nagle off, restated "
         "because this list replaces the default one"),
        ("mqtt.retained_message_store = rabbit_mqtt_retained_msg_store_ets",
         "retained messages in memory instead of a DETS file on disk"),
        ("vm_memory_high_watermark.relative = 0.8",
         "the memory alarm blocks every publisher once the node uses this share of RAM; the default 0.4 "
         "would stall a backlog benchmark long before memory is short"),
        ("max_message_size = 536870912",
         "the largest RabbitMQ accepts (512 MiB), above MQTT's 256 MiB, so no payload size is refused"),
        ("log.console.level = warning", "a log line per connection would cost CPU under load"),
    )

    def find(self) -> bool:
        return (SERVER_SCRIPT.is_file() and self._release() is not None and self._epmd() is not None
                and all(shutil.which(tool, path=SEARCH_PATH) for tool in ("erl", "setpriv")))

    @staticmethod
    def _epmd() -> str | None:
        return shutil.which("epmd", path=SEARCH_PATH)

    @staticmethod
    def _release() -> str | None:
        """The installed release's version, from its folder (rabbitmq_server-X.Y.Z)."""
        found = sorted(glob.glob(str(RABBITMQ_HOME / "lib" / "rabbitmq_server-*")))
        if not found:
            return None
        return Path(found[-1]).name.removeprefix("rabbitmq_server-")

    def version(self) -> str | None:
        release = self._release()
        return f"rabbitmq {release}" if release else None

    def install(self) -> None:
        if self.find():
            return
        apt_install("rabbitmq-server")
        if not self.find():
            raise BrokerError(f"rabbitmq-server was installed but {SERVER_SCRIPT} or epmd is missing")

    def _settings(self) -> list[str]:
        """Everything but the listeners and TLS, for the configured mode."""
        lines = [
            "# written by mqttlab for one run",
            "listeners.tcp = none",
            "mqtt.allow_anonymous = true",
            "mqtt.default_user = guest",
            "mqtt.default_pass = guest",
            "loopback_users = none",
            "log.file = false",
            "log.console = true",
            "log.console.use_colors = off",
        ]
        if self.config.tuned:
            lines += [
                "mqtt.prefetch = 10000",
                "mqtt.tcp_listen_options.backlog = 4096",
                "mqtt.tcp_listen_options.nodelay = true",
                "mqtt.retained_message_store = rabbit_mqtt_retained_msg_store_ets",
                "vm_memory_high_watermark.relative = 0.8",
                "max_message_size = 536870912",
                "log.console.level = warning",
            ]
        elif self.config.mode == "file":
            kept = [line for line in self.config.user_text().splitlines() if not OWNED_KEY.match(line)]
            lines += [f"# --- from {self.config.file} (mqttlab's listener, TLS and log keys removed)",
                      *kept, "# --- mqttlab's listeners"]
        return lines

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        epmd = self._epmd()
        if not SERVER_SCRIPT.is_file() or epmd is None:
            raise BrokerError(f"rabbitmq-server is not installed: {self.how_to_get}")
        host = self.placement.listen_host
        lines = [*self._settings(), f"mqtt.listeners.tcp.default = {host}:{ports.plain}"]
        if tls is not None and ports.tls is not None:
            lines += [
                f"mqtt.listeners.ssl.default = {host}:{ports.tls}",
                f"ssl_options.cacertfile = {tls.ca_file}",
                f"ssl_options.certfile = {tls.cert_file}",
                f"ssl_options.keyfile = {tls.key_file}",
                # Clients are not asked for certificates: they connect anonymously.
                "ssl_options.verify = verify_none",
                "ssl_options.fail_if_no_peer_cert = false",
            ]
        else:
            lines.append("mqtt.listeners.ssl = none")
        plugins = "rabbitmq_mqtt"
        if ports.ws is not None:
            # web-mqtt serves /ws by default; /mqtt like the other launchers.
            plugins += ",rabbitmq_web_mqtt"
            lines += [f"web_mqtt.tcp.ip = {host}", f"web_mqtt.tcp.port = {ports.ws}", f"web_mqtt.ws_path = {WEBSOCKET_PATH}"]
            if tls is not None and ports.wss is not None:
                lines += [f"web_mqtt.ssl.ip = {host}", f"web_mqtt.ssl.port = {ports.wss}",
                          f"web_mqtt.ssl.cacertfile = {tls.ca_file}", f"web_mqtt.ssl.certfile = {tls.cert_file}",
                          f"web_mqtt.ssl.keyfile = {tls.key_file}"]
        (workdir / "rabbitmq.conf").write_text("\n".join(lines) + "\n")
        (workdir / "enabled_plugins").write_text(f"[{plugins}].\n")
        wrapper = workdir / "with_epmd.sh"
        wrapper.write_text(EPMD_WRAPPER)
        epmd_port, dist_port = ports.extra[0], ports.extra[1]
        self._env = self._environment(workdir, ports.plain, epmd_port, dist_port)
        return ["/bin/sh", str(wrapper), epmd, str(SERVER_SCRIPT)]

    def _environment(self, workdir: Path, plain_port: int, epmd_port: int, dist_port: int) -> dict[str, str]:
        home = workdir / "home"  # erl writes the run's Erlang cookie here
        home.mkdir(exist_ok=True)
        env = clean_environment("RABBITMQ_")
        env.update({
            "HOME": str(home),
            "PATH": SEARCH_PATH,
            "ERL_EPMD_PORT": str(epmd_port),
            # Also read by the short-lived `erl` RabbitMQ runs at boot to check for epmd: none of
            # them may start a daemonized epmd of its own; ours is up before the broker starts.
            "ERL_FLAGS": "-start_epmd false",
            # The script then execs the VM instead of waiting on it from a shell that relays
            # signals; RabbitMQ handles SIGTERM itself with an orderly stop.
            "RUNNING_UNDER_SYSTEMD": "true",
            "RABBITMQ_NODENAME": f"mqttlab-{plain_port}@localhost",
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(workdir / "log"),
            "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(workdir / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(workdir / "rabbitmq.pid"),
        })
        return env

    def environment(self) -> dict[str, str] | None:
        env = getattr(self, "_env", None)
        if env is None:
            raise BrokerError("rabbitmq: command() must be called before environment()")
        return env
