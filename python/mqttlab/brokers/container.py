"""Brokers launched from container images, the way seed 003 ran its five brokers and the way
users run EMQX and VerneMQ: `--broker image:emqx/emqx:5.8`, through docker or podman.

Known images get a preset (`PRESETS`: ports, how config and TLS files reach the broker, tuned
settings); any other image runs with its MQTT port given (`launch.container.port`). The broker is
reached on a free 127.0.0.1 port mapped to the container's, or on the host's network. CPU and
memory limits become the runtime's `--cpus`/`--memory`; the container's main process (and its
children) is the PID mqttlab samples; the image's stated version is the broker's version (its
OCI version label, or a tag that is a version), else the image's digest, which the manifest keeps
in either case.

Clean-up, in three layers like brokers/process.py's: the run's exit stack stops the container
(end of run, Ctrl-C, SIGTERM); atexit removes any still live; and every container carries the
labels of the mqttlab that made it, so that one left by an mqttlab killed outright (SIGKILL) is
found and removed by the next start (`remove_leftovers`)."""

from __future__ import annotations

import atexit
import json
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from mqttlab.brokers import process
from mqttlab.brokers.base import (
    LOOPBACK,
    Availability,
    BrokerError,
    BrokerStartError,
    BrokerUnavailable,
    Launcher,
    Placement,
    Ports,
    RunningBroker,
    free_ports,
    run_quietly,
    wait_until_serving,
    which,
)
from mqttlab.brokers.errors import ContainerSetupError
from mqttlab.tls import TlsMaterial

IMAGE_PREFIX = "image:"
#: labels every container mqttlab starts carries: who made it (PID and start time, so that a
#: recycled PID is never taken for its owner) and for which broker
OWNER_LABEL = "mqttlab.owner"
NAME_LABEL = "mqttlab.broker"
VERSION_LABEL = "org.opencontainers.image.version"  # the OCI annotation an image states its version in
#: where the run's TLS files and config files appear inside the container
TLS_DIR = "/mqttlab/tls"
RUNTIMES = ("auto", "podman", "docker")
NETWORKS = ("mapped", "host")


# -- runtimes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Runtime:
    """docker or podman with the global flags this host needs."""

    program: str
    flags: tuple[str, ...] = ()

    def argv(self, *args: str) -> list[str]:
        return [self.program, *self.flags, *args]

    def call(self, *args: str, timeout: float = 60.0) -> str:
        return run_quietly(self.argv(*args), timeout=timeout)


def _answers(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=15, stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@cache
def _docker_answers() -> bool:
    # The docker client alone is not enough: its daemon must answer.
    return which("docker") is not None and _answers(["docker", "version", "--format", "{{.Server.Version}}"])


def _podman_flags() -> tuple[str, ...]:
    flags: list[str] = []
    # crun refuses cgroup v1 and hybrid hierarchies; runc runs on them.
    if not Path("/sys/fs/cgroup/cgroup.controllers").exists() and which("runc"):
        flags += ["--runtime", "runc"]
    # Without systemd as init, podman's systemd cgroup manager has nobody to ask for cgroups.
    if not Path("/run/systemd/system").is_dir():
        flags += ["--cgroup-manager", "cgroupfs"]
    return tuple(flags)


NO_RUNTIME = ("no container runtime here: install podman (Debian: apt-get install podman runc) or start "
              "docker's daemon; launch.container.runtime picks one")


def find_runtime(choice: str = "auto") -> Runtime:
    """The runtime to use: `docker` when its daemon answers, else `podman` (for `auto`)."""
    if choice not in RUNTIMES:
        raise ContainerSetupError(f"launch.container.runtime must be one of {', '.join(RUNTIMES)}, got {choice!r}")
    if choice in ("auto", "docker") and _docker_answers():
        return Runtime("docker")
    if choice == "docker":
        raise BrokerUnavailable("docker does not answer (no daemon reachable with `docker version`): start it, "
                                "or set launch.container.runtime: podman")
    if which("podman") is not None:
        return Runtime("podman", _podman_flags())
    raise BrokerUnavailable(NO_RUNTIME if choice == "auto" else
                            "podman is not installed: apt-get install podman runc (Debian), or set launch.container.runtime: docker")


def runtime_note() -> str:
    """For `brokers list`: which runtime would run an image here."""
    try:
        return f"{find_runtime().program} found here"
    except BrokerError:
        return "no container runtime found here (apt-get install podman runc)"


def _ulimits() -> list[str]:
    """The container's open-file and process limits, at this process's hard limits: runtimes
    default to higher ones, which a host without CAP_SYS_RESOURCE refuses to grant. The process
    limit also stays within kernel.pid_max (a sandboxed kernel refused 96,365 where pid_max was
    32,768, and no more processes than PIDs can run anyway)."""
    try:
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        pid_max = 32768
    flags = []
    for name, limit, ceiling in (("nofile", resource.RLIMIT_NOFILE, None), ("nproc", resource.RLIMIT_NPROC, pid_max)):
        hard = resource.getrlimit(limit)[1]
        if hard == resource.RLIM_INFINITY:
            hard = ceiling if ceiling is not None else hard
        if hard != resource.RLIM_INFINITY:
            value = min(hard, ceiling) if ceiling is not None else hard
            flags += ["--ulimit", f"{name}={value}:{value}"]
    return flags


# -- images ---------------------------------------------------------------------------------------


def repository_of(reference: str) -> str:
    """`emqx/emqx` of `emqx/emqx:5.8` (a registry's `host:port/` stays; tag and digest go)."""
    name = reference.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def image_id(runtime: Runtime, reference: str) -> str | None:
    """The local image's ID, or None when it is not here."""
    try:
        return runtime.call("image", "inspect", "--format", "{{.Id}}", reference, timeout=30).strip() or None
    except BrokerError:
        return None


def image_digest(runtime: Runtime, reference: str) -> str:
    """The digest that names the image's content: its registry digest when it came from one
    (RepoDigests), else its local ID (an image built or imported here)."""
    out = runtime.call("image", "inspect", "--format", "{{json .RepoDigests}}|{{.Id}}", reference, timeout=30)
    digests_text, _, local_id = out.strip().rpartition("|")
    digests = [d for d in (json.loads(digests_text or "null") or []) if "@" in d]
    repository = repository_of(reference)
    ours = [d for d in digests if d.split("@", 1)[0].endswith(repository)]
    if ours or digests:
        return (ours or digests)[0].split("@", 1)[1]
    return local_id if local_id.startswith("sha256:") else f"sha256:{local_id}"


def image_version(runtime: Runtime, reference: str) -> str | None:
    """The version the image states: its `org.opencontainers.image.version` label, else its tag
    when the tag is a version (`5.8`, `v2.0.18`); None for `latest`, `local` and the like."""
    labels = json.loads(runtime.call("image", "inspect", "--format", "{{json .Config.Labels}}", reference, timeout=30) or "null") or {}
    if labels.get(VERSION_LABEL):
        return str(labels[VERSION_LABEL])
    name = reference.split("@", 1)[0]
    tag = name[len(repository_of(name)) + 1:]
    return tag if tag[:1].isdigit() or (tag[:1] == "v" and tag[1:2].isdigit()) else None


def qualified(runtime: Runtime, reference: str) -> str:
    """The reference as docker reads it, for podman: a name without a registry host is Docker
    Hub's (docker.io/library/ for a single name). Debian's podman defines no registries to search,
    so `emqx/emqx:5.8` would otherwise not resolve."""
    first = reference.split("/", 1)[0]
    if runtime.program != "podman" or ("/" in reference and ("." in first or ":" in first or first == "localhost")):
        return reference
    return f"docker.io/{reference}" if "/" in reference else f"docker.io/library/{reference}"


def pull(runtime: Runtime, reference: str) -> None:
    try:
        runtime.call("pull", reference, timeout=1800)
    except BrokerError as error:
        last = str(error).strip().splitlines()[-1] if str(error).strip() else "no output"
        raise BrokerUnavailable(
            f"{runtime.program} cannot pull {reference} ({last.strip()}): pull it where its registry is reachable "
            f"and bring it here with `{runtime.program} save` / `{runtime.program} load -i FILE`") from None


# -- presets --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listen:
    """Where the broker listens inside its network namespace (the host's with host networking)."""

    host: str
    port: int
    tls_port: int | None  # None: no TLS listener asked for


@dataclass(frozen=True)
class Setup:
    """What a preset gives the container: environment and files (path inside -> text)."""

    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Preset:
    image: str  # the repository's last component: emqx/emqx -> emqx
    broker: str
    port: int
    tls_port: int | None
    #: (listen, launcher) -> environment and files; the launcher carries the config mode
    setup: Callable[[Listen, Launcher], Setup]
    tuned_settings: tuple[tuple[str, str], ...] = ()
    required_settings: tuple[tuple[str, str], ...] = ()
    accepts_config_file: bool = False
    #: whether the broker opens only the listeners the preset places (so it may share the host's network)
    host_network: bool = False
    start_timeout: float = 120.0
    mqtt_versions: tuple[str, ...] = ("3.1.1", "5")


def _tls_path(material_file: str) -> str:
    return f"{TLS_DIR}/{material_file}"


def _mosquitto_setup(listen: Listen, launcher: Launcher) -> Setup:
    from mqttlab.brokers.mosquitto import MosquittoLauncher

    lines = ["# written by mqttlab for one run", "allow_anonymous true", "log_dest stdout"]
    if launcher.config.tuned:
        # Mosquitto's own launcher documents each; a setting listed as "a, b" is two lines.
        lines += [line for setting, _ in MosquittoLauncher.tuned_settings for line in setting.split(", ")]
    elif launcher.config.mode == "file":
        lines += [f"# --- from {launcher.config.file}", launcher.config.user_text(), "# --- mqttlab's listeners"]
    lines += [f"listener {listen.port} {listen.host}"]
    if listen.tls_port is not None:
        lines += [f"listener {listen.tls_port} {listen.host}", f"cafile {_tls_path('ca.pem')}",
                  f"certfile {_tls_path('server.pem')}", f"keyfile {_tls_path('server.key')}"]
    return Setup(files={"/mosquitto/config/mosquitto.conf": "\n".join(lines) + "\n"})


def _listener_env(listen: Listen, tcp: str, ssl: str, ca_cert_key: tuple[str, str, str]) -> dict[str, str]:
    """Listeners given as environment variables: `tcp` and `ssl` name the bind settings,
    `ca_cert_key` the settings of the TLS listener's CA, certificate and key files."""
    env = {tcp: f"{listen.host}:{listen.port}"}
    if listen.tls_port is not None:
        env[ssl] = f"{listen.host}:{listen.tls_port}"
        env |= dict(zip(ca_cert_key, (_tls_path("ca.pem"), _tls_path("server.pem"), _tls_path("server.key")), strict=True))
    return env


def _emqx_setup(listen: Listen, launcher: Launcher) -> Setup:
    # EMQX 5 maps EMQX_A__B__C to the setting a.b.c.
    ssl = "EMQX_LISTENERS__SSL__DEFAULT__SSL_OPTIONS__"
    env = _listener_env(listen, "EMQX_LISTENERS__TCP__DEFAULT__BIND", "EMQX_LISTENERS__SSL__DEFAULT__BIND",
                        (f"{ssl}CACERTFILE", f"{ssl}CERTFILE", f"{ssl}KEYFILE"))
    if launcher.config.tuned:
        env |= {"EMQX_MQTT__MAX_MQUEUE_LEN": "1000000", "EMQX_MQTT__MAX_INFLIGHT": "65535"}
    return Setup(env=env)


def _vernemq_setup(listen: Listen, launcher: Launcher) -> Setup:
    # The image's start script turns DOCKER_VERNEMQ_A__B into the setting a.b.
    ssl = "DOCKER_VERNEMQ_LISTENER__SSL__"
    env = {"DOCKER_VERNEMQ_ALLOW_ANONYMOUS": "on"} | _listener_env(
        listen, "DOCKER_VERNEMQ_LISTENER__TCP__DEFAULT", f"{ssl}DEFAULT", (f"{ssl}CAFILE", f"{ssl}CERTFILE", f"{ssl}KEYFILE"))
    if launcher.config.tuned:
        env |= {"DOCKER_VERNEMQ_MAX_INFLIGHT_MESSAGES": "0", "DOCKER_VERNEMQ_MAX_ONLINE_MESSAGES": "-1",
                "DOCKER_VERNEMQ_MAX_OFFLINE_MESSAGES": "-1"}
    return Setup(env=env)


def _nanomq_setup(listen: Listen, launcher: Launcher) -> Setup:
    lines = [f'listeners.tcp {{ bind = "{listen.host}:{listen.port}" }}']
    if listen.tls_port is not None:
        lines += [
            "listeners.ssl {",
            f'  bind = "{listen.host}:{listen.tls_port}"',
            f'  keyfile = "{_tls_path("server.key")}"',
            f'  certfile = "{_tls_path("server.pem")}"',
            f'  cacertfile = "{_tls_path("ca.pem")}"',
            "  verify_peer = false",
            "  fail_if_no_peer_cert = false",
            "}",
        ]
    return Setup(files={"/etc/nanomq.conf": "\n".join(lines) + "\n"})


def _hivemq_setup(listen: Listen, launcher: Launcher) -> Setup:
    import xml.etree.ElementTree as ET

    from mqttlab.brokers.hivemq import HivemqLauncher

    # HiveMQ's own launcher writes the config.xml (listeners, tuned settings, a user's file).
    hivemq = HivemqLauncher()
    hivemq.config, hivemq.placement = launcher.config, Placement(listen_host=listen.host)
    root = hivemq._config(Path("/unused"), Ports(plain=listen.port, tls=None), None)
    return Setup(files={"/opt/hivemq/conf/config.xml": ET.tostring(root, encoding="unicode")})


def _presets() -> dict[str, Preset]:
    from mqttlab.brokers.hivemq import HivemqLauncher
    from mqttlab.brokers.mosquitto import MosquittoLauncher

    presets = [
        Preset("emqx", "emqx", 1883, 8883, _emqx_setup,
               tuned_settings=(
                   ("mqtt.max_mqueue_len = 1000000", "default 1000 per client: a subscriber that falls behind would lose QoS 1/2 messages"),
                   ("mqtt.max_inflight = 65535", "default 32: the in-flight window caps QoS 1/2 throughput per client"),
               ),
               required_settings=(("listeners.tcp.default.bind (and ssl) on the container's ports", "mqttlab's listeners; the TLS one with the run's throwaway certificate"),)),
        Preset("vernemq", "vernemq", 1883, 8883, _vernemq_setup,
               tuned_settings=(
                   ("max_inflight_messages = 0", "default 20: the in-flight window caps QoS 1/2 throughput per client"),
                   ("max_online_messages = -1", "default 1000 queued per online client; the rest would be dropped"),
                   ("max_offline_messages = -1", "default 1000 queued per offline session"),
               ),
               required_settings=(("allow_anonymous = on", "mqttlab's clients send no credentials"),
                                  ("listener.tcp.default (and listener.ssl.*)", "mqttlab's listeners; the TLS one with the run's throwaway certificate"))),
        Preset("nanomq", "nanomq", 1883, 8883, _nanomq_setup, host_network=True,
               required_settings=(("/etc/nanomq.conf with mqttlab's listeners only", "every other setting is NanoMQ's default"),)),
        Preset("hivemq-ce", "hivemq", 1883, None, _hivemq_setup, tuned_settings=HivemqLauncher.tuned_settings,
               accepts_config_file=True,
               required_settings=(("/opt/hivemq/conf/config.xml as HiveMQ's launcher writes it", "mqttlab's listener; no usage statistics"),)),
        Preset("eclipse-mosquitto", "mosquitto", 1883, 8883, _mosquitto_setup, host_network=True,
               tuned_settings=MosquittoLauncher.tuned_settings, accepts_config_file=True, start_timeout=30.0,
               required_settings=(("allow_anonymous true", "Mosquitto 2 refuses anonymous clients once a listener is configured"),
                                  ("log_dest stdout", "the log goes to the run's broker log"),
                                  ("/mosquitto/config/mosquitto.conf replaced", "the image's command reads it"))),
    ]
    return {preset.image: preset for preset in presets}


PRESET_IMAGES = ("emqx", "vernemq", "nanomq", "hivemq-ce", "eclipse-mosquitto")


def preset_for(reference: str) -> Preset | None:
    return _presets().get(repository_of(reference).rsplit("/", 1)[-1])


# -- clean-up -------------------------------------------------------------------------------------

_live: dict[str, Runtime] = {}
_lock = threading.Lock()
_atexit_registered = False


def _owner_label() -> str:
    import psutil

    return f"{os.getpid()}:{psutil.Process().create_time():.2f}"


def _owner_alive(label: str) -> bool:
    import psutil

    pid_text, _, created = label.partition(":")
    try:
        owner = psutil.Process(int(pid_text))
        return abs(owner.create_time() - float(created)) < 1.0
    except (ValueError, psutil.Error):
        return False


def remove_container(runtime: Runtime, name: str) -> None:
    """Stops (SIGTERM, 5 s, SIGKILL) and removes a container; one already gone is fine."""
    for args in (("stop", "-t", "5", name), ("rm", "-f", name)):
        try:
            runtime.call(*args, timeout=60)
        except BrokerError:
            pass
    with _lock:
        _live.pop(name, None)


def _remove_live() -> None:
    with _lock:
        live = list(_live.items())
    for name, runtime in live:
        remove_container(runtime, name)


def remove_leftovers(runtime: Runtime) -> list[str]:
    """Removes containers an mqttlab started and did not remove because it was killed outright:
    those whose owner label names a process that no longer runs. Returns their names."""
    try:
        ids = runtime.call("ps", "-a", "-q", "--filter", f"label={OWNER_LABEL}", timeout=30).split()
        if not ids:
            return []
        out = runtime.call("inspect", "--format", f'{{{{.Name}}}}|{{{{index .Config.Labels "{OWNER_LABEL}"}}}}', *ids, timeout=30)
    except BrokerError:
        return []
    removed = []
    for line in out.splitlines():
        name, _, owner = line.strip().lstrip("/").rpartition("|")
        if name and not _owner_alive(owner):
            remove_container(runtime, name)
            removed.append(name)
    return removed


# -- the broker -----------------------------------------------------------------------------------


@dataclass
class ContainerBroker(RunningBroker):
    """A broker in a container: `pid` is the container's main process (on the host), `container`
    its name; stopping removes the container."""

    runtime: Runtime | None = field(default=None, repr=False)
    #: `<runtime> logs -f`: copies the broker's output to its log and ends when the container does
    _follower: subprocess.Popen | None = field(default=None, repr=False)

    def is_running(self) -> bool:
        return self._follower is not None and self._follower.poll() is None

    def stop(self) -> None:
        if self.managed and self.runtime is not None and self.container is not None:
            remove_container(self.runtime, self.container)
        if self._follower is not None:
            process.terminate(self._follower, grace_seconds=2)


@dataclass(frozen=True)
class ContainerOptions:
    runtime: str = "auto"
    port: int | None = None
    tls_port: int | None = None
    network: str = "mapped"
    env: dict[str, str] = field(default_factory=dict)


class ContainerLauncher(Launcher):
    """Runs `image:REF` in a container; see the module's doc."""

    source = "a container image (docker or podman)"
    install_time = "one image pull"
    accepts_config_file = False

    def __init__(self, broker: str, options: ContainerOptions | None = None) -> None:
        self.reference = broker[len(IMAGE_PREFIX):] if broker.startswith(IMAGE_PREFIX) else broker
        if not self.reference:
            raise ContainerSetupError("an image is given as image:REPOSITORY[:TAG], e.g. image:emqx/emqx:5.8")
        self.preset = preset_for(self.reference)
        self.name = self.preset.broker if self.preset else repository_of(self.reference).rsplit("/", 1)[-1]
        self.how_to_get = f"{self.reference} is pulled by docker or podman ({runtime_note()})"
        if self.preset is not None:
            self.tuned_settings = self.preset.tuned_settings
            self.required_settings = self.preset.required_settings
            self.accepts_config_file = self.preset.accepts_config_file
            self.start_timeout = self.preset.start_timeout
            self.mqtt_versions = self.preset.mqtt_versions
        self.options = options or ContainerOptions()
        self.has_tls = self.preset.tls_port is not None if self.preset else False
        self._runtime: Runtime | None = None

    def use_container(self, options: ContainerOptions | dict[str, Any] | None) -> None:
        """Takes `launch.container` (runtime, the image's ports, network, environment)."""
        if isinstance(options, dict):
            options = ContainerOptions(**options)
        self.options = options or ContainerOptions()
        self._runtime = None
        self._check_options()

    def _check_options(self) -> None:
        if self.options.network not in NETWORKS:
            raise ContainerSetupError(f"launch.container.network must be one of {', '.join(NETWORKS)}")
        if self.preset is None and self.options.port is None:
            raise ContainerSetupError(
                f"{self.reference} has no preset ({', '.join(PRESET_IMAGES)} have): give its MQTT port, "
                "e.g. --set launch.container.port=1883")
        if self.preset is not None and self.options.network == "host" and not self.preset.host_network:
            raise ContainerSetupError(f"{self.preset.image} opens ports beyond MQTT's (dashboard, clustering); "
                                      "run it with launch.container.network: mapped")
        self.has_tls = self.options.tls_port is not None if self.preset is None else self.preset.tls_port is not None

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = find_runtime(self.options.runtime)
        return self._runtime

    # -- Launcher -----------------------------------------------------------------------

    def find(self) -> bool:
        return image_id(self.runtime, self.reference) is not None

    def availability(self) -> Availability:
        try:
            runtime = self.runtime
        except BrokerError as error:
            return Availability(False, None, str(error))
        # Available = it can be started: an image not here yet is pulled by the start, as
        # `docker run` would, so a suite given one runs it instead of skipping it.
        if image_id(runtime, self.reference) is None:
            return Availability(True, None, f"{self.reference} is not here yet: {runtime.program} pulls it at the start")
        return Availability(True, self.version(), f"image, run by {runtime.program}")

    def version(self) -> str | None:
        """`emqx/emqx 5.8.0` when the image states its version, else the digest that names its
        content (`reference@sha256:…`), which the manifest keeps in either case."""
        stated = image_version(self.runtime, self.reference)
        return f"{repository_of(self.reference)} {stated}" if stated else f"{self.reference}@{image_digest(self.runtime, self.reference)}"

    def install(self) -> None:
        if self.find():
            return
        # An image here under the short name (built or imported) is used as it is; else the name
        # is pulled as docker would pull it, and known by that name from then on.
        self.reference = qualified(self.runtime, self.reference)
        if not self.find():
            pull(self.runtime, self.reference)

    def check_config(self) -> None:
        if self.config.version:
            raise BrokerError(f"the image's tag is its version: give image:{repository_of(self.reference)}:{self.config.version}")
        if self.config.mode == "file" and not self.accepts_config_file:
            raise BrokerError(f"{self.reference}: a config file is merged for eclipse-mosquitto and hivemq-ce only; "
                              "pass other images' settings as launch.container.env")
        self.config.user_text()

    def config_record(self) -> dict[str, object]:
        record = super().config_record()
        if self.preset is None:
            record["mode"] = "as-shipped"  # mqttlab knows no settings of this image
        record["container"] = {"image": self.reference, "runtime": self.runtime.program,
                               "network": self.options.network, "env": dict(self.options.env),
                               "preset": self.preset.image if self.preset else None}
        return record

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        raise BrokerError("a container broker is started by its runtime, not as a command")

    def start(self, workdir: Path, tls: bool = False, *, detach: bool = False,
              tls_certificate: str = "valid") -> RunningBroker:
        self._check_options()
        if self.placement != Placement():
            raise ContainerSetupError("a broker from an image runs on this host's loopback; network: is for brokers launched as processes")
        if tls and not self.has_tls:
            raise ContainerSetupError(f"{self.reference}: no TLS listener known; give launch.container.tls_port"
                                      if self.preset is None else f"the {self.preset.image} preset has no TLS listener")
        remove_leftovers(self.runtime)
        self.install()
        return super().start(workdir, tls, detach=detach, tls_certificate=tls_certificate)

    def _start_once(self, workdir: Path, material: TlsMaterial | None, version: str | None,
                    detach: bool, verify: bool) -> RunningBroker:
        runtime = self.runtime
        host_network = self.options.network == "host"
        inner_port = self.options.port or (self.preset.port if self.preset else 1883)
        inner_tls = self.options.tls_port or (self.preset.tls_port if self.preset else None)
        picked = free_ports(2 if material else 1)
        host_port, host_tls = picked[0], (picked[1] if material else None)
        if host_network and self.preset is not None:
            # On the host's network the broker itself listens on the free loopback ports.
            listen = Listen(LOOPBACK, host_port, host_tls)
        else:
            if host_network:  # an image without a preset listens where its own config says
                host_port, host_tls = inner_port, inner_tls if material else None
            listen = Listen("0.0.0.0", inner_port, inner_tls if material else None)
        name = f"mqttlab-{self.name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
        args = ["run", "-d", "--rm", "--name", name, "--label", f"{NAME_LABEL}={self.name}", *_ulimits()]
        if not detach:
            args += ["--label", f"{OWNER_LABEL}={_owner_label()}"]
        if host_network:
            args += ["--network", "host"]
        else:
            args += ["-p", f"{LOOPBACK}:{host_port}:{listen.port}"]
            if listen.tls_port is not None and host_tls is not None:
                args += ["-p", f"{LOOPBACK}:{host_tls}:{listen.tls_port}"]
        args += self._limit_flags()
        setup = self.preset.setup(listen, self) if self.preset else Setup()
        files = workdir / "container"
        files.mkdir(parents=True, exist_ok=True)
        for index, (inside, text) in enumerate(setup.files.items()):
            path = files / f"{index}-{Path(inside).name}"
            path.write_text(text)
            path.chmod(0o644)
            args += _bind(path, inside)
        if material is not None:
            # Throwaway keys of the run's own CA: readable by the image's (maybe unprivileged) user.
            for pem in material.directory.iterdir():
                pem.chmod(0o644)
            args += _bind(material.directory, TLS_DIR)
        for key, value in {**setup.env, **self.options.env}.items():
            args += ["-e", f"{key}={value}"]
        log_file = workdir / f"{self.name}.log"
        log_file.write_bytes(b"")
        try:
            runtime.call(*args, self.reference, timeout=120)
        except BrokerError as error:
            raise BrokerStartError(f"{runtime.program} could not start {self.reference}: {error}") from None
        if not detach:
            with _lock:
                _live[name] = runtime
            _remove_at_exit()
        follower = None
        try:
            follower = process.spawn(runtime.argv("logs", "-f", name), log_file=log_file, cwd=workdir)
            for port, tls_on in ((host_port, False), (host_tls, True)):
                if port is None:
                    continue
                wait_until_serving(LOOPBACK, port, child=follower, timeout=self.start_timeout, tls=tls_on,
                                   tls_ca_file=material.ca_file if material else None, verify=verify,
                                   log_file=log_file, name=f"{self.name} ({self.reference})")
            pid = int(runtime.call("inspect", "--format", "{{.State.Pid}}", name, timeout=30).strip())
        except BaseException:
            remove_container(runtime, name)
            if follower is not None:
                process.terminate(follower, grace_seconds=2)
            raise
        cgroup = None
        if self.limits is not None and not self.limits.is_empty():
            from mqttlab.brokers.limits import BrokerCgroup

            cgroup = BrokerCgroup.of_process(self.limits, pid)
        return ContainerBroker(
            name=self.name, version=version, host=LOOPBACK, port=host_port, tls_port=host_tls,
            ca_file=material.ca_file if material else None, pid=pid, log_file=log_file, container=name,
            config=self._config_with_name(name), cgroup=cgroup, max_qos=self.max_qos, runtime=runtime, _follower=follower,
        )

    def _config_with_name(self, name: str) -> dict[str, object]:
        record = self.config_record()
        record["container"] = {**record["container"], "name": name,  # type: ignore[dict-item]
                               "digest": image_digest(self.runtime, self.reference)}
        return record

    def _limit_flags(self) -> list[str]:
        if self.limits is None:
            return []
        flags = []
        if self.limits.cpus is not None:
            flags += ["--cpus", f"{self.limits.cpus:g}"]
        if self.limits.cpuset is not None:
            flags += ["--cpuset-cpus", self.limits.cpuset]
        if self.limits.memory is not None:
            # The same figure for memory + swap: the broker is held to the limit, not swapped out.
            flags += ["--memory", str(self.limits.memory), "--memory-swap", str(self.limits.memory)]
        return flags


def _bind(source: Path, target: str) -> list[str]:
    """A read-only bind mount. `--mount` rather than `-v`, whose colons would split a results
    directory named after an image (`runs/p2p/image:emqx/emqx:5.8/...`)."""
    if "," in str(source):
        raise ContainerSetupError(f"a bind mount cannot take a path with a comma: {source}")
    return ["--mount", f"type=bind,source={source},target={target},readonly"]


def _remove_at_exit() -> None:
    global _atexit_registered
    with _lock:
        if _atexit_registered:
            return
        _atexit_registered = True
    atexit.register(_remove_live)
