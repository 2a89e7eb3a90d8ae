"""The capacities of state (docs/capacity.md, "State"): how many messages a memory-limited
Mosquitto holds for offline sessions, and how many retained messages it keeps for a read, each
within an SLO on its drain or its read, the knee named as the memory limit. Real broker on
loopback, small limits and large payloads so that each search takes a few short probes; and the
searches' bad input refused before any probe, every problem named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.capacity.slo import judge, parse_objective
from mqttlab.cli.app import app

# Capacity searches judge how much a broker takes: alone on the cores (Makefile).
pytestmark = pytest.mark.serial

runner = CliRunner()
LIMIT = 16 * 2**20
PAYLOAD = 8192
# Short searches: a ladder of 4x, stopped once the bracket is within 2.5x; one probe per rate.
SHORT = ["--factor", "4", "--resolution", "1.5", "--repeats", "1", "--generator-retries", "3",
         "--set", f"launch.limits.memory={LIMIT}", "--size", f"{PAYLOAD}"]


def _search(tmp_path: Path, *options: str) -> dict:
    done = runner.invoke(app, ["capacity", "-b", "mosquitto", *SHORT, *options, "--out", str(tmp_path / "search")])
    assert done.exit_code == 0, done.output
    return json.loads((tmp_path / "search" / "capacity.json").read_text())


def _bracketed_under_the_memory_limit(tmp_path: Path, report: dict, unit: str) -> tuple[dict, dict]:
    """Checks that the search bracketed a count of `unit` whose lower end fits in the memory limit
    with the payloads alone, the upper end killed by that limit; returns a probe that met the
    objectives and that probe's run summary."""
    assert report["status"] == "bracketed" and report["unit"] == unit
    low, high = report["interval_per_s"]
    assert low * PAYLOAD < LIMIT and high > low
    assert "memory" in [item["limit"] for item in report["limited_by"]], report["limited_by"]
    met = next(p for p in report["probes"] if p["met"])
    return met, json.loads((tmp_path / "search" / met["directory"] / "summary.json").read_text())


def test_a_memory_limited_mosquitto_holds_a_bracketed_number_of_queued_messages(tmp_path):
    report = _search(tmp_path, "--of", "queued-messages", "--slo", "loss==0", "--slo", "drain.p99<2s", "--start", "500",
                     "--probe-duration", "5s", "--warmup", "1s")
    met, summary = _bracketed_under_the_memory_limit(tmp_path, report, "queued messages")
    # Each probe holds the messages its count names: sent while the sessions were away, delivered on return.
    assert summary["offline"]["owed"] == pytest.approx(met["rate_per_s"], rel=0.02)


def test_a_memory_limited_mosquitto_keeps_a_bracketed_number_of_retained_messages_for_a_read(tmp_path):
    report = _search(tmp_path, "--of", "retained", "--slo", "loss==0", "--slo", "retained.p99<2s", "--start", "250",
                     "--probe-duration", "4s")
    met, summary = _bracketed_under_the_memory_limit(tmp_path, report, "retained messages")
    # Two subscribers read every topic set: the read's time to all is what the SLO judged.
    assert summary["retained"]["expected"] == 2 * met["rate_per_s"] and summary["retained"]["complete"] == 2
    assert summary["state_memory"]["retained"]["held"] == met["rate_per_s"]


def test_the_state_searches_refuse_shapes_they_cannot_search_every_problem_named(tmp_path):
    done = runner.invoke(app, ["capacity", "--of", "queued-messages", "-b", "mosquitto", "--slo", "drain.p99.9<1s",
                               "--set", "subscribers.offline.fraction=0.5", "--set", "subscribers.offline.every=10s",
                               "--probe-duration", "3s", "--out", str(tmp_path / "q")])
    assert done.exit_code == 2
    for problem in ("drain is a spread over sessions or subscribers: p50, p99 or max",
                    "subscribers.offline.fraction: the queued-messages search holds every subscriber away at once",
                    "subscribers.offline.every: the queued-messages search holds the sessions away once",
                    "subscribers.offline: the sessions must be back before the probe ends"):
        assert problem in done.output.replace("\n", " ").replace("  ", " "), done.output
    assert not (tmp_path / "q").exists()


def test_a_retained_reads_loss_counts_the_values_missing_or_stale():
    summary = {"messages": {"expected": 0, "delivered": 0, "lost": 0},
               "retained": {"expected": 200, "delivered": 190, "missing": 10, "stale": 5, "all_s": {"count": 2, "p50": 0.1, "p99": 0.3, "max": 0.3}}}
    loss = judge(parse_objective("loss<=0.05"), summary, {})
    assert loss.observed == pytest.approx(15 / 200) and not loss.met
    assert judge(parse_objective("retained.p99<500ms"), summary, {}).observed == pytest.approx(300_000)
    assert not judge(parse_objective("drain.p99<1s"), summary, {}).met  # no drain measured: never passed silently
