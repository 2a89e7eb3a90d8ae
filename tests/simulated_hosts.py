"""Several "hosts" on this machine, for testing what only happens across machines.

Each host is a network namespace with its own address(es) on a bridge, and each process started
on it runs in its own UTS namespace (its own host name) and time namespace (its own
CLOCK_MONOTONIC, offset by a given number of seconds, as another machine's boot time would put
it). The bridge's own address is the lab's side: where the test, the mqttlab client and the Dask
scheduler run. The wall clock is shared, as NTP would keep real hosts' wall clocks close.

docs/distributed.md ("Several hosts on one machine") gives the same steps as shell commands.
Needs root (ip netns, unshare)."""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from mqttlab.brokers.base import Placement, free_ports, wait_until_listening
from mqttlab.netem import commands, names
from mqttlab.netem.network import wait_until_reachable

LAB_NET = ipaddress.ip_network("10.215.0.0/16")  # netem's links use 10.213/16 and 10.214/16
LAB_SIDE = 254  # the bridge's address in each /24: this machine's own side


def missing() -> Optional[str]:
    """Why simulated hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network, UTS and time namespaces)"
    for tool in ("ip", "unshare", "ss"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2, util-linux)"
    probe = subprocess.run(["unshare", "--time", "--monotonic", "1", "--fork", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"this kernel or unshare has no time namespaces: {probe.stderr.strip()}"
    return None


@dataclass
class Host:
    name: str
    namespace: str
    addresses: list[str]
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def address(self) -> str:
        return self.addresses[0]


class SimulatedHosts:
    """The bridge, the hosts on it and the processes started on them; `close()` ends all of it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        names.clean_leftovers()
        self.subnet = self._free_subnet()
        _, veth, _ = names.new_link_names()
        self.bridge = veth[:-1] + "b"  # mq<pid>-<n>b: removed by names.clean_leftovers once we are gone
        self.hosts: list[Host] = []
        self._links: list[str] = []
        self._next_address = 1
        self.scheduler: Optional[subprocess.Popen] = None
        commands.run(["ip", "link", "add", self.bridge, "type", "bridge"])
        commands.run(["ip", "addr", "add", f"{self.lab_address}/24", "dev", self.bridge])
        commands.run(["ip", "link", "set", self.bridge, "up"])

    def _free_subnet(self) -> ipaddress.IPv4Network:
        used = commands.run(["ip", "-4", "-o", "addr", "show"]).stdout
        for subnet in LAB_NET.subnets(new_prefix=24):
            if f" {subnet.network_address + LAB_SIDE}/" not in used:
                return subnet
        raise RuntimeError(f"no free /24 in {LAB_NET}")

    @property
    def lab_address(self) -> str:
        return str(self.subnet.network_address + LAB_SIDE)

    def _address(self) -> str:
        address = str(self.subnet.network_address + self._next_address)
        self._next_address += 1
        return address

    def add_host(self, name: str, *, addresses: int = 1) -> Host:
        """A namespace named for this process with `addresses` addresses on the bridge."""
        namespace, veth, _ = names.new_link_names()
        commands.run(["ip", "netns", "add", namespace])
        host = Host(name, namespace, [self._address() for _ in range(addresses)])
        self.hosts.append(host)
        commands.run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace])
        self._links.append(veth)
        commands.run(["ip", "link", "set", veth, "master", self.bridge, "up"])
        commands.run(["ip", "link", "set", "lo", "up"], namespace=namespace)
        for address in host.addresses:
            commands.run(["ip", "addr", "add", f"{address}/24", "dev", "eth0"], namespace=namespace)
        commands.run(["ip", "link", "set", "eth0", "up"], namespace=namespace)
        wait_until_reachable(host.address, what=f"simulated host {name}", timeout=10)
        return host

    @staticmethod
    def set_port_range(host: Host, low: int, high: int) -> None:
        """The host's ephemeral port range (a sysctl of each network namespace)."""
        commands.run(["sysctl", "-q", "-w", f"net.ipv4.ip_local_port_range={low} {high}"], namespace=host.namespace)

    def placement(self, host: Host) -> Placement:
        """Where a launched broker runs on `host`: reached at its address from the lab's side."""
        return Placement(command_prefix=("ip", "netns", "exec", host.namespace), listen_host="0.0.0.0", reach_host=host.address)

    def start_scheduler(self) -> str:
        (port,) = free_ports(1)  # free on loopback: free on the bridge's address as well
        log = open(self.workdir / "scheduler.log", "wb")
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", self.lab_address, "--port", str(port),
             "--dashboard-address", ":0"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        address = f"tcp://{self.lab_address}:{port}"
        wait_until_listening(self.lab_address, port, child=self.scheduler, timeout=30, name="dask scheduler")
        return address

    def start_worker(self, host: Host, scheduler: str, *, monotonic_offset_s: int, hostname: Optional[str] = None) -> subprocess.Popen:
        """A Dask worker (no nanny: killing it loses the host) on `host`, in a time namespace of its
        own whose CLOCK_MONOTONIC runs `monotonic_offset_s` (whole seconds, as unshare takes them) ahead of this machine's, answering to
        `hostname` (the host's name unless given)."""
        log = open(self.workdir / f"worker-{host.name}-{len(host.processes)}.log", "wb")
        worker = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nthreads", "1", "--no-nanny",
                  "--host", host.address, "--dashboard-address", ":0"]  # fmt: skip
        command = [
            "ip", "netns", "exec", host.namespace,
            "unshare", "--uts", "--time", f"--monotonic={int(monotonic_offset_s)}", "--fork", "--kill-child",
            "sh", "-c", 'hostname "$0" && exec "$@"', hostname or host.name, *worker,
        ]  # fmt: skip
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        host.processes.append(child)
        return child

    def close(self) -> None:
        for child in [p for h in self.hosts for p in h.processes] + ([self.scheduler] if self.scheduler else []):
            _end(child)
        for host in self.hosts:
            for pid in commands.run(["ip", "netns", "pids", host.namespace], check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)  # only what we started in our own namespace
                except (ProcessLookupError, ValueError):
                    pass
            commands.run(["ip", "netns", "del", host.namespace], check=False)
        for link in self._links:
            commands.run(["ip", "link", "del", link], check=False)
        commands.run(["ip", "link", "del", self.bridge], check=False)


def _end(child: subprocess.Popen) -> None:
    if child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait(timeout=10)
