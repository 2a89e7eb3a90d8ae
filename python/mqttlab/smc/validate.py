"""validate: predicted against measured probability on the real broker, point by point.

For every client count N and threshold t of a grid, the broker is measured with R independent
replications: each replication is a fresh broker (unless told otherwise) with N clients that each
run one sequence of L messages of the usage profile from the initial state, exactly the system
`predict` simulates. A client's outcome is 1 when all L messages were answered correctly and under
t. Three estimates come out of the same replications:

* ``p``: the per-client estimand of `predict` (P(all L messages of one client < t)), from all
  R·N outcomes. Clients of one replication share the broker and are correlated, so the interval
  is Clopper–Pearson with the *effective* sample size of this cluster design (Korn and Graubard):
  n_eff = p(1-p) / Var(mean of the replication means), kept between R (one outcome per
  replication) and R·N (independent clients).
* ``p_tagged``: client 0 only, one outcome per replication: strictly i.i.d., exact
  Clopper–Pearson, wider.
* ``p_all_clients``: every client of the replication under t, Clopper–Pearson over R.

Each point is then compared with the prediction of the paper's model (OLS with its normal delay)
and of ours (the model `learn` chose), with the error predicted - measured and whether the
prediction falls inside the measured interval. Points are labelled by the regions where the paper
found its predictions weak: the smallest threshold of the grid, and N at or above
``many_clients`` (130 in the paper, beyond its explore logs' 100 clients).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mqttlab.smc.broker import BrokerSource
from mqttlab.smc.models import LatencyModel, NormalModel, load_model
from mqttlab.smc.predict import PredictionSettings, predict
from mqttlab.smc.profiles import UsageProfile
from mqttlab.smc.stats import clopper_pearson
from mqttlab.smc.verify import ProfileRun, ProfileRuns, run_profile, sequence_ok

TAGGED_CLIENT = 0


@dataclass(frozen=True)
class ValidateSettings(ProfileRuns):
    replications: int = 30
    confidence: float = 0.95
    prediction_samples: int = 1060
    many_clients: int = 130


def outcome_matrix(runs: list[ProfileRun], clients: int, thresholds_ms: list[float]) -> np.ndarray:
    """(replications, clients, thresholds) booleans; a client without a finished sequence failed."""
    out = np.zeros((len(runs), clients, len(thresholds_ms)), dtype=bool)
    for r, run in enumerate(runs):
        for c in range(clients):
            sequences = run.clients[c] if c < len(run.clients) else []
            if sequences:
                out[r, c] = [sequence_ok(sequences[0], t) for t in thresholds_ms]
    return out


def cluster_interval(outcomes: np.ndarray, confidence: float) -> tuple[float, float, float, float]:
    """(p, low, high, n_eff) for a (replications, clients) matrix of one point."""
    replications, clients = outcomes.shape
    p = float(outcomes.mean())
    means = outcomes.mean(axis=1)
    var_of_mean = float(means.var(ddof=1)) / replications if replications > 1 else 0.0
    if 0.0 < p < 1.0 and var_of_mean > 0.0:
        n_eff = float(np.clip(p * (1 - p) / var_of_mean, replications, replications * clients))
    else:
        # Nothing says the clients vary independently: count one outcome per replication.
        n_eff = float(replications)
    n = max(1, round(n_eff))
    low, high = clopper_pearson(min(n, round(p * n)), n, confidence)
    return p, low, high, n_eff


def measured_table(outcomes: np.ndarray, clients: int, thresholds_ms: list[float], confidence: float) -> pd.DataFrame:
    rows = []
    replications = outcomes.shape[0]
    for j, t in enumerate(thresholds_ms):
        point = outcomes[:, :, j]
        p, low, high, n_eff = cluster_interval(point, confidence)
        tagged = int(point[:, TAGGED_CLIENT].sum())
        everyone = int(point.all(axis=1).sum())
        t_low, t_high = clopper_pearson(tagged, replications, confidence)
        a_low, a_high = clopper_pearson(everyone, replications, confidence)
        rows.append({
            "clients": clients, "threshold_ms": t, "replications": replications, "samples": point.size,
            "p": p, "low": low, "high": high, "n_eff": n_eff,
            "p_tagged": tagged / replications, "tagged_low": t_low, "tagged_high": t_high,
            "p_all_clients": everyone / replications, "all_low": a_low, "all_high": a_high,
        })
    return pd.DataFrame(rows)


def models_from(path: Path) -> dict[str, LatencyModel]:
    """The paper's model (OLS, normal delay) and ours (the chosen one) from a `learn` folder or file."""
    path = Path(path)
    models: dict[str, LatencyModel] = {}
    if path.is_dir():
        normal, chosen = path / "model-normal.json", path / "model.json"
        if normal.exists():
            ols = load_model(normal)
            if isinstance(ols, NormalModel):
                models["paper"] = ols.paper_delay()
        if chosen.exists():
            models["ours"] = load_model(chosen)
    elif path.exists():
        model = load_model(path)
        if isinstance(model, NormalModel):
            models["paper"] = model.paper_delay()
        models["ours"] = model
    if not models:
        raise ValueError(f"MODEL: {path} holds neither model.json nor model-normal.json (write it with `mqttlab smc learn`)")
    return models


def measure(
    source: BrokerSource,
    profile: UsageProfile,
    clients: int,
    thresholds_ms: list[float],
    settings: ValidateSettings,
    on_replication: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    runs = []
    for r in range(settings.replications):
        with source.replication() as running:
            runs.append(
                run_profile(running.host, running.port, profile, clients, settings.length, 1, [],
                            seed=settings.seed * 1_000_003 + clients * 1009 + r, timeout_ms=settings.timeout_ms)
            )
        if on_replication is not None:
            on_replication(clients, r)
        if runs[-1].stopped == "interrupted":
            break
    table = measured_table(outcome_matrix(runs, clients, thresholds_ms), clients, thresholds_ms, settings.confidence)
    table["functional_failures"] = sum(len(run.failures) for run in runs)
    return table


def validate(
    broker: str,
    models: dict[str, LatencyModel],
    profile: UsageProfile,
    clients: list[int],
    thresholds_ms: list[float],
    workdir: Path,
    settings: ValidateSettings = ValidateSettings(),
    on_replication: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """The measured grid beside every model's prediction, with the error of each point."""
    if settings.replications < 2:
        raise ValueError("--replications must be at least 2 (the interval needs the spread between replications)")
    if not 0 < settings.confidence < 1:
        raise ValueError(f"--confidence must be strictly between 0 and 1, got {settings.confidence!r}")
    with BrokerSource(broker, Path(workdir) / "brokers", fresh=settings.fresh_broker, config=settings.broker_config) as source:
        measured = pd.concat(
            [measure(source, profile, n, thresholds_ms, settings, on_replication) for n in clients], ignore_index=True
        )
        measured.insert(0, "broker", source.label)
        measured.insert(1, "broker_config", source.config_record()["mode"])
    prediction_settings = PredictionSettings(length=settings.length, seed=settings.seed, samples=settings.prediction_samples)
    for name, model in models.items():
        predicted = predict(model, profile, clients, thresholds_ms, prediction_settings).table
        merged = measured[["clients", "threshold_ms"]].merge(predicted[["clients", "threshold_ms", "p"]], how="left")
        measured[f"predicted_{name}"] = merged["p"].to_numpy()
        measured[f"error_{name}"] = measured[f"predicted_{name}"] - measured["p"]
        measured[f"inside_{name}"] = (measured["low"] <= measured[f"predicted_{name}"]) & (measured[f"predicted_{name}"] <= measured["high"])
    smallest = min(thresholds_ms)
    measured["small_threshold"] = measured["threshold_ms"] == smallest
    measured["many_clients"] = measured["clients"] >= settings.many_clients
    return measured


def region_errors(table: pd.DataFrame, models: list[str]) -> pd.DataFrame:
    """Mean absolute error of each model in the paper's weak regions and elsewhere."""
    regions = {
        "smallest threshold": table["small_threshold"],
        "many clients": table["many_clients"],
        "elsewhere": ~(table["small_threshold"] | table["many_clients"]),
        "all points": pd.Series(True, index=table.index),
    }
    rows = []
    for region, mask in regions.items():
        if not mask.any():
            continue
        row = {"region": region, "points": int(mask.sum())}
        for m in models:
            row[f"mae_{m}"] = float(table.loc[mask, f"error_{m}"].abs().mean())
            row[f"inside_{m}"] = float(table.loc[mask, f"inside_{m}"].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def save(table: pd.DataFrame, out: Path, about: dict) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "validate.csv", index=False)
    (out / "validate.json").write_text(json.dumps({**about, "points": table.to_dict("records")}, indent=2, default=str) + "\n")
