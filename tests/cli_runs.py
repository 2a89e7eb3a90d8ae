"""What the tests that drive `mqttlab` as a user types it share (tests/ is on sys.path): the
command in this process or as a child, its output as read, and a real run as small as can still
mean something."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from mqttlab.cli import app as cli_app

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--pubs", "1", "--subs", "1", "--rate", "20"]  # a real run, as small as can still mean something


def invoke(*args: str):
    return CliRunner().invoke(cli_app.app, list(args))


def said(result) -> str:
    """The command's output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def summary_of(directory: Path) -> dict:
    return json.loads((directory / "summary.json").read_text())


def mqttlab(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """`python -m mqttlab ARGS` in a child process, with this tree's package."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mqttlab", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def run_scenario(directory: Path, text: str, *args: str, timeout: float = 90) -> tuple[subprocess.CompletedProcess, Path]:
    """`mqttlab run` of the scenario file `text` (written in `directory`) into `directory`/run, in
    a child process: its outcome, and the results directory."""
    scenario = directory / "scenario.yaml"
    scenario.write_text(text)
    out = directory / "run"
    return mqttlab("run", str(scenario), "--out", str(out), *args, timeout=timeout), out
