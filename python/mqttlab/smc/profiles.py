"""Usage profiles: how long a simulated client waits between messages and which it sends.

A profile is the paper's Listing 1.2: a uniform wait in [min, max] before every message and
weights among the messages the client model allows in its state (only connect while
disconnected; disconnect, publish, and subscribe/unsubscribe where their guards hold while
connected). ``topics`` is the number of distinct topics clients use, which sets how many
subscriptions a client can hold and how many subscribers a publish meets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mqttlab.smc.log import MESSAGE_TYPES


MAX_TOPICS = 16  # the simulator keeps a lookup table of 2**topics subscription sets


class ProfileError(ValueError):
    """A profile file with problems; the message lists all of them by field."""


@dataclass(frozen=True)
class UsageProfile:
    name: str
    min_wait_ms: float
    max_wait_ms: float
    weights: dict[str, float]
    topics: int = 10

    def __post_init__(self) -> None:
        problems = _problems(self.min_wait_ms, self.max_wait_ms, self.weights, self.topics)
        if problems:
            raise ProfileError(f"profile {self.name}: " + "; ".join(problems))

    def weight_vector(self) -> list[float]:
        return [float(self.weights.get(m, 0.0)) for m in MESSAGE_TYPES]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _problems(min_wait: Any, max_wait: Any, weights: Any, topics: Any) -> list[str]:
    problems = []
    for name, value in (("min_wait_ms", min_wait), ("max_wait_ms", max_wait)):
        if not _is_number(value) or value < 0:
            problems.append(f"{name} must be a number >= 0, got {value!r}")
    if _is_number(min_wait) and _is_number(max_wait) and min_wait > max_wait:
        problems.append(f"min_wait_ms ({min_wait}) must not exceed max_wait_ms ({max_wait})")
    if not isinstance(weights, dict):
        problems.append("weights must be a mapping from message type to weight")
    else:
        for key, value in weights.items():
            if key not in MESSAGE_TYPES:
                problems.append(f"weights.{key} is not a message type ({', '.join(MESSAGE_TYPES)})")
            elif not _is_number(value) or value < 0:
                problems.append(f"weights.{key} must be a number >= 0, got {value!r}")
        if not (_is_number(weights.get("connect")) and weights.get("connect", 0) > 0):
            problems.append("weights.connect must be > 0 (a client starts disconnected)")
        def positive(m: str) -> bool:
            return _is_number(weights.get(m)) and weights[m] > 0

        # Subscribe or unsubscribe alone can run out (all topics held, or none).
        if not (positive("disconnect") or positive("publish") or (positive("subscribe") and positive("unsubscribe"))):
            problems.append(
                "weights: a connected client needs a message it can always send: "
                "disconnect or publish > 0, or both subscribe and unsubscribe > 0"
            )
    if not isinstance(topics, int) or isinstance(topics, bool) or not (1 <= topics <= MAX_TOPICS):
        problems.append(f"topics must be an integer from 1 to {MAX_TOPICS}, got {topics!r}")
    return problems


UP1 = UsageProfile("UP1", 0, 500, {"connect": 1, "disconnect": 1, "publish": 5, "subscribe": 3, "unsubscribe": 2})
UP2 = UsageProfile("UP2", 50, 250, {"connect": 1, "disconnect": 1, "publish": 7, "subscribe": 1, "unsubscribe": 1})
BUILT_IN = {p.name: p for p in (UP1, UP2)}

_KEYS = ("name", "min_wait_ms", "max_wait_ms", "weights", "topics")


def load_profile(name_or_path: str) -> UsageProfile:
    """A built-in profile by name (UP1, UP2) or a YAML/JSON file with the fields above."""
    if name_or_path.upper() in BUILT_IN:
        return BUILT_IN[name_or_path.upper()]
    path = Path(name_or_path)
    if not path.exists():
        raise ProfileError(f"{name_or_path}: neither a built-in profile ({', '.join(BUILT_IN)}) nor a file")
    try:
        data = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ProfileError(f"{path}: cannot parse ({error})") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: must be a mapping with {', '.join(_KEYS)}")
    problems = [f"unknown field {key!r}" for key in data if key not in _KEYS]
    missing = [key for key in ("min_wait_ms", "max_wait_ms", "weights") if key not in data]
    problems += [f"{key} is required" for key in missing]
    if not missing:
        problems += _problems(data["min_wait_ms"], data["max_wait_ms"], data["weights"], data.get("topics", 10))
    if problems:
        raise ProfileError(f"{path}: " + "; ".join(problems))
    return UsageProfile(
        name=str(data.get("name", path.stem)),
        min_wait_ms=data["min_wait_ms"],
        max_wait_ms=data["max_wait_ms"],
        weights=data["weights"],
        topics=data.get("topics", 10),
    )
