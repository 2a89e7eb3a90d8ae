"""Watching a run: progress toward the end and time left, a suite's run count and time left, and
`mqttlab report --watch` following a run that another process is writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from mqttlab.engine import planned_load_s
from mqttlab.live.state import RunState, format_seconds, suite_state, write_live
from mqttlab.planning import plan_of, validate_scenario

ROOT = Path(__file__).resolve().parent.parent


def plan_for(data: dict) -> dict:
    return plan_of(validate_scenario(data))


def snapshot(t: float, phase: str, sent: int) -> dict:
    return {"t_s": t, "phase": phase, "connected": {"publishers": 10, "subscribers": 10},
            "total": {"sent": sent, "acked": sent, "received": sent, "dropped": 0, "errors": 0},
            "interval": {"sent": 1000, "acked": 1000, "received": 1000, "e2e_p50_us": 300, "e2e_p99_us": 900}}


def test_planned_load_follows_duration_or_message_count():
    assert planned_load_s(plan_for({})) == 10.0
    # As the engine plans it: the last of 501 sends at 100 msg/s falls before 5.01 s, whatever its phase.
    assert planned_load_s(plan_for({"publishers": {"messages": 501, "rate": 100}})) == 5.01
    assert planned_load_s(plan_for({"publishers": {"messages": 10, "arrival": "closed"}})) is None


def test_run_state_counts_progress_time_left_and_backlog_from_the_snapshots():
    state = RunState(plan_for({"publishers": {"rate": 100}, "load": {"duration": "10s", "grace": "2s"}}), run="r", scenario="s", broker="b")
    state.update(snapshot(1.0, "warmup", 10))  # 10 publishers' first sends: the load started about now
    state.update(snapshot(5.0, "measuring", 4010))
    progress = state.progress()
    assert progress["fraction"] == pytest.approx(0.4, abs=0.02)
    assert progress["left_s"] == pytest.approx(6 + 2, abs=0.2)  # the rest of the load and the grace
    assert state.backlog_s == pytest.approx(0.0, abs=0.02)
    state.update(snapshot(6.0, "measuring", 4510))  # 500 sends short of the schedule's 1,000/s
    assert state.backlog_s == pytest.approx(0.5, abs=0.02)
    assert state.rates["sent"] == pytest.approx(1000)


def test_suite_state_counts_runs_and_estimates_the_time_left(tmp_path: Path):
    short = {"load": {"duration": "4s"}}
    runs = [{"id": f"c/rumqttd/rep-{i}", "directory": f"runs/c/rumqttd/rep-{i}", "scenario": short, "status": status, **extra}
            for i, (status, extra) in enumerate([("completed", {"seconds": 10.0}), ("pending", {}), ("pending", {})], start=1)]
    (tmp_path / "runs.json").write_text(json.dumps({"runs": runs}))
    live = RunState(plan_for(short), run="rep-2", scenario="c", broker="rumqttd", directory=tmp_path / runs[1]["directory"])
    live.update(snapshot(1.0, "warmup", 10))
    live.update(snapshot(3.0, "measuring", 2010))  # 2 s of 4 done, 2 s grace left after
    state = suite_state(tmp_path)
    assert (state["runs"], state["done"], state["left"], state["current"]) == (3, 1, 2, "c/rumqttd/rep-2")
    # The current run's own time left (about 4 s) plus the last one: its 4 s load and the 6 s
    # the finished run took beyond its load.
    assert state["left_s"] == pytest.approx(4 + 10, abs=0.3)


def test_runs_that_end_by_their_message_count_are_estimated_by_those_that_finished(tmp_path: Path):
    # Seed 001's closed loop: 1,000 messages within a 60 s bound, done in about a second. The
    # estimate takes what the finished runs of each configuration took, not the bound.
    closed = {"publishers": {"arrival": "closed", "messages": 1000, "inflight": 1}, "load": {"duration": "60s"}}
    other = {"load": {"duration": "4s"}}
    runs = [{"id": f"c/{broker}/rep-{rep}", "directory": f"runs/c/{broker}/rep-{rep}", "broker": broker, "scenario": closed,
             **({"status": "completed", "seconds": took} if rep == 1 else {"status": "pending"})}
            for broker, took in (("mosquitto", 1.0), ("hivemq", 5.0)) for rep in (1, 2, 3)]
    runs.append({"id": "d/mosquitto/rep-1", "directory": "runs/d/mosquitto/rep-1", "broker": "mosquitto", "scenario": other, "status": "pending"})
    (tmp_path / "runs.json").write_text(json.dumps({"runs": runs}))
    state = suite_state(tmp_path)
    # Two more of each closed-loop configuration at what its first took, and the 4 s run never
    # seen with no setup time beyond its load (the finished runs took less than their bound).
    assert state["left"] == 5 and state["left_s"] == pytest.approx(2 * 1.0 + 2 * 5.0 + 4.0)


def test_watching_a_finished_suite_prints_its_count_and_ends(tmp_path: Path):
    runs = [{"id": "c/rumqttd/rep-1", "directory": "runs/c/rumqttd/rep-1", "scenario": {}, "status": "completed", "seconds": 3.0}]
    (tmp_path / "runs.json").write_text(json.dumps({"runs": runs}))
    result = CliRunner().invoke(cli_app.app, ["report", "--watch", str(tmp_path), "--interval", "0.1"])
    assert result.exit_code == 0, result.output
    assert f"suite {tmp_path.name}: 1/1 runs done" in result.output


def test_time_left_reads_as_minutes_and_hours():
    assert (format_seconds(12), format_seconds(125), format_seconds(7300), format_seconds(None)) == ("12s", "2m05s", "2h01m", "?")


def test_live_file_is_replaced_whole(tmp_path: Path):
    write_live(tmp_path, {"format": "mqttlab-live/1", "n": 1})
    write_live(tmp_path, {"format": "mqttlab-live/1", "n": 2})
    assert json.loads((tmp_path / "live.json").read_text())["n"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["live.json"]


@pytest.mark.slow
def test_report_watch_follows_a_run_written_by_another_process(tmp_path: Path):
    pytest.importorskip("mqttlab._engine")
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.Popen([sys.executable, "-m", "mqttlab", "run", "--pubs", "2", "--subs", "2", "--rate", "50", "--duration", "3s",
                            "--warmup", "500ms", "--set", "load.grace=1s", "--out", str(out), "--json"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        watch = subprocess.run([sys.executable, "-m", "mqttlab", "report", "--watch", str(out), "--interval", "0.2"],
                               capture_output=True, text=True, timeout=90, env=env, cwd=ROOT)
    finally:
        run.wait(timeout=60)
    assert run.returncode == 0
    assert watch.returncode == 0, watch.stderr
    lines = [line for line in watch.stderr.splitlines() if "% done" in line]
    assert lines and "left" in lines[0]  # it saw the run under way, not only its end
    assert any("measuring" in line for line in lines)
    assert "status: completed" in watch.stdout and str(out) in watch.stdout  # then the summary, as `report` prints it
