"""A reproduction page is made again from the evidence committed beside it, without running
anything, and comes out unchanged: tests/data/reproduction/mini.md was made from a real suite
(mini-suite.yaml: Mosquitto, QoS 0 and 1, three repetitions) by `mqttlab compare … --page`."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from mqttlab.reproductions.evidence import EVIDENCE, RUN_FILES

cli_app._register()
DATA = Path(__file__).resolve().parent / "data" / "reproduction"
BESIDE = tuple(f"mini/beside-{claim}.png" for claim in ("qos1-costs-little", "rate-kept", "latency-as-stated", "looks-fine"))
KEPT = ("mini.md", "mini/paper_vs_ours.csv", "mini/paper_claims.csv", "mini/summary.csv", *BESIDE, f"mini/{EVIDENCE}")


def test_the_page_is_made_again_from_its_evidence_unchanged(tmp_path, monkeypatch):
    work = tmp_path / "reproduction"
    shutil.copytree(DATA, work)
    page = (work / "mini.md").read_text(encoding="utf-8")
    command = page.split("in this page's directory):\n\n```\n", 1)[1].split("\n", 1)[0]
    assert command == f"mqttlab compare mini/{EVIDENCE} --paper mini.paper.yaml --page mini.md"
    for name in KEPT[:-1]:
        (work / name).unlink()  # nothing of the old page left to keep by accident
    (work / "mini.md").write_text(page.split("<!-- made by")[0] + "<!-- made by" + page.split("<!-- made by")[1].replace(
        "| holds |", "| edited |"), encoding="utf-8")  # a stale generated part, replaced
    monkeypatch.chdir(work)
    result = CliRunner().invoke(cli_app.app, command.split()[1:], terminal_width=200)
    assert result.exit_code == 0, result.output
    for name in KEPT:
        if name in BESIDE:
            # Pixels depend on the installed matplotlib and its fonts, which a fresh machine may have
            # newer: the figures must be there at the committed size (their bytes are checked for
            # determinism within one installation in test_reproduction_beside).
            assert _png_size(work / name) == _png_size(DATA / name), f"{name} has another size when made again"
            continue
        assert (work / name).read_bytes() == (DATA / name).read_bytes(), f"{name} differs when made again from the evidence"


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[16:24]  # the IHDR chunk's width and height, big-endian
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


def test_the_evidence_holds_the_runs_summaries_and_manifests_and_little_else():
    with tarfile.open(DATA / "mini" / EVIDENCE, "r:xz") as tar:
        names = tar.getnames()
    assert sum(name.endswith("/manifest.json") for name in names) == 6
    assert {name.split("/rep-")[-1].split("/", 1)[-1] for name in names if "/rep-" in name} <= set(RUN_FILES)
    assert not any(name.endswith((".pcap", "e2e_uncorrected.hdr", "connect.hdr", "report.html")) for name in names)
    assert (DATA / "mini" / EVIDENCE).stat().st_size < 64 * 1024


def test_an_archive_that_is_not_evidence_is_refused_in_one_line(tmp_path):
    bogus = tmp_path / "evidence.tar.xz"
    bogus.write_bytes(b"not xz")
    result = CliRunner().invoke(cli_app.app, ["compare", str(bogus)], terminal_width=200)
    assert result.exit_code == 2 and "not a page's evidence archive" in result.output
