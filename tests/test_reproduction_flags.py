"""A page's verdicts judge by the generator-limited flag as the engine's current rule reads each run
again (reproductions/flags.py), not as the run recorded it. The runs are the committed evidence of
the test page (tests/data/reproduction/mini: a real suite, Mosquitto at QoS 0 and 1): two of its
three QoS 0 runs were flagged by the rule of their day (a p99 send lag over 2 ms: 5 and 1 of 30
sends that late), which the current rule does not flag (it asks for at least 10 such sends)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import mean

from mqttlab.analysis.compare import compare_directories
from mqttlab.reproductions.evidence import EVIDENCE, opened
from mqttlab.reproductions.flags import flag_section
from mqttlab.reproductions.section import attach_paper

DATA = Path(__file__).resolve().parent / "data" / "reproduction"
PAPER = str(DATA / "mini.paper.yaml")


def _qos0_runs(comparison):
    return next(s for s in comparison.scenarios if s.scenario == "p2p-qos0").groups["mosquitto"].runs


def test_a_run_flagged_when_recorded_but_not_by_the_current_rule_enters_the_verdicts():
    with opened(DATA / "mini" / EVIDENCE) as paths:
        comparison = compare_directories(paths)
        section = attach_paper(comparison, paths, PAPER)
    assert section is not None
    runs = _qos0_runs(comparison)
    moved = sorted(run.path.name for run in runs if run.generator_limited_as_recorded and not run.generator_limited)
    assert moved == ["rep-1", "rep-3"]
    # The figure the verdicts read is the mean of all three runs, the two brought in among them.
    row = next(r for r in section.rows if r.figure == "latency-qos0")
    assert row.limited == 0 and row.statistic == "mean of 3 runs" and row.interval is not None
    assert row.ours == mean(run.figures["latency_mean"] for run in runs)
    alone = next(run for run in runs if run.path.name == "rep-2").figures["latency_mean"]
    assert row.ours != alone
    claim = next(c for c in section.claims if c.claim == "qos1-costs-little")
    assert "0.2877 − 0.5482 = -0.2604 ms (95% CI -1.514–0.9926, n = 3 and 3)" in " ".join(claim.evidence)
    assert claim.verdict == "cannot tell"  # with rep-2 alone (n = 3 and 1) it held: the two runs moved it
    # The page says which flag judged and which runs that brought in.
    text = flag_section(section.flags)
    assert "judge by the current rule's flag" in text
    assert "brings into the verdicts 2 runs (p2p-qos0 on mosquitto: rep-1, rep-3), and leaves out no run." in text


def test_a_run_that_cannot_be_read_again_is_judged_by_the_flag_it_recorded(tmp_path):
    with opened(DATA / "mini" / EVIDENCE) as paths:
        copies = [Path(shutil.copytree(path, tmp_path / path.name)) for path in paths]
    # A plan the current engine refuses, as one written before a field it now requires would be.
    plan = next(copies[0].rglob("p2p-qos0/mosquitto/rep-1")) / "plan.json"
    plan.write_text(json.dumps({key: value for key, value in json.loads(plan.read_text()).items() if key != "mqtt"}))
    comparison = compare_directories(copies)
    section = attach_paper(comparison, copies, PAPER)
    assert section is not None
    flags = {run.path.name: run.generator_limited for run in _qos0_runs(comparison)}
    assert flags == {"rep-1": True, "rep-2": False, "rep-3": False}
    row = next(r for r in section.rows if r.figure == "latency-qos0")
    assert row.limited == 1 and row.statistic == "mean of 2 runs"
    text = flag_section(section.flags)
    assert "| p2p-qos0 | mosquitto | 2026-11-25 | 3 | 2 | 0 (1 not read again) |" in text
    assert ("brings into the verdicts 1 run (p2p-qos0 on mosquitto: rep-3), and leaves out no run; 1 run (p2p-qos0 on "
            "mosquitto: rep-1) could not be read again and is judged by the flag recorded.") in text
