"""mqttlab's exit codes, for every command (also in docs/results.md), and how a run's summary maps
to one."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class Exit(IntEnum):
    OK = 0
    FINDINGS = 1  # completed with violations, losses or failed connections (a suite: some runs failed)
    BAD_INPUT = 2
    UNREACHABLE = 3  # broker unreachable or not startable before any load
    ABNORMAL = 4  # run ended abnormally (broker lost); partial results written
    INTERRUPTED = 130  # Ctrl-C; partial results written


class RunFailed(Exception):
    """A run that could not be made, or whose results could not be kept: a one-line reason and
    the exit code it means."""

    def __init__(self, message: str, code: Exit) -> None:
        super().__init__(message)
        self.code = code


class LoadRefused(RunFailed):
    """The load's clients could not connect: the broker refused or reset their connections (or,
    given by URL, is not there). A broker mqttlab launched was up and answering before the load,
    so from one it is the broker's own refusal, a limit a capacity search can find."""

    def __init__(self, message: str, kind: str = "io", reason: str | None = None) -> None:
        super().__init__(message, Exit.UNREACHABLE)
        self.kind = kind  # the engine's name for why (engine.ConnectFailure.kind)
        self.reason = reason or message  # why alone, without the address (engine.BrokerUnreachable.reason)


class HostLimitReached(RunFailed):
    """This host cannot give the run what it needs (open files for all its connections), found
    before anything starts: the generator's limit here, not the broker's."""

    def __init__(self, message: str) -> None:
        super().__init__(message, Exit.UNREACHABLE)


def exit_code_for(summary: dict[str, Any]) -> Exit:
    status = summary.get("status")
    if status == "interrupted":
        return Exit.INTERRUPTED
    if status != "completed":
        return Exit.ABNORMAL
    messages = summary.get("messages") or {}
    connections = summary.get("connections") or {}
    # `connections` also holds `lost` (a count): only the two roles have failed connects.
    failed_connections = sum((connections.get(role) or {}).get("failed", 0) for role in ("publishers", "subscribers"))
    broken_promise = any(v.get("verdict") == "broken" for v in summary.get("promises") or [])
    if summary.get("violations") or messages.get("lost") or failed_connections or broken_promise or nothing_owed(summary):
        return Exit.FINDINGS
    return Exit.OK


def nothing_owed(summary: dict[str, Any]) -> bool:
    """A run with publishers and subscribers in which no subscriber was owed any message."""
    routing = summary.get("routing") or {}
    return bool(
        routing.get("publishers")
        and routing.get("subscribers")
        and not routing.get("unknown")
        and routing.get("unmatched_publishers") == routing.get("publishers")
    )
