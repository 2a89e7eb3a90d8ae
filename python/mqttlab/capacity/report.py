"""Capacity searches side by side: one table with each broker's capacity and bracket, which
brokers the brackets set apart, and one figure (curve.py) with every broker's curve.

Broker B was above broker A in these searches when B's bracket lies wholly above A's (A's upper
end <= B's lower end): B then sustained, in every one of its repeated probes, a rate at which A
broke the objectives. That is an order seen in one search per broker, not a significance test:
searched again on a busy host the brackets move (`verify`), so it is never called significant.
Overlapping brackets are not set apart at the search's resolution; a finer --resolution or more
--repeats may separate them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

from mqttlab.capacity.curve import write_csv, write_png
from mqttlab.capacity.runner import CapacityReport, report_series
from mqttlab.capacity.slo import Objective

COMPARISON_FILE = "comparison.json"


def table_rows(reports: Sequence[CapacityReport]) -> list[dict[str, Any]]:
    rows = []
    for report in reports:
        o = report.outcome
        rows.append({"broker": report.broker, "status": o.status, "capacity_per_s": o.lower, "interval_per_s": [o.lower, o.upper],
                     "limited_by": ", ".join(item["limit"] for item in report.limits) or None,
                     "generator_limited_at_per_s": o.limited_at, "probes": len(o.probes)})
    return rows


def differences(reports: Sequence[CapacityReport]) -> list[dict[str, Any]]:
    """Every pair of brokers: whether their brackets are apart, and which is above."""
    found = []
    for i, a in enumerate(reports):
        for b in reports[i + 1:]:
            found.append(_pair(a, b))
    return found


def _pair(a: CapacityReport, b: CapacityReport) -> dict[str, Any]:
    la, ua = _bounds(a)
    lb, ub = _bounds(b)
    entry: dict[str, Any] = {"brokers": [a.broker, b.broker], "apart": False}
    for high, low, high_lower, low_upper in ((b, a, lb, ua), (a, b, la, ub)):
        if low_upper is not None and high_lower is not None and low_upper <= high_lower:
            entry.update(apart=True, higher=high.broker, statement=f"brackets apart: {high.broker} sustained {high_lower:g} {high.unit}, where "
                         f"{low.broker} broke the objectives at {low_upper:g} or below (one search each: an order seen once, not a significance test)")
            return entry
    entry["statement"] = f"{a.broker} and {b.broker}: brackets overlap (or are open), not set apart at this resolution"
    return entry


def _bounds(report: CapacityReport) -> tuple[Optional[float], Optional[float]]:
    """The bracket the capacity lies in; an open end is None (above max, generator-limited)."""
    o = report.outcome
    if o.status in ("bracketed", "probe_budget"):
        return o.lower, o.upper
    if o.status == "below_min":
        return 0.0, o.upper
    return o.lower, None


def write_comparison(reports: Sequence[CapacityReport], objectives: Sequence[Objective], directory: Path) -> dict[str, Any]:
    """comparison.json, curves.csv and curves.png over every broker's search in `directory`."""
    series = [report_series(report) for report in reports]
    write_csv(series, directory / "curves.csv")
    write_png(series, objectives, directory / "curves.png", title=f"{', '.join(r.broker for r in reports)}: {', '.join(o.text for o in objectives)}",
              unit=reports[0].unit if reports else "msg/s")
    data = {"unit": reports[0].unit if reports else "msg/s", "brokers": table_rows(reports), "differences": differences(reports),
            "test": "apart = disjoint brackets: the higher broker sustained (every repeated probe) a rate at which the other broke the objectives; "
                    "one search per broker, so an order seen once, never called significant"}
    (directory / COMPARISON_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data
