"""The name of a run given by flags, from its shape in the field's convention: fan-in-20-1-qos1-100ps,
fan-out-1-100-qos0-100ps, p2p-10-10-qos1-100ps (docs/scenarios.md, "Names"). A scenario file keeps
its own name; a run of the default scenario's shape keeps "default".

The shape is read from how the topics meet the filters (routing.py, the engine's own accounting),
not from the counts alone: 20 publishers and 1 subscriber whose filter matches one topic is no
fan-in."""

from __future__ import annotations

from typing import Any

from mqttlab.pacing import mode_of
from mqttlab.routing import RoutingCheck


def shape_word(routing: RoutingCheck, filters: list[str]) -> str:
    """p2p, fan-in, fan-out, many-to-many, shared, publish-only, subscribe-only, unrouted, or
    pub-sub when the routing was too costly to work out."""
    if routing.subscribers == 0:
        return "publish-only"
    if routing.publishers == 0:
        return "subscribe-only"
    if routing.unknown:
        return "pub-sub"
    if routing.owed_per_message == 0:
        return "unrouted"
    if any(text.startswith("$share/") for text in filters):
        return "shared"  # a group is owed one copy, whichever member gets it: neither fan-in nor out
    reached = routing.subscribers - routing.idle_subscribers
    copies = routing.owed_per_message  # subscribers owed each message
    heard = copies * routing.publishers / reached  # publishers each reached subscriber hears
    # A little over 1 from a few stray matches is still one: only a clear many counts as many.
    many_copies, many_heard = copies > 1.5, heard > 1.5
    if many_copies and many_heard:
        return "many-to-many"
    if many_copies:
        return "fan-out"
    return "fan-in" if many_heard else "p2p"


def pacing(publishers: Any) -> str:
    """The publishers' send schedule in a name: 100ps (per publisher per second), 100ps-poisson,
    closed or window."""
    return mode_of(publishers.arrival).label(publishers)


def shape_name(scenario: Any, routing: RoutingCheck, paced: bool = True) -> str:
    """<shape>-<publishers>-<subscribers>-qos<Q>[-<pacing>], e.g. fan-in-20-1-qos1-100ps; without
    the pacing when it is not the scenario's own (`paced=False`: a capacity search sets the rate)."""
    pubs, subs = scenario.publishers, scenario.subscribers
    parts = [shape_word(routing, list(subs.filters or [])), str(pubs.count), str(subs.count), f"qos{pubs.qos if pubs.count else subs.qos}"]
    if pubs.count and paced:
        parts.append(pacing(pubs))
    return "-".join(parts)
