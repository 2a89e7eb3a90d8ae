"""Brokers launched from container images (brokers/container.py), with podman, on an image built
here from Debian's Mosquitto and the libraries it links (no image registry is reachable): the
eclipse-mosquitto preset, a CPU/memory cap, resources, the digest as version, and clean-up,
including after an mqttlab that was killed outright."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from mqttlab.brokers import get_launcher
from mqttlab.brokers.container import OWNER_LABEL, Runtime, find_runtime, remove_leftovers
from mqttlab.brokers.probe import client_tls_context, round_trip
from mqttlab.planning import validate_scenario
from mqttlab.scenario import ScenarioError

ROOT = Path(__file__).resolve().parent.parent
#: named so that the eclipse-mosquitto preset applies, as to the official image
IMAGE = "mqttlab-test/eclipse-mosquitto:local"
#: the same files under a name no preset knows, its broker reading a config of its own
GENERIC = "mqttlab-test/generic-broker:local"
#: the preset's image again, stating its version as official images do (an OCI label)
VERSIONED = "mqttlab-test/eclipse-mosquitto:labelled"
MOSQUITTO = "/usr/sbin/mosquitto"


def _root_filesystem(directory: Path) -> None:
    """Mosquitto, the shared libraries `ldd` lists, and the accounts and folders it expects."""
    listing = subprocess.run(["ldd", MOSQUITTO], capture_output=True, text=True, check=True).stdout
    files = [MOSQUITTO] + [part for line in listing.splitlines() for part in line.split() if part.startswith("/")]
    for name in files:
        target = directory / name.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(name).resolve(), target)
    (directory / "etc").mkdir(exist_ok=True)
    (directory / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\nmosquitto:x:1883:1883::/var/empty:/bin/false\n")
    (directory / "etc/group").write_text("root:x:0:\nmosquitto:x:1883:\n")
    for folder in ("mosquitto/config", "mosquitto/data", "tmp"):
        (directory / folder).mkdir(parents=True, exist_ok=True)
    (directory / "etc/generic.conf").write_text("listener 1883\nallow_anonymous true\n")


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/install-test-tools.sh installs it)")
    if not Path(MOSQUITTO).exists():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")
    runtime = find_runtime("podman")
    rootfs = tmp_path_factory.mktemp("rootfs")
    _root_filesystem(rootfs)
    archive = rootfs.parent / "rootfs.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(rootfs, arcname=".")
    for name, config, *label in ((IMAGE, "/mosquitto/config/mosquitto.conf"), (GENERIC, "/etc/generic.conf"),
                                 (VERSIONED, "/mosquitto/config/mosquitto.conf", "--change", "LABEL org.opencontainers.image.version=2.0.99")):
        imported = subprocess.run(runtime.argv("import", "--change", f'CMD ["{MOSQUITTO}", "-c", "{config}"]', *label, str(archive), name),
                                  capture_output=True, text=True, timeout=120)
        if imported.returncode != 0:
            pytest.skip(f"podman cannot import an image here: {imported.stderr.strip().splitlines()[-1:]}")
    # `mosquitto -h` exits 3 after printing its usage: the container ran.
    tried = subprocess.run(runtime.argv("run", "--rm", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
                                        IMAGE, MOSQUITTO, "-h"), capture_output=True, text=True, timeout=120)
    if "mosquitto version" not in tried.stdout + tried.stderr:
        pytest.skip(f"podman cannot run containers on this host: {(tried.stderr.strip().splitlines() or ['?'])[-1]}")
    return runtime


def _containers(runtime: Runtime, label: str = "mqttlab.broker") -> list[str]:
    return runtime.call("ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}").split()


def _cgroup_file(pid: int, controller: str, name: str) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return (Path("/sys/fs/cgroup") / controller / path.lstrip("/") / name).read_text().strip()
    return (Path("/sys/fs/cgroup") / path.lstrip("/") / name).read_text().strip()  # cgroup v2


def test_the_launcher_round_trips_every_qos_in_plain_and_tls_and_removes_its_container(podman: Runtime, tmp_path: Path) -> None:
    launcher = get_launcher(f"image:{IMAGE}")
    started = time.monotonic()
    with launcher.start(tmp_path, tls=True) as broker:
        seconds = time.monotonic() - started
        assert broker.name == "mosquitto" and broker.container in _containers(podman)
        for qos in (0, 1, 2):
            assert round_trip(broker.host, broker.port, qos=qos, payload=b"q%d" % qos).payload == b"q%d" % qos
        assert round_trip(broker.host, broker.tls_port, qos=1, tls_context=client_tls_context(str(broker.ca_file))).qos == 1
        # The digest that names the image's content is its version; the PID is the container's broker.
        local_id = podman.call("image", "inspect", "--format", "{{.Id}}", IMAGE).strip()
        digests = podman.call("image", "inspect", "--format", "{{json .RepoDigests}}", IMAGE)
        assert broker.version.startswith(f"{IMAGE}@sha256:")
        assert broker.version.split("@")[1] in digests or broker.version.endswith(local_id)
        assert Path(f"/proc/{broker.pid}/cmdline").read_bytes().split(b"\0")[0] == MOSQUITTO.encode()
        name = broker.container
    assert name not in _containers(podman)
    print(f"container start to CONNACK (plain and TLS): {seconds:.2f} s")


def test_an_image_without_a_preset_runs_with_its_port_given_and_a_preset_on_the_hosts_network(podman: Runtime, tmp_path: Path) -> None:
    generic = get_launcher(f"image:{GENERIC}")
    generic.use_container({"port": 1883})
    with generic.start(tmp_path / "generic") as broker:
        assert broker.name == "generic-broker" and broker.config["mode"] == "as-shipped"
        assert round_trip(broker.host, broker.port, qos=1).qos == 1
    host = get_launcher(f"image:{IMAGE}")
    host.use_container({"network": "host"})
    with host.start(tmp_path / "host") as broker:
        assert podman.call("inspect", "--format", "{{.HostConfig.NetworkMode}}", broker.container or "") == "host"
        assert round_trip(broker.host, broker.port, qos=2).qos == 2


def test_limits_become_the_containers_cgroup(podman: Runtime, tmp_path: Path) -> None:
    launcher = get_launcher(f"image:{IMAGE}").configure(limits={"cpus": 0.25, "memory": 128 * 2**20})
    with launcher.start(tmp_path) as broker:
        assert broker.cgroup is not None
        if Path("/sys/fs/cgroup/cgroup.controllers").exists():
            assert _cgroup_file(broker.pid, "cpu", "cpu.max").split()[0] == "25000"
            assert _cgroup_file(broker.pid, "memory", "memory.max") == str(128 * 2**20)
        else:
            assert _cgroup_file(broker.pid, "cpu", "cpu.cfs_quota_us") == "25000"
            assert _cgroup_file(broker.pid, "memory", "memory.limit_in_bytes") == str(128 * 2**20)
        assert broker.to_dict()["limits"]["cpus"] == 0.25


def _run(out: Path, *extra: str, duration: str = "3s") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run(
        [sys.executable, "-m", "mqttlab", "run", "--broker", f"image:{IMAGE}", "--pubs", "20", "--subs", "20",
         "--rate", "500", "--duration", duration, "--warmup", "1s", "--set", "load.grace=1s", "--out", str(out),
         "--json", *extra],
        capture_output=True, text=True, timeout=180, env=env, cwd=ROOT,
    )


def test_a_container_runs_broker_line_shows_the_version_the_image_states(podman: Runtime, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    done = subprocess.run([sys.executable, "-m", "mqttlab", "run", "--broker", f"image:{VERSIONED}", "--pubs", "1", "--subs", "1",
                           "--rate", "10", "--duration", "2s", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("broker: ")]
    assert line.startswith("broker: mqttlab-test/eclipse-mosquitto 2.0.99, config tuned") and "sha256" not in line, line
    # The digest that names the image's content stays in the manifest.
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["broker"]["version"] == "mqttlab-test/eclipse-mosquitto 2.0.99"
    assert manifest["broker"]["config"]["container"]["digest"].startswith("sha256:")


def test_a_run_delivers_exactly_samples_the_container_and_a_cpu_cap_holds_it(podman: Runtime, tmp_path: Path) -> None:
    free = _run(tmp_path / "free", "--set", "publishers.qos=2")
    assert free.returncode == 0, free.stderr
    summary = json.loads(free.stdout)
    messages = summary["messages"]
    assert messages["expected"] > 5000 and messages["delivered"] == messages["expected"], messages
    assert messages["lost"] == messages["duplicated"] == messages["out_of_order"] == messages["unexpected"] == 0, messages
    manifest = json.loads((tmp_path / "free" / "manifest.json").read_text())
    assert manifest["broker"]["version"].startswith(f"{IMAGE}@sha256:")
    assert manifest["broker"]["config"]["container"]["runtime"] in ("podman", "docker")
    broker = summary["resources"]["broker"]
    assert broker["seconds"] >= 2 and broker["peak_rss_bytes"] > 1_000_000
    capped = _run(tmp_path / "capped", "--set", "launch.limits.cpus=0.05", "--set", "launch.limits.memory=256MiB")
    assert capped.returncode in (0, 1), capped.stderr
    capped_share = json.loads(capped.stdout)["resources"]["broker"]["mean_cpu_share"]
    limits = json.loads((tmp_path / "capped" / "manifest.json").read_text())["broker"]["limits"]
    # 20 x 20 clients at 10,000 msg/s take Mosquitto well above 0.05 of a core; held to it by the
    # container's quota it gets at most that (a little slack for the sampling's edges).
    assert broker["mean_cpu_share"] > 0.08, broker
    assert capped_share <= 0.05 * 1.3, capped_share
    assert limits["cpus"] == 0.05 and limits["memory_bytes"] == 256 * 2**20
    assert limits["throttled_periods"] > 0 and limits["oom_kills"] == 0
    names = [json.loads((tmp_path / run / "manifest.json").read_text())["broker"]["config"]["container"]["name"] for run in ("free", "capped")]
    assert not set(names) & set(_containers(podman))  # both containers removed at the end


def test_a_container_left_by_a_killed_mqttlab_is_removed_by_the_next_start(podman: Runtime, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    killed = subprocess.Popen(
        [sys.executable, "-m", "mqttlab", "run", "--broker", f"image:{IMAGE}", "--duration", "60s",
         "--out", str(tmp_path / "killed")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        left: list[str] = []
        while not left and time.monotonic() < deadline:
            time.sleep(0.2)
            owners = podman.call("ps", "--filter", f"label={OWNER_LABEL}", "--format",
                                 f'{{{{.Names}}}}|{{{{index .Labels "{OWNER_LABEL}"}}}}').split()
            left = [line.split("|")[0] for line in owners if line.split("|")[1].startswith(f"{killed.pid}:")]
        assert left, "the run's container never came up"
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    time.sleep(1)
    assert left[0] in _containers(podman), "nothing was left behind: the test would prove nothing"
    assert left[0] in remove_leftovers(podman)  # (with any other leftover on the host)
    assert left[0] not in _containers(podman)
    # A broker of this process is not a leftover.
    with get_launcher(f"image:{IMAGE}").start(tmp_path / "alive") as broker:
        assert broker.container not in remove_leftovers(podman) and broker.container in _containers(podman)


def test_unusable_images_and_runtimes_are_refused_in_one_line(podman: Runtime, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mqttlab", "run", "--duration", "1s", "--out", str(tmp_path / "x"), *args],
                              capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)

    unpullable = run("--broker", "image:localhost/mqttlab-test/absent:none", "--set", "launch.container.port=1883")
    # one line of reason (after the "starting …" line a broker's start prints when it takes a while)
    reasons = [line for line in unpullable.stderr.strip().splitlines() if not line.startswith("starting ")]
    assert unpullable.returncode == 3 and len(reasons) == 1
    assert "cannot pull localhost/mqttlab-test/absent:none" in unpullable.stderr and "load -i" in unpullable.stderr
    if shutil.which("docker") is None or subprocess.run(["docker", "version"], capture_output=True, timeout=30).returncode != 0:
        # A runtime asked for that does not answer (here: docker's client without its daemon).
        no_docker = run("--broker", f"image:{IMAGE}", "--set", "launch.container.runtime=docker")
        assert no_docker.returncode == 3 and len(no_docker.stderr.strip().splitlines()) == 1
        assert "launch.container.runtime: podman" in no_docker.stderr
    no_port = run("--broker", "image:localhost/mqttlab-test/absent:none")
    assert no_port.returncode == 2 and "launch.container.port" in no_port.stderr
    with pytest.raises(ScenarioError) as raised:
        validate_scenario({"broker": "mosquitto", "launch": {"container": {"runtime": "podman"}}})
    assert [p.path for p in raised.value.problems] == ["launch.container"]
    with pytest.raises(ScenarioError):
        validate_scenario({"broker": "image:Not A Reference"})
