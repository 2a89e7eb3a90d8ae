"""`smc verify`: the SPRT replay on recorded streams (decisions, samples, decision times, the cap)
and the whole test against real brokers on loopback, with a profile fast enough for a test."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from mqttlab.cli.smc import app
from mqttlab.smc.profiles import UsageProfile
from mqttlab.smc.sprt import SPRT
from mqttlab.smc.verify import (
    Hypothesis,
    ProfileRun,
    VerifySettings,
    decide,
    hypotheses_for,
    predicted_p,
    result_text,
    sample_cap,
    verify,
)

runner = CliRunner()
FAST = UsageProfile("fast", 0, 2, {"connect": 1, "disconnect": 1, "publish": 5, "subscribe": 3, "unsubscribe": 2}, topics=3)


def stream(latencies_ms: list[float], every_ms: float = 10.0) -> list[dict]:
    """Sequences of one message each, finishing every `every_ms`."""
    return [{"end_ms": (i + 1) * every_ms, "latencies_us": [lat * 1e3], "outcomes": ["ok"], "active": [1]}
            for i, lat in enumerate(latencies_ms)]


def test_the_cap_follows_walds_expected_sample_number():
    assert sample_cap(SPRT(0.9, 1.0)) == 44  # the paper's 44: a run of successes decides H1
    test = SPRT(0.559, 0.659)
    # Without drift (p near 0.61 here) Wald's number is -ln(A) ln(B) / E[step^2], about 499.
    assert sample_cap(test) == pytest.approx(3 * 499, abs=6)


def test_replay_decides_each_client_and_times_the_deciding_sequence():
    test = SPRT(0.85, 0.95)
    run = ProfileRun(
        clients=[stream([1.0] * 60), stream([1.0, 99.0, 99.0, 99.0, 99.0, 99.0]), stream([1.0] * 10)],
        stopped="cap", elapsed_s=7.0, failures=[],
    )
    verdict = decide(run, Hypothesis(3, 50.0, 0.95, 0.1), test, "b", cap=60)
    # 42 successes cross ln(99) for client 0; five failures cross ln(1/99) for client 1; client 2 ran out.
    assert (verdict.share_h1, verdict.share_h0, verdict.share_undecided) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert verdict.mean_samples == pytest.approx((42 + 6 + 10) / 3)
    assert verdict.time_s == 7.0  # someone never decided: the whole run
    assert verdict.result == "33% H1, 33% undecided"
    decided = decide(ProfileRun([stream([1.0] * 50, every_ms=20.0)], "decided", 2.0, []), Hypothesis(1, 50.0, 0.95, 0.1), test, "b", 60)
    assert decided.result == "H1" and decided.time_s == pytest.approx(42 * 0.020)


def test_a_functional_failure_fails_the_sample_whatever_the_latency():
    run = ProfileRun([[{"end_ms": 1.0, "latencies_us": [5.0, None], "outcomes": ["ok", "timeout"], "active": [1, 1]}]], "cap", 1.0, [])
    assert not run.outcomes(0, 1000.0)[0]


def test_result_text_uses_the_papers_notation():
    assert result_text(1.0, 0.0) == "H1" and result_text(0.0, 1.0) == "H0" and result_text(0.6, 0.4) == "60% H1"


def test_predicted_hypotheses_come_from_predict_json(tmp_path):
    path = tmp_path / "predict.json"
    path.write_text(json.dumps({"points": [{"clients": 3, "threshold_ms": 30.0, "p": 0.84}]}))
    assert predicted_p(path, 3, 30.0) == 0.84
    with pytest.raises(ValueError, match="no point for 4 clients and 30 ms"):
        predicted_p(tmp_path, 4, 30.0)
    (h,) = hypotheses_for([3], [30.0], None, path, 0.1)
    assert (h.p1, h.p0) == pytest.approx((0.84, 0.74))


def test_verify_on_a_real_broker_accepts_h1_for_a_loose_and_h0_for_an_impossible_threshold(tmp_path):
    hypotheses = hypotheses_for([3], [0.001, 1000.0], 0.95, None, 0.1)
    table = verify(["mosquitto"], FAST, hypotheses, tmp_path, VerifySettings(length=3))
    by_t = table.set_index("threshold_ms")
    loose, tight = by_t.loc[1000.0], by_t.loc[0.001]
    assert loose.result == "H1" and loose.mean_samples == 42 and loose.system == "H1"
    assert tight.result == "H0" and tight.mean_samples == 5 and tight.system == "H0"
    assert loose.stopped == "decided" and loose.functional_failures == 0
    assert 0 < tight.time_s <= loose.time_s


def test_cli_verify_compares_two_brokers_under_predicted_hypotheses(tmp_path):
    prediction = tmp_path / "predict.json"
    prediction.write_text(json.dumps({"points": [{"clients": 2, "threshold_ms": 1000.0, "p": 0.95}]}))
    profile = tmp_path / "fast.yaml"
    profile.write_text("min_wait_ms: 0\nmax_wait_ms: 2\nweights: {connect: 1, disconnect: 1, publish: 5}\ntopics: 2\n")
    result = runner.invoke(app, ["verify", "--broker", "mosquitto,rumqttd", "--profile", str(profile), "--clients", "2",
                                 "--threshold", "1s", "--h1", "predicted", "--prediction", str(prediction),
                                 "--length", "2", "--out", str(tmp_path / "v")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "v" / "verify.csv")
    assert list(table["broker"]) == ["mosquitto", "rumqttd"]
    assert (table["result"] == "H1").all() and (table["p1"] == 0.95).all()
    assert "mosquitto: Result" in result.output and "rumqttd: Result" in result.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--h1", "predicted"], "--prediction"),
        (["--h1", "0.05"], "--indifference"),
        (["--h1", "often"], "--h1"),
        (["--profile", "UP9"], "UP9"),
    ],
)
def test_cli_verify_names_bad_input(tmp_path, args, named):
    result = runner.invoke(app, ["verify", *args, "--clients", "2", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output


def test_the_cap_is_never_below_what_an_undecided_stream_needs():
    test = SPRT(0.8, 0.9)
    assert math.isfinite(test.wald_expected_samples(0.85)) and sample_cap(test) > test.wald_expected_samples(0.85)


def test_ctrl_c_stops_a_profile_run_and_returns_what_was_measured(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from mqttlab.brokers import get_launcher

    script = tmp_path / "run.py"
    script.write_text(
        "import json, sys\n"
        "from mqttlab import _engine\n"
        "config = {'host': '127.0.0.1', 'port': int(sys.argv[1]), 'clients': 3, 'messages': 100000,\n"
        "          'think_ms': [1, 3], 'sequence_length': 2}\n"
        "print('started', flush=True)\n"
        "out = json.loads(_engine.smc_profile_run(json.dumps(config)))\n"
        "print(json.dumps({'status': out['status'], 'stopped': out['stopped'],\n"
        "                  'sequences': sum(len(c['sequences']) for c in out['clients'])}))\n"
    )
    with get_launcher("mosquitto").start(tmp_path / "broker") as broker:
        child = subprocess.Popen([sys.executable, str(script), str(broker.port)], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "started"
            time.sleep(1.0)
            child.send_signal(signal.SIGINT)
            output, _ = child.communicate(timeout=15)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 0
    result = json.loads(output.strip().splitlines()[-1])
    assert result["status"] == "interrupted" and result["stopped"] == "interrupted"
    assert result["sequences"] > 10
