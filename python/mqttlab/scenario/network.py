"""The `network:` section: conditions of the link between the clients and the broker.

    network: {delay: 75ms, jitter: 5ms, loss: 2%, rate: 100kbit, queue: 64KB}
    network: {rate: 1mbit, down: {rate: 10mbit}}     # per direction where it matters
    network: {profile: wan-148ms}                     # a seed's link; keys given beside it win

Values at the top apply to each direction (so `delay: 75ms` adds 150 ms to a round trip);
`up:` (clients → broker) and `down:` (broker → clients) override them one by one. How the link is
built (tc netem, tbf, or the user-space emulator) is mqttlab.netem's business; docs/network.md."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from mqttlab.scenario.fields import Duration, Size

# tc spells kilobytes per second "kbps", which people read as kilobits: only unambiguous units here.
RATE_UNITS = {
    "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
    "b/s": 8, "kb/s": 8e3, "mb/s": 8e6, "gb/s": 8e9,
    "kib/s": 8 * 1024, "mib/s": 8 * 1024**2,
}  # fmt: skip
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z/]+)")


def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError("mqttlab", message)


def parse_rate(value: object) -> float:
    """Bits per second from "100kbit", "1mbit", "10KB/s" (bytes: 80 000 bit/s) or "1MiB/s"."""
    hint = 'a rate such as 100kbit, 1mbit, 10KB/s (bytes per second) or 1MB/s'
    if not isinstance(value, str):
        raise _problem(f"must be {hint}; a bare number is ambiguous (got {value!r})")
    match = _RATE.fullmatch(value.strip().lower())
    if match is None or match.group(2) not in RATE_UNITS:
        if match is not None and match.group(2) in ("kbps", "mbps", "bps", "gbps"):
            raise _problem(f"{match.group(2)!r} is ambiguous (tc reads it as bytes); write kbit or KB/s (got {value!r})")
        raise _problem(f"must be {hint} (got {value!r})")
    bits = float(match.group(1)) * RATE_UNITS[match.group(2)]
    if bits < 8000:
        raise _problem(f"must be at least 8kbit (1 KB/s) (got {value!r})")
    return bits


def format_rate(bits: float) -> str:
    for unit, factor in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits >= factor and (bits / factor).is_integer():
            return f"{int(bits / factor)}{unit}"
    return f"{bits:g}bit"


def parse_loss(value: object) -> float:
    """A fraction from "2%" or a number from 0 to 1."""
    if isinstance(value, bool):
        raise _problem(f'must be a percentage such as "2%" or a fraction from 0 to 1 (got {value!r})')
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            fraction = float(value.strip()[:-1]) / 100
        except ValueError:
            raise _problem(f'must be a percentage such as "2%" (got {value!r})') from None
    elif isinstance(value, (int, float)):
        fraction = float(value)
    else:
        raise _problem(f'must be a percentage such as "2%" or a fraction from 0 to 1 (got {value!r})')
    if not math.isfinite(fraction) or not 0 <= fraction <= 1:
        raise _problem(f"must be from 0% to 100% (got {value!r})")
    return fraction


Rate = Annotated[
    float,
    BeforeValidator(parse_rate),
    PlainSerializer(format_rate, return_type=str),
    WithJsonSchema({"type": "string", "description": 'Bits per second: "100kbit", "1mbit", or bytes: "10KB/s".'}),
]
Loss = Annotated[
    float,
    BeforeValidator(parse_loss),
    PlainSerializer(lambda f: f"{f * 100:g}%", return_type=str),
    WithJsonSchema({"anyOf": [{"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*%\s*$"}, {"type": "number", "minimum": 0, "maximum": 1}]}),
]


class LinkDirection(BaseModel):
    """Conditions of one direction; absent values fall back to the section's top level, then 0."""

    model_config = ConfigDict(extra="forbid")

    delay: Optional[Duration] = Field(default=None, description="One-way delay added to every packet")
    jitter: Optional[Duration] = Field(default=None, description="Each packet's delay varies by up to ± this (uniform)")
    loss: Optional[Loss] = Field(default=None, description='Random packet loss: "2%" or 0.02')
    rate: Optional[Rate] = Field(default=None, description='Bandwidth: "100kbit", "1mbit", "10KB/s"')
    queue: Optional[Size] = Field(default=None, description="Bytes that may wait for the rate limit; default 200 ms worth, at least 3000")


@dataclass(frozen=True)
class DirectionConditions:
    """One direction with every value resolved: seconds, fractions, bits per second, bytes."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    rate: Optional[float] = None
    queue: Optional[int] = None

    def is_impaired(self) -> bool:
        return bool(self.delay or self.jitter or self.loss)

    def queue_bytes(self) -> Optional[int]:
        """The queue in bytes: as asked, or 200 ms of the rate (at least two full packets)."""
        if self.rate is None:
            return None
        return self.queue if self.queue is not None else max(3000, int(self.rate / 8 * 0.2))


METHODS = ("auto", "netem", "tbf", "emulator")

#: The seeds' links as named conditions. Each value says where it comes from: a figure the seed
#: measured, or an assumption where the seed gives none (stated so in docs/network.md).
PROFILES: dict[str, dict[str, object]] = {
    # Seed 001's third environment: two hosts on a direct Cat 5 cable, iperf measured 94.5 Mbit/s.
    # The seed gives no latency; 0.1 ms each way is an assumption (a direct gigabit-class hop).
    "ethernet-100": {"rate": "94.5mbit", "delay": "0.1ms"},
    # Seed 001's second environment: residential 2.4 GHz Wi-Fi shared with other traffic. The
    # seed gives no figure; these are assumptions typical of such a link: 30 Mbit/s effective,
    # 2 ms each way with 1.5 ms of jitter, 0.1 % loss.
    "wifi": {"rate": "30mbit", "delay": "2ms", "jitter": "1.5ms", "loss": "0.1%"},
    # Seed 004: clients in Brazil, broker in AWS us-east-1, mean RTT 147.68 ms measured; the
    # clients' access link was 100 Mb/s up and 200 Mb/s down. No jitter or loss figure is given.
    "wan-148ms": {"delay": "73.84ms", "up": {"rate": "100mbit"}, "down": {"rate": "200mbit"}},
}


class NetworkConditions(LinkDirection):
    """Conditions between the clients and the broker (the broker runs in its own namespace)."""

    profile: Optional[Literal["ethernet-100", "wifi", "wan-148ms"]] = Field(
        default=None, description="A seed's link (docs/network.md): ethernet-100, wifi or wan-148ms; keys given beside it win"
    )
    up: Optional[LinkDirection] = Field(default=None, description="Clients → broker overrides")
    down: Optional[LinkDirection] = Field(default=None, description="Broker → clients overrides")
    reorder: bool = Field(default=False, description="Let jitter reorder packets; off = a packet never overtakes an earlier one")
    method: Literal["auto", "netem", "tbf", "emulator"] = Field(
        default="auto", description="auto = tc netem when the kernel has it, else the user-space emulator; tbf when only rate is asked"
    )

    def direction(self, name: Literal["up", "down"]) -> DirectionConditions:
        override = getattr(self, name) or LinkDirection()

        def pick(key: str) -> Any:  # the field's own type: a float, an int for queue, or None
            own = getattr(override, key)
            return own if own is not None else getattr(self, key)

        return DirectionConditions(
            delay=float(pick("delay") or 0.0),
            jitter=float(pick("jitter") or 0.0),
            loss=float(pick("loss") or 0.0),
            rate=pick("rate"),
            queue=pick("queue"),
        )

    @model_validator(mode="before")
    @classmethod
    def _apply_profile(cls, data: object) -> object:
        # A profile fills in what the section leaves out; up/down are merged key by key.
        if not isinstance(data, dict) or data.get("profile") not in PROFILES:
            return data
        merged = dict(PROFILES[data["profile"]])
        for key, value in data.items():
            if key in ("up", "down") and isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}  # type: ignore[dict-item]
            else:
                merged[key] = value
        return merged

    @model_validator(mode="after")
    def _consistent(self) -> "NetworkConditions":
        problems = []
        for name in ("up", "down"):
            d = self.direction(name)
            if d.jitter > d.delay:
                problems.append(f"{name}: jitter ({d.jitter * 1000:g}ms) must not exceed delay ({d.delay * 1000:g}ms)")
            if d.queue is not None and d.rate is None:
                problems.append(f"{name}: queue only applies together with a rate")
            if self.method == "tbf" and d.is_impaired():
                problems.append(f"{name}: method tbf can only limit the rate; delay, jitter and loss need netem or the emulator")
        if problems:
            raise _problem("; ".join(problems))
        return self
