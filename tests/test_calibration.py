"""The instrument's own overhead (mqttlab.calibration): measured once per process and recorded in
every run's manifest, shown by `report` with what the run's figures carry of it, set side by side
by `compare` with a note when runs differ, and a run that cannot calibrate still completing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterator

import pytest

import mqttlab
from cli_runs import invoke, said  # tests/ is on sys.path (no package)
from mqttlab import calibration, engine

SHORT = {"publishers.count": 1, "subscribers.count": 1, "publishers.rate": 100, "load.duration": "1s", "load.warmup": "0s"}


@pytest.fixture(scope="module")
def embedded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("calibration") / "run"
    assert mqttlab.run(None, set=SHORT, out=out).status == "completed"
    return out


def _manifest(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text())


def test_every_manifest_carries_the_calibration_measured_once_per_process(embedded_run: Path):
    recorded = _manifest(embedded_run)["calibration"]
    assert "error" not in recorded, recorded
    assert (recorded["messages"], recorded["rate"]) == (calibration.MESSAGES, calibration.RATE)
    assert recorded["stamped"] > calibration.MESSAGES * 0.9
    for part in ("send_us", "loopback_us", "wake_us", "client_us"):
        assert 0 <= recorded[part]["p50_us"] <= recorded[part]["p99_us"] <= recorded[part]["max_us"], part
    # Kept for the process: a later run here records this same measurement, with when it was taken.
    assert calibration.measured() == recorded and recorded["taken_at"].endswith("Z")


def test_report_says_the_overhead_and_what_the_figures_still_carry(embedded_run: Path):
    recorded = _manifest(embedded_run)["calibration"]
    stamp = calibration.stamped(json.loads((embedded_run / "summary.json").read_text())["measurement"])
    result = invoke("report", str(embedded_run))
    assert result.exit_code == 0, result.output
    send, wake = recorded["send_us"], recorded["wake_us"]
    assert (f"send stamp → wire p50 {send['p50_us']} / p99 {send['p99_us']} µs, "
            f"wake-up p50 {wake['p50_us']} / p99 {wake['p99_us']} µs") in said(result)
    assert f"the run's latency figures carry {calibration.CARRIED[stamp]}" in said(result)


def test_compare_sets_calibrations_side_by_side_and_says_when_they_differ(embedded_run: Path, tmp_path: Path):
    again = tmp_path / "again"
    shutil.copytree(embedded_run, again)
    alike = invoke("compare", str(embedded_run), str(again), "--json")
    assert alike.exit_code == 0, alike.output
    (row,) = json.loads(alike.output)["calibrations"]
    p50 = _manifest(embedded_run)["calibration"]["wake_us"]["p50_us"]
    assert row["calibrated"] == 2 and row["wake_p50_us"] == [p50, p50]
    assert not any(note.startswith(calibration.DIFFERS) for note in json.loads(alike.output)["notes"])
    # The copy as a host whose reading task wakes three times slower would have recorded it.
    manifest = _manifest(again)
    manifest["calibration"]["wake_us"]["p50_us"] = 3 * p50 + 10
    (again / "manifest.json").write_text(json.dumps(manifest))
    differ = invoke("compare", str(embedded_run), str(again))
    assert differ.exit_code == 0, differ.output
    assert f"{p50}–{3 * p50 + 10}" in differ.output  # the wake-up p50 column's range
    assert f"{calibration.DIFFERS} by more than 2x between these runs: wake-up p50 {p50} µs ({embedded_run}) " \
           f"against {3 * p50 + 10} µs ({again})" in said(differ)


@pytest.fixture
def calibration_refused(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The engine's calibration failing as on a kernel without timestamps, for this test only."""

    def refuse(messages: int, rate: float) -> dict:
        raise ConnectionError("calibration: the kernel refuses receive timestamps")

    monkeypatch.setattr(engine, "calibrate", refuse)
    calibration._measure.cache_clear()
    yield
    calibration._measure.cache_clear()


def test_a_run_that_cannot_calibrate_completes_and_records_why(tmp_path: Path, calibration_refused: None):
    result = mqttlab.run(None, set=SHORT, out=tmp_path / "run")
    assert result.status == "completed" and result.summary["messages"]["received"] > 0
    assert _manifest(tmp_path / "run")["calibration"]["error"] == "calibration: the kernel refuses receive timestamps"
    shown = invoke("report", str(tmp_path / "run"))
    assert shown.exit_code == 0 and "instrument overhead: not calibrated (calibration: the kernel refuses receive timestamps)" in said(shown)


def test_among_many_runs_the_note_says_where_the_rest_lie_beside_the_two_extremes():
    # Twenty runs at 3 and 4 µs and one at 11 µs: the note names the extremes and that the rest sit together.
    runs = {f"rep-{i}": {"send_us": {"p50_us": 3.0 + i % 2}, "wake_us": {"p50_us": 20.0}} for i in range(20)}
    runs["rep-20"] = {"send_us": {"p50_us": 11.0}, "wake_us": {"p50_us": 20.0}}
    note = calibration.difference(runs)
    assert note is not None and "send stamp → wire p50 3 µs (rep-0) against 11 µs (rep-20)" in note
    assert "(the extremes of 21 runs: their median 4 µs, the middle 90 % 3–4 µs)" in note
    assert "wake-up" not in note
