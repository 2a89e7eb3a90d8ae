"""First contact, second pass (issue 28): defaults that follow what the user set, errors that say
how to fix them before anything starts, nothing half-written, a run that says what it does.
Each test is one finding of the issue, through the command line as a newcomer types it."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from mqttlab.planning import load_scenario, validate_scenario
from mqttlab.scenario import ScenarioError

cli_app._register()
ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--pubs", "1", "--subs", "1", "--rate", "20"]  # a real run, as small as can still mean something


def invoke(*args: str):
    return CliRunner().invoke(cli_app.app, list(args))


def said(result) -> str:
    """The command's output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def summary_of(directory: Path) -> dict:
    return json.loads((directory / "summary.json").read_text())


# --- 1. defaults that follow ---------------------------------------------------------------


@pytest.mark.parametrize("duration, warmup", [("1s", 0.2), ("2s", 0.4), ("3s", 0.6), ("10s", 2.0), ("1m", 2.0)])
def test_the_default_warmup_fits_the_duration_the_user_set(duration: str, warmup: float):
    scenario = load_scenario(None, overrides={"load.duration": duration})
    assert scenario.load.warmup == warmup
    assert ("load.warmup" in scenario.defaults_followed) == (warmup != 2.0)


def test_a_one_second_run_works_and_says_the_warmup_it_chose(tmp_path: Path):
    out = tmp_path / "run"
    result = invoke("run", "--duration", "1s", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output  # 1 only for findings a loaded host can cause
    assert "(0.2 s warm-up)" in said(result) and "warm-up 0.2s, a fifth of load.duration 1s" in said(result)
    summary = summary_of(out)
    assert summary["warmup_s"] == pytest.approx(0.2) and summary["measured_s"] == pytest.approx(0.8, abs=0.1)


def test_a_warmup_too_long_for_the_duration_names_the_flag():
    result = invoke("run", "--duration", "1s", "--warmup", "2s")
    assert result.exit_code == 2
    assert "load.warmup (--warmup): must be shorter than load.duration (2s >= 1s): a shorter --warmup" in said(result)


def test_the_readme_says_the_warmup_is_inside_the_duration():
    readme = (ROOT / "README.md").read_text()
    assert "10 s after a 2 s warm-up" not in readme
    assert "for 10 s, of which the first 2 s are a warm-up: 8 s measured" in readme


def test_a_payload_too_small_for_the_header_is_measured_by_topic_sequence(tmp_path: Path):
    assert validate_scenario({"publishers": {"payload": 1}}).publishers.measure == "topic-sequence"
    assert validate_scenario({"publishers": {"payload": 16}}).publishers.measure == "header"
    out = tmp_path / "run"
    result = invoke("run", "--size", "1", "--duration", "1s", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    assert "measured by topic and sequence number, not the 16-byte header (payloads under 16 B" in said(result)
    summary = summary_of(out)
    assert summary["measurement"]["method"] == "topic-sequence" and summary["messages"]["lost"] == 0
    assert "at least 16" not in invoke("run", "--help").output


def test_closed_loop_from_the_command_line_drops_the_files_rate(tmp_path: Path):
    scenario = load_scenario(ROOT / "scenarios" / "default.yaml", assignments=["publishers.arrival=closed", "publishers.rate=null"])
    assert scenario.publishers.arrival == "closed" and "rate" not in scenario.publishers.model_fields_set
    out = tmp_path / "run"
    result = invoke("run", str(ROOT / "scenarios" / "default.yaml"), "--arrival", "closed", "--duration", "1s", "--warmup", "200ms",
                    "--pubs", "1", "--subs", "1", "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    assert "closed loop" in said(result) and summary_of(out)["messages"]["sent"] > 0
    refused = invoke("run", "--arrival", "closed", "--rate", "50")  # a rate the user gave with closed loop is still an error
    assert refused.exit_code == 2 and "--set publishers.rate=null" in said(refused)


@pytest.mark.parametrize("args", [["--tls"], ["--insecure"], [str(ROOT / "scenarios" / "tls.yaml")]])
def test_tls_with_a_launched_broker_is_one_flag(tmp_path: Path, args: list[str]):
    from mqttlab.brokers import get_launcher

    if not get_launcher("mosquitto").find():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh)")
    out = tmp_path / "run"
    # The file's own warm-up (2s) is the user's: a shorter run says so (--warmup).
    result = invoke("run", *args, "--broker", "mosquitto", "--duration", "1s", "--warmup", "200ms", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    assert "at mqtts://127.0.0.1:" in said(result)
    assert summary_of(out)["latency"]["tls"]["count"] == 2


def test_tls_with_a_broker_url_points_to_mqtts():
    result = invoke("run", "--broker", "mqtt://127.0.0.1:1883", "--tls")
    assert result.exit_code == 2 and "for a broker given by URL, write mqtts://HOST:PORT (with --ca FILE, or --insecure)" in said(result)


def test_a_ca_file_with_a_launched_broker_points_to_tls(tmp_path: Path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not read: refused before")
    result = invoke("run", "--broker", "mosquitto", "--ca", str(ca), "--out", str(tmp_path / "run"))
    assert result.exit_code == 2 and "use --tls (launch.tls: true)" in said(result)
    assert not (tmp_path / "run").exists()


# --- 2. errors that say how to fix them, before anything is launched -------------------------


@pytest.mark.parametrize("args, says", [
    (["--broker", "aedes", "--mqtt-version", "5"], "mqtt.version (--mqtt-version): aedes speaks MQTT 3.1.1, not 5"),
    (["--broker", "rabbitmq", "-V", "5"], "rabbitmq speaks MQTT 3.1, 3.1.1, not 5 (`mqttlab brokers list`); use --mqtt-version 3"),
    (["--broker", "rsmb", "--tls"], "launch.tls: rsmb has no TLS listener"),
    (["--broker", "nosuch"], "broker (--broker): unknown broker 'nosuch'"),
])
def test_what_a_launched_broker_cannot_serve_is_refused_before_it_starts(tmp_path: Path, args: list[str], says: str):
    out = tmp_path / "run"
    result = invoke("run", *args, "--out", str(out))
    assert result.exit_code == 2 and says in result.output
    assert not out.exists()


def test_scenario_validate_refuses_what_run_refuses(tmp_path: Path):
    file = tmp_path / "v5.yaml"
    file.write_text("broker: aedes\nmqtt: {version: 5}\n")
    result = invoke("scenario", "validate", str(file))
    assert result.exit_code == 2 and "mqtt.version: aedes speaks MQTT 3.1.1, not 5" in said(result)


@pytest.mark.parametrize("brokers", [["--broker", "mosquitto", "--broker", "aedes"], ["--broker", "mosquitto,aedes"]])
def test_several_brokers_in_run_point_to_suite_and_compare(brokers: list[str]):
    result = invoke("run", *brokers)
    assert result.exit_code == 2
    assert "`run` measures one broker (got mosquitto, aedes)" in said(result)
    assert "suite run SUITE --brokers mosquitto,aedes" in said(result) and "mqttlab compare" in said(result)


def test_a_set_without_equals_is_refused_not_taken_for_the_scenario_file():
    result = invoke("run", "--set", "publishers.qos", "2")
    assert result.exit_code == 2
    assert "error: --set publishers.qos: expected KEY=VALUE without spaces, e.g. --set publishers.qos=2" in said(result)
    assert "file not found" not in result.output


def test_qos_3_is_reported_once():
    result = invoke("run", "--qos", "3")
    assert result.exit_code == 2 and result.output.count("must be 0, 1 or 2") == 1 and "(--qos)" in said(result)


@pytest.fixture
def http_peer() -> Iterator[int]:
    """A TCP peer that answers anything with an HTTP error, as a web server on the port would."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_a_peer_that_is_not_mqtt_is_named_as_such(tmp_path: Path, http_peer: int):
    url = f"mqtt://127.0.0.1:{http_peer}"
    result = invoke("run", "--broker", url, "--duration", "1s", *SMALL, "--out", str(tmp_path / "run"))
    assert result.exit_code == 3
    assert f"the peer at {url} answered with something that is not MQTT (looks like HTTP)" in said(result)


def test_an_unknown_ca_suggests_ca_or_insecure(tmp_path: Path):
    from mqttlab.brokers import get_launcher

    launcher = get_launcher("mosquitto")
    if not launcher.find():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh)")
    with launcher.start(tmp_path / "broker", tls=True) as broker:
        result = invoke("run", "--broker", broker.url(tls=True), "--duration", "1s", *SMALL, "--out", str(tmp_path / "run"))
    assert result.exit_code == 3
    assert "unknown CA; give its CA with --ca FILE (tls.ca), or --insecure (tls.insecure) to skip verification" in said(result)


def test_a_set_to_null_removes_what_the_file_set():
    with pytest.raises(ScenarioError, match="publishers.rate: is not used with publishers.arrival: closed"):
        load_scenario(ROOT / "scenarios" / "default.yaml", assignments=["publishers.arrival=closed"])


# --- 3. nothing half-written, nothing lost ---------------------------------------------------


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_run_that_never_started_leaves_no_directory(tmp_path: Path):
    out = tmp_path / "run"
    result = invoke("run", "--broker", f"mqtt://127.0.0.1:{closed_port()}", "--duration", "1s", *SMALL, "--out", str(out))
    assert result.exit_code == 3 and not out.exists()


def test_nor_from_the_python_api(tmp_path: Path):
    import mqttlab
    from mqttlab.session import RunFailed

    out = tmp_path / "run"
    with pytest.raises(RunFailed):
        mqttlab.run(broker=f"mqtt://127.0.0.1:{closed_port()}", set={"load.duration": "1s", "publishers.count": 1}, out=out)
    assert not out.exists()


def test_a_failed_run_that_keeps_something_says_failed_not_running(tmp_path: Path):
    from mqttlab.live.state import read_live
    from mqttlab.session import RunFailed, execute

    out = tmp_path / "run"
    (out / "broker").mkdir(parents=True)
    (out / "broker" / "broker.log").write_text("a launched broker's log, worth keeping\n")
    scenario = load_scenario(None, overrides={"broker": f"mqtt://127.0.0.1:{closed_port()}", "load.duration": "1s", "publishers.count": 1})
    with pytest.raises(RunFailed):
        execute(scenario, out)
    live = read_live(out)
    assert live is not None and live["status"] == "failed" and "cannot connect" in live["error"]
    watched = invoke("report", "--watch", str(out), "--interval", "0.1")
    assert watched.exit_code == 4 and "failed before its results were written: cannot connect" in said(watched)


def test_report_watch_ends_on_a_run_whose_process_is_gone(tmp_path: Path):
    from mqttlab.live.state import write_live

    write_live(tmp_path, {"format": "mqttlab-live/1", "status": "running", "updated_unix": 1.0, "snapshot": {}, "progress": None})
    watched = invoke("report", "--watch", str(tmp_path), "--interval", "0.1")
    assert watched.exit_code == 4 and "stopped updating its live.json" in said(watched)
    assert "report --watch" not in invoke("report", str(tmp_path)).output  # stale, not "still under way"


@pytest.mark.parametrize("where", ["/sys/kernel/mqttlab-x", "read-only"])
def test_an_out_that_cannot_be_written_is_refused_before_anything_starts(tmp_path: Path, where: str):
    import os
    import subprocess

    if where == "read-only":
        if os.geteuid() != 0:
            pytest.skip("mounting a read-only tmpfs needs root")
        mount = tmp_path / "ro"
        mount.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(mount)], check=True)
        where = str(mount / "run")
    try:
        result = invoke("run", "--broker", "mosquitto", "--out", where)
    finally:
        if where.startswith(str(tmp_path)):
            subprocess.run(["umount", str(tmp_path / "ro")], check=True)
    assert result.exit_code == 2
    assert said(result).startswith(f"error: --out {where}: cannot write the results there (")
    assert "Traceback" not in result.output and "mosquitto" not in said(result).split("error:")[0]


def test_a_disk_that_fills_while_writing_keeps_the_summary_and_says_incomplete(tmp_path: Path):
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a 48 KiB tmpfs needs root")
    disk = tmp_path / "small"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(disk)], check=True)
    try:
        out = disk / "run"
        result = invoke("run", "--duration", "2s", "--pubs", "2", "--subs", "2", "--rate", "20", "--out", str(out))
        assert result.exit_code == 4
        text = said(result)
        assert "status: completed" in text and "e2e" in text  # the figures are shown all the same
        assert "No space left on device; the figures above were measured but not all kept" in text
        assert (out / "summary.json").is_file() and not (out / "manifest.json").exists()
        for command in (["report", str(out)], ["report", "--watch", str(out), "--interval", "0.1"]):
            reported = invoke(*command)
            assert reported.exit_code == 4 and "could not all be written" in said(reported)
    finally:
        subprocess.run(["umount", str(disk)], check=True)


# --- 4. say what is happening ---------------------------------------------------------------


def test_a_launched_broker_is_said_to_start_with_the_time_it_took(tmp_path: Path):
    from mqttlab.brokers import get_launcher

    if not get_launcher("mosquitto").find():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh)")
    result = invoke("run", "--broker", "mosquitto", "--duration", "1s", *SMALL, "--out", str(tmp_path / "run"))
    assert result.exit_code in (0, 1), result.output
    assert re.search(r"mosquitto started in \d+\.\d s", result.output)


def test_a_slow_start_is_announced_while_it_lasts():
    from io import StringIO

    from rich.console import Console

    from mqttlab.live.view import broker_starting

    out = StringIO()
    with broker_starting(Console(file=out, width=100), "rabbitmq", quiet_for=0.05):
        time.sleep(0.3)
        assert "starting rabbitmq …" in out.getvalue()  # said before the start is over
    assert re.search(r"rabbitmq started in 0\.[3-9] s", out.getvalue())


def test_the_metrics_linger_is_announced(tmp_path: Path):
    result = invoke("run", "--metrics", "127.0.0.1:0", "--metrics-linger", "1s", "--duration", "1s", *SMALL, "--out", str(tmp_path / "run"))
    assert result.exit_code in (0, 1), result.output
    assert "the final figures stay at http://127.0.0.1:" in said(result) and "for 1 s, one scrape interval (--metrics-linger 0" in said(result)
    text = said(result)
    assert text.index("results:") < text.index("the final figures stay")  # after the summary, before the wait


def test_too_few_samples_are_flagged_and_counts_stand_beside_percentiles(tmp_path: Path):
    result = invoke("run", "--rate", "0.5", "--duration", "3s", "--pubs", "1", "--subs", "1", "--out", str(tmp_path / "run"))
    assert result.exit_code in (0, 1), result.output
    text = said(result)
    assert re.search(r"only \d messages? measured: too few for the percentiles \(p99 needs at least 100", text)
    assert "count" in result.output.split("Latency (ms)")[1].splitlines()[2]  # the table's header row
    assert "1 publisher ×" in text and "→ 1 subscriber of" in text  # and no "1 publishers"
    many = invoke("run", "--duration", "2s", "--pubs", "2", "--subs", "2", "--rate", "100", "--out", str(tmp_path / "many"))
    assert many.exit_code in (0, 1) and "too few for the percentiles" not in said(many)


def test_a_broker_given_by_url_hints_at_pid_for_its_resources(tmp_path: Path):
    from mqttlab.brokers import get_launcher

    launcher = get_launcher("mosquitto")
    if not launcher.find():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh)")
    with launcher.start(tmp_path / "broker") as broker:
        from mqttlab.cli.brokers import _describe

        assert f"mqttlab run --broker '{broker.url()}?pid={broker.pid}'" in _describe(broker)  # `brokers start` says how
        result = invoke("run", "--broker", broker.url(), "--duration", "3s", *SMALL, "--out", str(tmp_path / "run"))
        sampled = invoke("run", "--broker", f"{broker.url()}?pid={broker.pid}", "--duration", "3s", *SMALL, "--out", str(tmp_path / "pid"))
    assert result.exit_code in (0, 1), result.output
    assert "broker not sampled (a broker given by URL: add ?pid=PID" in said(result)
    assert sampled.exit_code in (0, 1) and "broker not sampled" not in said(sampled) and "resources: broker" in said(sampled)


def test_report_opens_with_what_ran(tmp_path: Path):
    out = tmp_path / "run"
    assert invoke("run", "--duration", "1s", *SMALL, "--qos", "2", "--mqtt-version", "5", "--out", str(out)).exit_code in (0, 1)
    lines = invoke("report", str(out)).output.splitlines()
    opening = " ".join(" ".join(lines[:4]).split())
    assert re.search(r"default against rumqttd \S+ at mqtt://127\.0\.0\.1:\d+: MQTT 5 over TCP", opening)
    assert "plan: 1 publisher × 20 msg/s = 20 msg/s for 1 s (0.2 s warm-up) → 1 subscriber of bench/%i, QoS 2/2" in opening
    assert "plan:" not in invoke("report", "--json", str(out)).output


# --- 5. reports that fit what they show ------------------------------------------------------


def test_fault_lines_say_every_time_on_the_loads_clock():
    from mqttlab.cli.run import _fault_line

    fault = {"kind": "broker-stall", "asked_at_s": 4.0, "duration_s": 2.0, "applied": True, "lasted_s": 2.0, "start_s": 2.0,
             "received_during": 0, "worst_e2e_us": None, "recovered_after_s": 0.5, "band_us": 900.0, "verdict": None}
    assert "at 4 s for 2 s: 2.00 s from 4.00 s;" in _fault_line(fault, warmup_s=2.0)  # start_s counts from the measured window


def test_user_text_is_never_markup(tmp_path: Path):
    result = invoke("run", "--topic", "a/[bold]/%i", "--filter", "b/[red]x", "--strict", "--pubs", "1", "--subs", "1")
    assert result.exit_code == 2 and "a/[bold]/0" in result.output and "b/[red]x" in result.output
    assert "1 publishers" not in said(result) and "the publisher's topic" in said(result)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("two")
    for name, broker in (("a", "rumqttd"), ("b", "mosquitto")):  # one run each: a plain comparison
        result = invoke("run", "--broker", broker, "--duration", "2s", "--out", str(root / name), *SMALL)
        assert result.exit_code in (0, 1), result.output
    return root


def test_a_plain_comparison_has_no_seed_sections_and_short_windows_show(two_runs: Path):
    result = invoke("compare", str(two_runs / "a"), str(two_runs / "b"), "--out", str(two_runs / "report"), "--no-png")
    assert result.exit_code == 0, result.output
    page = (two_runs / "report" / "report.html").read_text()
    assert "The seeds' statistics" not in page and "As in seed 001" not in page
    assert '"mode":"lines+markers"' in page and '"range":[-0.5,' in page  # a 2 s window's two points are drawn
    # The CDF's log axis is ticked at 1, 2 and 5 of each decade, written in full.
    numeric = [json.loads(f"[{labels}]") for labels in re.findall(r'"ticktext":\[([^\]]*)\]', page) if "%" not in labels]
    assert numeric and all(len(labels) >= 2 for labels in numeric)
    assert {f"{float(label):.0e}"[0] for labels in numeric for label in labels} <= {"1", "2", "5"}


def test_terminal_comparison_figures_are_never_cut(two_runs: Path):
    from mqttlab.cli.compare import _figure

    assert (_figure(21900.0, 3), _figure(999.6, 3), _figure(0.5, 2, "+"), _figure(-1234.5, 3, "+")) == ("21,900", "1,000", "+0.5", "-1,234")
    result = invoke("compare", str(two_runs / "a"), str(two_runs / "b"))
    assert result.exit_code == 0, result.output
    assert "…" not in result.output and "e+" not in result.output


def test_suite_show_marks_skipped_brokers_estimates_time_and_writes_sizes_once():
    result = invoke("suite", "show", "seed003", "--quick")
    assert result.exit_code == 0, result.output
    text = said(result)
    assert "1KB B" not in text and "64 B" in text
    assert re.search(r"time: about \S+ of load for the \d+ runs made here", text)
    skipped = re.findall(r"skipped: (\w+), not available here", text)
    assert "emqx" in skipped and "emqx (skipped)" in result.output
    assert "…" not in result.output


def test_smc_tables_fold_at_80_columns_instead_of_cutting_headers(tmp_path: Path):
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "smc"))
    from smc_synthetic import LOG_COEF, write_cases

    (tmp_path / "logs").mkdir()
    write_cases(tmp_path / "logs", seed=5, latency="lognormal", coef=LOG_COEF, spread=0.7, cases=5, rows=1500)
    result = invoke("smc", "learn", str(tmp_path / "logs"), "--out", str(tmp_path / "model"))
    assert result.exit_code == 0, result.output
    assert "R² =" in result.output and "…" not in result.output


def test_a_results_path_with_brackets_is_printed_as_typed(tmp_path: Path):
    out = tmp_path / "[bold]" / "run"
    result = invoke("run", "--duration", "1s", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    # A long path may be folded at the terminal's width: compared without any whitespace.
    assert f"results:{out}" in "".join(result.output.split())


def test_a_files_warmup_follows_a_shorter_duration_from_the_command_line(tmp_path: Path):
    out = tmp_path / "run"
    result = invoke("run", str(ROOT / "scenarios" / "default.yaml"), "--duration", "2s", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    assert "note: the scenario's warm-up does not fit --duration 2s: 0.4s instead (--warmup to choose)" in said(result)
    assert summary_of(out)["warmup_s"] == pytest.approx(0.4)
    kept = invoke("run", str(ROOT / "scenarios" / "default.yaml"), "--duration", "2s", "--warmup", "3s")  # asked for: refused
    assert kept.exit_code == 2 and "load.warmup (--warmup): must be shorter" in said(kept)


def test_the_rate_sweeps_log_axis_is_ticked_1_2_5_in_full():
    from mqttlab.reports.figures import log_ticks

    ticks = log_ticks([1, 10, 100, 1000])
    assert ticks["ticktext"][:4] == ["1", "2", "5", "10"] and "1000" in ticks["ticktext"]
    import inspect

    from mqttlab.reports import sweep

    assert "log_ticks(" in inspect.getsource(sweep.sweep_figures)
