"""The paper's rule for how much to explore: grow the data set until R² stops rising.

"The required number of test cases was determined by stepwise increasing the dataset and by
executing the regression, until there was no more increase in the R²-score." Here a *round* adds
some test cases; after each round the paper's OLS (``Latency ~ Msg + ActiveMsgs + TotalSubs +
Subs`` after dropping the top 5 % per message type) is refitted on everything so far. Growth stops
at the first round whose R² is not above the best R² before it by more than `tolerance`.

Why a tolerance: adding data moves a sample R² up or down by chance (by about 1/sqrt(rows)), so
"no more increase" taken literally stops at the first unlucky round. The default 0.005 (half a
percentage point of explained variance) is above that noise for rounds of thousands of messages
and far below the rises that a wider range of loads produces.

Rounds come from an iterable that is consumed lazily: exploring live, a round is only run when
the rule asks for it. What was explored is all kept (more data never hurts the fit); the rule
decides only when to stop exploring.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mqttlab.smc.explore import ClientRange, WalkSettings, explore
from mqttlab.smc.hostload import NO_LOAD, HostLoad
from mqttlab.smc.learn import LearnError, fit_normal, remove_outliers
from mqttlab.smc.log import ExploreLog, read_log

TOLERANCE = 0.005
MAX_ROUNDS = 20


@dataclass(frozen=True)
class GrowthRound:
    round: int
    cases: int  # cases so far
    messages: int  # successful messages so far
    r_squared: float  # NaN while some message type is still too rare to fit
    gain: float  # R² minus the best R² of the rounds before (NaN for the first)


@dataclass
class Growth:
    rounds: list[GrowthRound]
    logs: list[ExploreLog]
    stopped: str  # "plateau", "max rounds" or "exhausted" (the stream had no more rounds)
    tolerance: float

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.__dict__ for r in self.rounds])

    def records(self) -> list[dict]:
        """The rounds as JSON-ready dicts (an R² not fittable yet is null)."""
        return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.__dict__.items()}
                for r in self.rounds]

    def to_dict(self) -> dict:
        return {"rule": "refit the paper's OLS after each round; stop when R² rises by no more than the tolerance",
                "tolerance": self.tolerance, "stopped": self.stopped, "rounds": self.records()}

    def describe(self) -> str:
        last = self.rounds[-1] if self.rounds else None
        if last is None:
            return "no round was explored"
        why = {
            "plateau": f"R² rose by {last.gain:+.4f} ≤ {self.tolerance:g} in the last round",
            "max rounds": "the round limit was reached while R² still rose",
            "exhausted": "the logs ran out while R² still rose",
        }[self.stopped]
        return f"{len(self.rounds)} rounds, {last.cases} cases, R² = {last.r_squared:.4f}: stopped because {why}"


def paper_r_squared(logs: list[ExploreLog]) -> float:
    """R² of the paper's OLS on every successful message of `logs`, after its outlier rule."""
    rows = pd.concat([log.ok_rows for log in logs], ignore_index=True)
    try:
        return fit_normal(remove_outliers(rows))[0].r_squared
    except LearnError:
        return math.nan  # a message type is still missing: not fittable yet, keep growing


def grow_until_plateau(
    rounds: Iterable[list[ExploreLog]],
    *,
    tolerance: float = TOLERANCE,
    max_rounds: int = MAX_ROUNDS,
    on_round: Callable[[GrowthRound], None] | None = None,
) -> Growth:
    """Takes rounds until R² stops rising by more than `tolerance` (or `max_rounds`)."""
    if not tolerance >= 0:
        raise ValueError(f"--r2-tolerance must be >= 0, got {tolerance!r}")
    if max_rounds < 2:
        raise ValueError(f"--max-rounds must be at least 2 (a rise needs two rounds), got {max_rounds!r}")
    logs: list[ExploreLog] = []
    history: list[GrowthRound] = []
    best = -math.inf
    stopped = "exhausted"
    iterator: Iterator[list[ExploreLog]] = iter(rounds)
    while len(history) < max_rounds:
        batch = next(iterator, None)
        if batch is None:
            break
        logs.extend(batch)
        r2 = paper_r_squared(logs)
        gain = r2 - best if math.isfinite(best) and math.isfinite(r2) else math.nan
        record = GrowthRound(len(history) + 1, len(logs), sum(len(log.ok_rows) for log in logs), r2, gain)
        history.append(record)
        if on_round is not None:
            on_round(record)
        if math.isfinite(gain) and gain <= tolerance:
            stopped = "plateau"
            break
        if math.isfinite(r2):
            best = max(best, r2)
    else:
        stopped = "max rounds"
    return Growth(rounds=history, logs=logs, stopped=stopped, tolerance=tolerance)


def rounds_of(logs: list[ExploreLog], cases_per_round: int) -> Iterator[list[ExploreLog]]:
    """Logs already explored, `cases_per_round` at a time in their order (replaying the rule)."""
    if cases_per_round < 1:
        raise ValueError(f"--round-cases must be at least 1, got {cases_per_round!r}")
    for start in range(0, len(logs), cases_per_round):
        yield logs[start : start + cases_per_round]


@dataclass
class LiveRounds:
    """Explores a round of cases each time the rule asks for one, into one folder."""

    broker: str
    out: Path
    cases_per_round: int
    clients: ClientRange = ClientRange()
    length: int = 50
    seed: int = 0
    walk: WalkSettings = WalkSettings()
    fresh_broker: bool = True
    broker_config: str | None = None
    on_case: Callable | None = None
    host_load: HostLoad = NO_LOAD
    messages: int = 0
    failures: Counter = field(default_factory=Counter)
    broker_record: dict = field(default_factory=dict)

    def __iter__(self) -> Iterator[list[ExploreLog]]:
        if self.cases_per_round < 1:
            raise ValueError(f"--round-cases must be at least 1, got {self.cases_per_round!r}")
        done = 0
        for index in range(MAX_ROUNDS * 100):
            summary = explore(
                self.broker, self.out, cases=self.cases_per_round, clients=self.clients, length=self.length,
                # Each round draws fresh workloads; the same seed still repeats the whole sequence.
                seed=self.seed + 7919 * index, walk=self.walk, fresh_broker=self.fresh_broker,
                broker_config=self.broker_config, first_case=done, on_case=self.on_case,
            )
            done += len(summary.cases)
            self.host_load = self.host_load + summary.host_load
            self.messages += summary.messages
            self.failures.update(summary.failures)
            self.broker_record = summary.broker_config
            logs = [read_log(path) for path in summary.cases]
            yield logs
            if any(log.meta.extra.get("status") == "interrupted" for log in logs):
                return  # Ctrl-C: keep what was measured, explore no further

    def write_summary(self, growth: Growth) -> None:
        """``explore.json`` for all rounds together (each round's call wrote only its own)."""
        summary = {
            "broker": self.broker,
            "broker_config": self.broker_record,
            "cases": len(growth.logs),
            "messages": self.messages,
            "failures": dict(self.failures),
            "seed": self.seed,
            "host_cpu": self.host_load.to_dict(),
            "growth": {**growth.to_dict(), "cases_per_round": self.cases_per_round},
        }
        (Path(self.out) / "explore.json").write_text(json.dumps(summary, indent=2) + "\n")
