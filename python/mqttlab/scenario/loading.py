"""From a YAML file (or nothing) plus overrides to a validated Scenario. The rules the engine
keeps on the scenario's plan come from the layer above (`plan_rules`, mqttlab.planning passes the
engine's): this layer never reaches up for them, and still reports them with its own, at once."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

import yaml
from pydantic import ValidationError

from mqttlab.scenario.errors import Problem, ScenarioError, problems_from_validation
from mqttlab.scenario.model import Scenario
from mqttlab.scenario.rules import cross_field_problems

#: the rules on a valid scenario's compiled plan, each problem naming the scenario's field
PlanRules = Callable[[Scenario], list[Problem]]


def read_scenario_data(path: Path) -> dict[str, Any]:
    """The raw mapping in a scenario file; unreadable or malformed files are a ScenarioError."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError([Problem("", "file not found")], source) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioError([Problem("", f"cannot read the file: {error}")], source) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        reason = getattr(error, "problem", None) or str(error)
        raise ScenarioError([Problem("", f"not valid YAML{line}: {reason}")], source) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ScenarioError([Problem("", f"must be a mapping of keys to values (got {type(data).__name__})")], source)
    return data


def set_by_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Sets data["a"]["b"] for path "a.b", creating sections that are absent; None (`--set
    publishers.rate=null`) removes the key, so the field is as if never written (its default)."""
    keys = path.split(".")
    if not path or any(not key for key in keys):
        raise ScenarioError([Problem("--set", f"{path!r} is not a field path such as publishers.qos")], "command line")
    section = data
    for depth, key in enumerate(keys[:-1]):
        child = section.setdefault(key, {})
        if child is None:
            child = section[key] = {}
        if not isinstance(child, dict):
            parent = ".".join(keys[: depth + 1])
            raise ScenarioError([Problem("--set", f"cannot set {path}: {parent} is not a section")], "command line")
        section = child
    if value is None:
        section.pop(keys[-1], None)
    else:
        section[keys[-1]] = value


def parse_assignment(text: str) -> tuple[str, Any]:
    """("publishers.qos", 2) from "publishers.qos=2"; the value is read as a YAML scalar or list."""
    path, equals, raw = text.partition("=")
    if not equals:
        raise ScenarioError([Problem("--set", f"expected KEY=VALUE such as publishers.qos=2 (got {text!r})")], "command line")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw  # unparsable as YAML: take it as the literal string
    return path.strip(), value


def check_scenario(data: Mapping[str, Any], *, plan_rules: PlanRules, base_dir: Optional[Path] = None, source: str = "scenario") -> Scenario:
    """Every field rule, every cross-field rule and every rule on the plan, reported in one
    ScenarioError."""
    context = {"base_dir": base_dir}
    try:
        scenario = Scenario.model_validate(dict(data), context=context)
    except ValidationError as error:
        problems = problems_from_validation(error, Scenario)
        raise ScenarioError(problems + _cross_problems_despite(data, problems, context, plan_rules), source) from None
    problems = _all_rules(scenario, plan_rules)
    if problems:
        raise ScenarioError(problems, source)
    return scenario


def _all_rules(scenario: Scenario, plan_rules: PlanRules) -> list[Problem]:
    return cross_field_problems(scenario) + plan_rules(scenario)


def _cross_problems_despite(data: Mapping[str, Any], field_problems: list[Problem], context: dict[str, Any], plan_rules: PlanRules) -> list[Problem]:
    """The cross-field problems of the fields that are valid: the invalid ones are dropped
    (falling back to their defaults) and rules that read any of them are not reported."""
    invalid = [_field_path(problem.path) for problem in field_problems]
    remainder = copy.deepcopy(dict(data))
    for path in invalid:
        _delete_path(remainder, path)
    try:
        scenario = Scenario.model_validate(remainder, context=context)
    except ValidationError:
        return []  # nothing sound to judge the rules on
    return [problem for problem in _all_rules(scenario, plan_rules) if not problem.depends_on(invalid)]


def _field_path(path: str) -> str:
    # "publishers.payload.min" and "subscribers.filters[0]" are judged as the whole field.
    return ".".join(path.split("[")[0].split(".")[:2])


def _delete_path(data: dict[str, Any], path: str) -> None:
    keys = path.split(".")
    section: Any = data
    for key in keys[:-1]:
        section = section.get(key) if isinstance(section, dict) else None
    if isinstance(section, dict):
        section.pop(keys[-1], None)


def read_scenario(
    path: Optional[Path] = None,
    *,
    plan_rules: PlanRules,
    overrides: Mapping[str, Any] = {},
    assignments: Iterable[str] = (),
) -> Scenario:
    """The scenario in `path` (or the built-in default), with `overrides` ({dotted path: value},
    from command-line flags) and then `assignments` ("path=value", from --set) applied, checked."""
    data = read_scenario_data(path) if path is not None else {}
    if path is not None and "name" not in data:
        # An unnamed file is known by its file name, e.g. in the results directory's name.
        data["name"] = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-._") or "scenario"
    for dotted, value in overrides.items():
        set_by_path(data, dotted, value)
    for text in assignments:
        set_by_path(data, *parse_assignment(text))
    source = str(path) if path is not None else "built-in default scenario"
    return check_scenario(data, plan_rules=plan_rules, base_dir=path.parent if path is not None else None, source=source)


def scenario_to_yaml(scenario: Scenario) -> str:
    """The resolved scenario, every default spelled out, readable back by load_scenario."""
    data = scenario.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def scenario_json_schema() -> str:
    return json.dumps(Scenario.model_json_schema(mode="validation"), indent=2)
