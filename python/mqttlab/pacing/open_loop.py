"""Open loop (arrival: constant or poisson): each publisher's sends follow a schedule fixed in
advance at publishers.rate, evenly spaced or as a Poisson process, and latency is taken from the
intended send time, so a stalled broker cannot hide its stall (coordinated omission)."""

from __future__ import annotations

from typing import Any, Mapping

from mqttlab.pacing.mode import LoadSettings, PacingMode, PacingProblem, PublisherSettings


class OpenLoop(PacingMode):
    scheduled = True
    measured_as = "open"

    def __init__(self, arrival: str) -> None:
        self.arrival = arrival

    def problems(self, publishers: PublisherSettings, load: LoadSettings) -> list[PacingProblem]:
        # Only an even spacing says in advance when the last send goes; Poisson gaps are drawn.
        return _sends_outside_the_measurement(publishers, load) if self.arrival == "constant" else []

    def label(self, publishers: PublisherSettings) -> str:
        return f"{publishers.rate:g}ps" + ("-poisson" if self.arrival == "poisson" else "")

    def pace_words(self, publishers: Mapping[str, Any]) -> str:
        count, rate = publishers["count"], publishers["rate"]
        return f" × {rate:g} msg/s = {count * rate:,.6g} msg/s"

    def measurement_words(self, measurement: Mapping[str, Any]) -> str:
        return "open loop: latency from the intended send time"


CONSTANT = OpenLoop("constant")
POISSON = OpenLoop("poisson")


def _sends_outside_the_measurement(publishers: PublisherSettings, load: LoadSettings) -> list[PacingProblem]:
    """A constant schedule of a fixed number of messages that the duration cuts short, or that
    ends within the warm-up: the run would silently stop early or measure nothing."""
    assert load.warmup is not None  # Scenario's after-validator always fills it in
    if not publishers.count or publishers.messages is None or publishers.rate <= 0:
        return []
    messages, rate = publishers.messages, publishers.rate
    sending = (messages - 1) / rate  # the last send's offset from the start
    if load.duration is not None and sending >= load.duration:
        sent = min(messages, int(load.duration * rate) + 1)
        return [PacingProblem(
            "load.duration",
            f"stops the sends at {load.duration:g}s, before the {messages:,} messages per publisher at {rate:g} msg/s "
            f"are sent ({sending:g}s; only about {sent:,} would be); leave load.duration out to send them all",
            ("publishers.messages", "publishers.rate"),
        )]
    if load.warmup > 0 and sending < load.warmup:
        return [PacingProblem(
            "load.warmup",
            f"every message is sent within the warm-up ({messages:,} at {rate:g} msg/s take {sending:g}s < {load.warmup:g}s), "
            "so no latency would be measured; lower load.warmup or leave it out",
            ("publishers.messages", "publishers.rate"),
        )]
    return []
