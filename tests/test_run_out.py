"""Where a run writes (issue 39, 5): `--out` refuses, before anything starts, a folder holding
other files and a folder inside another run's results, so one run is never nested in another;
a new or empty folder, and one a suite prepared for the run, are taken."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from test_results import write_example  # tests/ is on sys.path (no package)

SMALL = ["--pubs", "1", "--subs", "1", "--rate", "20", "--duration", "1s"]


def invoke(*args: str):
    return CliRunner().invoke(cli_app.app, list(args))


def said(result) -> str:
    return " ".join(result.output.split())


def test_a_folder_with_other_files_is_refused_in_one_line(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("mine\n")
    result = invoke("run", *SMALL, "--out", str(tmp_path))
    assert result.exit_code == 2
    assert said(result) == f"error: {tmp_path}: holds other files and no run; a run writes into a new or empty directory (choose another --out)"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


def test_a_folder_inside_a_runs_results_is_refused(tmp_path: Path):
    run = write_example(tmp_path / "run")
    result = invoke("run", *SMALL, "--out", str(run / "again"))
    assert result.exit_code == 2 and f"is inside the results of the run in {run}" in said(result)
    assert not (run / "again").exists()


def test_an_empty_folder_and_one_a_suite_prepared_are_taken(tmp_path: Path):
    empty, prepared = tmp_path / "empty", tmp_path / "prepared"
    empty.mkdir()
    prepared.mkdir()
    (prepared / "run.log").write_text("")  # what `suite run` opens before it starts the run
    for out in (empty, prepared):
        result = invoke("run", *SMALL, "--out", str(out))
        assert result.exit_code in (0, 1), result.output  # 1 only for findings a loaded host can cause
        assert (out / "manifest.json").is_file()
