"""The live progress display on stderr: one refresh per engine progress snapshot.

On a terminal it redraws one small table in place; elsewhere (CI logs, pipes) it prints one line
per snapshot, so a log still shows how the run went."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, Mapping, Optional

from rich.console import Console
from rich.live import Live
from rich.table import Table

from mqttlab.live.state import format_seconds
from mqttlab.summary_text import ms

Progress = Optional[Mapping[str, Any]]  # RunState.progress(): elapsed_s, fraction, left_s, draining


def progress_text(progress: Progress) -> str:
    """For example `42% done, 12s left` (parts unknown yet are left out), or after the load
    `load done, waiting at most 2s for deliveries`; empty when nothing is known."""
    if not progress:
        return ""
    if progress.get("draining"):
        return f"load done, waiting at most {format_seconds(progress.get('left_s') or 0.0)} for deliveries"
    parts = []
    if progress.get("fraction") is not None:
        parts.append(f"{progress['fraction']:.0%} done")
    if progress.get("left_s") is not None:
        parts.append(f"{format_seconds(progress['left_s'])} left")
    return ", ".join(parts)


def back_pressure_text(snapshot: Mapping[str, Any]) -> str:
    """`broker back-pressure: 3 of 10 publishers' sockets full now` while the broker leaves some
    publishers' bytes unread (the engine's `connected.held_back`): the broker setting the pace,
    which a backlog of sends then is, not the generator's lateness. Empty otherwise."""
    connected = snapshot.get("connected") or {}
    held = int(connected.get("held_back") or 0)
    if not held:
        return ""
    return f"broker back-pressure: {held} of {connected.get('publishers', 0)} publishers' sockets full now"


def snapshot_line(snapshot: Mapping[str, Any], progress: Progress = None) -> str:
    connected = snapshot.get("connected") or {}
    total = snapshot.get("total") or {}
    interval = snapshot.get("interval") or {}
    done = progress_text(progress)
    return (
        f"[{snapshot.get('t_s', 0):6.1f}s] {snapshot.get('phase', '?'):<10} "
        + (f"{done}  " if done else "") +
        f"clients {connected.get('publishers', 0)}p/{connected.get('subscribers', 0)}s  "
        f"sent {interval.get('sent', 0)}/s acked {interval.get('acked', 0)}/s received {interval.get('received', 0)}/s  "
        f"e2e p50 {ms(interval.get('e2e_p50_us'))} p99 {ms(interval.get('e2e_p99_us'))} ms  "
        f"dropped {total.get('dropped', 0)} errors {total.get('errors', 0)}"
        + (f"  FAULT {snapshot['fault']}" if snapshot.get("fault") else "")
        + (f"  {held}" if (held := back_pressure_text(snapshot)) else "")
    )


def snapshot_table(snapshot: Mapping[str, Any], progress: Progress = None) -> Table:
    connected = snapshot.get("connected") or {}
    total = snapshot.get("total") or {}
    interval = snapshot.get("interval") or {}
    title = f"{snapshot.get('phase', '?')} · {snapshot.get('t_s', 0):.1f} s"
    done = progress_text(progress)
    if done:
        fraction = (progress or {}).get("fraction")
        bar = "" if fraction is None else " " + "█" * round(20 * fraction) + "░" * (20 - round(20 * fraction))
        title += f" ·{bar} {done}"
    if snapshot.get("fault"):
        title += f" · [bold red]fault: {snapshot['fault']}[/]"
    if held := back_pressure_text(snapshot):
        title += f" · [bold yellow]{held}[/]"
    table = Table(title=title, title_justify="left")
    for column in ("clients", "sent/s", "acked/s", "received/s", "e2e p50 ms", "e2e p99 ms", "dropped", "errors"):
        table.add_column(column, justify="right")
    errors = total.get("errors", 0)
    table.add_row(
        f"{connected.get('publishers', 0)}p / {connected.get('subscribers', 0)}s",
        f"{interval.get('sent', 0):,}",
        f"{interval.get('acked', 0):,}",
        f"{interval.get('received', 0):,}",
        ms(interval.get("e2e_p50_us")),
        ms(interval.get("e2e_p99_us")),
        f"{total.get('dropped', 0):,}",
        f"[bold red]{errors:,}[/]" if errors else "0",
    )
    return table


class LiveProgress:
    """Context manager; call it with each progress snapshot (a dict).

    Nothing is shown until the first client has connected, so a run against an unreachable
    broker ends with its one error line and no display around it. `header` is printed first."""

    def __init__(self, console: Console, header: str = "", state: Any = None) -> None:
        self.console = console
        self.enabled = True  # until the display fails
        self.header = header
        self.state = state  # a live.state.RunState, for progress toward the end and time left
        self._started = False
        self._live: Optional[Live] = None

    def __enter__(self) -> "LiveProgress":
        return self

    def _start(self) -> None:
        self._started = True
        if self.header:
            self.console.print(self.header, markup=False, highlight=False, style="dim")
        if self.console.is_terminal:
            self._live = Live(console=self.console, auto_refresh=False, transient=False)
            self._live.__enter__()

    def __call__(self, snapshot: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        connected = snapshot.get("connected") or {}
        if not self._started and not any(connected.values()):
            return
        try:
            if not self._started:
                self._start()
            progress = self.state.progress() if self.state is not None else None
            if self._live is not None:
                self._live.update(snapshot_table(snapshot, progress), refresh=True)
            else:
                self.console.print(snapshot_line(snapshot, progress), markup=False, highlight=False, soft_wrap=True)
        except Exception as error:  # noqa: BLE001
            # An exception here would stop the engine's run: the display is not worth a measurement.
            self.enabled = False
            self.console.print(f"(live display stopped: {error})", markup=False)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None


@contextmanager
def broker_starting(console: Console, name: str, quiet_for: float = 1.0) -> Iterator[None]:
    """While a launched broker starts (RabbitMQ: 14 s), a line that says so: on a terminal a
    spinner with the time so far; elsewhere one line once it has taken `quiet_for`. Then one
    line with the time it took."""
    started = time.monotonic()
    done = threading.Event()
    status = console.status(f"starting {name} …") if console.is_terminal else None

    def elapsed() -> str:
        return f"{time.monotonic() - started:.1f} s"

    def watch() -> None:
        if status is None:
            if not done.wait(quiet_for):
                console.print(f"starting {name} …", style="dim", highlight=False, markup=False)
            return
        while not done.wait(0.5):
            status.update(f"starting {name} … {elapsed()}")

    with status if status is not None else nullcontext():
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()
    console.print(f"{name} started in {elapsed()}", style="dim", highlight=False, markup=False)
