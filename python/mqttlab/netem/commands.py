"""Running `ip` and `tc`, in the host's or in a named network namespace, with errors that say which
command failed and why."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Optional


class NetemError(Exception):
    """The emulated network could not be set up or used; the message says what failed."""


def in_namespace(namespace: Optional[str], command: Sequence[str]) -> list[str]:
    """`command` run inside `namespace` (None = the current one)."""
    return ["ip", "netns", "exec", namespace, *command] if namespace else list(command)


def run(command: Sequence[str], *, namespace: Optional[str] = None, check: bool = True, timeout: float = 15.0) -> subprocess.CompletedProcess[str]:
    full = in_namespace(namespace, command)
    try:
        done = subprocess.run(full, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NetemError(f"`{' '.join(full)}` failed: {error}") from None
    if check and done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise NetemError(f"`{' '.join(full)}` failed: {reason[-1] if reason else f'exit code {done.returncode}'}")
    return done
