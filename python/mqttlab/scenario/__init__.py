"""Scenarios: the load test a user writes in YAML, validated at the edge with every problem named."""

from mqttlab.scenario.errors import Problem, ScenarioError
from mqttlab.scenario.loading import (
    default_scenario,
    load_scenario,
    parse_assignment,
    read_scenario_data,
    scenario_json_schema,
    scenario_to_yaml,
    validate_scenario,
)
from mqttlab.scenario.model import HEADER_BYTES, Scenario

__all__ = [
    "HEADER_BYTES",
    "Problem",
    "Scenario",
    "ScenarioError",
    "default_scenario",
    "load_scenario",
    "parse_assignment",
    "read_scenario_data",
    "scenario_json_schema",
    "scenario_to_yaml",
    "validate_scenario",
]
