"""`mqttlab capacity`: the objectives' grammar, the search's logic (on a known pass/fail boundary),
and searches of a real broker: a capped Mosquitto's knee found and bracketed, resumed from its
probes, and a search stopped by a deliberately starved generator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.brokers import get_launcher
from mqttlab.capacity.knee import limits_at_knee
from mqttlab.capacity.search import Search, Settings, clopper_pearson, round_rate
from mqttlab.capacity.slo import SloError, judge, parse_objective, parse_objectives
from mqttlab.cli.app import app
from mqttlab.engine import load_engine

# Searches for capacity and caps of CPU judge how fast things go: alone on the cores (Makefile).
pytestmark = pytest.mark.serial

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


# --- objectives ------------------------------------------------------------------------------


def test_objectives_read_any_percentile_histogram_and_share():
    p999 = parse_objective("puback.p999<=5ms")
    assert (p999.source, p999.metric, p999.op, p999.threshold) == ("puback", "p99.9", "<=", 5000)
    assert parse_objective("p99.99 < 1s").metric == "p99.99"
    assert parse_objective("p50<500us").threshold == 500
    assert parse_objective("delivered>=99.9%").threshold == pytest.approx(0.999)
    assert parse_objective("loss==0").kind == "share"
    assert parse_objective("lost<=3").kind == "count"


def test_every_bad_objective_is_named_at_once():
    with pytest.raises(SloError) as raised:
        parse_objectives(["p99<10", "latency<3ms", "disk.p99<1ms", "p99==3ms", "loss<=1.5", "p0<1ms", "p99<10ms"])
    problems = raised.value.problems
    assert len(problems) == 6
    assert all(problem.startswith("--slo '") for problem in problems)
    assert "needs a unit" in problems[0] and "unknown metric 'latency'" in problems[1] and "unknown latency 'disk'" in problems[2]


def test_objectives_judge_a_summary():
    summary = {"messages": {"sent": 990, "dropped": 10, "expected": 1000, "delivered": 998, "lost": 2}}
    assert judge(parse_objective("loss==0"), summary, {}).met is False
    assert judge(parse_objective("delivered>=0.998"), summary, {}).observed == pytest.approx(0.998)
    assert judge(parse_objective("dropped<=0.01"), summary, {}).met is True
    # No histogram: nothing to judge, so the objective is not met (never silently passed).
    missing = judge(parse_objective("p99<1s"), summary, {"histograms": {}})
    assert missing.met is False and missing.observed is None


# --- the search ------------------------------------------------------------------------------


@dataclass
class Trial:
    rate: float
    attempt: int
    met: bool
    generator_limited: bool = False


def _boundary(capacity: float, flaky_at: float | None = None, generator_from: float | None = None):
    """A prober whose broker meets the objectives below `capacity`; at `flaky_at` every second probe breaks them."""
    calls: list[Trial] = []

    def probe(rate: float, attempt: int) -> Trial:
        limited = generator_from is not None and rate >= generator_from
        met = rate < capacity and not (flaky_at is not None and rate == flaky_at and attempt % 2 == 0)
        calls.append(Trial(rate, attempt, met, limited))
        return calls[-1]

    return probe, calls


def test_a_message_rate_counts_only_if_it_was_sent_unless_the_objectives_bound_drops_themselves():
    from mqttlab.capacity.probe import ProbeSpec
    from mqttlab.capacity.runner import with_rate_offered

    messages = ProbeSpec(None, {}, (), 5, "4s", "1s")
    connects = ProbeSpec(None, {}, (), 5, "2s", "0s", knob="load.connect_rate")
    assert [o.text for o in with_rate_offered(messages, parse_objectives(["p99<30ms"]))] == ["p99<30ms", "dropped==0"]
    assert [o.text for o in with_rate_offered(messages, parse_objectives(["dropped<=0.01"]))] == ["dropped<=0.01"]
    assert [o.text for o in with_rate_offered(connects, parse_objectives(["failed==0"]))] == ["failed==0"]


def test_the_search_brackets_then_narrows_the_boundary_to_the_resolution():
    probe, calls = _boundary(3000)
    outcome = Search(Settings(start=100, max_rate=1e6, repeats=3, resolution=0.05), probe).run()
    assert outcome.status == "bracketed"
    assert outcome.lower < 3000 <= outcome.upper and outcome.upper / outcome.lower <= 1.05 + 0.01
    assert outcome.records[outcome.lower].passes == 3
    # The ladder went 100, 200, ... 3200 before narrowing.
    assert [c.rate for c in calls[:7]] == [100, 200, 400, 800, 1600, 3200, round_rate((1600 * 3200) ** 0.5)]
    ends = outcome.ends()
    assert ends["lower"]["met"] == 3 and ends["upper"]["broke"] == 1


def test_a_lower_end_that_breaks_on_a_repeat_moves_the_bracket_down():
    # 2,830 msg/s (between 2,000 and 4,000) passes once, then breaks on its confirming repeat.
    probe, _ = _boundary(3000, flaky_at=2830)
    outcome = Search(Settings(start=1000, max_rate=1e5, repeats=3, resolution=0.3), probe).run()
    assert outcome.status == "bracketed"
    assert outcome.upper == 2830 and outcome.records[2830].fails == 1
    assert 2000 <= outcome.lower < 2830 and outcome.records[outcome.lower].passes == 3


def test_a_broken_start_descends_and_an_unbroken_max_is_open():
    probe, _ = _boundary(300)
    assert Search(Settings(start=1000, max_rate=1e5, repeats=2, resolution=0.2), probe).run().upper <= 300 * 1.2 + 1
    probe, _ = _boundary(1e9)
    outcome = Search(Settings(start=1000, max_rate=5000, repeats=2, resolution=0.2), probe).run()
    assert (outcome.status, outcome.lower, outcome.upper) == ("above_max", 5000, None)


def test_a_generator_limit_stops_the_search_after_its_retries():
    probe, calls = _boundary(1e9, generator_from=4000)
    outcome = Search(Settings(start=1000, max_rate=1e6, repeats=2, generator_retries=1), probe).run()
    assert (outcome.status, outcome.lower, outcome.limited_at) == ("generator_limited", 2000, 4000)
    assert [c.rate for c in calls].count(4000) == 2  # the first probe and its one retry
    # "Above 2,000" is claimed as a capacity would be: 2,000 met the objectives in all its repeats.
    assert outcome.records[2000].passes == 2


@dataclass
class _KneeProbe:
    summary: dict
    manifest: dict


def _knee_probe(cpu_share: float, throttled_seconds: float, p99_us: float) -> _KneeProbe:
    summary = {"resources": {"broker": {"mean_cpu_share": cpu_share}}, "latency": {"e2e": {"p99_us": p99_us}},
               "messages": {"expected": 15000, "delivered": 15000, "sent": 3000}}
    manifest = {"broker": {"limits": {"cpus": 0.05, "periods": 32, "throttled_periods": 14, "throttled_seconds": throttled_seconds}}}
    return _KneeProbe(summary, manifest)


def test_a_broker_its_quota_held_off_is_cpu_limited_though_its_mean_share_is_below_the_quota():
    # Figures of a Mosquitto held to 0.05 of a core at its knee (1,000 msg/s): it used 78 % of its
    # quota on average, but ran out of it in bursts and waited 0.7 s of its 3.2 s.
    sustained = [_knee_probe(0.039, 0.0, 170)]
    limits = limits_at_knee(sustained, [_knee_probe(0.039, 0.696, 60159)])
    assert [item["limit"] for item in limits] == ["cpu", "queueing"], limits
    assert "held it off for 22% of its running time" in limits[0]["detail"]
    # The same mean share with the quota never reached is not a CPU limit.
    assert [item["limit"] for item in limits_at_knee(sustained, [_knee_probe(0.039, 0.0, 60159)])] == ["queueing"]


def test_a_broker_that_left_the_load_unread_is_named_as_back_pressure_at_its_knee():
    sustained = [_knee_probe(0.01, 0.0, 170)]
    broken = _knee_probe(0.01, 0.0, 200)
    broken.summary["generator"] = {"back_pressure_share": 0.3}
    limits = limits_at_knee(sustained, [broken])
    assert [item["limit"] for item in limits] == ["back_pressure"], limits
    assert "unread 30% of the publishers' connection time" in limits[0]["detail"]


def test_clopper_pearson_of_all_passes():
    low, high = clopper_pearson(3, 3, 0.95)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 3), rel=1e-6)


# --- the command -----------------------------------------------------------------------------


def test_every_bad_option_is_named_at_once():
    result = runner.invoke(app, ["capacity", "--slo", "p99<10", "--factor", "0.5", "--repeats", "0", "--warmup", "9s",
                                 "--set", "publishers.qos=7", "--broker", "mosquitto", "--brokers", "rumqttd"])
    assert result.exit_code == 2
    text = result.output
    for field in ("--slo 'p99<10'", "--factor", "--repeats", "--warmup", "publishers.qos", "--brokers"):
        assert field in text, field


def _mosquitto():
    launcher = get_launcher("mosquitto")
    if not launcher.availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")
    return launcher


QUICK = ["--pubs", "5", "--subs", "5", "--probe-duration", "3s", "--warmup", "1s", "--set", "load.grace=1s",
         "--repeats", "2", "--resolution", "0.4", "--generator-retries", "2", "--max-probes", "20"]


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroup limits need root")
def test_a_capped_mosquitto_is_bracketed_and_the_search_resumes_from_its_probes(tmp_path: Path):
    _mosquitto()
    out = tmp_path / "search"
    # Held to 0.05 of a core, Mosquitto's CPU quota runs out between 1,000 and 8,000 msg/s here,
    # and then messages wait out the throttled part of each 100 ms period: p99 jumps past 30 ms.
    # Two engine threads: near the knee the throttled broker delivers in bursts, and one thread
    # handling a burst would send late (generator-limited) at the very rates the search needs.
    command = ["capacity", "--broker", "mosquitto", "--set", "launch.limits.cpus=0.05", "--set", "options.threads=2",
               "--slo", "p99<30ms", "--slo", "loss==0",
               "--start", "500", "--max-rate", "32000", *QUICK, "--out", str(out)]
    first = runner.invoke(app, command)
    report = json.loads((out / "capacity.json").read_text())
    if report["status"] == "generator_limited":
        pytest.skip(f"this host's generator was limited (a busy shared host): {report['generator']['reasons']}")
    assert first.exit_code == 0, first.output
    assert report["status"] == "bracketed"
    lower, upper = report["interval_per_s"]
    assert lower == report["capacity_per_s"] and lower < upper <= lower * 1.4 + 1
    # Which engine and broker build measured it, from the probes' manifests.
    assert report["provenance"] == {"engine_commits": [load_engine().__commit__], "builds": [{"source": "Debian package mosquitto"}]}
    assert report["ends"]["lower"]["met"] == 2 and report["ends"]["upper"]["broke"] >= 1
    assert any(item["limit"] == "cpu" for item in report["limited_by"]), report["limited_by"]
    assert (out / "curve.png").stat().st_size > 10_000
    rows = (out / "curve.csv").read_text().splitlines()
    assert rows[0].startswith("broker,offered_per_s") and len(rows) - 1 == len({p["rate_per_s"] for p in report["probes"]})
    # Again, the same command: every probe is read back, none is run.
    again = runner.invoke(app, command)
    assert again.exit_code == 0 and "(kept)" in again.output
    resumed = json.loads((out / "capacity.json").read_text())
    assert resumed["interval_per_s"] == report["interval_per_s"] and all(p["reused"] for p in resumed["probes"])
    # The directory belongs to its scenario: another shape is refused, not mixed in.
    other = runner.invoke(app, [*command, "--qos", "0"])
    assert other.exit_code == 2 and "another scenario" in other.output


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroup limits need root")
def test_a_starved_generator_stops_the_search_and_says_so(tmp_path: Path):
    from mqttlab.brokers.limits import BrokerCgroup, BrokerLimits

    launcher = _mosquitto()
    # The broker runs free, outside; the command (the generator) is held to 0.1 of a core, so its
    # sends fall behind their schedule by tens of milliseconds whenever its quota runs out.
    with launcher.start(tmp_path / "broker") as broker:
        starved = BrokerCgroup(BrokerLimits(cpus=0.1), "starved-generator")
        try:
            command = starved.wrap([sys.executable, "-m", "mqttlab", "capacity", "--broker", f"mqtt://127.0.0.1:{broker.port}",
                                    "--slo", "p99<50ms", "--start", "4000", *QUICK, "--generator-retries", "1",
                                    "--out", str(tmp_path / "search")])
            done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT / "python"), COLUMNS="200"))
            throttled = starved.outcome()
        finally:
            starved.remove()
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "search" / "capacity.json").read_text())
    assert report["status"] == "generator_limited" and report["generator"]["limited_at_per_s"] == 4000
    assert "this host's generator is the limit" in done.stdout and "options.timer_resolution" in done.stdout and "--dask" in done.stdout
    assert all(p["generator_limited"] for p in report["probes"]) and len(report["probes"]) == 2
    assert throttled["throttled_periods"] > 0
    # Late by the throttled part of its quota's periods, well beyond a busy host's few milliseconds.
    lags = [json.loads((tmp_path / "search" / p["directory"] / "summary.json").read_text())["generator"]["schedule_lag_p99_us"]
            for p in report["probes"]]
    assert min(lags) > 10_000, lags


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroup limits need root")
def test_a_launched_broker_that_resets_the_first_probe_has_its_limit_searched_below_it(tmp_path: Path):
    from mqttlab.brokers.base import free_ports

    _mosquitto()
    # Within 4 MiB Mosquitto holds about 1,000 connections here and resets the rest: the first
    # probe's 4,000 are refused, yet the broker was up before the load, so that is its limit.
    out = tmp_path / "search"
    result = runner.invoke(app, ["capacity", "--broker", "mosquitto", "--of", "connections", "--set", "launch.limits.memory=4MiB",
                                 "--slo", "failed==0", "--start", "4000", "--max-rate", "4000", "--repeats", "1", "--resolution", "0.5",
                                 "--probe-duration", "1s", "--warmup", "0s", "--out", str(out)])
    report = json.loads((out / "capacity.json").read_text())
    assert result.exit_code in (0, 1), result.output
    first = report["probes"][0]
    assert (first["rate_per_s"], first["met"], first["status"]) == (4000, False, "failed"), first
    assert report["status"] == "bracketed" and report["capacity_per_s"] < 4000, report["status"]
    assert [item["limit"] for item in report["limited_by"]] == ["refused"], report["limited_by"]
    # Given by URL, a broker that refuses the first probe is not there: one line, exit 3.
    (port,) = free_ports(1)
    absent = runner.invoke(app, ["capacity", "--broker", f"mqtt://127.0.0.1:{port}", "--slo", "p99<50ms", "--start", "100",
                                 "--probe-duration", "1s", "--warmup", "0s", "--out", str(tmp_path / "absent")])
    assert absent.exit_code == 3 and "cannot connect" in absent.output, absent.output


def test_a_reconnect_storm_brings_every_client_back_into_its_session(tmp_path: Path):
    _mosquitto()
    out = tmp_path / "storm"
    result = runner.invoke(app, ["storm", "--broker", "mosquitto", "--clients", "100", "--at", "3s", "--duration", "8s", "--out", str(out)])
    report = json.loads((out / "storm.json").read_text())
    assert result.exit_code == 0, result.output
    # Every connection was reset (ss -K) and came back, as the kernel's count of the broker's
    # established connections shows; Mosquitto keeps persistent sessions across reconnects.
    assert report["fault"]["torn_down"] == 100 and report["all_back"]
    # At once: one `ss -K` for all of them, so (nearly) none is left connected in between.
    assert report["fault_lasted_s"] < 1 and report["fewest_connected"] < 50, report
    assert report["reconnected"] == 100 and report["sessions_resumed"] == 100
    assert report["verdict"] == "kept: no message lost" and report["messages"]["lost"] == 0
    assert report["canary_connack_ms_before"]["count"] > 5
    assert (out / "run" / "manifest.json").is_file()
    # The sends that fell due while their publishers were away are in the summary with the rest.
    dropped = json.loads((out / "run" / "summary.json").read_text())["messages"]["dropped"]
    assert report["messages"]["dropped"] == dropped
    assert f"{dropped} sends dropped, not sent (due while their publisher was away, or its QoS window full)" in " ".join(result.output.split())


def test_storm_options_are_checked_together():
    result = runner.invoke(app, ["storm", "--fault", "flood", "--clients", "1", "--at", "0s"])
    assert result.exit_code == 2
    assert all(field in result.output for field in ("--fault", "--clients", "--at"))


def test_the_standard_scenarios_run_quick(tmp_path: Path):
    _mosquitto()
    out = tmp_path / "standard"
    result = runner.invoke(app, ["standard", "--broker", "mosquitto", "--quick", "--scale", "0.1", "--max-probes", "3", "--out", str(out)])
    assert result.exit_code in (0, 1), result.output
    rows = json.loads((out / "standard.json").read_text())["families"]
    assert [row["scenario"] for row in rows] == ["p2p-1-topics-1-pubs-1-subs", "fan-in-2-topics-2-pubs-1-sub", "fan-out-1-topic-1-pub-2-subs",
                                                 "shared-1-topics-1-pubs-1-subs", "connections-100"]
    for row in rows:
        report = json.loads((out / row["scenario"] / "capacity.json").read_text())
        assert report["status"] == row["status"] and report["probes"], row
        # Each family answers, or says why not: the generator (on a busy host) or the probe budget.
        assert row["status"] in ("bracketed", "above_max", "generator_limited", "probe_budget"), row
        if row["status"] == "bracketed" and row["unit"] == "msg/s":
            assert row["at_fraction"]["rate"] <= row["capacity"] * 0.5 + 1
    connections = rows[-1]
    assert connections["unit"] == "connections" and connections["slo"] == ["failed==0", "connack.p99<200ms"]


def test_a_standard_capacity_whose_own_probe_at_half_broke_the_slo_says_so(tmp_path: Path):
    _mosquitto()
    out = tmp_path / "standard"
    # An SLO Mosquitto breaks below what this host's generator can offer, so that the search brackets.
    command = ["standard", "--broker", "mosquitto", "--family", "fan-in", "--quick", "--slo", "p99<1ms", "--slo", "loss==0", "--out", str(out)]
    first = runner.invoke(app, command)
    # Each probe says which family it searches.
    assert "  fan-in-20-topics-20-pubs-1-sub: probe 500 #1: " in first.output, first.output
    (row,) = json.loads((out / "standard.json").read_text())["families"]
    if row["status"] != "bracketed" or row["at_fraction"]["generator_limited"]:
        pytest.skip(f"no clean bracket on this host now: {row['status']}")
    # The probe at half the capacity as a broker losing 3 of its messages would have left it; the
    # same command resumes from the kept probes and judges them again.
    (kept,) = (out / row["scenario"] / "at-fraction" / "probes").iterdir()
    summary = json.loads((kept / "summary.json").read_text())
    summary["messages"].update(lost=3, delivered=summary["messages"]["delivered"] - 3)
    (kept / "summary.json").write_text(json.dumps(summary))
    again = runner.invoke(app, command)
    shown = " ".join(again.output.split())
    assert again.exit_code == 1, again.output
    assert "its own probe at 50% broke the SLO (" in shown and "this capacity is not clean" in shown, again.output
    assert f"loss = {3 / summary['messages']['expected']:.4g} (loss==0: broken)" in shown.split("its own probe at 50%")[1]
    (row,) = json.loads((out / "standard.json").read_text())["families"]
    assert row["at_fraction"]["met"] is False


def test_a_connect_rate_search_and_its_place_in_compare_and_the_report(tmp_path: Path):
    _mosquitto()
    out = tmp_path / "connect"
    result = runner.invoke(app, ["capacity", "--of", "connect-rate", "--broker", "mosquitto", "--subs", "300", "--slo", "connack.p99<1s",
                                 "--slo", "failed==0", "--start", "500", "--max-rate", "1000", "--probe-duration", "1s", "--warmup", "0s",
                                 "--repeats", "1", "--out", str(out)])
    report = json.loads((out / "capacity.json").read_text())
    # 300 connections at 500-1,000/s are far from Mosquitto's limit: the search runs out of room, open above.
    assert result.exit_code == 1, result.output
    assert (report["status"], report["unit"], report["capacity_per_s"]) == ("above_max", "conn/s", 1000)
    probe = report["probes"][0]
    assert probe["checks"][0]["observed"] > 0 and (out / probe["directory"] / "histograms" / "connack.hdr").is_file()
    compared = runner.invoke(app, ["compare", str(out), "--out", str(tmp_path / "report"), "--no-png"])
    assert compared.exit_code == 0, compared.output
    assert "capacity of mosquitto (connack.p99<1s, failed==0): 1000 conn/s open, above_max" in compared.output
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Capacity</h2>" in page and "data:image/png;base64," in page


def test_brackets_set_brokers_apart_only_when_disjoint_and_are_never_called_significant(tmp_path: Path):
    from mqttlab.capacity.report import differences
    from mqttlab.capacity.runner import CapacityReport
    from mqttlab.capacity.search import Outcome
    from mqttlab.reports.capacity import capacity_lines

    def report(broker: str, status: str, lower: float | None, upper: float | None) -> CapacityReport:
        return CapacityReport(broker, tmp_path, Outcome(status, lower, upper), [])

    a, b, c = report("a", "bracketed", 1000, 1100), report("b", "bracketed", 1100, 1210), report("c", "bracketed", 1050, 1150)
    d = report("d", "generator_limited", 1050, None)
    found = {tuple(x["brokers"]): x for x in differences([a, b, c, d])}
    assert found[("a", "b")]["apart"] and found[("a", "b")]["higher"] == "b"
    # One search per broker: an order seen once, said as such and never as significant.
    assert found[("a", "b")]["statement"].startswith("brackets apart: b sustained 1100")
    assert all("significant" not in x or x["significant"] is False for x in found.values())
    assert all("not a significance test" in x["statement"] for x in found.values() if x["apart"])
    assert not found[("a", "c")]["apart"] and not found[("b", "c")]["apart"]
    # An open bracket (the generator's limit) cannot be shown lower than anything above its floor.
    assert not found[("b", "d")]["apart"] and found[("a", "d")]["apart"] is False
    row = {"broker": "a", "slo": "p99<10ms", "capacity": 1000.0, "lower": 1000.0, "upper": 1100.0, "unit": "msg/s", "status": "bracketed",
           "limited_by": "", "verification": ""}
    assert capacity_lines([row]) == ["capacity of a (p99<10ms): 1000 msg/s bracket [1000, 1100], bracketed"]


@pytest.mark.serial
def test_the_same_quick_pass_gives_the_same_verdicts_twice(tmp_path: Path):
    # A quick probe is short: its generator-limited flag must rest on evidence (a count of late
    # sends, not one pause of the host), so that two passes on a quiet host answer alike. Fan-in,
    # the family whose answer once moved from "above 1,000" to "above 32,000 msg/s" between passes.
    _mosquitto()
    verdicts = []
    for attempt in ("first", "second"):
        out = tmp_path / attempt
        result = runner.invoke(app, ["standard", "--broker", "mosquitto", "--quick", "--scale", "0.1", "--max-probes", "3",
                                     "--family", "fan-in", "--out", str(out)])
        assert result.exit_code in (0, 1), result.output
        rows = json.loads((out / "standard.json").read_text())["families"]
        verdicts.append({row["scenario"]: row["status"] for row in rows})
    assert verdicts[0] == verdicts[1]
    assert "generator_limited" not in verdicts[0].values(), verdicts
