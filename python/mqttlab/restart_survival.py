"""What of a broker's state survives a restart (the broker-restart fault, docs/faults.md), judged
against what the broker's documentation promises for its configuration and the way it was
stopped (`Launcher.restart_promises`, in the manifest's broker config):

- sessions: the subscribers away across the restart (their offline period began before the
  signal and ended after the broker had gone down, so on the restarted broker) find their session
  present on return;
- queued: the QoS 1/2 messages owed to them while away are delivered on their return;
- retained: a retained read after the restart gets every latest retained value.

The protocol leaves what survives a restart to the server, so each promise judged here is the
broker's own; one its documentation does not make is "not promised", its figures still shown
(docs/state.md, Persistence)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

#: the fault's signal: the key of Launcher.restart_promises, and how the summary says it
STOPS = {"term": ("clean", "clean stop (SIGTERM)"), "kill": ("crash", "crash (SIGKILL)")}
#: (the state, its promise, the name of a broken one)
STATE = (
    ("sessions", "sessions survive a restart", "restart_session_lost"),
    ("queued", "queued messages survive a restart", "restart_queued_lost"),
    ("retained", "retained messages survive a restart", "restart_retained_lost"),
)
WHAT = {
    "sessions": "a subscriber away across the restart finds its session present on return",
    "queued": "every QoS {qos} message owed to a subscriber away across the restart is delivered on its return",
    "retained": "a retained read after the restart gets the latest value of every retained topic",
}
#: what the protocol says, per state: neither MQTT 3.1.1 nor MQTT 5 speaks of a server restart
SPEC = {
    "sessions": ("the protocol does not speak of restarts: it requires session state kept while the session lasts "
                 "(MQTT 3.1.1 §3.1.2.4, §4.1; MQTT 5 §4.1.1) and notes, non-normatively, that hardware or software "
                 "failures may lose it and that volatile memory may hold it (MQTT 3.1.1 §4.1, §4.1.1; MQTT 5 §4.1.1, §4.1.2)"),
    "retained": ("the protocol does not speak of restarts: retained messages are no part of the session, and the server "
                 "SHOULD keep them until a client deletes them (MQTT 3.1.1 §4.1)"),
}
SPEC["queued"] = SPEC["sessions"]  # the QoS 1/2 messages queued for a session are its state (§3.1.2.4)
RULE = "what the broker's documentation promises to keep across a {stop} is there after it: {what}; {spec}"


def spans(cycle: Mapping[str, Any], fault: Mapping[str, Any], warmup_s: float) -> bool:
    """Whether an offline period was away across the restart: it left before the signal and came
    back after the broker had gone down (the signal plus `stopping_s`), so to the restarted broker.
    Not "after the broker served again" (`end_s`): that instant is the fault's own probe getting
    in, which a subscriber retrying at once may beat by milliseconds. A fault recorded without
    `stopping_s` falls back to `end_s`. The period's times count from the load's start, the
    fault's from the first measured second (warm-up negative)."""
    left = float(cycle["left_s"]) - warmup_s
    stopping = fault.get("stopping_s")
    down = float(fault["start_s"]) + float(stopping) if stopping is not None else float(fault["end_s"])
    return bool(cycle["returned"]) and left < float(fault["start_s"]) and left + float(cycle["offline_s"]) > down


def read_after(plan: Mapping[str, Any], restarts: Sequence[Mapping[str, Any]], warmup_s: float) -> Optional[Mapping[str, Any]]:
    """The restart a retained read follows, the latest one; None when the run has no retained
    read or none after a restart. A read asked for after the signal follows the restart even
    when the broker is still down then: its subscribers SUBSCRIBE once they are back in."""
    read = plan["subscribers"].get("retained")
    if not read:
        return None
    at_s = float(read["at_ms"]) / 1000 - warmup_s
    before = [fault for fault in restarts if float(fault["start_s"]) < at_s]
    return max(before, key=lambda fault: float(fault["start_s"])) if before else None


def judge(plan: Mapping[str, Any], fault: Mapping[str, Any], cycles: Sequence[Mapping[str, Any]], warmup_s: float,
          retained: Optional[Mapping[str, Any]], promises: Mapping[str, Any], broker: Optional[str]) -> list[dict[str, Any]]:
    """One verdict per state the run put across `fault` (an applied broker-restart of the summary's
    `faults`): the subscribers away across it, and `retained` (the summary's retained read, when it
    came after this restart)."""
    stop, stop_text = STOPS[fault.get("signal") or "kill"]
    qos = min(int(plan["publishers"]["qos"]), int(plan["subscribers"]["qos"]))
    across = [c for c in cycles if spans(c, fault, warmup_s)]
    counts: dict[str, tuple[int, int]] = {}
    if across:
        counts["sessions"] = (sum(1 for c in across if c["session_present"]), len(across))
        if qos >= 1:  # QoS 0 to an offline session is broker-specific even without a restart
            counts["queued"] = (sum(int(c["delivered"]) for c in across), sum(int(c["owed"]) for c in across))
    if retained:
        counts["retained"] = (int(retained["delivered"]) - int(retained["stale"]), int(retained["expected"]))
    verdicts = []
    for what, promise, name in STATE:
        if what not in counts:
            continue
        kept, of = counts[what]
        promised = (promises.get(stop) or {}).get(what)
        lost = of - kept
        if not of:
            verdict = "not judged"
        elif promised:
            verdict = "broken" if lost else "kept"
        else:
            verdict = "not promised"
        verdicts.append({
            "promise": promise, "name": name, "what": what, "stop": stop, "kept": kept, "of": of,
            "broken": lost if promised else 0, "lost": lost, "verdict": verdict,
            "rule": RULE.format(stop=stop_text, what=WHAT[what].format(qos=qos), spec=SPEC[what]),
            "allowed": _allowed(broker, promises, stop_text, promised),
            "source": promises.get("source") or "no documentation known here",
        })
    return verdicts


def _allowed(broker: Optional[str], promises: Mapping[str, Any], stop_text: str, promised: Optional[bool]) -> str:
    """What the broker's documentation says for this configuration and stop, in one phrase:
    "mosquitto persistence on, clean stop (SIGTERM): promised"."""
    name = broker or "the broker"
    if not promises:
        return f"{name}, {stop_text}: not known here (persistence set by a config file, or unknown to mqttlab)"
    persistence = "on" if promises.get("persistence") else "off"
    said = "promised" if promised else "documented lost" if promised is False else "not said"
    return f"{name} persistence {persistence}, {stop_text}: {said}"


def line(verdict: Mapping[str, Any]) -> str:
    """The verdict in one line: "queued 500 of 500 (mosquitto persistence on, clean stop (SIGTERM): promised ...)"."""
    return f"{verdict['what']} {verdict['kept']:,} of {verdict['of']:,} ({verdict['allowed']})"


def without_explained(violations: list[dict[str, Any]], verdicts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The engine's violations less the `session_lost` it counted for subscribers whose session
    went with a restart: the engine does not know of the restart, and such a loss is judged by
    the broker's promise about restarts (its verdict here), not by the protocol's session rule."""
    explained = sum(int(v["lost"]) for v in verdicts if v["name"] == "restart_session_lost")
    out = []
    for violation in violations:
        if violation["kind"] == "session_lost" and explained:
            left = int(violation["count"]) - explained
            if left <= 0:
                continue
            violation = {**violation, "count": left}
        out.append(violation)
    return out
