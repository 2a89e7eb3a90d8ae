"""`mqttlab compare` on the results of a real quick suite (mosquitto and rumqttd): tables with
intervals, differences from the baseline, CSV / PNG / HTML outputs, and clear input errors."""

from __future__ import annotations

import csv
import re
import json
import shutil

import pytest
from typer.testing import CliRunner

from mqttlab.analysis import compare_directories, find_result_directories
from mqttlab.cli import app as cli_app
from mqttlab.reports import write_report_bundle
from test_suite_run import quick_suite_dir  # tests/ is on sys.path (no package)

pytestmark = pytest.mark.slow


def test_comparison_groups_repetitions_by_scenario_and_broker_with_intervals():
    comparison = compare_directories([quick_suite_dir()], baseline="mosquitto")
    assert [s.scenario for s in comparison.scenarios] == ["p2p-qos1"]
    groups = comparison.scenarios[0].groups
    assert list(groups) == ["mosquitto", "rumqttd"]
    for group in groups.values():
        throughput = group.estimates["throughput"]
        assert throughput.n == 2 and throughput.has_interval
        assert throughput.low <= throughput.mean <= throughput.high
        # 2 publishers at 50 msg/s each, one subscriber each: about 100 deliveries per second
        assert 80 < throughput.mean < 120
        assert group.pooled_latency["count"] == sum(
            run.results.summary["latency"]["e2e"]["count"] for run in group.runs
        )
    difference = comparison.scenarios[0].differences["rumqttd"]["broker_rss_peak"]
    assert difference.has_interval and difference.low <= difference.difference <= difference.high
    assert "mosquitto" not in comparison.scenarios[0].differences


def test_a_single_run_compares_without_inventing_an_interval():
    one = quick_suite_dir() / "runs" / "p2p-qos1" / "rumqttd" / "rep-1"
    comparison = compare_directories([one])
    estimate = comparison.scenarios[0].groups["rumqttd"].estimates["latency_p99"]
    assert estimate.n == 1 and estimate.mean is not None and estimate.low is None


def test_runs_that_did_not_complete_are_left_out_and_listed(tmp_path):
    copy = tmp_path / "suite"
    shutil.copytree(quick_suite_dir() / "runs", copy / "runs")
    broken = copy / "runs" / "p2p-qos1" / "rumqttd" / "rep-2" / "manifest.json"
    manifest = json.loads(broken.read_text())
    manifest["status"] = "broker_lost"
    broken.write_text(json.dumps(manifest))
    comparison = compare_directories([copy])
    assert comparison.scenarios[0].groups["rumqttd"].estimates["throughput"].n == 1
    assert [reason for _, reason in comparison.excluded] == ["status broker_lost"]


def test_report_bundle_has_every_table_as_csv_png_figures_and_a_self_contained_page(tmp_path):
    comparison = compare_directories([quick_suite_dir()], baseline="mosquitto")
    paths = write_report_bundle(comparison, tmp_path)
    with paths["csv:summary"].open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["broker"] for row in rows] == ["mosquitto", "rumqttd"]
    assert float(rows[0]["throughput_ci_low"]) <= float(rows[0]["throughput_mean"]) <= float(rows[0]["throughput_ci_high"])
    assert rows[0]["latency_p99_diff"] == "" and rows[1]["latency_p99_diff"] != ""
    # every figure the runs have, the mean latency (what the seeds report) among them
    assert {"latency_mean_mean", "generator_cpu_mean"} <= set(rows[0]) and float(rows[0]["latency_mean_mean"]) > 0
    assert "round_trips_lost_mean" not in rows[0]  # these runs timed no round trip
    with paths["csv:comparison"].open() as handle:
        long_rows = list(csv.DictReader(handle))
    assert {row["metric"] for row in long_rows} >= {"throughput", "latency_p50", "latency_p99", "latency_max", "loss", "broker_cpu", "broker_rss_peak"}
    for key, path in paths.items():
        if key.startswith("png:"):
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    assert "png:throughput" in paths and "png:latency-p2p-qos1" in paths
    page = paths["html"].read_text()
    # viewable with no network: no script, stylesheet or image is fetched from anywhere
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert "16-byte measurement header" in page and "Welch" in page


def test_cli_compare_prints_tables_and_writes_the_report(tmp_path):
    result = CliRunner().invoke(cli_app.app, ["compare", str(quick_suite_dir()), "--baseline", "rumqttd", "--out", str(tmp_path), "--no-png"])
    assert result.exit_code == 0, result.output
    # CliRunner's 80 columns: one block per broker, the difference beside each figure.
    assert re.search(r"p2p-qos1: offered [\d,]+ msg/s; mean", result.output) and "− rumqttd [Welch CI]" in result.output
    assert (tmp_path / "report.html").is_file() and not (tmp_path / "figures").exists()
    as_json = CliRunner().invoke(cli_app.app, ["compare", str(quick_suite_dir()), "--json"])
    assert json.loads(as_json.output)["baseline"] == "mosquitto"


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--baseline", "nosuch"], "--baseline: no runs of broker 'nosuch'"),
        (["--confidence", "95"], "--confidence: must be between 0 and 1"),
    ],
)
def test_cli_compare_input_errors_exit_2_naming_the_option(arguments, message):
    result = CliRunner().invoke(cli_app.app, ["compare", str(quick_suite_dir()), *arguments])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_a_path_without_results_is_an_error_naming_it(tmp_path):
    result = CliRunner().invoke(cli_app.app, ["compare", str(tmp_path)])
    assert result.exit_code == 2 and str(tmp_path) in result.output and "no results directory" in result.output
    assert len(find_result_directories([quick_suite_dir()])) == 4
