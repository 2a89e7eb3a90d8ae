"""predict: Monte Carlo estimates of P(every message of a client's sequence is under t).

The estimand, for a given number of clients N, sequence length L and threshold t, is

    p(N, t) = P(all L latencies of one client are < t | N clients run the profile together).

A *sample* is one replication of the whole N-client system. Only one client per replication
(client 0; clients are exchangeable, so any fixed one would do) contributes the Bernoulli outcome,
because clients of one replication share their load and are not independent. Replications are
independent by construction (separate random streams, fresh state), so the n outcomes are i.i.d.
and the Chernoff–Hoeffding size, the Clopper–Pearson interval and the DKW band all apply.

The system-level estimand "every client of the replication stays under t" is reported beside it,
with its own Clopper–Pearson interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mqttlab.smc.models import LatencyModel
from mqttlab.smc.profiles import UsageProfile
from mqttlab.smc.simulate import simulate
from mqttlab.smc.stats import chernoff_epsilon, chernoff_sample_size, clopper_pearson, dkw_epsilon

TAGGED_CLIENT = 0


@dataclass(frozen=True)
class PredictionSettings:
    length: int = 10
    epsilon: float = 0.05
    delta: float = 0.01
    seed: int = 0
    samples: int | None = None  # overrides the Chernoff–Hoeffding size when given

    @property
    def n(self) -> int:
        return self.samples if self.samples is not None else chernoff_sample_size(self.epsilon, self.delta)


@dataclass(frozen=True)
class Prediction:
    table: pd.DataFrame  # one row per (clients, threshold)
    curves: pd.DataFrame  # the empirical CDF of the tagged client's worst latency, with its DKW band
    settings: PredictionSettings


def _curve(clients: int, worst_us: np.ndarray, band: float, points: int = 200) -> pd.DataFrame:
    grid = np.quantile(worst_us, np.linspace(0.0, 1.0, points))
    cdf = np.searchsorted(np.sort(worst_us), grid, side="left") / worst_us.size  # P(worst < t)
    return pd.DataFrame(
        {
            "clients": clients,
            "threshold_ms": grid / 1e3,
            "p": cdf,
            "dkw_low": np.clip(cdf - band, 0, 1),
            "dkw_high": np.clip(cdf + band, 0, 1),
        }
    )


def predict(
    model: LatencyModel,
    profile: UsageProfile,
    clients: list[int],
    thresholds_ms: list[float],
    settings: PredictionSettings = PredictionSettings(),
) -> Prediction:
    """Simulate each client count once and read every threshold off the same replications."""
    n = settings.n
    confidence = 1.0 - settings.delta
    band = dkw_epsilon(n, settings.delta)
    rows, curves = [], []
    for count in clients:
        # Each data point has its own stream, so adding a client count changes no other point.
        rng = np.random.default_rng([settings.seed, count])
        sim = simulate(model, profile, count, settings.length, n, rng)
        worst = sim.max_latency_us
        tagged = worst[:, TAGGED_CLIENT]
        system = worst.max(axis=1)
        for threshold in thresholds_ms:
            t_us = threshold * 1e3
            hits = int(np.count_nonzero(tagged < t_us))
            all_hits = int(np.count_nonzero(system < t_us))
            low, high = clopper_pearson(hits, n, confidence)
            all_low, all_high = clopper_pearson(all_hits, n, confidence)
            rows.append(
                {
                    "clients": count,
                    "threshold_ms": threshold,
                    "samples": n,
                    "p": hits / n,
                    "cp_low": low,
                    "cp_high": high,
                    "chernoff_eps": chernoff_epsilon(n, settings.delta),
                    "p_all_clients": all_hits / n,
                    "all_cp_low": all_low,
                    "all_cp_high": all_high,
                    "mean_active": float(sim.active.mean()),
                    "max_active": int(sim.active.max()),
                }
            )
        curves.append(_curve(count, tagged, band))
    return Prediction(table=pd.DataFrame(rows), curves=pd.concat(curves, ignore_index=True), settings=settings)
