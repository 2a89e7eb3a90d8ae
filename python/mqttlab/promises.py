"""The protocol's promises about the state a broker keeps, judged from one run: for each, what the
spec promises (the rule, printed with the verdict), what the broker's configuration allows (its
documented limits, `Launcher.state_limits`), and what happened. A kept promise shows the count
that kept it; a broken one is named with its count; a message the broker dropped under a limit
it was configured with is "dropped by limit N", not loss (docs/state.md)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from mqttlab import restart_survival

SESSION_RULE = ("a client that reconnects with clean start 0 finds its session present (MQTT 3.1.1 §3.2.2.2; "
                "MQTT 5 §3.2.2.1.1, unless its session expiry ran out while it was away)")
QUEUE_RULE = ("every QoS {qos} message published to an offline session's subscription is delivered when the session "
              "returns (MQTT 3.1.1 §3.1.2.4, MQTT 5 §3.1.2.4), less what a configured queue limit drops and what its MQTT 5 "
              "message expiry let the broker discard while the session was away (MQTT 5 §3.3.2.3.3)")
QOS0_RULE = "QoS 0 messages for an offline session may be queued or dropped (MQTT 3.1.1 §3.1.2.4): broker-specific, not judged"
WILL_RULES = (
    ("will delivered on an ungraceful exit", "will_missing", "missing",
     "a client that leaves without DISCONNECT (closed, reset, or silent past 1.5 x its keep-alive) has its will published to every matching subscription "
     "(MQTT 3.1.1 §3.1.2.5, MQTT 5 §3.1.2.5)"),
    ("will delivered once", "will_duplicate", "duplicated", "each matching subscription gets the will of one exit once (at QoS 2; at QoS 1 at least once is allowed)"),
    ("no will after DISCONNECT", "will_unexpected", "unexpected",
     "a DISCONNECT (reason 0) discards the will without publishing it (MQTT 3.1.1 §3.14.4, MQTT 5 §3.1.2.5)"),
)
WILL_DELAY_RULE = ("will delay respected", "will_early", "early",
                   "the will is not published before its Will Delay Interval has passed after the exit (MQTT 5 §3.1.3.2.2)")
WILL_SILENT_RULE = ("silent client given up in time", "will_late", "late",
                    "a client silent for 1.5 x its keep-alive is disconnected as if the network failed, and its will published "
                    "(MQTT 3.1.1 §3.1.2.10, MQTT 5 §3.1.2.10): its will within 1.5 x the keep-alive (+ delay, + 0.1 s for the timers)")
TAKEOVER_CLOSE_RULE = ("a second connection with a connected client's id makes the broker close the existing connection "
                       "(MQTT 3.1.1 §3.1.4-2, MQTT 5 §3.1.4-3): closed within {limit:g} s of the new CONNACK")
TAKEOVER_SESSION_RULE = ("a connection with clean start 0 that takes a session over finds it present (MQTT 3.1.1 §3.2.2.2, "
                         "MQTT 5 §3.2.2.1.1)")
TAKEOVER_DELIVERY_RULE = ("the session moves to the new connection with the messages not yet acknowledged, which the broker sends "
                          "again (MQTT 3.1.1 §4.4, MQTT 5 §4.4): every QoS {qos} message delivered within the grace period "
                          "(the run's per-pair accounting; judged only when no connection was lost otherwise)")
RETAINED_RULES = (
    ("retained value delivered", "retained_missing", "missing",
     "a new subscription to a topic that holds a retained message gets that message (MQTT 3.1.1 §3.3.1.3, MQTT 5 §3.3.1.3)"),
    ("retained value is the latest", "stale_retained", "stale",
     "the retained message a subscription gets is the last one published with RETAIN to its topic (MQTT 3.1.1 §3.3.1.3, MQTT 5 §3.3.1.3)"),
    ("retained flag set", "retained_unflagged", "unflagged",
     "a retained message sent because of a new subscription has its RETAIN flag set (MQTT 3.1.1 §3.3.1.3, MQTT 5 §3.3.1.3)"),
)


def judge(plan: Mapping[str, Any], result: Mapping[str, Any], summary: Mapping[str, Any],
          limits: Optional[Mapping[str, Optional[int]]], restart_promises: Optional[Mapping[str, Any]] = None,
          broker: Optional[str] = None) -> list[dict[str, Any]]:
    """The run's promises about state, one verdict each; empty for a run that tested none.
    `limits`: the launched broker's documented state limits (None: not known, a broker by URL);
    `restart_promises`: what its documentation promises survives a restart (Launcher.restart_promises),
    for the broker named `broker`. An offline period or a retained read across a broker restart
    is judged by the broker's promises about restarts (mqttlab.restart_survival), the others by
    the protocol's."""
    verdicts = []
    restarts = [fault for fault in summary.get("faults") or [] if fault["kind"] == "broker-restart" and fault.get("applied")]
    cycles = result.get("offline") or []
    warmup_s = float(result.get("warmup_ms") or 0) / 1000
    across = [c for c in cycles if any(restart_survival.spans(c, fault, warmup_s) for fault in restarts)]
    offline = summary.get("offline")
    if offline and len(across) < len(cycles):
        kept = [c for c in cycles if c not in across]
        verdicts += [_session_kept(_without(plan, offline, across)), _queue_delivered(plan, kept, limits or {})]
    retained = summary.get("retained")
    read_after = restart_survival.read_after(plan, restarts, warmup_s)
    if retained and read_after is None:
        verdicts += _retained_read(retained)
    for fault in restarts:
        verdicts += restart_survival.judge(plan, fault, cycles, warmup_s, retained if fault is read_after else None,
                                           restart_promises or {}, broker)
    wills = summary.get("wills")
    if wills:
        verdicts += _wills(plan, wills)
    takeover = summary.get("takeover")
    if takeover:
        verdicts += _takeover(plan, summary, takeover)
    return verdicts


def broken(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdicts that name a broken promise."""
    return [v for v in verdicts if v["verdict"] == "broken"]


def verdict_text(verdict: Mapping[str, Any]) -> str:
    """A verdict with its counts, as tables and the storm print it: `kept (1000)`,
    `broken (0, queued_lost 1000)`, and what a configured limit dropped."""
    extra = f", {verdict['name']} {verdict['broken']}" if verdict.get("broken") else ""
    if verdict.get("dropped_by_limit"):
        extra += f", dropped by limit {verdict['limit']}: {verdict['dropped_by_limit']}"
    return f"{verdict['verdict']} ({verdict['kept']}{extra})"


RETAINED_DELETION_RULE = ("a retained PUBLISH with an empty payload removes the topic's retained message, and no empty one is stored "
                          "(MQTT 3.1.1 §3.3.1.3, MQTT 5 §3.3.1.3): a new subscription gets nothing for a deleted topic")


def _retained_read(retained: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The retained store as the subscribers read it: each value owed delivered, the latest one,
    flagged retained. No retained limit is known here: none is assumed."""
    delivered = retained["delivered"]
    kept = {"missing": delivered, "stale": delivered - retained["stale"], "unflagged": delivered - retained["unflagged"]}
    # Whether anything was there to judge: values owed for the first rule, values delivered for the others.
    judged = {"missing": retained["expected"], "stale": delivered, "unflagged": delivered}
    verdicts = [{"promise": promise, "rule": rule, "allowed": "no limit on retained messages is known here", "kept": max(kept[key], 0),
                 "broken": retained[key], "name": name, "verdict": "broken" if retained[key] else ("kept" if judged[key] else "not judged")}
                for promise, name, key, rule in RETAINED_RULES]
    deleted, not_deleted = retained.get("deleted", 0), retained.get("not_deleted", 0)
    if deleted:
        # Kept: the deleted topics that came to nothing (a topic can bring several messages: at least 0).
        verdicts.append({"promise": "retained deletion honoured", "rule": RETAINED_DELETION_RULE, "allowed": "no limit applies",
                         "kept": max(deleted - not_deleted, 0), "broken": not_deleted, "name": "retained_not_deleted",
                         "verdict": "broken" if not_deleted else "kept"})
    return verdicts


def _wills(plan: Mapping[str, Any], wills: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The wills the watchers got against the exits: owed once per ungraceful exit and watcher,
    never after DISCONNECT, not before the MQTT 5 delay."""
    will = plan["publishers"].get("will") or {}
    rules = list(WILL_RULES) + ([WILL_DELAY_RULE] if will.get("delay_s") else []) + ([WILL_SILENT_RULE] if will.get("leave") == "silent" else [])
    # What kept each promise: the wills delivered; the exits with DISCONNECT (none followed by a will).
    kept = {"missing": wills["delivered"], "duplicated": wills["delivered"], "unexpected": wills["graceful"],
            "early": wills["delivered"] - wills["early"], "late": wills["delivered"] - wills["late"]}
    out = []
    for promise, name, key, rule in rules:
        if name == "will_duplicate" and will.get("qos", 0) < 2:
            continue  # at QoS 0 and 1 a repeated will breaks no promise: the copies are counted in `wills`
        judged = wills["graceful"] if key == "unexpected" else wills["expected"]
        verdict = "broken" if wills[key] else ("kept" if judged else "not judged")
        out.append({"promise": promise, "rule": rule, "allowed": "no limit on wills applies", "kept": max(kept[key], 0), "broken": wills[key],
                    "name": name, "verdict": verdict})
    return out


def _takeover(plan: Mapping[str, Any], summary: Mapping[str, Any], t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A session taken over by a second connection: the old connection closed by the broker, the
    session present in the new one, and no QoS 1/2 message lost in the handover. The losses are
    the engine's `qos<N>_loss` count: it names losses only on a run that lost no connection
    otherwise, when they can be told from a broken link's."""
    lost = t["taken_over"] - t["session_present"]
    judged = t["taken_over"]
    qos = min(int(plan["publishers"]["qos"]), int(plan["subscribers"]["qos"]))
    messages_lost = sum(v["count"] for v in summary.get("violations") or [] if v["kind"] == f"qos{qos}_loss")
    delivery_judged = judged and qos >= 1 and summary["connections"]["lost"] == 0 and summary.get("status") == "completed"
    verdicts = [
        {"promise": "old connection closed on takeover", "rule": TAKEOVER_CLOSE_RULE.format(limit=t["close_limit_s"]),
         "allowed": "no limit applies", "kept": t["old_closed"], "broken": t["old_kept"], "name": "takeover_old_kept",
         "verdict": "broken" if t["old_kept"] else ("kept" if judged else "not judged")},
        {"promise": "session kept on takeover", "rule": TAKEOVER_SESSION_RULE, "allowed": "no limit on sessions applies",
         "kept": t["session_present"], "broken": lost, "name": "session_lost", "verdict": "broken" if lost else ("kept" if judged else "not judged")},
    ]
    if qos >= 1:
        verdicts.append({"promise": "nothing lost on takeover", "rule": TAKEOVER_DELIVERY_RULE.format(qos=qos), "allowed": "no limit on queues applies",
                         "kept": summary["messages"]["delivered"], "broken": messages_lost, "name": f"qos{qos}_loss",
                         "verdict": ("broken" if messages_lost else "kept") if delivery_judged else "not judged"})
    return verdicts


def _without(plan: Mapping[str, Any], offline: Mapping[str, Any], across: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The offline section's session counts less the periods away across a restart (judged by
    the restart's promises): those that found their session, and those that did not (counted
    lost, or expired when their MQTT 5 session expiry ran out while away, as the engine counts)."""
    mqtt = plan["mqtt"]
    returned = [c for c in across if c["returned"]]
    expired = sum(1 for c in returned if not c["session_present"] and mqtt["version"] == 5 and c["offline_s"] > mqtt["session_expiry_s"])
    lost = sum(1 for c in returned if not c["session_present"]) - expired
    present = sum(1 for c in returned if c["session_present"])
    return {**offline, "sessions_resumed": offline["sessions_resumed"] - present, "sessions_lost": offline["sessions_lost"] - lost,
            "sessions_expired": offline["sessions_expired"] - expired}


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
    # MQTT 5 message expiry: what expired in the broker while the subscriber was away is not owed.
    expired = sum(int(c.get("expired", 0)) for c in resumed)
    known, limit = "queued_messages" in limits, limits.get("queued_messages")
    by_limit = 0
    if limit is not None:
        # What a session could not hold is the most the limit explains, period by period: the
        # messages on their way at the DISCONNECT (`earlier`) took their places in the queue too.
        by_limit = sum(min(int(c["owed"]) - int(c["delivered"]) - int(c.get("expired", 0)), max(0, int(c["owed"]) + int(c["earlier"]) - limit))
                       for c in resumed)
    if not known:
        allowed = "the broker's queue limit is not known here"
    elif limit is None:
        allowed = "no queue limit configured"
    else:
        allowed = f"at most {limit} messages queued per session (configured)"
    verdict: dict[str, Any] = {"promise": "queued messages delivered", "allowed": allowed, "owed": owed, "kept": delivered,
                               "dropped_by_limit": by_limit, "limit": limit, "expired": expired, "name": "queued_lost"}
    if qos == 0:
        return {**verdict, "rule": QOS0_RULE, "broken": 0, "verdict": "broker-specific"}
    lost = owed - delivered - by_limit - expired
    return {**verdict, "rule": QUEUE_RULE.format(qos=qos), "broken": lost,
            "verdict": "broken" if lost else ("kept" if owed else "not judged")}
