"""Which publishers' messages reach which subscribers, checked from the plan before any load.

A run whose publishers' topics match none of the subscribers' filters sends everything and
measures nothing, and still ends `completed` with `expected 0` (issue 17). This check says so
before the load starts and again in the summary, with the topics and filters side by side."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from mqttlab.engine import Plan, client_topic, owed_units

# Enough expanded examples to see the pattern next to each other without flooding the terminal.
EXAMPLES = 3
# Beyond this many (publisher topic x wildcard filter) matches the answer is "unknown": a check
# made before the load, or a detail of its report, must not hold the run for minutes.
MATCH_BUDGET = 20_000_000


@dataclass
class Receivers:
    """For each publisher, the names of the units owed its messages (`sub:<i>`, or a shared group
    as a whole, `share:<group>:<filter>`); for each unit, its subscribers."""

    owed: list[list[str]]
    members: dict[str, list[int]] = field(default_factory=dict)


def owed_receivers(plan: Plan) -> Optional[Receivers]:
    """The plan's receivers as the engine's own accounting works them out, or None when too
    costly. The distributed runner needs them to tell which measured pairs have publisher and
    subscriber on different hosts, and what was owed to the subscribers of a missing shard."""
    found = owed_units(plan, MATCH_BUDGET)
    if found is None:
        return None
    return Receivers(owed=found["owed"], members=found["members"])


@dataclass
class RoutingCheck:
    """How the plan's publishers and subscribers meet. `unknown` when it was too costly to say."""

    publishers: int
    subscribers: int
    topics: list[str]  # the template, then the first publishers' expanded topics
    filters: list[str]  # the templates, then the first subscribers' expanded filters
    unmatched_publishers: int = 0  # publishers whose topic no subscription matches
    idle_subscribers: int = 0  # subscribers owed no message at all
    owed_per_message: float = 0.0  # mean receivers owed one message (the fan-out)
    followed: Optional[str] = None  # "subscribers follow the publish topic" note, when they did
    unknown: bool = False
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_routing(plan: Plan, followed: Optional[str] = None) -> RoutingCheck:
    """The routing of `plan` with a warning for each way it leaves something unmeasured: no
    subscriber owed anything, publishers whose topic nobody subscribes to, subscribers owed
    nothing. A run without publishers or without subscribers is what it says and is not flagged."""
    pubs, subs = plan["publishers"], plan["subscribers"]
    p_count, s_count = int(pubs["count"]), int(subs["count"])
    topics = [pubs["topic"]] + [client_topic(pubs["topic"], i, pubs["client_id"]) for i in range(min(p_count, EXAMPLES))]
    filters = list(subs["filters"]) + [
        client_topic(f, i, subs["client_id"]) for i in range(min(s_count, EXAMPLES)) for f in subs["filters"]
    ]
    check = RoutingCheck(p_count, s_count, topics, filters, followed=followed)
    if p_count == 0 or s_count == 0:
        return check
    found = owed_receivers(plan)
    if found is None:
        check.unknown = True
        return check
    owed, members = found.owed, found.members
    check.unmatched_publishers = sum(1 for units in owed if not units)
    # A shared-subscription group is owed one copy, whichever member gets it.
    check.owed_per_message = sum(len(units) for units in owed) / p_count
    reached: set[int] = set()
    for unit in {u for units in owed for u in units}:
        reached.update(members.get(unit, []))
    check.idle_subscribers = s_count - len(reached)
    if check.unmatched_publishers == p_count:
        check.warnings.append(
            "no subscriber is owed any message: "
            + ("the publisher's topic matches no subscription, " if p_count == 1 else f"none of the {p_count:,} publishers' topics matches a subscription, ")
            + "so the run would measure no delivery (expected 0)"
        )
    else:
        if check.unmatched_publishers:
            check.warnings.append(f"{check.unmatched_publishers:,} of {p_count:,} publishers publish to topics no subscription matches")
        if check.idle_subscribers:
            check.warnings.append(f"{check.idle_subscribers:,} of {s_count:,} subscribers are owed no message at all")
    return check
