"""The live progress line and the summary tables, rendered to text."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from mqttlab.live.view import LiveProgress, snapshot_line, snapshot_table
from mqttlab.planning import plan_of, validate_scenario
from mqttlab.summary_text import ms, plan_line
from mqttlab.summary_view import print_summary
from test_cli_run import realistic_summary  # tests/ is on sys.path (no package)

SNAPSHOT = {
    "t_s": 3.0,
    "phase": "measuring",
    "connected": {"publishers": 10, "subscribers": 9},
    "total": {"sent": 300, "acked": 300, "received": 299, "dropped": 4, "errors": 1},
    "interval": {"sent": 100, "acked": 98, "received": 99, "e2e_p50_us": 287.0, "e2e_p99_us": None},
}


def rendered(summary: dict) -> str:
    buffer = io.StringIO()
    print_summary(Console(file=buffer, width=120), summary, "results/x")
    return buffer.getvalue()


def test_milliseconds_keep_microsecond_resolution():
    assert (ms(1234), ms(0.4), ms(None)) == ("1.234", "0.000", "–")


def test_progress_line_shows_phase_clients_rates_latency_and_errors():
    line = snapshot_line(SNAPSHOT)
    for expected in ("3.0s", "measuring", "10p/9s", "sent 100/s", "acked 98/s", "received 99/s", "p50 0.287", "p99 –", "dropped 4", "errors 1"):
        assert expected in line, expected


def test_progress_shows_how_far_the_run_is_and_the_time_left():
    progress = {"elapsed_s": 4.0, "fraction": 0.4, "left_s": 128.0}
    assert "40% done, 2m08s left" in snapshot_line(SNAPSHOT, progress)
    buffer = io.StringIO()
    Console(file=buffer, width=160).print(snapshot_table(SNAPSHOT, progress))
    assert "40% done, 2m08s left" in buffer.getvalue() and "████████░" in buffer.getvalue()
    assert "done" not in snapshot_line(SNAPSHOT, {"elapsed_s": None, "fraction": None, "left_s": None})


def test_routing_warnings_and_followed_defaults_are_in_the_summary():
    routing = {"publishers": 2, "subscribers": 2, "topics": ["sensors/%i", "sensors/0"], "filters": ["bench/%i", "bench/0"],
               "unmatched_publishers": 2, "warnings": ["no subscriber is owed any message"]}
    text = rendered(realistic_summary(routing=routing, defaults_followed={"subscribers.qos": "publishers.qos 2"}))
    assert "TOPICS AND FILTERS DO NOT MEET" in text and "no subscriber is owed any message" in text
    assert "sensors/0" in text and "bench/0" in text
    assert "subscribers' QoS follows the publishers' (publishers.qos 2)" in text


def test_progress_off_a_terminal_prints_one_line_per_snapshot():
    buffer = io.StringIO()
    with LiveProgress(Console(file=buffer, width=200)) as live:
        live(SNAPSHOT)
        live({**SNAPSHOT, "t_s": 4.0})
    assert buffer.getvalue().count("\n") == 2


def test_violations_and_errors_get_their_own_tables():
    text = rendered(
        realistic_summary(
            violations=[{"kind": "qos1_lost", "count": 3, "detail": "publisher 2 → subscriber 2"}],
            errors=[{"kind": "publish_timeout", "count": 5, "example": "no PUBACK within 10 s"}],
        )
    )
    assert "Violations" in text and "qos1_lost" in text and "publisher 2 → subscriber 2" in text
    assert "Errors" in text and "publish_timeout" in text and "no PUBACK within 10 s" in text


def test_latencies_without_samples_are_left_out():
    text = rendered(realistic_summary())
    assert "→ PUBCOMP" not in text and "TLS handshake" not in text
    assert "→ PUBACK" in text


def test_broker_lost_status_and_error_are_shown():
    text = rendered(realistic_summary(status="broker_lost", error="connection reset by peer"))
    assert "broker_lost" in text and "error: connection reset by peer" in text


def test_a_malformed_snapshot_turns_the_display_off_instead_of_raising():
    buffer = io.StringIO()
    with LiveProgress(Console(file=buffer, width=200)) as live:
        live({"t_s": "not a number", "connected": {"publishers": 1}})
        live(SNAPSHOT)
    assert "live display stopped" in buffer.getvalue()
    assert "measuring" not in buffer.getvalue()


def test_nothing_is_shown_before_a_client_connects():
    buffer = io.StringIO()
    with LiveProgress(Console(file=buffer, width=200), header="mqttlab: default at mqtt://x") as live:
        live({**SNAPSHOT, "phase": "connecting", "connected": {"publishers": 0, "subscribers": 0}})
        assert buffer.getvalue() == ""
        live(SNAPSHOT)
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "mqttlab: default at mqtt://x" and "measuring" in lines[1] and len(lines) == 2


def test_round_trips_get_a_line_with_losses_marked():
    text = rendered(realistic_summary(round_trip={"sent": 100, "replies": 97, "lost": 3, "duplicated": 0}))
    assert "round trips: 100 sent, 97 replies, 3 lost, 0 duplicated" in text
    assert "round trips" not in rendered(realistic_summary())


def test_a_distributed_run_shows_hosts_shares_clock_basis_and_missing_shards():
    shard = {"publishers": [0, 2], "subscribers": [0, 2]}
    section = {
        "shards": [{**shard, "host": "load1"}, {"publishers": [2, 4], "subscribers": [2, 4], "host": "load1"},
                   {"publishers": [4, 5], "subscribers": [4, 5], "host": "load2"}],
        "hosts": ["load1", "load2"],
        "missing_shards": [2],
        "latency_clock": {"basis": "across_hosts", "note": "4 of 25 measured pairs span hosts"},
    }  # fmt: skip
    text = rendered(realistic_summary(distributed=section))
    assert "distributed: 3 shards on 2 hosts" in text
    assert "load1: 2 shards, 4 publishers, 4 subscribers" in text and "load2: 1 shard, 1 publisher," in text
    assert "latency clock: across_hosts (4 of 25 measured pairs span hosts)" in text
    assert "missing shards: 2" in text


def test_mqtt_sn_retransmissions_are_shown_only_when_there_were_some():
    summary = realistic_summary()
    summary["messages"]["retransmitted"] = 0
    assert "retransmitted" not in rendered(summary)
    summary["messages"]["retransmitted"] = 7
    line = next(line for line in rendered(summary).splitlines() if "retransmitted (Tretry)" in line)
    assert line.split("│")[2].strip() == "7"


def test_a_distributed_run_on_one_host_says_host_not_hosts():
    section = {"shards": [{"publishers": [0, 1], "subscribers": [0, 1], "host": "vm"}], "hosts": ["vm"], "missing_shards": [],
               "latency_clock": {"basis": "shared", "note": "one host"}}
    assert "distributed: 1 shard on 1 host" in rendered(realistic_summary(distributed=section))


def test_the_generator_line_names_a_batched_submission_and_a_refused_one():
    summary = realistic_summary()
    summary["generator"].update(submission="io_uring", sends_per_submission=9.53, submission_wait_max_us=408)
    assert "io_uring: 9.5 sends per submission, at most 0.408 ms after their stamp" in " ".join(rendered(summary).split())
    summary["generator"].update(submission="write (io_uring refused)", sends_per_submission=None, submission_wait_max_us=None)
    assert "write (io_uring refused)" in rendered(summary)
    summary["generator"]["submission"] = "write"
    assert "submission" not in rendered(summary) and "io_uring" not in rendered(summary)


def test_the_plan_line_spells_out_the_total_rate():
    line = plan_line(plan_of(validate_scenario({"publishers": {"rate": 100}})))
    assert "10 publishers × 100 msg/s = 1,000 msg/s for 10 s (2 s warm-up)" in line


def test_a_slow_start_is_announced_while_it_lasts():
    from io import StringIO

    from rich.console import Console

    from mqttlab.live.view import broker_starting

    out = StringIO()
    with broker_starting(Console(file=out, width=100), "rabbitmq", quiet_for=0.05):
        time.sleep(0.3)
        assert "starting rabbitmq …" in out.getvalue()  # said before the start is over
    assert re.search(r"rabbitmq started in 0\.[3-9] s", out.getvalue())
