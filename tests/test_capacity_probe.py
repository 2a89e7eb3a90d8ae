"""One capacity probe against a launched Mosquitto: judged on what its run returned (summary,
result and manifest, nothing read back from disk), the host's open files checked once, and a probe
beyond what the host may open counted as generator-limited, not as the broker's limit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mqttlab import engine
from mqttlab.brokers import get_launcher
from mqttlab.capacity.probe import REFUSED, ProbeSpec, run_probe
from mqttlab.capacity.slo import parse_objectives

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _mosquitto() -> None:
    if not get_launcher("mosquitto").availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")


def test_a_probe_is_judged_on_its_runs_own_figures_and_checks_the_open_files_once(tmp_path: Path, monkeypatch) -> None:
    checked: list[int] = []
    ensure = engine.ensure_open_files

    def counted(connections: int) -> None:
        checked.append(connections)
        ensure(connections)

    monkeypatch.setattr(engine, "ensure_open_files", counted)
    spec = ProbeSpec(None, {"broker": "mosquitto", "publishers.count": 2, "subscribers.count": 3}, (), 2, "1s", "0s")
    probe = run_probe(spec, tmp_path, 100.0, 1, parse_objectives(["loss==0"]))
    assert checked == [5]
    assert probe.completed and not probe.reused and probe.summary["messages"]["sent"] > 0
    on_disk = json.loads((probe.directory / "manifest.json").read_text())
    assert probe.manifest == on_disk and probe.manifest["broker"]["name"] == "mosquitto"


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_a_probe_beyond_the_hosts_open_files_is_generator_limited(tmp_path: Path) -> None:
    # Without CAP_SYS_RESOURCE a hard limit of 1024 files cannot be raised for 3,000 connections:
    # the run stops before its broker starts, and the probe keeps why as refused.json.
    script = ("import json, sys; from pathlib import Path; from mqttlab.capacity.probe import ProbeSpec, run_probe; "
              "spec = ProbeSpec(None, {'broker': 'mosquitto', 'publishers.count': 1}, (), 1, '1s', '0s', knob='subscribers.count'); "
              "probe = run_probe(spec, Path(sys.argv[1]), 3000.0, 1, []); "
              "print(json.dumps({'limited': probe.generator_limited, 'refused': probe.refused, 'met': probe.met, 'directory': str(probe.directory)}))")
    done = subprocess.run(["prlimit", "--nofile=1024:1024", "setpriv", "--bounding-set=-sys_resource", "--", sys.executable, "-c", script, str(tmp_path)],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)
    assert (probe["limited"], probe["refused"], probe["met"]) == (True, False, False)
    kept = json.loads((Path(probe["directory"]) / REFUSED).read_text())
    assert kept["generator_limited_reasons"][0].startswith("this shard opens 3001 connections") and "hard limit 1024" in kept["error"]
    assert sorted(path.name for path in Path(probe["directory"]).iterdir()) == [REFUSED]
