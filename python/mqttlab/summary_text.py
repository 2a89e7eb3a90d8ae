"""The summary's plain lines, without rich: counts and milliseconds as the tables show them, how a
run was measured, the defaults it followed and its plan in words. A run that prints no tables
(`--json`) says its plan line without importing the display (summary_view)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from mqttlab import pacing


def counted(n: int, noun: str) -> str:
    """`1 publisher`, `2 publishers`, `1,000 late sends`."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def ms(microseconds: Optional[float]) -> str:
    """Milliseconds with microsecond resolution: 1234 µs -> "1.234"."""
    return "–" if microseconds is None else f"{microseconds / 1000:.3f}"


def measurement_line(measurement: Optional[Mapping[str, Any]]) -> str:
    """How the run was measured, in one line: the method tying deliveries to sends, open or
    closed loop, and the loss deadline. Empty for results written before these existed."""
    if not measurement:
        return ""
    method = measurement.get("method", "header")
    parts = [
        "measured by the 16-byte payload header" if method == "header"
        else "measured by topic and sequence number (topic-sequence: no payload header)"
    ]
    parts.append(pacing.measured(measurement.get("pacing")).measurement_words(measurement))
    if measurement.get("deadline_s") is not None:
        parts.append(f"loss deadline {measurement['deadline_s']:g} s after each send (late counts as lost)")
    return "; ".join(parts)


FOLLOWED_WORDS = {
    "subscribers.filters": "subscribers subscribe to the publish topic template ({0}; no filter given)",
    "subscribers.qos": "subscribers' QoS follows the publishers' ({0})",
    "load.duration": "no time limit ({0})",
    "load.warmup": "warm-up {0}",
    "launch.tls": "over TLS ({0})",
    "publishers.measure": "measured by topic and sequence number, not the 16-byte header ({0})",
}


def followed_line(followed: Optional[Mapping[str, str]]) -> str:
    """The defaults that took their value from what the user set, in one line."""
    if not followed:
        return ""
    parts = []
    for key, source in followed.items():
        words = FOLLOWED_WORDS.get(key, key + " follows {0}")
        parts.append(words.format(source.split(" ", 1)[-1] if key == "subscribers.filters" else source))
    return "defaults: " + "; ".join(parts)


def plan_line(plan: Mapping[str, Any], followed: Optional[Mapping[str, str]] = None) -> str:
    """The planned load in words, totals spelled out, so a per-publisher rate cannot be misread
    as the total: "10 publishers × 100 msg/s = 1,000 msg/s for 5 s (1 s warm-up) → 10 subscribers"."""
    pubs, subs, load = plan["publishers"], plan["subscribers"], plan["load"]
    count = pubs["count"]
    duration = (load.get("duration_ms") or 0) / 1000
    warmup = (load.get("warmup_ms") or 0) / 1000
    pace = counted(count, "publisher") + pacing.mode_of(pubs.get("arrival")).pace_words(pubs)
    amount = f", {pubs['messages']:,} messages each" if pubs.get("messages") else ""
    span = f" for {duration:g} s ({warmup:g} s warm-up)" if duration else f" ({warmup:g} s warm-up)"
    line = f"plan: {pace}{amount}{span} → {counted(subs['count'], 'subscriber')} of {', '.join(subs['filters'])}, QoS {pubs['qos']}/{subs['qos']}"
    notes = followed_line(followed)
    return line + (f"\n{notes}" if notes else "")
