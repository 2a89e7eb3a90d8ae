"""The scenario files shipped in scenarios/ and the published JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mqttlab.planning import default_scenario, load_scenario
from mqttlab.scenario import scenario_json_schema

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
FILES = sorted(SCENARIOS.glob("*.yaml"))


def test_the_examples_are_there():
    names = {path.stem for path in FILES}
    assert {"default", "fan-in", "fan-out", "qos2", "poisson", "shared-subscription", "publishers-only", "tls"} <= names


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_every_shipped_scenario_is_valid_and_named_after_its_file(path: Path):
    assert load_scenario(path).name == path.stem


def test_default_yaml_is_the_built_in_default():
    assert load_scenario(SCENARIOS / "default.yaml") == default_scenario()


def test_schema_is_json_schema_of_every_section():
    schema = json.loads(scenario_json_schema())
    assert schema["additionalProperties"] is False
    assert {"name", "broker", "mqtt", "tls", "publishers", "subscribers", "load", "options"} <= set(schema["properties"])
    payload = schema["$defs"]["Publishers"]["properties"]["payload"]
    assert {"type": "integer", "minimum": 1} in payload["anyOf"]


def test_schema_accepts_the_shipped_files_structure():
    # Every top-level key the examples use is declared by the schema, so editors can complete them.
    declared = set(json.loads(scenario_json_schema())["properties"])
    for path in FILES:
        assert set(yaml.safe_load(path.read_text())) <= declared, path.name


def test_the_complete_example_in_the_docs_is_valid_and_names_every_field(tmp_path: Path):
    # docs/scenarios.md promises a complete example: a field added to the model without it there
    # would be undocumented.
    text = (SCENARIOS.parent / "docs" / "scenarios.md").read_text()
    block = text.split("```yaml", 1)[1].split("```", 1)[0]
    path = tmp_path / "complete.yaml"
    path.write_text(block)
    load_scenario(path)
    example = yaml.safe_load(block)
    schema = json.loads(scenario_json_schema())
    assert set(example) == set(schema["properties"])
    for section, fields in example.items():
        if isinstance(fields, dict):
            ref = schema["properties"][section]
            ref = ref.get("$ref") or next(a["$ref"] for a in ref.get("anyOf", ref.get("allOf", [])) if "$ref" in a)
            declared = schema["$defs"][ref.rsplit("/", 1)[1]]["properties"]
            assert set(fields) == set(declared), section
