"""Brokers on constrained hosts: a cgroup that caps a launched broker's CPU and memory.

Seed 004 ran its broker on 1 vCPU and 1 GiB; `launch.limits: {cpus: 1, memory: 1GiB}` gives a
launched broker the same box on any machine. The broker's whole process tree runs in one cgroup
(v2 where the unified hierarchy has the controllers, else v1's cpu, cpuset and memory
hierarchies): `cpus` is a CFS quota in cores (fractions allowed), `cpuset` pins it to CPUs,
`memory` is a hard limit. After the run the cgroup's own counters tell whether the limit bit:
periods throttled, seconds throttled, OOM kills and times the memory limit was hit.

The broker joins the cgroup before it executes: its command is prefixed with a tiny shell that
writes its own PID into the cgroup and then `exec`s the broker, so no broker thread ever runs
outside it (a PID moved in after the start could have forked already)."""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from mqttlab.brokers.errors import BrokerError

CGROUP_ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000


@dataclass(frozen=True)
class BrokerLimits:
    cpus: float | None = None  # cores of CPU time per wall second (CFS quota)
    cpuset: str | None = None  # CPUs the broker may run on, e.g. "0" or "0-1"
    memory: int | None = None  # bytes

    def is_empty(self) -> bool:
        return self.cpus is None and self.cpuset is None and self.memory is None

    def to_dict(self) -> dict[str, object]:
        return {"cpus": self.cpus, "cpuset": self.cpuset, "memory_bytes": self.memory}


class CgroupError(BrokerError):
    """The limits cannot be applied here (no cgroup controller, no permission); says why."""


def _own_cgroup(controller: str | None) -> str:
    """This process's cgroup path in a v1 hierarchy (`controller`) or in v2 (None)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if controller is None and number == "0":
            return path
        if controller is not None and controller in controllers.split(","):
            return path
    return "/"


def _v2_root() -> Path | None:
    """The unified hierarchy's mount point, when it offers the cpu and memory controllers."""
    for candidate in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        controllers = candidate / "cgroup.controllers"
        if controllers.is_file() and {"cpu", "memory"} <= set(controllers.read_text().split()):
            return candidate
    return None


class BrokerCgroup:
    """One broker's cgroup: created with its limits, joined by the broker's command, read for
    throttling and OOM counters, removed when the broker is gone."""

    def __init__(self, limits: BrokerLimits, name: str) -> None:
        self.limits = limits
        self.name = f"mqttlab-{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
        self.version: int = 2
        self.paths: dict[str, Path] = {}
        self.owned = True  # created here, so removed here
        self.final: dict[str, object] | None = None  # the counters as read just before removal
        try:
            self._create()
        except OSError as exc:
            self.remove()
            raise CgroupError(f"broker limits need a writable cgroup ({exc.strerror or exc}: {exc.filename}); "
                              "run as root on a host with cgroup v1 or v2 cpu and memory controllers") from None

    @classmethod
    def of_process(cls, limits: BrokerLimits, pid: int) -> BrokerCgroup:
        """The cgroup another manager (a container runtime) put `pid` in with `limits`: read for
        its counters like ours, left for that manager to remove."""
        cgroup = cls.__new__(cls)
        cgroup.limits, cgroup.name, cgroup.owned, cgroup.paths, cgroup.final = limits, f"pid-{pid}", False, {}, None
        lines = [line.split(":", 2) for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()]
        root = _v2_root()
        if root is not None:
            cgroup.version = 2
            cgroup.paths["unified"] = root / next(path for number, _, path in lines if number == "0").lstrip("/")
            return cgroup
        cgroup.version = 1
        for _, controllers, path in lines:
            for controller in ("cpu", "memory", "cpuset"):
                if controller in controllers.split(","):
                    cgroup.paths[controller] = CGROUP_ROOT / controller / path.lstrip("/")
        return cgroup

    # -- creation -----------------------------------------------------------------------

    def _create(self) -> None:
        root = _v2_root()
        if root is not None:
            self._create_v2(root)
        elif (CGROUP_ROOT / "cpu").is_dir() and (CGROUP_ROOT / "memory").is_dir():
            self._create_v1()
        else:
            raise CgroupError("no cgroup cpu and memory controllers are mounted under /sys/fs/cgroup")

    def _create_v2(self, root: Path) -> None:
        self.version = 2
        parent = root / _own_cgroup(None).lstrip("/")
        # A v2 cgroup hands controllers to its children only through subtree_control, and only a
        # cgroup without processes of its own may do so: ours is created beside this process.
        (parent / "cgroup.subtree_control").write_text("+cpu +memory +cpuset")
        path = parent / self.name
        path.mkdir()
        self.paths["unified"] = path
        if self.limits.cpus is not None:
            quota = max(1000, int(self.limits.cpus * CFS_PERIOD_US))
            (path / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
        if self.limits.cpuset is not None:
            (path / "cpuset.cpus").write_text(self.limits.cpuset)
        if self.limits.memory is not None:
            (path / "memory.max").write_text(str(self.limits.memory))
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")

    def _create_v1(self) -> None:
        self.version = 1
        controllers = ["cpu", "memory"] + (["cpuset"] if self.limits.cpuset is not None else [])
        for controller in controllers:
            path = CGROUP_ROOT / controller / _own_cgroup(controller).lstrip("/") / self.name
            path.mkdir()
            self.paths[controller] = path
        if self.limits.cpus is not None:
            (self.paths["cpu"] / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (self.paths["cpu"] / "cpu.cfs_quota_us").write_text(str(max(1000, int(self.limits.cpus * CFS_PERIOD_US))))
        if self.limits.cpuset is not None:
            cpuset = self.paths["cpuset"]
            # A v1 cpuset takes no task until both its CPUs and its memory nodes are set.
            (cpuset / "cpuset.mems").write_text((cpuset.parent / "cpuset.mems").read_text().strip())
            (cpuset / "cpuset.cpus").write_text(self.limits.cpuset)
        if self.limits.memory is not None:
            memory = self.paths["memory"]
            (memory / "memory.limit_in_bytes").write_text(str(self.limits.memory))
            if (memory / "memory.memsw.limit_in_bytes").exists():
                # Without it the kernel would swap the broker out instead of holding it to the limit.
                (memory / "memory.memsw.limit_in_bytes").write_text(str(self.limits.memory))

    # -- joining ------------------------------------------------------------------------

    def wrap(self, command: list[str]) -> list[str]:
        """`command` prefixed so that it runs inside the cgroup from its first instruction."""
        procs = " ".join(shlex.quote(str(path / "cgroup.procs")) for path in self.paths.values())
        script = f'for f in {procs}; do echo $$ > "$f" || exit 97; done; exec "$@"'
        return ["/bin/sh", "-c", script, "mqttlab-cgroup", *command]

    # -- reading ------------------------------------------------------------------------

    def _read(self, key: str, name: str) -> str:
        try:
            return (self.paths[key] / name).read_text()
        except (KeyError, OSError):
            return ""

    @staticmethod
    def _fields(text: str) -> dict[str, int]:
        fields = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                fields[parts[0]] = int(parts[1])
        return fields

    def outcome(self) -> dict[str, object]:
        """The limits and what they did: throttling and memory events so far; once the cgroup is
        removed, as they were just before (a manifest written after the broker stopped still has
        its whole run, not the empty reading of a cgroup that is gone)."""
        if not self.paths and self.final is not None:
            return dict(self.final)
        result: dict[str, object] = {"cgroup": f"v{self.version}", **self.limits.to_dict()}
        if self.version == 2:
            cpu = self._fields(self._read("unified", "cpu.stat"))
            events = self._fields(self._read("unified", "memory.events"))
            peak = self._read("unified", "memory.peak").strip()
            result.update(
                throttled_periods=cpu.get("nr_throttled"),
                periods=cpu.get("nr_periods"),
                throttled_seconds=(cpu["throttled_usec"] / 1e6) if "throttled_usec" in cpu else None,
                cpu_seconds=(cpu["usage_usec"] / 1e6) if "usage_usec" in cpu else None,
                memory_limit_hits=events.get("max"),
                oom_kills=events.get("oom_kill"),
                memory_peak_bytes=int(peak) if peak.isdigit() else None,
            )
        else:
            cpu = self._fields(self._read("cpu", "cpu.stat"))
            oom = self._fields(self._read("memory", "memory.oom_control"))
            failcnt = self._read("memory", "memory.failcnt").strip()
            peak = self._read("memory", "memory.max_usage_in_bytes").strip()
            result.update(
                throttled_periods=cpu.get("nr_throttled"),
                periods=cpu.get("nr_periods"),
                throttled_seconds=(cpu["throttled_time"] / 1e9) if "throttled_time" in cpu else None,
                memory_limit_hits=int(failcnt) if failcnt.isdigit() else None,
                oom_kills=oom.get("oom_kill"),
                memory_peak_bytes=int(peak) if peak.isdigit() else None,
            )
        return result

    def remove(self) -> None:
        """Removes the cgroup once its processes are gone (a cgroup with tasks cannot be removed),
        keeping its last counters for `outcome`."""
        if self.paths:
            self.final = self.outcome()
        if not self.owned:
            self.paths = {}
            return
        for path in self.paths.values():
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        self.paths = {}
