"""The pacing modes (mqttlab.pacing): the registry names the same arrivals as the engine's schema,
the scenario model and the plan's types, and each mode's rules, words and name stand as the
summaries and error listings have always said them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from mqttlab import pacing, plan_types
from mqttlab.planning import plan_of, validate_scenario
from mqttlab.scenario import ScenarioError
from mqttlab.scenario.model import Publishers
from mqttlab.shape import pacing as rate_label
from mqttlab.summary_text import measurement_line, plan_line

SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "schema" / "run-plan.schema.json"


def test_the_registry_names_the_arrivals_of_the_engine_schema_the_scenario_and_the_plan_types():
    arrival = json.loads(SCHEMA.read_text())["definitions"]["Arrival"]
    in_schema = [value for variant in arrival["oneOf"] for value in variant["enum"]]
    assert list(pacing.MODES) == in_schema
    assert list(get_args(Publishers.model_fields["arrival"].annotation)) == in_schema
    assert list(get_args(plan_types.Arrival)) == in_schema
    assert Publishers.model_fields["arrival"].default == pacing.DEFAULT
    assert pacing.SCHEDULED == "constant or poisson"


def problems(publishers: dict, load: dict | None = None) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario({"publishers": publishers, "load": load or {}})
    return [str(problem) for problem in caught.value.problems]


def test_closed_loop_needs_a_grace_and_takes_no_rate():
    assert problems({"arrival": "closed", "rate": 5}, {"grace": 0}) == [
        "load.grace: must be > 0 with publishers.arrival: closed (a message not complete within it is given up)",
        "publishers.rate: is not used with publishers.arrival: closed (the next message goes when the previous one completed); "
        "leave it out (on the command line: --set publishers.rate=null), or use arrival: constant or poisson",
    ]


def test_window_takes_neither_a_think_time_nor_a_rate():
    assert problems({"arrival": "window", "rate": 5, "think_time": "1s"}) == [
        "publishers.arrival: publishers.think_time applies to closed loop: set arrival: closed",
        "publishers.rate: is not used with publishers.arrival: window (a message goes whenever the window has room); "
        "leave it out (on the command line: --set publishers.rate=null), or use arrival: constant or poisson",
    ]


def test_a_constant_schedule_that_the_duration_cuts_short_is_refused_and_poisson_is_not_judged():
    assert problems({"arrival": "constant", "rate": 10, "messages": 100}, {"duration": "5s"}) == [
        "load.duration: stops the sends at 5s, before the 100 messages per publisher at 10 msg/s are sent (9.9s; "
        "only about 51 would be); leave load.duration out to send them all",
    ]
    assert validate_scenario({"publishers": {"arrival": "poisson", "rate": 10, "messages": 100}, "load": {"duration": "5s"}})


@pytest.mark.parametrize(("publishers", "label", "pace", "measured"), [
    ({"arrival": "constant", "rate": 50}, "50ps", "10 publishers × 50 msg/s = 500 msg/s", "open loop: latency from the intended send time"),
    ({"arrival": "poisson", "rate": 50}, "50ps-poisson", "10 publishers × 50 msg/s = 500 msg/s", "open loop: latency from the intended send time"),
    ({"arrival": "closed", "think_time": "0.5s", "complete_on": "delivery"}, "closed", "10 publishers, closed loop",
     "closed loop: each message sent when the previous one's delivery came, plus 0.5 s; latency from the actual send"),
    ({"arrival": "window", "qos": 1, "inflight": 8}, "window", "10 publishers, filling a window of 8",
     "window filling: each message sent when the in-flight window had room; latency from the instant its slot opened"),
    ({"arrival": "window", "qos": 0}, "window", "10 publishers, as fast as the socket takes them",
     "window filling: each message sent when the in-flight window had room; latency from the instant its slot opened"),
])
def test_each_mode_describes_itself(publishers, label, pace, measured):
    scenario = validate_scenario({"publishers": publishers})
    assert rate_label(scenario.publishers) == label
    assert plan_line(plan_of(scenario)).startswith(f"plan: {pace} for ")
    mode = pacing.mode_of(scenario.publishers.arrival)
    measurement = {"method": "header", "pacing": mode.measured_as, "complete_on": publishers.get("complete_on"), "think_s": 0.5}
    assert measurement_line(measurement) == f"measured by the 16-byte payload header; {measured}"


def test_only_the_closed_loop_sets_its_plan_keys_and_keeps_its_clients_in_one_process():
    closed = validate_scenario({"publishers": {"arrival": "closed", "complete_on": "delivery", "think_time": "2ms"}})
    assert {key: plan_of(closed)["publishers"].get(key) for key in ("think_us", "complete_on")} == {"think_us": 2000, "complete_on": "delivery"}
    assert pacing.mode_of("closed").single_process_problem(closed.publishers)
    window = validate_scenario({"publishers": {"arrival": "window", "complete_on": "delivery"}})
    assert "think_us" not in plan_of(window)["publishers"] and pacing.mode_of("window").single_process_problem(window.publishers) is None
