"""Which receivers are owed which publisher's messages, worked out from the plan alone.

It follows the engine's own accounting (crates/mqttlab-engine/src/accounting.rs): a receiver
("unit") is a subscriber, `sub:<i>`, or a shared-subscription group as a whole,
`share:<group>:<filter>`. The distributed runner needs it to tell which measured pairs have their
publisher and subscriber on different hosts (different clocks) and how many deliveries were owed
to the subscribers of a shard that went missing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

# Beyond this many (publisher topic × wildcard filter) checks the answer is "unknown": the run
# must not wait minutes for a report detail.
MATCH_BUDGET = 20_000_000


def expand(template: str, index: int, client_id: str) -> str:
    """`%i` = index, `%c` = client id, `%%` = a percent sign; any other `%` stays."""
    if "%" not in template:
        return template
    out, i = [], 0
    while i < len(template):
        char = template[i]
        following = template[i + 1] if i + 1 < len(template) else ""
        if char == "%" and following in ("i", "c", "%"):
            out.append({"i": str(index), "c": client_id, "%": "%"}[following])
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def matches(topic_filter: str, topic: str) -> bool:
    # Topics starting with '$' are not matched by a leading wildcard (MQTT 4.7.2).
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    levels, topic_levels = topic_filter.split("/"), topic.split("/")
    for k, level in enumerate(levels):
        if level == "#":
            return True
        if k >= len(topic_levels) or (level != "+" and level != topic_levels[k]):
            return False
    return len(levels) == len(topic_levels)


@dataclass
class Receivers:
    """For each publisher, the names of the units owed its messages; for each unit, its members."""

    owed: list[list[str]]
    members: dict[str, list[int]] = field(default_factory=dict)


def receivers(plan: dict[str, Any]) -> Optional[Receivers]:
    """The plan's owed units per publisher, or None when working it out would cost too much."""
    pubs, subs = plan["publishers"], plan["subscribers"]
    members: dict[str, list[int]] = {}
    units_by_filter: dict[str, set[str]] = {}
    for s in range(subs["count"]):
        client_id = expand(subs["client_id"], s, "")
        own = f"sub:{s}"
        for template in subs["filters"]:
            text = expand(template, s, client_id)
            unit, topic_filter = own, text
            if text.startswith("$share/") and "/" in text[len("$share/"):]:
                group, topic_filter = text[len("$share/"):].split("/", 1)
                unit = f"share:{group}:{topic_filter}"
            group_members = members.setdefault(unit, [])
            if not group_members or group_members[-1] != s:
                group_members.append(s)
            units_by_filter.setdefault(topic_filter, set()).add(unit)
    exact = {f: u for f, u in units_by_filter.items() if "+" not in f and "#" not in f}
    wildcard = [(f, u) for f, u in units_by_filter.items() if f not in exact]
    if pubs["count"] * len(wildcard) > MATCH_BUDGET:
        return None
    owed = []
    for p in range(pubs["count"]):
        topic = expand(pubs["topic"], p, expand(pubs["client_id"], p, ""))
        units = set(exact.get(topic, ()))
        for topic_filter, filter_units in wildcard:
            if matches(topic_filter, topic):
                units |= filter_units
        owed.append(sorted(units))
    return Receivers(owed=owed, members=members)
