"""The features a broker probe checks, one entry each: the settings of the tiny run that exercises
it, and the rule, printed with the result, that judges that run's summary.

A new feature (an MQTT 5 one: topic aliases, receive maximum, message expiry, ...) is one more
entry of FEATURES: what its run does, its scenario settings (`{t}` stands for the probe's own topic
prefix), and its rule with the judge that applies it, mostly one of those below. The probe (features/probe.py) runs the entries in order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Optional

Result = Literal["supported", "refused", "broken", "not probed"]
Listener = Literal["plain", "tls", "websocket"]


@dataclass(frozen=True)
class Measured:
    """What one check's run gave: its summary, or the one-line reason the broker refused or closed
    its clients' connections, which stopped the run (then `summary` is None)."""

    summary: Optional[Mapping[str, Any]]
    refusal: Optional[str] = None


@dataclass(frozen=True)
class Finding:
    """One feature's result: `reason` says why it was refused, the violation and its count when
    broken, or why it was not probed (empty when supported); `evidence` is the measured count
    behind the result."""

    result: Result
    reason: str
    evidence: str


Judge = Callable[[Measured], Finding]


@dataclass(frozen=True)
class Feature:
    """One row of the matrix: `what` its run does, the `rule` its `judge` applies. `settings` are
    scenario fields ({dotted path: value}) over the probe's small base run (features/probe.py);
    `listener` is the broker's listener the clients use."""

    key: str
    name: str
    what: str
    rule: str
    settings: Mapping[str, Any]
    judge: Judge
    listener: Listener = "plain"


# --- judges --------------------------------------------------------------------------------------


def _refused(measured: Measured) -> Optional[Finding]:
    """Refused when the broker turned the clients away: the connect itself, or some clients'
    connections or subscriptions (SUBACK failure) while the others ran."""
    if measured.refusal is not None:
        return Finding("refused", measured.refusal, "the run stopped there: no summary")
    summary = measured.summary or {}
    connections = summary.get("connections") or {}
    failed = sum((connections.get(role) or {}).get("failed", 0) for role in ("publishers", "subscribers"))
    if failed:
        clients = failed + sum((connections.get(role) or {}).get("ok", 0) for role in ("publishers", "subscribers"))
        examples = "; ".join(str(error.get("example", error.get("kind"))) for error in summary.get("errors") or [])
        return Finding("refused", examples or "clients failed to connect", f"{failed} of {clients} clients failed")
    return None


def _delivery(summary: Mapping[str, Any]) -> str:
    messages = summary.get("messages") or {}
    return f"{messages.get('delivered', 0)} of {messages.get('expected', 0)} delivered, {messages.get('duplicated', 0)} duplicated"


def _ended_early(summary: Mapping[str, Any]) -> list[str]:
    """A run the broker cut short (a connection lost, a malformed packet): what ended it."""
    status = summary.get("status")
    if status in (None, "completed"):
        return []
    protocol = [str(e.get("example")) for e in summary.get("errors") or [] if e.get("kind") == "protocol"]
    return [f"run {status}: {(protocol or [summary.get('error') or ''])[0]}"]


def delivered_exactly(measured: Measured) -> Finding:
    """Every message owed delivered once: the engine's violations (QoS 1 loss, QoS 2 duplicate,
    ...) and any other loss or duplicate name what broke, with their counts."""
    refused = _refused(measured)
    if refused is not None:
        return refused
    summary = measured.summary or {}
    messages = summary.get("messages") or {}
    problems = [f"{v['kind']} {v['count']}" for v in summary.get("violations") or []] + _ended_early(summary)
    if not problems:  # a QoS 0 loss or a QoS 1 duplicate is no violation of its own: still not exact
        problems += [f"{key} {messages[key]}" for key in ("lost", "duplicated") if messages.get(key)]
    if not messages.get("expected"):
        problems.append("nothing was owed to the subscribers")
    if problems:
        return Finding("broken", "; ".join(problems), _delivery(summary))
    return Finding("supported", "", _delivery(summary))


def split_over_group(measured: Measured) -> Finding:
    """A shared subscription: each message to one member of the group. A broker that accepts the
    $share filter and delivers nothing took it for a plain filter: it has no shared subscriptions."""
    refused = _refused(measured)
    if refused is not None:
        return refused
    summary = measured.summary or {}
    messages = summary.get("messages") or {}
    if messages.get("expected") and not messages.get("received"):
        return Finding("refused", "SUBSCRIBE to $share/... accepted, but no message came: the filter was taken literally", _delivery(summary))
    return delivered_exactly(measured)


def promises_kept(*names: str) -> Judge:
    """Judged by the run's verdicts on the protocol's promises about state (mqttlab.promises),
    those named: broken when one is broken (named with its count), supported when each was kept."""

    def judge(measured: Measured) -> Finding:
        refused = _refused(measured)
        if refused is not None:
            return refused
        verdicts = {v["name"]: v for v in (measured.summary or {}).get("promises") or []}
        chosen = [verdicts[name] for name in names if name in verdicts]
        # What kept a promise is counted its own way (wills delivered, exits with DISCONNECT): no ratio.
        evidence = "; ".join(f"{v['promise']}: kept {v['kept']}, broken {v['broken']}" for v in chosen) or "no verdict"
        broken = [f"{v['name']} {v['broken']}" for v in chosen if v["verdict"] == "broken"]
        if broken:
            return Finding("broken", "; ".join(broken), evidence)
        unjudged = [name for name in names if name not in verdicts or verdicts[name]["verdict"] != "kept"]
        if unjudged:
            return Finding("broken", f"nothing to judge {', '.join(unjudged)} by", evidence)
        return Finding("supported", "", evidence)

    return judge


def announced_and_exact(limit: str, absent: str) -> Judge:
    """An MQTT 5 feature the broker offers in its CONNACK (`broker_limits[limit]`): refused when it
    announced none (`absent` says what that means), else judged as exact delivery."""

    def judge(measured: Measured) -> Finding:
        refused = _refused(measured)
        if refused is not None:
            return refused
        limits = (measured.summary or {}).get("broker_limits") or {}
        if not limits.get(limit):
            return Finding("refused", absent, f"CONNACK {limit}: {limits.get(limit)}")
        return delivered_exactly(measured)

    return judge


def round_trips_exact(measured: Measured) -> Finding:
    """Request/response: every request answered once, no violation (a Response Topic dropped or a
    Correlation Data changed is one)."""
    refused = _refused(measured)
    if refused is not None:
        return refused
    summary = measured.summary or {}
    trips = summary.get("round_trip") or {}
    evidence = f"{trips.get('replies', 0)} of {trips.get('sent', 0)} requests answered"
    problems = [f"{v['kind']} {v['count']}" for v in summary.get("violations") or []]
    if trips.get("lost"):
        problems.append(f"unanswered {trips['lost']}")
    if problems or not trips.get("sent"):
        return Finding("broken", "; ".join(problems) or "nothing was sent", evidence)
    return Finding("supported", "", evidence)


def nothing_retained(measured: Measured) -> Finding:
    """Retain Handling 2: the store's messages never sent at the subscribe."""
    refused = _refused(measured)
    if refused is not None:
        return refused
    summary = measured.summary or {}
    problems = [f"{v['kind']} {v['count']}" for v in summary.get("violations") or []]
    retained = (summary.get("messages") or {}).get("retained", 0)
    evidence = f"{retained} retained messages at the subscribe"
    return Finding("broken", "; ".join(problems), evidence) if problems else Finding("supported", "", evidence)


# --- the features --------------------------------------------------------------------------------

EXACT = ("supported when every client connects and each message reaches each subscriber owed it once; "
         "broken with the engine's violations (QoS 1 loss, QoS 2 duplicate, ...) or any loss or duplicate and their counts; "
         "refused when the broker turns the connection or subscription away (its reason)")
STATE = ("supported when the promises named are kept (mqttlab.promises, docs/state.md: their rules are printed with every run's summary); "
         "broken with the promise broken and its count")


def _exact(key: str, name: str, what: str, settings: Mapping[str, Any], listener: Listener = "plain") -> Feature:
    return Feature(key, name, what, EXACT, settings, delivered_exactly, listener)


def _will(key: str, name: str, leave: str, how: str, promise: str, promised: str) -> Feature:
    """A will check: one of 2 publishers, with a QoS 1 will, leaves (publishers.will.leave) half a second in."""
    return Feature(key, name, f"one of 2 publishers, with a QoS 1 will, {how} at 0.5 s (promise {promise}: {promised})", STATE,
                   {"publishers.messages": None, "publishers.rate": 10, "load.duration": "1.5s", "subscribers.filters": ["{t}/#"],
                    "publishers.will": {"topic": "{t}/will/%i", "qos": 1, "leave": leave, "at": "0.5s", "fraction": 0.5}},
                   promises_kept(promise))


FEATURES: tuple[Feature, ...] = (
    _exact("mqtt-3.1.1", "MQTT 3.1.1", "QoS 1 over MQTT 3.1.1", {"mqtt.version": 3}),
    _exact("mqtt-5", "MQTT 5", "QoS 1 over MQTT 5 (on the broker's MQTT 5 listener where it has one of its own)", {"mqtt.version": 5}),
    _exact("qos0", "QoS 0", "QoS 0 (at most once allows a loss, but none is expected of a handful of messages on loopback)", {"publishers.qos": 0}),
    _exact("qos1", "QoS 1", "QoS 1", {"publishers.qos": 1}),
    _exact("qos2", "QoS 2", "QoS 2", {"publishers.qos": 2}),
    _exact("wildcard-plus", "wildcard +", "publishers on P/%i/v, subscribers on P/+/v (P: the probe's topic prefix)",
           {"publishers.topic": "{t}/%i/v", "subscribers.filters": ["{t}/+/v"]}),
    _exact("wildcard-hash", "wildcard #", "publishers on P/%i/v, subscribers on P/#",
           {"publishers.topic": "{t}/%i/v", "subscribers.filters": ["{t}/#"]}),
    Feature("shared", "shared subscription", "the 2 subscribers share $share/g/P/#",
            "supported when each message reaches exactly one member of the group (exact delivery to the group; the split over "
            "its members is not measured yet); refused when the SUBSCRIBE is refused, or accepted and no message arrives (the "
            "filter taken literally, as brokers without shared subscriptions do)",
            {"subscribers.filters": ["$share/g/{t}/#"]}, split_over_group),
    Feature("retained", "retained message",
            "each publisher retains 2 updates; the subscribers subscribe 0.5 s later (promises retained_missing, stale_retained, "
            "retained_unflagged: each topic's latest value delivered, flagged RETAIN)", STATE,
            {"publishers.retain": True, "publishers.messages": 2, "subscribers.retained": {"at": "0.5s"}, "load.duration": "1.5s"},
            promises_kept("retained_missing", "stale_retained", "retained_unflagged")),
    Feature("persistent-session", "persistent session",
            "QoS 1 subscribers with clean start 0 leave at 0.5 s for 0.7 s while the publishers go on at 10 msg/s (promises "
            "session_lost, queued_lost: the session present on return, every message queued meanwhile delivered)", STATE,
            {"mqtt.clean_start": False, "publishers.messages": None, "publishers.rate": 10, "load.duration": "2s",
             "subscribers.offline": {"at": "0.5s", "duration": "0.7s"}},
            promises_kept("session_lost", "queued_lost")),
    _will("will", "will on ungraceful exit", "close", "closes its socket without DISCONNECT", "will_missing", "both subscribers get the will"),
    _will("no-will-after-disconnect", "no will after DISCONNECT", "graceful", "leaves with DISCONNECT", "will_unexpected",
          "no subscriber gets its will"),
    Feature("topic-alias", "topic aliases", "MQTT 5: publishers name their topic once, then by alias; subscribers accept 5 aliases",
            "refused when the broker's CONNACK accepts no alias (Topic Alias Maximum absent or 0); else " + EXACT,
            {"mqtt.version": 5, "mqtt.topic_alias_maximum": 5},
            announced_and_exact("topic_alias_maximum", "its CONNACK accepts no topic alias (Topic Alias Maximum absent or 0)")),
    _exact("receive-maximum", "receive maximum", "MQTT 5, QoS 1: subscribers announce a Receive Maximum of 2 (more unacknowledged "
           "is the violation receive_maximum_exceeded)", {"mqtt.version": 5, "mqtt.receive_maximum": 2}),
    _exact("message-expiry", "message expiry", "MQTT 5: every message with a 60 s expiry, delivered with what is left of it "
           "(violations expiry_interval_missing, expiry_interval_not_reduced)", {"mqtt.version": 5, "publishers.message_expiry": "60s"}),
    Feature("request-response", "request/response", "MQTT 5: each request names its Response Topic and carries Correlation Data; "
            "the subscribers answer on it", "supported when every request is answered once with its correlation; broken with the "
            "violations (response_topic_missing, correlation_data_changed) or the requests unanswered",
            {"mqtt.version": 5, "publishers.reply_filter": "{t}/reply/%i", "publishers.request_response": True,
             "publishers.topic": "{t}/req/%i", "subscribers.filters": ["{t}/req/#"]}, round_trips_exact),
    _exact("user-properties", "user properties", "MQTT 5: 2 user properties and a content type on every message, passed on unchanged "
           "(violations user_properties_changed, content_type_changed)",
           {"mqtt.version": 5, "publishers.user_properties": {"count": 2, "size": 8}, "publishers.content_type": "application/x-probe"}),
    _exact("subscription-id", "subscription identifiers", "MQTT 5: each subscription's identifier on every delivery "
           "(violations subscription_identifier_missing, subscription_identifier_wrong)",
           {"mqtt.version": 5, "subscribers.subscription_identifier": True}),
    _exact("no-local", "no local", "MQTT 5: each publisher subscribes to its own topic with No Local (violation no_local_delivered)",
           {"mqtt.version": 5, "publishers.no_local": True}),
    _exact("retain-as-published", "retain as published", "MQTT 5: live retained messages keep their RETAIN flag "
           "(violation retain_as_published_ignored)", {"mqtt.version": 5, "publishers.retain": True, "subscribers.retain_as_published": True}),
    Feature("retain-handling", "retain handling 2", "MQTT 5: a late subscription with Retain Handling 2 gets nothing from the store",
            "supported when no retained message comes; broken with the violation retained_despite_retain_handling",
            {"mqtt.version": 5, "publishers.retain": True, "publishers.messages": 2, "subscribers.retained": {"at": "0.5s"},
             "subscribers.retain_handling": 2, "load.duration": "1.5s"}, nothing_retained),
    _exact("tls", "TLS", "QoS 1 over the launched broker's TLS listener, its certificate verified", {}, "tls"),
    _exact("websocket", "WebSocket", "QoS 1 over the launched broker's WebSocket listener (ws://HOST:PORT/mqtt)", {}, "websocket"),
)


def feature(key: str) -> Feature:
    """The feature of this key; a KeyError names the known ones."""
    for entry in FEATURES:
        if entry.key == key:
            return entry
    raise KeyError(f"unknown feature {key!r}; known: {', '.join(f.key for f in FEATURES)}")
