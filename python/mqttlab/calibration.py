"""The instrument's own overhead on the host that ran a run (the engine's calibration.rs: messages
through a loopback TCP pair, no broker, each stamped by the sender, by the kernel leaving and
arriving, and by the reading task), recorded in every manifest as `calibration`, so that figures
from two hosts or two days are read with what each instrument added to them.

Of its four parts two matter to a latency figure: `send_us`, the sender's stamp to the wire (in a
figure only when its sends were stamped by the engine, `measurement.send_stamp: client`; the
kernel's send stamp takes it out), and `wake_us`, arrival to read (in a figure only when
receptions were stamped when read, `measurement.receive_stamp: client`)."""

from __future__ import annotations

import datetime as dt
import functools
import statistics
from typing import Any, Iterable, Mapping, Optional

# 400 messages at 1,000 a second: 0.4 s, once per process. 1,000/s is the busier of the loads the
# overhead was seen at (issue 37: 50 and 1,000 msg/s); 50/s would take 8 s for as many messages.
# A p99 of 400 messages rests on the 4 above it: a figure to read, not to judge by.
MESSAGES = 400
RATE = 1000.0
# Two runs' calibrations are told apart when a p50 (send or wake-up) of one is more than this
# factor of the other's and more than DIFFERENT_FLOOR_US from it. On this host eight calibrations
# within a minute spread 1.6x at p50 (send 5-8 µs, wake-up 25-36 µs) and 3x at p99 (47-149 µs), so
# p99 is not compared, and a few µs of difference are noise beside figures of tens of µs.
DIFFERENT_FACTOR = 2.0
DIFFERENT_FLOOR_US = 5.0
DIFFERS = "the instrument's overhead differs"  # how compare's note on it starts
PARTS = (("send_us", "send stamp → wire"), ("wake_us", "wake-up"))
# What a run's latency figures still carry of it, by where its sends and receptions were stamped
# (`stamped`): the kernel's stamps take the send part and the wake-up out.
CARRIED = {"kernel/kernel": "neither part (sends and receptions stamped by the kernel)",
           "client/kernel": "send stamp → wire (sends stamped by the engine; receptions by the kernel: wake-up taken out)",
           "client/client": "send stamp → wire and wake-up (sends and receptions stamped by the engine)"}


def stamped(measurement: Optional[Mapping[str, Any]]) -> str:
    """Where a run's sends and receptions were stamped, "send/receive" (summary.json's
    measurement.send_stamp and receive_stamp); runs recorded before kernel send stamps had the
    engine's ("client")."""
    m = measurement or {}
    return f"{m.get('send_stamp') or 'client'}/{m.get('receive_stamp') or '?'}"


def measured() -> dict[str, Any]:
    """This host's calibration, measured at the first call of the process and kept: `taken_at`
    and the engine's figures, or `taken_at` and `error` (why there are none: a kernel without
    timestamps, an engine without calibration). Never raises: a run does not depend on it."""
    return dict(_measure())


@functools.cache
def _measure() -> dict[str, Any]:
    from mqttlab import engine

    taken_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    try:
        figures = engine.calibrate(MESSAGES, RATE)
    except (engine.EngineUnavailable, OSError, ValueError, RuntimeError) as error:
        return {"taken_at": taken_at, "error": str(error) or type(error).__name__}
    if not figures.get("stamped"):
        return {"taken_at": taken_at, "error": f"none of {figures.get('messages')} messages carried all four stamps", **figures}
    return {"taken_at": taken_at, **figures}


def _p50_p99(stats: Optional[Mapping[str, Any]]) -> str:
    return "–" if not stats else f"p50 {stats['p50_us']:g} / p99 {stats['p99_us']:g} µs"


def describe(calibration: Optional[Mapping[str, Any]], measurement: Optional[Mapping[str, Any]]) -> str:
    """One line for `report`: the run's host's send and wake-up overhead, p50/p99, and which of
    them the run's latency figures still carry (`measurement`: summary.json's)."""
    if calibration is None:
        return "instrument overhead: not calibrated (a run recorded before calibration existed)"
    if calibration.get("error"):
        return f"instrument overhead: not calibrated ({calibration['error']})"
    line = (f"instrument overhead on the run's host, calibrated {calibration['taken_at']}: "
            + ", ".join(f"{name} {_p50_p99(calibration.get(key))}" for key, name in PARTS))
    carried = CARRIED.get(stamped(measurement))
    return line + (f"; the run's latency figures carry {carried}" if carried else "")


def difference(calibrations: Mapping[str, Optional[Mapping[str, Any]]]) -> Optional[str]:
    """A note when the calibrations of compared runs (by label) differ by more than
    DIFFERENT_FACTOR at p50 (and DIFFERENT_FLOOR_US): their figures carry different overheads."""
    notes = []
    for key, name in PARTS:
        p50 = {label: float(c[key]["p50_us"]) for label, c in calibrations.items() if c and not c.get("error") and c.get(key)}
        if len(p50) < 2:
            continue
        low, high = min(p50, key=lambda label: p50[label]), max(p50, key=lambda label: p50[label])
        if p50[high] > DIFFERENT_FACTOR * max(p50[low], 1.0) and p50[high] - p50[low] > DIFFERENT_FLOOR_US:
            note = f"{name} p50 {p50[low]:g} µs ({low}) against {p50[high]:g} µs ({high})"
            if len(p50) > 2:
                # Two runs out of many are the extremes: where the rest lie says whether the
                # runs differ as a whole or one run's host was busy a moment.
                ordered = sorted(p50.values())
                middle = ordered[len(ordered) // 20], ordered[-1 - len(ordered) // 20]
                median = statistics.median(ordered)
                note += f" (the extremes of {len(ordered)} runs: their median {median:g} µs, the middle 90 % {middle[0]:g}–{middle[1]:g} µs)"
            notes.append(note)
    if not notes:
        return None
    return (f"{DIFFERS} by more than {DIFFERENT_FACTOR:g}x between these runs: " + "; ".join(notes)
            + ": their latency figures carry different overheads (other hosts, days or loads), read the differences with it")


def side_by_side(runs: Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """`compare`'s rows: per broker (runs given as broker, manifest, summary), how many of its
    runs were calibrated and when, each part's p50 and p99 as [lowest, highest] over them, and
    where the runs' sends and receptions were stamped (CARRIED says what their figures carry of it)."""
    by_broker: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for broker, manifest, summary in runs:
        by_broker.setdefault(broker, []).append((manifest.get("calibration") or {}, summary))
    rows = []
    for broker, members in by_broker.items():
        calibrated = [c for c, _ in members if c.get(PARTS[0][0]) and not c.get("error")]
        row: dict[str, Any] = {"broker": broker, "runs": len(members), "calibrated": len(calibrated),
                               "taken": sorted({str(c["taken_at"]) for c in calibrated})}
        for key, _ in PARTS:
            for quantile in ("p50_us", "p99_us"):
                values = [float(c[key][quantile]) for c in calibrated if c.get(key)]
                row[f"{key.removesuffix('_us')}_{quantile}"] = [min(values), max(values)] if values else None
        stamps = {stamped(summary.get("measurement")) for _, summary in members}
        row["stamped"] = stamps.pop() if len(stamps) == 1 else "differs between runs"
        rows.append(row)
    return rows
