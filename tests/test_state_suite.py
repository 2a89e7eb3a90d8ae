"""The built-in suite `state` on real brokers (Mosquitto and NanoMQ on loopback): each state
workload runs on each broker and the report holds one table per workload, the figures and every
promise's verdict with its count; docs/state.md's measured tables have the columns the suite's
command writes. And a suite case that starts from a scenario file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path


import pytest
import yaml

from mqttlab.brokers import get_launcher
from mqttlab.suite import SuiteError, expand_suite, load_suite

ROOT = Path(__file__).resolve().parent.parent
BROKERS = ("mosquitto", "nanomq")


def _tables(markdown: str) -> dict[str, list[list[str]]]:
    """Each Markdown table under its `### name` heading: the header, then the rows (the rule line left out)."""
    tables: dict[str, list[list[str]]] = {}
    name = ""
    for line in markdown.splitlines():
        if line.startswith("#"):
            name = line[4:].strip() if line.startswith("### ") else ""
        elif line.startswith("| ") and name:
            tables.setdefault(name, []).append([cell.strip() for cell in line.strip("|").split("|")])
    return tables


@pytest.mark.slow
def test_the_state_suite_tables_each_workload_with_its_verdicts(tmp_path: Path):
    for broker in BROKERS:
        if not get_launcher(broker).availability().available:
            pytest.skip(f"{broker} is not installed (scripts/install-brokers.sh installs it)")
    out = tmp_path / "state"
    command = [sys.executable, "-m", "mqttlab", "suite", "run", "state", "--brokers", ",".join(BROKERS), "--quick",
               "--set", "load.grace=1s", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:] + _failed_logs(out)
    assert f"state tables: {out / 'report' / 'state.md'}" in done.stderr.replace("\n", "")  # a long path is wrapped
    tables = _tables((out / "report" / "state.md").read_text())
    assert list(tables) == ["offline-sessions", "retained-read", "wills"]
    rows = {name: {row[0].split()[0]: dict(zip(table[0], row)) for row in table[1:]} for name, table in tables.items()}
    for name in tables:
        assert sorted(rows[name]) == sorted(BROKERS), rows[name]
    offline, retained, wills = rows["offline-sessions"]["mosquitto"], rows["retained-read"]["mosquitto"], rows["wills"]["mosquitto"]
    # Mosquitto keeps every promise, each verdict with the count that kept it.
    delivered, owed = _of(offline["held messages delivered"])
    assert offline["sessions resumed"] == "5/5" and offline["persistent session kept"] == "kept (5)"
    assert owed > 100 and delivered == owed and offline["queued messages delivered"] == f"kept ({owed})"
    assert re.fullmatch(r"[\d.,]+ / [\d.,]+", offline["drain ms p50 / p99"]) and offline["drain msg/s p50"] != "—"
    # About 1,000 messages of 64 B held: the broker's RSS rise per message, the payload and its bookkeeping.
    assert 64 < int(offline["B per queued message"].replace(",", "")) < 10_000
    assert retained["retained values delivered"] == "4,000 of 4,000" and retained["retained value is the latest"] == "kept (4000)"
    assert re.fullmatch(r"[\d.,]+ / [\d.,]+", retained["SUBSCRIBE → all ms p50 / p99"])
    assert wills["wills delivered"] == "25 of 25" and wills["will delivered on an ungraceful exit"] == "kept (25)"
    assert re.fullmatch(r"[\d.]+ / [\d.]+", wills["exit → will ms p50 / max"])
    # NanoMQ as configured here resumes the sessions but keeps no queue: the broken promise is
    # named with its count.
    nanomq = rows["offline-sessions"]["nanomq"]
    delivered, owed = _of(nanomq["held messages delivered"])
    assert nanomq["persistent session kept"] == "kept (5)" and delivered < owed
    assert nanomq["queued messages delivered"] == f"broken ({delivered}, queued_lost {owed - delivered})"
    # The report page and the CSVs carry the same tables, the rules printed under them.
    page = (out / "report" / "report.html").read_text()
    assert "The state the brokers kept" in page and "finds its session present" in page
    assert (out / "report" / "state_wills.csv").read_text().splitlines()[0].startswith("broker,wills delivered,")
    # docs/state.md's measured tables are this command's: the same columns, table by table.
    documented = _tables((ROOT / "docs" / "state.md").read_text())
    for name, table in tables.items():
        assert documented[name][0] == table[0], name


@pytest.mark.slow
def test_rmqtt_keeps_every_state_promise_of_the_suite(tmp_path: Path):
    # CI does not build RMQTT (a long cargo build): skipped there, run where it is installed.
    if not get_launcher("rmqtt").availability().available:
        pytest.skip("rmqtt is not installed (mqttlab brokers install rmqtt: a long cargo build)")
    out = tmp_path / "state"
    command = [sys.executable, "-m", "mqttlab", "suite", "run", "state", "--brokers", "rmqtt", "--quick", "--set", "load.grace=1s",
               "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:] + _failed_logs(out)
    rows = {name: dict(zip(table[0], table[1])) for name, table in _tables((out / "report" / "state.md").read_text()).items()}
    offline, retained, wills = rows["offline-sessions"], rows["retained-read"], rows["wills"]
    assert offline["broker"].startswith("rmqtt ") and offline["persistent session kept"] == "kept (5)"
    delivered, owed = _of(offline["held messages delivered"])
    # Its tuned queue (max_mqueue_len 1,000,000) holds the ~200 a session is owed: none dropped by
    # limit. Once, in the parallel test run of 27 November, RMQTT did not resend the one message a
    # session owed that had been published as its subscriber left (1,002 of 1,003; passing alone):
    # a broken promise, which the row must name with its count; allowed here up to one a session.
    lost = owed - delivered
    assert owed > 100 and 0 <= lost <= 5
    assert offline["queued messages delivered"] == (f"kept ({owed})" if lost == 0 else f"broken ({delivered}, queued_lost {lost})")
    assert retained["retained values delivered"] == "4,000 of 4,000" and retained["retained flag set"] == "kept (4000)"
    assert wills["wills delivered"] == "25 of 25" and wills["copies"] == "0"


def _failed_logs(suite: Path) -> str:
    """The end of each failed run's log: why it failed, for the assertion's message."""
    runs = json.loads((suite / "runs.json").read_text())["runs"]
    return "".join(f"\n{run['id']}: {(suite / run['directory'] / 'run.log').read_text()[-1500:]}" for run in runs if run["status"] == "failed")


def _of(text: str) -> tuple[int, int]:
    """`1,000 of 1,004` -> (1000, 1004)."""
    done, owed = text.replace(",", "").split(" of ")
    return int(done), int(owed)


def test_a_suite_case_starts_from_a_scenario_file(tmp_path: Path):
    (tmp_path / "base.yaml").write_text("name: not-kept\npublishers: {count: 3, rate: 5}\nload: {duration: 2s}\n")
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({"scenarios": {"from-file": {"scenario_file": "base.yaml", "publishers": {"rate": 7}}}}))
    (run,) = expand_suite(load_suite(str(suite_file)))
    # The file's keys, the case's own over them, the case's name.
    assert run.scenario["publishers"] == {"count": 3, "rate": 7} and run.scenario["load"] == {"duration": "2s"}
    assert run.scenario_name == "from-file"


def test_unreadable_scenario_files_of_a_suite_are_named_together(tmp_path: Path):
    (tmp_path / "list.yaml").write_text("- 1\n")
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({"scenarios": {"gone": {"scenario_file": "missing.yaml"}, "listed": {"scenario_file": "list.yaml"}}}))
    with pytest.raises(SuiteError) as raised:
        load_suite(str(suite_file))
    paths = [problem.path for problem in raised.value.problems]
    assert paths == ["scenarios.gone.scenario_file", "scenarios.listed.scenario_file"], raised.value.problems
