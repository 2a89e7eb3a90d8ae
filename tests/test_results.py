"""The results directory: written once, read back the same, readable by other HdrHistogram tools.

The histograms here are encoded by the `hdrhistogram` package, an implementation independent of
ours, so the files are checked against the format rather than against our own reader."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from mqttlab import results
from mqttlab.planning import default_scenario, plan_of
from mqttlab.scenario import scenario_to_yaml


def encoded(*values_us: int) -> str:
    histogram = HdrHistogram(1, 3_600_000_000, 3)
    for value in values_us:
        histogram.record_value(value)
    return histogram.encode().decode("ascii")


def hdr_stats(text: str) -> dict:
    histogram = HdrHistogram.decode(text)
    return {
        "count": histogram.get_total_count(),
        "p50_us": histogram.get_value_at_percentile(50),
        "p99_us": histogram.get_value_at_percentile(99),
        "max_us": histogram.get_max_value(),
    }


def raw_result() -> dict:
    return {
        "status": "completed",
        "error": None,
        "start_unix_ns": 1_700_000_000_000_000_000,
        "start_mono_ns": 12_345,
        "histograms": {"e2e": encoded(100, 200, 300, 5000), "puback": encoded(50, 60), "tls": ""},
        "series": [
            {"t_s": -1, "sent": 10, "acked": 10, "received": 10, "dropped": 0, "errors": 0, "e2e": encoded(900)},
            {"t_s": 0, "sent": 20, "acked": 19, "received": 18, "dropped": 1, "errors": 2, "schedule_lag_max_us": 75, "e2e": encoded(100, 200, 300)},
            {"t_s": 1, "sent": 0, "acked": 0, "received": 0, "dropped": 0, "errors": 0, "e2e": encoded()},
        ],
    }


def write_example(directory: Path, status: str = "completed") -> Path:
    scenario = default_scenario()
    manifest = results.build_manifest(
        scenario_name=scenario.name,
        seed=scenario.load.seed,
        broker=results.BrokerInfo(name="rumqttd", version="0.19.0", url="mqtt://127.0.0.1:1883", pid=4242),
        started_at=dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc),
        command_line="mqttlab run --pubs 10",
        status=status,
        mqttlab_version="0.1.0",
        engine_version="0.1.0",
    )
    summary = {"status": status, "messages": {"sent": 30, "lost": 0}}
    return results.write_results(
        directory,
        manifest=manifest,
        scenario_yaml=scenario_to_yaml(scenario),
        plan=plan_of(scenario),
        result=raw_result(),
        summary=summary,
        stats=hdr_stats,
    )


def test_a_written_directory_reads_back_unchanged(tmp_path: Path):
    directory = write_example(tmp_path / "run")
    loaded = results.load_results(directory)
    assert loaded.result == raw_result()
    assert loaded.summary == {"status": "completed", "messages": {"sent": 30, "lost": 0}}
    assert loaded.plan == plan_of(default_scenario())
    assert loaded.scenario["publishers"]["count"] == 10
    assert loaded.status == "completed"


def test_manifest_describes_run_broker_and_host(tmp_path: Path):
    manifest = results.load_results(write_example(tmp_path / "run", status="interrupted")).manifest
    assert manifest["format"] == results.FORMAT
    assert (manifest["scenario"], manifest["seed"], manifest["status"]) == ("default", 1, "interrupted")
    assert manifest["started_at"] == "2024-05-01T12:00:00Z"
    assert manifest["broker"] == {"name": "rumqttd", "version": "0.19.0", "url": "mqtt://127.0.0.1:1883", "pid": 4242}
    assert manifest["command_line"] == "mqttlab run --pubs 10"
    host = manifest["host"]
    assert host["cores"] >= 1 and host["memory_bytes"] > 0 and host["kernel"] and host["python"]


def test_histogram_files_are_one_line_that_hdrhistogram_decodes(tmp_path: Path):
    directory = write_example(tmp_path / "run")
    text = (directory / "histograms" / "e2e.hdr").read_text()
    assert text.count("\n") == 1 and text.endswith("\n")
    decoded = HdrHistogram.decode(text.strip())
    assert decoded.get_total_count() == 4
    assert decoded.get_max_value() == pytest.approx(5000, rel=1e-3)
    assert not (directory / "histograms" / "tls.hdr").exists()  # an empty entry writes no file
    assert results.load_results(directory).histogram("puback") == raw_result()["histograms"]["puback"]
    assert results.load_results(directory).histogram("pubcomp") is None


def test_series_csv_has_one_row_per_second_with_e2e_percentiles(tmp_path: Path):
    directory = write_example(tmp_path / "run")
    with (directory / "series.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(results.SERIES_COLUMNS)
    assert [row["t_s"] for row in rows] == ["-1", "0", "1"]
    assert rows[1]["sent"] == "20" and rows[1]["dropped"] == "1" and rows[1]["errors"] == "2"
    assert rows[1]["schedule_lag_max_us"] == "75"
    assert float(rows[1]["e2e_p50_us"]) == pytest.approx(200, rel=1e-2)
    assert float(rows[1]["e2e_max_us"]) == pytest.approx(300, rel=1e-2)
    assert rows[2]["e2e_p50_us"] == ""  # a second without deliveries has no percentile, not 0
    assert results.load_results(directory).series[2]["e2e_p99_us"] is None


def test_a_directory_that_holds_a_run_is_not_overwritten(tmp_path: Path):
    directory = write_example(tmp_path / "run")
    with pytest.raises(results.ResultsError, match="already holds the results"):
        results.check_writable(directory)
    results.check_writable(tmp_path / "fresh")  # absent: fine
    (tmp_path / "empty").mkdir()
    results.check_writable(tmp_path / "empty")  # empty: fine


def test_default_directory_is_time_and_name_and_never_reused(tmp_path: Path):
    now = dt.datetime(2024, 5, 1, 12, 0, 5)
    first = results.default_results_dir("fan-in", now, root=tmp_path)
    assert first == tmp_path / "20240501-120005-fan-in"
    first.mkdir()
    assert results.default_results_dir("fan-in", now, root=tmp_path) == tmp_path / "20240501-120005-fan-in-2"


def test_loading_something_that_is_not_a_results_directory_names_the_path(tmp_path: Path):
    with pytest.raises(results.ResultsError, match="no such results directory"):
        results.load_results(tmp_path / "absent")
    with pytest.raises(results.ResultsError, match="no manifest.json"):
        results.load_results(tmp_path)
    directory = write_example(tmp_path / "run")
    (directory / "summary.json").write_text("{broken")
    with pytest.raises(results.ResultsError, match="summary.json: unreadable"):
        results.load_results(directory)


def test_json_files_are_plain_json(tmp_path: Path):
    directory = write_example(tmp_path / "run")
    for name in ("manifest.json", "plan.json", "result.json", "summary.json"):
        assert isinstance(json.loads((directory / name).read_text()), dict)
