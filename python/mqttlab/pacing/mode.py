"""What every pacing mode answers, and the settings it reads them from.

A mode reads the scenario through the two small protocols below, not through the scenario's
model, so that the scenario layer can ask the modes for its rules without a circle: pacing sits
below scenario/ and imports nothing of mqttlab."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Mapping, NamedTuple, Optional, Protocol


class PacingProblem(NamedTuple):
    """A broken rule, as scenario.Problem takes it: the field, what is wrong, the fields it read."""

    path: str
    message: str
    involves: tuple[str, ...] = ()


class PublisherSettings(Protocol):
    """The scenario's publishers: section, as far as pacing reads it."""

    @property
    def count(self) -> int: ...
    @property
    def arrival(self) -> str: ...
    @property
    def rate(self) -> float: ...
    @property
    def messages(self) -> Optional[int]: ...
    @property
    def complete_on(self) -> str: ...
    @property
    def think_time(self) -> float: ...
    @property
    def model_fields_set(self) -> set[str]: ...


class LoadSettings(Protocol):
    """The scenario's load: section, as far as pacing reads it (seconds; warmup filled in)."""

    @property
    def duration(self) -> Optional[float]: ...
    @property
    def warmup(self) -> Optional[float]: ...
    @property
    def grace(self) -> float: ...


class PacingMode(ABC):
    """One value of publishers.arrival. A subclass sets the names and overrides what differs."""

    #: the value of publishers.arrival that chooses it
    arrival: str
    #: whether its sends follow a schedule fixed in advance at publishers.rate (open loop): only
    #: then is there an offered rate, a schedule to fall behind, a rate for the CLI to keep
    scheduled: bool
    #: the summary's measurement.pacing the engine writes for it
    measured_as: str
    #: when it sends, for the CLI's --arrival help ("" when scheduled: the help names those together)
    sends_when: str = ""
    #: the same, said of one message, for the rule on a rate it does not use ("" when scheduled)
    message_goes: str = ""

    def problems(self, publishers: PublisherSettings, load: LoadSettings) -> list[PacingProblem]:
        """Its rules on a scenario that chose it, every problem at once."""
        return []

    def label(self, publishers: PublisherSettings) -> str:
        """Its part of a run's name (shape.py): 100ps, 100ps-poisson, closed."""
        return self.arrival

    @abstractmethod
    def pace_words(self, publishers: Mapping[str, Any]) -> str:
        """What follows the publisher count in the summary's plan line, from the plan's publishers."""

    @abstractmethod
    def measurement_words(self, measurement: Mapping[str, Any]) -> str:
        """How it measured latency, for the summary's measurement line."""

    def plan_keys(self, publishers: PublisherSettings) -> dict[str, Any]:
        """The plan's publisher keys that only it sets (the engine's defaults stand for the rest)."""
        return {}

    def single_process_problem(self, publishers: PublisherSettings) -> Optional[str]:
        """Why its measurement needs every client in one engine process, or None."""
        return None
