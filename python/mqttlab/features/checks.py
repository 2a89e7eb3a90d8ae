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


def delivered_exactly(measured: Measured) -> Finding:
    """Every message owed delivered once: the engine's violations (QoS 1 loss, QoS 2 duplicate,
    ...) and any other loss or duplicate name what broke, with their counts."""
    refused = _refused(measured)
    if refused is not None:
        return refused
    summary = measured.summary or {}
    messages = summary.get("messages") or {}
    problems = [f"{v['kind']} {v['count']}" for v in summary.get("violations") or []]
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
    _exact("tls", "TLS", "QoS 1 over the launched broker's TLS listener, its certificate verified", {}, "tls"),
    _exact("websocket", "WebSocket", "QoS 1 over the launched broker's WebSocket listener (ws://HOST:PORT/mqtt)", {}, "websocket"),
)


def feature(key: str) -> Feature:
    """The feature of this key; a KeyError names the known ones."""
    for entry in FEATURES:
        if entry.key == key:
            return entry
    raise KeyError(f"unknown feature {key!r}; known: {', '.join(f.key for f in FEATURES)}")
