"""Capacity searches side by side: one table with each broker's capacity and interval, which
differences are significant, and one figure (curve.py) with every broker's curve.

The test of a difference: broker B's capacity is above broker A's when B's interval lies wholly
above A's (A's upper end <= B's lower end). B then sustained, in every one of its repeated probes,
a rate at which A broke the objectives, so the order does not depend on where inside the
brackets the true capacities are. Overlapping intervals are not distinguished at the search's
resolution; a finer --resolution or more --repeats may separate them."""

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
    """Every pair of brokers: which is higher, and whether that is significant (disjoint intervals)."""
    found = []
    for i, a in enumerate(reports):
        for b in reports[i + 1:]:
            found.append(_pair(a, b))
    return found


def _pair(a: CapacityReport, b: CapacityReport) -> dict[str, Any]:
    la, ua = _bounds(a)
    lb, ub = _bounds(b)
    entry: dict[str, Any] = {"brokers": [a.broker, b.broker], "significant": False}
    if ua is not None and lb is not None and ua <= lb:
        entry.update(significant=True, higher=b.broker, statement=f"{b.broker} > {a.broker}: {b.broker} sustained {lb:g} {b.unit}, "
                     f"where {a.broker} broke the objectives at {ua:g} or below")
    elif ub is not None and la is not None and ub <= la:
        entry.update(significant=True, higher=a.broker, statement=f"{a.broker} > {b.broker}: {a.broker} sustained {la:g} {a.unit}, "
                     f"where {b.broker} broke the objectives at {ub:g} or below")
    else:
        entry["statement"] = f"{a.broker} and {b.broker}: intervals overlap (or are open), not distinguished at this resolution"
    return entry


def _bounds(report: CapacityReport) -> tuple[Optional[float], Optional[float]]:
    """The interval the capacity lies in; an open end is None (above max, generator-limited)."""
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
            "test": "significant = disjoint intervals: the higher broker sustained (every repeated probe) a rate at which the other broke the objectives"}
    (directory / COMPARISON_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data
