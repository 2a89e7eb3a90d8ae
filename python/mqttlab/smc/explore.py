"""explore: model-based tests against a real broker that produce the latency log `learn` reads.

A test case is one workload: N concurrent clients (N drawn per case from a range, as the paper's
3–100), each a random walk of L messages over the paper's client model (Fig. 3) with its
guards. Clients are synchronous: a client waits for the response to each message, and a publish
waits for its PUBACK and for the delivery to every client subscribed at that moment. By default
there is no think time and every enabled message is equally likely (the paper's logging phase).

The clients run in the Rust engine (`engine.smc_explore`), so latencies hold no Python
time. Each case is written with `mqttlab.smc.log.write_log` (``case-007.csv`` + sidecar); the
functional failures go into the sidecar under ``failures``, never into the latencies.
"""

from __future__ import annotations

import json
import re
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mqttlab import engine
from mqttlab.smc.broker import BrokerSource
from mqttlab.smc.hostload import NO_LOAD, HostLoad, HostLoadSampler
from mqttlab.smc.log import COLUMNS, MESSAGE_TYPES, CaseMeta, write_log

UNIFORM = {m: 1.0 for m in MESSAGE_TYPES}


@dataclass(frozen=True)
class WalkSettings:
    """How each client walks; shared by explore (timed log) and verify (usage profile)."""

    weights: dict[str, float] = field(default_factory=lambda: dict(UNIFORM))
    think_ms: tuple[float, float] = (0.0, 0.0)
    topics: int = 10
    payload_bytes: tuple[int, int] = (8, 100)
    timeout_ms: int = 5000

    def engine_fields(self) -> dict[str, Any]:
        return {
            "weights": [float(self.weights.get(m, 0.0)) for m in MESSAGE_TYPES],
            "think_ms": list(self.think_ms),
            "topics": self.topics,
            "payload_bytes": list(self.payload_bytes),
            "timeout_ms": self.timeout_ms,
        }


@dataclass(frozen=True)
class ClientRange:
    """Client counts of the cases: a fixed count, a uniform range ``3..100``, or a list."""

    choices: tuple[int, ...] = ()
    low: int = 3
    high: int = 100

    def draw(self, rng: np.random.Generator) -> int:
        if self.choices:
            return int(rng.choice(self.choices))
        return int(rng.integers(self.low, self.high + 1))


def parse_client_range(text: str) -> ClientRange:
    text = text.strip()
    match = re.fullmatch(r"(\d+)\s*\.\.\s*(\d+)", text)
    if match:
        low, high = int(match[1]), int(match[2])
        if not 1 <= low <= high:
            raise ValueError(f"--clients: range {text!r} must run upwards from at least 1")
        return ClientRange(low=low, high=high)
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise ValueError(f"--clients: {text!r} is not a count (5), a range (3..100) or a list (5,10,20)")
    return ClientRange(choices=tuple(int(p) for p in parts))


def parse_weights(text: str) -> dict[str, float]:
    """``publish=5,subscribe=3`` on top of uniform weights 1."""
    weights = dict(UNIFORM)
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in MESSAGE_TYPES:
            raise ValueError(f"--weights: {name!r} is not a message type ({', '.join(MESSAGE_TYPES)})")
        try:
            weights[name] = float(value)
        except ValueError:
            raise ValueError(f"--weights: {part!r} needs a number, like {name}=2") from None
        if not weights[name] >= 0:
            raise ValueError(f"--weights: {name} must be >= 0")
    return weights


def parse_think(text: str) -> tuple[float, float]:
    """Think time ``MIN..MAX`` in ms (``0..500``), or one number for a fixed wait."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:\.\.\s*(\d+(?:\.\d+)?))?\s*", text)
    try:
        low = float(match[1]) if match else -1.0
        high = float(match[2]) if match and match[2] else low
    except ValueError:
        low = high = -1.0
    if not 0 <= low <= high:
        raise ValueError(f"--think: {text!r} must be MIN..MAX in ms with 0 <= MIN <= MAX, like 0..500")
    return low, high


def run_id() -> str:
    """A tag that keeps this run's client ids and topics apart from anyone else's on the broker."""
    return secrets.token_hex(4)


def engine_config(host: str, port: int, clients: int, messages: int, seed: int, walk: WalkSettings, tag: str) -> dict[str, Any]:
    return {
        "host": host,
        "port": port,
        "clients": clients,
        "messages": messages,
        "seed": seed,
        "topic_prefix": f"mqttlab/smc/{tag}",
        "client_prefix": f"smc-{tag}",
        **walk.engine_fields(),
    }


@dataclass(frozen=True)
class CaseResult:
    rows: pd.DataFrame  # the log columns plus client, k, sent_ms
    failures: list[dict[str, Any]]
    status: str
    elapsed_s: float


def run_case(
    host: str,
    port: int,
    clients: int,
    length: int,
    seed: int,
    walk: WalkSettings = WalkSettings(),
    *,
    kill_subscriber: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> CaseResult:
    """One test case on the engine: `clients` walks of `length` messages."""
    config = engine_config(host, port, clients, length, seed, walk, run_id())
    if kill_subscriber is not None:
        config["kill_subscriber"] = kill_subscriber
    out = engine.smc_explore(config, progress)
    rows = pd.DataFrame(out["rows"], columns=["client", "k", "sent_ms", *COLUMNS])
    for column in ("MsgSize", "Subs", "Receivers", "Latency_us"):
        rows[column] = pd.array(rows[column], dtype="Int64")  # empty, not NaN, when absent
    return CaseResult(rows=rows, failures=out["failures"], status=out["status"], elapsed_s=out["elapsed_s"])


@dataclass(frozen=True)
class ExploreSummary:
    cases: list[Path]
    messages: int
    failures: Counter
    elapsed_s: float
    host_load: HostLoad = NO_LOAD
    broker_config: dict[str, Any] = field(default_factory=dict)


def explore(
    broker: str,
    out: Path,
    *,
    cases: int = 100,
    clients: ClientRange = ClientRange(),
    length: int = 50,
    seed: int = 0,
    walk: WalkSettings = WalkSettings(),
    fresh_broker: bool = True,
    broker_config: str | None = None,
    first_case: int = 0,
    on_case: Callable[[int, int, CaseResult], None] | None = None,
) -> ExploreSummary:
    """Runs `cases` test cases and writes one log per case into `out`.

    `first_case` numbers the logs on from an earlier call into the same folder (explore in rounds);
    the host's CPU load is sampled while the cases run and written to ``explore.json``."""
    if cases < 1 or length < 1:
        raise ValueError("cases and length must be at least 1")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written: list[Path] = []
    failures: Counter[str] = Counter()  # outcome -> count
    messages, elapsed = 0, 0.0
    with BrokerSource(broker, out / "brokers", fresh=fresh_broker, config=broker_config) as source, \
            HostLoadSampler() as sampler:
        for index in range(first_case, first_case + cases):
            count = clients.draw(rng)
            case_seed = int(rng.integers(0, 2**63))
            with source.replication() as running:
                result = run_case(running.host, running.port, count, length, case_seed, walk)
            path = out / f"case-{index:03d}.csv"
            meta = CaseMeta(
                broker=source.label,
                clients=count,
                seed=case_seed,
                extra={
                    "broker_version": source.version,
                    "broker_config": source.config_record(),
                    "fresh_broker": source.fresh,
                    "length": length,
                    "weights": walk.weights,
                    "think_ms": list(walk.think_ms),
                    "topics": walk.topics,
                    "timeout_ms": walk.timeout_ms,
                    "status": result.status,
                    "elapsed_s": result.elapsed_s,
                    "failures": result.failures,
                },
            )
            write_log(path, result.rows, meta)
            written.append(path)
            messages += len(result.rows)
            failures.update(f["outcome"] for f in result.failures)
            elapsed += result.elapsed_s
            if on_case is not None:
                on_case(index, count, result)
            if result.status == "interrupted":
                break
    load = sampler.result or NO_LOAD
    summary = {"broker": broker, "broker_config": source.config_record(), "cases": len(written), "messages": messages,
               "failures": dict(failures), "seed": seed, "host_cpu": load.to_dict()}
    (out / "explore.json").write_text(json.dumps(summary, indent=2) + "\n")
    return ExploreSummary(cases=written, messages=messages, failures=failures, elapsed_s=elapsed, host_load=load,
                          broker_config=source.config_record())
