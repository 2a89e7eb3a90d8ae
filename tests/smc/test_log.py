"""The explore log format: round trip, and clear errors naming the column and line."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from smc_synthetic import LOG_COEF, synthetic_rows

from mqttlab.smc.log import COLUMNS, CaseMeta, LogFormatError, read_log, read_logs, write_log


@pytest.fixture
def case(tmp_path):
    rows = synthetic_rows(np.random.default_rng(1), 20, 50, "lognormal", LOG_COEF, 0.5)
    path = tmp_path / "case-000.csv"
    write_log(path, rows, CaseMeta("mosquitto", 20, 7, {"length": 50}))
    return path, rows


def test_written_case_reads_back_with_types_and_sidecar(case):
    path, rows = case
    log = read_log(path)
    assert list(log.rows.columns) == list(COLUMNS)
    assert log.meta == CaseMeta("mosquitto", 20, 7, {"length": 50})
    assert log.rows["ActiveMsgs"].dtype == np.int64
    np.testing.assert_allclose(log.rows["Latency_us"], rows["Latency_us"])
    publish = rows["Msg"] == "publish"
    assert (log.rows.loc[publish, "Subs"] == rows.loc[publish, "Subs"]).all()


def test_publish_only_columns_are_left_empty_on_other_messages(case):
    path, rows = case
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    not_publish = raw["Msg"] != "publish"
    assert (raw.loc[not_publish, ["MsgSize", "Subs", "Receivers"]] == "").all().all()


def test_failures_are_kept_apart_from_latencies(tmp_path):
    rows = synthetic_rows(np.random.default_rng(2), 5, 10, "lognormal", LOG_COEF, 0.5)
    rows["Latency_us"] = rows["Latency_us"].astype(object)
    rows.loc[3, ["outcome", "Latency_us"]] = ["timeout", ""]
    rows.loc[4, "outcome"] = "missing_delivery"
    write_log(tmp_path / "c.csv", rows, CaseMeta("b", 5, 0))
    log = read_log(tmp_path / "c.csv")
    assert len(log.failures) == 2
    assert len(log.ok_rows) == 8
    assert log.ok_rows["Latency_us"].notna().all()


def test_bad_values_are_reported_by_column_and_line_all_at_once(case):
    path, _ = case
    text = path.read_text().splitlines()
    fields = text[1].split(",")
    fields[0], fields[1], fields[7] = "ping", "0", "-3"
    text[1] = ",".join(fields)
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(LogFormatError) as error:
        read_log(path)
    message = str(error.value)
    assert "column Msg" in message and "line 2" in message
    assert "column ActiveMsgs must be an integer >= 1" in message
    assert "column Latency_us" in message


def test_publish_without_subscriber_count_is_an_error(tmp_path):
    rows = synthetic_rows(np.random.default_rng(3), 5, 40, "lognormal", LOG_COEF, 0.5)
    write_log(tmp_path / "c.csv", rows, CaseMeta("b", 5, 0))
    raw = pd.read_csv(tmp_path / "c.csv", dtype=str, keep_default_na=False)
    first_publish = raw.index[raw["Msg"] == "publish"][0]
    raw.loc[first_publish, "Subs"] = ""
    raw.to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(LogFormatError, match=f"column Subs .* on publish rows \\(line {first_publish + 2}\\)"):
        read_log(tmp_path / "c.csv")


def test_missing_and_unexpected_columns_are_named(case):
    path, _ = case
    raw = pd.read_csv(path, dtype=str, keep_default_na=False).rename(columns={"TotalSubs": "#TotalSubs"})
    raw.to_csv(path, index=False)
    with pytest.raises(LogFormatError, match="missing column\\(s\\) TotalSubs; unexpected column\\(s\\) #TotalSubs"):
        read_log(path)


def test_sidecar_problems_are_named(case):
    path, _ = case
    path.with_suffix(".json").write_text(json.dumps({"broker": "", "clients": 0}))
    with pytest.raises(LogFormatError) as error:
        read_log(path)
    assert "'broker'" in str(error.value) and "'clients'" in str(error.value) and "'seed'" in str(error.value)
    path.with_suffix(".json").unlink()
    with pytest.raises(LogFormatError, match="sidecar case-000.json is missing"):
        read_log(path)


def test_a_folder_reads_every_case_and_reports_every_bad_file(tmp_path):
    for i in range(3):
        rows = synthetic_rows(np.random.default_rng(i), 4, 20, "lognormal", LOG_COEF, 0.5)
        write_log(tmp_path / f"case-{i}.csv", rows, CaseMeta("b", 4, i))
    assert len(read_logs([tmp_path])) == 3
    (tmp_path / "case-1.json").unlink()
    (tmp_path / "case-2.json").unlink()
    with pytest.raises(LogFormatError) as error:
        read_logs([tmp_path])
    assert "case-1.json" in str(error.value) and "case-2.json" in str(error.value)


_cells = st.one_of(st.sampled_from(["publish", "connect", "ok", "timeout", "", "-1", "3", "2.5", "1e400", "nan"]), st.text(max_size=6))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_cells, min_size=9, max_size=9), max_size=6))
def test_reader_either_parses_or_raises_a_format_error(tmp_path, table):
    path = tmp_path / "fuzz.csv"
    pd.DataFrame(table, columns=list(COLUMNS)).to_csv(path, index=False)
    path.with_suffix(".json").write_text('{"broker": "b", "clients": 1, "seed": 0}')
    try:
        log = read_log(path)
    except LogFormatError as error:
        assert str(error).startswith(str(path))
    else:
        assert (log.ok_rows["Latency_us"] >= 0).all()
        assert (log.rows["ActiveMsgs"] >= 1).all()


def test_infinite_values_are_rejected_not_wrapped_into_integers(case):
    path, _ = case
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    raw.loc[0, "TotalSubs"] = "1e400"
    raw.loc[1, "Latency_us"] = "inf"
    raw.to_csv(path, index=False)
    with pytest.raises(LogFormatError) as error:
        read_log(path)
    assert "column TotalSubs must be an integer >= 0 (line 2)" in str(error.value)
    assert "column Latency_us must be a finite number >= 0 (required when outcome is ok) (line 3)" in str(error.value)
