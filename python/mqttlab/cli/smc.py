"""`mqttlab smc learn` and `mqttlab smc predict`: a thin shell over mqttlab.smc.

Exit codes: 0 done; 2 bad input (named in the message, no traceback).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# The smc commands import their parts (numpy, pandas, the engine) inside.
from mqttlab.exits import Exit

app = typer.Typer(
    help="Statistical model checking: learn latency models from explore logs, predict by simulation.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)
BAD_INPUT = Exit.BAD_INPUT
DEFAULT_CLIENT_STEP = 20  # the paper's grid: 50, 70, ..., 150



def _console() -> Console:
    """A console made when printing, so that it sees the terminal (and COLUMNS) of this command,
    not of whatever imported the module first."""
    return Console()


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


# The options predict, verify and validate declare alike: the usage profile its clients follow and
# the length of one client's sequence (the sample whose messages all must beat the threshold).
_Profile = Annotated[str, typer.Option(help="UP1, UP2, or a YAML/JSON profile file.")]
_SequenceLength = Annotated[int, typer.Option(help="Messages per client sequence (one sample).", min=1)]


def _growth_table(growth) -> Table:
    view = Table(title=f"Growing the data set until R² stops rising (tolerance {growth.tolerance:g})")
    for column in ("round", "cases", "messages", "R²", "rise"):
        view.add_column(column, justify="right", overflow="fold")
    for r in growth.rounds:
        view.add_row(str(r.round), str(r.cases), str(r.messages), "-" if r.r_squared != r.r_squared else f"{r.r_squared:.4f}",
                     "" if r.gain != r.gain else f"{r.gain:+.4f}")
    view.caption = growth.describe()
    return view


@app.command()
def learn(
    logs: Annotated[Optional[list[Path]], typer.Argument(help="Explore logs (CSV with a JSON sidecar each) or folders of them.")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the models, tables and figures.")] = Path("results/smc/model"),
    seed: Annotated[int, typer.Option(help="Seed of the workload hold-out and the scoring draws.")] = 0,
    grow: Annotated[bool, typer.Option("--grow", help="The paper's rule: add cases a round at a time, refit, stop when R² stops rising.")] = False,
    round_cases: Annotated[int, typer.Option(help="Cases per round with --grow.", min=1)] = 10,
    r2_tolerance: Annotated[float, typer.Option(help="With --grow: a rise of R² up to this counts as no rise.")] = 0.005,
    max_rounds: Annotated[int, typer.Option(help="With --grow: stop after this many rounds anyway.", min=2)] = 20,
    broker: Annotated[Optional[str], typer.Option(help="With --grow and no LOGS: explore this broker live, a round at a time, into OUT/explore.")] = None,
    broker_config: Annotated[str, typer.Option(help="With --broker: tuned, as-shipped, or a config file.")] = "tuned",
    clients: Annotated[str, typer.Option(help="With --broker: clients per case (the paper: 3..100).")] = "3..100",
    length: Annotated[int, typer.Option(help="With --broker: messages per client and case.", min=1)] = 50,
) -> None:
    """Fit the paper's OLS and better latency models; choose the best on held-out workloads."""
    import pandas as pd

    from mqttlab.brokers import BrokerError, UnknownBroker
    from mqttlab.smc.explore import parse_client_range
    from mqttlab.smc.grow import LiveRounds, grow_until_plateau, rounds_of
    from mqttlab.smc.learn import LearnError, learn as run_learn, save_learned
    from mqttlab.smc.log import ExploreLog, LogFormatError, read_logs
    from mqttlab.smc.plots import learn_figures

    growth = None
    rounds: Iterable[list[ExploreLog]]
    try:
        if broker is not None and not grow:
            raise ValueError("--broker: learn explores only with --grow (else run `smc explore` first)")
        if broker is not None and logs:
            raise ValueError("--broker: give LOGS or --broker, not both")
        if broker is None and not logs:
            raise ValueError("LOGS: give explore logs (or --grow --broker NAME to explore live)")
        if grow:
            if broker is not None:
                rounds = LiveRounds(broker, out / "explore", round_cases, parse_client_range(clients), length, seed,
                                    broker_config=broker_config)
            else:
                assert logs is not None  # without --broker, LOGS were given (checked above)
                rounds = rounds_of(read_logs(logs), round_cases)
            growth = grow_until_plateau(rounds, tolerance=r2_tolerance, max_rounds=max_rounds,
                                        on_round=lambda r: _console().print(f"round {r.round}: {r.cases} cases, R² = {r.r_squared:.4f}"))
            if isinstance(rounds, LiveRounds):
                rounds.write_summary(growth)
                _console().print(f"explore: {rounds.host_load.describe()}", markup=False)
            parsed = growth.logs
        else:
            assert logs is not None  # without --grow there is no --broker, so LOGS were given (checked above)
            parsed = read_logs(logs)
        result = run_learn(parsed, seed=seed)
    except (LogFormatError, LearnError, ValueError, UnknownBroker, BrokerError, ConnectionError) as error:
        raise _fail(str(error)) from None
    chosen_path = save_learned(result, out, sources=[str(log.path) for log in parsed])
    if growth is not None:
        growth.table().to_csv(out / "growth.csv", index=False)
        summary_path = out / "summary.json"
        summary_data = json.loads(summary_path.read_text())
        summary_data["growth"] = growth.to_dict()
        summary_path.write_text(json.dumps(summary_data, indent=2) + "\n")
        _console().print(_growth_table(growth))
    rows = pd.concat([log.ok_rows for log in parsed], ignore_index=True)
    learn_figures(rows, result.correlation, out, seed=seed)

    _console().print(
        f"{result.rows_used} messages from {len(parsed)} workloads; {result.rows_failed} functional failures kept apart; "
        f"{result.outliers_removed} outliers (top 5 % per type) removed for the OLS only."
    )
    coefficients = Table(title=f"OLS  Latency ~ Msg + ActiveMsgs + TotalSubs + Subs   (µs, R² = {result.r_squared:.3f})")
    for column in ("term", "Estimate", "Std. Error", "t value", "Pr(>|t|)"):
        coefficients.add_column(column, justify="left" if column == "term" else "right", overflow="fold")
    for term, row in result.coefficients.iterrows():
        coefficients.add_row(escape(term), f"{row['Estimate']:.4g}", f"{row['Std. Error']:.4g}", f"{row['t value']:.3f}", f"{row['Pr(>|t|)']:.3g}")
    _console().print(coefficients)
    scores = Table(title=f"Held-out comparison ({result.holdout}); lower CRPS is better")
    for column in ("model", "CRPS (ms)", "worse than chosen (ms)", "p99 predicted (ms)", "p99 observed (ms)"):
        scores.add_column(column, justify="left" if column == "model" else "right", overflow="fold")
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
    _console().print(scores)
    _console().print(f"default model: {result.chosen} → {chosen_path}", markup=False)


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
    profile: _Profile = "UP1",
    clients: Annotated[str, typer.Option(help="Client counts: 50,70 or 50..150 (step 20) or 50..150:10.")] = "50..150",
    threshold: Annotated[str, typer.Option(help="Latency thresholds, e.g. 30ms,50ms,70ms.")] = "30ms,50ms,70ms",
    length: _SequenceLength = 10,
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
        table.add_column(column, justify="right", overflow="fold")
    for row in result.table.itertuples():
        table.add_row(
            str(row.clients),
            f"{row.threshold_ms:g}",
            f"{row.p:.3f}",
            f"[{row.cp_low:.3f}, {row.cp_high:.3f}]",
            f"{row.p_all_clients:.3f}",
            f"{row.mean_active:.1f}",
        )
    _console().print(table)
    _console().print(f"written: {out / 'predict.csv'}, {out / 'predict.html'}, {out / 'predict.png'}", markup=False)


# explore, verify, validate: the steps that talk to a real broker ------------------------------

_BROKER_HELP = "A launcher name (a fresh broker per replication unless --reuse-broker) or mqtt://HOST:PORT."
_CONFIG_HELP = "How a launched broker is configured: tuned, as-shipped (the package's defaults), or a config file."
# The options explore, verify and validate declare alike.
_Timeout = Annotated[str, typer.Option(help="An exchange not done by then is a functional failure.")]
_BrokerConfig = Annotated[str, typer.Option(help=_CONFIG_HELP)]


def _one_broker(text: str, doing: str) -> str:
    """The one broker of --broker for a command that does (`doing`) one at a time."""
    from mqttlab.smc.broker import split_brokers

    names = split_brokers(text)
    if len(names) != 1:
        raise ValueError(f"--broker: {doing} one broker at a time")
    return names[0]


def _timeout_ms(text: str) -> int:
    try:
        values = parse_thresholds(text)
    except ValueError:
        values = []
    if len(values) != 1:
        raise ValueError(f"--timeout: {text!r} must be one positive duration like 5s or 500ms")
    return max(1, round(values[0]))


def _fmt_min_s(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    return f"{int(seconds // 60)}:{seconds % 60:05.2f}"


def _every(seconds: float):
    """A progress callback for the engine that prints at most once per `seconds`."""
    import time

    last = [time.monotonic()]

    def report(snapshot: str) -> None:
        if time.monotonic() - last[0] >= seconds:
            last[0] = time.monotonic()
            data = json.loads(snapshot)
            _console().print(f"  … {data['messages']} messages after {_fmt_min_s(data['elapsed_s'])}", markup=False)

    return report


@app.command()
def explore(
    broker: Annotated[str, typer.Option(help=_BROKER_HELP)] = "mosquitto",
    clients: Annotated[str, typer.Option(help="Clients per case: 5, a uniform range 3..100, or a list 5,10,20.")] = "3..100",
    cases: Annotated[int, typer.Option(help="Test cases (workloads), one log each.", min=1)] = 100,
    length: Annotated[int, typer.Option(help="Messages per client and case.", min=1)] = 50,
    think: Annotated[str, typer.Option(help="Wait before each message, MIN..MAX ms (0..0: none, as the paper).")] = "0..0",
    weights: Annotated[str, typer.Option(help="Message weights over uniform 1, e.g. publish=5,subscribe=3.")] = "",
    topics: Annotated[int, typer.Option(help="Distinct topics the clients use.", min=1, max=64)] = 10,
    timeout: _Timeout = "5s",
    reuse_broker: Annotated[bool, typer.Option("--reuse-broker", help="One broker for all cases instead of a fresh one each.")] = False,
    broker_config: _BrokerConfig = "tuned",
    seed: Annotated[int, typer.Option(help="Seed of client counts and walks.")] = 0,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for case-NNN.csv and their sidecars.")] = Path("results/smc/explore"),
) -> None:
    """Model-based tests that log every message's latency (the input of `smc learn`)."""
    from mqttlab.brokers import BrokerError, UnknownBroker
    from mqttlab.smc.explore import WalkSettings, explore as run_explore, parse_client_range, parse_think, parse_weights

    try:
        name = _one_broker(broker, "explore runs")
        walk = WalkSettings(weights=parse_weights(weights), think_ms=parse_think(think), topics=topics, timeout_ms=_timeout_ms(timeout))
        counts = parse_client_range(clients)
    except ValueError as error:
        raise _fail(str(error)) from None

    def on_case(index: int, count: int, result) -> None:
        failed = len(result.failures)
        note = f"[red]{failed} functional failures[/red]" if failed else "all checks passed"
        _console().print(f"case {index:3d}: {count:3d} clients, {len(result.rows):6d} messages, {result.elapsed_s:6.2f} s, {note}", markup=False)

    try:
        summary = run_explore(name, out, cases=cases, clients=counts, length=length, seed=seed, walk=walk,
                              fresh_broker=not reuse_broker, broker_config=broker_config, on_case=on_case)
    except (UnknownBroker, BrokerError, ConnectionError, ValueError) as error:
        raise _fail(str(error)) from None
    failures = ", ".join(f"{k} {v}" for k, v in sorted(summary.failures.items())) or "none"
    _console().print(f"{len(summary.cases)} cases, {summary.messages} messages in {out}; functional failures: {failures}", markup=False)
    _console().print(f"broker config {summary.broker_config.get('mode')}; {summary.host_load.describe()}", markup=False)


@app.command()
def verify(
    broker: Annotated[str, typer.Option(help=_BROKER_HELP + " Several, comma-separated, are compared side by side.")] = "mosquitto",
    profile: _Profile = "UP1",
    clients: Annotated[str, typer.Option(help="Client counts: 90, 50,70 or 50..150:20.")] = "50",
    threshold: Annotated[str, typer.Option(help="Latency thresholds, e.g. 30ms or 30ms,50ms.")] = "30ms",
    h1: Annotated[str, typer.Option(help="Probability of H1, or 'predicted' (with --prediction).")] = "predicted",
    prediction: Annotated[Optional[Path], typer.Option(help="predict.json (or its folder) from `smc predict`.")] = None,
    indifference: Annotated[float, typer.Option(help="H0 = H1 - indifference.")] = 0.1,
    alpha: Annotated[float, typer.Option(help="Type I error.")] = 0.01,
    beta: Annotated[float, typer.Option(help="Type II error.")] = 0.01,
    length: _SequenceLength = 10,
    timeout: _Timeout = "5s",
    reuse_broker: Annotated[bool, typer.Option("--reuse-broker", help="Keep one broker for all client counts.")] = False,
    broker_config: _BrokerConfig = "tuned",
    seed: Annotated[int, typer.Option(help="Seed of the clients' walks.")] = 0,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for verify.csv and verify.json.")] = Path("results/smc/verify"),
) -> None:
    """Wald's SPRT on the real broker: per-client decisions (the paper's Tables 3/4) and one system decision."""
    from mqttlab.brokers import BrokerError, UnknownBroker
    from mqttlab.smc.broker import split_brokers
    from mqttlab.smc.profiles import ProfileError, load_profile
    from mqttlab.smc.verify import VerifySettings, hypotheses_for, verify as run_verify

    try:
        names = split_brokers(broker)
        counts = parse_clients(clients)
        thresholds = parse_thresholds(threshold)
        usage = load_profile(profile)
        if h1.strip().lower() == "predicted":
            if prediction is None:
                raise ValueError("--h1 predicted needs --prediction FILE (predict.json from `smc predict`)")
            fixed = None
        else:
            try:
                fixed = float(h1)
            except ValueError:
                raise ValueError(f"--h1 must be a probability or 'predicted', got {h1!r}") from None
            prediction = None
        hypotheses = hypotheses_for(counts, thresholds, fixed, prediction, indifference)
        settings = VerifySettings(length=length, indifference=indifference, alpha=alpha, beta=beta, seed=seed,
                                  timeout_ms=_timeout_ms(timeout), fresh_broker=not reuse_broker, broker_config=broker_config)
        for h in hypotheses:
            h.test(alpha, beta)
    except (ValueError, ProfileError) as error:
        raise _fail(str(error)) from None

    def on_run(label: str, count: int, run) -> None:
        _console().print(f"{label}: {count} clients, stopped ({run.stopped}) after {_fmt_min_s(run.elapsed_s)}, "
                       f"{len(run.failures)} functional failures")

    from mqttlab.smc.hostload import NO_LOAD

    loads = []
    try:
        table = run_verify(names, usage, hypotheses, out, settings, on_run, _every(15.0),
                           on_load=lambda _label, _count, load: loads.append(load))
    except (UnknownBroker, BrokerError, ConnectionError, ValueError) as error:
        raise _fail(str(error)) from None
    load = sum(loads, NO_LOAD)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "verify.csv", index=False)
    about = {"profile": usage.name, "length": length, "alpha": alpha, "beta": beta, "indifference": indifference,
             "h1": h1, "prediction": str(prediction) if prediction else None, "seed": seed,
             "broker_config": broker_config, "host_cpu": load.to_dict(), "rows": table.to_dict("records")}
    (out / "verify.json").write_text(json.dumps(about, indent=2) + "\n")

    view = Table(title=f"SPRT on the real broker — {usage.name}, sequences of {length}, α = {alpha:g}, β = {beta:g}")
    # Every broker is tested under the same hypotheses, so H0 and H1 are shown once per point.
    for column in ("t (ms)", "#Clients", "H0", "H1"):
        view.add_column(column, justify="right", overflow="fold")
    labels = list(dict.fromkeys(table["broker"]))
    for label in labels:
        for column in ("Result", "#Samples", "Time", "System"):
            view.add_column(f"{escape(label)}: {column}" if column == "Result" else column, justify="right", overflow="fold")
    for (t, n), group in table.groupby(["threshold_ms", "clients"], sort=True):
        first = group.iloc[0]
        cells = [f"{t:g}", str(n), f"{first.p0:.2f}", f"{first.p1:.2f}"]
        for label in labels:
            row = group[group["broker"] == label]
            if row.empty:
                cells += ["-"] * 4
                continue
            r = row.iloc[0]
            cells += [r.result, f"{r.mean_samples:.2f}", _fmt_min_s(r.time_s), f"{r.system} ({r.system_samples})"]
        view.add_row(*cells)
    view.caption = ("Result: H1/H0 when every client accepted it, else the share accepting H1. #Samples: mean sequences per "
                    "client. Time: until the last client decided. System: one SPRT on all clients' sequences pooled "
                    "in completion order (samples).")
    _console().print(view)
    _console().print(load.describe())
    _console().print(f"written: {out / 'verify.csv'}, {out / 'verify.json'}", markup=False)


@app.command()
def validate(
    model_path: Annotated[Path, typer.Argument(metavar="MODEL", help="A folder written by `smc learn` (both models) or one model file.")],
    broker: Annotated[str, typer.Option(help=_BROKER_HELP)] = "mosquitto",
    profile: _Profile = "UP1",
    clients: Annotated[str, typer.Option(help="Client counts: 50,70 or 50..150 (step 20).")] = "50..150",
    threshold: Annotated[str, typer.Option(help="Latency thresholds, e.g. 30ms,50ms,70ms.")] = "30ms,50ms,70ms",
    length: _SequenceLength = 10,
    replications: Annotated[int, typer.Option(help="Independent replications per client count.", min=2)] = 30,
    confidence: Annotated[float, typer.Option(help="Level of the measured intervals.")] = 0.95,
    samples: Annotated[int, typer.Option(help="Simulated replications per predicted point.", min=1)] = 1060,
    many_clients: Annotated[int, typer.Option(help="Client counts from here on are flagged (the paper: 130).", min=1)] = 130,
    timeout: _Timeout = "5s",
    reuse_broker: Annotated[bool, typer.Option("--reuse-broker", help="One broker for all replications (not independent in state).")] = False,
    broker_config: _BrokerConfig = "tuned",
    seed: Annotated[int, typer.Option(help="Seed of walks and simulation.")] = 0,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for validate.csv and validate.json.")] = Path("results/smc/validate"),
) -> None:
    """Predicted vs measured P(all messages of a client's sequence < t), point by point, with errors."""
    from mqttlab.brokers import BrokerError, UnknownBroker
    from mqttlab.smc.profiles import ProfileError, load_profile
    from mqttlab.smc.validate import ValidateSettings, models_from, region_errors, save, validate as run_validate

    try:
        name = _one_broker(broker, "validate measures")
        counts = parse_clients(clients)
        thresholds = parse_thresholds(threshold)
        usage = load_profile(profile)
        models = models_from(model_path)
        settings = ValidateSettings(length=length, replications=replications, confidence=confidence,
                                    prediction_samples=samples, seed=seed, timeout_ms=_timeout_ms(timeout),
                                    fresh_broker=not reuse_broker, many_clients=many_clients, broker_config=broker_config)
    except (ValueError, ProfileError) as error:
        raise _fail(str(error)) from None

    def on_replication(count: int, r: int) -> None:
        if r + 1 == replications:
            _console().print(f"{count} clients: {replications} replications measured", markup=False)

    try:
        table = run_validate(name, models, usage, counts, thresholds, out, settings, on_replication)
    except (UnknownBroker, BrokerError, ConnectionError, ValueError) as error:
        raise _fail(str(error)) from None
    save(table, out, {"model": str(model_path), "profile": usage.name, "length": length, "replications": replications,
                      "confidence": confidence, "prediction_samples": samples, "seed": seed})
    names_m = list(models)
    view = Table(title=f"Predicted vs measured P(all {length} messages of a client < t) — {usage.name}, "
                       f"{replications} replications per count, {confidence:.0%} intervals")
    for column in ("clients", "t (ms)", "measured p", "interval", "all clients", *[f"{m}: p (error)" for m in names_m]):
        view.add_column(column, justify="right", overflow="fold")
    for r in table.itertuples():
        flags = ("*" if r.small_threshold else "") + ("†" if r.many_clients else "")
        cells = [str(r.clients), f"{r.threshold_ms:g}{flags}", f"{r.p:.3f}", f"[{r.low:.3f}, {r.high:.3f}]", f"{r.p_all_clients:.3f}"]
        for m in names_m:
            inside = getattr(r, f"inside_{m}")
            cells.append(f"{getattr(r, f'predicted_{m}'):.3f} ({getattr(r, f'error_{m}'):+.3f}){'' if inside else ' ✗'}")
        view.add_row(*cells)
    view.caption = "* smallest threshold, † many clients; ✗ prediction outside the measured interval"
    _console().print(view)
    regions = region_errors(table, names_m)
    summary = Table(title="Mean absolute error by region (share of predictions inside the interval)")
    summary.add_column("region", overflow="fold")
    summary.add_column("points", justify="right", overflow="fold")
    for m in names_m:
        summary.add_column(m, justify="right", overflow="fold")
    for r in regions.to_dict("records"):
        summary.add_row(r["region"], str(r["points"]), *[f"{r[f'mae_{m}']:.3f} ({r[f'inside_{m}']:.0%})" for m in names_m])
    _console().print(summary)
    _console().print(f"written: {out / 'validate.csv'}, {out / 'validate.json'}", markup=False)


# paper: seed 000's whole pipeline in one command -------------------------------------------


@app.command()
def paper(
    quick: Annotated[bool, typer.Option("--quick", help="Few clients, short sequences, short waits, every step still run on a real broker (for tests).")] = False,
    broker: Annotated[Optional[str], typer.Option(help="Brokers (the paper: mosquitto,emqx); one that cannot run here is skipped with a note.")] = None,
    broker_config: Annotated[Optional[str], typer.Option(help="tuned, as-shipped or a config file (the paper: as-shipped, its 'default configuration').")] = None,
    profile: Annotated[Optional[str], typer.Option(help="Built-in usage profiles (the paper: UP1,UP2).")] = None,
    clients: Annotated[Optional[str], typer.Option(help="Client counts predicted (the paper: 50..150, step 20).")] = None,
    verify_clients: Annotated[Optional[str], typer.Option(help="Client counts verified by SPRT (the paper: 50..130).")] = None,
    threshold: Annotated[Optional[str], typer.Option(help="Latency thresholds (the paper: 30ms,50ms,70ms).")] = None,
    length: Annotated[Optional[int], typer.Option(help="Messages per client sequence (the paper: 10).", min=1)] = None,
    epsilon: Annotated[Optional[float], typer.Option(help="Chernoff–Hoeffding ε (the paper: 0.05).")] = None,
    delta: Annotated[Optional[float], typer.Option(help="Chernoff–Hoeffding δ (the paper: 0.01 → 1060 samples).")] = None,
    indifference: Annotated[Optional[float], typer.Option(help="H0 = H1 − this (the paper: 0.1).")] = None,
    alpha: Annotated[Optional[float], typer.Option(help="SPRT type I error (the paper: 0.01).")] = None,
    beta: Annotated[Optional[float], typer.Option(help="SPRT type II error (the paper: 0.01).")] = None,
    cases: Annotated[Optional[int], typer.Option(help="Explore test cases without --grow (the paper: 100).", min=1)] = None,
    explore_clients: Annotated[Optional[str], typer.Option(help="Clients per explore case (the paper: 3..100).")] = None,
    explore_length: Annotated[Optional[int], typer.Option(help="Messages per client and explore case (the paper: 50).", min=1)] = None,
    grow: Annotated[bool, typer.Option("--grow", help="Explore in rounds until R² stops rising (the paper's rule) instead of a fixed --cases.")] = False,
    round_cases: Annotated[Optional[int], typer.Option(help="Explore cases per round with --grow (default 10).", min=1)] = None,
    r2_tolerance: Annotated[Optional[float], typer.Option(help="With --grow: a rise of R² up to this is no rise (default 0.005).")] = None,
    max_rounds: Annotated[Optional[int], typer.Option(help="With --grow: at most this many rounds (default 20).", min=2)] = None,
    validate: Annotated[bool, typer.Option("--validate", help="Also measure every point with independent replications (ours, not the paper's).")] = False,
    replications: Annotated[Optional[int], typer.Option(help="Replications per client count with --validate (default 30).", min=2)] = None,
    timeout: Annotated[Optional[str], typer.Option(help="An exchange not done by then is a functional failure (default 5s).")] = None,
    reuse_broker: Annotated[bool, typer.Option("--reuse-broker", help="One broker per step instead of a fresh one per case/run.")] = False,
    seed: Annotated[int, typer.Option(help="Seed of walks and simulations.")] = 0,
    out: Annotated[Path, typer.Option("--out", "-o", help="One folder for every step's output and the summary.")] = Path("results/smc/paper"),
) -> None:
    """Seed 000's pipeline in one command: explore → learn → predict → verify (→ validate), the paper's settings by default."""
    from dataclasses import replace

    from mqttlab.brokers import BrokerError, UnknownBroker
    from mqttlab.smc.broker import split_brokers
    from mqttlab.smc.explore import parse_client_range
    from mqttlab.smc.paper import QUICK, PaperSettings, run_paper, sprt_view, table2_view

    base = QUICK if quick else PaperSettings()
    given: dict = {}
    try:
        if broker is not None:
            given["brokers"] = tuple(split_brokers(broker))
        if broker_config is not None:
            given["broker_config"] = broker_config
        if profile is not None:
            given["profiles"] = tuple(p.strip().upper() for p in profile.split(","))
        if clients is not None:
            given["predict_clients"] = tuple(parse_clients(clients))
        if verify_clients is not None:
            given["verify_clients"] = tuple(parse_clients(verify_clients))
        if threshold is not None:
            given["thresholds_ms"] = tuple(parse_thresholds(threshold))
        if explore_clients is not None:
            given["explore_clients"] = parse_client_range(explore_clients)
        if timeout is not None:
            given["timeout_ms"] = _timeout_ms(timeout)
        for key, value in (("length", length), ("epsilon", epsilon), ("delta", delta), ("indifference", indifference),
                           ("alpha", alpha), ("beta", beta), ("explore_cases", cases), ("explore_length", explore_length),
                           ("round_cases", round_cases), ("r2_tolerance", r2_tolerance), ("max_rounds", max_rounds),
                           ("replications", replications)):
            if value is not None:
                given[key] = value
        # A switch left off leaves its setting to the base (--quick validates without --validate).
        for key, switched, value in (("grow", grow, True), ("validate", validate, True), ("fresh_broker", reuse_broker, False)):
            if switched:
                given[key] = value
        settings = replace(base, seed=seed, **given)
        problems = settings.problems()
        if problems:
            raise ValueError("; ".join(problems))
    except ValueError as error:
        raise _fail(str(error)) from None

    from mqttlab.results import record_invocation

    _console().print(f"seed 000 pipeline{' (quick)' if quick else ''} → {out}", markup=False)
    try:
        out.mkdir(parents=True, exist_ok=True)
        record_invocation(out)
    except OSError as error:
        raise _fail(f"{out}: cannot write: {error}") from None
    try:
        result = run_paper(out, settings, say=lambda text: _console().print(escape(text)))
    except (UnknownBroker, BrokerError, ConnectionError, ValueError) as error:
        raise _fail(str(error)) from None

    table2 = table2_view(result.table2)
    view = Table(title=escape(f"Table 2: Monte Carlo time per point [min:s], n = {settings.samples} "
                              f"(ε = {settings.epsilon:g}, δ = {settings.delta:g})"))
    view.add_column("profile broker — model", overflow="fold")
    for column in table2.columns:
        view.add_column(str(column), justify="right", overflow="fold")
    for label, row in table2.iterrows():
        view.add_row(escape(str(label)), *[str(v) for v in row])
    view.caption = "paper: the paper's delay function (the default); the others are ours, fitted by `learn`"
    _console().print(view)
    for number, name in zip((3, 4), settings.profiles):
        part = sprt_view(result.sprt, name)
        if part.empty:
            continue
        table = Table(title=f"Table {number}: SPRT on the real broker, {name}; H1 from the paper's model, "
                            f"α = {settings.alpha:g}, β = {settings.beta:g}")
        for column in part.columns:
            table.add_column(escape(str(column)), justify="right", overflow="fold")
        for row in part.itertuples(index=False):
            table.add_row(*[escape(f"{v:.3g}" if isinstance(v, float) else str(v)) for v in row])
        table.caption = "#Samples: mean per client; ours …: p: our models' predictions for the same point"
        _console().print(table)
    cpu = Table(title="Host CPU during the steps that drive the broker (the paper: under 60 %)")
    for column in ("broker", "step", "profile", "mean", "max", "time above 60 %"):
        cpu.add_column(column, justify="left" if column in ("broker", "step", "profile") else "right", overflow="fold")
    for row in result.host_cpu.itertuples():
        cpu.add_row(row.broker, row.step, row.profile, f"{row.mean_share:.0%}", f"{row.max_share:.0%}",
                    f"{row.share_of_time_above_limit:.0%}")
    _console().print(cpu)
    for name, why in result.skipped.items():
        _console().print(f"[yellow]skipped {escape(name)}[/yellow]: {escape(why)}")
    for warning in result.warnings:
        _console().print(f"[yellow]warning[/yellow]: {escape(warning)}")
    _console().print(f"written: {out}/ (summary.md, paper.json, table2-monte-carlo-time.csv, table3-4-sprt.csv, "
                   f"predictions.csv, host-cpu.csv, and one folder per broker)")
