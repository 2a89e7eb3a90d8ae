"""`mqttlab suite run` against real brokers on loopback: a quick suite across mosquitto and
rumqttd yields a results directory per run, the comparison and the report; an interrupted suite
resumes without repeating finished runs."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

TWO_BROKERS = {
    "name": "two-brokers",
    "brokers": ["mosquitto", "rumqttd"],
    "repetitions": 2,
    "base": {
        "publishers": {"count": 2, "topic": "quick/%i", "rate": 50, "payload": 64},
        "subscribers": {"count": 2, "filters": ["quick/%i"]},
        "load": {"duration": "2.5s", "warmup": "0.5s", "grace": "1s"},
    },
    "scenarios": {"p2p": {}},
    "variants": {"qos": {"qos1": {"publishers.qos": 1, "subscribers.qos": 1}}},
}


def suite_command(suite_file: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mqttlab", "suite", "run", str(suite_file), "--out", str(out), *extra]


@functools.lru_cache(maxsize=1)
def quick_suite_dir() -> Path:
    """One quick two-broker suite, run once per test session and shared by the tests that read
    it (here, test_compare_results.py and test_report_browser.py)."""
    root = Path(tempfile.mkdtemp(prefix="mqttlab-quick-suite-"))
    atexit.register(shutil.rmtree, root, True)
    suite_file = root / "two-brokers.yaml"
    suite_file.write_text(yaml.safe_dump(TWO_BROKERS))
    out = root / "out"
    done = subprocess.run(suite_command(suite_file, out, "--baseline", "mosquitto"), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return out


def test_a_users_own_suite_has_no_seed_sections(tmp_path: Path):
    out = quick_suite_dir()  # repeated runs of a suite of the user's, no seed's
    compared = subprocess.run([sys.executable, "-m", "mqttlab", "compare", str(out), "--out", str(tmp_path / "report")],
                              capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr[-2000:]
    for page in (out / "report" / "report.html", tmp_path / "report" / "report.html"):
        text = page.read_text()
        assert "The seeds' statistics" not in text and "As in seed 001" not in text, page
    assert not (tmp_path / "report" / "figures" / "mean-sd.png").exists()


def manifests(out: Path) -> dict[str, dict]:
    return {str(path.parent.relative_to(out / "runs")): json.loads(path.read_text()) for path in sorted((out / "runs").rglob("manifest.json"))}


def test_quick_suite_across_two_brokers_writes_every_run_and_the_report():
    out = quick_suite_dir()
    runs = manifests(out)
    assert sorted(runs) == ["p2p-qos1/mosquitto/rep-1", "p2p-qos1/mosquitto/rep-2", "p2p-qos1/rumqttd/rep-1", "p2p-qos1/rumqttd/rep-2"]
    assert {m["status"] for m in runs.values()} == {"completed"}
    assert {m["broker"]["name"] for m in runs.values()} == {"mosquitto", "rumqttd"}
    # The suite launched the brokers, so it records how they were configured.
    assert {m["broker"]["config"]["mode"] for m in runs.values()} == {"tuned"}
    # a fresh broker process per run
    assert len({m["broker"]["pid"] for m in runs.values()}) == 4
    planned = json.loads((out / "runs.json").read_text())["runs"]
    assert [entry["status"] for entry in planned] == ["completed"] * 4
    for name in ("report.html", "summary.csv", "comparison.csv", "latency.csv", "runs.csv", "figures/throughput.png"):
        assert (out / "report" / name).is_file(), name


def test_each_suite_run_records_broker_and_generator_resources_on_the_run_clock():
    out = quick_suite_dir()
    run = out / "runs" / "p2p-qos1" / "mosquitto" / "rep-1"
    summary = json.loads((run / "summary.json").read_text())
    broker = summary["resources"]["broker"]
    assert broker["peak_rss_bytes"] > 1_000_000  # a real mosquitto holds at least a megabyte
    assert 0 <= broker["mean_cpu_share"] < 2.0
    assert summary["resources"]["generator"]["mean_cpu_share"] > 0
    rows = (run / "resources.csv").read_text().splitlines()
    assert rows[0] == "t_s,process,cpu_share,cpu_seconds,rss_bytes"
    assert any(row.startswith("0,broker,") for row in rows) and any(row.startswith("0,generator,") for row in rows)


def test_an_interrupted_suite_resumes_without_repeating_finished_runs(tmp_path):
    suite = dict(TWO_BROKERS, name="resume", brokers=["mosquitto"], repetitions=3)
    suite_file = tmp_path / "resume.yaml"
    suite_file.write_text(yaml.safe_dump(suite))
    out = tmp_path / "out"
    first_manifest = out / "runs" / "p2p-qos1" / "mosquitto" / "rep-1" / "manifest.json"

    child = subprocess.Popen(suite_command(suite_file, out, "--no-report"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not first_manifest.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.1)
    assert first_manifest.exists(), "the first run never finished"
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 130, stderr
    assert "resume" in stderr
    kept = first_manifest.read_text()
    statuses = [entry["status"] for entry in json.loads((out / "runs.json").read_text())["runs"]]
    assert statuses[0] == "completed" and "completed" in statuses and statuses != ["completed"] * 3

    resumed = subprocess.run(suite_command(suite_file, out, "--no-report"), capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "rep-1: completed earlier, kept" in resumed.stderr
    assert first_manifest.read_text() == kept  # not run again
    runs = manifests(out)
    assert sorted(runs) == ["p2p-qos1/mosquitto/rep-1", "p2p-qos1/mosquitto/rep-2", "p2p-qos1/mosquitto/rep-3"]
    assert {m["status"] for m in runs.values()} == {"completed"}
    # Both command lines are on record (a reproduction page shows them).
    invocations = json.loads((out / "invocations.json").read_text())
    assert [entry["runs"] for entry in invocations] == [3, 3]
    assert all(entry["command"].startswith(f"mqttlab suite run {suite_file} --out {out}") for entry in invocations)


def test_a_broker_not_available_here_is_skipped_with_a_note_in_the_report(tmp_path):
    # The built-in suites name the seeds' brokers; one that no registry here offers (EMQX) must
    # not fail the suite, and the report must say it was left out and why.
    suite = dict(TWO_BROKERS, name="skip", brokers=["emqx", "mosquitto"], repetitions=1)
    suite_file = tmp_path / "skip.yaml"
    suite_file.write_text(yaml.safe_dump(suite))
    out = tmp_path / "out"
    done = subprocess.run(suite_command(suite_file, out), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "note: emqx is skipped: not available here" in done.stderr
    assert sorted(manifests(out)) == ["p2p-qos1/mosquitto/rep-1"]
    notes = json.loads((out / "report" / "comparison.json").read_text())["notes"]
    assert len(notes) == 1 and notes[0].startswith("emqx was not run: not available on this host (not in any registry")
    assert "emqx was not run" in (out / "report" / "report.html").read_text()


def test_an_unknown_broker_in_the_option_is_refused_before_anything_runs(tmp_path):
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(yaml.safe_dump(dict(TWO_BROKERS, repetitions=1)))
    result = subprocess.run(
        suite_command(suite_file, tmp_path / "out", "--brokers", "mosquitto,nosuch"), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--brokers[1]: unknown broker 'nosuch'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_tls_variant_starts_the_broker_with_tls_and_connects_over_mqtts(tmp_path):
    suite = {
        "name": "tls",
        "brokers": ["mosquitto"],
        "base": {"publishers": {"count": 1, "topic": "w/0", "messages": 20, "rate": 50, "qos": 1},
                 "subscribers": {"count": 0}, "load": {"duration": "5s", "warmup": "0s", "grace": "1s"}},
        "scenarios": {"write": {}},
        "variants": {"transport": {"tls": {"transport": "tls"}}},
    }
    suite_file = tmp_path / "tls.yaml"
    suite_file.write_text(yaml.safe_dump(suite))
    out = tmp_path / "out"
    done = subprocess.run(suite_command(suite_file, out, "--no-report"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    run = out / "runs" / "write-tls" / "mosquitto" / "rep-1"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["broker"]["url"].startswith("mqtts://127.0.0.1:")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["latency"]["tls"]["count"] == 1  # one verified TLS handshake
    assert summary["messages"]["acked"] == 20


NETWORK_SUITE = {
    "name": "network-rtt",
    "brokers": ["mosquitto"],
    "base": {
        "publishers": {"count": 1, "topic": "nrtt/%i", "reply_filter": "nrtt-reply/%i", "rate": 20, "payload": "1KB", "qos": 1},
        "subscribers": {"count": 1, "filters": ["nrtt/%i"], "echo_topic": "nrtt-reply/%i", "qos": 1},
        "load": {"duration": "2s", "warmup": "0.5s", "grace": "2s"},
    },
    "scenarios": {"fast": {}, "delayed": {"network": {"delay": "20ms"}}},
}


def test_a_suite_with_network_conditions_launches_each_broker_in_its_namespace_and_compares_rtt(tmp_path):
    from mqttlab.netem import capability

    missing = capability.detect().missing()
    if missing is not None:
        pytest.skip(f"network conditions need root / CAP_NET_ADMIN: {missing}")
    suite_file = tmp_path / "network-rtt.yaml"
    suite_file.write_text(yaml.safe_dump(NETWORK_SUITE))
    out = tmp_path / "out"
    done = subprocess.run(suite_command(suite_file, out), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summaries = {name: json.loads((out / "runs" / name / "mosquitto" / "rep-1" / "summary.json").read_text()) for name in ("fast", "delayed")}
    for summary in summaries.values():
        assert summary["round_trip"]["sent"] > 0 and summary["round_trip"]["replies"] == summary["round_trip"]["sent"]
    # 20 ms each way on the link, crossed four times per round trip (there, to the echo, back).
    assert summaries["delayed"]["latency"]["rtt"]["p50_us"] > 60_000 > summaries["fast"]["latency"]["rtt"]["p50_us"]
    assert "network" in summaries["delayed"] and "network" not in summaries["fast"]
    manifest = json.loads((out / "runs" / "delayed" / "mosquitto" / "rep-1" / "manifest.json").read_text())
    assert manifest["broker"]["name"] == "mosquitto" and manifest["broker"]["pid"]
    latency = (out / "report" / "latency.csv").read_text().splitlines()
    assert latency[0].startswith("scenario,broker,measure") and all(",rtt," in line for line in latency[1:])
