"""Names of everything mqttlab creates in the kernel, and the cleanup of what a crashed run left.

Every name carries the PID of the process that owns it: `mqttlab-<pid>-<n>` for namespaces and
`mq<pid>-<n><kind>` for host-side interfaces (15 characters at most). A later start removes the
ones whose owner is dead, and never touches those of a live process (another run in parallel)."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

from mqttlab.netem import commands

NAMESPACE_PREFIX = "mqttlab-"
_NAMESPACE = re.compile(r"mqttlab-(\d+)-(\w+)")
_INTERFACE = re.compile(r"mq(\d+)-(\d+)[a-z]")
_counter = itertools.count()


def new_link_names() -> tuple[str, str, str]:
    """(namespace, host veth, host TUN) for a new link of this process."""
    n = next(_counter)
    pid = os.getpid()
    return f"{NAMESPACE_PREFIX}{pid}-{n}", f"mq{pid}-{n}v", f"mq{pid}-{n}t"


def probe_namespace() -> str:
    return f"{NAMESPACE_PREFIX}{os.getpid()}-probe{next(_counter)}"


def _owner_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def namespaces() -> list[str]:
    done = commands.run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def host_interfaces() -> list[str]:
    return sorted(p.name for p in Path("/sys/class/net").iterdir())


def leftovers() -> tuple[list[str], list[str]]:
    """(namespaces, host interfaces) made by processes that are gone."""
    stale_ns = [ns for ns in namespaces() if (m := _NAMESPACE.fullmatch(ns)) and not _owner_alive(int(m.group(1)))]
    stale_if = [i for i in host_interfaces() if (m := _INTERFACE.fullmatch(i)) and not _owner_alive(int(m.group(1)))]
    return stale_ns, stale_if


def clean_leftovers() -> list[str]:
    """Removes what crashed runs left behind; returns the names removed."""
    stale_ns, stale_if = leftovers()
    for interface in stale_if:
        commands.run(["ip", "link", "del", interface], check=False)
    for namespace in stale_ns:
        commands.run(["ip", "netns", "del", namespace], check=False)
    return stale_if + stale_ns
