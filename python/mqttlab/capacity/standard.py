"""The standard scenarios: the shapes the field's published broker comparisons use, named as they
name them, scaled to the host by one factor, each answered with a capacity to a stated SLO and
the latency at a fixed fraction of that capacity.

| family | shape at --scale 1 | searched |
|---|---|---|
| p2p | 10 publishers each to its own subscriber on its own topic | msg/s |
| fan-in | 20 publishers on their own topics, 1 subscriber to all (`bench/#`) | msg/s |
| fan-out | 1 publisher, 20 subscribers to its topic | msg/s |
| shared | 10 publishers, 5 subscribers in one shared subscription (`$share/g/bench/#`) | msg/s |
| connections | idle subscribers held, connected at 1,000/s (and one publisher at 1 msg/s to nobody) | connections |

The counts scale with --scale (at least 1 of each); the names carry them, as in
`p2p-10-topics-10-pubs-10-subs`. QoS 1, 64-byte payloads, MQTT 3.1.1 throughout."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

from mqttlab.capacity.probe import Probe, ProbeSpec, run_probe
from mqttlab.capacity.runner import CapacityReport, search_capacity
from mqttlab.capacity.search import Settings, round_rate
from mqttlab.capacity.slo import Objective, describe, latency_us, parse_objectives

FAMILIES = ("p2p", "fan-in", "fan-out", "shared", "connections")
MESSAGE_SLOS = ("p99<50ms", "loss==0", "dropped==0")
CONNECTION_SLOS = ("failed==0", "connack.p99<200ms")
STANDARD_FILE = "standard.json"


@dataclass(frozen=True)
class Family:
    name: str  # the field's style: p2p-10-topics-10-pubs-10-subs
    family: str
    knob: str
    assignments: tuple[str, ...]
    publishers: int
    start: float
    slos: tuple[str, ...]


def families(scale: float, chosen: tuple[str, ...] = FAMILIES) -> list[Family]:
    def n(base: int) -> int:
        return max(1, round(base * scale))

    common = ("publishers.qos=1", "subscribers.qos=1", "publishers.payload=64", "mqtt.version=3")

    def messages(name: str, family: str, publishers: int, subscribers: int, topic: str, filters: str, start: float) -> Family:
        # The message families differ only in their shape: who publishes where, who subscribes to what.
        return Family(name, family, "publishers.rate",
                      (*common, f"publishers.count={publishers}", f"subscribers.count={subscribers}", f"publishers.topic={topic}",
                       f"subscribers.filters=[{filters}]"), publishers, start, MESSAGE_SLOS)

    found = []
    for family in chosen:
        if family == "p2p":
            k = n(10)
            found.append(messages(f"p2p-{k}-topics-{k}-pubs-{k}-subs", family, k, k, "bench/%i", "bench/%i", 50.0 * k))
        elif family == "fan-in":
            k = n(20)
            found.append(messages(f"fan-in-{k}-topics-{k}-pubs-1-sub", family, k, 1, "bench/%i", "bench/#", 25.0 * k))
        elif family == "fan-out":
            k = n(20)
            found.append(messages(f"fan-out-1-topic-1-pub-{k}-subs", family, 1, k, "bench/0", "bench/0", 50.0))
        elif family == "shared":
            k, m = n(10), n(5)
            found.append(messages(f"shared-{k}-topics-{k}-pubs-{m}-subs", family, k, m, "bench/%i", "$share/g/bench/#", 50.0 * k))
        elif family == "connections":
            k = n(1000)
            found.append(Family(f"connections-{k}", family, "subscribers.count",
                                (*common, "publishers.count=1", "publishers.rate=1", "publishers.topic=capacity/ping",
                                 "subscribers.filters=[capacity/idle/%i]", "load.connect_rate=1000"), 1, float(k), CONNECTION_SLOS))
    return found


def run_standard(
    broker: str,
    chosen: list[Family],
    settings: Settings,
    directory: Path,
    duration: str,
    warmup: str,
    fraction: float,
    message_slos: Optional[list[str]] = None,
    on_probe: Optional[Callable[[Family, Probe], None]] = None,
    on_family: Optional[Callable[[Family, CapacityReport], None]] = None,
) -> list[dict[str, Any]]:
    """Each family's search (directory/<family name>/) and its probe at `fraction` of the
    capacity; standard.json with one row per family. `on_probe` hears each probe with the family
    it searches."""
    rows = []
    for family in chosen:
        objectives = parse_objectives(list(message_slos) if message_slos and family.knob == "publishers.rate" else list(family.slos))
        spec = ProbeSpec(None, {"broker": broker}, family.assignments, max(1, family.publishers), duration, warmup, knob=family.knob)
        family_settings = Settings(**{**settings.__dict__, "start": family.start, "max_rate": family.start * 1024, "min_rate": min(settings.min_rate, family.start)})
        heard = partial(on_probe, family) if on_probe is not None else None
        report = search_capacity(broker, spec, objectives, family_settings, directory / family.name, on_probe=heard)
        if on_family is not None:
            on_family(family, report)
        rows.append(_row(family, report, spec, objectives, fraction, heard))
    (directory / STANDARD_FILE).write_text(json.dumps({"broker": broker, "fraction": fraction, "families": rows}, indent=2) + "\n", encoding="utf-8")
    return rows


def _row(family: Family, report: CapacityReport, spec: ProbeSpec, objectives: list[Objective], fraction: float,
         on_probe: Optional[Callable[[Probe], None]]) -> dict[str, Any]:
    o = report.outcome
    row: dict[str, Any] = {"scenario": family.name, "family": family.family, "unit": report.unit, "slo": [x.text for x in objectives],
                           "status": o.status, "capacity": o.lower, "interval": [o.lower, o.upper],
                           "limited_by": [item["limit"] for item in report.limits]}
    # Only a bracketed capacity has a fraction: half of "above X" is not half of the capacity.
    if o.status == "bracketed" and o.lower and family.knob == "publishers.rate":
        rate = round_rate(o.lower * fraction)
        probe = run_probe(spec, report.directory / "at-fraction", rate, 1, objectives)
        if on_probe is not None:
            on_probe(probe)
        row["at_fraction"] = {"fraction": fraction, "rate": rate, "met": probe.met, "generator_limited": probe.generator_limited,
                              "broken": [describe(check) for check in probe.checks if not check.met],
                              **{f"e2e_{q.replace('.', '')}_us": latency_us(probe.result, "e2e", q) for q in ("p50", "p99", "p99.9")}}
    return row
