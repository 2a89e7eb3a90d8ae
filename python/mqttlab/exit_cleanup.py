"""Clean-ups that run however mqttlab ends short of SIGKILL or a crash: atexit covers a normal
exit, an uncaught exception and Ctrl-C (KeyboardInterrupt); SIGTERM is turned into SystemExit so
that atexit runs for it too. Launched brokers and emulated networks register theirs here."""

from __future__ import annotations

import atexit
import signal
import threading
from collections.abc import Callable


def on_exit(cleanup: Callable[[], None]) -> None:
    """Runs `cleanup` when mqttlab exits, also on SIGTERM. Register once per clean-up."""
    atexit.register(cleanup)
    # Only the main thread may set handlers, and a handler someone else installed stays theirs.
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
