"""What a run that fails leaves behind: no directory when it never started, from the command line
or the Python API; a live.json that says "failed" (never "running") when something was worth
keeping; an --out that cannot be written refused before anything starts; a disk that fills keeps
the summary and says incomplete; `report --watch` ends on a run whose process is gone."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cli_runs import SMALL, invoke, said  # tests/ is on sys.path (no package)
from mqttlab.planning import load_scenario


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_run_that_never_started_leaves_no_directory(tmp_path: Path):
    out = tmp_path / "run"
    result = invoke("run", "--broker", f"mqtt://127.0.0.1:{closed_port()}", "--duration", "1s", *SMALL, "--out", str(out))
    assert result.exit_code == 3 and not out.exists()


def test_nor_from_the_python_api(tmp_path: Path):
    import mqttlab
    from mqttlab.session import RunFailed

    out = tmp_path / "run"
    with pytest.raises(RunFailed):
        mqttlab.run(broker=f"mqtt://127.0.0.1:{closed_port()}", set={"load.duration": "1s", "publishers.count": 1}, out=out)
    assert not out.exists()


def test_a_failed_run_that_keeps_something_says_failed_not_running(tmp_path: Path):
    from mqttlab.live.state import read_live
    from mqttlab.session import RunFailed, execute

    out = tmp_path / "run"
    (out / "broker").mkdir(parents=True)
    (out / "broker" / "broker.log").write_text("a launched broker's log, worth keeping\n")
    scenario = load_scenario(None, overrides={"broker": f"mqtt://127.0.0.1:{closed_port()}", "load.duration": "1s", "publishers.count": 1})
    with pytest.raises(RunFailed):
        execute(scenario, out)
    live = read_live(out)
    assert live is not None and live["status"] == "failed" and "cannot connect" in live["error"]
    watched = invoke("report", "--watch", str(out), "--interval", "0.1")
    assert watched.exit_code == 4 and "failed before its results were written: cannot connect" in said(watched)


def test_report_watch_ends_on_a_run_whose_process_is_gone(tmp_path: Path):
    from mqttlab.live.state import write_live

    write_live(tmp_path, {"format": "mqttlab-live/1", "status": "running", "updated_unix": 1.0, "snapshot": {}, "progress": None})
    watched = invoke("report", "--watch", str(tmp_path), "--interval", "0.1")
    assert watched.exit_code == 4 and "stopped updating its live.json" in said(watched)
    assert "report --watch" not in invoke("report", str(tmp_path)).output  # stale, not "still under way"


@pytest.mark.parametrize("where", ["/sys/kernel/mqttlab-x", "read-only"])
def test_an_out_that_cannot_be_written_is_refused_before_anything_starts(tmp_path: Path, where: str):
    import os
    import subprocess

    if where == "read-only":
        if os.geteuid() != 0:
            pytest.skip("mounting a read-only tmpfs needs root")
        mount = tmp_path / "ro"
        mount.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(mount)], check=True)
        where = str(mount / "run")
    try:
        result = invoke("run", "--broker", "mosquitto", "--out", where)
    finally:
        if where.startswith(str(tmp_path)):
            subprocess.run(["umount", str(tmp_path / "ro")], check=True)
    assert result.exit_code == 2
    assert said(result).startswith(f"error: --out {where}: cannot write the results there (")
    assert "Traceback" not in result.output and "mosquitto" not in said(result).split("error:")[0]


def test_a_disk_that_fills_while_writing_keeps_the_summary_and_says_incomplete(tmp_path: Path):
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a 48 KiB tmpfs needs root")
    disk = tmp_path / "small"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(disk)], check=True)
    try:
        out = disk / "run"
        result = invoke("run", "--duration", "2s", "--pubs", "2", "--subs", "2", "--rate", "20", "--out", str(out))
        assert result.exit_code == 4
        text = said(result)
        assert "status: completed" in text and "e2e" in text  # the figures are shown all the same
        assert "No space left on device; the figures above were measured but not all kept" in text
        assert (out / "summary.json").is_file() and not (out / "manifest.json").exists()
        for command in (["report", str(out)], ["report", "--watch", str(out), "--interval", "0.1"]):
            reported = invoke(*command)
            assert reported.exit_code == 4 and "could not all be written" in said(reported)
    finally:
        subprocess.run(["umount", str(disk)], check=True)
