"""The protocol's promises about the state a broker keeps, judged from one run: for each, what the
spec promises (the rule, printed with the verdict), what the broker's configuration allows (its
documented limits, `Launcher.state_limits`), and what happened. A kept promise shows the count
that kept it; a broken one is named with its count; a message the broker dropped under a limit
it was configured with is "dropped by limit N", not loss (docs/state.md)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

SESSION_RULE = ("a client that reconnects with clean start 0 finds its session present (MQTT 3.1.1 §3.2.2.2; "
                "MQTT 5 §3.2.2.1.1, unless its session expiry ran out while it was away)")
QUEUE_RULE = ("every QoS {qos} message published to an offline session's subscription is delivered when the session "
              "returns (MQTT 3.1.1 §3.1.2.4, MQTT 5 §3.1.2.4), less what a configured queue limit drops")
QOS0_RULE = "QoS 0 messages for an offline session may be queued or dropped (MQTT 3.1.1 §3.1.2.4): broker-specific, not judged"
RETAINED_RULES = (
    ("retained value delivered", "retained_missing", "missing",
     "a new subscription to a topic that holds a retained message gets that message (MQTT 3.1.1 §3.3.1.3, MQTT 5 §3.3.1.3)"),
    ("retained value is the latest", "stale_retained", "stale",
     "the retained message a subscription gets is the last one published with RETAIN to its topic (MQTT 3.1.1 §3.3.1.3, MQTT 5 §3.3.1.3)"),
    ("retained flag set", "retained_unflagged", "unflagged",
     "a retained message sent because of a new subscription has its RETAIN flag set (MQTT 3.1.1 §3.3.1.3, MQTT 5 §3.3.1.3)"),
)


def judge(plan: Mapping[str, Any], result: Mapping[str, Any], summary: Mapping[str, Any],
          limits: Optional[Mapping[str, Optional[int]]]) -> list[dict[str, Any]]:
    """The run's promises about state, one verdict each; empty for a run that tested none.
    `limits`: the launched broker's documented state limits (None: not known, a broker by URL)."""
    verdicts = []
    offline = summary.get("offline")
    if offline:
        verdicts += [_session_kept(offline), _queue_delivered(plan, result.get("offline") or [], limits or {})]
    retained = summary.get("retained")
    if retained:
        verdicts += _retained_read(retained)
    return verdicts


def broken(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdicts that name a broken promise."""
    return [v for v in verdicts if v["verdict"] == "broken"]


def _retained_read(retained: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The retained store as the subscribers read it: each value owed delivered, the latest one,
    flagged retained. No retained limit is known here: none is assumed."""
    delivered = retained["delivered"]
    kept = {"missing": delivered, "stale": delivered - retained["stale"], "unflagged": retained["expected"] - retained["unflagged"]}
    return [{"promise": promise, "rule": rule, "allowed": "no limit on retained messages is known here", "kept": max(kept[key], 0),
             "broken": retained[key], "name": name, "verdict": "broken" if retained[key] else ("kept" if retained["expected"] else "not judged")}
            for promise, name, key, rule in RETAINED_RULES]


def _session_kept(offline: Mapping[str, Any]) -> dict[str, Any]:
    kept, lost, expired = offline["sessions_resumed"], offline["sessions_lost"], offline["sessions_expired"]
    verdict = "broken" if lost else ("kept" if kept or expired else "not judged")
    return {"promise": "persistent session kept", "rule": SESSION_RULE, "allowed": "no limit on sessions applies",
            "kept": kept, "broken": lost, "name": "session_lost", "expired": expired, "verdict": verdict}


def _queue_delivered(plan: Mapping[str, Any], cycles: list[Mapping[str, Any]], limits: Mapping[str, Optional[int]]) -> dict[str, Any]:
    qos = min(int(plan["publishers"]["qos"]), int(plan["subscribers"]["qos"]))
    # Only the periods that came back into their session: a lost session's queue went with it
    # (counted under session_lost).
    resumed = [c for c in cycles if c["returned"] and c["session_present"]]
    owed = sum(int(c["owed"]) for c in resumed)
    delivered = sum(int(c["delivered"]) for c in resumed)
    known, limit = "queued_messages" in limits, limits.get("queued_messages")
    by_limit = 0
    if limit is not None:
        # What a session could not hold is the most the limit explains, period by period.
        by_limit = sum(min(int(c["owed"]) - int(c["delivered"]), max(0, int(c["owed"]) - limit)) for c in resumed)
    if not known:
        allowed = "the broker's queue limit is not known here"
    elif limit is None:
        allowed = "no queue limit configured"
    else:
        allowed = f"at most {limit} messages queued per session (configured)"
    verdict: dict[str, Any] = {"promise": "queued messages delivered", "allowed": allowed, "owed": owed, "kept": delivered,
                               "dropped_by_limit": by_limit, "limit": limit, "name": "queued_lost"}
    if qos == 0:
        return {**verdict, "rule": QOS0_RULE, "broken": 0, "verdict": "broker-specific"}
    lost = owed - delivered - by_limit
    return {**verdict, "rule": QUEUE_RULE.format(qos=qos), "broken": lost,
            "verdict": "broken" if lost else ("kept" if owed else "not judged")}
