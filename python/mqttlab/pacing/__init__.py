"""Pacing modes: how the publishers space their sends (publishers.arrival). Each mode owns, in its
own module, whether it follows a schedule, its rules on a scenario, its words in the summary and
the CLI's help, its part of a run's name and the plan keys it alone sets; MODES registers them by
the arrival name, and callers ask the registry instead of comparing names.

A new mode is its module, its line in MODES, the Literal of publishers.arrival in
scenario/model.py (pydantic and mypy need it written out; tests/test_pacing_modes.py checks it
against MODES) and the engine's side: its schema and plan_types.Arrival, checked against it.

Pacing sits below scenario/, which asks it for its rules, and imports nothing of mqttlab outside itself."""

from __future__ import annotations

from typing import Optional

from mqttlab.pacing import closed_loop, open_loop, window
from mqttlab.pacing.mode import LoadSettings, PacingMode, PacingProblem, PublisherSettings

#: every mode by the value of publishers.arrival that chooses it
MODES: dict[str, PacingMode] = {mode.arrival: mode for mode in (open_loop.CONSTANT, open_loop.POISSON, closed_loop.MODE, window.MODE)}
DEFAULT = "constant"
#: the arrivals that follow a schedule, in words: "constant or poisson"
SCHEDULED = " or ".join(name for name, mode in MODES.items() if mode.scheduled)

__all__ = ["DEFAULT", "MODES", "SCHEDULED", "PacingMode", "PacingProblem", "arrival_help", "measured", "mode_of", "scenario_problems"]


def mode_of(arrival: Optional[str]) -> PacingMode:
    """The mode a publishers.arrival names; none (a plan or scenario written without it) is the default."""
    return MODES[arrival or DEFAULT]


def measured(pacing: Optional[str]) -> PacingMode:
    """The mode behind a summary's measurement.pacing ("open", "closed", "window"); open loop
    when the summary says none."""
    return next((mode for mode in MODES.values() if mode.measured_as == pacing), MODES[DEFAULT])


def scenario_problems(publishers: PublisherSettings, load: LoadSettings) -> list[PacingProblem]:
    """Every pacing rule on a scenario, in the order the listing has always had: the closed loop's
    pause given to another mode, the chosen mode's own rules, a rate given to a mode without a
    schedule."""
    mode = mode_of(publishers.arrival)
    return [*closed_loop.unused_think_time(publishers, mode), *mode.problems(publishers, load), *_unused_rate(publishers, mode)]


def _unused_rate(publishers: PublisherSettings, mode: PacingMode) -> list[PacingProblem]:
    if mode.scheduled or "rate" not in publishers.model_fields_set:
        return []
    return [PacingProblem(
        "publishers.rate",
        f"is not used with publishers.arrival: {mode.arrival} ({mode.message_goes}); "
        f"leave it out (on the command line: --set publishers.rate=null), or use arrival: {SCHEDULED}",
        ("publishers.arrival",),
    )]


def arrival_help() -> str:
    """The CLI's --arrival help: the scheduled modes, then when each other one sends."""
    unscheduled = [mode for mode in MODES.values() if not mode.scheduled]
    return (f"Send schedule: {SCHEDULED}; " + "; ".join(f"{mode.arrival} = {mode.sends_when}" for mode in unscheduled)
            + f" ({' and '.join(mode.arrival for mode in unscheduled)} drop the file's rate).")
