"""Scenarios: the load test a user writes in YAML, validated at the edge with every problem named.
A scenario checked whole, the engine's rules on its plan included, comes from mqttlab.planning."""

from mqttlab.scenario.errors import Problem, ScenarioError
from mqttlab.scenario.loading import (
    PlanRules,
    check_scenario,
    parse_assignment,
    read_scenario,
    read_scenario_data,
    scenario_json_schema,
    scenario_to_yaml,
)
from mqttlab.scenario.model import HEADER_BYTES, Scenario

__all__ = [
    "HEADER_BYTES",
    "PlanRules",
    "Problem",
    "Scenario",
    "ScenarioError",
    "check_scenario",
    "parse_assignment",
    "read_scenario",
    "read_scenario_data",
    "scenario_json_schema",
    "scenario_to_yaml",
]
