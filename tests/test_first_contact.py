"""Defaults that follow the user (issue 17): a run as a newcomer types it measures what they
meant, and a run whose topics and filters do not meet says so before and after the load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from mqttlab.routing import check_routing
from mqttlab.planning import plan_of, validate_scenario
from mqttlab.scenario import ScenarioError
from mqttlab.summary_view import plan_line

cli_app._register()
ROOT = Path(__file__).resolve().parent.parent


def mqttlab(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mqttlab", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def routing_of(data: dict):
    scenario = validate_scenario(data)
    return check_routing(plan_of(scenario))


def problems_of(data: dict) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(data)
    return [str(p) for p in caught.value.problems]


# --- defaults that follow ------------------------------------------------------------------


def test_subscribers_follow_the_publish_topic_when_no_filter_is_given():
    scenario = validate_scenario({"publishers": {"topic": "sensors/%i"}})
    assert scenario.subscribers.filters == ["sensors/%i"]
    assert "subscribers.filters" in scenario.defaults_followed
    explicit = validate_scenario({"publishers": {"topic": "sensors/%i"}, "subscribers": {"filters": ["sensors/#"]}})
    assert explicit.subscribers.filters == ["sensors/#"] and not explicit.defaults_followed


def test_a_client_id_in_the_topic_pairs_subscriber_i_with_publisher_i():
    scenario = validate_scenario({"publishers": {"topic": "dev/%c/up"}})
    assert scenario.subscribers.filters == ["dev/mqttlab-pub-%i/up"]
    routing = check_routing(plan_of(scenario))
    assert routing.warnings == [] and routing.owed_per_message == 1.0


def test_subscribers_qos_follows_the_publishers_unless_set():
    assert validate_scenario({"publishers": {"qos": 2}}).subscribers.qos == 2
    assert validate_scenario({"publishers": {"qos": 2}, "subscribers": {"qos": 0}}).subscribers.qos == 0


def test_payload_size_mapping_means_fixed_and_min_max_means_uniform():
    assert validate_scenario({"publishers": {"payload": {"size": 20}}}).publishers.payload.model_dump() == {"dist": "fixed", "size": 20}
    uniform = validate_scenario({"publishers": {"payload": {"min": 20, "max": "1KB"}}}).publishers.payload
    assert (uniform.dist, uniform.min, uniform.max) == ("uniform", 20, 1000)


def test_a_message_count_runs_until_sent_and_measures_every_message():
    scenario = validate_scenario({"publishers": {"messages": 2000, "rate": 100}})
    assert scenario.load.duration is None and scenario.load.warmup == 0
    assert plan_of(scenario)["load"]["duration_ms"] == 0  # the engine's "no time limit"
    assert validate_scenario({}).load.duration == 10.0 and validate_scenario({}).load.warmup == 2.0


def test_settings_that_cut_the_run_short_or_measure_nothing_are_refused():
    cut = problems_of({"publishers": {"messages": 2000, "rate": 100}, "load": {"duration": "10s"}})
    assert any(p.startswith("load.duration: stops the sends at 10s") and "only about 1,001" in p for p in cut)
    swallowed = problems_of({"publishers": {"messages": 100, "rate": 100}, "load": {"duration": "10s", "warmup": "2s"}})
    assert any(p.startswith("load.warmup: every message is sent within the warm-up") for p in swallowed)
    closed = problems_of({"publishers": {"arrival": "closed", "rate": 50}})
    assert any(p.startswith("publishers.rate: is not used with publishers.arrival: closed") for p in closed)


def test_the_plan_line_spells_out_the_total_rate():
    line = plan_line(plan_of(validate_scenario({"publishers": {"rate": 100}})))
    assert "10 publishers × 100 msg/s = 1,000 msg/s for 10 s (2 s warm-up)" in line


# --- the routing check ---------------------------------------------------------------------


def test_routing_flags_no_delivery_owed_unmatched_publishers_and_idle_subscribers():
    nothing = routing_of({"publishers": {"topic": "sensors/%i"}, "subscribers": {"filters": ["bench/%i"]}})
    assert nothing.unmatched_publishers == 10 and nothing.warnings[0].startswith("no subscriber is owed any message")
    assert nothing.topics[:2] == ["sensors/%i", "sensors/0"] and nothing.filters[:2] == ["bench/%i", "bench/0"]
    fewer_subs = routing_of({"publishers": {"count": 10}, "subscribers": {"count": 3}})
    assert fewer_subs.warnings == ["7 of 10 publishers publish to topics no subscription matches"]
    fewer_pubs = routing_of({"publishers": {"count": 2}, "subscribers": {"count": 5}})
    assert fewer_pubs.warnings == ["3 of 5 subscribers are owed no message at all"]


def test_routing_leaves_runs_without_one_side_and_matching_wildcards_alone():
    assert routing_of({"subscribers": {"count": 0}}).warnings == []
    assert routing_of({"publishers": {"count": 100, "topic": "a/%i"}, "subscribers": {"count": 1, "filters": ["a/#"]}}).warnings == []
    shared = routing_of({"publishers": {"count": 2}, "subscribers": {"count": 4, "filters": ["$share/g/bench/+"]}})
    assert shared.warnings == [] and shared.owed_per_message == 1.0  # one copy per group


def test_strict_refuses_a_mismatched_run_before_anything_starts(tmp_path: Path):
    out = tmp_path / "run"
    result = CliRunner().invoke(cli_app.app, ["run", "--topic", "sensors/%i", "--filter", "bench/%i", "--strict", "--out", str(out)])
    assert result.exit_code == 2
    assert "TOPICS AND FILTERS DO NOT MEET" in result.output and "error: --strict" in result.output
    assert not out.exists()


# --- real runs -----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_newcomers_example_delivers_all_5000_messages(tmp_path: Path):
    pytest.importorskip("mqttlab._engine")
    out = tmp_path / "run"
    completed = mqttlab("run", "--pubs", "10", "--subs", "10", "--topic", "sensors/%i", "--qos", "1", "--rate", "100",
                        "--duration", "5s", "--out", str(out))
    assert completed.returncode in (0, 1), completed.stderr  # 1 only for findings a loaded host can cause
    summary = json.loads((out / "summary.json").read_text())
    assert summary["messages"]["sent"] == 5000
    assert summary["messages"]["expected"] == 5000 and summary["messages"]["delivered"] == 5000
    assert "subscribers subscribe to the publish topic template ('sensors/%i'" in completed.stdout
    assert "TOPICS AND FILTERS DO NOT MEET" not in completed.stdout + completed.stderr


@pytest.mark.slow
def test_mismatched_topics_and_filters_warn_before_the_load_and_in_the_summary(tmp_path: Path):
    pytest.importorskip("mqttlab._engine")
    out = tmp_path / "run"
    completed = mqttlab("run", "--pubs", "2", "--subs", "2", "--topic", "sensors/%i", "--filter", "bench/%i", "--rate", "20",
                        "--duration", "2s", "--warmup", "500ms", "--set", "load.grace=1s", "--out", str(out))
    assert completed.returncode == 1  # completed, but nothing was owed: a finding, not a pass
    before = completed.stderr
    assert "TOPICS AND FILTERS DO NOT MEET (before the load)" in before
    # The warning comes before the first progress line, i.e. before any load was sent.
    assert before.index("TOPICS AND FILTERS DO NOT MEET") < before.index("clients ")
    for side in ("sensors/0", "bench/0"):
        assert side in before and side in completed.stdout
    assert "TOPICS AND FILTERS DO NOT MEET" in completed.stdout
    routing = json.loads((out / "summary.json").read_text())["routing"]
    assert routing["unmatched_publishers"] == 2 and routing["warnings"]
