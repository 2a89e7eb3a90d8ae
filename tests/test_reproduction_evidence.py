"""A reproduction page is made again from the evidence committed beside it, without running
anything, and comes out unchanged: tests/data/reproduction/mini.md was made from a real suite
(mini-suite.yaml: Mosquitto, QoS 0 and 1, three repetitions) by `mqttlab compare … --page`, and
captured.md from a real captured suite (captured-suite.yaml: every run captured with tshark),
whose evidence keeps each capture's figures instead of the capture: made again from those, its
byte counts, round trips and shark fins must be the ones the captures gave."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from mqttlab.reproductions.evidence import CAPTURE_FIGURES, EVIDENCE, RUN_FILES

DATA = Path(__file__).resolve().parent / "data" / "reproduction"
PAGES = ("mini", "captured")


def _kept(name: str) -> list[str]:
    """Every file the page wrote: the page, its tables and figures, its evidence last."""
    folder = sorted(p.name for p in (DATA / name).iterdir() if p.name != EVIDENCE)
    return [f"{name}.md", *(f"{name}/{file}" for file in folder), f"{name}/{EVIDENCE}"]


@pytest.mark.parametrize("name", PAGES)
def test_the_page_is_made_again_from_its_evidence_unchanged(tmp_path, monkeypatch, name):
    work = tmp_path / "reproduction"
    shutil.copytree(DATA, work)
    page = (work / f"{name}.md").read_text(encoding="utf-8")
    command = page.split("in this page's directory):\n\n```\n", 1)[1].split("\n", 1)[0]
    assert command == f"mqttlab compare {name}/{EVIDENCE} --paper {name}.paper.yaml --page {name}.md"
    kept = _kept(name)
    for file in kept[:-1]:
        (work / file).unlink()  # nothing of the old page left to keep by accident
    head, generated = page.split("<!-- made by", 1)
    (work / f"{name}.md").write_text(head + "<!-- made by" + generated.replace("| holds |", "| edited |"),
                                     encoding="utf-8")  # a stale generated part, replaced
    monkeypatch.chdir(work)
    result = CliRunner().invoke(cli_app.app, command.split()[1:], terminal_width=200)
    assert result.exit_code == 0, result.output
    for file in kept:
        if file.endswith(".png"):
            # Pixels depend on the installed matplotlib and its fonts, which a fresh machine may have
            # newer: the figures must be there at the committed size (their bytes are checked for
            # determinism within one installation in test_reproduction_beside).
            assert _png_size(work / file) == _png_size(DATA / file), f"{file} has another size when made again"
            continue
        assert (work / file).read_bytes() == (DATA / file).read_bytes(), f"{file} differs when made again from the evidence"


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[16:24]  # the IHDR chunk's width and height, big-endian
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


def test_the_evidence_holds_the_runs_summaries_and_manifests_and_little_else():
    with tarfile.open(DATA / "mini" / EVIDENCE, "r:xz") as tar:
        names = tar.getnames()
    assert sum(name.endswith("/manifest.json") for name in names) == 6
    assert {name.split("/rep-")[-1].split("/", 1)[-1] for name in names if "/rep-" in name} <= set(RUN_FILES)
    assert not any(name.endswith((".pcap", "e2e_uncorrected.hdr", "connect.hdr", "report.html", CAPTURE_FIGURES)) for name in names)
    assert (DATA / "mini" / EVIDENCE).stat().st_size < 64 * 1024


def test_a_captured_run_s_evidence_keeps_its_capture_s_figures_not_the_capture():
    with tarfile.open(DATA / "captured" / EVIDENCE, "r:xz") as tar:
        names = tar.getnames()
    runs = [name for name in names if name.endswith("/manifest.json")]
    assert len(runs) == 4 and sum(name.endswith(f"/{CAPTURE_FIGURES}") for name in names) == len(runs)
    assert not any(name.endswith((".pcapng", ".pcap", "tshark.log")) for name in names)
    # Its figures, what the page shows of the captures: the shark fin drawn from them, the byte counts judged.
    page = (DATA / "captured.md").read_text(encoding="utf-8")
    assert "(captured/shark-fin-qos0.png)" in page and "(captured/shark-fin-qos2.png)" in page
    assert "| connection-bytes |" in page and "| no-fin |" in page


def test_an_archive_that_is_not_evidence_is_refused_in_one_line(tmp_path):
    bogus = tmp_path / "evidence.tar.xz"
    bogus.write_bytes(b"not xz")
    result = CliRunner().invoke(cli_app.app, ["compare", str(bogus)], terminal_width=200)
    assert result.exit_code == 2 and "not a page's evidence archive" in result.output


def test_a_flag_recorded_under_an_older_rule_is_read_again_by_the_current_one():
    # mini's two flagged runs were flagged by the old rule (p99 send lag over 2 ms); read again
    # from their plan and raw result, a handful of late sends is no evidence, and back-pressure,
    # not measured then, is said to be not recorded rather than zero.
    page = (DATA / "mini.md").read_text(encoding="utf-8")
    section = page.split("### Generator-limited runs, read again by the current rule", 1)[1].split("###", 1)[0]
    assert "| p2p-qos0 | mosquitto | 2026-11-25 | 3 | 2 | 0 | not recorded | not recorded |" in section


REPRODUCTIONS = Path(__file__).resolve().parent.parent / "docs" / "reproductions"
COMMITTED_PAGES = sorted(REPRODUCTIONS.glob("seed00*.md")) + [DATA / f"{name}.md" for name in PAGES]


@pytest.mark.parametrize("page", COMMITTED_PAGES, ids=lambda page: page.stem)
def test_every_committed_page_states_each_verdict_s_regime_and_broker_configuration(page):
    from mqttlab.reproductions.paper_file import load_paper

    paper = page.with_suffix(".paper.yaml") if page.parent == DATA else page.stem.split("-")[0]
    text = page.read_text(encoding="utf-8")
    assert "### Regime and broker configuration of each verdict" in text, f"{page.name} does not say where its verdicts were judged"
    regimes = text.split("### Regime and broker configuration of each verdict", 1)[1].split("\n### ", 1)[0]
    rows = {line.split(" | ", 1)[0].removeprefix("| ") for line in regimes.splitlines() if line.startswith("| ")}
    missing = [claim.id for claim in load_paper(paper).claims if claim.id not in rows]
    assert not missing, f"{page.name}: no regime and configuration for {missing}"


def test_a_publishers_only_run_keeps_its_acknowledgement_histogram_a_delivering_run_its_delivery_one(tmp_path):
    # A write test's latency is its PUBACK time: without that histogram a page made again from the
    # evidence could not give the samples' SD the seed-001 figures show beside the mean.
    import mqttlab
    from mqttlab.reproductions.evidence import evidence_files

    short = {"publishers.count": 1, "publishers.qos": 1, "publishers.rate": 50, "load.duration": "1s", "load.warmup": "0s"}
    mqttlab.run(None, out=tmp_path / "s" / "write", set={**short, "subscribers.count": 0})
    mqttlab.run(None, out=tmp_path / "s" / "read", set={**short, "subscribers.count": 1, "subscribers.qos": 1})
    kept = {name.removeprefix("s0/") for name in evidence_files([tmp_path / "s"]) if name.startswith("s0/") and ".hdr" in name}
    assert "write/histograms/puback.hdr" in kept and "read/histograms/e2e.hdr" in kept, kept
    assert "read/histograms/puback.hdr" not in kept, kept  # compared by its deliveries, not its PUBACKs
