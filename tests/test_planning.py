"""A scenario's plan: compiled once per run by its check, bound to the broker once it is up, never
compiled against a stand-in address; the engine's rules on it reported with the scenario's own."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab import engine, planning
from mqttlab.cli import app as cli_app
from mqttlab.planning import bind_broker, load_scenario, plan_of, validate_scenario
from mqttlab.scenario import ScenarioError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def compiles(monkeypatch) -> list[str]:
    """Every plan compiled while the test runs (the scenario's name each time)."""
    seen: list[str] = []
    compile_ = planning._compile

    def counted(scenario):
        seen.append(scenario.name)
        return compile_(scenario)

    monkeypatch.setattr(planning, "_compile", counted)
    return seen


def test_a_run_compiles_its_plan_once(tmp_path: Path, compiles: list[str]) -> None:
    # Checked, its routing shown, the broker launched (with its own login and port), run, written.
    # (From a file: a run from flags also compiles the default scenario's plan once, to tell
    # whether its own shape is the default's: another plan.)
    result = CliRunner().invoke(cli_app.app, ["run", str(ROOT / "scenarios" / "default.yaml"), "--broker", "mosquitto", "--pubs", "2", "--subs", "2", "--rate", "50",
                                              "--duration", "1s", "--warmup", "0s", "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output[-2000:]
    assert compiles == ["default"]
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["broker"]["host"] == "127.0.0.1" and plan["broker"]["port"] != 1883  # the launched broker's own port


def test_the_plan_of_a_changed_scenario_is_compiled_again(compiles: list[str]) -> None:
    scenario = validate_scenario({"publishers": {"qos": 1}})
    plan_of(scenario)
    assert compiles == ["default"]  # by the check, not again
    changed = scenario.model_copy(update={"publishers": scenario.publishers.model_copy(update={"qos": 2})})
    assert plan_of(changed)["publishers"]["qos"] == 2
    assert len(compiles) == 2


def test_plan_of_hands_out_copies_so_binding_one_leaves_the_next_unbound() -> None:
    scenario = validate_scenario({})
    bound = bind_broker(plan_of(scenario), "mqtt://127.0.0.1:4242", scenario)
    assert bound["broker"]["port"] == 4242
    assert "host" not in plan_of(scenario)["broker"]


def test_binding_takes_the_address_tls_websocket_and_the_running_brokers_login() -> None:
    scenario = validate_scenario({"broker": "mosquitto", "launch": {"tls": True, "websocket": True}})
    plan = plan_of(scenario)
    assert plan["broker"]["tls"] is not None and plan["broker"]["websocket"] == {"path": "/mqtt"}  # known before the broker is up
    broker_side = scenario.model_copy(update={"mqtt": scenario.mqtt.model_copy(update={"username": "admin", "password": "x"})})
    bind_broker(plan, "wss://[::1]:9443/mqtt/v2", broker_side)
    assert (plan["broker"]["host"], plan["broker"]["port"], plan["broker"]["websocket"]) == ("::1", 9443, {"path": "/mqtt/v2"})
    assert (plan["mqtt"]["username"], plan["mqtt"]["password"]) == ("admin", "x")


def test_an_unbound_plan_is_refused_by_the_engine() -> None:
    with pytest.raises(engine.PlanRejected, match="no broker address"):
        engine.run(plan_of(validate_scenario({})))


def test_the_engines_rules_come_with_the_scenarios_own_in_one_listing() -> None:
    data = {"publishers": {"reply_filter": "r/%i"}, "load": {"warmup": "20s", "duration": "10s"}, "subscribers": {"count": -1}}
    with pytest.raises(ScenarioError) as refused:
        validate_scenario(data)
    fields = {problem.path for problem in refused.value.problems}
    # A field rule (pydantic), and the engine's rules on the plan of what is valid besides.
    assert {"subscribers.count", "subscribers.echo_topic", "load.warmup"} <= fields, fields


def test_tls_files_are_checked_by_the_engines_rule_without_a_broker_address(tmp_path: Path) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("not read by the check")
    with pytest.raises(ScenarioError, match="tls.cert and tls.key must be given together"):
        validate_scenario({"broker": "mqtts://broker.example:8883", "tls": {"cert": str(cert)}})


def test_no_stand_in_broker_address_is_left_in_the_package() -> None:
    stand_ins = {"mqtt://127.0.0.1:1883", "mqtts://127.0.0.1:8883", "127.0.0.1:1883"}
    found = []
    for path in (ROOT / "python" / "mqttlab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in stand_ins:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_shipped_scenarios_check_and_plan_without_a_broker() -> None:
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        scenario = load_scenario(path)
        assert "host" not in plan_of(scenario)["broker"], path.name
