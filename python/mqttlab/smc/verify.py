"""verify: Wald's SPRT on the real broker, with N clients following a usage profile in real time.

**Sample.** One sequence of L consecutive messages of one client. It is a success when all L
messages were answered correctly (no functional failure) and every latency is under the
threshold t. Every sequence starts from the model's initial state (disconnected), as a
replication of `predict` does; the DISCONNECT that takes a client back there is not timed.

**Per client (the paper's view, its Tables 3 and 4).** Each client runs its own SPRT
(H1: p = p1, H0: p = p1 - indifference) on its stream of sequences, in order. The table gives the
share of clients accepting H1 (and H0, and undecided), the mean number of samples, and the time
until the last client decided. A client's decision time is the completion time of its deciding
sequence.

**System level (one decision).** One SPRT with the same hypotheses on the pooled stream of all
clients' sequences, in order of completion. It answers the same per-client estimand as
`predict`'s ``p`` with N times the samples per second. Sequences of one run share the broker's
load, so they are positively correlated and the nominal alpha and beta hold only approximately;
`validate` measures with independent replications instead.

**Online and offline are the same test.** The engine runs each client for at most ``cap``
sequences and stops early once every client has decided every threshold's test (decided clients
keep running, so the others still see the load of N clients). Python then replays the tests on the
recorded streams in order, which is exactly the online test. The cap is three times Wald's
largest expected sample number between p0 and p1 (at least 50); a client that reaches it without a
decision is reported as undecided, never forced.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mqttlab import engine
from mqttlab.smc.broker import BrokerSource
from mqttlab.smc.explore import WalkSettings, engine_config, run_id
from mqttlab.smc.hostload import NO_LOAD, HostLoad, HostLoadSampler
from mqttlab.smc.log import OUTCOME_OK
from mqttlab.smc.profiles import UsageProfile
from mqttlab.smc.sprt import ACCEPT_H0, ACCEPT_H1, SPRT

CAP_FACTOR = 3.0
MIN_CAP = 50


@dataclass(frozen=True)
class Hypothesis:
    clients: int
    threshold_ms: float
    p1: float
    indifference: float

    @property
    def p0(self) -> float:
        return self.p1 - self.indifference

    def test(self, alpha: float, beta: float) -> SPRT:
        if not 0 < self.p0 < 1:
            raise ValueError(
                f"--indifference: H0 = H1 - indifference = {self.p1:g} - {self.indifference:g} must lie strictly "
                f"between 0 and 1 (clients {self.clients}, threshold {self.threshold_ms:g} ms)"
            )
        return SPRT(p0=self.p0, p1=self.p1, alpha=alpha, beta=beta)


def sample_cap(test: SPRT, factor: float = CAP_FACTOR, minimum: int = MIN_CAP) -> int:
    """Sequences per client the engine may run for this test."""
    if test.p1 >= 1.0:
        # Every failure decides H0 at once; a run of successes decides H1 after exactly this many.
        return math.ceil(test.upper / test.success_step)
    # The expected sample number peaks where the log-likelihood ratio has no drift; Wald gives it
    # in closed form there (numerical root finding is unreliable that close to zero drift).
    s, f = test.success_step, test.failure_step
    p_flat = -f / (s - f)
    at_flat = -test.lower * test.upper / (p_flat * s**2 + (1 - p_flat) * f**2)
    grid = np.linspace(min(test.p0, test.p1), max(test.p0, test.p1), 21)
    worst = max(at_flat, *(test.wald_expected_samples(float(p)) for p in grid))
    return max(minimum, math.ceil(factor * worst))


def predicted_p(prediction: Path, clients: int, threshold_ms: float) -> float:
    """The ``p`` of `mqttlab smc predict`'s point (clients, threshold) in predict.json."""
    path = Path(prediction)
    if path.is_dir():
        path = path / "predict.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"--prediction: cannot read {path} ({error})") from None
    points = data.get("points") if isinstance(data, dict) else None
    if not isinstance(points, list):
        raise ValueError(f"--prediction: {path} has no 'points' list (write it with `mqttlab smc predict`)")
    for point in points:
        if point.get("clients") == clients and math.isclose(float(point.get("threshold_ms", -1)), threshold_ms, rel_tol=1e-9):
            return float(point["p"])
    have = sorted({(p.get("clients"), p.get("threshold_ms")) for p in points})
    raise ValueError(f"--prediction: {path} has no point for {clients} clients and {threshold_ms:g} ms (it has {have})")


def profile_walk(profile: UsageProfile, timeout_ms: int) -> WalkSettings:
    return WalkSettings(
        weights=dict(profile.weights),
        think_ms=(float(profile.min_wait_ms), float(profile.max_wait_ms)),
        topics=profile.topics,
        timeout_ms=timeout_ms,
    )


@dataclass(frozen=True)
class ProfileRun:
    """Per client, its sequences in order: ``end_ms``, ``latencies_us``, ``outcomes``, ``active``, ``msgs``."""

    clients: list[list[dict[str, Any]]]
    stopped: str  # decided, cap or interrupted
    elapsed_s: float
    failures: list[dict[str, Any]]

    def outcomes(self, client: int, threshold_ms: float) -> np.ndarray:
        return np.array([sequence_ok(s, threshold_ms) for s in self.clients[client]], dtype=bool)

    def end_ms(self, client: int) -> np.ndarray:
        return np.array([s["end_ms"] for s in self.clients[client]], dtype=float)


def sequence_ok(sequence: dict[str, Any], threshold_ms: float) -> bool:
    """All L messages answered correctly and every latency under the threshold."""
    limit = threshold_ms * 1e3
    return all(o == OUTCOME_OK for o in sequence["outcomes"]) and all(
        lat is not None and lat < limit for lat in sequence["latencies_us"]
    )


def run_profile(
    host: str,
    port: int,
    profile: UsageProfile,
    clients: int,
    length: int,
    cap: int,
    tests: list[tuple[float, SPRT]],
    *,
    seed: int = 0,
    timeout_ms: int = 5000,
    progress: Callable[[str], None] | None = None,
) -> ProfileRun:
    """Runs `clients` profile clients for up to `cap` sequences of `length` messages each."""
    config = engine_config(host, port, clients, cap * length, seed, profile_walk(profile, timeout_ms), run_id())
    config["sequence_length"] = length
    config["reset_each_sequence"] = True
    config["sprt"] = [
        {"threshold_us": t * 1e3, "p0": s.p0, "p1": s.p1, "alpha": s.alpha, "beta": s.beta} for t, s in tests
    ]
    out = engine.smc_profile_run(config, progress)
    return ProfileRun(
        clients=[c["sequences"] for c in out["clients"]],
        stopped=out["stopped"],
        elapsed_s=out["elapsed_s"],
        failures=out["failures"],
    )


@dataclass(frozen=True)
class Verdict:
    """One row of the paper's Tables 3/4 for one broker, plus the system-level decision."""

    broker: str
    clients: int
    threshold_ms: float
    p0: float
    p1: float
    share_h1: float
    share_h0: float
    share_undecided: float
    mean_samples: float
    time_s: float  # until the last client decided (the whole run if some never did)
    result: str
    system: str  # H1, H0 or undecided
    system_samples: int
    system_time_s: float
    cap: int
    stopped: str
    functional_failures: int


def result_text(share_h1: float, share_h0: float) -> str:
    """The paper's notation: H1 or H0 when all clients agree, else the share accepting H1."""
    if share_h1 == 1.0:
        return "H1"
    if share_h0 == 1.0:
        return "H0"
    return f"{round(share_h1 * 100)}% H1"


def decide(run: ProfileRun, hypothesis: Hypothesis, test: SPRT, broker: str, cap: int) -> Verdict:
    """Replays the per-client tests and the pooled system test on a run's streams, in order."""
    decisions, samples, times = [], [], []
    pooled: list[tuple[float, bool]] = []
    for client in range(len(run.clients)):
        outcomes = run.outcomes(client, hypothesis.threshold_ms)
        ends = run.end_ms(client)
        result = test.run(outcomes[:cap])
        decisions.append(result.decision)
        samples.append(result.samples)
        times.append(ends[result.samples - 1] / 1e3 if result.decision is not None else math.nan)
        pooled.extend(zip(ends.tolist(), outcomes.tolist()))
    pooled.sort(key=lambda item: item[0])
    system = test.run(o for _, o in pooled)
    count = len(decisions)
    share_h1 = sum(d == ACCEPT_H1 for d in decisions) / count
    share_h0 = sum(d == ACCEPT_H0 for d in decisions) / count
    undecided = sum(d is None for d in decisions) / count
    return Verdict(
        broker=broker,
        clients=hypothesis.clients,
        threshold_ms=hypothesis.threshold_ms,
        p0=test.p0,
        p1=test.p1,
        share_h1=share_h1,
        share_h0=share_h0,
        share_undecided=undecided,
        mean_samples=float(np.mean(samples)),
        time_s=run.elapsed_s if undecided else float(np.nanmax(times)),
        result="undecided" if undecided == 1.0 else result_text(share_h1, share_h0) + (f", {round(undecided * 100)}% undecided" if undecided else ""),
        system=system.decision or "undecided",
        system_samples=system.samples,
        system_time_s=pooled[system.samples - 1][0] / 1e3 if system.decision and pooled else math.nan,
        cap=cap,
        stopped=run.stopped,
        functional_failures=len(run.failures),
    )


@dataclass(frozen=True)
class ProfileRuns:
    """How profile clients run on the real broker, in `verify` and `validate` alike."""

    length: int = 10  # messages per sequence (one sample)
    seed: int = 0
    timeout_ms: int = 5000  # an exchange not done by then is a functional failure
    fresh_broker: bool = True  # a fresh broker per run, else one for all
    broker_config: str | None = None  # tuned, as-shipped or a file; None: the launcher's default (tuned)


@dataclass(frozen=True)
class VerifySettings(ProfileRuns):
    indifference: float = 0.1
    alpha: float = 0.01
    beta: float = 0.01


def hypotheses_for(
    clients: list[int], thresholds_ms: list[float], h1: float | None, prediction: Path | None, indifference: float
) -> list[Hypothesis]:
    """H1 fixed for all points, or each point's prediction."""
    if (h1 is None) == (prediction is None):
        raise ValueError("--h1: give a probability, or 'predicted' with --prediction FILE")
    if h1 is not None and not 0 < h1 <= 1:
        raise ValueError(f"--h1 must be a probability in (0, 1], got {h1!r}")
    if not 0 < indifference < 1:
        raise ValueError(f"--indifference must be strictly between 0 and 1, got {indifference!r}")
    out = []
    for n in clients:
        for t in thresholds_ms:
            p1 = h1 if h1 is not None else predicted_p(prediction, n, t)  # type: ignore[arg-type]
            out.append(Hypothesis(clients=n, threshold_ms=t, p1=p1, indifference=indifference))
    return out


def verify(
    brokers: list[str],
    profile: UsageProfile,
    hypotheses: list[Hypothesis],
    workdir: Path,
    settings: VerifySettings = VerifySettings(),
    on_run: Callable[[str, int, ProfileRun], None] | None = None,
    progress: Callable[[str], None] | None = None,
    on_load: Callable[[str, int, HostLoad], None] | None = None,
) -> pd.DataFrame:
    """One real-time run per broker and client count answers every threshold of that count.

    `progress` is handed to the engine: ``{"messages": n, "elapsed_s": s}`` about every 100 ms.
    The host's CPU load is sampled during each run: in the table's ``host_cpu_*`` columns, and
    handed to `on_load` so that a caller can add the runs up."""
    tests = {h: h.test(settings.alpha, settings.beta) for h in hypotheses}  # validates all first
    rows: list[dict[str, Any]] = []
    for broker in brokers:
        with BrokerSource(broker, Path(workdir) / "brokers", fresh=settings.fresh_broker,
                          config=settings.broker_config) as source:
            for count in sorted({h.clients for h in hypotheses}):
                mine = [h for h in hypotheses if h.clients == count]
                cap = max(sample_cap(tests[h]) for h in mine)
                with source.replication() as running, HostLoadSampler() as sampler:
                    run = run_profile(
                        running.host, running.port, profile, count, settings.length, cap,
                        [(h.threshold_ms, tests[h]) for h in mine],
                        seed=settings.seed, timeout_ms=settings.timeout_ms, progress=progress,
                    )
                load = sampler.result or NO_LOAD
                if on_run is not None:
                    on_run(source.label, count, run)
                if on_load is not None:
                    on_load(source.label, count, load)
                extra = {"broker_config": source.config_record()["mode"], "host_cpu_mean": load.mean_share,
                         "host_cpu_max": load.max_share}
                rows.extend({**asdict(decide(run, h, tests[h], source.label, cap)), **extra} for h in mine)
                if run.stopped == "interrupted":
                    return pd.DataFrame(rows)
    return pd.DataFrame(rows)
