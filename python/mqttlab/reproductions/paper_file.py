"""A seed's paper as data (`suites/seed00N.paper.yaml`): every figure the paper states, the
configuration it belongs to, the claims it rests on, and for each figure how mqttlab reproduces it
(`reproduce:`). Read and checked here, once: every problem of a file is reported together, each
naming its field (`figures[12] (publish-overhead).reproduce.metric: ...`).

A figure's `reproduce:` is one of
- `{not_here: reason}`: mqttlab cannot measure it here (a hardware fact, a broker no registry
  offers, a WAN link, a plot without a number and no configuration of ours);
- `{scenario: GLOB, metric: NAME, ...}`: a headline figure of the suite's runs whose scenario name
  matches GLOB, per broker (`broker:` / `brokers:` narrow it), as the mean or best of the
  repetitions, each matching configuration on its own row, or their range (`aggregate: range`);
- `{computed: NAME, ...}`: a deterministic figure computed from the protocol or the paper's own
  parameters (PUBLISH overhead for the run's topic, Chernoff sample size, SPRT samples on a stream
  of successes); these must equal the paper's or the report says why not;
- `{capture: KIND, scenario: GLOB, ...}`: a protocol figure measured from the packet captures of
  the suite's runs (reproductions/captured.py: a packet's bytes, a PUBLISH exchange's overhead, a
  connection's TCP ACKs); `expected: NAME` adds the figure computed from the protocol (one of the
  `computed:` names) beside it, labelled expected, never as the measurement;
- `{smc: TABLE, ...}`: seed 000, read from a `mqttlab smc paper` output directory;
- `{capacity: GLOB, broker: NAME}`: the broker's capacity (msg/s) from the `mqttlab capacity`
  searches whose name (the directory given to `-o`) matches GLOB, with the search's bracket as its
  interval (reproductions/capacity_searches.py): the regime of a claim about saturation.

A claim's `check:` says how the runs judge it (every condition must hold); without one the claim
is listed with the numbers it rests on and no verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mqttlab.suite.model import BUILTIN_DIR, PAPER_SUFFIX

# Our figures a `metric:` may name, with their unit (the per-group extraction lives in paper_figures).
METRIC_UNITS = {
    "throughput": "msg/s",
    "latency_mean": "ms",
    "latency_p50": "ms",
    "latency_p99": "ms",
    "latency_max": "ms",
    "latency_mean_sd": "ms",  # {mean, std}: the seeds' mean ± SD bars (which SD: reports/paper.py)
    "loss": "%",
    "broker_cpu": "cores",
    "broker_cpu_percent": "%",  # one core busy = 100 %, as top and docker stats count
    "broker_rss_peak": "MB",
    "broker_rss_mean": "MB",
    "sent": "messages",  # messages a publisher sent in the run (seed 002's shark-fin counts)
}
COMPUTED = ("publish_overhead", "connect_bytes", "connack_bytes", "disconnect_bytes", "ack_bytes", "ack_overhead",
            "chernoff_samples", "sprt_samples_all_successes")
# time_ratio: the median SPRT time of a row over the median Monte Carlo time per point, both of one host
SMC_TABLES = ("table2", "sprt", "coefficient", "r_squared", "predictions", "time_ratio")


class PaperFileError(Exception):
    """A paper file that cannot be read or is malformed; `problems` lists every one, each naming its field."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Reproduce(_Strict):
    not_here: Optional[str] = None
    # from the suite's runs
    scenario: Optional[str] = None  # a glob over the suite's scenario names (fnmatch)
    metric: Optional[str] = None
    broker: Optional[str] = None
    brokers: Optional[list[str]] = None
    statistic: Literal["mean", "best"] = "mean"
    # each configuration and broker on its own row, their range, or their highest (the paper's "up to")
    aggregate: Literal["each", "range", "max"] = "each"
    # computed; parameters that override the figure's config (e.g. layer: frame)
    computed: Optional[str] = None
    layer: Literal["mqtt", "frame"] = "mqtt"
    packets: Optional[int] = Field(default=None, ge=0)  # ack_overhead: acknowledgements per exchange (QoS 0: none)
    # measured from the suite's packet captures (reproductions/captured.py), with the computed figure beside it
    capture: Optional[str] = None
    packet: Optional[str] = None  # capture: packet: which MQTT packet (CONNECT, PUBACK, ...)
    direction: Optional[Literal["up", "down"]] = None  # capture: bundled / shared: client to broker, or back
    expected: Optional[str] = None  # a `computed:` name, shown as the expected figure
    # seed 000's `smc paper` directory
    smc: Optional[str] = None
    # a `mqttlab capacity` search: a glob over the searches' names, per broker (`broker:`)
    capacity: Optional[str] = None
    profile: Optional[str] = None
    threshold_ms: Optional[float] = None
    clients: Optional[int] = None
    term: Optional[str] = None
    # a non-exact single value agrees when ours / paper's lies within [1/tolerance, tolerance];
    # without one, paper_figures.DEFAULT_TOLERANCE, which every row judged by it prints
    tolerance: Optional[float] = Field(default=None, gt=1.0)
    note: Optional[str] = None

    @model_validator(mode="after")
    def _one_source(self) -> "Reproduce":
        sources = [name for name in ("not_here", "metric", "computed", "capture", "smc", "capacity") if getattr(self, name) is not None]
        if len(sources) != 1:
            raise ValueError("give exactly one of not_here, metric (with scenario), computed, capture (with scenario), smc or capacity"
                             + (f" (got {', '.join(sources)})" if sources else ""))
        problems = []
        if self.metric is not None:
            if self.metric not in METRIC_UNITS:
                problems.append(f"metric: unknown {self.metric!r}; choose among {', '.join(METRIC_UNITS)}")
            if self.scenario is None:
                problems.append("scenario: required with metric (a glob over the suite's scenario names)")
        if self.computed is not None and self.computed not in COMPUTED:
            problems.append(f"computed: unknown {self.computed!r}; choose among {', '.join(COMPUTED)}")
        if self.capture is not None:
            problems += _capture_problems(self)
        if self.computed == "publish_overhead" and self.scenario is None:
            problems.append("scenario: required with computed: publish_overhead (the runs whose topic counts)")
        if self.smc is not None and self.smc not in SMC_TABLES:
            problems.append(f"smc: unknown {self.smc!r}; choose among {', '.join(SMC_TABLES)}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _capture_problems(how: Reproduce) -> list[str]:
    from mqttlab.reproductions.captured import CAPTURED, PACKETS

    problems = []
    if how.capture not in CAPTURED:
        problems.append(f"capture: unknown {how.capture!r}; choose among {', '.join(CAPTURED)}")
    if how.scenario is None:
        problems.append("scenario: required with capture (a glob over the suite's captured scenarios)")
    if how.capture in ("packet", "bundled", "shared") and how.packet not in PACKETS:
        problems.append(f"packet: required with capture: {how.capture}, one of {', '.join(PACKETS)}")
    if (how.capture in ("bundled", "shared")) != (how.direction is not None):
        problems.append("direction: up or down, with capture: bundled or shared only")
    if how.expected is not None and how.expected not in COMPUTED:
        problems.append(f"expected: unknown {how.expected!r}; choose among {', '.join(COMPUTED)}")
    return problems


class Figure(BaseModel):
    model_config = ConfigDict(extra="allow")  # free-form extras the reader added: printed, scope, claim, ...

    id: str
    quote: str
    where: str
    kind: str
    unit: Optional[str] = None
    exact: bool
    config: dict[str, Any] = Field(default_factory=dict)
    value: Any = None
    values: Any = None
    range: Optional[list[Optional[float]]] = None
    note: Optional[str] = None
    # A figure the paper does not print but that follows from what it prints: how (printed beside it)
    derived: Optional[str] = None
    # Of a figure with keyed values, the keys `derived` is about (the others are printed); absent:
    # the whole figure is derived
    derived_keys: Optional[list[str]] = None
    reproduce: Reproduce

    @model_validator(mode="after")
    def _derived_keys_named(self) -> "Figure":
        if self.derived_keys is None:
            return self
        if self.derived is None:
            raise ValueError("derived_keys: only with derived (how those keys follow from what the paper prints)")
        unknown = [key for key in self.derived_keys if not isinstance(self.values, dict) or key not in self.values]
        if unknown:
            raise ValueError(f"derived_keys: {', '.join(unknown)} not among the keys of values")
        return self

    @property
    def has_number(self) -> bool:
        if isinstance(self.value, (int, float)) and not isinstance(self.value, bool):
            return True
        if self.range and all(isinstance(v, (int, float)) for v in self.range):
            return True
        return isinstance(self.values, dict) and any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.values.values())


class Check(_Strict):
    """One condition of a claim, on our figures of the named paper figures."""

    # every measured row of these figures agrees with the paper (exact equal, in range, within tolerance)
    agree: Optional[list[str]] = None
    # ours rises (or falls) along these figures, each taken as the mean of its rows
    increasing: Optional[list[str]] = None
    decreasing: Optional[list[str]] = None
    # `expect` has the best value (highest if higher_is_better) of the rows of `among`
    best: Optional[str] = None
    among: Optional[list[str]] = None
    higher_is_better: bool = True
    absolute: bool = False  # best: compare magnitudes (|t| of terms of either sign)
    # ours(first) / ours(second) lies in `within`
    ratio: Optional[list[str]] = None
    # our value(s) of one figure lie in `within`
    figure: Optional[str] = None
    within: Optional[list[float]] = None
    # first − second per configuration lies in `within` (in `unit`), pairing the rows of the two
    # figures whose scenario names differ only in the two `along` labels (`mqtt` vs `mqtt-sn`):
    # a claim about a gap ("MQTT about 50 ms slower") written as that gap
    difference: Optional[list[str]] = None
    unit: Optional[str] = None
    # every row of these figures (its `key`, for a figure whose value has keys) lies in `within`,
    # in at least `at_least` of them ("in most cases H1 was accepted by almost all clients")
    each: Optional[list[str]] = None
    # with each, trend, best or unchanged: the key of the figures' values read (an SPRT row's
    # h1_accept_pct, a coefficient's t_value), for figures whose value has keys
    key: Optional[str] = None
    # ours against the same rows of a second run of the pipeline in another configuration (given
    # beside this one: `mqttlab compare THIS OTHER`): each pair within `tolerance` (a factor) or,
    # with `within`, this − other in [low, high]; in at least `at_least` of the pairs. Without a
    # second run: not measured
    unchanged: Optional[list[str]] = None
    note: Optional[str] = None  # one line printed with the check's numbers: what they share, which model gave them
    # a trend of the rows of `figures` along one axis of the configuration: `along` names the
    # axis's values in order as they appear in scenario names (`qos0`, `loss-10`); rows that
    # differ only there are compared, and the trend must hold in `at_least` of those
    # configurations (`flat`: highest / lowest within `tolerance`). `where`, with trend or figure:
    # only the rows of scenarios matching this glob
    trend: Optional[Literal["rises", "falls", "flat"]] = None
    figures: Optional[list[str]] = None
    along: Optional[list[str]] = None
    where: Optional[Union[str, list[str]]] = None
    at_least: float = Field(1.0, gt=0.0, le=1.0)
    tolerance: float = Field(1.25, ge=1.0)

    @model_validator(mode="after")
    def _one_kind(self) -> "Check":
        kinds = [name for name in ("agree", "increasing", "decreasing", "best", "ratio", "difference", "each", "figure", "trend", "unchanged")
                 if getattr(self, name) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of agree, increasing, decreasing, best (with among), ratio (with within), "
                             "difference (with along and within), each (with within), figure (with within), trend (with figures and along), unchanged" + (f" (got {', '.join(kinds)})" if kinds else ""))
        if self.trend is not None and (not self.figures or not self.along or len(self.along) < 2):
            raise ValueError("trend: give figures and along (two or more values of one axis, in order)")
        if self.difference is not None and (len(self.difference) != 2 or not self.along or len(self.along) != 2 or self.within is None):
            raise ValueError("difference: give two figures, along: [label of the first, label of the second] and within: [low, high]")
        if self.where is not None and self.trend is None and self.figure is None and self.difference is None:
            raise ValueError("where: only with trend, difference or figure (it narrows their rows)")
        if self.figures is not None and self.trend is None:
            raise ValueError("figures: only with trend (one figure's range check is figure with within)")
        if self.best is not None and not self.among:
            raise ValueError("among: required with best (the figures compared)")
        if self.ratio is not None and (len(self.ratio) != 2 or self.within is None):
            raise ValueError("ratio: give two figures and within: [low, high]")
        if (self.figure is not None or self.each is not None) and self.within is None:
            raise ValueError("within: required with figure or each ([low, high])")
        if self.key is not None and self.each is None and self.trend is None and self.best is None and self.unchanged is None:
            raise ValueError("key: only with each, trend, best or unchanged (the key of the figures' values it reads)")
        if self.absolute and self.best is None:
            raise ValueError("absolute: only with best (it compares magnitudes)")
        if self.within is not None and (len(self.within) != 2 or self.within[0] > self.within[1]):
            raise ValueError("within: give [low, high] with low <= high")
        return self

    def figure_ids(self) -> list[str]:
        ids = [*(self.agree or []), *(self.increasing or []), *(self.decreasing or []), *(self.among or []), *(self.ratio or []), *(self.difference or []), *(self.each or []),
               *(self.figures or []), *(self.unchanged or [])]
        ids += [name for name in (self.best, self.figure) if name]
        return ids


class Claim(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    text: str
    figures: list[str] = Field(default_factory=list)
    check: Optional[list[Check]] = None
    not_here: Optional[str] = None  # why no run here can judge it
    unjudged: Optional[str] = None  # without a check: why no rule judges it (one line, printed)


class PaperFile(BaseModel):
    model_config = ConfigDict(extra="allow")  # setup, inconsistencies, suite_differences: free-form prose as data

    seed: str
    title: str
    figures: list[Figure]
    claims: list[Claim] = Field(default_factory=list)
    source: Optional[str] = None

    def figure(self, figure_id: str) -> Figure:
        return next(f for f in self.figures if f.id == figure_id)


def paper_path(name_or_path: Union[str, Path]) -> Path:
    """`seed003` (a built-in paper beside the suites) or a path to a paper file."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    builtin = BUILTIN_DIR / f"{name_or_path}{PAPER_SUFFIX}"
    if builtin.is_file():
        return builtin
    known = ", ".join(sorted(p.name.removesuffix(PAPER_SUFFIX) for p in BUILTIN_DIR.glob(f"*{PAPER_SUFFIX}"))) or "none"
    raise PaperFileError(str(name_or_path), [f"--paper: no paper file {name_or_path!r} and no built-in one of that name (built-in: {known})"])


def load_paper(name_or_path: Union[str, Path]) -> PaperFile:
    path = paper_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise PaperFileError(str(path), [f"cannot read: {error}"]) from None
    return validate_paper(data, str(path))


def validate_paper(data: Any, source: str) -> PaperFile:
    """The paper file, or PaperFileError with every problem: shape, then the ids claims refer to."""
    if not isinstance(data, dict):
        raise PaperFileError(source, ["the file must be a mapping with seed, title, figures and claims"])
    try:
        paper = PaperFile.model_validate(data)
    except ValidationError as error:
        raise PaperFileError(source, [_where(data, e["loc"]) + ": " + e["msg"].removeprefix("Value error, ") for e in error.errors()]) from None
    problems = []
    seen: set[str] = set()
    for index, figure in enumerate(paper.figures):
        if figure.id in seen:
            problems.append(f"figures[{index}] ({figure.id}).id: duplicate id")
        seen.add(figure.id)
    for index, claim in enumerate(paper.claims):
        for name in claim.figures:
            if name not in seen:
                problems.append(f"claims[{index}] ({claim.id}).figures: no figure {name!r}")
        for number, check in enumerate(claim.check or []):
            for name in check.figure_ids():
                if name not in seen:
                    problems.append(f"claims[{index}] ({claim.id}).check[{number}]: no figure {name!r}")
    if problems:
        raise PaperFileError(source, problems)
    return paper


def _where(data: dict[str, Any], loc: tuple[Any, ...]) -> str:
    """A pydantic location as a field path, with the figure's or claim's id beside its index."""
    parts: list[str] = []
    current: Any = data
    for item in loc:
        if isinstance(item, int):
            label = f"[{item}]"
            if isinstance(current, list) and item < len(current):
                current = current[item]
                if isinstance(current, dict) and current.get("id"):
                    label += f" ({current['id']})"
            parts.append(label)
        else:
            parts.append(("." if parts else "") + str(item))
            current = current.get(item) if isinstance(current, dict) else None
    return "".join(parts) or "(top level)"
