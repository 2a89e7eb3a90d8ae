"""From a suite to the list of runs it makes: cases × variant combinations × brokers ×
repetitions, each with its resolved scenario keys, validated before anything runs."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from mqttlab.planning import validate_scenario
from mqttlab.scenario import Problem, ScenarioError, parse_assignment
from mqttlab.scenario.loading import set_by_path
from mqttlab.suite.model import CASE_KEYS, TRANSPORT_KEY, Suite, SuiteError, deep_merge


@dataclass(frozen=True)
class PlannedRun:
    case: str
    variants: tuple[tuple[str, str], ...]  # (axis, value) in the file's axis order
    scenario_name: str
    broker: str
    repetition: int  # 1-based
    transport: str  # "plain" or "tls"
    scenario: dict[str, Any] = field(compare=False, hash=False)  # scenario keys, without `broker`

    @property
    def id(self) -> str:
        return f"{self.scenario_name}/{self.broker}/rep-{self.repetition}"

    def directory(self, suite_dir: Path) -> Path:
        return suite_dir / "runs" / self.scenario_name / self.broker / f"rep-{self.repetition}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "case": self.case,
            "variants": dict(self.variants),
            "scenario_name": self.scenario_name,
            "broker": self.broker,
            "repetition": self.repetition,
            "transport": self.transport,
            "scenario": self.scenario,
        }


def expand_suite(
    suite: Suite,
    *,
    brokers: Optional[Iterable[str]] = None,
    quick: bool = False,
    assignments: Iterable[str] = (),
    repetitions: Optional[int] = None,
    cases: Optional[list[str]] = None,
    only: Optional[dict[str, list[str]]] = None,
) -> list[PlannedRun]:
    """Every run of the suite in running order: repetition by repetition, case by case, broker
    by broker, so that drifts of the machine spread over all brokers. `cases` and `only` narrow
    the suite from the command line (`--scenarios`, `--only`): a part of a suite is run under
    the same names, so its runs compare with the whole suite's. Raises SuiteError listing every
    problem of every scenario."""
    broker_list = list(brokers) if brokers is not None else list(suite.brokers)
    overrides = _parse_assignments(assignments, suite.source or suite.name)
    problems = _narrowing_problems(suite, cases, only or {})
    if problems:
        raise SuiteError(problems, "command line")
    combinations: list[tuple[str, tuple[tuple[str, str], ...], str, dict[str, Any]]] = []
    if cases is None:
        cases = suite.quick.scenarios if quick and suite.quick.scenarios else list(suite.scenarios)
    for case in cases:
        for chosen in _combinations(suite, case, quick, only or {}):
            name = "-".join([case, *(value for _, value in chosen)])
            data, transport = _scenario_keys(suite, case, chosen, quick, overrides)
            data["name"] = name
            problems += _scenario_problems(name, data, transport)
            combinations.append((case, chosen, transport, data))
    if problems:
        raise SuiteError(problems, suite.source or suite.name)
    if not combinations:
        raise SuiteError([Problem("--only", "leaves no run of the chosen cases")], "command line")

    most = max((repetitions or suite.case_repetitions(case, quick)) for case in cases)
    runs = []
    for repetition in range(1, most + 1):
        for case, chosen, transport, data in combinations:
            if repetition > (repetitions or suite.case_repetitions(case, quick)):
                continue
            for broker in broker_list:
                runs.append(PlannedRun(case, chosen, data["name"], broker, repetition, transport, copy.deepcopy(data)))
    return runs


def _parse_assignments(assignments: Iterable[str], source: str) -> list[tuple[str, Any]]:
    try:
        return [parse_assignment(text) for text in assignments]
    except ScenarioError as error:
        raise SuiteError(error.problems, source) from None


def _narrowing_problems(suite: Suite, cases: Optional[list[str]], only: dict[str, list[str]]) -> list[Problem]:
    problems = [Problem("--scenarios", f"no case {case!r} (cases: {', '.join(suite.scenarios)})")
                for case in cases or [] if case not in suite.scenarios]
    for axis, values in only.items():
        if axis not in suite.variants:
            problems.append(Problem(f"--only {axis}", f"no such axis (axes: {', '.join(suite.variants) or 'none'})"))
            continue
        problems += [Problem(f"--only {axis}", f"no value {value!r} (values: {', '.join(suite.variants[axis])})")
                     for value in values if value not in suite.variants[axis]]
    return problems


def _combinations(suite: Suite, case: str, quick: bool = False, narrowed: Optional[dict[str, list[str]]] = None) -> list[tuple[tuple[str, str], ...]]:
    only = suite.scenarios[case].get("only", {})
    if quick:
        only = {**suite.quick.only, **only}  # the case's own choice of an axis wins
    axes = []
    for axis, values in suite.variants.items():
        allowed = only.get(axis, list(values))
        allowed = allowed if isinstance(allowed, list) else [allowed]
        if narrowed and axis in narrowed:  # the command line narrows, never widens, a case's choice
            allowed = [value for value in allowed if value in narrowed[axis]]
        axes.append([(axis, value) for value in values if value in allowed])
    return [tuple(combination) for combination in itertools.product(*axes)]


def _scenario_keys(
    suite: Suite, case: str, chosen: tuple[tuple[str, str], ...], quick: bool, overrides: list[tuple[str, Any]]
) -> tuple[dict[str, Any], str]:
    """The merged scenario keys of one case in one variant combination, and its transport."""
    own = {key: value for key, value in suite.scenarios[case].items() if key not in CASE_KEYS}
    data = deep_merge(copy.deepcopy(suite.base), own)
    transport = "plain"
    for axis, value in chosen:
        for path, setting in suite.variants[axis][value].items():
            if path == TRANSPORT_KEY:
                transport = setting
            else:
                set_by_path(data, path, copy.deepcopy(setting))
    if quick:
        for path, setting in suite.quick.set.items():
            set_by_path(data, path, copy.deepcopy(setting))
    for path, setting in overrides:
        set_by_path(data, path, setting)
    return data, transport


def _scenario_problems(name: str, data: dict[str, Any], transport: str) -> list[Problem]:
    """Every problem of one run's scenario keys, as `mqttlab run` will see them."""
    trial = copy.deepcopy(data)
    # `mqttlab run` launches the run's broker itself (by name), over its TLS listener for a tls
    # variant; any broker name checks the same scenario keys.
    trial["broker"] = "mosquitto"
    if transport == "tls":
        set_by_path(trial, "launch.tls", True)
    return _problems_of(name, trial)


def _problems_of(name: str, scenario: dict[str, Any]) -> list[Problem]:
    try:
        validate_scenario(scenario, source=name)
    except ScenarioError as error:
        return [Problem(f"[{name}] {problem.path}" if problem.path else f"[{name}]", problem.message) for problem in error.problems]
    return []
