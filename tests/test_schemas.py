"""The engine's contract with the Python front, checked from the Python side against the JSON
Schemas the engine generates from its own types (docs/schema/, kept current by the engine's
tests): every plan the scenario layer compiles is one the schema allows. Summaries of real runs
are checked in tests/test_session_api.py."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from mqttlab.planning import bind_broker, load_scenario, plan_of

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs" / "schema"


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_scenario_compiles_to_a_plan_the_engine_schema_allows(path):
    scenario = load_scenario(path)
    plan = plan_of(scenario)  # as checked, before a broker is bound
    jsonschema.validate(plan, schema("run-plan"))


def test_mqtt_sn_tls_and_closed_loop_plans_fit_the_schema():
    for overrides in (
        {"transport.kind": "mqtt-sn", "transport.topic_ids": "predefined", "transport.predefined": {"1": "bench/0"},
         "publishers.count": 1, "subscribers.count": 1, "publishers.topic": "bench/0", "subscribers.filters": ["bench/0"]},
        {"publishers.arrival": "closed", "publishers.complete_on": "delivery", "publishers.messages": 10},
        {"load.deadline": "5s", "load.grace": "5s", "publishers.payload": {"dist": "uniform", "min": 16, "max": 64}},
    ):
        scenario = load_scenario(None, overrides=overrides)
        plan = bind_broker(plan_of(scenario), "mqtts://127.0.0.1:8883", scenario)
        jsonschema.validate(plan, schema("run-plan"))


def test_the_schema_rejects_what_the_engine_rejects():
    plan = plan_of(load_scenario(None))
    plan["publishers"]["no_such_field"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(plan, schema("run-plan"))


# --- the summary's Python types against the engine's schema ------------------------------------

_SCALARS = {"integer": int, "number": float, "string": str, "boolean": bool}


def _python_type(node: dict, definitions: dict) -> object:
    """The Python type a schema node stands for, written the way summary_types writes it."""
    from typing import Optional

    from mqttlab import summary_types

    if "$ref" in node:
        return getattr(summary_types, node["$ref"].rsplit("/", 1)[1])
    for key in ("anyOf", "allOf"):
        if key in node:
            parts = [p for p in node[key] if p.get("type") != "null"]
            inner = _python_type(parts[0], definitions)
            return Optional[inner] if len(parts) < len(node[key]) else inner
    kind = node["type"]
    if isinstance(kind, list):
        (base,) = [k for k in kind if k != "null"]
        return Optional[_SCALARS[base]]
    if kind == "array":
        return list[_python_type(node["items"], definitions)]
    if kind == "object":
        return dict[str, _python_type(node["additionalProperties"], definitions)]
    return _SCALARS[kind]


def test_the_summary_typeddicts_mirror_the_engine_schema_field_for_field():
    from typing import get_args, get_type_hints

    from mqttlab import summary_types

    summary = schema("summary")
    definitions = summary["definitions"]
    checked = [("EngineSummary", summary)] + [(n, d) for n, d in definitions.items() if d.get("type") == "object"]
    for name, node in checked:
        typed = getattr(summary_types, name)
        hints = get_type_hints(typed)
        assert set(hints) == set(node["properties"]), name
        assert set(node.get("required", [])) <= typed.__required_keys__, name
        for field, spec in node["properties"].items():
            assert hints[field] == _python_type(spec, definitions), f"{name}.{field}"
    # The statuses: the engine's, in the engine's order (best to worst).
    assert summary_types.STATUS_ORDER == tuple(definitions["Status"]["enum"])
    assert set(get_args(summary_types.SectionName)) == summary_types.RUN_SECTIONS
    assert not summary_types.RUN_SECTIONS & set(summary["properties"])


def test_a_run_section_cannot_overwrite_what_the_engine_wrote():
    from mqttlab.summary_types import add_section

    summary = {"status": "completed", "messages": {"lost": 0}}
    add_section(summary, "routing", {"publishers": 1})
    assert summary["routing"] == {"publishers": 1}
    with pytest.raises(ValueError, match="not a section the run adds"):
        add_section(summary, "status", "incomplete")  # type: ignore[arg-type]
    assert summary["status"] == "completed"


# --- the plan's Python types against the engine's schema ----------------------------------------


def _keys_match(typed: type, node: dict, name: str) -> None:
    assert set(typed.__required_keys__) | set(typed.__optional_keys__) == set(node["properties"]), name  # type: ignore[attr-defined]
    assert set(typed.__required_keys__) == set(node.get("required", [])), name  # type: ignore[attr-defined]


def test_the_plan_typeddicts_mirror_the_engine_schema_key_for_key():
    from typing import get_args

    from mqttlab import plan_types

    plan = schema("run-plan")
    definitions = plan["definitions"]
    _keys_match(plan_types.RunPlan, plan, "RunPlan")
    objects = [n for n, d in definitions.items() if d.get("type") == "object"]
    assert set(objects) == {"BrokerTarget", "Churn", "Load", "MqttOptions", "Offline", "Options", "Publishers", "RetainedRead", "Shard", "Subscribers", "Takeover", "TlsOptions", "UserProperties", "WebSocketOptions", "Will"}
    for name in objects:
        _keys_match(getattr(plan_types, name), definitions[name], name)
    # The unions, variant by variant (the order of the schema's oneOf).
    for union, variants in (("PayloadSize", get_args(plan_types.PayloadSize)), ("Transport", get_args(plan_types.Transport))):
        nodes = definitions[union]["oneOf"]
        assert len(variants) == len(nodes), union
        for typed, node in zip(variants, nodes):
            _keys_match(typed, node, typed.__name__)
    # The enums, value for value.
    def values(node: dict) -> set:
        return {v for part in node.get("oneOf", [node]) for v in part["enum"]}

    for name in ("Arrival", "CompleteOn", "Measure", "SnTopicIds"):
        assert set(get_args(getattr(plan_types, name))) == values(definitions[name]), name
