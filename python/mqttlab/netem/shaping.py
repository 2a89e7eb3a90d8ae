"""How the asked conditions become kernel qdiscs or the emulator's config, and which of those this
machine uses (the method)."""

from __future__ import annotations

from typing import Any

from mqttlab.netem.capability import Capabilities
from mqttlab.netem.commands import NetemError
from mqttlab.scenario.network import DirectionConditions, NetworkConditions

MTU = 1500
ETHERNET_HEADER = 14


def choose_method(conditions: NetworkConditions, caps: Capabilities) -> str:
    """"netem", "tbf", "emulator" or "none" (a plain veth: nothing asked)."""
    up, down = conditions.direction("up"), conditions.direction("down")
    impaired = up.is_impaired() or down.is_impaired()
    limited = up.rate is not None or down.rate is not None
    asked = conditions.method
    if asked == "emulator":
        return "emulator"
    if asked == "netem":
        if not caps.netem:
            raise NetemError(f"method netem was asked, but this kernel has no netem qdisc ({caps.netem_error}); use method: auto or emulator")
        return "netem"
    if asked == "tbf" or not impaired:
        if limited and not caps.tbf:
            raise NetemError("this kernel has no tbf qdisc; use method: emulator")
        return "tbf" if limited else "none"
    # netem lets jitter reorder packets; when order must be kept, the emulator can do it.
    keeps_order = conditions.reorder or not (up.jitter or down.jitter)
    return "netem" if caps.netem and keeps_order else "emulator"


def tbf_args(d: DirectionConditions) -> list[str]:
    assert d.rate is not None
    # A burst of a few milliseconds of traffic (at least two full frames) keeps the rate smooth.
    burst = max(2 * (MTU + ETHERNET_HEADER), int(d.rate / 8 * 0.004))
    return ["tbf", "rate", f"{int(d.rate)}bit", "burst", str(burst), "limit", str(d.queue_bytes())]


def netem_args(d: DirectionConditions) -> list[str]:
    args = ["netem", "delay", f"{int(d.delay * 1e6)}us"]
    if d.jitter:
        args.append(f"{int(d.jitter * 1e6)}us")
    if d.loss:
        args += ["loss", f"{d.loss * 100:g}%"]
    if d.rate is not None:
        # netem queues packets, not bytes.
        args += ["rate", f"{int(d.rate)}bit", "limit", str(max(2, (d.queue_bytes() or 0) // MTU))]
    return args


def qdisc_args(method: str, d: DirectionConditions) -> list[str] | None:
    if method == "netem" and (d.is_impaired() or d.rate is not None):
        return netem_args(d)
    if method in ("tbf", "netem") and d.rate is not None:
        return tbf_args(d)
    return None


def emulator_direction(d: DirectionConditions, reorder: bool) -> dict[str, Any]:
    return {
        "delay_us": int(round(d.delay * 1e6)),
        "jitter_us": int(round(d.jitter * 1e6)),
        "loss": d.loss,
        "rate_bps": int(d.rate or 0),
        "queue_bytes": int(d.queue_bytes() or 0),
        "reorder": reorder,
    }
