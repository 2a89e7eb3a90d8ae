"""What every broker launcher shares: free loopback ports, the start/ready/stop cycle, and the
RunningBroker handle that the rest of mqttlab talks to.

A launcher subclass only says how to find or install its broker, how to write its config and
command line, and how to read its version."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mqttlab.brokers.errors import BrokerError, BrokerStartError, BrokerUnavailable

# What launching, probing and TLS need (the process helpers, the MQTT probe, ssl, the TLS
# material) is imported where a broker is launched: a broker given by URL needs none of it.
if TYPE_CHECKING:
    from mqttlab.brokers.limits import BrokerCgroup, BrokerLimits
    from mqttlab.tls import TlsMaterial

LOOPBACK = "127.0.0.1"
#: the path every launcher serves MQTT over WebSocket at (the convention of Mosquitto, HiveMQ,
#: NanoMQ, EMQX and RabbitMQ's web-mqtt), so a launched broker's ws:// URL is the same shape
WEBSOCKET_PATH = "/mqtt"
#: which certificate a TLS listener serves: the valid one, or a defective one for failure tests
TLS_CERTIFICATES = ("valid", "expired", "wrong-name")
#: starts tried when a port is taken meanwhile or the broker meets its `connect_crash`
START_TRIES = 3


@dataclass(frozen=True)
class Availability:
    available: bool
    version: str | None
    detail: str


@dataclass(frozen=True)
class Placement:
    """Where a launched broker runs. The default is this host's loopback; mqttlab.netem places it
    in a network namespace (`command_prefix` = ip netns exec NS) listening on every address there."""

    command_prefix: tuple[str, ...] = ()
    listen_host: str = LOOPBACK  # what the broker's listeners bind
    reach_host: str = LOOPBACK  # where mqttlab finds it (readiness probe, RunningBroker.host)
    #: other addresses clients reach it at (the emulated link's), named in its TLS certificate
    client_hosts: tuple[str, ...] = ()


#: how a launched broker is configured beyond the listeners mqttlab owns
CONFIG_MODES = ("tuned", "as-shipped", "file")
#: the state a restart may keep (Launcher.restart_promises): sessions, the QoS 1/2 messages queued
#: for offline sessions, retained messages
RESTART_STATE = ("sessions", "queued", "retained")


@dataclass(frozen=True)
class BrokerConfig:
    """How a launcher configures its broker (docs/brokers.md, "Configurations").

    - `tuned`: the benchmark settings the launcher documents in `Launcher.tuned_settings` (each
      with why), so that default queue limits or Nagle's algorithm do not cap a benchmark;
    - `as-shipped`: the package's defaults; mqttlab adds only its listeners and what the broker
      needs to run unprivileged in a work directory (listed in `Launcher.required_settings`);
    - `file`: the user's own config file merged with mqttlab's listeners.
    `version` pins a broker version where its registry offers several."""

    mode: str = "tuned"
    file: Path | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in CONFIG_MODES:
            raise BrokerError(f"broker config must be one of {', '.join(CONFIG_MODES)}, got {self.mode!r}")
        if (self.mode == "file") != (self.file is not None):
            raise BrokerError("broker config `file` needs a file, and a file needs mode `file`")

    @property
    def tuned(self) -> bool:
        return self.mode == "tuned"

    def user_text(self) -> str:
        """The user's config file (mode `file`), or "" in the other modes."""
        if self.file is None:
            return ""
        try:
            return Path(self.file).read_text(encoding="utf-8")
        except OSError as exc:
            raise BrokerError(f"broker config file {self.file}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Ports:
    plain: int
    tls: int | None
    extra: tuple[int, ...] = ()
    #: MQTT over WebSocket, plain and over TLS (the latter with a TLS listener only), for a
    #: launcher with `has_websocket` asked for one (`Launcher.websocket`); serve it at /mqtt
    ws: int | None = None
    wss: int | None = None


def data_dir() -> Path:
    """Where launchers install brokers that are not system packages."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mqttlab" / "brokers"


def free_ports(count: int) -> list[int]:
    """Distinct ports the kernel picks on 127.0.0.1. All sockets stay bound until every port is
    picked so that the same port is not handed out twice; between closing them and the broker
    binding them another process could take one, which `Launcher.start` handles by retrying."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def run_quietly(command: Sequence[str], timeout: float = 30.0, cwd: Path | None = None) -> str:
    """Runs a short helper command and returns its combined output; raises BrokerError on failure."""
    try:
        done = subprocess.run(
            list(command), cwd=cwd, capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerError(f"`{' '.join(command)}` failed: {exc}") from None
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        tail = "\n".join(output.splitlines()[-15:])
        raise BrokerError(f"`{' '.join(command)}` exited with {done.returncode}:\n{tail}")
    return output


def printed_version(name: str, command: Sequence[str], pattern: str) -> str | None:
    """`"<name> <version>"` with the version `pattern` (its first group) finds in what `command`
    prints, whatever it exits with; None when it cannot run or names no version."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, done.stdout + done.stderr)
    return f"{name} {match.group(1)}" if match else None


def quoted(value: object) -> str:
    """`value` as a double-quoted string of a config file, as HOCON (NanoMQ) and TOML (RMQTT)
    both read one: a path with a quote or a backslash in it stays one string."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


def apt_install(*packages: str) -> None:
    """Installs Debian packages without starting their system services: mqttlab runs every broker
    as its own child on its own ports, and a service of the package (RabbitMQ, ejabberd,
    ActiveMQ) would hold the default ports and its state outside any run. Needs root."""
    if os.geteuid() != 0:
        raise BrokerError(f"installing {' '.join(packages)} needs root: sudo apt-get install -y {' '.join(packages)}")
    env_prefix = ["env", "DEBIAN_FRONTEND=noninteractive"]
    # invoke-rc.d asks policy-rc.d whether a service may start; 101 means "no". One of our own
    # is put in place only when none exists, and removed afterwards.
    ours = not POLICY_RC_D.exists()
    if ours:
        POLICY_RC_D.write_text("#!/bin/sh\n# mqttlab: no service starts while it installs brokers\nexit 101\n")
        POLICY_RC_D.chmod(0o755)
    try:
        run_quietly([*env_prefix, "apt-get", "update", "-qq"], timeout=600)
        run_quietly([*env_prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                    timeout=1200)
    finally:
        if ours:
            POLICY_RC_D.unlink(missing_ok=True)


def which(program: str) -> str | None:
    return shutil.which(program)


@dataclass
class RunningBroker:
    """A broker that accepts MQTT. Stopping is idempotent; a broker we did not start
    (`managed=False`) is never stopped by us."""

    name: str
    version: str | None
    host: str
    port: int
    tls_port: int | None = None
    ca_file: Path | None = None
    pid: int | None = None
    v5_port: int | None = None
    #: the MQTT-SN (UDP) listener of a broker that has one (RSMB)
    mqtt_sn_port: int | None = None
    log_file: Path | None = None
    container: str | None = None
    managed: bool = True
    #: an external broker given as mqtts:// only: `port` is its TLS listener too
    tls_only: bool = False
    #: its MQTT-over-WebSocket listeners (plain and TLS), served at `websocket_path`
    ws_port: int | None = None
    wss_port: int | None = None
    websocket_path: str = WEBSOCKET_PATH
    #: how it was configured: mode, file, and the settings mqttlab applied (with why)
    config: dict[str, object] | None = None
    #: where its binary came from (Launcher.build_record), for the manifest
    build: dict[str, object] | None = None
    #: user name and password clients must send (None: anonymous clients are accepted)
    credentials: tuple[str, str] | None = None
    #: the highest QoS the broker grants and delivers
    max_qos: int = 2
    #: the cgroup holding the broker when it runs with CPU/memory limits
    cgroup: BrokerCgroup | None = field(default=None, repr=False)
    #: a private directory of the broker's outside its work directory (Launcher.scratch), removed at stop
    scratch: Path | None = None
    _process: subprocess.Popen | None = field(default=None, repr=False)
    #: starts the same command again (same config, ports, cgroup and log) and waits until it
    #: serves MQTT: what a restart fault needs; None for brokers we did not start as a process
    _respawn: Callable[[], subprocess.Popen] | None = field(default=None, repr=False)

    def url(self, tls: bool = False, websocket: bool = False) -> str:
        """The broker's URL; for a TLS-only broker always its mqtts:// one; with `websocket`, its
        ws:// (with `tls`, wss://) one."""
        if websocket:
            port = self.wss_port if tls else self.ws_port
            if port is None:
                raise BrokerError(f"{self.name} was started without a {'wss' if tls else 'ws'}:// listener")
            return f"{'wss' if tls else 'ws'}://{self.host}:{port}{self.websocket_path}"
        if tls or self.tls_only:
            if self.tls_port is None:
                raise BrokerError(f"{self.name} was started without a TLS listener (start it with tls=True)")
            return f"mqtts://{self.host}:{self.tls_port}"
        return f"mqtt://{self.host}:{self.port}"

    def to_dict(self) -> dict[str, object]:
        """The broker as plain data, for a results manifest."""
        return {
            "name": self.name,
            "version": self.version,
            "host": self.host,
            "port": self.port,
            "tls_port": self.tls_port,
            "ws_port": self.ws_port,
            "wss_port": self.wss_port,
            "v5_port": self.v5_port,
            "mqtt_sn_port": self.mqtt_sn_port,
            "pid": self.pid,
            "container": self.container,
            "ca_file": str(self.ca_file) if self.ca_file else None,
            "managed": self.managed,
            "tls_only": self.tls_only,
            "config": self.config,
            "build": self.build,
            "limits": self.cgroup.outcome() if self.cgroup is not None else None,
        }

    def is_running(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        if self.pid is None:
            return True  # an external broker we cannot observe: assume it is up
        import psutil

        return psutil.pid_exists(self.pid)

    def can_restart(self) -> bool:
        return self.managed and self._process is not None and self._respawn is not None

    def end_process(self, signum: int) -> None:
        """Ends the broker's processes with `signum` (SIGKILL: a crash; SIGTERM: a clean stop),
        leaving its cgroup, files and ports for `start_process`."""
        if not self.can_restart():
            raise BrokerError(f"{self.name} was not started by mqttlab as a process; it cannot be restarted")
        assert self._process is not None
        from mqttlab.brokers import process

        process.end(self._process, signum)

    def start_process(self) -> None:
        """Starts the broker again as it was started (same command, ports and files) and returns
        once it serves MQTT; `pid` is then the new process."""
        if self._respawn is None:
            raise BrokerError(f"{self.name} cannot be started again")
        self._process = self._respawn()
        self.pid = self._process.pid

    def stop(self) -> None:
        if self.managed and self._process is not None:
            from mqttlab.brokers import process

            process.terminate(self._process)
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.managed and self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> RunningBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until_serving(
    host: str,
    port: int,
    *,
    child: subprocess.Popen | None,
    timeout: float,
    tls: bool = False,
    tls_ca_file: Path | None = None,
    verify: bool = True,
    log_file: Path | None = None,
    name: str = "broker",
    credentials: tuple[str, str] | None = None,
) -> None:
    """Polls until an MQTT CONNECT on `host:port` is answered with a CONNACK that accepts.

    Fails early if the child exits, and on timeout; both errors carry the broker's log tail."""
    import ssl

    from mqttlab.brokers import process
    from mqttlab.brokers.probe import MqttProbe, ProbeError, client_tls_context

    context = client_tls_context(str(tls_ca_file) if tls_ca_file else None) if tls else None
    if context is not None and not verify:
        # A broker deliberately serving a bad certificate is still "up" once it speaks MQTT.
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + timeout
    last_problem = "no attempt yet"
    attempt = 0
    while time.monotonic() < deadline:
        if child is not None and child.poll() is not None:
            tail = process.log_tail(log_file) if log_file else ""
            raise BrokerStartError(f"{name} exited with code {child.returncode} during start-up:\n{tail}")
        attempt += 1
        try:
            login: dict[str, Any] = {"username": credentials[0], "password": credentials[1]} if credentials else {}
            with MqttProbe(host, port, client_id=f"mqttlab-ready-{attempt}", tls_context=context,
                           timeout=min(2.0, max(0.1, deadline - time.monotonic())), **login):
                return
        except (OSError, ProbeError) as exc:
            last_problem = str(exc) or type(exc).__name__
        time.sleep(0.1)
    tail = process.log_tail(log_file) if log_file else ""
    raise BrokerStartError(
        f"{name} did not accept MQTT on {host}:{port} within {timeout:.0f} s "
        f"(last attempt: {last_problem}). Log tail:\n{tail}"
    )


def wait_until_listening(host: str, port: int, *, child: subprocess.Popen | None, timeout: float,
                         log_file: Path | None = None, name: str = "broker") -> None:
    """Polls until a TCP connection to `host:port` is accepted (a listener is bound)."""
    from mqttlab.brokers import process

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child is not None and child.poll() is not None:
            tail = process.log_tail(log_file) if log_file else ""
            raise BrokerStartError(f"{name} exited with code {child.returncode} during start-up:\n{tail}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    tail = process.log_tail(log_file) if log_file else ""
    raise BrokerStartError(f"{name} did not listen on {host}:{port} within {timeout:.0f} s. Log tail:\n{tail}")


def wait_until_logged(line: str, *, child: subprocess.Popen | None, timeout: float, log_file: Path,
                      name: str = "broker") -> None:
    """Polls until the broker's log contains `line` (its start-up is complete)."""
    from mqttlab.brokers import process

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if line in log_file.read_text(errors="replace"):
            return
        if child is not None and child.poll() is not None:
            raise BrokerStartError(f"{name} exited with code {child.returncode} during start-up:\n{process.log_tail(log_file)}")
        time.sleep(0.1)
    raise BrokerStartError(f"{name} did not finish starting within {timeout:.0f} s (no {line!r} in its log). Log tail:\n"
                           f"{process.log_tail(log_file)}")


class Launcher:
    """Finds, installs, configures and starts one kind of broker."""

    name: str = ""
    how_to_get: str = ""
    #: where the broker comes from and what installing it costs here (for `brokers list`)
    source: str = ""
    install_time: str = ""
    mqtt_versions: tuple[str, ...] = ("3.1.1",)
    has_tls: bool = True
    #: False for brokers the test command does not launch (a long build, say)
    tested_by_test_command: bool = True
    #: (setting, why) for each benchmark setting the `tuned` config applies
    tuned_settings: tuple[tuple[str, str], ...] = ()
    #: (setting, why) for what every config needs to run here (all modes)
    required_settings: tuple[tuple[str, str], ...] = ()
    #: whether `BrokerConfig(mode="file")` is supported (the broker's format can be merged)
    accepts_config_file: bool = True
    #: versions a pin may choose (the first is the default); empty = the one installed
    versions: tuple[str, ...] = ()
    start_timeout: float = 30.0
    #: a line the broker's log shows once every listener is bound, for a broker that answers on its
    #: first port before it binds the others: a port another process took meanwhile accepts our
    #: connection check, and the broker then fails to start after we returned
    started_line: str | None = None
    #: a line the broker's log shows when a known defect of its own hits a client's connection,
    #: which it may die of then or a moment later: a start whose readiness check met it is tried
    #: again (the defect is the broker's, and the check's one connection is not what a start judges)
    connect_crash: str | None = None
    #: ports beyond the plain and TLS listeners (e.g. a second protocol version)
    extra_ports: int = 0
    #: whether `command` adds a WebSocket listener (at /mqtt) when `Ports.ws` is given
    has_websocket: bool = False
    #: set on an instance to give the broker its WebSocket listeners (ws, and wss with TLS)
    websocket: bool = False
    #: user name and password every client must send, for brokers without anonymous login
    credentials: tuple[str, str] | None = None
    #: the highest QoS the broker supports (a lower one is granted to higher subscriptions)
    max_qos: int = 2
    #: set on an instance to run the broker elsewhere (mqttlab.netem); command() binds listen_host
    placement: Placement = Placement()
    #: set on an instance to configure the broker as shipped, tuned, or from the user's file
    config: BrokerConfig = BrokerConfig()
    #: set on an instance to run the broker in a cgroup with CPU and memory limits
    limits: BrokerLimits | None = None
    #: set on an instance (`launch.persistence`): True = persistence on, False = off, None = as
    #: the config mode has it (tuned: off; as-shipped: `shipped_persistence`)
    persistence: bool | None = None
    #: (setting, why) for what `persistence: true` applies; empty: the launcher has no
    #: persistence to turn on, and `persistence_refusal` says why in one line
    persistence_on_settings: tuple[tuple[str, str], ...] = ()
    #: (setting, why) for what `persistence: false` applies to an as-shipped config that persists;
    #: a tuned setting of the same name is what `persistence: true` replaces
    persistence_off_settings: tuple[tuple[str, str], ...] = ()
    #: whether the package's own configuration persists the broker's state
    shipped_persistence: bool = False
    persistence_refusal: str = "mqttlab knows no persistence setting of this broker"
    #: a broker without persistence that keeps its state in memory only, as launched here (what
    #: survives a restart is then known: nothing); else unknown unless it has persistence settings
    memory_only: bool = False

    # -- to be provided by each broker ---------------------------------------------------

    def find(self) -> bool:
        """True when the broker can be started here without installing anything."""
        raise NotImplementedError

    def version(self) -> str | None:
        """`"<name> <version>"` of the installed broker, or None if it cannot be told."""
        raise NotImplementedError

    def install(self) -> None:
        """Installs the broker from its registry (idempotent)."""
        raise NotImplementedError

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        """Writes the broker's config into `workdir` and returns the command that starts it."""
        raise NotImplementedError

    def environment(self) -> dict[str, str] | None:
        return None

    #: set by `command` when the broker needs a directory outside its work directory (Unix
    #: sockets, whose paths a deep work directory would make too long); removed when it stops
    scratch: Path | None = None

    # -- shared ---------------------------------------------------------------------------

    def configure(self, config: str = "tuned", version: str | None = None,
                  limits: dict[str, object] | None = None, persistence: bool | None = None) -> Launcher:
        """Sets the config mode (`tuned`, `as-shipped`, or a config file's path), a version pin,
        cgroup limits (`cpus`, `cpuset`, `memory` in bytes) and persistence (None: as the mode has
        it), as a scenario's `launch:` gives them."""
        self.persistence = persistence
        if config in ("tuned", "as-shipped"):
            self.config = BrokerConfig(config, None, version)
        else:
            self.config = BrokerConfig("file", Path(config).expanduser().resolve(), version)
        if limits and any(value is not None for value in limits.values()):
            from mqttlab.brokers.limits import BrokerLimits

            memory = limits.get("memory")
            cpus = limits.get("cpus")
            self.limits = BrokerLimits(
                cpus=float(cpus) if cpus is not None else None,  # type: ignore[arg-type]
                cpuset=str(limits["cpuset"]) if limits.get("cpuset") is not None else None,
                memory=int(memory) if memory is not None else None,  # type: ignore[call-overload]
            )
        return self

    @property
    def pinned_version(self) -> str | None:
        """The version to install and run: the config's pin, else the launcher's default."""
        return self.config.version or (self.versions[0] if self.versions else None)

    def check_config(self) -> None:
        """Refuses a config this launcher cannot honour, with the reason."""
        if self.config.mode == "file" and not self.accepts_config_file:
            raise BrokerError(f"{self.name} cannot merge a config file with mqttlab's listeners; "
                              "use config `tuned` or `as-shipped`")
        if self.config.version and self.versions and self.config.version not in self.versions:
            raise BrokerError(f"{self.name} version {self.config.version!r} is not offered; "
                              f"choose one of {', '.join(self.versions)}")
        if self.config.version and not self.versions:
            raise BrokerError(f"{self.name} cannot pin a version here (its source offers one)")
        problem = self.persistence_problem()
        if problem:
            raise BrokerError(problem)
        self.config.user_text()  # an unreadable file is refused before anything starts

    def build_record(self) -> dict[str, object]:
        """Where the launched binary came from, for the manifest (its version is recorded beside):
        a package, a registry's artifact (immutable by version), or a pinned upstream tree."""
        return {"source": self.source}

    def config_record(self) -> dict[str, object]:
        """The configuration as plain data for the manifest and reports."""
        applied = list(self.required_settings) + (list(self.tuned_settings) if self.config.tuned else [])
        if self.persistence:
            replaced = {setting for setting, _ in self.persistence_off_settings}
            applied = [item for item in applied if item[0] not in replaced] + list(self.persistence_on_settings)
        elif self.persistence is False and self.config.mode == "as-shipped" and self.shipped_persistence:
            applied += list(self.persistence_off_settings)
        return {
            "mode": self.config.mode,
            "file": str(self.config.file) if self.config.file else None,
            "version_pin": self.config.version,
            "settings": [{"setting": setting, "why": why} for setting, why in applied],
            "state_limits": self.state_limits(),
            "persistence": self.persistence,  # as asked (launch.persistence); None: as the mode has it
            "restart_promises": self.restart_promises(),
        }

    def persistence_problem(self) -> str | None:
        """Why `launch.persistence` cannot be honoured as asked, in one line; None when it can."""
        if self.persistence is None:
            return None
        if not self.persistence_on_settings and not (self.memory_only and self.persistence is False):
            return f"{self.name} cannot be launched with persistence {'on' if self.persistence else 'set'}: {self.persistence_refusal}"
        if self.config.mode == "file":
            return (f"{self.name}: launch.persistence does not apply to a config file (the file's own settings decide); "
                    "leave it out, or use config tuned or as-shipped")
        return None

    def persists(self) -> bool | None:
        """Whether the launched broker writes its state to disk: as asked, else as its config mode
        has it; None when not known here (a user's config file)."""
        if self.persistence is not None:
            return self.persistence
        if self.memory_only:
            return False
        if self.config.mode == "file" or not self.persistence_on_settings:
            return None
        return self.config.mode == "as-shipped" and self.shipped_persistence

    def restart_promises(self) -> dict[str, object]:
        """What the broker's documentation promises survives a restart of this configuration, as
        data beside `state_limits` (judged by mqttlab.promises): `persistence` (on, off, or None:
        not known), and per way of stopping (`clean`: SIGTERM, `crash`: SIGKILL) whether
        `sessions`, `queued` (QoS 1/2 messages of offline sessions) and `retained` messages are
        promised to survive (True), documented lost (False) or not said (None); `source` says where
        the documentation says it. Empty when the persistence is not known."""
        persists = self.persists()
        if persists is None:
            return {}
        if not persists:
            nothing = dict.fromkeys(RESTART_STATE, False)
            return {"persistence": False, "clean": nothing, "crash": dict(nothing),
                    "source": "persistence off: the broker keeps its state in memory only, gone with the process"}
        return {"persistence": True, **self.persisted_promises()}

    def persisted_promises(self) -> dict[str, object]:
        """`restart_promises` with persistence on: `clean`, `crash` and `source`, from the
        broker's documentation (a launcher with `persistence_on_settings` says)."""
        unknown = dict.fromkeys(RESTART_STATE)
        return {"clean": unknown, "crash": dict(unknown), "source": "not documented here"}

    def state_limits(self) -> dict[str, int | None]:
        """The limits this configuration sets on the state the broker keeps, as its documentation
        gives them: `queued_messages`, the messages one offline session holds (None: no limit).
        A limit left out is not known here; a message dropped under a known one is "dropped by
        limit", not lost (mqttlab.promises)."""
        return {}

    def availability(self) -> Availability:
        try:
            found = self.find()
        except BrokerError as exc:
            return Availability(False, None, f"{exc}; {self.how_to_get}")
        if not found:
            return Availability(False, None, self.how_to_get)
        try:
            version = self.version()
        except BrokerError as exc:
            return Availability(True, None, f"installed, version unknown ({exc})")
        return Availability(True, version, "installed")

    def start(
        self, workdir: Path, tls: bool = False, *, detach: bool = False, tls_certificate: str = "valid"
    ) -> RunningBroker:
        """Starts the broker on free loopback ports and returns once it answers MQTT.

        `tls_certificate="expired"` or `"wrong-name"` makes the TLS listener serve a defective
        certificate (signed by the same CA), for tests of TLS failures. A detached broker
        outlives this process (for `mqttlab brokers start --detach`); stopping it is then the
        caller's business."""
        from mqttlab.tls import make_tls_material

        if tls_certificate not in TLS_CERTIFICATES:
            raise BrokerError(f"tls_certificate must be one of {', '.join(TLS_CERTIFICATES)}, got {tls_certificate!r}")
        self.check_config()
        if not self.find():
            raise BrokerUnavailable(f"{self.name} is not available here: {self.how_to_get}")
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        reach = tuple(h for h in (self.placement.reach_host, *self.placement.client_hosts) if h != LOOPBACK)
        material = make_tls_material(workdir / "tls", extra_ips=reach) if tls else None
        if material is not None and tls_certificate == "expired":
            material = replace(material, cert_file=material.expired_cert_file, key_file=material.expired_key_file)
        elif material is not None and tls_certificate == "wrong-name":
            material = replace(material, cert_file=material.wrong_name_cert_file, key_file=material.wrong_name_key_file)
        verify = tls_certificate == "valid"
        version = self.version()
        for attempt in range(1, START_TRIES + 1):
            try:
                return self._start_once(workdir, material, version, detach, verify)
            except BrokerStartError as exc:
                said = str(exc)
                # Another process may have taken a port between our pick and the broker's bind.
                port_taken = any(word in said.lower() for word in ("in use", "eaddrinuse"))
                if attempt == START_TRIES or not (self._met_known_crash(said) or port_taken):
                    raise
        raise AssertionError("unreachable")

    def _met_known_crash(self, said: str) -> bool:
        """Whether a failed start's error shows the broker's known defect (said on stderr, as the
        start is then tried again)."""
        met = self.connect_crash is not None and self.connect_crash in said
        if met:
            print(f"note: {self.name} met its known defect ({self.connect_crash!r}) while its "
                  f"readiness was checked; started again", file=sys.stderr)
        return met

    def _start_once(
        self, workdir: Path, material: TlsMaterial | None, version: str | None, detach: bool, verify: bool
    ) -> RunningBroker:
        from mqttlab.brokers import process

        websocket = self.websocket and self.has_websocket
        picked = free_ports(1 + (1 if material else 0) + self.extra_ports + (1 + (1 if material else 0) if websocket else 0))
        ws_ports = [picked.pop() for _ in range(1 + (1 if material else 0))] if websocket else [None, None]
        ports = Ports(
            plain=picked[0],
            tls=picked[1] if material else None,
            extra=tuple(picked[2 if material else 1:]),
            ws=ws_ports[0],
            wss=ws_ports[1] if material else None,
        )
        log_file = workdir / f"{self.name}.log"
        log_file.write_bytes(b"")
        command = [*self.placement.command_prefix, *self.command(workdir, ports, material)]
        host = self.placement.reach_host
        cgroup = None
        if self.limits is not None and not self.limits.is_empty():
            from mqttlab.brokers.limits import BrokerCgroup

            cgroup = BrokerCgroup(self.limits, self.name)
            command = cgroup.wrap(command)
        try:
            child = process.spawn(command, log_file=log_file, cwd=workdir, env=self.environment(), detach=detach)
        except OSError as exc:
            if cgroup is not None:
                cgroup.remove()
            self._remove_scratch()
            raise BrokerStartError(f"cannot run {command[0]}: {exc}") from None

        def serving(started: subprocess.Popen, log_from: int) -> None:
            """Returns once the plain listener, and the TLS one if any, answer MQTT, unless the
            broker met its known defect meanwhile (`log_from`: where this process's log begins)."""
            wait_until_serving(host, ports.plain, child=started, timeout=self.start_timeout,
                               log_file=log_file, name=self.name, credentials=self.credentials)
            if material is not None and ports.tls is not None:
                wait_until_serving(host, ports.tls, child=started, timeout=self.start_timeout,
                                   tls=True, tls_ca_file=material.ca_file, verify=verify, log_file=log_file,
                                   name=f"{self.name} (TLS)", credentials=self.credentials)
            # A check that was refused and tried again may leave a broker that dies of the defect
            # a moment later (NanoMQ: a heap abort within the second), so it is not handed out.
            with open(log_file, "rb") as log:
                log.seek(log_from)
                said = log.read().decode(errors="replace")
            if self.connect_crash is not None and self.connect_crash in said:
                raise BrokerStartError(f"{self.name} met its known defect ({self.connect_crash!r}) while its "
                                       f"readiness was checked:\n"
                                       f"{process.log_tail(log_file)}")

        try:
            serving(child, 0)
            v5_port = self.v5_port(ports)
            if v5_port is not None:
                # A separate MQTT 5 listener may come up a moment after the first one.
                wait_until_listening(host, v5_port, child=child, timeout=self.start_timeout,
                                     log_file=log_file, name=f"{self.name} (MQTT 5)")
            for ws_port in (ports.ws, ports.wss):
                if ws_port is not None:
                    # Bound is ready: the upgrade itself is the engine's, and fails in one line.
                    wait_until_listening(host, ws_port, child=child, timeout=self.start_timeout,
                                         log_file=log_file, name=f"{self.name} (WebSocket)")
            if self.started_line is not None:
                wait_until_logged(self.started_line, child=child, timeout=self.start_timeout, log_file=log_file,
                                  name=self.name)
        except BaseException:
            process.terminate(child)
            if cgroup is not None:
                cgroup.remove()
            self._remove_scratch()
            raise

        def respawn() -> subprocess.Popen:
            for attempt in range(1, START_TRIES + 1):
                log_from = log_file.stat().st_size
                again = process.spawn(command, log_file=log_file, cwd=workdir, env=self.environment(), detach=detach)
                try:
                    serving(again, log_from)
                    return again
                except BaseException as exc:
                    process.terminate(again)
                    if attempt == START_TRIES or not isinstance(exc, BrokerStartError) or not self._met_known_crash(str(exc)):
                        raise
            raise AssertionError("unreachable")

        return RunningBroker(
            name=self.name,
            version=version,
            host=host,
            port=ports.plain,
            tls_port=ports.tls,
            ws_port=ports.ws,
            wss_port=ports.wss,
            ca_file=material.ca_file if material else None,
            pid=child.pid,
            v5_port=self.v5_port(ports),
            mqtt_sn_port=self.mqtt_sn_port(ports),
            log_file=log_file,
            config=self.config_record(),
            build=self.build_record(),
            cgroup=cgroup,
            scratch=self.scratch,
            credentials=self.credentials,
            max_qos=self.max_qos,
            _process=child,
            _respawn=respawn,
        )

    def _remove_scratch(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def v5_port(self, ports: Ports) -> int | None:
        """The port of a separate MQTT 5 listener, for brokers that need one."""
        return None

    def mqtt_sn_port(self, ports: Ports) -> int | None:
        """The UDP port of the broker's own MQTT-SN listener, for brokers that have one."""
        return None
