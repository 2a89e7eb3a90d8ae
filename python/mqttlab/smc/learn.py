"""learn: from explore logs to latency models, the paper's pipeline and better ones.

The paper's pipeline: drop functional failures, drop the top 5 % of latencies per message type,
look at correlations, fit ``Latency ~ Msg + ActiveMsgs + TotalSubs + Subs`` by OLS. The models
that replace it (log-normal, gamma GLM, empirical by load bins) are fitted on *all* successful
messages, because the tail the outlier rule throws away is exactly what a latency threshold asks
about. Models are compared on whole workloads (explore cases) held out of the fit, by the
continuous ranked probability score: a proper scoring rule in latency units that rewards the
right spread and shape, not only the right mean.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.api as sm

from mqttlab.smc.log import MESSAGE_TYPES, ExploreLog
from mqttlab.smc.models import (
    MSG_CODE,
    TERMS,
    EmpiricalModel,
    GammaModel,
    LatencyModel,
    LogNormalModel,
    NormalModel,
    design_matrix,
    frame_arrays,
    save_model,
)

OUTLIER_SHARE = 0.05
HOLDOUT_SHARE = 0.2
CORRELATION_COLUMNS = ("ActiveMsgs", "TotalSubs", "TopicSize", "MsgSize", "Subs", "Receivers", "Latency_us")
_MIN_LATENCY_US = 1.0  # the log's resolution; keeps log and gamma fits finite on a 0 µs entry
_SCORE_ROWS = 20_000  # held-out rows scored (a random subset beyond this)
_SCORE_DRAWS = 100
_EMPIRICAL_BINS = 10
_EMPIRICAL_SUBS_BINS = 5
_EMPIRICAL_LEVELS = 200
_EMPIRICAL_MIN_CELL = 50


class LearnError(ValueError):
    """The logs cannot support the requested fit; the message says which part is missing."""


def remove_outliers(rows: pd.DataFrame, share: float = OUTLIER_SHARE) -> pd.DataFrame:
    """The paper's rule: per message type, drop the ``floor(share * n)`` longest latencies."""
    by_type = rows.groupby("Msg")["Latency_us"]
    rank_from_top = by_type.rank(method="first", ascending=False).to_numpy()
    return rows[rank_from_top > np.floor(share * by_type.transform("size").to_numpy())]


def correlation_matrix(rows: pd.DataFrame) -> pd.DataFrame:
    """Pearson correlations of the logged quantities (publish-only ones are 0 elsewhere)."""
    return rows.loc[:, list(CORRELATION_COLUMNS)].astype(float).corr()


def _check_coverage(rows: pd.DataFrame) -> None:
    counts = rows["Msg"].value_counts()
    missing = [m for m in MESSAGE_TYPES if counts.get(m, 0) < 2]
    if missing:
        raise LearnError(f"the logs need successful messages of every type; too few of: {', '.join(missing)}")


def _design(rows: pd.DataFrame) -> np.ndarray:
    return design_matrix(*frame_arrays(rows))


def fit_normal(rows: pd.DataFrame) -> tuple[NormalModel, pd.DataFrame]:
    """The paper's OLS; returns the model and its coefficient table (like the paper's Listing 1.1)."""
    _check_coverage(rows)
    fit = sm.OLS(rows["Latency_us"].to_numpy(float), _design(rows)).fit()
    table = pd.DataFrame(
        {"Estimate": fit.params, "Std. Error": fit.bse, "t value": fit.tvalues, "Pr(>|t|)": fit.pvalues},
        index=list(TERMS),
    )
    model = NormalModel(
        coef=fit.params.tolist(), stderr=fit.bse.tolist(), sigma=float(np.sqrt(fit.scale)), r_squared=float(fit.rsquared)
    )
    return model, table


def fit_lognormal(rows: pd.DataFrame) -> LogNormalModel:
    _check_coverage(rows)
    y = np.log(np.maximum(rows["Latency_us"].to_numpy(float), _MIN_LATENCY_US))
    fit = sm.OLS(y, _design(rows)).fit()
    return LogNormalModel(coef=fit.params.tolist(), stderr=fit.bse.tolist(), sigma=float(np.sqrt(fit.scale)))


def fit_gamma(rows: pd.DataFrame) -> GammaModel:
    _check_coverage(rows)
    y = np.maximum(rows["Latency_us"].to_numpy(float), _MIN_LATENCY_US)
    x = _design(rows)
    glm = sm.GLM(y, x, family=sm.families.Gamma(sm.families.links.Log()))
    fit = glm.fit(maxiter=1000)
    if not fit.converged:
        # On small logs IRLS can fall into a two-cycle (its deviance alternating between two values).
        # Newton's method on the same likelihood, started from the log-scale OLS, reaches the maximum.
        fit = glm.fit(method="newton", start_params=sm.OLS(np.log(y), x).fit().params, maxiter=200)
        if not fit.mle_retvals.get("converged", False):
            raise LearnError("the gamma GLM did not converge (IRLS and Newton); inspect learn.html for odd data")
    return GammaModel(coef=fit.params.tolist(), stderr=fit.bse.tolist(), shape=float(1.0 / fit.scale))


def _inner_edges(values: np.ndarray, bins: int) -> np.ndarray:
    """Quantile edges that split ``values`` into at most ``bins`` groups of similar size."""
    return np.unique(np.quantile(values, np.linspace(0, 1, bins + 1)[1:-1]))


def fit_empirical(rows: pd.DataFrame) -> EmpiricalModel:
    _check_coverage(rows)
    msg, active, _, subs = frame_arrays(rows)
    active_edges = _inner_edges(active, _EMPIRICAL_BINS)
    subs_edges = _inner_edges(subs[msg == MSG_CODE["publish"]], _EMPIRICAL_SUBS_BINS)
    active_bin = np.searchsorted(active_edges, active, side="right")
    subs_bin = np.searchsorted(subs_edges, np.where(msg == MSG_CODE["publish"], subs, 0), side="right")
    levels = np.linspace(0.0, 1.0, _EMPIRICAL_LEVELS + 1)
    latency = rows["Latency_us"].to_numpy(float)

    def quantiles_or(cell: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        # Sparse cells borrow a coarser distribution rather than trust a handful of values.
        return np.quantile(latency[cell], levels) if np.count_nonzero(cell) >= _EMPIRICAL_MIN_CELL else fallback

    tables, counts = [], []
    for code in range(len(MESSAGE_TYPES)):
        of_type = msg == code
        type_pooled = np.quantile(latency[of_type], levels)
        type_table, type_counts = [], []
        for a in range(len(active_edges) + 1):
            in_load = of_type & (active_bin == a)
            load_pooled = quantiles_or(in_load, type_pooled)
            cells = [in_load & (subs_bin == b) for b in range(len(subs_edges) + 1)]
            type_table.append([quantiles_or(cell, load_pooled).tolist() for cell in cells])
            type_counts.append([int(np.count_nonzero(cell)) for cell in cells])
        tables.append(type_table)
        counts.append(type_counts)
    return EmpiricalModel(active_edges=active_edges.tolist(), subs_edges=subs_edges.tolist(), quantiles=tables, counts=counts)


def crps(model: LatencyModel, rows: pd.DataFrame, rng: np.random.Generator, draws: int = _SCORE_DRAWS) -> dict:
    """Mean CRPS (µs) of the model's predictive distribution on observed rows, by sampling.

    Uses the unbiased ("fair") ensemble form ``E|X - y| - E|X - X'| / 2``, with the pair term
    computed from sorted draws in O(m log m). ``per_row`` keeps each message's score so that
    two models scored on the same rows can be compared pairwise.
    """
    msg, active, total, subs = frame_arrays(rows)
    y = rows["Latency_us"].to_numpy(float)
    noise = model.noise(rng, (draws, len(rows)))
    sample = model.latency_us(
        noise.ravel(), np.tile(msg, draws), np.tile(active, draws), np.tile(total, draws), np.tile(subs, draws)
    ).reshape(draws, len(rows))
    spread_to_obs = np.abs(sample - y).mean(axis=0)
    ordered = np.sort(sample, axis=0)
    weights = 2.0 * np.arange(draws) - draws + 1.0
    pair_term = (weights[:, None] * ordered).sum(axis=0) / (draws * (draws - 1))
    per_row = spread_to_obs - pair_term
    return {
        "crps_us": float(per_row.mean()),
        "per_row": per_row,
        "p99_predicted_us": float(np.quantile(sample, 0.99)),
        "p99_observed_us": float(np.quantile(y, 0.99)),
    }


def split_workloads(logs: list[ExploreLog], seed: int) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Training and held-out rows; whole cases are held out when there are several."""
    if len(logs) >= 2:
        order = np.random.default_rng(seed).permutation(len(logs))
        held = set(order[: max(1, round(HOLDOUT_SHARE * len(logs)))].tolist())
        train = pd.concat([log.ok_rows for i, log in enumerate(logs) if i not in held], ignore_index=True)
        test = pd.concat([log.ok_rows for i, log in enumerate(logs) if i in held], ignore_index=True)
        clients = sorted(logs[i].meta.clients for i in held)
        return train, test, f"{len(held)} of {len(logs)} workloads held out (clients {clients})"
    rows = logs[0].ok_rows.reset_index(drop=True)
    cut = int(len(rows) * (1 - HOLDOUT_SHARE))
    return rows.iloc[:cut], rows.iloc[cut:], "one workload only: its last 20 % of rows held out"


FITTERS: dict[str, Callable[[pd.DataFrame], LatencyModel]] = {
    "normal": lambda rows: fit_normal(remove_outliers(rows))[0],
    "lognormal": fit_lognormal,
    "gamma": fit_gamma,
    "empirical": fit_empirical,
}


@dataclass
class LearnResult:
    chosen: str
    holdout: str
    scores: pd.DataFrame  # one row per model kind
    coefficients: pd.DataFrame  # the paper's OLS table
    r_squared: float
    correlation: pd.DataFrame
    rows_used: int
    rows_failed: int
    outliers_removed: int
    models: dict[str, LatencyModel]


def learn(logs: list[ExploreLog], seed: int = 0) -> LearnResult:
    """Fit every model, choose the best on held-out workloads, refit all on every workload."""
    if not logs:
        raise LearnError("no logs given")
    rows = pd.concat([log.ok_rows for log in logs], ignore_index=True)
    failed = sum(len(log.failures) for log in logs)
    _check_coverage(rows)
    train, test, holdout = split_workloads(logs, seed)
    _check_coverage(train)

    rng = np.random.default_rng(seed)
    if len(test) > _SCORE_ROWS:  # every model is scored on the same rows, for a paired comparison
        test = test.iloc[rng.choice(len(test), _SCORE_ROWS, replace=False)]
    scored = {kind: crps(fit(train), test, rng) for kind, fit in FITTERS.items()}
    chosen = min(scored, key=lambda kind: scored[kind]["crps_us"])
    best = scored[chosen]["per_row"]
    table = pd.DataFrame(
        {
            kind: {
                "crps_us": score["crps_us"],
                "crps_se_us": float(score["per_row"].std(ddof=1) / np.sqrt(best.size)),
                # The paired difference to the chosen model, and its standard error: is the choice clear?
                "vs_chosen_us": float((score["per_row"] - best).mean()),
                "vs_chosen_se_us": float((score["per_row"] - best).std(ddof=1) / np.sqrt(best.size)),
                "p99_predicted_us": score["p99_predicted_us"],
                "p99_observed_us": score["p99_observed_us"],
            }
            for kind, score in scored.items()
        }
    ).T.rename_axis("model")

    cleaned = remove_outliers(rows)
    normal, coefficients = fit_normal(cleaned)
    models: dict[str, LatencyModel] = {"normal": normal}
    models.update({kind: FITTERS[kind](rows) for kind in ("lognormal", "gamma", "empirical")})
    return LearnResult(
        chosen=chosen,
        holdout=holdout,
        scores=table,
        coefficients=coefficients,
        r_squared=normal.r_squared,
        correlation=correlation_matrix(rows),
        rows_used=len(rows),
        rows_failed=failed,
        outliers_removed=len(rows) - len(cleaned),
        models=models,
    )


def save_learned(result: LearnResult, out_dir: Path, sources: list[str]) -> Path:
    """Write every model, the chosen one as ``model.json``, and the tables beside them."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    about = {"sources": sources, "holdout": result.holdout, "chosen": result.chosen}
    for kind, model in result.models.items():
        save_model(model, out / f"model-{kind}.json", about)
    save_model(result.models[result.chosen], out / "model.json", about)
    result.coefficients.to_csv(out / "coefficients.csv", index_label="term")
    result.scores.to_csv(out / "scores.csv")
    result.correlation.to_csv(out / "correlation.csv")
    summary = {
        "chosen": result.chosen,
        "holdout": result.holdout,
        "r_squared_ols": result.r_squared,
        "rows_used": result.rows_used,
        "rows_failed": result.rows_failed,
        "outliers_removed_for_ols": result.outliers_removed,
        "scores": {k: {c: (None if math.isnan(v) else v) for c, v in row.items()} for k, row in result.scores.to_dict("index").items()},
        "sources": sources,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return out / "model.json"
