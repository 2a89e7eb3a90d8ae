"""The engine's contract with the Python front, checked from the Python side against the JSON
Schemas the engine generates from its own types (docs/schema/, kept current by the engine's
tests): every plan the scenario layer compiles is one the schema allows. Summaries of real runs
are checked in tests/test_session_api.py."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from mqttlab import engine
from mqttlab.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs" / "schema"


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_scenario_compiles_to_a_plan_the_engine_schema_allows(path):
    scenario = load_scenario(path)
    plan = engine.compile_plan(scenario, "mqtt://127.0.0.1:1883")
    jsonschema.validate(plan, schema("run-plan"))


def test_mqtt_sn_tls_and_closed_loop_plans_fit_the_schema():
    for overrides in (
        {"transport.kind": "mqtt-sn", "transport.topic_ids": "predefined", "transport.predefined": {"1": "bench/0"},
         "publishers.count": 1, "subscribers.count": 1, "publishers.topic": "bench/0", "subscribers.filters": ["bench/0"]},
        {"publishers.arrival": "closed", "publishers.complete_on": "delivery", "publishers.messages": 10},
        {"load.deadline": "5s", "load.grace": "5s", "publishers.payload": {"dist": "uniform", "min": 16, "max": 64}},
    ):
        plan = engine.compile_plan(load_scenario(None, overrides=overrides), "mqtts://127.0.0.1:8883")
        jsonschema.validate(plan, schema("run-plan"))


def test_the_schema_rejects_what_the_engine_rejects():
    plan = engine.compile_plan(load_scenario(None), "mqtt://127.0.0.1:1883")
    plan["publishers"]["no_such_field"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(plan, schema("run-plan"))
