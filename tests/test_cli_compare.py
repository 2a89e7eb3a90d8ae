"""`mqttlab compare` concludes and tells the whole story (issue 39, 3 and 4): it opens with its
findings (significant differences with interval and size, what does not differ, what cannot be
judged and why), names the promises a broker broke in every output, leaves generator-limited runs
out of the figures unless asked to show them apart, labels the delivered rate beside the offered
one, and at 80 columns stacks its tables rather than split a number.

The runs are real (Mosquitto and rumqttd on loopback, two each). Two tests give a copy of a run
what compare reads from other runs' summary.json (a violation as NanoMQ's fan-in runs wrote it,
the generator-limited flag a busy host sets), as neither can be caused on purpose."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.cli import app as cli_app

FLAGS = ["--pubs", "2", "--subs", "1", "--topic", "fi/%i", "--filter", "fi/+", "--rate", "50", "--duration", "1.5s"]
NAME = "fan-in-2-1-qos1-50ps"


def invoke(*args: str, columns: int = 200):
    return CliRunner().invoke(cli_app.app, list(args), env={"COLUMNS": str(columns)})


def said(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("compare")
    for broker in ("mosquitto", "rumqttd"):
        for repetition in (1, 2):
            result = invoke("run", "--broker", broker, *FLAGS, "--out", str(root / "runs" / f"{broker}-{repetition}"))
            assert result.exit_code in (0, 1), result.output
    for path in (root / "runs").iterdir():  # a host too busy for the schedule would leave these out: not the point here
        summary = json.loads((path / "summary.json").read_text())
        summary["generator_limited"] = False
        (path / "summary.json").write_text(json.dumps(summary))
    return root / "runs"


def _edited(source: Path, target: Path, **changes) -> Path:
    shutil.copytree(source, target)
    summary = json.loads((target / "summary.json").read_text())
    summary.update(changes)
    (target / "summary.json").write_text(json.dumps(summary))
    return target


def test_compare_opens_with_its_findings(runs: Path):
    result = invoke("compare", str(runs), "--baseline", "mosquitto")
    assert result.exit_code == 0, result.output
    text = said(result)
    assert text.startswith(f"Findings against mosquitto (95% intervals) {NAME}:")
    # rumqttd holds about 40 MB, Mosquitto under 10: a large difference, said with its interval and size.
    found = re.search(r"rumqttd: broker RSS peak [\d.]+ MB higher than mosquitto's \[\+[\d.]+, \+[\d.]+\] \(([\d.]+)× the baseline's\), worse", text)
    assert found and float(found.group(1)) > 2, text
    assert "rumqttd and mosquitto do not differ at 95% in" in text or "rumqttd: latency" in text
    assert text.index("Findings") < text.index("mean ± 95% CI half-width")


def test_one_run_each_cannot_be_judged_and_says_why(runs: Path):
    result = invoke("compare", str(runs / "mosquitto-1"), str(runs / "rumqttd-1"))
    assert result.exit_code == 0, result.output
    assert ("rumqttd against mosquitto: cannot judge, 1 run of rumqttd and 1 run of mosquitto "
            "(an interval needs two or more on each side)") in said(result)


def test_broken_promises_are_named_per_broker_in_terminal_html_csv_and_json(runs: Path, tmp_path: Path):
    violation = {"kind": "ordering", "count": 103, "detail": "publisher 1 message 17 arrived after a later one (QoS 1)"}
    edited = _edited(runs / "rumqttd-2", tmp_path / "rumqttd-2", violations=[violation])
    paths = [str(runs / "mosquitto-1"), str(runs / "mosquitto-2"), str(runs / "rumqttd-1"), str(edited)]
    result = invoke("compare", *paths, "--out", str(tmp_path / "report"), "--no-png")
    assert result.exit_code == 0, result.output
    assert "⚠ rumqttd broke the protocol's promises: ordering 103 in 1 of 2 runs (those runs exit 1)" in said(result)
    page = (tmp_path / "report" / "report.html").read_text()
    assert "⚠ rumqttd broke the protocol&#x27;s promises: ordering 103 in 1 of 2 runs" in page
    with (tmp_path / "report" / "summary.csv").open() as handle:
        assert {row["broker"]: row["violations"] for row in csv.DictReader(handle)} == {"mosquitto": "", "rumqttd": "ordering 103 (1 of 2 runs)"}
    with (tmp_path / "report" / "runs.csv").open() as handle:
        assert sorted(row["violations"] for row in csv.DictReader(handle)) == ["", "", "", "ordering 103"]
    data = json.loads((tmp_path / "report" / "comparison.json").read_text())
    assert data["violations"] == [{"scenario": NAME, "broker": "rumqttd", "kind": "ordering", "count": 103, "runs": 1, "of_runs": 2}]
    assert [f["broker"] for f in data["findings"] if f["kind"] == "violations"] == ["rumqttd"]
    printed = json.loads(invoke("compare", *paths, "--json").output)
    assert printed["violations"] == data["violations"] and printed["findings"] == data["findings"]


def test_generator_limited_runs_are_left_out_unless_shown_apart(runs: Path, tmp_path: Path):
    flagged = _edited(runs / "rumqttd-2", tmp_path / "rumqttd-2", generator_limited=True)
    paths = [str(runs / "mosquitto-1"), str(runs / "mosquitto-2"), str(runs / "rumqttd-1"), str(flagged)]
    data = json.loads(invoke("compare", *paths, "--json").output)
    assert data["generator_limited_left_out"] == [str(flagged)]
    assert {(row["broker"], row["n"]) for row in data["rows"] if row["metric"] == "throughput"} == {("mosquitto", 2), ("rumqttd", 1)}
    left = invoke("compare", *paths)
    assert "1 run flagged generator-limited left out of every figure" in said(left) and "--generator-limited shows them apart" in said(left)
    assert "cannot judge, 1 run of rumqttd" in said(left)
    apart = invoke("compare", *paths, "--generator-limited", "--json")
    scenarios = {row["scenario"] for row in json.loads(apart.output)["rows"]}
    assert scenarios == {NAME, f"{NAME} [generator-limited]"}
    shown = said(invoke("compare", *paths, "--generator-limited"))
    assert "its runs were all flagged generator-limited (shown apart" in shown


def test_the_delivered_rate_is_labelled_beside_the_offered_one(runs: Path, tmp_path: Path):
    result = invoke("compare", str(runs), "--out", str(tmp_path / "report"), "--no-png")
    assert result.exit_code == 0, result.output
    assert f"{NAME}: offered 100 msg/s; mean" in said(result) and "delivered/s" in result.output
    with (tmp_path / "report" / "summary.csv").open() as handle:
        assert {float(row["offered_per_s"]) for row in csv.DictReader(handle)} == {100.0}
    page = (tmp_path / "report" / "report.html").read_text()
    assert "delivered rate (msg/s)" in page and "delivered rate (msg/s, higher is better)" not in page
    assert "throughput (msg/s, higher is better)" not in page


def test_eighty_columns_stack_the_tables_and_never_split_a_number(runs: Path):
    wide = invoke("compare", str(runs))
    assert not re.search(r"┃\s*┃", wide.output)  # no column without a name (the difference table had one)
    narrow = invoke("compare", str(runs), columns=80)
    assert narrow.exit_code == 0, narrow.output
    assert all(len(line) <= 80 for line in narrow.output.splitlines())
    assert "mosquitto (2 runs)" in narrow.output and "rumqttd (2 runs)" in narrow.output and "…" not in narrow.output
    data = json.loads(invoke("compare", str(runs), "--json").output)
    from mqttlab.numbers import figure_text

    for row in data["rows"]:  # every mean is printed whole on one line
        if row["mean"] is not None and row["metric"] in ("throughput", "latency_p50", "latency_p99", "broker_rss_peak"):
            assert re.search(rf"│\s*{re.escape(figure_text(row['mean']))} ±", narrow.output), (row, narrow.output)


def test_the_over_time_plot_draws_no_cliff_where_the_run_ended(runs: Path, tmp_path: Path):
    # Each run's measured window ends a fifth of a second into its last second (1.5 s with 0.3 s
    # of warm-up): that second's handful of messages is no drop of the rate.
    for path in runs.iterdir():
        series = (path / "series.csv").read_text().splitlines()
        assert len(series) >= 3 and int(series[-1].split(",")[0]) == 1
    result = invoke("compare", str(runs), "--out", str(tmp_path / "report"), "--no-png")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "report" / "report.html").read_text()
    start = page.index('"time-0",')  # the over-time figure's Plotly.newPlot(id, traces, ...)
    traces, _ = json.JSONDecoder().raw_decode(page[page.index("[", start):])
    rates = [trace["y"] for trace in traces if trace.get("xaxis", "x") == "x"]
    assert len(rates) == 4
    for y in rates:  # 2 publishers × 50 msg/s: about 100 deliveries a second throughout, no tail towards 0
        assert y and min(y) > 50, y
