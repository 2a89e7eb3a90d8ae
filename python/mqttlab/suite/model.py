"""The suite file (docs/suites.md): scenarios × variants × brokers × repetitions, read and checked
at the edge with every problem listed together."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mqttlab.scenario.errors import Problem, ScenarioError, problems_from_validation

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
CASE_KEYS = ("only", "repetitions")  # reserved keys of a case; everything else is scenario keys
# Reserved key of a case: a scenario file (relative to the suite file) the case starts from, so a
# suite runs a published scenario as it stands instead of a copy of its keys. Read by load_suite.
SCENARIO_FILE_KEY = "scenario_file"
TRANSPORT_KEY = "transport"  # reserved key of a variant's settings; not a scenario field
TRANSPORTS = ("plain", "tls")
BUILTIN_DIR = Path(__file__).resolve().parents[3] / "suites"  # <source tree>/suites


class SuiteError(ScenarioError):
    """Every problem found in a suite, reported together (same listing as a scenario's)."""


class QuickSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repetitions: Optional[int] = Field(default=None, ge=1)
    set: dict[str, Any] = Field(default_factory=dict)
    # A short version of a large suite needs fewer combinations, not only shorter runs.
    scenarios: Optional[list[str]] = Field(default=None, min_length=1, description="the cases to run; default all")
    only: dict[str, Any] = Field(default_factory=dict, description="axis -> values, for cases whose own `only` leaves the axis open")


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="suite", pattern=f"^{NAME_PATTERN.pattern}$", max_length=60)
    description: Optional[str] = None
    brokers: list[str] = Field(default_factory=lambda: ["rumqttd"], min_length=1)
    repetitions: int = Field(default=1, ge=1)
    base: dict[str, Any] = Field(default_factory=dict)
    scenarios: dict[str, dict[str, Any]] = Field(min_length=1)
    variants: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    quick: QuickSettings = Field(default_factory=QuickSettings)
    metrics: Optional[str] = Field(
        default=None, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*):[0-9]{1,5}$",
        description="Serve live metrics of the suite and of the run under way at HOST:PORT (docs/metrics.md)",
    )
    source: Optional[str] = Field(default=None, exclude=True)  # the file it came from, for messages

    def case_repetitions(self, case: str, quick: bool) -> int:
        if quick and self.quick.repetitions is not None:
            return min(self.quick.repetitions, self.scenarios[case].get("repetitions", self.quick.repetitions))
        return int(self.scenarios[case].get("repetitions", self.repetitions))


def builtin_suites() -> dict[str, Path]:
    """Built-in suite name -> file, from the source tree's suites/ folder. Beside each seed's
    suite lies its paper's numbers (`seed00N.paper.yaml`), which is data, not a suite."""
    if not BUILTIN_DIR.is_dir():
        return {}
    return {path.stem: path for path in sorted(BUILTIN_DIR.glob("*.yaml")) if not path.name.endswith(PAPER_SUFFIX)}


PAPER_SUFFIX = ".paper.yaml"


def resolve_suite_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.is_file():
        return path
    builtin = builtin_suites().get(name_or_path)
    if builtin is not None:
        return builtin
    known = ", ".join(builtin_suites()) or "none"
    raise SuiteError([Problem("", f"no suite file {name_or_path!r} and no built-in suite of that name (built-in: {known})")], name_or_path)


def load_suite(name_or_path: str) -> Suite:
    path = resolve_suite_path(name_or_path)
    source = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError([Problem("", f"cannot read the file: {error}")], source) from None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise SuiteError([Problem("", f"not valid YAML{line}: {getattr(error, 'problem', None) or error}")], source) from None
    if not isinstance(data, dict):
        raise SuiteError([Problem("", "must be a mapping of keys to values")], source)
    data.setdefault("name", re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-._") or "suite")
    problems = _read_scenario_files(data, path.parent)
    if problems:
        raise SuiteError(problems, source)
    return validate_suite(data, source)


def _read_scenario_files(data: dict[str, Any], directory: Path) -> list[Problem]:
    """Each case's `scenario_file` read in its place: the file's keys under the case's own (its
    name and description dropped: the suite names its runs). Every unreadable file is listed."""
    problems: list[Problem] = []
    cases = data.get("scenarios")
    if not isinstance(cases, dict):
        return problems  # validate_suite says what is wrong with it
    for case, keys in cases.items():
        if not isinstance(keys, dict) or SCENARIO_FILE_KEY not in keys:
            continue
        where = f"scenarios.{case}.{SCENARIO_FILE_KEY}"
        own = {key: value for key, value in keys.items() if key != SCENARIO_FILE_KEY}
        try:
            text = (directory / str(keys[SCENARIO_FILE_KEY])).read_text(encoding="utf-8")
            scenario = yaml.safe_load(text)
        except (OSError, UnicodeDecodeError) as error:
            problems.append(Problem(where, f"cannot read {keys[SCENARIO_FILE_KEY]!r} (relative to the suite file): {error}"))
            continue
        except yaml.YAMLError as error:
            problems.append(Problem(where, f"{keys[SCENARIO_FILE_KEY]!r} is not valid YAML: {error}"))
            continue
        if not isinstance(scenario, dict):
            problems.append(Problem(where, f"{keys[SCENARIO_FILE_KEY]!r} must hold a mapping of scenario keys"))
            continue
        scenario = {key: value for key, value in scenario.items() if key not in ("name", "description")}
        cases[case] = deep_merge(scenario, own)
    return problems


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` over `base`: mappings merge key by key, any other value replaces."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def validate_suite(data: dict[str, Any], source: str = "suite") -> Suite:
    """The suite's own structure; the scenarios it makes are checked by `expand_suite`."""
    try:
        suite = Suite.model_validate(data)
    except ValidationError as error:
        raise SuiteError(problems_from_validation(error, Suite), source) from None
    suite.source = source
    problems = _structure_problems(suite)
    if problems:
        raise SuiteError(problems, source)
    return suite


def _structure_problems(suite: Suite) -> list[Problem]:
    from mqttlab.brokers import UnknownBroker, get_launcher

    problems: list[Problem] = []
    for index, broker in enumerate(suite.brokers):
        try:
            get_launcher(broker)
        except UnknownBroker as error:
            problems.append(Problem(f"brokers[{index}]", str(error)))
    if "broker" in suite.base:
        problems.append(Problem("base.broker", "not allowed: the suite launches the brokers (use `brokers:` or --brokers)"))
    for axis, values in suite.variants.items():
        problems += _name_problems(f"variants.{axis}", axis)
        if not values:
            problems.append(Problem(f"variants.{axis}", "needs at least one value"))
        for value, settings in values.items():
            problems += _name_problems(f"variants.{axis}.{value}", value)
            transport = settings.get(TRANSPORT_KEY, "plain")
            if transport not in TRANSPORTS:
                problems.append(Problem(f"variants.{axis}.{value}.{TRANSPORT_KEY}", f"must be plain or tls (got {transport!r})"))
    for case, keys in suite.scenarios.items():
        where = f"scenarios.{case}"
        problems += _name_problems(where, case)
        if "broker" in keys or "name" in keys:
            problems.append(Problem(f"{where}.broker" if "broker" in keys else f"{where}.name",
                                    "not allowed: the suite sets it for every run"))
        repetitions = keys.get("repetitions", 1)
        if not isinstance(repetitions, int) or isinstance(repetitions, bool) or repetitions < 1:
            problems.append(Problem(f"{where}.repetitions", f"must be a whole number of 1 or more (got {repetitions!r})"))
        problems += _only_problems(where, keys.get("only", {}), suite.variants)
    for index, case in enumerate(suite.quick.scenarios or []):
        if case not in suite.scenarios:
            problems.append(Problem(f"quick.scenarios[{index}]", f"no case {case!r} (cases: {', '.join(suite.scenarios)})"))
    problems += _only_problems("quick", suite.quick.only, suite.variants)
    return problems


def _name_problems(where: str, name: str) -> list[Problem]:
    if NAME_PATTERN.fullmatch(name):
        return []
    return [Problem(where, f"name {name!r} may hold only letters, digits, '.', '_' and '-'")]


def _only_problems(where: str, only: Any, variants: dict[str, dict[str, Any]]) -> list[Problem]:
    if not isinstance(only, dict):
        return [Problem(f"{where}.only", "must map axis names to lists of value names")]
    problems = []
    for axis, values in only.items():
        if axis not in variants:
            problems.append(Problem(f"{where}.only.{axis}", f"no such axis in variants (axes: {', '.join(variants) or 'none'})"))
            continue
        chosen = values if isinstance(values, list) else [values]
        for value in chosen:
            if value not in variants[axis]:
                problems.append(Problem(f"{where}.only.{axis}", f"no value {value!r} (values: {', '.join(variants[axis])})"))
        if not chosen:
            problems.append(Problem(f"{where}.only.{axis}", "needs at least one value"))
    return problems
