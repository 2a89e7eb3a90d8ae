"""The steadiness check a reproduction shows before it shortens the paper's runs: a long run's
per-second series cut at the shorter length and set against the whole measured phase."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqttlab.reproductions.steadiness import check, table

HEADER = "t_s,sent,acked,received,dropped,errors,owed,owed_delivered,e2e_p50_us,e2e_p99_us,e2e_max_us,schedule_lag_max_us,fault\n"


def _series(tmp_path: Path, seconds: list[tuple[int, int, int, int]]) -> Path:
    """(t, received, p50 µs, p99 µs) per second, plus a warm-up second and the grace period's."""
    lines = [HEADER, "-1,1000,1000,1000,0,0,1000,1000,900,9000,9000,10,\n"]
    lines += [f"{t},1000,1000,{received},0,0,1000,1000,{p50},{p99},{p99},10,\n" for t, received, p50, p99 in seconds]
    lines.append(f"{len(seconds)},0,3,3,0,0,0,0,700,700,700,0,\n")  # grace: nothing sent
    (tmp_path / "series.csv").write_text("".join(lines))
    (tmp_path / "scenario.yaml").write_text("load: {duration: 70s, warmup: 1s}\n")
    return tmp_path


def test_a_steady_run_is_steady_and_one_burst_does_not_move_the_median(tmp_path: Path) -> None:
    seconds = [(t, 1000, 600, 4000) for t in range(60)]
    seconds[30] = (30, 1000, 600, 180_000)  # one burst later in the run
    found = check(_series(tmp_path, seconds), 10)
    assert (found.first.seconds, found.whole.seconds) == (10, 60)
    assert found.steady and found.whole.worst_p99_us == 180_000 and found.whole.p99_us == 4000
    assert "| first | 10 | 1,000 | 0.60 | 4.00 | 4.00 | yes |" in table([found], ["mosquitto"])


def test_a_run_still_warming_in_its_first_window_is_not_steady(tmp_path: Path) -> None:
    seconds = [(t, 1000, 3000 if t < 10 else 600, 9000 if t < 10 else 4000) for t in range(60)]
    assert not check(_series(tmp_path, seconds), 10).steady
    falling = [(t, 900 if t < 10 else 1000, 600, 4000) for t in range(60)]  # 10 % short at first
    assert not check(_series(tmp_path, falling), 10).steady


def test_a_shorter_warm_up_moves_the_window_into_the_long_runs_warm_up(tmp_path: Path) -> None:
    run = _series(tmp_path, [(t, 1000, 600, 4000) for t in range(60)])
    # The shortened run warms up for nothing: its first second is the long run's warm-up second.
    found = check(run, 10, warmup_s=0)
    assert found.first.seconds == 10 and found.first.p50_us == 600 and found.whole.seconds == 60
    assert check(run, 10, warmup_s=1).first == check(run, 10).first


def test_a_window_as_long_as_the_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="longer than 20 s"):
        check(_series(tmp_path, [(t, 1000, 600, 4000) for t in range(20)]), 20)


def test_a_run_that_fell_behind_for_a_while_cannot_tell_and_a_generator_limited_one_judges_nothing(tmp_path: Path) -> None:
    # Ten seconds far behind later in the run: the later windows span ×100, so any first window fits.
    seconds = [(t, 1000, 60_000 if 30 <= t < 40 else 600, 90_000 if 30 <= t < 40 else 4000) for t in range(60)]
    found = check(_series(tmp_path, seconds), 10)
    assert found.steady and found.verdict.startswith("cannot tell: later windows' p50 differ ×100")
    (tmp_path / "summary.json").write_text('{"generator_limited": true}')
    assert check(tmp_path, 10).verdict == "not judged: generator-limited"
    assert "| first | 10 | 1,000 | 0.60 | 4.00 | 4.00 | not judged: generator-limited |" in table([check(tmp_path, 10)], ["rumqttd"])


def _resources(run: Path, rss_mb_at: list[float]) -> None:
    """The broker's RSS per measured second (resources.csv, from second 0), with the generator's beside it."""
    lines = ["t_s,process,cpu_share,cpu_seconds,rss_bytes\n"]
    for t, mb in enumerate(rss_mb_at):
        lines += [f"{t},broker,0.5,{0.5 * (t + 1)},{int(mb * 1e6)}\n", f"{t},generator,0.3,{0.3 * (t + 1)},999000000\n"]
    (run / "resources.csv").write_text("".join(lines))


def test_memory_is_steady_when_it_levels_off_and_not_while_it_grows_through_the_run(tmp_path: Path) -> None:
    run = _series(tmp_path, [(t, 1000, 600, 4000) for t in range(60)])
    assert check(run, 10).memory_verdict == "not recorded"  # a run kept before resources.csv
    assert "memory steady" not in table([check(run, 10)], ["mosquitto"])
    _resources(run, [10 + min(t, 5) for t in range(60)])  # 10 MB, up to 15 MB within 5 s, flat after
    found = check(run, 10)
    assert (found.first.rss_peak_mb, found.whole.rss_peak_mb) == (15.0, 15.0) and found.memory_verdict == "yes"
    assert "| mosquitto | first | 10 | 1,000 | 0.60 | 4.00 | 4.00 | yes | 15.0 | yes |" in table([found], ["mosquitto"])
    _resources(run, [10 + 2 * t for t in range(60)])  # 2 MB more every second, never levelling
    found = check(run, 10)
    assert found.steady and found.memory_verdict == "no: later windows reach 128 MB"
    assert "| mosquitto | 5 later | 10 each | 1,000–1,000 | 0.60–0.60 | 4.00–4.00 | | | 48.0–128.0 | |" in table([found], ["mosquitto"])
