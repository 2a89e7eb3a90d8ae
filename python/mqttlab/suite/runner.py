"""Runs the planned runs of a suite one after another, each with a fresh broker process and a
fresh `mqttlab run` process, and resumes an interrupted suite without repeating finished runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from mqttlab.exits import Exit
from mqttlab.results import MANIFEST
from mqttlab.suite.expand import PlannedRun

RUNS_FILE = "runs.json"
SUITE_COPY = "suite.yaml"
# Exit codes of `mqttlab run` (docs/results.md) that mean "the run finished and wrote results".
FINISHED_CODES = (0, 1, 4)
INTERRUPTED_CODE = Exit.INTERRUPTED


class SuiteConflict(Exception):
    """The suite directory holds runs of a different definition of the suite."""


class SuiteInterrupted(Exception):
    """Ctrl-C: the current run and its broker were stopped; running again resumes."""


@dataclass
class RunRecord:
    """What happened to one planned run."""

    run: PlannedRun
    status: str  # completed / interrupted / broker_lost / failed from the manifest, or "skipped"
    seconds: float
    detail: str = ""
    resumed: bool = False  # finished by an earlier invocation, not repeated


Report = Callable[[int, int, RunRecord], None]
Started = Callable[[int, int, PlannedRun], None]


def finished_status(directory: Path) -> Optional[str]:
    """The status of a complete results directory worth keeping, or None (absent, unfinished,
    interrupted: those are run again)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    status = manifest.get("status")
    return None if status in (None, "interrupted") else str(status)


def prepare_directory(suite_dir: Path, suite_text: str, runs: list[PlannedRun]) -> None:
    """Creates the suite directory, or checks that the one there holds the same suite: a finished
    run whose scenario would now be different must not be mixed with new ones."""
    suite_dir.mkdir(parents=True, exist_ok=True)
    known = _read_runs_file(suite_dir)
    for run in runs:
        before = known.get(run.id)
        if before is not None and before.get("scenario") != run.scenario and finished_status(run.directory(suite_dir)):
            raise SuiteConflict(
                f"{suite_dir}: run {run.id} was made with a different scenario than the suite now gives; "
                "the suite file or --set changed. Use another --out for the changed suite."
            )
    (suite_dir / SUITE_COPY).write_text(suite_text, encoding="utf-8")
    _write_runs_file(suite_dir, runs, {})


def run_suite(
    suite_dir: Path,
    runs: list[PlannedRun],
    *,
    report: Optional[Report] = None,
    python: str = sys.executable,
    dask: Optional[str] = None,
    started: Optional[Started] = None,
) -> list[RunRecord]:
    """Runs every planned run that is not finished yet; with `dask` (a scheduler address) each
    `mqttlab run` spreads its load over that cluster. Raises SuiteInterrupted on Ctrl-C (after
    stopping the current run and broker and recording what is done)."""
    records: dict[str, RunRecord] = {}
    try:
        for index, run in enumerate(runs, start=1):
            directory = run.directory(suite_dir)
            status = finished_status(directory)
            if status is not None:
                record = RunRecord(run, status, 0.0, "finished earlier", resumed=True)
            else:
                if directory.exists():
                    shutil.rmtree(directory)  # an interrupted or unfinished run of ours: start it afresh
                if started is not None:
                    started(index, len(runs), run)
                record = _run_one(run, directory, python, dask)
            records[run.id] = record
            _write_runs_file(suite_dir, runs, records)
            if report is not None:
                report(index, len(runs), record)
    except (SuiteInterrupted, KeyboardInterrupt):
        # Ctrl-C can land anywhere, also after a run wrote its results and before it was recorded
        # (while its broker stops): runs.json takes the status of such a run from its directory.
        _write_runs_file(suite_dir, runs, records)
        raise SuiteInterrupted() from None
    return list(records.values())


def _run_one(run: PlannedRun, directory: Path, python: str, dask: Optional[str] = None) -> RunRecord:
    started = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    options = ["--dask", dask] if dask else []
    # `mqttlab run` launches a fresh broker for the run (inside its emulated network, if any), with
    # the suite's launch settings, and stops it after: the same path as a single run.
    scenario = dict(run.scenario, broker=run.broker)
    if run.transport == "tls":
        scenario["launch"] = dict(scenario.get("launch") or {}, tls=True)
    code = _run_scenario(scenario, run, directory, python, options)
    seconds = time.monotonic() - started
    if code == INTERRUPTED_CODE:
        raise SuiteInterrupted()
    status = finished_status(directory)
    if code in FINISHED_CODES and status is not None:
        return RunRecord(run, status, seconds)
    return RunRecord(run, "failed", seconds, f"mqttlab run exited with code {code}; see {directory / 'run.log'}")


def _run_scenario(scenario: dict[str, Any], run: PlannedRun, directory: Path, python: str, options: list[str]) -> int:
    """`mqttlab run` of `scenario` in a child process writing into `directory`; its exit code.
    The suite serves the metrics of its runs (from their live.json), so the run does not."""
    if (scenario.get("options") or {}).get("metrics"):
        scenario = dict(scenario, options={k: v for k, v in scenario["options"].items() if k != "metrics"})
    with tempfile.TemporaryDirectory(prefix="mqttlab-suite-") as scratch:
        scenario_file = Path(scratch) / f"{run.scenario_name}.yaml"
        scenario_file.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
        command = [python, "-m", "mqttlab", "run", str(scenario_file), "--out", str(directory), "--json", *options]
        return _run_child(command, directory, _time_limit(run))


def _time_limit(run: PlannedRun) -> float:
    """A generous bound on one run: its load phase twice over plus two minutes of setup."""
    from mqttlab.planning import validate_scenario

    try:
        scenario = validate_scenario(run.scenario)
    except Exception:
        return 3600.0
    load = scenario.load.duration or 0.0
    if scenario.publishers.messages and scenario.publishers.rate:
        load = scenario.publishers.messages / float(scenario.publishers.rate)
    return 2 * (load + scenario.load.grace) + 120.0


def _run_child(command: list[str], directory: Path, limit: float) -> int:
    """Runs `mqttlab run` in its own session, so a Ctrl-C reaches only us and we forward it once
    (the child then writes its partial results)."""
    with open(directory / "run.log", "wb") as log, open(directory / "run-output.json", "wb") as out:
        child = subprocess.Popen(command, stdout=out, stderr=log, start_new_session=True, env=_child_env())
        try:
            return child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            log.write(f"\nmqttlab suite: stopped after {limit:.0f} s\n".encode())
            _stop_child(child)
            return -1
        except KeyboardInterrupt:
            _stop_child(child)
            raise SuiteInterrupted() from None


def _stop_child(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGINT)
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _read_runs_file(suite_dir: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((suite_dir / RUNS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {entry["id"]: entry for entry in data.get("runs", []) if isinstance(entry, dict) and "id" in entry}


def _write_runs_file(suite_dir: Path, runs: list[PlannedRun], records: dict[str, RunRecord]) -> None:
    entries = []
    for run in runs:
        entry = run.to_dict()
        entry["directory"] = str(run.directory(suite_dir).relative_to(suite_dir))
        record = records.get(run.id)
        status = finished_status(run.directory(suite_dir))
        entry["status"] = record.status if record is not None else (status or "pending")
        if record is not None and record.detail and not record.resumed:
            entry["detail"] = record.detail
        if record is not None and not record.resumed:
            entry["seconds"] = round(record.seconds, 3)  # for the time left of the rest (live.state.suite_state)
        entries.append(entry)
    text = json.dumps({"runs": entries}, indent=2) + "\n"
    temporary = suite_dir / f".{RUNS_FILE}.tmp"
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(suite_dir / RUNS_FILE)  # never a half-written runs.json
