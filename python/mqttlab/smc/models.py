"""Latency models: what a message's latency is, given its type and the load when it was sent.

Every model shares the paper's linear predictor over the terms of
``Latency ~ Msg + ActiveMsgs + TotalSubs + Subs`` (connect is the baseline message type, Subs is 0
for everything but publish) and differs in how latency is distributed around it:

* ``normal``     the paper's OLS. Its predictive draw is normal(x·b, residual sd) cut at 0; the
                 paper's own delay function (``delay="paper"``) uses sd = sqrt(sum (x_j se_j)^2)
                 instead, the spread of the *estimate*, not of latencies.
* ``lognormal``  OLS on log latency: never negative, right-skewed, multiplicative load effects.
* ``gamma``      gamma GLM with log link: never negative, constant coefficient of variation.
* ``empirical``  no shape assumed: quantiles of observed latency per message type and load bin.

Models draw latencies in two steps so that a simulation can draw all randomness up front:
``noise(rng, shape)`` gives standardised randomness, ``latency_us(noise, ...)`` maps it to
microseconds for a vector of messages. Models are saved as small JSON files.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from mqttlab.smc.log import MESSAGE_TYPES

MSG_CODE = {name: code for code, name in enumerate(MESSAGE_TYPES)}
TERMS = (
    "Intercept",
    "Msg[disconnect]",
    "Msg[publish]",
    "Msg[subscribe]",
    "Msg[unsubscribe]",
    "ActiveMsgs",
    "TotalSubs",
    "Subs",
)
_PUBLISH = MSG_CODE["publish"]


def design_matrix(msg: np.ndarray, active: np.ndarray, total_subs: np.ndarray, subs: np.ndarray) -> np.ndarray:
    """Rows of the regression's design matrix, in the order of TERMS."""
    msg = np.asarray(msg)
    x = np.zeros((msg.size, len(TERMS)))
    x[:, 0] = 1.0
    for code in range(1, len(MESSAGE_TYPES)):  # code 0, connect, is the baseline
        x[:, code] = msg == code
    x[:, 5] = active
    x[:, 6] = total_subs
    x[:, 7] = np.where(msg == _PUBLISH, subs, 0)
    return x


def frame_arrays(rows) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(msg code, ActiveMsgs, TotalSubs, Subs) of a log's rows."""
    msg = rows["Msg"].map(MSG_CODE).to_numpy(dtype=np.int64)
    return msg, rows["ActiveMsgs"].to_numpy(float), rows["TotalSubs"].to_numpy(float), rows["Subs"].to_numpy(float)


class LatencyModel(Protocol):
    kind: ClassVar[str]  # each model class names its kind once; as a class variable it matches them

    def noise(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray: ...

    def latency_us(
        self, noise: np.ndarray, msg: np.ndarray, active: np.ndarray, total_subs: np.ndarray, subs: np.ndarray
    ) -> np.ndarray: ...

    def to_json(self) -> dict[str, Any]: ...


def _linear(coef: list[float], msg, active, total_subs, subs) -> np.ndarray:
    # Written out instead of design_matrix @ coef: the simulator calls this once per step.
    b = coef
    per_type = np.array([b[0], b[0] + b[1], b[0] + b[2], b[0] + b[3], b[0] + b[4]])
    msg = np.asarray(msg)
    return per_type[msg] + b[5] * active + b[6] * total_subs + b[7] * np.where(msg == _PUBLISH, subs, 0)


@dataclass
class NormalModel:
    coef: list[float]
    stderr: list[float]
    sigma: float
    r_squared: float = float("nan")
    delay: str = "predictive"  # or "paper"
    kind: ClassVar[str] = "normal"

    def noise(self, rng, shape):
        return rng.standard_normal(shape)

    def latency_us(self, noise, msg, active, total_subs, subs):
        mean = _linear(self.coef, msg, active, total_subs, subs)
        if self.delay == "paper":
            se = np.asarray(self.stderr)
            msg = np.asarray(msg)
            msg_se = np.concatenate(([0.0], se[1:5]))[msg]
            publish_subs = np.where(msg == _PUBLISH, subs, 0)
            sd = np.sqrt(se[0] ** 2 + msg_se**2 + (active * se[5]) ** 2 + (total_subs * se[6]) ** 2 + (publish_subs * se[7]) ** 2)
        else:
            sd = self.sigma
        # A latency cannot be negative; the paper's normal can be, so it is cut at zero.
        return np.maximum(mean + sd * noise, 0.0)

    def paper_delay(self) -> NormalModel:
        return NormalModel(self.coef, self.stderr, self.sigma, self.r_squared, delay="paper")

    def to_json(self):
        return {"kind": self.kind, "terms": list(TERMS), **{k: v for k, v in asdict(self).items() if k != "delay"}}


@dataclass
class LogNormalModel:
    coef: list[float]  # on the log-microsecond scale
    stderr: list[float]
    sigma: float
    kind: ClassVar[str] = "lognormal"

    def noise(self, rng, shape):
        return rng.standard_normal(shape)

    def latency_us(self, noise, msg, active, total_subs, subs):
        return np.exp(_linear(self.coef, msg, active, total_subs, subs) + self.sigma * noise)

    def to_json(self):
        return {"kind": self.kind, "terms": list(TERMS), **asdict(self)}


@dataclass
class GammaModel:
    coef: list[float]  # log of the mean latency in microseconds
    stderr: list[float]
    shape: float
    kind: ClassVar[str] = "gamma"

    def noise(self, rng, shape):
        # Gamma(k, 1/k) has mean 1; scaling by the mean keeps the shape (the GLM's constant CV).
        return rng.gamma(self.shape, 1.0 / self.shape, shape)

    def latency_us(self, noise, msg, active, total_subs, subs):
        return np.exp(_linear(self.coef, msg, active, total_subs, subs)) * noise

    def to_json(self):
        return {"kind": self.kind, "terms": list(TERMS), **asdict(self)}


@dataclass
class EmpiricalModel:
    """Quantile tables of latency per message type, ActiveMsgs bin and (publish only) Subs bin.

    Loads beyond the highest observed bin reuse that bin: the model cannot extrapolate, and
    `validate` is where that shows.
    """

    active_edges: list[float]  # inner bin edges; bin = number of edges <= ActiveMsgs
    subs_edges: list[float]  # the same for the Subs of a publish (other messages count as 0)
    quantiles: list  # [message type][ActiveMsgs bin][Subs bin][level], levels evenly spaced on [0, 1]
    counts: list = field(default_factory=list)  # messages behind each cell; sparse cells are pooled
    kind: ClassVar[str] = "empirical"

    def __post_init__(self) -> None:
        self._table = np.asarray(self.quantiles, dtype=float)
        self._active_edges = np.asarray(self.active_edges, dtype=float)
        self._subs_edges = np.asarray(self.subs_edges, dtype=float)
        expected = (len(MESSAGE_TYPES), self._active_edges.size + 1, self._subs_edges.size + 1)
        if self._table.ndim != 4 or self._table.shape[:3] != expected:
            raise ValueError(f"'quantiles' must have the shape {expected} + (levels,), got {self._table.shape}")

    def noise(self, rng, shape):
        return rng.random(shape)

    def latency_us(self, noise, msg, active, total_subs, subs):
        msg = np.asarray(msg)
        levels = self._table.shape[3] - 1
        active_bin = np.searchsorted(self._active_edges, active, side="right")
        subs_bin = np.searchsorted(self._subs_edges, np.where(msg == _PUBLISH, subs, 0), side="right")
        position = np.asarray(noise) * levels
        low = np.minimum(position.astype(np.int64), levels - 1)
        frac = position - low
        cell = (msg, active_bin, subs_bin)
        # cell + (...) rather than (*cell, ...): mypy reads a starred index as 3.11-only syntax.
        return self._table[cell + (low,)] * (1.0 - frac) + self._table[cell + (low + 1,)] * frac

    def to_json(self):
        return {
            "kind": self.kind,
            "active_edges": self.active_edges,
            "subs_edges": self.subs_edges,
            "quantiles": self.quantiles,
            "counts": self.counts,
        }


MODEL_KINDS: dict[str, type[NormalModel | LogNormalModel | GammaModel | EmpiricalModel]] = {m.kind: m for m in (NormalModel, LogNormalModel, GammaModel, EmpiricalModel)}


def save_model(model: LatencyModel, path: Path, about: dict[str, Any] | None = None) -> None:
    data = model.to_json()
    if about:
        data["about"] = about
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


def load_model(path: Path) -> LatencyModel:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: cannot read the model ({error})") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind not in MODEL_KINDS:
        raise ValueError(f"{path}: 'kind' must be one of {', '.join(MODEL_KINDS)}, got {kind!r}")
    cls = MODEL_KINDS[kind]
    fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "kind"}
    if "coef" in cls.__dataclass_fields__ and len(fields.get("coef", [])) != len(TERMS):
        raise ValueError(f"{path}: 'coef' must have {len(TERMS)} values, one per term {', '.join(TERMS)}")
    try:
        return cls(**fields)
    except TypeError as error:
        raise ValueError(f"{path}: {error}") from None
