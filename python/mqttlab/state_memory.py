"""The broker's memory per message of state it holds, from its resident memory (RSS) sampled
through the run (mqttlab.environment.resources) against the messages it held (docs/state.md):

- per queued message: offline sessions (subscribers.offline) hold the messages published while
  they are away; the broker's RSS at its highest while they were away, less its RSS at the last
  sample before they left, over the messages they held (those delivered on their return, with the
  ones sent before the DISCONNECT that arrived after it: the engine's count of what the broker
  demonstrably held);
- per retained message: a retained read (subscribers.retained) is preceded by the publishers
  setting their topics' retained values; the broker's RSS at its highest between the load's start
  and the read's first SUBSCRIBE, less its RSS at the last sample before the load, over the
  retained topics set (one per publisher).

What the sampling interval bounds: the highest sample is taken at most one interval before the
state stopped growing (the return, the read), so the RSS rise may leave out what came in after
it; `unsampled_share` is that share of the time the state grew (a queue grows with time at the
publishers' rate), so the figure may be low by about that share. RSS also moves by whole pages
and with the allocator's arenas: a rise of a few pages says nothing, hence `MIN_RISE_PAGES`."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from mqttlab.environment.resources import NS_PER_S, ResourceSample

QUEUED_RULE = ("bytes per queued message = (the broker's RSS at its highest while the sessions were away - its RSS at the last "
               "sample before they left) / the messages they held (delivered on return, those sent before the DISCONNECT included)")
RETAINED_RULE = ("bytes per retained message = (the broker's RSS at its highest between the load's start and the read's first "
                 "SUBSCRIBE - its RSS at the last sample before the load) / the retained topics set (one per publisher)")
#: the broker's RSS is sampled this often in runs that hold state (every second otherwise)
STATE_SAMPLE_INTERVAL_S = 0.1
#: a rise smaller than this many 4 KiB pages is within RSS's own noise: no figure
MIN_RISE_PAGES = 16
PAGE = 4096


def state_memory(plan: Mapping[str, Any], result: Mapping[str, Any], samples: Sequence[ResourceSample],
                 interval_s: float) -> Optional[dict[str, Any]]:
    """summary.json's `state_memory`: `queued` for a run with offline sessions, `retained` for
    one with a retained read; None for a run with neither, or without the broker's samples."""
    start = result.get("start_mono_ns")
    if not samples or not start:
        return None
    ordered = sorted(samples, key=lambda s: s.mono_ns)
    found: dict[str, Any] = {}
    queued = _queued(result.get("offline") or [])
    if queued is not None:
        held, since_s, until_s = queued
        found["queued"] = _figure(ordered, int(start), since_s, until_s, held, interval_s, QUEUED_RULE, _payload(plan))
    retained = (plan.get("subscribers") or {}).get("retained")
    if retained:
        topics = int(plan["publishers"]["count"])
        found["retained"] = _figure(ordered, int(start), 0.0, retained["at_ms"] / 1000, topics, interval_s, RETAINED_RULE, _payload(plan))
    return found or None


def _queued(periods: Sequence[Mapping[str, Any]]) -> Optional[tuple[int, float, float]]:
    """The sessions away together (every period that began before the first return: all of them
    when the subscribers leave at once), as (messages they held, first leave, last return)."""
    returned = [p for p in periods if p.get("returned") and p.get("session_present")]
    if not returned:
        return None
    first_back = min(p["left_s"] + p["offline_s"] for p in returned)
    together = [p for p in returned if p["left_s"] < first_back]
    held = sum(int(p["delivered"]) + int(p["earlier"]) for p in together)
    return held, min(p["left_s"] for p in together), max(p["left_s"] + p["offline_s"] for p in together)


def _payload(plan: Mapping[str, Any]) -> Optional[int]:
    payload = plan["publishers"].get("payload") or {}
    return int(payload["size"]) if payload.get("dist") == "fixed" and payload.get("size") is not None else None


def _figure(samples: Sequence[ResourceSample], start_ns: int, since_s: float, until_s: float, held: int, interval_s: float,
            rule: str, payload: Optional[int]) -> dict[str, Any]:
    """The rise of the broker's RSS while it held `held` messages, from `since_s` to `until_s` of
    the load, per message."""
    def at(sample: ResourceSample) -> float:
        return (sample.mono_ns - start_ns) / NS_PER_S

    entry: dict[str, Any] = {"held": held, "from_s": round(since_s, 3), "until_s": round(until_s, 3), "sampled_every_s": interval_s,
                             "payload_bytes": payload, "rule": rule, "bytes_per_message": None}
    before = [s for s in samples if at(s) <= since_s]
    during = [s for s in samples if since_s < at(s) <= until_s]
    if not before or not during:
        return {**entry, "note": "the broker's RSS was not sampled before and while it held them"}
    base, peak = before[-1], max(during, key=lambda s: s.rss_bytes)
    last = during[-1]
    rise = peak.rss_bytes - base.rss_bytes
    entry.update(rss_before_bytes=base.rss_bytes, before_at_s=round(at(base), 3), rss_peak_bytes=peak.rss_bytes, peak_at_s=round(at(peak), 3),
                 rise_bytes=rise, unsampled_share=round(max(0.0, until_s - at(last)) / (until_s - since_s), 3) if until_s > since_s else None)
    if held <= 0:
        entry["note"] = "the broker held none of them: no figure"
    elif rise < MIN_RISE_PAGES * PAGE:
        entry["note"] = f"RSS rose {rise:,} bytes, less than {MIN_RISE_PAGES} pages: within its noise, no figure (hold more, or larger payloads)"
    else:
        entry["bytes_per_message"] = rise / held
    return entry


def per_message(entry: Optional[Mapping[str, Any]]) -> str:
    """The figure alone, for tables: `1,343` bytes, or `—` with no figure."""
    value = (entry or {}).get("bytes_per_message")
    return f"{value:,.0f}" if value is not None else "—"


def describe(kind: str, entry: Mapping[str, Any]) -> str:
    """One line: `memory: 1,343 B per queued message (RSS 8.5 → 22.2 MB over 10,236 held; 1,024 B payloads; ...)`."""
    noun = {"queued": "queued message", "retained": "retained message"}[kind]
    if entry.get("bytes_per_message") is None:
        return f"memory per {noun}: {entry.get('note')} ({entry['held']:,} held)"
    payload = f"; {entry['payload_bytes']:,} B payloads" if entry.get("payload_bytes") is not None else ""
    return (f"memory: {entry['bytes_per_message']:,.0f} B per {noun} (RSS {entry['rss_before_bytes'] / 1e6:.1f} → {entry['rss_peak_bytes'] / 1e6:.1f} MB "
            f"over {entry['held']:,} held{payload}; sampled every {entry['sampled_every_s']:g} s, "
            f"up to {entry['unsampled_share']:.0%} of the time held after the peak sample)")
