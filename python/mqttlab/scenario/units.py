"""Durations and byte sizes as people write them in scenario files ("250ms", "1m30s", "1KB")."""

from __future__ import annotations

import math
import re

# Decimal prefixes follow SI (1 KB = 1000 B), binary ones follow IEC (1 KiB = 1024 B), so a
# number copied from a paper that says "1 KB" means what the paper's tool meant.
SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}

DURATION_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(us|µs|ms|s|m|h)")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def parse_duration(value: object) -> float:
    """Seconds from a number of seconds or a string such as "250ms", "10s", "2m", "1h", "1m30s"."""
    if isinstance(value, bool):
        raise ValueError(f"must be a duration such as 10s, 250ms or 2m (got {value!r})")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_duration_text(value)
    else:
        raise ValueError(f"must be a duration such as 10s, 250ms or 2m (got {value!r})")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"must be a duration of 0 or more (got {value!r})")
    return seconds


def _parse_duration_text(text: str) -> float:
    compact = text.strip().lower().replace(" ", "")
    try:
        return float(compact)  # a bare number in a string is still seconds
    except ValueError:
        pass
    total, position = 0.0, 0
    for match in _DURATION_PART.finditer(compact):
        if match.start() != position:
            break
        factor = DURATION_UNITS[match.group(2)]
        # Divided for the units under a second: 50 / 1e6 is the double nearest 50 µs, 50 * 1e-6 is not.
        total += float(match.group(1)) * factor if factor >= 1 else float(match.group(1)) / round(1 / factor)
        position = match.end()
    if position == 0 or position != len(compact):
        raise ValueError(f"must be a duration such as 10s, 250ms, 2m, 1h or 1m30s (got {text!r})")
    return total


def parse_size(value: object) -> int:
    """Bytes from an integer or a string such as "64B", "1KB" (1000) or "1KiB" (1024)."""
    if isinstance(value, bool):
        raise ValueError(f"must be a size in bytes such as 64, 1KB or 1KiB (got {value!r})")
    if isinstance(value, int):
        size = value
    elif isinstance(value, float) and value.is_integer():
        size = int(value)
    elif isinstance(value, str):
        size = _parse_size_text(value)
    else:
        raise ValueError(f"must be a size in bytes such as 64, 1KB or 1KiB (got {value!r})")
    if size < 0:
        raise ValueError(f"must be a size of 0 bytes or more (got {value!r})")
    return size


def _parse_size_text(text: str) -> int:
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None or match.group(2) not in SIZE_UNITS | {"": 1}:
        raise ValueError(f"must be a size such as 64, 64B, 1KB (1000 B), 1KiB (1024 B) or 1MB (got {text!r})")
    number = float(match.group(1)) * SIZE_UNITS.get(match.group(2), 1)
    if not number.is_integer():
        raise ValueError(f"must be a whole number of bytes (got {text!r})")
    return int(number)


def format_duration(seconds: float) -> str:
    """The shortest exact spelling: 10 -> "10s", 0.25 -> "250ms", 120 -> "2m"."""
    if seconds == 0:
        return "0s"
    for unit, factor in (("h", 3600.0), ("m", 60.0), ("s", 1.0), ("ms", 1e-3)):
        count = seconds / factor
        if abs(count - round(count)) < 1e-9:
            return f"{int(round(count))}{unit}"
    return f"{round(seconds * 1e6)}us"
