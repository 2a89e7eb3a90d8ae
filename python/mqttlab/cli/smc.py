"""`mqttlab smc learn` and `mqttlab smc predict`: a thin shell over mqttlab.smc.

Exit codes: 0 done; 2 bad input (named in the message, no traceback).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(
    help="Statistical model checking: learn latency models from explore logs, predict by simulation.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
BAD_INPUT = 2
DEFAULT_CLIENT_STEP = 20  # the paper's grid: 50, 70, ..., 150

_console = Console()


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(BAD_INPUT)


def parse_clients(text: str) -> list[int]:
    """``50,70,90``, ``50..150`` (step 20) or ``50..150:10``."""
    counts: list[int] = []
    for part in text.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)\.\.(\d+)(?::(\d+))?", part)
        if match:
            low, high = int(match[1]), int(match[2])
            step = int(match[3]) if match[3] else DEFAULT_CLIENT_STEP
            if low > high or step < 1:
                raise ValueError(f"--clients: range {part!r} must run upwards with a step >= 1")
            counts.extend(range(low, high + 1, step))
        elif part.isdigit():
            counts.append(int(part))
        else:
            raise ValueError(f"--clients: {part!r} is not a count, a list or a range like 50..150:20")
    if not counts or min(counts) < 1:
        raise ValueError("--clients: every client count must be at least 1")
    return sorted(set(counts))


_UNITS_MS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "": 1.0}


def parse_thresholds(text: str) -> list[float]:
    """Comma-separated durations in ms; ``30ms``, ``0.05s``, ``800us``; a bare number is ms."""
    values = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s|)\s*", part)
        if not match or float(match[1]) <= 0:
            raise ValueError(f"--threshold: {part.strip()!r} is not a positive duration like 30ms")
        values.append(float(match[1]) * _UNITS_MS[match[2]])
    return sorted(set(values))


@app.command()
def learn(
    logs: Annotated[list[Path], typer.Argument(help="Explore logs (CSV with a JSON sidecar each) or folders of them.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the models, tables and figures.")] = Path("results/smc/model"),
    seed: Annotated[int, typer.Option(help="Seed of the workload hold-out and the scoring draws.")] = 0,
) -> None:
    """Fit the paper's OLS and better latency models; choose the best on held-out workloads."""
    import pandas as pd

    from mqttlab.smc.learn import LearnError, learn as run_learn, save_learned
    from mqttlab.smc.log import LogFormatError, read_logs
    from mqttlab.smc.plots import learn_figures

    try:
        parsed = read_logs(logs)
        result = run_learn(parsed, seed=seed)
    except (LogFormatError, LearnError) as error:
        raise _fail(str(error)) from None
    chosen_path = save_learned(result, out, sources=[str(log.path) for log in parsed])
    rows = pd.concat([log.ok_rows for log in parsed], ignore_index=True)
    learn_figures(rows, result.correlation, out, seed=seed)

    _console.print(
        f"{result.rows_used} messages from {len(parsed)} workloads; {result.rows_failed} functional failures kept apart; "
        f"{result.outliers_removed} outliers (top 5 % per type) removed for the OLS only."
    )
    coefficients = Table(title=f"OLS  Latency ~ Msg + ActiveMsgs + TotalSubs + Subs   (µs, R² = {result.r_squared:.3f})")
    for column in ("term", "Estimate", "Std. Error", "t value", "Pr(>|t|)"):
        coefficients.add_column(column, justify="left" if column == "term" else "right")
    for term, row in result.coefficients.iterrows():
        coefficients.add_row(escape(term), f"{row['Estimate']:.4g}", f"{row['Std. Error']:.4g}", f"{row['t value']:.3f}", f"{row['Pr(>|t|)']:.3g}")
    _console.print(coefficients)
    scores = Table(title=f"Held-out comparison ({result.holdout}); lower CRPS is better")
    for column in ("model", "CRPS (ms)", "worse than chosen (ms)", "p99 predicted (ms)", "p99 observed (ms)"):
        scores.add_column(column, justify="left" if column == "model" else "right")
    for kind, row in result.scores.iterrows():
        chosen = kind == result.chosen
        scores.add_row(
            f"{kind} *" if chosen else kind,
            f"{row['crps_us'] / 1e3:.3f} ± {row['crps_se_us'] / 1e3:.3f}",
            "" if chosen else f"{row['vs_chosen_us'] / 1e3:.3f} ± {row['vs_chosen_se_us'] / 1e3:.3f}",
            f"{row['p99_predicted_us'] / 1e3:.2f}",
            f"{row['p99_observed_us'] / 1e3:.2f}",
        )
    scores.caption = "* chosen; ± is one standard error (the paired one for the difference)"
    _console.print(scores)
    _console.print(f"default model: {result.chosen} → {chosen_path}")


def _resolve_model(path: Path, delay: str):
    from mqttlab.smc.models import NormalModel, load_model

    if path.is_dir():
        path = path / ("model-normal.json" if delay == "paper" else "model.json")
    if not path.exists():
        raise ValueError(f"MODEL: {path} does not exist (give a model file or a folder written by `smc learn`)")
    model = load_model(path)
    if delay == "paper":
        if not isinstance(model, NormalModel):
            raise ValueError(f"--delay paper needs the OLS model (kind normal); {path} is {model.kind}")
        model = model.paper_delay()
    return model, path


@app.command()
def predict(
    model_path: Annotated[Path, typer.Argument(metavar="MODEL", help="A model file, or a folder written by `smc learn`.")],
    profile: Annotated[str, typer.Option(help="UP1, UP2, or a YAML/JSON profile file.")] = "UP1",
    clients: Annotated[str, typer.Option(help="Client counts: 50,70 or 50..150 (step 20) or 50..150:10.")] = "50..150",
    threshold: Annotated[str, typer.Option(help="Latency thresholds, e.g. 30ms,50ms,70ms.")] = "30ms,50ms,70ms",
    length: Annotated[int, typer.Option(help="Messages per client sequence.", min=1)] = 10,
    epsilon: Annotated[float, typer.Option(help="Chernoff–Hoeffding half-width.")] = 0.05,
    delta: Annotated[float, typer.Option(help="1 - confidence, for Chernoff, Clopper–Pearson and DKW.")] = 0.01,
    samples: Annotated[Optional[int], typer.Option(help="Replications per point instead of the Chernoff size.", min=1)] = None,
    delay: Annotated[str, typer.Option(help="model: the fitted predictive distribution; paper: the paper's normal delay.")] = "model",
    seed: Annotated[int, typer.Option(help="Seed; the same seed gives the same numbers.")] = 0,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the table and figures.")] = Path("results/smc/predict"),
) -> None:
    """Estimate P(every message of a client's sequence is under t) by simulation in virtual time."""
    from mqttlab.smc.plots import predict_figures
    from mqttlab.smc.predict import PredictionSettings, predict as run_predict
    from mqttlab.smc.profiles import load_profile
    from mqttlab.smc.stats import chernoff_sample_size

    try:
        if delay not in ("model", "paper"):
            raise ValueError(f"--delay must be model or paper, got {delay!r}")
        counts = parse_clients(clients)
        thresholds = parse_thresholds(threshold)
        usage = load_profile(profile)
        if samples is None:
            chernoff_sample_size(epsilon, delta)  # validates epsilon and delta with their names
        elif not (0 < delta < 1):
            raise ValueError(f"--delta must be strictly between 0 and 1, got {delta!r}")
        model, resolved = _resolve_model(model_path, delay)
    except ValueError as error:
        raise _fail(str(error)) from None

    settings = PredictionSettings(length=length, epsilon=epsilon, delta=delta, seed=seed, samples=samples)
    result = run_predict(model, usage, counts, thresholds, settings)

    out.mkdir(parents=True, exist_ok=True)
    result.table.to_csv(out / "predict.csv", index=False)
    result.curves.to_csv(out / "curves.csv", index=False)
    about = {
        "model": str(resolved),
        "model_kind": model.kind,
        "delay": delay,
        "profile": usage.name,
        "length": length,
        "epsilon": epsilon,
        "delta": delta,
        "samples": settings.n,
        "seed": seed,
        "points": result.table.to_dict("records"),
    }
    (out / "predict.json").write_text(json.dumps(about, indent=2) + "\n")
    title = f"{usage.name}, {model.kind} model ({delay} delay), sequences of {length}"
    predict_figures(result.table, result.curves, out, title)

    table = Table(title=f"P(all {length} messages of a client < t)  —  {title}; n = {settings.n} per point, {int((1 - delta) * 100)} % Clopper–Pearson")
    for column in ("clients", "t (ms)", "p", "interval", "all clients", "mean ActiveMsgs"):
        table.add_column(column, justify="right")
    for row in result.table.itertuples():
        table.add_row(
            str(row.clients),
            f"{row.threshold_ms:g}",
            f"{row.p:.3f}",
            f"[{row.cp_low:.3f}, {row.cp_high:.3f}]",
            f"{row.p_all_clients:.3f}",
            f"{row.mean_active:.1f}",
        )
    _console.print(table)
    _console.print(f"written: {out / 'predict.csv'}, {out / 'predict.html'}, {out / 'predict.png'}")
