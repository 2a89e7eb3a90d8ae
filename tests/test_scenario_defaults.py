"""Defaults that follow what the user set (issues 17 and 28): subscribers follow the publish topic
and QoS, a payload size means what it says, a message count runs until sent, the warm-up fits the
duration; settings that would cut the run short or measure nothing are refused, and a run as a
newcomer types it measures what they meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runs import ROOT, SMALL, invoke, mqttlab, said, summary_of  # tests/ is on sys.path (no package)
from mqttlab.planning import load_scenario, plan_of, validate_scenario
from mqttlab.routing import check_routing
from mqttlab.scenario import ScenarioError


def problems_of(data: dict) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(data)
    return [str(p) for p in caught.value.problems]


# --- topics, QoS, payload and message count --------------------------------------------------


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


def test_a_payload_too_small_for_the_header_is_measured_by_topic_sequence(tmp_path: Path):
    assert validate_scenario({"publishers": {"payload": 1}}).publishers.measure == "topic-sequence"
    assert validate_scenario({"publishers": {"payload": 16}}).publishers.measure == "header"
    out = tmp_path / "run"
    result = invoke("run", "--size", "1", "--duration", "1s", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    assert "measured by topic and sequence number, not the 16-byte header (payloads under 16 B" in said(result)
    summary = summary_of(out)
    assert summary["measurement"]["method"] == "topic-sequence" and summary["messages"]["lost"] == 0
    assert "at least 16" not in invoke("run", "--help").output


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


def test_closed_loop_from_the_command_line_drops_the_files_rate(tmp_path: Path):
    scenario = load_scenario(ROOT / "scenarios" / "default.yaml", assignments=["publishers.arrival=closed", "publishers.rate=null"])
    assert scenario.publishers.arrival == "closed" and "rate" not in scenario.publishers.model_fields_set
    out = tmp_path / "run"
    result = invoke("run", str(ROOT / "scenarios" / "default.yaml"), "--arrival", "closed", "--duration", "1s", "--warmup", "200ms",
                    "--pubs", "1", "--subs", "1", "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    assert "closed loop" in said(result) and summary_of(out)["messages"]["sent"] > 0
    refused = invoke("run", "--arrival", "closed", "--rate", "50")  # a rate the user gave with closed loop is still an error
    assert refused.exit_code == 2 and "--set publishers.rate=null" in said(refused)


def test_a_set_to_null_removes_what_the_file_set():
    with pytest.raises(ScenarioError, match="publishers.rate: is not used with publishers.arrival: closed"):
        load_scenario(ROOT / "scenarios" / "default.yaml", assignments=["publishers.arrival=closed"])



# --- the warm-up -----------------------------------------------------------------------------


@pytest.mark.parametrize("duration, warmup", [("1s", 0.2), ("2s", 0.4), ("3s", 0.6), ("10s", 2.0), ("1m", 2.0)])
def test_the_default_warmup_fits_the_duration_the_user_set(duration: str, warmup: float):
    scenario = load_scenario(None, overrides={"load.duration": duration})
    assert scenario.load.warmup == warmup
    assert ("load.warmup" in scenario.defaults_followed) == (warmup != 2.0)


def test_a_one_second_run_works_and_says_the_warmup_it_chose(tmp_path: Path):
    out = tmp_path / "run"
    result = invoke("run", "--duration", "1s", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output  # 1 only for findings a loaded host can cause
    assert "(0.2 s warm-up)" in said(result) and "warm-up 0.2s, a fifth of load.duration 1s" in said(result)
    summary = summary_of(out)
    assert summary["warmup_s"] == pytest.approx(0.2) and summary["measured_s"] == pytest.approx(0.8, abs=0.1)


def test_a_warmup_too_long_for_the_duration_names_the_flag():
    result = invoke("run", "--duration", "1s", "--warmup", "2s")
    assert result.exit_code == 2
    assert "load.warmup (--warmup): must be shorter than load.duration (2s >= 1s): a shorter --warmup" in said(result)


def test_a_files_warmup_follows_a_shorter_duration_from_the_command_line(tmp_path: Path):
    out = tmp_path / "run"
    result = invoke("run", str(ROOT / "scenarios" / "default.yaml"), "--duration", "2s", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    assert "note: the scenario's warm-up does not fit --duration 2s: 0.4s instead (--warmup to choose)" in said(result)
    assert summary_of(out)["warmup_s"] == pytest.approx(0.4)
    kept = invoke("run", str(ROOT / "scenarios" / "default.yaml"), "--duration", "2s", "--warmup", "3s")  # asked for: refused
    assert kept.exit_code == 2 and "load.warmup (--warmup): must be shorter" in said(kept)


def test_the_readme_says_the_warmup_is_inside_the_duration():
    readme = (ROOT / "README.md").read_text()
    assert "10 s after a 2 s warm-up" not in readme
    assert "for 10 s, of which the first 2 s are a warm-up: 8 s measured" in readme



# --- a real run as a newcomer types it -------------------------------------------------------


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
