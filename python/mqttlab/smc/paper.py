"""`smc paper`: seed 000's whole pipeline in one call, explore → learn → predict → verify (→ validate),
with the paper's settings as defaults.

The paper's settings (Aichernig and Schumi, *How Fast is MQTT?*):

* brokers Mosquitto and emqtt, "with the default configurations", QoS 1 (our clients' QoS);
* explore: 100 test cases of 3–100 clients, 50 messages per client, uniform choice, no think time;
  the number of cases chosen by growing the data set until R² stops rising (here `grow`);
* learn: ``Latency ~ Msg + ActiveMsgs + TotalSubs + Subs`` by OLS after dropping the top 5 % per type;
  its delay function (normal, sd from the coefficients' standard errors) is the default model;
* predict: usage profiles UP1 and UP2, 50–150 clients in steps of 20, thresholds 30/50/70 ms,
  sequences of 10 messages, Monte Carlo with Chernoff–Hoeffding ε = 0.05, δ = 0.01 (1060 samples);
* verify: Wald's SPRT per client, H1 = the predicted probability, H0 = H1 − 0.1, α = β = 0.01,
  50–130 clients (the paper's Tables 3 and 4).

Beside the paper's model, every model `learn` fits predicts the same grid ("ours"; the one
`learn` chose on held-out workloads is marked), so each SPRT row shows which prediction the broker
agreed with. `validate`, our check with independent replications, is optional.

Everything goes into one folder: one subfolder per broker and step, and at the top the tables
like the paper's (``table2-monte-carlo-time.csv``, ``table3-4-sprt.csv``), ``predictions.csv``,
``host-cpu.csv``, ``summary.md`` and ``paper.json``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from mqttlab.engine import engine_commit
from mqttlab.brokers import get_launcher
from mqttlab.scenario.fields import is_url
from mqttlab.smc.explore import ClientRange, WalkSettings, explore
from mqttlab.smc.grow import MAX_ROUNDS, TOLERANCE, Growth, LiveRounds, grow_until_plateau
from mqttlab.smc.hostload import LIMIT, NO_LOAD, HostLoad, HostLoadSampler
from mqttlab.smc.learn import LearnResult, learn, save_learned
from mqttlab.smc.log import read_logs
from mqttlab.smc.models import LatencyModel, NormalModel
from mqttlab.smc.plots import learn_figures, predict_figures
from mqttlab.smc.predict import PredictionSettings, predict
from mqttlab.smc.profiles import BUILT_IN, UsageProfile
from mqttlab.smc.stats import chernoff_sample_size
from mqttlab.smc.validate import ValidateSettings, validate
from mqttlab.smc.verify import Hypothesis, ProfileRuns, VerifySettings, verify

PAPER_MODEL = "paper"


@dataclass(frozen=True)
class PaperSettings:
    brokers: tuple[str, ...] = ("mosquitto", "emqx")
    broker_config: str = "as-shipped"
    profiles: tuple[str, ...] = ("UP1", "UP2")
    #: waits of the profiles are multiplied by this; 1 is the paper's (only --quick shortens them)
    wait_scale: float = 1.0
    explore_cases: int = 100
    explore_clients: ClientRange = ClientRange(low=3, high=100)
    explore_length: int = 50
    grow: bool = False
    round_cases: int = 10
    r2_tolerance: float = TOLERANCE
    max_rounds: int = MAX_ROUNDS
    predict_clients: tuple[int, ...] = (50, 70, 90, 110, 130, 150)
    verify_clients: tuple[int, ...] = (50, 70, 90, 110, 130)
    thresholds_ms: tuple[float, ...] = (30.0, 50.0, 70.0)
    length: int = 10
    epsilon: float = 0.05
    delta: float = 0.01
    indifference: float = 0.1
    alpha: float = 0.01
    beta: float = 0.01
    validate: bool = False
    replications: int = 30
    seed: int = 0
    timeout_ms: int = 5000
    fresh_broker: bool = True

    @property
    def samples(self) -> int:
        return chernoff_sample_size(self.epsilon, self.delta)

    def profile_runs(self) -> dict[str, Any]:
        """The pipeline's settings that verify and validate run profile clients with."""
        return {setting.name: getattr(self, setting.name) for setting in fields(ProfileRuns)}

    def profile(self, name: str) -> UsageProfile:
        base = BUILT_IN[name]
        if self.wait_scale == 1.0:
            return base
        return replace(base, name=f"{base.name} (waits ×{self.wait_scale:g})", min_wait_ms=base.min_wait_ms * self.wait_scale,
                       max_wait_ms=base.max_wait_ms * self.wait_scale)

    def problems(self) -> list[str]:
        """Every bad setting at once, named by its option."""
        out = []
        unknown = [p for p in self.profiles if p not in BUILT_IN]
        if unknown or not self.profiles:
            out.append(f"--profile: {', '.join(unknown) or 'none'} — choose among {', '.join(BUILT_IN)}")
        for name, value in (("--epsilon", self.epsilon), ("--delta", self.delta), ("--alpha", self.alpha),
                            ("--beta", self.beta), ("--indifference", self.indifference)):
            if not 0 < value < 1:
                out.append(f"{name} must be strictly between 0 and 1, got {value!r}")
        if not 0 < self.wait_scale <= 1:
            out.append(f"wait scale must be in (0, 1], got {self.wait_scale!r}")
        for name, value in (("--cases", self.explore_cases), ("--explore-length", self.explore_length),
                            ("--length", self.length), ("--round-cases", self.round_cases)):
            if value < 1:
                out.append(f"{name} must be at least 1, got {value!r}")
        if self.grow and self.max_rounds < 2:
            out.append(f"--max-rounds must be at least 2, got {self.max_rounds!r}")
        if self.r2_tolerance < 0:
            out.append(f"--r2-tolerance must be >= 0, got {self.r2_tolerance!r}")
        if self.validate and self.replications < 2:
            out.append(f"--replications must be at least 2, got {self.replications!r}")
        if not self.brokers:
            out.append("--broker: name at least one broker")
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["explore_clients"] = (list(self.explore_clients.choices) if self.explore_clients.choices
                                   else f"{self.explore_clients.low}..{self.explore_clients.high}")
        data["samples_per_point"] = self.samples
        return data


#: few clients and short sequences, every step against a real broker; for tests and a first look
QUICK = PaperSettings(
    explore_cases=3, explore_clients=ClientRange(low=4, high=8), explore_length=20, round_cases=1, max_rounds=4,
    predict_clients=(2, 4), verify_clients=(2, 4), length=2, epsilon=0.15, wait_scale=0.02,
    validate=True, replications=3, timeout_ms=2000,
)


@dataclass
class StepRecord:
    broker: str
    step: str
    profile: str = ""
    seconds: float = 0.0
    host_load: HostLoad | None = None  # for the steps that drive the broker

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"broker": self.broker, "step": self.step, "profile": self.profile, "seconds": self.seconds}
        if self.host_load is not None:
            out["host_cpu"] = self.host_load.to_dict()
        return out


@dataclass
class PaperResult:
    out: Path
    settings: PaperSettings
    brokers: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # broker → why
    steps: list[StepRecord] = field(default_factory=list)
    learned: dict[str, LearnResult] = field(default_factory=dict)
    growth: dict[str, Growth] = field(default_factory=dict)
    broker_config: dict[str, dict] = field(default_factory=dict)
    predictions: pd.DataFrame = field(default_factory=pd.DataFrame)  # every model, every point
    table2: pd.DataFrame = field(default_factory=pd.DataFrame)  # Monte Carlo seconds per point
    sprt: pd.DataFrame = field(default_factory=pd.DataFrame)  # Tables 3/4, with our predictions beside
    validation: pd.DataFrame = field(default_factory=pd.DataFrame)
    warnings: list[str] = field(default_factory=list)

    @property
    def host_cpu(self) -> pd.DataFrame:
        rows = []
        for s in self.steps:
            if s.host_load is None:
                continue
            d = s.host_load.to_dict()
            rows.append({"broker": s.broker, "step": s.step, "profile": s.profile, "seconds": s.seconds,
                         "cpus": d["cpus"], "mean_share": d["mean_share"], "max_share": d["max_share"],
                         "share_of_time_above_limit": d["share_of_time_above_limit"], "above_limit": d["above_limit"]})
        return pd.DataFrame(rows)


def _available(name: str) -> tuple[bool, str]:
    launcher = get_launcher(name)  # UnknownBroker names the known ones
    if is_url(name):
        return True, "external"
    availability = launcher.availability()
    return availability.available, availability.detail


def _models(learned: LearnResult) -> dict[str, LatencyModel]:
    """The paper's delay function first (the default), then every model of ours."""
    normal = learned.models["normal"]
    assert isinstance(normal, NormalModel)
    return {PAPER_MODEL: normal.paper_delay(), **learned.models}


def _timed_predictions(model: LatencyModel, profile: UsageProfile, clients: list[int], settings: PaperSettings,
                       out: Path | None, title: str) -> tuple[pd.DataFrame, dict[int, float]]:
    """Every point of the grid, and the Monte Carlo time of each client count (the paper's Table 2).

    One simulation per client count answers every threshold, so a count is timed once. predict()
    seeds each count by itself, so predicting counts one at a time gives the same numbers."""
    prediction_settings = PredictionSettings(length=settings.length, epsilon=settings.epsilon, delta=settings.delta,
                                             seed=settings.seed)
    tables, curves, seconds = [], [], {}
    for count in clients:
        started = time.perf_counter()
        result = predict(model, profile, [count], list(settings.thresholds_ms), prediction_settings)
        seconds[count] = time.perf_counter() - started
        tables.append(result.table)
        curves.append(result.curves)
    table = pd.concat(tables, ignore_index=True)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "predict.csv", index=False)
        curve = pd.concat(curves, ignore_index=True)
        curve.to_csv(out / "curves.csv", index=False)
        about = {"model_kind": model.kind, "profile": profile.name, "length": settings.length,
                 "epsilon": settings.epsilon, "delta": settings.delta, "samples": prediction_settings.n,
                 "seed": settings.seed, "seconds_per_point": {str(k): v for k, v in seconds.items()},
                 "points": table.to_dict("records")}
        (out / "predict.json").write_text(json.dumps(about, indent=2) + "\n")
        predict_figures(table, curve, out, title)
    return table, seconds


def _testable(p1: float, indifference: float) -> bool:
    return 0 < p1 - indifference < 1 and p1 <= 1


def run_paper(
    out: Path,
    settings: PaperSettings = PaperSettings(),
    say: Callable[[str], None] = lambda _text: None,
) -> PaperResult:
    """Runs the whole pipeline for every available broker and writes one folder."""
    problems = settings.problems()
    if problems:
        raise ValueError("; ".join(problems))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = PaperResult(out=out, settings=settings)
    for name in settings.brokers:
        ok, detail = _available(name)
        if ok:
            result.brokers.append(name)
        else:
            result.skipped[name] = detail
            say(f"skipped {name}: {detail}")
    if not result.brokers:
        raise ValueError("--broker: none of " + ", ".join(settings.brokers) + " can run here (" +
                         "; ".join(f"{k}: {v}" for k, v in result.skipped.items()) + ")")

    predictions, table2, sprt, validation = [], [], [], []
    all_clients = sorted(set(settings.predict_clients) | set(settings.verify_clients))
    for broker in result.brokers:
        folder = out / broker.replace("/", "_").replace(":", "_")
        learned = _explore_and_learn(broker, folder, settings, result, say)
        models = _models(learned)
        for profile_name in settings.profiles:
            profile = settings.profile(profile_name)
            started = time.perf_counter()
            by_model: dict[str, pd.DataFrame] = {}
            for kind, model in models.items():
                # Figures for the paper's model and the chosen one; the others' tables suffice.
                figures = kind in (PAPER_MODEL, learned.chosen)
                target = folder / "predict" / profile_name / kind
                title = f"{broker}, {profile.name}, {kind} model, sequences of {settings.length}"
                table, seconds = _timed_predictions(model, profile, all_clients, settings, target if figures else None, title)
                if not figures:
                    target.mkdir(parents=True, exist_ok=True)
                    table.to_csv(target / "predict.csv", index=False)
                by_model[kind] = table
                predictions.append(table.assign(broker=broker, profile=profile_name, model=kind,
                                                chosen=kind == learned.chosen))
                for count, s in seconds.items():
                    table2.append({"profile": profile_name, "broker": broker, "model": kind, "clients": count,
                                   "samples": settings.samples, "seconds": s})
            result.steps.append(StepRecord(broker, "predict", profile_name, time.perf_counter() - started))
            say(f"{broker} {profile_name}: predicted {len(all_clients)} client counts × {len(settings.thresholds_ms)} "
                f"thresholds with {len(models)} models, n = {settings.samples} per point")

            sprt.extend(_verify(broker, folder, profile_name, profile, by_model, learned.chosen, settings, result, say))
            if settings.validate:
                validation.append(_validate(broker, folder, profile_name, profile, models, learned.chosen, settings, result, say))

    result.predictions = pd.concat(predictions, ignore_index=True)
    result.table2 = pd.DataFrame(table2)
    result.sprt = pd.DataFrame(sprt)
    result.validation = pd.concat(validation, ignore_index=True) if validation else pd.DataFrame()
    for step in result.steps:
        if step.host_load is not None and step.host_load.above_limit:
            result.warnings.append(f"{step.broker} {step.step} {step.profile}: {step.host_load.describe()}".replace("  ", " "))
    write_summary(result)
    return result


def _explore_and_learn(broker: str, folder: Path, settings: PaperSettings, result: PaperResult,
                       say: Callable[[str], None]) -> LearnResult:
    explore_dir = folder / "explore"
    walk = WalkSettings(timeout_ms=settings.timeout_ms)  # uniform choice, no think time: the paper's logging phase

    def on_case(index: int, count: int, case) -> None:
        failed = f", {len(case.failures)} functional failures" if case.failures else ""
        say(f"{broker} explore case {index}: {count} clients, {len(case.rows)} messages, {case.elapsed_s:.1f} s{failed}")

    started = time.perf_counter()
    if settings.grow:
        rounds = LiveRounds(broker, explore_dir, settings.round_cases, settings.explore_clients, settings.explore_length,
                            settings.seed, walk, settings.fresh_broker, settings.broker_config, on_case)

        def on_round(r) -> None:
            gain = "" if math.isnan(r.gain) else f" ({r.gain:+.4f})"
            say(f"{broker} round {r.round}: {r.cases} cases, R² = {r.r_squared:.4f}{gain}")

        growth = grow_until_plateau(rounds, tolerance=settings.r2_tolerance, max_rounds=settings.max_rounds, on_round=on_round)
        rounds.write_summary(growth)
        result.growth[broker] = growth
        say(f"{broker} explore: {growth.describe()}")
        load, logs, config = rounds.host_load, growth.logs, rounds.broker_record
    else:
        summary = explore(broker, explore_dir, cases=settings.explore_cases, clients=settings.explore_clients,
                          length=settings.explore_length, seed=settings.seed, walk=walk,
                          fresh_broker=settings.fresh_broker, broker_config=settings.broker_config, on_case=on_case)
        load, config = summary.host_load, summary.broker_config
        logs = read_logs([explore_dir])
    result.broker_config[broker] = config
    result.steps.append(StepRecord(broker, "explore", "", time.perf_counter() - started, load))
    say(f"{broker} explore: {load.describe()}")

    started = time.perf_counter()
    learned = learn(logs, seed=settings.seed)
    learn_dir = folder / "learn"
    save_learned(learned, learn_dir, sources=[str(log.path) for log in logs])
    learn_figures(pd.concat([log.ok_rows for log in logs], ignore_index=True), learned.correlation, learn_dir, seed=settings.seed)
    result.steps.append(StepRecord(broker, "learn", "", time.perf_counter() - started))
    result.learned[broker] = learned
    say(f"{broker} learn: R² = {learned.r_squared:.3f} (paper's OLS); chosen on held-out workloads: {learned.chosen}")
    return learned


def _verify(broker: str, folder: Path, profile_name: str, profile: UsageProfile, by_model: dict[str, pd.DataFrame],
            chosen: str, settings: PaperSettings, result: PaperResult, say: Callable[[str], None]) -> list[dict]:
    paper = by_model[PAPER_MODEL].set_index(["clients", "threshold_ms"])
    hypotheses: list[Hypothesis] = []
    untestable: list[Hypothesis] = []
    for count in settings.verify_clients:
        for t in settings.thresholds_ms:
            p1 = float(paper.loc[(count, t), "p"])
            (hypotheses if _testable(p1, settings.indifference) else untestable).append(
                Hypothesis(clients=count, threshold_ms=t, p1=p1, indifference=settings.indifference))
    verify_settings = VerifySettings(**settings.profile_runs(), indifference=settings.indifference, alpha=settings.alpha,
                                     beta=settings.beta)
    loads: list[HostLoad] = []
    started = time.perf_counter()
    target = folder / "verify" / profile_name

    def on_run(label: str, count: int, run) -> None:
        say(f"{broker} {profile_name} verify: {count} clients, stopped ({run.stopped}) after {run.elapsed_s:.1f} s, "
            f"{len(run.failures)} functional failures")

    table = (verify([broker], profile, hypotheses, target, verify_settings, on_run,
                    on_load=lambda _b, _n, load: loads.append(load)) if hypotheses else pd.DataFrame())
    load = sum(loads, NO_LOAD)
    result.steps.append(StepRecord(broker, "verify", profile_name, time.perf_counter() - started, load))
    say(f"{broker} {profile_name} verify: {load.describe()}")
    target.mkdir(parents=True, exist_ok=True)
    table.to_csv(target / "verify.csv", index=False)
    (target / "verify.json").write_text(json.dumps({
        "profile": profile.name, "h1": "predicted by the paper's model", "length": settings.length,
        "alpha": settings.alpha, "beta": settings.beta, "indifference": settings.indifference,
        "broker_config": settings.broker_config, "host_cpu": load.to_dict(),
        "not_testable": [asdict(h) for h in untestable], "rows": _clean(table.to_dict("records"))}, indent=2, default=_plain) + "\n")

    rows = []
    for h in hypotheses + untestable:
        row: dict[str, Any] = {"profile": profile_name, "broker": broker, "threshold_ms": h.threshold_ms,
                               "clients": h.clients, "H0": h.p0, "H1": h.p1}
        match = table[(table["clients"] == h.clients) & (table["threshold_ms"] == h.threshold_ms)] if len(table) else table
        if len(match):
            v = match.iloc[0]
            row.update(result=v.result, samples=float(v.mean_samples), time_s=float(v.time_s), system=v.system,
                       functional_failures=int(v.functional_failures))
        else:
            row.update(result=f"not testable (H1 ≤ {settings.indifference:g})", samples=math.nan, time_s=math.nan,
                       system="", functional_failures=0)
        for kind, predicted in by_model.items():
            if kind != PAPER_MODEL:
                row[f"p_{kind}"] = float(predicted.set_index(["clients", "threshold_ms"]).loc[(h.clients, h.threshold_ms), "p"])
        row["chosen"] = chosen
        rows.append(row)
    return sorted(rows, key=lambda r: (r["threshold_ms"], r["clients"]))


def _validate(broker: str, folder: Path, profile_name: str, profile: UsageProfile, models: dict[str, LatencyModel],
              chosen: str, settings: PaperSettings, result: PaperResult, say: Callable[[str], None]) -> pd.DataFrame:
    compared = {PAPER_MODEL: models[PAPER_MODEL], "ours": models[chosen]}
    validate_settings = ValidateSettings(**settings.profile_runs(), replications=settings.replications,
                                         prediction_samples=settings.samples)
    started = time.perf_counter()
    target = folder / "validate" / profile_name
    with HostLoadSampler() as sampler:
        table = validate(broker, compared, profile, list(settings.verify_clients), list(settings.thresholds_ms), target,
                         validate_settings)
    load = sampler.result or NO_LOAD
    result.steps.append(StepRecord(broker, "validate", profile_name, time.perf_counter() - started, load))
    target.mkdir(parents=True, exist_ok=True)
    table.to_csv(target / "validate.csv", index=False)
    (target / "validate.json").write_text(json.dumps({"profile": profile.name, "host_cpu": load.to_dict(),
                                                      "points": _clean(table.to_dict("records"))}, indent=2, default=_plain) + "\n")
    say(f"{broker} {profile_name} validate: {settings.replications} replications per client count; {load.describe()}")
    return table.assign(profile=profile_name, ours=chosen)


# -- the summary ----------------------------------------------------------------------------


def min_s(seconds: float) -> str:
    """The paper's [min:s]; below a minute with milliseconds, since ours are often fractions of a second."""
    if seconds != seconds:
        return "-"
    if round(seconds, 3) < 60:
        return f"0:{seconds:06.3f}"
    whole = round(seconds)  # rounded before it is split, or 119.7 s would read 1:60
    return f"{whole // 60}:{whole % 60:02d}"


def table2_view(table2: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 2: rows "UP1 mosquitto", columns the client counts, [min:s] per point."""
    if table2.empty:
        return pd.DataFrame()
    view = table2.assign(row=table2["profile"] + " " + table2["broker"] + " — " + table2["model"])
    return view.pivot_table(index="row", columns="clients", values="seconds", sort=False).map(min_s)


def _markdown(frame: pd.DataFrame, index: bool = False) -> str:
    if frame.empty:
        return "(none)\n"
    data = frame.reset_index() if index else frame
    header = [_cell(c) for c in data.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in data.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "-" if value != value else f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value).replace("|", "\\|")


def sprt_view(sprt: pd.DataFrame, profile: str) -> pd.DataFrame:
    part = sprt[sprt["profile"] == profile]
    if part.empty:
        return part
    ours = [c for c in part.columns if c.startswith("p_")]
    view = part[["broker", "threshold_ms", "clients", "H0", "H1", "result", "samples", "time_s", "system", *ours]].copy()
    view["time_s"] = view["time_s"].map(min_s)
    view = view.rename(columns={"threshold_ms": "Threshold [ms]", "clients": "#Clients", "result": "Result",
                                "samples": "#Samples", "time_s": "Time [min:s]", "system": "System SPRT",
                                **{c: f"ours {c[2:]}: p" for c in ours}})
    return view


def write_summary(result: PaperResult) -> None:
    out, s = result.out, result.settings
    result.predictions.to_csv(out / "predictions.csv", index=False)
    result.table2.to_csv(out / "table2-monte-carlo-time.csv", index=False)
    result.sprt.to_csv(out / "table3-4-sprt.csv", index=False)
    result.host_cpu.to_csv(out / "host-cpu.csv", index=False)
    if not result.validation.empty:
        result.validation.to_csv(out / "validate.csv", index=False)

    md = ["# Seed 000 (How Fast is MQTT?) — the paper's pipeline", ""]
    md.append(f"Brokers: {', '.join(result.brokers)}, configuration `{s.broker_config}`"
              + "".join(f"; **skipped {k}**: {v}" for k, v in result.skipped.items()) + ".")
    md.append(f"Profiles {', '.join(s.profiles)}" + (f" with waits ×{s.wait_scale:g}" if s.wait_scale != 1 else "")
              + f"; sequences of {s.length}; thresholds {', '.join(f'{t:g}' for t in s.thresholds_ms)} ms; "
              f"Chernoff–Hoeffding ε = {s.epsilon:g}, δ = {s.delta:g} → n = {s.samples} per point; "
              f"SPRT H0 = H1 − {s.indifference:g}, α = {s.alpha:g}, β = {s.beta:g}.")
    md.append("")
    for broker, learned in result.learned.items():
        md.append(f"## {broker}: the paper's regression (Listing 1.1), R² = {learned.r_squared:.4f}")
        md.append("")
        md.append(_markdown(learned.coefficients.rename_axis("term"), index=True))
        scores = learned.scores[["crps_us", "crps_se_us"]].div(1e3).rename(columns={"crps_us": "CRPS [ms]", "crps_se_us": "± se"})
        md.append(f"Models on held-out workloads ({learned.holdout}); chosen: **{learned.chosen}**")
        md.append("")
        md.append(_markdown(scores.rename_axis("model"), index=True))
        if broker in result.growth:
            growth = result.growth[broker]
            md.append(f"Explore grown until R² stopped rising (tolerance {growth.tolerance:g}): {growth.describe()}")
            md.append("")
            md.append(_markdown(growth.table()))
    md.append("## Table 2: Monte Carlo time per point [min:s]")
    md.append("")
    md.append(f"One point = one client count, n = {s.samples} simulated replications answering every threshold.")
    md.append("")
    md.append(_markdown(table2_view(result.table2), index=True))
    md.append("## Predictions (Fig. 5/6): P(all messages of a client's sequence < t)")
    md.append("")
    if not result.predictions.empty:
        wide = result.predictions.pivot_table(index=["broker", "profile", "clients", "threshold_ms"], columns="model",
                                              values="p", sort=False)
        md.append(_markdown(wide, index=True))
    for number, profile in zip((3, 4), s.profiles):
        md.append(f"## Table {number}: SPRT on the real broker, {profile} (H1 predicted by the paper's model)")
        md.append("")
        md.append(_markdown(sprt_view(result.sprt, profile)))
    if not result.validation.empty:
        md.append("## Validate: predicted vs measured with independent replications")
        md.append("")
        cols = ["profile", "broker", "clients", "threshold_ms", "p", "low", "high",
                *[c for c in result.validation.columns if c.startswith("predicted_")]]
        md.append(_markdown(result.validation[cols]))
    md.append(f"## Host CPU (the paper kept it under {LIMIT:.0%})")
    md.append("")
    md.append(_markdown(result.host_cpu))
    for warning in result.warnings:
        md.append(f"**warning**: {warning}")
    (out / "summary.md").write_text("\n".join(md) + "\n")

    about = {
        "settings": s.to_dict(),
        "brokers": result.brokers,
        "skipped": result.skipped,
        "broker_config": result.broker_config,
        "engine_commit": engine_commit(),  # the engine that explored and verified (Mosquitto is Debian's package)
        "steps": [step.to_dict() for step in result.steps],
        "learn": {b: {"r_squared_ols": m.r_squared, "chosen": m.chosen, "holdout": m.holdout} for b, m in result.learned.items()},
        "growth": {b: g.to_dict() for b, g in result.growth.items()},
        "table2": result.table2.to_dict("records"),
        "sprt": result.sprt.to_dict("records"),
        "warnings": result.warnings,
    }
    (out / "paper.json").write_text(json.dumps(_clean(about), indent=2, default=_plain) + "\n")


def _plain(value: object) -> object:
    if hasattr(value, "item"):
        return _clean(value.item())
    return str(value)


def _clean(value: Any) -> Any:
    """NaN (a point not tested, a time not reached) becomes null: strict JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
