"""No figure or table of a report averages runs whose configurations differ (issue 12).

Real short round-trip runs against the embedded broker differ only in payload or in rate, all under
one scenario name (as `--set` or a hand-made `compare` produces). Runs under a bandwidth limit or
packet loss need root and namespaces, so those directories are copies of a real run whose
scenario.yaml got a network section, resolved by the scenario model exactly as a run writes it."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from mqttlab.analysis import compare_directories
from mqttlab.analysis.configuration import configuration, configuration_key, differing_fields
from mqttlab.reports import write_report_bundle
from mqttlab.reports.rtt import rtt_figures
from mqttlab.reports.sweep import sweep_figures
from mqttlab.planning import validate_scenario
from mqttlab.scenario import scenario_to_yaml

pytestmark = pytest.mark.slow

SCENARIO = {
    "name": "probe",
    "publishers": {"count": 1, "topic": "rtt/%i", "reply_filter": "rtt-reply/%i", "qos": 1},
    "subscribers": {"count": 1, "filters": ["rtt/%i"], "echo_topic": "rtt-reply/%i", "qos": 1},
    "load": {"duration": "1.5s", "warmup": "0.5s", "grace": "1s"},
}
# (directory, payload, rate): every run is a real one.
REAL = [("p100-r20-a", 100, 20), ("p100-r20-b", 100, 20), ("p1000-r20", 1000, 20), ("p100-r40", 100, 40)]
# (directory, copied from, network section): runs that would need root, written from real ones.
WRITTEN = [
    ("limit10k-r20-a", "p100-r20-a", {"rate": "10KB/s"}),
    ("limit10k-r20-b", "p100-r20-b", {"rate": "10KB/s"}),
    ("limit10k-r40", "p100-r40", {"rate": "10KB/s"}),
    ("limit1m-r20", "p100-r20-a", {"rate": "1MB/s"}),
    ("loss1-r20", "p100-r20-a", {"loss": "1%"}),
    ("loss10-r20", "p100-r20-b", {"loss": "10%"}),
]
# Directories that are repetitions of one configuration.
CONFIGURATIONS = [
    {"p100-r20-a", "p100-r20-b"}, {"p1000-r20"}, {"p100-r40"},
    {"limit10k-r20-a", "limit10k-r20-b"}, {"limit10k-r40"}, {"limit1m-r20"}, {"loss1-r20"}, {"loss10-r20"},
]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("grouping")
    for name, payload, rate in REAL:
        scenario = json.loads(json.dumps(SCENARIO))
        scenario["publishers"].update(payload=payload, rate=rate)
        source = root / f"{name}.yaml"
        source.write_text(yaml.safe_dump(scenario))
        done = subprocess.run([sys.executable, "-m", "mqttlab", "run", str(source), "--out", str(root / "runs" / name), "--json"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    for name, origin, network in WRITTEN:
        target = root / "runs" / name
        shutil.copytree(root / "runs" / origin, target)
        data = yaml.safe_load((target / "scenario.yaml").read_text())
        # the network section as the scenario model resolves it, the rest as the real run wrote it
        data["network"] = yaml.safe_load(scenario_to_yaml(validate_scenario({"network": network})))["network"]
        (target / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return root / "runs"


def _directory_sets(comparison) -> dict[str, set[str]]:
    return {scenario.scenario: {run.path.name for group in scenario.groups.values() for run in group.runs}
            for scenario in comparison.scenarios}


def test_each_configuration_is_its_own_group_with_its_own_repetitions(results):
    comparison = compare_directories([results])
    groups = _directory_sets(comparison)
    assert sorted(map(sorted, groups.values())) == sorted(map(sorted, CONFIGURATIONS))
    labels = {frozenset(runs): label for label, runs in groups.items()}
    # one name, so the label says what differs
    assert "payload.size=1000" in labels[frozenset({"p1000-r20"})]
    assert "network.rate=80kbit" in labels[frozenset({"limit10k-r40"})]
    assert "network=none" in labels[frozenset({"p100-r40"})] and "method" not in labels[frozenset({"limit10k-r40"})]
    assert "network.loss=10%" in labels[frozenset({"loss10-r20"})]
    for scenario in comparison.scenarios:
        for group in scenario.groups.values():
            assert len({configuration_key(run.results.scenario) for run in group.runs}) == 1
            assert group.estimates["latency_mean"].n == len(group.runs)


def test_no_table_of_the_report_averages_different_configurations(results, tmp_path):
    comparison = compare_directories([results])
    expected = {label: len(runs) for label, runs in _directory_sets(comparison).items()}
    paths = write_report_bundle(comparison, tmp_path)

    def rows(name):
        with paths[f"csv:{name}"].open() as handle:
            return list(csv.DictReader(handle))

    for name in ("summary", "paper_statistics", "rtt"):
        table = rows(name)
        assert {row["scenario"]: int(row["runs"]) for row in table} == expected, name
        assert len(table) == len(expected), name
    assert {row["scenario"]: int(row["n"]) for row in rows("comparison") if row["metric"] == "latency_mean"} == expected
    samples = {row["scenario"]: int(row["samples"]) for row in rows("latency")}
    for scenario in comparison.scenarios:
        (group,) = scenario.groups.values()
        assert samples[scenario.scenario] == sum(run.results.summary["latency"]["rtt"]["count"] for run in group.runs)
    rtt = {(row["payload_bytes"], row["rate_per_publisher"], row["limit_bytes_per_s"], row["loss_percent"]): int(row["runs"])
           for row in rows("rtt")}
    assert rtt == {
        ("100", "20.0", "", ""): 2, ("1000", "20.0", "", ""): 1, ("100", "40.0", "", ""): 1,
        ("100", "20.0", "10000.0", ""): 2, ("100", "40.0", "10000.0", ""): 1, ("100", "20.0", "1000000.0", ""): 1,
        ("100", "20.0", "", "1.0"): 1, ("100", "20.0", "", "10.0"): 1,
    }
    # The rate sweep: a line per configuration; the 20 msg/s point of the unlimited 100 B line holds
    # its own two runs, not the seven runs at 20 msg/s of every payload, limit and loss.
    sweep = rows("rate_sweep")
    points = Counter((row["shape"], row["line"], row["rate_per_publisher"]) for row in sweep)
    assert set(points.values()) == {1}
    assert sorted((row["shape"], row["rate_per_publisher"], int(row["runs"])) for row in sweep) == [
        ("1 pub → 1 sub, QoS 1", "20.0", 2), ("1 pub → 1 sub, QoS 1", "40.0", 1),
        ("1 pub → 1 sub, QoS 1, emulated link", "20.0", 2), ("1 pub → 1 sub, QoS 1, emulated link", "40.0", 1),
    ]
    assert len(sweep) == 4


def test_no_figure_puts_two_configurations_in_one_point(results):
    comparison = compare_directories([results])
    for _, figure in sweep_figures(comparison):
        for trace in figure.data:
            assert len(set(trace.x)) == len(trace.x)  # one point per rate on a line
            assert set(trace.customdata) <= {1, 2}
        names = [trace.name for trace in figure.data if trace.showlegend]
        assert len(names) == len(set(names))
    drawn = {figure_id: figure for figure_id, _, figure in rtt_figures(comparison)}
    assert {"rtt-qos-payload", "rtt-limit", "rtt-loss", "shark-fin-limit", "shark-fin-loss"} <= set(drawn)
    bars = [(trace.name, x, trace.xaxis) for figure_id in ("rtt-qos-payload", "rtt-limit", "rtt-loss")
            for trace in drawn[figure_id].data for x in trace.x]
    assert len(bars) == len(set(bars)) == 8  # every configuration one bar, none shared
    limit_bars = {(x, trace.xaxis): trace.customdata[i][0] for trace in drawn["rtt-limit"].data for i, x in enumerate(trace.x)}
    assert sorted(limit_bars.items()) == sorted({("10 KB/s", "x"): 2, ("1 MB/s", "x"): 1, ("10 KB/s", "x2"): 1}.items())


def test_the_grouping_key_ignores_what_identifies_a_run_and_keeps_what_configures_it():
    resolved = yaml.safe_load(scenario_to_yaml(validate_scenario(SCENARIO)))

    def run(**changes):
        data = json.loads(json.dumps(resolved))
        for path, value in changes.items():
            *parents, last = path.split("__")
            target = data
            for parent in parents:
                target = target[parent]
            target[last] = value
        return data

    first = run(broker="mqtts://127.0.0.1:8883?name=mosquitto&pid=1", tls__ca="/tmp/a/ca.pem")
    again = run(name="other", broker="mqtts://127.0.0.1:9999?name=mosquitto&pid=2", tls__ca="/tmp/b/ca.pem", load__seed=7,
                mqtt__username="broker-given", mqtt__password="secret")
    plain = run(broker="mqtt://127.0.0.1:1883")
    assert configuration_key(first) == configuration_key(again)
    assert differing_fields([configuration(first), configuration(plain)]) == ["tls.ca", "transport.tls"]
    assert differing_fields([configuration(first), configuration(run(publishers__qos=2))]) == [
        "publishers.qos", "tls.ca", "transport.tls"]
