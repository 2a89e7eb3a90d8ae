"""Explore logs drawn from a known generating model, for testing learn against the truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mqttlab.smc.log import MESSAGE_TYPES, CaseMeta, write_log
from mqttlab.smc.models import design_matrix

# Coefficients on the log-µs scale: connect ~ e^7.6 = 2 ms at low load, +2 % per active message.
LOG_COEF = np.array([7.6, -0.5, 0.3, -0.2, -0.3, 0.02, 0.001, 0.03])


def synthetic_rows(rng: np.random.Generator, clients: int, n: int, latency: str, coef: np.ndarray, spread: float) -> pd.DataFrame:
    """Rows whose features look like explore's and whose latency follows the named law.

    latency: "normal" (coef on the µs scale, sd = spread), "lognormal" (log scale, sigma = spread),
    "gamma" (log of the mean, shape = spread).
    """
    msg = rng.integers(0, len(MESSAGE_TYPES), n)
    active = rng.integers(1, clients + 1, n)
    total = rng.integers(0, 3 * clients + 1, n)
    subs = np.where(msg == MESSAGE_TYPES.index("publish"), rng.integers(0, clients + 1, n), 0)
    eta = design_matrix(msg, active, total, subs) @ coef
    if latency == "normal":
        value = eta + spread * rng.standard_normal(n)
    elif latency == "lognormal":
        value = np.exp(eta + spread * rng.standard_normal(n))
    elif latency == "gamma":
        value = np.exp(eta) * rng.gamma(spread, 1.0 / spread, n)
    else:
        raise ValueError(latency)
    is_publish = msg == MESSAGE_TYPES.index("publish")
    return pd.DataFrame(
        {
            "Msg": np.asarray(MESSAGE_TYPES)[msg],
            "ActiveMsgs": active,
            "TotalSubs": total,
            "TopicSize": np.where(msg <= 1, 0, 14),
            "MsgSize": np.where(is_publish, 52, 0),
            "Subs": subs,
            "Receivers": subs,
            "Latency_us": np.round(value, 1),
            "outcome": "ok",
        }
    )


def write_cases(folder: Path, seed: int, latency: str, coef: np.ndarray, spread: float, cases: int = 6, rows: int = 3000) -> list[Path]:
    rng = np.random.default_rng(seed)
    paths = []
    for case in range(cases):
        clients = int(rng.integers(3, 101))
        path = folder / f"case-{case:03d}.csv"
        write_log(path, synthetic_rows(rng, clients, rows, latency, coef, spread), CaseMeta("synthetic", clients, seed + case))
        paths.append(path)
    return paths
