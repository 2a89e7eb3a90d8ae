"""Broker child processes that never outlive mqttlab.

Two layers, because each covers a way of dying the other misses:
- PR_SET_PDEATHSIG: the kernel signals the child when mqttlab is killed outright (SIGKILL, crash).
- mqttlab.exit_cleanup: a normal exit, an uncaught exception, Ctrl-C or SIGTERM stops live children.

Children run in their own session so that a Ctrl-C in the terminal reaches mqttlab only; mqttlab
then stops them in order (a run must end its load before its broker goes away)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from collections.abc import Mapping, Sequence

from mqttlab.exit_cleanup import on_exit

_PR_SET_PDEATHSIG = 1
_live: dict[int, subprocess.Popen] = {}
_lock = threading.Lock()
_handlers_installed = False


# Looked up once in the parent: the child, between fork and exec, must not load libraries
# (another thread may have held the loader's lock at fork time).
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:
    # Runs in the child between fork and exec. The death signal fires when the *thread* that
    # forked exits, so `spawn` forks from the main thread or from one that lives as long as
    # the process (`_forker`).
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


_forker_pool: ThreadPoolExecutor | None = None


def _forker() -> ThreadPoolExecutor:
    """One thread, kept for the life of the process, that starts children for other threads (a
    broker restarted by a fault, from a thread that ends before the broker should)."""
    global _forker_pool
    with _lock:
        if _forker_pool is None:
            _forker_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mqttlab-forker")
        return _forker_pool


def _stop_all_live() -> None:
    with _lock:
        children = list(_live.values())
    for child in children:
        terminate(child)


def _install_handlers() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    on_exit(_stop_all_live)


def spawn(
    command: Sequence[str],
    *,
    log_file: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    detach: bool = False,
) -> subprocess.Popen:
    """Starts `command` with stdout and stderr appended to `log_file`.

    A detached child (for `mqttlab brokers start --detach`) is meant to outlive this process: it
    gets no death signal and is not stopped at exit."""
    if not detach and threading.current_thread() is not threading.main_thread():
        return _forker().submit(_spawn, command, log_file=log_file, cwd=cwd, env=env).result()
    return _spawn(command, log_file=log_file, cwd=cwd, env=env, detach=detach)


def _spawn(command: Sequence[str], *, log_file: Path, cwd: Path, env: Mapping[str, str] | None = None, detach: bool = False) -> subprocess.Popen:
    _install_handlers()
    child_env = dict(os.environ if env is None else env)
    with open(log_file, "ab") as log:
        child = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=None if detach else _die_with_parent,
        )
    if not detach:
        with _lock:
            _live[child.pid] = child
    return child


def _signal_group(pid: int, signum: int) -> None:
    # The child leads its own process group (start_new_session), so this also reaches helpers
    # it started itself, such as a JVM's or a launcher script's children.
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, signum)


def terminate(child: subprocess.Popen, grace_seconds: float = 10.0) -> int | None:
    """SIGTERM, wait up to `grace_seconds`, then SIGKILL. Returns the exit code."""
    return end(child, signal.SIGTERM, grace_seconds)


def end(child: subprocess.Popen, signum: int, grace_seconds: float = 10.0) -> int | None:
    """`signum` to the child's process group, wait up to `grace_seconds`, then SIGKILL. Returns
    the exit code."""
    try:
        if child.poll() is None:
            _signal_group(child.pid, signum)
            try:
                child.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                _signal_group(child.pid, signal.SIGKILL)
                child.wait(timeout=grace_seconds)
        else:
            # The leader is gone; make sure no helper of its group lingers.
            _signal_group(child.pid, signal.SIGKILL)
        return child.returncode
    finally:
        with _lock:
            _live.pop(child.pid, None)


def terminate_pid(pid: int, grace_seconds: float = 10.0) -> bool:
    """Stops a process we did not spawn in this run (a detached broker). True if it is gone."""
    import psutil

    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return True
    _signal_group(pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_seconds)
    except psutil.TimeoutExpired:
        _signal_group(pid, signal.SIGKILL)
        try:
            process.wait(timeout=grace_seconds)
        except psutil.TimeoutExpired:
            return False
    except psutil.NoSuchProcess:
        pass
    return True


def live_pids() -> list[int]:
    """PIDs of the children this process will stop at exit."""
    with _lock:
        return list(_live)


def log_tail(log_file: Path, lines: int = 20) -> str:
    try:
        text = log_file.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = text.strip().splitlines()[-lines:]
    return "\n".join(tail) if tail else "(empty log)"
