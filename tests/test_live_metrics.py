"""Live metrics (docs/metrics.md): a real Prometheus scrape over HTTP during a real run, checked
against the run's summary.json, and the shipped Grafana dashboard checked against what the
exporter exposes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mqttlab.live.state import RunState
from mqttlab.live.metrics import METRICS, MetricsServer, parse_address
from mqttlab.planning import plan_of, validate_scenario
from test_cli_run import realistic_summary  # tests/ is on sys.path (no package)

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "grafana" / "mqttlab.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels without run/scenario/broker/shard): value} of one scrape."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in ("run", "scenario", "broker", "shard")))
            samples[(sample.name, labels)] = sample.value
    return samples


def wait_for(port: int, child: subprocess.Popen, condition, limit: float = 60) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and child.poll() is None:
        try:
            samples = scrape(port)
            if condition(samples):
                return samples
        except OSError:
            pass
        time.sleep(0.2)
    child.kill()
    pytest.fail(f"condition not met; run output: {child.communicate()[1][-2000:]}")


@pytest.mark.slow
def test_a_scrape_during_a_real_run_shows_live_figures_and_then_the_summarys(tmp_path: Path):
    pytest.importorskip("mqttlab._engine")
    port, out = free_port(), tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen(
        [sys.executable, "-m", "mqttlab", "run", "--pubs", "2", "--subs", "2", "--rate", "50", "--duration", "3s", "--warmup", "500ms",
         "--set", "load.grace=1s", "--out", str(out), "--json", "--metrics", f"127.0.0.1:{port}", "--metrics-linger", "20s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )
    try:
        during = wait_for(port, child, lambda s: s.get(("mqttlab_run_phase", (("phase", "measuring"),))) == 1
                          and s.get(("mqttlab_rate_messages_per_second", (("kind", "sent"),)), 0) > 0)
        assert during[("mqttlab_run_finished", ())] == 0
        assert during[("mqttlab_connections", (("role", "publishers"),))] == 2
        assert during[("mqttlab_connections", (("role", "subscribers"),))] == 2
        assert during[("mqttlab_process_rss_bytes", (("process", "broker"),))] > 0
        assert during[("mqttlab_process_rss_bytes", (("process", "generator"),))] > 0
        assert ("mqttlab_process_cpu_cores", (("process", "broker"),)) in during
        assert 0 < during[("mqttlab_run_progress_ratio", ())] <= 1
        assert during[("mqttlab_run_time_left_seconds", ())] > 0
        assert ("mqttlab_generator_backlog_seconds", ()) in during
        assert ("mqttlab_e2e_latency_recent_seconds", (("quantile", "0.99"),)) in during

        final = wait_for(port, child, lambda s: s.get(("mqttlab_run_finished", ())) == 1)
        summary = json.loads((out / "summary.json").read_text())
    finally:
        child.kill()
        child.wait(timeout=10)
    messages = summary["messages"]
    # The live counters are the engine's own: at the end they are the summary's.
    for kind in ("sent", "acked", "received", "dropped"):
        assert final[("mqttlab_messages_total", (("kind", kind),))] == messages[kind], kind
    assert during[("mqttlab_messages_total", (("kind", "sent"),))] <= messages["sent"]
    assert final[("mqttlab_deliveries_owed_total", ())] == messages["expected"]
    assert final[("mqttlab_messages_lost_total", ())] == messages["lost"]
    assert final[("mqttlab_deliveries_outstanding", ())] == messages["expected"] - messages["delivered"]
    e2e = summary["latency"]["e2e"]
    assert final[("mqttlab_e2e_latency_seconds", (("quantile", "0.99"),))] == pytest.approx(e2e["p99_us"] / 1e6)
    assert final[("mqttlab_e2e_latency_seconds", (("quantile", "0.5"),))] == pytest.approx(e2e["p50_us"] / 1e6)
    assert final[("mqttlab_generator_schedule_lag_p99_seconds", ())] == pytest.approx(summary["generator"]["schedule_lag_p99_us"] / 1e6)
    assert final[("mqttlab_generator_limited", ())] == int(summary["generator_limited"])
    assert final[("mqttlab_run_phase", (("phase", "done"),))] == 1


def test_a_busy_or_malformed_address_is_an_input_error():
    with pytest.raises(Exception, match="expected HOST:PORT"):
        parse_address("localhost")
    assert parse_address(":9464") == ("0.0.0.0", 9464)
    assert parse_address("[::1]:9464") == ("::1", 9464)


def exposed_names() -> set[str]:
    """Every sample name the exporter writes for a finished run inside a suite."""
    plan = plan_of(validate_scenario({}))
    state = RunState(plan, run="r", scenario="default", broker="rumqttd", owed_per_message=1.0)
    state.resources = type("Resources", (), {"current": lambda self: {"broker": {"cpu_cores": 0.1, "rss_bytes": 1e6}, "generator": {"cpu_cores": 0.2, "rss_bytes": 2e6}}})()
    snapshot = {"t_s": 1.0, "phase": "measuring", "connected": {"publishers": 10, "subscribers": 10, "held_back": 0},
                "total": {"sent": 10, "acked": 10, "received": 10, "dropped": 0, "errors": 0},
                "interval": {"sent": 10, "acked": 10, "received": 10, "e2e_p50_us": 300, "e2e_p99_us": 900}}
    state.update(snapshot)
    state.update(dict(snapshot, t_s=2.0))
    state.finish(realistic_summary())
    suite = {"suite": "s", "runs": 3, "done": 1, "failed": 0, "left": 2, "left_s": 30.0}
    server = MetricsServer("127.0.0.1:0", lambda: {"runs": [state.to_dict()], "suite": suite})
    text = generate_latest(server.registry).decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def test_every_metric_the_exporter_documents_is_exposed():
    names = exposed_names()
    for name in METRICS:
        assert name in names or f"{name}_total" in names, name


def test_the_grafana_dashboard_parses_and_its_panels_query_exposed_metrics():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["schemaVersion"], int)
    names = exposed_names()
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    queried = set()
    for panel in panels:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]) and panel["type"] in ("timeseries", "stat")
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["refId"]
            for metric in re.findall(r"\bmqttlab_[a-z0-9_]+", target["expr"]):
                assert metric in names, f"{panel['title']}: {metric} is not exposed"
                queried.add(metric)
    for variable in dashboard["templating"]["list"][1:]:
        assert re.search(r"label_values\((mqttlab_[a-z_]+), (\w+)\)", variable["query"]["query"]).group(1) in names
    # The list: rates, latency, loss, connections, generator lag and CPU, broker CPU/RSS, suite progress.
    for needed in ("mqttlab_rate_messages_per_second", "mqttlab_e2e_latency_recent_seconds", "mqttlab_deliveries_outstanding",
                   "mqttlab_connections", "mqttlab_generator_backlog_seconds", "mqttlab_publishers_held_back", "mqttlab_process_cpu_cores",
                   "mqttlab_process_rss_bytes", "mqttlab_suite_runs", "mqttlab_suite_time_left_seconds"):
        assert needed in queried, needed
