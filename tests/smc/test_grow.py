"""The paper's rule "grow the data set until R² stops rising", on streams whose answer is known,
and the host CPU load that explore and verify record."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
from smc_synthetic import LOG_COEF, synthetic_rows, write_cases
from typer.testing import CliRunner

from mqttlab.cli.smc import app
from mqttlab.smc.grow import grow_until_plateau, rounds_of
from mqttlab.smc.hostload import HostLoad, HostLoadSampler
from mqttlab.smc.log import CaseMeta, ExploreLog

runner = CliRunner()
# Latency in µs rises by 300 per open exchange; the noise (sd 3000 µs) does not depend on load.
COEF = np.array([2000.0, 0, 500, 0, 0, 300, 0, 0])


def case(rng: np.random.Generator, clients: int, rows: int = 6000) -> ExploreLog:
    frame = synthetic_rows(rng, clients, rows, "normal", COEF, 3000.0)
    return ExploreLog(Path(f"case-{clients}.csv"), CaseMeta("synthetic", clients, 0), frame)


def test_growth_stops_at_the_first_round_that_adds_no_new_loads():
    """Rounds 1-3 widen the loads (10, then 30, then 100 clients): R² rises from about 0.07 to
    0.31 to 0.81. From round 4 on every round repeats the mixture seen so far, so the population
    R² stays put and the rule must stop at round 4 without asking for round 5."""
    rng = np.random.default_rng(11)
    asked = []

    def stream():
        for index, clients in enumerate([[10], [30], [100], [10, 30, 100], [10, 30, 100], [10, 30, 100]]):
            asked.append(index + 1)
            yield [case(rng, c) for c in clients]

    growth = grow_until_plateau(stream(), tolerance=0.005)
    assert growth.stopped == "plateau"
    assert [r.round for r in growth.rounds] == [1, 2, 3, 4] and asked == [1, 2, 3, 4]
    r2 = [r.r_squared for r in growth.rounds]
    assert r2[1] - r2[0] > 0.1 and r2[2] - r2[1] > 0.3  # the rises the rule must not stop at
    assert abs(growth.rounds[-1].gain) <= 0.005 and r2[3] == pytest.approx(0.81, abs=0.03)
    assert len(growth.logs) == 6  # everything explored is kept
    assert "stopped because R² rose by" in growth.describe()


def test_growth_that_keeps_rising_ends_at_the_round_limit_or_when_the_logs_run_out():
    rng = np.random.default_rng(3)
    widening = ([case(rng, c)] for c in (5, 10, 20, 40, 80))
    capped = grow_until_plateau(widening, max_rounds=3)
    assert capped.stopped == "max rounds" and len(capped.rounds) == 3
    assert all(r.gain > 0.005 for r in capped.rounds[1:])
    short = grow_until_plateau(rounds_of([case(rng, 10), case(rng, 60)], 1))
    assert short.stopped == "exhausted" and len(short.rounds) == 2


def test_a_round_missing_a_message_type_is_not_fittable_and_growth_goes_on():
    rng = np.random.default_rng(5)
    only_connects = case(rng, 10, 200)
    only_connects = ExploreLog(only_connects.path, only_connects.meta,
                               only_connects.rows[only_connects.rows["Msg"] == "connect"])
    growth = grow_until_plateau(iter([[only_connects], [case(rng, 20)], [case(rng, 80)]]), max_rounds=3)
    assert np.isnan(growth.rounds[0].r_squared) and np.isnan(growth.rounds[1].gain)
    assert len(growth.rounds) == 3


def test_bad_growth_settings_are_named():
    with pytest.raises(ValueError, match="--r2-tolerance"):
        grow_until_plateau([], tolerance=-1)
    with pytest.raises(ValueError, match="--round-cases"):
        list(rounds_of([], 0))


def test_learn_grow_replays_the_rule_on_existing_logs(tmp_path):
    (tmp_path / "logs").mkdir()
    write_cases(tmp_path / "logs", seed=2, latency="lognormal", coef=LOG_COEF, spread=0.5, cases=4, rows=800)
    result = runner.invoke(app, ["learn", str(tmp_path / "logs"), "--grow", "--round-cases", "2",
                                 "--out", str(tmp_path / "m")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    growth = pd.read_csv(tmp_path / "m" / "growth.csv")
    assert list(growth["round"]) == list(range(1, len(growth) + 1)) and growth["cases"].iloc[0] == 2
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert summary["growth"]["tolerance"] == 0.005 and summary["growth"]["stopped"] in ("plateau", "exhausted")
    assert "Growing the data set until R² stops rising" in result.output


def test_learn_grow_explores_a_real_broker_round_by_round(tmp_path):
    result = runner.invoke(app, ["learn", "--grow", "--broker", "mosquitto", "--broker-config", "as-shipped",
                                 "--clients", "4..6", "--length", "30", "--round-cases", "1", "--max-rounds", "3",
                                 "--out", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    explore = json.loads((tmp_path / "explore" / "explore.json").read_text())
    rounds = explore["growth"]["rounds"]
    assert 2 <= len(rounds) <= 3 and explore["cases"] == len(list((tmp_path / "explore").glob("case-*.csv")))
    assert [r["cases"] for r in rounds] == list(range(1, len(rounds) + 1))
    assert explore["broker_config"]["mode"] == "as-shipped"
    assert 0 <= explore["host_cpu"]["mean_share"] <= explore["host_cpu"]["max_share"] <= 1
    assert (tmp_path / "model.json").exists()


def test_learn_broker_without_grow_is_refused():
    result = runner.invoke(app, ["learn", "--broker", "mosquitto"])
    assert result.exit_code == 2 and "--broker: learn explores only with --grow" in result.output


def test_host_load_sees_a_busy_core_and_adds_up_exactly():
    stop = time.monotonic() + 0.6
    def spin():
        while time.monotonic() < stop:
            pass
    worker = threading.Thread(target=spin)
    with HostLoadSampler(interval=0.1) as sampler:
        worker.start()
        worker.join()
    load = sampler.result
    # One core of the host kept busy by us; neighbours can only add to it.
    assert load.mean_share >= 0.8 / (psutil.cpu_count() or 1)
    assert load.max_share >= load.mean_share * 0.9 and load.intervals >= 3
    both = load + load
    assert both.mean_share == pytest.approx(load.mean_share) and both.duration_s == pytest.approx(2 * load.duration_s)
    busy = HostLoad(cpus=2, duration_s=1, intervals=2, busy_cpu_s=1.5, total_cpu_s=2.0, max_share=0.9, intervals_above_limit=2)
    assert busy.above_limit and "above the paper's 60%" in busy.describe()
