"""The routing check (mqttlab.routing): how a run's topics and filters meet, said before the load
(refused with --strict) and in the summary when no subscriber is owed what publishers send."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runs import invoke, mqttlab, said  # tests/ is on sys.path (no package)
from mqttlab.planning import plan_of, validate_scenario
from mqttlab.routing import check_routing


def routing_of(data: dict):
    scenario = validate_scenario(data)
    return check_routing(plan_of(scenario))


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
    result = invoke("run", "--topic", "sensors/%i", "--filter", "bench/%i", "--strict", "--out", str(out))
    assert result.exit_code == 2
    assert "TOPICS AND FILTERS DO NOT MEET" in result.output and "error: --strict" in result.output
    assert not out.exists()


def test_user_text_is_never_markup(tmp_path: Path):
    result = invoke("run", "--topic", "a/[bold]/%i", "--filter", "b/[red]x", "--strict", "--pubs", "1", "--subs", "1")
    assert result.exit_code == 2 and "a/[bold]/0" in result.output and "b/[red]x" in result.output
    assert "1 publishers" not in said(result) and "the publisher's topic" in said(result)


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
