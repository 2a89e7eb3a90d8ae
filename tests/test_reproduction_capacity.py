"""A reproduction page judges a claim about saturation from `mqttlab capacity` searches given
beside the runs: the paper's `capacity:` figures read each search's capacity with its bracket,
rankings order capacities by their brackets, the page lists the searches and says for each
verdict which regime its numbers come from, and the evidence keeps the searches' reports, not
their probes, so that the page is made again from it unchanged."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.brokers import get_launcher
from mqttlab.cli import app as cli_app
from mqttlab.reproductions.paper_figures import BRACKET, FigureRow
from mqttlab.reproductions.paper_file import Check
from mqttlab.reproductions.verdicts import _best

runner = CliRunner()

PAPER = """seed: C
title: a made-up paper with a claim about capacity
figures:
- {id: qos0-capacity, quote: QoS 0, where: here, kind: throughput, value: null, unit: msg/s, exact: false,
   reproduce: {capacity: cap-qos0, broker: mosquitto}}
- {id: qos1-capacity, quote: QoS 1, where: here, kind: throughput, value: null, unit: msg/s, exact: false,
   reproduce: {capacity: cap-qos1, broker: mosquitto}}
- {id: latency, quote: fast, where: here, kind: latency_mean, value: 1, unit: ms, exact: false,
   reproduce: {scenario: "p2p-*", metric: latency_mean, tolerance: 100}}
claims:
- id: qos1-costs
  text: QoS 1 carries at most as much as QoS 0.
  figures: [qos1-capacity, qos0-capacity]
  check: [{ratio: [qos1-capacity, qos0-capacity], within: [0, 1.5]}]
- id: fast
  text: Latency is low.
  figures: [latency]
  check: [{agree: [latency]}]
"""


def _capacity_row(broker: str, low: float, high: float) -> FigureRow:
    return FigureRow(figure=f"capacity-{broker}", quote="", kind="throughput", unit="msg/s", exact=False, paper=None, ours=low,
                     status="no number in the paper", broker=broker, interval=[low, high], interval_kind=BRACKET)


def test_capacities_are_ranked_by_their_brackets_disjoint_or_not():
    rows = {"capacity-a": [_capacity_row("a", 3000, 3300)], "capacity-b": [_capacity_row("b", 1300, 1400)],
            "capacity-c": [_capacity_row("c", 3100, 3400)]}
    ahead, lines = _best(Check(best="capacity-a", among=["capacity-a", "capacity-b"]), rows)
    assert ahead is True and lines == ["a 3000 above b 1300 (brackets 3000–3300 and 1300–1400)"]
    assert _best(Check(best="capacity-b", among=["capacity-a", "capacity-b"]), rows)[0] is False
    lowest, lines = _best(Check(best="capacity-b", among=["capacity-a", "capacity-b"], higher_is_better=False), rows)
    assert lowest is True and lines == ["b 1300 below a 3000 (brackets 1300–1400 and 3000–3300)"]  # said as it lies, not "ahead"
    overlapping, lines = _best(Check(best="capacity-a", among=["capacity-a", "capacity-c"]), rows)
    assert overlapping == "cannot tell" and "cannot tell from c 3100" in lines[0]


def test_a_page_judges_capacities_beside_runs_and_is_made_again_from_its_evidence(tmp_path: Path, monkeypatch):
    if not get_launcher("mosquitto").availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")
    searches = tmp_path / "searches"
    for qos in (0, 1):
        # Far below Mosquitto's capacity: each search ends open above its --max-rate, a bracket [max, ∞).
        result = runner.invoke(cli_app.app, ["capacity", "-b", "mosquitto", "-P", "2", "-S", "2", "-q", str(qos), "--slo", "loss==0",
                                             "--start", "200", "--max-rate", "200", "--repeats", "1", "--probe-duration", "1s",
                                             "--warmup", "0s", "--set", "load.grace=1s", "-o", str(searches / f"cap-qos{qos}")])
        assert result.exit_code in (0, 1), result.output
    run = tmp_path / "runs" / "run"
    result = runner.invoke(cli_app.app, ["run", "-b", "mosquitto", "-P", "2", "-S", "2", "--rate", "20", "--duration", "2s", "-o", str(run)])
    assert result.exit_code == 0, result.output
    statuses = {json.loads(r.read_text())["status"] for r in searches.rglob("capacity.json")}
    if statuses != {"above_max"}:
        pytest.skip(f"the host's generator stopped a search (busy host): {statuses}")
    work = tmp_path / "page"
    work.mkdir()
    (work / "c.paper.yaml").write_text(PAPER, encoding="utf-8")
    monkeypatch.chdir(work)
    made = runner.invoke(cli_app.app, ["compare", str(run), str(searches), "--paper", "c.paper.yaml", "--page", "c.md"], terminal_width=200)
    assert made.exit_code == 0, made.output
    page = (work / "c.md").read_text(encoding="utf-8")
    assert "### The capacity searches" in page and "| cap-qos0 | mosquitto | 0 | loss==0, dropped==0 | 200 | – |" in page
    assert "| qos1-costs | cannot tell | cap-qos0 (mosquitto); cap-qos1 (mosquitto) | – |" in page  # [200, ∞) / [200, ∞)
    (fast,) = [line for line in page.splitlines() if line.startswith("| fast | ") and line.count("|") == 5]
    # The short run on a busy host may be flagged generator-limited: then it judges nothing and is not named.
    assert fast in ("| fast | holds | – | p2p-2-2-qos1-20ps (mosquitto) |", "| fast | not judged: generator-limited runs only | – | – |")
    with tarfile.open(work / "c" / "evidence.tar.xz", "r:xz") as tar:
        names = tar.getnames()
    assert sum(name.endswith("/capacity.json") for name in names) == 2
    assert sum(name.endswith("/manifest.json") for name in names) == 1  # the run's; no probe of a search
    again = runner.invoke(cli_app.app, ["compare", "c/evidence.tar.xz", "--paper", "c.paper.yaml", "--page", "c.md"], terminal_width=200)
    assert again.exit_code == 0, again.output
    assert (work / "c.md").read_text(encoding="utf-8") == page
