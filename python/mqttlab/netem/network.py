"""The emulated network of one run: the broker's namespace, the veth pair that joins it to the
clients (this host's namespace), the qdiscs or the user-space emulator that impose the conditions,
and the teardown of all of it.

    with EmulatedNetwork(conditions, workdir) as net:
        launcher.placement = net.placement()
        ... clients connect to net.broker_address ...
        net.counters()

Layout (addresses come from 10.213.0.0/16 and 10.214.0.0/16, only on these interfaces):

    host ns  mq<pid>-<n>v 10.213.k.1/30  ──veth──  veth-b 10.213.k.2/30   broker ns mqttlab-<pid>-<n>
             mq<pid>-<n>t 10.214.k.1     ──TUN ⇄ emulator ⇄ TUN──  tun-b 10.214.k.2   (emulator only)

With netem or tbf the qdiscs sit on the two veth ends (host end = up, broker end = down) and clients
use the veth address. With the emulator, clients use the TUN address and the veth stays a clean
control path (the broker's readiness probe)."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

from mqttlab.brokers.base import Placement
from mqttlab.exit_cleanup import on_exit
from mqttlab.netem import capability, commands, names, shaping
from mqttlab.netem.commands import NetemError
from mqttlab.scenario.network import NetworkConditions

BROKER_VETH = "veth-b"
BROKER_TUN = "tun-b"
VETH_NET = ipaddress.ip_network("10.213.0.0/16")
TUN_NET = ipaddress.ip_network("10.214.0.0/16")
EMULATOR_START_TIMEOUT = 10.0

_open_networks: "set[EmulatedNetwork]" = set()
_guard = threading.Lock()
_handlers_installed = False


def _close_all() -> None:
    for net in list(_open_networks):
        net.close()


def _install_exit_handlers() -> None:
    # A crash or SIGKILL leaves names that names.clean_leftovers removes next time.
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    on_exit(_close_all)


def _free_subnet_index(seed: str) -> int:
    """A /30 index (0..16383) whose addresses no interface of this host uses yet."""
    used = {line.split()[3].split("/")[0] for line in commands.run(["ip", "-4", "-o", "addr", "show"]).stdout.splitlines()}
    start = int(hashlib.sha256(seed.encode()).hexdigest(), 16) % 16384
    for step in range(16384):
        k = (start + step) % 16384
        if str(VETH_NET[4 * k + 1]) not in used and str(TUN_NET[4 * k + 1]) not in used:
            return k
    raise NetemError("no free address block in 10.213.0.0/16")


class EmulatedNetwork:
    def __init__(self, conditions: NetworkConditions, workdir: Path, *, seed: int = 1) -> None:
        self.conditions = conditions
        self.workdir = Path(workdir).resolve()
        self.seed = seed
        self.namespace, self.host_veth, self.host_tun = names.new_link_names()
        self.method = "none"
        self.capabilities: Optional[capability.Capabilities] = None
        self.removed_leftovers: list[str] = []
        self._emulator: Any = None
        self._created: list[str] = []  # what close() must remove, in creation order
        k = _free_subnet_index(self.namespace) if conditions is not None else 0
        self.client_veth_address = str(VETH_NET[4 * k + 1])
        self.control_address = str(VETH_NET[4 * k + 2])
        self.client_tun_address = str(TUN_NET[4 * k + 1])
        self.tun_address = str(TUN_NET[4 * k + 2])
        self._started = False

    # -- what the rest of mqttlab uses -------------------------------------------------------

    @property
    def broker_address(self) -> str:
        """Where clients reach the broker through the emulated conditions."""
        return self.tun_address if self.method == "emulator" else self.control_address

    @property
    def client_address(self) -> str:
        return self.client_tun_address if self.method == "emulator" else self.client_veth_address

    def placement(self) -> Placement:
        """Where a broker launcher runs the broker: in the namespace, on all its addresses."""
        return Placement(command_prefix=("ip", "netns", "exec", self.namespace), listen_host="0.0.0.0",
                         reach_host=self.control_address, client_hosts=(self.broker_address,))

    def counters(self) -> dict[str, Any]:
        """Bytes and packets each way so far. `up` = clients → broker. `ip_bytes` excludes any
        link-layer header; `packets` are what the sending side handed to the link (dropped ones
        included); `delivered_packets` what came out of it."""
        if self.method == "emulator":
            emulated = self.emulator_counters() or {}
            out: dict[str, Any] = {}
            for direction in ("up", "down"):
                c = emulated.get(direction) or {}
                out[direction] = {
                    "packets": c.get("packets_in", 0),
                    "ip_bytes": c.get("bytes_in", 0),
                    "delivered_packets": c.get("packets_out", 0),
                    "delivered_ip_bytes": c.get("bytes_out", 0),
                    "lost": c.get("lost", 0),
                    "queue_dropped": c.get("queue_dropped", 0),
                    "partitioned": c.get("partitioned", 0),
                }
            return out
        host = _device_stats(self.host_veth, None)
        broker = _device_stats(BROKER_VETH, self.namespace)
        # veth byte counts include the 14-byte Ethernet header of every frame.
        def ip_bytes(stats: dict[str, int], kind: str) -> int:
            return stats[f"{kind}_bytes"] - shaping.ETHERNET_HEADER * stats[f"{kind}_packets"]

        return {
            "up": {"packets": host["tx_packets"] + host["tx_dropped"], "ip_bytes": ip_bytes(host, "tx"),
                   "delivered_packets": broker["rx_packets"], "delivered_ip_bytes": ip_bytes(broker, "rx"),
                   "queue_dropped": host["tx_dropped"]},
            "down": {"packets": broker["tx_packets"] + broker["tx_dropped"], "ip_bytes": ip_bytes(broker, "tx"),
                     "delivered_packets": host["rx_packets"], "delivered_ip_bytes": ip_bytes(host, "rx"),
                     "queue_dropped": broker["tx_dropped"]},
        }  # fmt: skip

    def emulator_counters(self, fresh: bool = True) -> Optional[dict[str, Any]]:
        """The emulator's own counters; `fresh` waits for a write that is newer than this call
        (the emulator writes every 100 ms)."""
        path = self.workdir / "link-counters.json"
        asked = time.time()
        deadline = time.monotonic() + 0.5
        while fresh and time.monotonic() < deadline:
            try:
                if path.stat().st_mtime > asked:
                    break
            except OSError:
                break
            time.sleep(0.02)
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def describe(self) -> dict[str, Any]:
        """The link for a results manifest: what was asked and how it was built."""
        return {
            "requested": self.conditions.model_dump(mode="json", exclude_none=True),
            "method": self.method,
            "namespace": self.namespace,
            "broker_address": self.broker_address,
            "client_address": self.client_address,
            "directions": {d: _direction_dict(self.conditions.direction(d)) for d in ("up", "down")},
            "kernel_netem": bool(self.capabilities and self.capabilities.netem),
            "netem_error": self.capabilities.netem_error if self.capabilities else None,
        }

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "EmulatedNetwork":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        caps = capability.detect()
        self.capabilities = caps
        missing = caps.missing()
        if missing:
            raise NetemError(missing)
        self.removed_leftovers = names.clean_leftovers()
        self.method = shaping.choose_method(self.conditions, caps)
        if self.method == "emulator" and not caps.tun:
            raise NetemError("the user-space emulator needs /dev/net/tun (modprobe tun)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        _install_exit_handlers()
        with _guard:
            _open_networks.add(self)
        self._started = True
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        ns = self.namespace
        commands.run(["ip", "netns", "add", ns])
        self._created.append("namespace")
        commands.run(["ip", "link", "set", "lo", "up"], namespace=ns)
        commands.run(["ip", "link", "add", self.host_veth, "type", "veth", "peer", "name", BROKER_VETH, "netns", ns])
        self._created.append("veth")
        for device, namespace, address in ((self.host_veth, None, self.client_veth_address), (BROKER_VETH, ns, self.control_address)):
            commands.run(["ip", "addr", "add", f"{address}/30", "dev", device], namespace=namespace)
            # One TCP segment per packet, as on a real wire, so packet counters mean segments.
            commands.run(["ip", "link", "set", "dev", device, "gso_max_segs", "1", "up"], namespace=namespace)
        for direction, device, namespace in (("up", self.host_veth, None), ("down", BROKER_VETH, ns)):
            args = shaping.qdisc_args(self.method, self.conditions.direction(direction))  # type: ignore[arg-type]
            if args:
                commands.run(["tc", "qdisc", "replace", "dev", device, "root", *args], namespace=namespace)
        if self.method == "emulator":
            self._build_emulator()
        wait_until_reachable(self.control_address, what="the broker namespace")

    def _build_emulator(self) -> None:
        ns = self.namespace
        commands.run(["ip", "tuntap", "add", "dev", self.host_tun, "mode", "tun"])
        self._created.append("tun")
        commands.run(["ip", "tuntap", "add", "dev", BROKER_TUN, "mode", "tun"], namespace=ns)
        for device, namespace, local, peer in ((self.host_tun, None, self.client_tun_address, self.tun_address),
                                               (BROKER_TUN, ns, self.tun_address, self.client_tun_address)):
            commands.run(["ip", "addr", "add", local, "peer", f"{peer}/32", "dev", device], namespace=namespace)
            commands.run(["ip", "link", "set", "dev", device, "mtu", str(shaping.MTU), "up"], namespace=namespace)
        counters_path = self.workdir / "link-counters.json"
        counters_path.unlink(missing_ok=True)
        config = {
            "a": {"netns": None, "device": self.host_tun},
            "b": {"netns": f"/run/netns/{ns}", "device": BROKER_TUN},
            "up": shaping.emulator_direction(self.conditions.direction("up"), self.conditions.reorder),
            "down": shaping.emulator_direction(self.conditions.direction("down"), self.conditions.reorder),
            "seed": self.seed,
            "counters_path": str(counters_path),
            "partition_path": str(self.workdir / "partition"),
            "degrade_path": str(self.workdir / "degrade.json"),
        }
        config_path = self.workdir / "link.json"
        config_path.write_text(json.dumps(config, indent=2))
        from mqttlab.brokers import process

        log = self.workdir / "link.log"
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        self._emulator = process.spawn([sys.executable, "-m", "mqttlab.netem.link", str(config_path)], log_file=log, cwd=self.workdir, env=env)
        deadline = time.monotonic() + EMULATOR_START_TIMEOUT
        while not counters_path.exists():
            if self._emulator.poll() is not None or time.monotonic() > deadline:
                raise NetemError(f"the user-space link emulator did not start:\n{process.log_tail(log)}")
            time.sleep(0.02)

    def cut(self, partitioned: bool) -> None:
        """Cuts the link between clients and broker (every packet dropped, in both directions and
        already on its way) or mends it; the emulator applies it within 10 ms."""
        if self.method != "emulator":
            raise NetemError(f"a link partition needs the user-space link emulator (this link uses {self.method})")
        switch = self.workdir / "partition"
        if partitioned:
            switch.touch()
        else:
            switch.unlink(missing_ok=True)

    def degrade(self, conditions: Optional[NetworkConditions]) -> None:
        """Runs the link under `conditions` from now on (None: its own again); the emulator
        applies them within 10 ms, to packets that arrive from then on."""
        if self.method != "emulator":
            raise NetemError(f"changing the link mid-run needs the user-space link emulator (this link uses {self.method})")
        switch = self.workdir / "degrade.json"
        if conditions is None:
            switch.unlink(missing_ok=True)
            return
        both = {name: shaping.emulator_direction(conditions.direction(name), conditions.reorder) for name in ("up", "down")}
        partial = switch.with_suffix(".partial")
        partial.write_text(json.dumps(both))
        partial.replace(switch)

    def emulator_pid(self) -> Optional[int]:
        return self._emulator.pid if self._emulator is not None else None

    def close(self) -> None:
        """Removes everything this network created; safe to call twice and from atexit."""
        if not self._started:
            return
        self._started = False
        if self._emulator is not None:
            from mqttlab.brokers import process

            process.terminate(self._emulator, grace_seconds=5)
        if "tun" in self._created:
            commands.run(["ip", "link", "del", self.host_tun], check=False)
        if "veth" in self._created:
            # Deleting the namespace would remove the pair too, but only later, asynchronously.
            commands.run(["ip", "link", "del", self.host_veth], check=False)
        if "namespace" in self._created:
            commands.run(["ip", "netns", "del", self.namespace], check=False)
        self._created.clear()
        with _guard:
            _open_networks.discard(self)


def _direction_dict(d: Any) -> dict[str, Any]:
    return {"delay_s": d.delay, "jitter_s": d.jitter, "loss": d.loss, "rate_bps": d.rate, "queue_bytes": d.queue_bytes()}


def _device_stats(device: str, namespace: Optional[str]) -> dict[str, int]:
    prefix = ["ip", "-n", namespace] if namespace else ["ip"]
    done = commands.run([*prefix, "-s", "-j", "link", "show", "dev", device])
    stats = json.loads(done.stdout)[0]["stats64"]
    return {f"{kind}_{key}": int(stats[kind][key]) for kind in ("rx", "tx") for key in ("bytes", "packets", "dropped")}


def wait_until_reachable(address: str, *, what: str, timeout: float = 5.0) -> None:
    # A fresh veth needs a moment (duplicate address detection, carrier) before it passes packets.
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            try:
                s.connect((address, 9))  # nothing listens: a refusal proves the path works
                return
            except ConnectionRefusedError:
                return
            except OSError:
                time.sleep(0.05)
    raise NetemError(f"{what} does not answer at {address} after setting it up")
