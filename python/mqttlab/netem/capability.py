"""What this machine can do for an emulated network: privileges, tools, and which qdiscs the kernel
has. The qdisc probes run in a throwaway namespace, so they never touch a real interface."""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import asdict, dataclass
from typing import Optional

from mqttlab.netem import commands, names

CAP_NET_ADMIN = 12


@dataclass(frozen=True)
class Capabilities:
    net_admin: bool
    ip: bool
    tc: bool
    tun: bool
    netem: bool
    tbf: bool
    nft: bool
    tshark: bool
    netem_error: Optional[str] = None

    def missing(self) -> Optional[str]:
        """One line naming what stops any emulated network here, or None when it can be built."""
        if not self.net_admin:
            return "network conditions need root or CAP_NET_ADMIN (run mqttlab as root, or grant it: setcap cap_net_admin+ep)"
        if not self.ip:
            return "network conditions need the `ip` command (Debian package iproute2)"
        if not self.tc:
            return "network conditions need the `tc` command (Debian package iproute2)"
        return None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def has_net_admin() -> bool:
    """CAP_NET_ADMIN in the effective set (root normally has it; a container may not)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_NET_ADMIN & 1)
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0


@functools.lru_cache(maxsize=1)
def detect() -> Capabilities:
    """Probed once per process."""
    net_admin = has_net_admin()
    ip, tc = shutil.which("ip") is not None, shutil.which("tc") is not None
    netem = tbf = False
    netem_error = None
    if net_admin and ip and tc:
        netem, netem_error = _probe_qdisc("netem delay 1ms")
        tbf, _ = _probe_qdisc("tbf rate 1mbit burst 4kb limit 10kb")
    return Capabilities(
        net_admin=net_admin,
        ip=ip,
        tc=tc,
        tun=os.path.exists("/dev/net/tun"),
        netem=netem,
        tbf=tbf,
        nft=shutil.which("nft") is not None,
        tshark=shutil.which("tshark") is not None,
        netem_error=netem_error,
    )


def _probe_qdisc(spec: str) -> tuple[bool, Optional[str]]:
    namespace = names.probe_namespace()
    try:
        commands.run(["ip", "netns", "add", namespace])
    except commands.NetemError as error:
        return False, str(error)
    try:
        commands.run(["ip", "link", "set", "lo", "up"], namespace=namespace)
        done = commands.run(["tc", "qdisc", "add", "dev", "lo", "root", *spec.split()], namespace=namespace, check=False)
        if done.returncode == 0:
            return True, None
        # "Specified qdisc kind is unknown." when the kernel lacks the module.
        return False, (done.stderr or done.stdout).strip() or f"exit code {done.returncode}"
    finally:
        commands.run(["ip", "netns", "del", namespace], check=False)
