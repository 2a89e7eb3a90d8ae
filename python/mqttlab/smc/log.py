"""The explore log: one CSV row per message plus a JSON sidecar describing the test case.

`explore` writes one pair per test case (one workload: a broker and a fixed number of concurrent
clients), e.g. ``case-007.csv`` and ``case-007.json``. `learn` reads them back and holds whole
workloads out for model comparison, which is why a case is the unit on disk.

CSV columns, in this order (the paper's Table 1 with ``#`` dropped from the names):

==========  =====================================================================
Msg         connect, disconnect, subscribe, unsubscribe or publish
ActiveMsgs  open exchanges of all clients when the message was sent, itself included (>= 1)
TotalSubs   subscriptions held by all clients at that moment
TopicSize   bytes of the topic (0 for connect and disconnect)
MsgSize     bytes of the payload; publish only, empty otherwise
Subs        clients subscribed to the topic at that moment; publish only
Receivers   clients that received the message; publish only
Latency_us  send to response (publish: to PUBACK and the last delivery), microseconds
outcome     ok, or the functional failure: missing_delivery, extra_delivery,
            wrong_ack, timeout, error (Latency_us may then be empty)
==========  =====================================================================

Sidecar keys: ``broker`` (text), ``clients`` (int >= 1), ``seed`` (int); other keys are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

MESSAGE_TYPES = ("connect", "disconnect", "publish", "subscribe", "unsubscribe")
OUTCOME_OK = "ok"
FAILURE_OUTCOMES = ("missing_delivery", "extra_delivery", "wrong_ack", "timeout", "error")
COLUMNS = ("Msg", "ActiveMsgs", "TotalSubs", "TopicSize", "MsgSize", "Subs", "Receivers", "Latency_us", "outcome")
PUBLISH_ONLY = ("MsgSize", "Subs", "Receivers")
_MAX_ROWS_NAMED = 5  # a problem in many rows names the first few, not thousands


class LogFormatError(ValueError):
    """A log or sidecar that does not follow the format; the message lists every problem."""


@dataclass(frozen=True)
class CaseMeta:
    broker: str
    clients: int
    seed: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker, "clients": self.clients, "seed": self.seed, **self.extra}


@dataclass(frozen=True)
class ExploreLog:
    path: Path
    meta: CaseMeta
    rows: pd.DataFrame  # typed columns; publish-only columns are 0 on other messages

    @property
    def ok_rows(self) -> pd.DataFrame:
        return self.rows[self.rows["outcome"] == OUTCOME_OK]

    @property
    def failures(self) -> pd.DataFrame:
        return self.rows[self.rows["outcome"] != OUTCOME_OK]


def sidecar_path(csv_path: Path) -> Path:
    return Path(csv_path).with_suffix(".json")


def write_log(csv_path: Path, rows: pd.DataFrame, meta: CaseMeta) -> None:
    """Write a case; publish-only values of other messages are left empty, as the format says."""
    missing = [c for c in COLUMNS if c not in rows.columns]
    if missing:
        raise LogFormatError(f"rows lack the columns {', '.join(missing)}")
    out = rows.loc[:, list(COLUMNS)].copy()
    not_publish = out["Msg"] != "publish"
    for column in PUBLISH_ONLY:
        out[column] = out[column].astype(object)
        out.loc[not_publish, column] = ""
    csv_path = Path(csv_path)
    out.to_csv(csv_path, index=False)
    sidecar_path(csv_path).write_text(json.dumps(meta.to_json(), indent=2) + "\n")


def _read_meta(path: Path) -> CaseMeta:
    side = sidecar_path(path)
    if not side.exists():
        raise LogFormatError(f"{path}: the sidecar {side.name} is missing (it names broker, clients, seed)")
    try:
        data = json.loads(side.read_text())
    except json.JSONDecodeError as error:
        raise LogFormatError(f"{side}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise LogFormatError(f"{side}: must be a JSON object")
    problems = []
    if not isinstance(data.get("broker"), str) or not data.get("broker"):
        problems.append("'broker' must be a non-empty text")
    clients = data.get("clients")
    if not isinstance(clients, int) or isinstance(clients, bool) or clients < 1:
        problems.append(f"'clients' must be an integer >= 1, got {clients!r}")
    seed = data.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        problems.append(f"'seed' must be an integer, got {seed!r}")
    if problems:
        raise LogFormatError(f"{side}: " + "; ".join(problems))
    assert isinstance(clients, int) and isinstance(seed, int)  # checked above, or problems raised
    extra = {k: v for k, v in data.items() if k not in ("broker", "clients", "seed")}
    return CaseMeta(broker=data["broker"], clients=clients, seed=seed, extra=extra)


def _name_rows(mask: pd.Series) -> str:
    # Row numbers as a spreadsheet shows them: the header is line 1.
    lines = (np.flatnonzero(mask.to_numpy()) + 2).tolist()
    shown = ", ".join(str(n) for n in lines[:_MAX_ROWS_NAMED])
    more = f" and {len(lines) - _MAX_ROWS_NAMED} more" if len(lines) > _MAX_ROWS_NAMED else ""
    return f"line {shown}{more}"


def read_log(csv_path: Path) -> ExploreLog:
    """Read and validate one case; every problem found is reported in one LogFormatError."""
    path = Path(csv_path)
    if not path.exists():
        raise LogFormatError(f"{path}: no such file")
    meta = _read_meta(path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise LogFormatError(f"{path}: not a readable CSV ({error})") from None

    missing = [c for c in COLUMNS if c not in raw.columns]
    unexpected = [c for c in raw.columns if c not in COLUMNS]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing column(s) {', '.join(missing)}")
        if unexpected:
            parts.append(f"unexpected column(s) {', '.join(map(str, unexpected))}")
        raise LogFormatError(f"{path}: " + "; ".join(parts) + f" (expected {','.join(COLUMNS)})")

    problems: list[str] = []
    msg = raw["Msg"].str.strip()
    outcome = raw["outcome"].str.strip()
    bad_msg = ~msg.isin(MESSAGE_TYPES)
    if bad_msg.any():
        problems.append(f"column Msg must be one of {', '.join(MESSAGE_TYPES)} ({_name_rows(bad_msg)})")
    bad_outcome = ~outcome.isin((OUTCOME_OK, *FAILURE_OUTCOMES))
    if bad_outcome.any():
        problems.append(
            f"column outcome must be ok or one of {', '.join(FAILURE_OUTCOMES)} ({_name_rows(bad_outcome)})"
        )

    is_publish = msg == "publish"
    is_ok = outcome == OUTCOME_OK
    typed: dict[str, pd.Series] = {"Msg": msg, "outcome": outcome}
    for column in ("ActiveMsgs", "TotalSubs", "TopicSize", *PUBLISH_ONLY):
        text = raw[column].str.strip()
        required = is_publish if column in PUBLISH_ONLY else pd.Series(True, index=raw.index)
        empty = text == ""
        values = pd.to_numeric(text.where(~empty), errors="coerce")
        minimum = 1 if column == "ActiveMsgs" else 0
        not_integer = values.isna() | ~np.isfinite(values) | (values < minimum) | (values != np.floor(values))
        invalid = (~empty & not_integer) | (required & empty)
        if invalid.any():
            what = "an integer >= 1" if minimum else "an integer >= 0"
            scope = " on publish rows" if column in PUBLISH_ONLY else ""
            problems.append(f"column {column} must be {what}{scope} ({_name_rows(invalid)})")
        typed[column] = values

    latency_text = raw["Latency_us"].str.strip()
    latency = pd.to_numeric(latency_text.where(latency_text != ""), errors="coerce")
    present = latency_text != ""
    bad_value = present & (latency.isna() | ~np.isfinite(latency) | (latency < 0))
    bad_latency = bad_value | (is_ok & ~present)
    if bad_latency.any():
        problems.append(
            f"column Latency_us must be a finite number >= 0 (required when outcome is ok) ({_name_rows(bad_latency)})"
        )
    typed["Latency_us"] = latency

    if problems:
        raise LogFormatError(f"{path}: " + "; ".join(problems))
    rows = pd.DataFrame({c: typed[c] for c in COLUMNS})
    for column in ("ActiveMsgs", "TotalSubs", "TopicSize", *PUBLISH_ONLY):
        rows[column] = rows[column].fillna(0).astype(np.int64)
    return ExploreLog(path=path, meta=meta, rows=rows)


def find_logs(paths: list[Path]) -> list[Path]:
    """Expand directories to the CSV files in them (sorted); files are taken as given."""
    found: list[Path] = []
    for item in map(Path, paths):
        if item.is_dir():
            found.extend(sorted(p for p in item.glob("*.csv")))
        else:
            found.append(item)
    if not found:
        raise LogFormatError(f"no log files found in {', '.join(map(str, paths))}")
    return found


def read_logs(paths: list[Path]) -> list[ExploreLog]:
    """Read several cases, reporting the problems of every file together."""
    logs, problems = [], []
    for path in find_logs(paths):
        try:
            logs.append(read_log(path))
        except LogFormatError as error:
            problems.append(str(error))
    if problems:
        raise LogFormatError("\n".join(problems))
    return logs
