"""Closed loop (arrival: closed): each publisher sends its next message when the previous one
completed (publishers.complete_on: its PUBACK/PUBCOMP, or its delivery too), plus
publishers.think_time. Nothing is offered in advance, so latency is taken from the actual send."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from mqttlab.pacing.mode import LoadSettings, PacingMode, PacingProblem, PublisherSettings


class ClosedLoop(PacingMode):
    arrival = "closed"
    scheduled = False
    measured_as = "closed"
    sends_when = "the next send when the previous completed"
    message_goes = "the next message goes when the previous one completed"

    def problems(self, publishers: PublisherSettings, load: LoadSettings) -> list[PacingProblem]:
        if load.grace <= 0:
            return [PacingProblem("load.grace", "must be > 0 with publishers.arrival: closed (a message not complete within it is given up)",
                                  ("publishers.arrival",))]
        return []

    def pace_words(self, publishers: Mapping[str, Any]) -> str:
        return ", closed loop"

    def measurement_words(self, measurement: Mapping[str, Any]) -> str:
        think = measurement.get("think_s") or 0
        return (
            f"closed loop: each message sent when the previous one's {measurement.get('complete_on')} came"
            + (f", plus {think:g} s" if think else "")
            + "; latency from the actual send"
        )

    def plan_keys(self, publishers: PublisherSettings) -> dict[str, Any]:
        return {"think_us": round(publishers.think_time * 1e6), "complete_on": publishers.complete_on}

    def single_process_problem(self, publishers: PublisherSettings) -> Optional[str]:
        if publishers.complete_on == "delivery":
            return "publishers.complete_on: delivery needs the subscribers in the publishers' engine process"
        return None


MODE = ClosedLoop()


def unused_think_time(publishers: PublisherSettings, mode: PacingMode) -> list[PacingProblem]:
    """publishers.think_time, the closed loop's pause, given to another mode, which would ignore it."""
    if mode is MODE or publishers.think_time <= 0:
        return []
    return [PacingProblem("publishers.arrival", "publishers.think_time applies to closed loop: set arrival: closed", ("publishers.think_time",))]
