"""The suite report's "paper vs this run" section (issue 13): a seed's paper figures beside ours,
the verdicts on its claims, and exact figures that differ flagged with the reason.

Two real short round-trip runs against the embedded broker, laid out as seed 002's suite directory
(suite.yaml names the suite, runs/<scenario>/<broker>/rep-1): one with the seed's 42-byte topic,
whose PUBLISH overhead is the paper's 46 B, and one with a 3-byte topic, whose overhead is not.
Both are captured where tshark and root are here: the byte figures are measured from the captures,
with the figure computed from the protocol beside them as "expected"."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
import yaml
from typer.testing import CliRunner

from mqttlab.netem.capture import tshark_path

from mqttlab.analysis import compare_directories
from mqttlab.reproductions.paper_figures import AGREES, CANNOT_TELL, DIFFERS, LIMITED, MATCHES, NOT_HERE, FigureRow
from mqttlab.reproductions.section import attach_paper, paper_name_for, paper_section
from mqttlab.reproductions.verdicts import DOES_NOT_HOLD, HOLDS, NOT_MEASURED_HERE, _check, judge_claim, rule_text
from mqttlab.reproductions.paper_file import Check, Claim, PaperFileError, load_paper, paper_path, validate_paper
from mqttlab.cli import app as cli_app
from mqttlab.reproductions.paper_section import write_report_with_paper

app = cli_app.app

CAPTURE = tshark_path() is not None and os.geteuid() == 0
needs_capture = pytest.mark.skipif(not CAPTURE, reason="the byte figures are measured from captures: tshark and root")
SEED_TOPIC = "mqttlab/seed002/round-trip/publisher-%i/msg"  # 42 bytes, as the seed's
RUNS = {
    # scenario name (as the seed002 suite names it) -> topic
    "full-bandwidth-qos0-p1B-r10": SEED_TOPIC,
    "full-bandwidth-qos0-p1B-r100": "t/%i",  # 3 bytes: 43 B less than the paper's overhead
}


def _scenario(name: str, topic: str) -> dict:
    rate = int(name.rsplit("-r", 1)[1])
    return {
        "name": name,
        "publishers": {"count": 1, "topic": topic, "reply_filter": topic + "/rtt", "qos": 0, "payload": "1B",
                       "measure": "topic-sequence", "rate": rate},
        "subscribers": {"count": 1, "filters": [topic], "echo_topic": topic + "/rtt", "qos": 0},
        "load": {"duration": "1.5s", "warmup": "0.5s", "grace": "1s"},
        "options": {"capture": CAPTURE},
    }


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("paper") / "seed002"
    (root / "runs").mkdir(parents=True)
    (root / "suite.yaml").write_text(yaml.safe_dump({"name": "seed002", "brokers": ["embedded"]}))
    for name, topic in RUNS.items():
        source = root.parent / f"{name}.yaml"
        source.write_text(yaml.safe_dump(_scenario(name, topic)))
        done = subprocess.run([sys.executable, "-m", "mqttlab", "run", str(source), "--out", str(root / "runs" / name / "embedded" / "rep-1"),
                               "--json"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def report(suite_dir, tmp_path_factory) -> Path:
    comparison = compare_directories([suite_dir])
    assert attach_paper(comparison, [suite_dir]) is not None  # found from suite.yaml's name
    out = tmp_path_factory.mktemp("report")
    write_report_with_paper(comparison, out, png=False)
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_suite_names_its_paper(suite_dir):
    assert paper_name_for([suite_dir]) == "seed002"
    assert paper_name_for([suite_dir / "runs"]) == "seed002"


@needs_capture
def test_publish_overhead_is_measured_from_the_capture_with_the_computed_figure_beside_it(suite_dir):
    section = paper_section("seed002", compare_directories([suite_dir]))
    rows = {row.scenario: row for row in section.rows if row.figure == "publish-overhead"}
    same, other = rows["full-bandwidth-qos0-p1B-r10"], rows["full-bandwidth-qos0-p1B-r100"]
    assert (same.paper, same.ours, same.expected, same.status, same.flagged) == (46, 46, 46, MATCHES, False)
    assert (other.ours, other.expected, other.status, other.flagged) == (7, 7, DIFFERS, True)
    assert "measured from the run's packet capture" in other.source
    assert "the topic differs: 3 B here, 42 B in the paper" in other.reason
    assert [row for row in section.flagged if row.figure == "publish-overhead"] == [other]
    # The engine's CONNECT carries a 13-byte client id: 27 B, not the paper's 25 B, and the row says so.
    connect = [row for row in section.flagged if row.figure == "connect-mqtt-bytes"]
    assert connect and all(row.ours == 27 == row.expected and "client id 13 B" in row.reason for row in connect)
    # QoS 0: no acknowledgement at the MQTT layer; on the wire what the capture saw, the paper's
    # one 66-byte TCP ACK per PUBLISH beside it as expected.
    qos0 = [row for row in section.rows if row.figure == "overhead-qos0"]
    assert len(qos0) == 2 and all(row.ours["mqtt"] == 0 and row.expected == {"mqtt": 0, "mqtt_tcp": 66} for row in qos0)
    verdicts = {claim.claim: claim for claim in section.claims}
    # One of the two runs has another topic: the claim "46 B in this setup" does not hold for all.
    assert verdicts["publish-overhead-46"].verdict == DOES_NOT_HOLD
    assert any("ours 7" in line for line in verdicts["publish-overhead-46"].evidence)
    wire = all(row.ours["mqtt_tcp"] == 66 for row in qos0)
    assert (verdicts["qos-overhead-fixed"].verdict == HOLDS) == wire
    assert verdicts["loss-25-aborts"].verdict == NOT_MEASURED_HERE


@needs_capture
def test_report_shows_paper_figures_ours_and_verdicts_in_html_csv_and_json(report, suite_dir):
    html = (report / "report.html").read_text(encoding="utf-8")
    assert "The paper vs this run" in html
    assert "exact figure(s) differ from the paper" in html and 'class="worse flagged">publish-overhead' in html
    assert "the topic differs: 3 B here, 42 B in the paper" in html
    for verdict in (HOLDS, DOES_NOT_HOLD, NOT_MEASURED_HERE):
        assert f">{verdict}</span>" in html

    rows = _rows(report / "paper_vs_ours.csv")
    overhead = {row["scenario"]: row for row in rows if row["figure"] == "publish-overhead"}
    assert overhead["full-bandwidth-qos0-p1B-r10"]["paper"] == "46" and overhead["full-bandwidth-qos0-p1B-r10"]["ours"] == "46"
    assert overhead["full-bandwidth-qos0-p1B-r10"]["expected"] == "46"
    assert overhead["full-bandwidth-qos0-p1B-r100"]["flagged"] == "True"
    rtt = [row for row in rows if row["figure"] == "rtt-by-qos-and-payload"]
    assert len(rtt) == 2 and all(float(row["ours"]) > 0 for row in rtt)  # our round trip (ms), one row per configuration
    assert any(row["status"] == NOT_HERE and row["reason"] for row in rows)
    claims = {row["claim"]: row["verdict"] for row in _rows(report / "paper_claims.csv")}
    assert claims["qos-overhead-fixed"] in (HOLDS, DOES_NOT_HOLD)  # measured: judged (test above)
    # Measured rows judge only from runs this host kept on schedule (a loaded host flags them).
    limited = [json.loads(path.read_text())["generator_limited"] for path in suite_dir.glob("runs/**/summary.json")]
    assert claims["rtt-milliseconds"] == (LIMITED if limited and all(limited) else HOLDS)

    paper = json.loads((report / "comparison.json").read_text())["paper"]
    assert paper["seed"] == "002" and paper["coverage"]["figures"] == 56  # the paper file's figures, bundling counts among them
    flagged = [row for row in paper["figures"] if row["flagged"]]
    assert ("publish-overhead", 46, 7) in [(row["figure"], row["paper"], row["ours"]) for row in flagged]
    assert ("publish-overhead", 46, 46) not in [(row["figure"], row["paper"], row["ours"]) for row in flagged]


@needs_capture
def test_compare_prints_the_paper_table_with_an_explicit_paper(suite_dir):
    result = CliRunner().invoke(app, ["compare", str(suite_dir / "runs"), "--paper", "seed002"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "The paper (seed 002) vs this run" in result.output
    assert "⚑ publish-overhead: ours 7 ≠ the paper's 46" in result.output
    assert "publish-overhead-46" in result.output and DOES_NOT_HOLD in result.output


@needs_capture
def test_compare_writes_a_reproduction_page_and_keeps_the_hand_written_text(suite_dir, tmp_path):
    (suite_dir / "invocations.json").write_text(json.dumps([{"command": "mqttlab suite run seed002 -n 1", "runs": 2, "at": "2026-11-23T10:00:00+00:00"}]))
    page = tmp_path / "reproductions" / "seed002.md"
    result = CliRunner().invoke(app, ["compare", str(suite_dir), "--page", str(page)], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Seed 002: ")
    assert "mqttlab suite run seed002 -n 1" in text and "Host: " in text and "2 runs over 2 configurations" in text
    # Paper, ours (measured), the computed figure as expected and status side by side; the differing
    # exact figure flagged with its reason.
    assert "| figure | where | paper | ours | expected (computed) | ours/paper | status | rule |" in text
    assert "| publish-overhead | full-bandwidth-qos0-p1B-r10, rumqttd | 46 bytes | 46 bytes (one run) | 46 bytes | 1 | matches | equal (exact) |" in text
    assert "⚑ **publish-overhead**: ours 7 ≠ the paper's 46" in text and "| ⚑ differs |" in text
    assert "| publish-overhead-46 |" in text and f"| {DOES_NOT_HOLD} |" in text and f"| {HOLDS} |" in text
    # One run each, marked "⚑ all" where a busy host flagged it generator-limited; flagged runs are
    # left out of the plots.
    flagged = {name: json.loads((suite_dir / "runs" / name / "embedded" / "rep-1" / "summary.json").read_text())["generator_limited"]
               for name in RUNS}
    runs_cell = "1 ⚑ all" if flagged["full-bandwidth-qos0-p1B-r10"] else "1"
    assert "### Our figures" in text and f"| full-bandwidth-qos0-p1B-r10 | rumqttd | {runs_cell} |" in text
    assert {"paper_vs_ours.csv", "paper_claims.csv", "summary.csv"} <= {f.name for f in (page.parent / "seed002").glob("*.csv")}
    figures = sorted(f.name for f in (page.parent / "seed002").glob("*.png"))
    assert ("latency_p50.png" in figures) == (not all(flagged.values())) and "latency_max.png" not in figures
    assert all(f"](seed002/{name})" in text for name in figures)
    # Made again: the generated part is replaced, what was written outside it stays.
    page.write_text(text.replace("To be written after reading the tables above.", "The topic of r100 is short on purpose."))
    result = CliRunner().invoke(app, ["compare", str(suite_dir), "--page", str(page)], terminal_width=200)
    assert result.exit_code == 0, result.output
    again = page.read_text(encoding="utf-8")
    assert "The topic of r100 is short on purpose." in again and again.count("### Our figures") == 1


def test_a_page_needs_a_paper(tmp_path, suite_dir):
    runs_only = tmp_path / "runs"
    runs_only.symlink_to(suite_dir / "runs")
    result = CliRunner().invoke(app, ["compare", str(runs_only), "--page", str(tmp_path / "p.md")], terminal_width=200)
    assert result.exit_code == 2 and "--page needs a paper" in result.output


def test_compare_names_an_unknown_paper(suite_dir):
    result = CliRunner().invoke(app, ["compare", str(suite_dir), "--paper", "seed009"])
    assert result.exit_code == 2
    assert "--paper: no paper file 'seed009'" in result.output


def test_every_builtin_paper_file_is_valid_and_maps_every_figure():
    for n in range(5):
        paper = load_paper(f"seed00{n}")
        assert all(figure.reproduce is not None for figure in paper.figures)


def test_a_bad_paper_file_reports_every_problem_naming_the_field():
    data = yaml.safe_load(paper_path("seed002").read_text())
    data["figures"][0]["reproduce"] = {"scenario": "x-*", "metric": "speed"}
    del data["figures"][1]["reproduce"]
    data["claims"][0]["check"] = [{"agree": ["no-such-figure"]}]
    with pytest.raises(PaperFileError) as raised:
        validate_paper(data, "seed002.paper.yaml")
    problems = raised.value.problems
    first, second = data["figures"][0]["id"], data["figures"][1]["id"]
    assert any(p.startswith(f"figures[0] ({first}).reproduce") and "metric: unknown 'speed'" in p for p in problems)
    assert any(p.startswith(f"figures[1] ({second}).reproduce") and "required" in p.lower() for p in problems)
    # shape problems come first; the ids claims refer to are checked once the shape is right
    data["figures"][0]["reproduce"] = {"not_here": "test"}
    data["figures"][1]["reproduce"] = {"not_here": "test"}
    with pytest.raises(PaperFileError) as raised:
        validate_paper(data, "seed002.paper.yaml")
    assert raised.value.problems == [f"claims[0] ({data['claims'][0]['id']}).check[0]: no figure 'no-such-figure'"]


def _row(figure: str, scenario: str, value: float) -> FigureRow:
    return FigureRow(figure=figure, quote="", kind="rtt", unit="ms", exact=False, paper=None, ours=value, status="no number in the paper",
                     scenario=scenario, broker="mosquitto")


def test_a_trend_is_judged_configuration_by_configuration_along_one_axis():
    rows = {"rtt": [
        _row("rtt", "full-bandwidth-qos0-p1KB-r1", 0.3), _row("rtt", "full-bandwidth-qos1-p1KB-r1", 0.4),
        _row("rtt", "full-bandwidth-qos2-p1KB-r1", 0.5),  # rises
        _row("rtt", "full-bandwidth-qos0-p1KB-r10", 0.3), _row("rtt", "full-bandwidth-qos1-p1KB-r10", 0.6),
        _row("rtt", "full-bandwidth-qos2-p1KB-r10", 0.5),  # does not
        _row("rtt", "full-bandwidth-qos0-p1MB-r1", 5.0), _row("rtt", "full-bandwidth-qos1-p1MB-r1", 5.4),
        _row("rtt", "full-bandwidth-qos2-p1MB-r1", 5.2),
    ]}  # fmt: skip
    rises = Check(trend="rises", figures=["rtt"], along=["qos0", "qos1", "qos2"], at_least=0.5)
    ok, lines = _check(rises, rows)
    assert ok is False  # 1 of 3 configurations rise: under half
    assert lines[0] == "rtt: rises along qos0 → qos1 → qos2 in 1 of 3 configurations (33%; 50% asked)"
    assert "full-bandwidth-*-p1KB-r10 (mosquitto): 0.3 → 0.6 → 0.5 ✗" in lines
    # Narrowed to 1 KB, one of two rises: half, as asked.
    assert _check(rises.model_copy(update={"where": "full-bandwidth-*-p1KB-*"}), rows)[0] is True
    # Equal within 10 % at 1 MB, not within 5 %.
    flat = Check(trend="flat", figures=["rtt"], along=["qos0", "qos1", "qos2"], where=["*-p1MB-*"], tolerance=1.1)
    assert _check(flat, rows)[0] is True
    assert _check(flat.model_copy(update={"tolerance": 1.05}), rows)[0] is False


def test_a_verdict_names_only_the_rows_its_judged_conditions_read():
    # The regime table names where a verdict's numbers come from: the rows a condition's `where`
    # keeps, and none of a condition left unjudged because its runs were generator-limited.
    rows = {"rtt": [_row("rtt", "full-bandwidth-qos0-p1KB-r1", 0.3), _row("rtt", "full-bandwidth-qos1-p1KB-r1", 0.4),
                    _row("rtt", "full-bandwidth-qos2-p1KB-r1", 0.5),  # not on the trend's axis: not read
                    _row("rtt", "full-bandwidth-qos0-p1MB-r1", 5.0), _row("rtt", "full-bandwidth-qos1-p1MB-r1", 5.4)],
            "loss": [_row("loss", "s12-mqtt-sn", 50.0)]}
    rows["loss"][0].status = LIMITED
    claim = Claim(id="c", text="t", figures=["rtt", "loss"], check=[
        Check(trend="rises", figures=["rtt"], along=["qos0", "qos1"], where="*-p1KB-*"),
        Check(figure="loss", within=[10.0, 100.0])])
    verdict = judge_claim(claim, rows)
    assert [outcome for _, outcome, _ in verdict.conditions] == [HOLDS, LIMITED]
    assert verdict.judged_rows == [("rtt", "full-bandwidth-qos0-p1KB-r1", "mosquitto"), ("rtt", "full-bandwidth-qos1-p1KB-r1", "mosquitto")]


def test_a_trend_axis_value_is_a_whole_part_of_the_scenario_name():
    rows = {"loss": [_row("loss", "loss-1-qos0-p10KB-r1", 2.0), _row("loss", "loss-10-qos0-p10KB-r1", 60.0),
                     _row("loss", "loss-20-qos0-p10KB-r1", 40.0)]}  # fmt: skip
    # loss-1 is not read into loss-10 or loss-20: three values, and 60 → 40 breaks the rise.
    ok, lines = _check(Check(trend="rises", figures=["loss"], along=["loss-1", "loss-10", "loss-20"]), rows)
    assert ok is False and "*-qos0-p10KB-r1 (mosquitto): 2 → 60 → 40 ✗" in lines
    assert _check(Check(trend="rises", figures=["loss"], along=["loss-1", "loss-10"]), rows)[0] is True
    assert _check(Check(trend="rises", figures=["loss"], along=["loss-5", "loss-50"]), rows)[0] is None  # not measured


def test_a_trend_needs_figures_and_an_axis():
    for bad in ({"trend": "rises", "figures": ["rtt"]}, {"trend": "rises", "along": ["a", "b"]},
                {"figures": ["rtt"], "along": ["a", "b"]}, {"figure": "rtt", "within": [0, 1], "trend": "flat", "figures": ["rtt"], "along": ["a", "b"]},
                {"agree": ["rtt"], "where": "x-*"}):  # fmt: skip
        with pytest.raises(ValueError):
            Check(**bad)


def test_seed000_tables_from_an_smc_paper_directory(tmp_path):
    """Seed 000 has no suite: `mqttlab compare --paper seed000 DIR` reads `smc paper`'s tables.
    The directory is written by hand in the shape smc/paper.py writes (its pipeline takes minutes)."""
    smc = tmp_path / "smc"
    (smc / "mosquitto" / "learn").mkdir(parents=True)
    (smc / "paper.json").write_text(json.dumps({"learn": {"mosquitto": {"r_squared_ols": 0.61}}}))
    (smc / "table2-monte-carlo-time.csv").write_text("profile,broker,model,clients,samples,seconds\nUP2,mosquitto,paper,50,1060,3.5\n"
                                                     "UP1,mosquitto,paper,50,1060,0.5\n")
    (smc / "table3-4-sprt.csv").write_text(
        "profile,broker,threshold_ms,clients,H0,H1,result,samples,time_s,system\n"
        "UP1,mosquitto,30.0,50,0.9,1.0,H1,44.0,120.0,\n"
        "UP1,mosquitto,30.0,70,0.87,0.97,H1,60.0,200.0,\n")
    (smc / "predictions.csv").write_text("broker,profile,model,clients,threshold_ms,p\nmosquitto,UP1,paper,50,30.0,0.99\n")
    (smc / "mosquitto" / "learn" / "coefficients.csv").write_text(
        "term,Estimate,Std. Error,t value,Pr(>|t|)\nActiveMsgs,1400.0,4.0,350.0,0.0\n")
    result = CliRunner().invoke(app, ["compare", str(smc), "--paper", "seed000", "--out", str(tmp_path / "out")], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = {(row["figure"]): row for row in _rows(tmp_path / "out" / "paper_vs_ours.csv")}
    assert rows["chernoff-samples"]["status"] == MATCHES and rows["chernoff-samples"]["ours"] == "1060"
    # A row of Table 3 is a measurement on a broker (exact: false); the paper's time is not compared with ours.
    assert rows["sprt-up1-t30-c50-mosquitto"]["status"] == AGREES and rows["sprt-up1-t30-c50-mosquitto"]["scenario"] == "UP1-t30-c50"
    # Its reproduction page: the command on record, the tables as Markdown, no summary PNGs (no runs), the paper beside ours.
    (smc / "invocations.json").write_text(json.dumps([{"command": "mqttlab smc paper --cases 30", "at": "2026-11-23T10:00:00+00:00"}]))
    page = tmp_path / "pages" / "seed000.md"
    result = CliRunner().invoke(app, ["compare", str(smc), "--paper", "seed000", "--page", str(page)], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    assert "mqttlab smc paper --cases 30    # 2026-11-23T10:00:00+00:00\n" in text
    chernoff = [line for line in text.splitlines() if line.startswith("| chernoff-samples |")]
    assert len(chernoff) == 1 and chernoff[0].endswith("| matches | equal (exact) |") and chernoff[0].count("1060") == 2, chernoff
    files = sorted(f.name for f in (page.parent / "seed000").iterdir())
    beside = [name for name in files if name.startswith("beside-")]  # the paper drawn beside ours, per claim measured
    assert [name for name in files if name not in beside] == ["evidence.tar.xz", "paper_claims.csv", "paper_vs_ours.csv"]
    assert "beside-sprt-cheaper-than-mc.png" in beside and all(f"(seed000/{name})" in text for name in beside)
    # Made again from its evidence (the smc directory's tables, paper.json, coefficients, commands): the same page.
    shutil.rmtree(smc)
    result = CliRunner().invoke(app, ["compare", str(page.parent / "seed000" / "evidence.tar.xz"), "--paper", "seed000", "--page", str(page)],
                                terminal_width=200)
    assert result.exit_code == 0, result.output
    assert page.read_text(encoding="utf-8") == text
    assert "[paper_vs_ours.csv](seed000/paper_vs_ours.csv)" in text
    assert rows["sprt-up1-t30-c70-mosquitto"]["ours"].startswith("h0 0.87, h1 0.97, result H1")
    # Table 2's wall times are the paper's host's: not compared; the ratio of two times of one host is.
    assert rows["mc-time-up2-mosquitto"]["status"] == NOT_HERE
    assert rows["sprt-vs-mc-time"]["ours"] == "320" and rows["sprt-vs-mc-time"]["status"] == "disagrees"  # median(120, 200) / 0.5
    assert rows["regression-mosquitto-active-msgs"]["ours"].startswith("estimate 1.4")  # µs → ms
    assert "The paper vs this run" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def _runs(figure: str, scenario: str, samples: list[float], status: str = "no number in the paper") -> FigureRow:
    row = _row(figure, scenario, sum(samples) / len(samples))
    row.samples, row.status = samples, status
    return row


def test_a_difference_is_judged_per_configuration_with_welchs_interval():
    # MQTT about 50 ms slower than MQTT-SN: pairs differ only in the protocol label (mqtt-sn is not read as mqtt).
    rows = {"mqtt": [_runs("mqtt", "s01-1p1s-r1-mqtt", [200.0]), _runs("mqtt", "s01-1p1s-r10-mqtt", [190.0, 210.0, 200.0])],
            "sn": [_runs("sn", "s01-1p1s-r1-mqtt-sn", [150.0]), _runs("sn", "s01-1p1s-r10-mqtt-sn", [150.0, 152.0, 148.0])]}
    gap = Check(difference=["mqtt", "sn"], along=["mqtt", "mqtt-sn"], within=[25, 75], unit="ms")
    ok, lines = _check(gap, rows)
    # r1: one run a side, the point decides (50 in range); r10: 50 ± ~25, inside [25, 75] only just or not: judged by the interval
    assert lines[0].startswith("mqtt − sn: in [25, 75] ms in ")
    assert any(line.startswith("s01-1p1s-r1-* (mosquitto): 200 − 150 = 50 ms (n = 1 and 1) in [25, 75]") for line in lines)
    r10 = next(line for line in lines if line.startswith("s01-1p1s-r10-*"))
    assert "95% CI" in r10 and "n = 3 and 3" in r10
    assert ok == (True if " in [25, 75]" in r10 else CANNOT_TELL)
    # A wide interval across the edge cannot tell; one wholly outside does not hold.
    rows["mqtt"][1].samples = [150.0, 250.0, 200.0]
    assert _check(gap, rows)[0] == CANNOT_TELL
    assert _check(gap.model_copy(update={"within": [100, 200]}), rows)[0] is False
    assert "mqtt − sn in [25, 75] ms, configurations paired mqtt vs mqtt-sn in every configuration" in rule_text(gap)


def test_generator_limited_rows_never_judge_and_the_verdict_says_so():
    claim = Claim(id="low-load", text="...", figures=["mqtt"], check=[Check(figure="mqtt", within=[0, 100])])
    limited = _runs("mqtt", "s01-1p1s-r1-mqtt", [500.0], status=LIMITED)
    verdict = judge_claim(claim, {"mqtt": [limited]})
    assert verdict.verdict == LIMITED and "1 configuration(s) left out: generator-limited runs only" in verdict.evidence
    kept = _runs("mqtt", "s01-1p1s-r10-mqtt", [50.0])
    verdict = judge_claim(claim, {"mqtt": [limited, kept]})
    assert verdict.verdict == HOLDS and verdict.rule == "figure: mqtt in [0, 100]" and [c[:2] for c in verdict.conditions] == [
        ("every row of mqtt in [0, 100], its interval wholly inside where it has one (across an edge: cannot tell)", HOLDS)]  # the 500 ms run does not count


def test_a_row_prints_its_tolerance_and_an_interval_across_the_edge_cannot_tell():
    paper = validate_paper({"seed": "9", "title": "t", "figures": [
        {"id": "lat", "quote": "q", "where": "w", "kind": "latency", "unit": "ms", "exact": False, "value": 200,
         "reproduce": {"scenario": "s", "metric": "latency_mean"}},
        {"id": "lat3", "quote": "q", "where": "w", "kind": "latency", "unit": "ms", "exact": False, "value": 200,
         "reproduce": {"scenario": "s", "metric": "latency_mean", "tolerance": 1.5}}]}, "test")
    from mqttlab.reproductions.paper_figures import _judge

    row = _runs("lat", "s", [150.0])
    row.paper = 200
    _judge(row, paper.figure("lat"), paper.figure("lat").reproduce, "")
    assert (row.status, row.rule, row.uncertainty) == (AGREES, "within ×2 (default tolerance) of the paper's 200 ms, i.e. in [100, 400]", "one run")
    row = _runs("lat3", "s", [120.0, 140.0, 160.0])
    row.paper, row.interval = 200, [90.0, 190.0]
    _judge(row, paper.figure("lat3"), paper.figure("lat3").reproduce, "")
    assert row.status == CANNOT_TELL and row.rule.startswith("within ×1.5 of the paper's 200 ms") and row.uncertainty == "3 runs; CI 90–190"


def test_a_rise_ratio_or_range_whose_intervals_overlap_the_edge_cannot_tell():
    def measured(figure: str, mean: float, interval: Optional[list[float]]) -> FigureRow:
        row = _row(figure, "s", mean)
        row.interval = interval
        return row

    # Diffusion "grows with N": 13.6 then 12.1 ms, each ± 2: the fall is within the noise.
    noisy = {"n100": [measured("n100", 13.6, [11.6, 15.6])], "n200": [measured("n200", 12.1, [10.1, 14.1])]}
    ok, lines = _check(Check(increasing=["n100", "n200"]), noisy)
    assert ok == CANNOT_TELL and lines == ["mosquitto: 13.6 [11.6–15.6] (n100) ≈ 12.1 [10.1–14.1] (n200) — cannot tell: the intervals overlap"]
    apart = {"n100": [measured("n100", 13.6, [13.0, 14.2])], "n200": [measured("n200", 12.1, [11.5, 12.7])]}
    assert _check(Check(increasing=["n100", "n200"]), apart)[0] is False
    assert _check(Check(decreasing=["n100", "n200"]), apart)[0] is True
    # A ratio bounded from both intervals: 2.0 / 1.0 with 1.8–2.2 and 0.9–1.1 gives 1.64–2.44.
    pair = {"a": [measured("a", 2.0, [1.8, 2.2])], "b": [measured("b", 1.0, [0.9, 1.1])]}
    assert _check(Check(ratio=["a", "b"], within=[1.5, 2.5]), pair)[0] is True
    assert _check(Check(ratio=["a", "b"], within=[1.8, 2.5]), pair)[0] == CANNOT_TELL
    assert _check(Check(ratio=["a", "b"], within=[3, 4]), pair)[0] is False
    assert _check(Check(figure="a", within=[0, 2.1]), pair)[0] == CANNOT_TELL
    assert _check(Check(figure="a", within=[0, 3]), pair)[0] is True


def test_each_judges_a_share_of_rows_by_one_key_of_their_values():
    def sprt(figure: str, result: str, pct: float) -> FigureRow:
        row = _row(figure, "UP1", 0.0)
        row.ours = {"result": result, "h1_accept_pct": pct}
        return row

    rows = {"a": [sprt("a", "H1", 100.0)], "b": [sprt("b", "99% H1", 99.0)], "c": [sprt("c", "H0", 0.0)]}
    most = Check(each=["a", "b", "c", "d"], key="h1_accept_pct", within=[90, 100], at_least=0.5)
    ok, lines = _check(most, rows)
    assert ok is True and lines == ["h1_accept_pct wholly in [90, 100] in 2 of 3 rows (67%; 50% asked), wholly outside in 1", "c: 0 ✗"]
    assert _check(most.model_copy(update={"at_least": 0.75}), rows)[0] is False
    assert rule_text(most) == ("ours' h1_accept_pct wholly in [90, 100] (its interval, where it has one) in at least 50% of the rows of 4 figures (a, b, c, …); "
                                "too many wholly outside for that share: does not hold; else cannot tell")
    with pytest.raises(ValueError, match="key: only with each"):
        Check(figure="a", within=[0, 1], key="h1_accept_pct")


def test_best_is_judged_against_each_rival_by_the_interval_of_the_difference():
    def broker(figure: str, name: str, samples: list[float]) -> FigureRow:
        row = _runs(figure, "p2p-qos2-r200", samples)
        row.broker = name
        return row

    rows = {"rmqtt": [broker("rmqtt", "rmqtt", [13_700.0, 13_600.0, 13_800.0])],
            "mosquitto": [broker("mosquitto", "mosquitto", [9_000.0, 9_100.0, 8_900.0])],
            "rumqttd": [broker("rumqttd", "rumqttd", [13_500.0, 13_900.0, 13_700.0])]}
    best = Check(best="rmqtt", among=["mosquitto", "rumqttd", "rmqtt"])
    ok, lines = _check(best, rows)
    # Clearly ahead of Mosquitto; level with rumqttd within the runs' spread: not a winner by noise.
    assert ok == CANNOT_TELL
    assert lines[0].startswith("rmqtt 13700 ahead of mosquitto 9000 (difference 95% CI")
    assert "cannot tell from rumqttd" in lines[1] and "n = 3 and 3" in lines[1]
    rows["rumqttd"][0].samples = [10_000.0, 10_100.0, 9_900.0]
    rows["rumqttd"][0].ours = 10_000.0
    assert _check(best, rows)[0] is True
    # Behind one rival wholly: does not hold. One run a side: the values decide.
    assert _check(best.model_copy(update={"best": "mosquitto"}), rows)[0] is False
    rows = {name: [broker(name, name, [value])] for name, value in (("rmqtt", 13_700.0), ("mosquitto", 9_000.0))}
    ok, lines = _check(Check(best="rmqtt", among=["mosquitto", "rmqtt"]), rows)
    assert ok is True and lines == ["rmqtt 13700 ahead of mosquitto 9000 (n = 1 and 1)"]
    assert "Welch 95% interval of its difference to each" in rule_text(best)


def test_a_trend_step_whose_intervals_overlap_cannot_tell():
    rows = {"rtt": [_runs("rtt", "loss-1-qos1", [10.0, 11.0, 12.0]), _runs("rtt", "loss-10-qos1", [11.0, 30.0, 13.0]),
                    _runs("rtt", "loss-1-qos0", [5.0, 5.1, 4.9]), _runs("rtt", "loss-10-qos0", [9.0, 9.1, 8.9])]}
    for row in rows["rtt"]:
        half = (max(row.samples) - min(row.samples)) * 2
        row.interval = [row.ours - half, row.ours + half]
    rises = Check(trend="rises", figures=["rtt"], along=["loss-1", "loss-10"])
    ok, lines = _check(rises, rows)
    assert ok == CANNOT_TELL
    assert lines[0] == "rtt: rises along loss-1 → loss-10 in 1 of 2 configurations (50%; 100% asked), cannot tell in 1 (intervals overlap)"
    assert any(line.startswith("*-qos1 (mosquitto): ") and line.endswith(" ?") for line in lines)


def test_bundling_is_read_per_packet_type_and_direction_from_a_capture():
    from mqttlab.reproductions.captured import _one
    from mqttlab.reproductions.paper_file import PaperFileError, validate_paper

    by_type = [{"type": "PUBLISH", "direction": "up", "max_per_segment": 1, "shared_segments": 100},
               {"type": "PUBCOMP", "direction": "down", "max_per_segment": 2, "shared_segments": 0},
               {"type": "PUBCOMP", "direction": "up", "max_per_segment": 1, "shared_segments": 7}]
    data = {"figures": {"bundling": {"by_type": by_type}}}
    assert _one("bundled", data, {}, "PUBCOMP", "mqtt", None, "down") == 2
    assert _one("shared", data, {}, "PUBCOMP", "mqtt", None, "up") == 7
    assert _one("bundled", data, {}, "PUBREL", "mqtt", None, "up") is None  # not in the capture: no figure
    figure = {"id": "b", "quote": "q", "where": "w", "kind": "k", "exact": False, "value": 1,
              "reproduce": {"capture": "bundled", "packet": "PUBCOMP", "scenario": "x"}}
    with pytest.raises(PaperFileError, match="direction: up or down"):
        validate_paper({"seed": "002", "title": "t", "figures": [figure]}, "test")


def test_a_condition_that_cannot_tell_says_how_many_runs_would_decide_it():
    from scipy.stats import t

    from mqttlab.analysis.stats import mean_interval
    from mqttlab.reproductions.verdicts import RUN_LADDER, runs_to_decide

    def measured(samples: list[float]) -> FigureRow:
        row = _runs("rtt", "s", samples)
        estimate = mean_interval(samples)
        row.interval, row.statistic = [estimate.low, estimate.high], f"mean of {len(samples)} runs"
        return row

    claim = Claim(id="fast", text="...", figures=["rtt"], check=[Check(figure="rtt", within=[0, 1])])
    row = measured([0.5, 0.8, 1.1])  # mean 0.8, SD 0.3: its interval reaches past 1
    verdict = judge_claim(claim, {"rtt": [row]})
    assert verdict.verdict == "cannot tell"
    # This file's own reading: the fewest runs of the ladder whose t interval of the same mean and
    # SD lies below 1.
    wanted = next(n for n in RUN_LADDER if 0.8 + t.ppf(0.975, n - 1) * 0.3 / n ** 0.5 < 1)
    assert verdict.runs_to_decide == [f"{wanted} runs a configuration would make it hold"]
    # A mean outside the range: more runs make it not hold.
    outside = measured([0.9, 1.2, 1.5])
    assert runs_to_decide(claim.check[0], {"rtt": [outside]}).endswith("would make it not hold")
    # A mean on the edge is never decided; a decided condition, or one with no runs' interval, is not projected.
    assert runs_to_decide(claim.check[0], {"rtt": [measured([0.7, 1.0, 1.3])]}).startswith("not decided at 100 runs")
    assert judge_claim(claim, {"rtt": [measured([0.2, 0.3, 0.4])]}).runs_to_decide == []
    assert runs_to_decide(claim.check[0], {"rtt": [_runs("rtt", "s", [0.9])]}) == ""


def test_connect_connack_and_disconnect_are_read_from_each_connections_own_exchange():
    from mqttlab.reproductions.captured import _one

    # A limited run's dissector lost the stream's framing after retransmissions and typed three
    # 111 B pieces of a 10 KB payload as CONNACKs, beside the two real ones of 4 B.
    figures = {
        "packets": [{"packet": "CONNACK", "direction": "down", "packets": 5, "mqtt_bytes": 111, "frame_bytes_alone": 70}],
        "connections": [{"connect_mqtt_bytes": 25, "connect_frame_bytes": 91, "connack_mqtt_bytes": 4, "connack_frame_bytes": 70,
                         "disconnect_mqtt_bytes": 2, "disconnect_frame_bytes": 68} for _ in range(2)],
    }
    data = {"figures": figures}
    assert _one("packet", data, {}, "CONNACK", "mqtt", None) == 4
    assert _one("packet", data, {}, "CONNACK", "frame", None) == 70
    assert _one("packet", data, {}, "CONNECT", "mqtt", ["mqtt", "mqtt_tcp"]) == {"mqtt": 25, "mqtt_tcp": 91}
    # A connection whose frame carried more than the packet gives no frame size; the others decide.
    figures["connections"][0]["disconnect_frame_bytes"] = None
    assert _one("packet", data, {}, "DISCONNECT", "frame", None) == 68
