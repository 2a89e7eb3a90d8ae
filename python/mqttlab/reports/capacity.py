"""Capacity searches in a comparison: `mqttlab compare` given a `mqttlab capacity` directory (or
a tree holding several) shows each search's capacity, bracket and limit as a table, and the HTML
report gets a Capacity section with the curves (docs/capacity.md)."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Sequence

REPORT_FILE = "capacity.json"  # as mqttlab.capacity.runner writes it
INSIDE_A_SEARCH = ("probes", "verify", "at-fraction")


def find_searches(paths: Sequence[Path]) -> list[Path]:
    """Every capacity.json under `paths` (a search's own probes hold none)."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        candidates = [path] if path.name == REPORT_FILE else sorted(path.rglob(REPORT_FILE)) if path.is_dir() else []
        found.extend(c for c in candidates if not set(c.parent.parts) & set(INSIDE_A_SEARCH) and c not in found)
    return found


def capacity_rows(searches: Sequence[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in searches:
        data = json.loads(path.read_text(encoding="utf-8"))
        low, high = data.get("interval_per_s") or [None, None]
        checks = "; ".join(f"{c['factor']:g}x: {c['met']}/{c['probes']} met" for c in data.get("verification") or [])
        host = data.get("host_busy_cores") or {}
        rows.append({"search": str(path.parent), "broker": data.get("broker"), "slo": ", ".join(o["slo"] for o in data.get("objectives") or []),
                     "status": data.get("status"), "capacity": data.get("capacity_per_s"), "lower": low, "upper": high,
                     "unit": data.get("unit", "msg/s"), "limited_by": ", ".join(item["limit"] for item in data.get("limited_by") or []),
                     "verification": checks, "probes": len(data.get("probes") or []), "host_busy_cores": host.get("mean")})
    return rows


def capacity_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per search, as `compare` prints them."""
    lines = []
    for row in rows:
        bracket = f"bracket [{row['lower']:g}, {row['upper']:g}]" if row["lower"] is not None and row["upper"] is not None else "open"
        capacity = f"{row['capacity']:g} {row['unit']} {bracket}" if row["capacity"] is not None else "not measured"
        lines.append(f"capacity of {row['broker']} ({row['slo']}): {capacity}, {row['status']}"
                     + (f"; limited by {row['limited_by']}" if row["limited_by"] else "") + (f"; {row['verification']}" if row["verification"] else ""))
    return lines


def capacity_section(searches: Sequence[Path]) -> str:
    """The report's Capacity section: the table, then every search's curve (inline PNG)."""
    rows = capacity_rows(searches)
    columns = ("broker", "slo", "capacity", "lower", "upper", "unit", "status", "limited_by", "verification", "probes", "host_busy_cores")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row[c]))}</td>" for c in columns) + "</tr>" for row in rows)
    parts = ["<h2>Capacity</h2>",
             "<p>The highest offered load at which every repeated probe met the SLO, and the bracket its knee lies in (the search's, not a confidence interval) "
             "(docs/capacity.md); generator-limited probes judge nothing.</p>",
             f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"]
    for path in searches:
        figure = path.parent / "curve.png"
        if figure.is_file():
            encoded = base64.b64encode(figure.read_bytes()).decode("ascii")
            parts.append(f"<figure><img alt=\"capacity curve\" style=\"max-width:720px\" src=\"data:image/png;base64,{encoded}\">"
                         f"<figcaption>{html.escape(str(path.parent))}</figcaption></figure>")
    return "\n".join(parts)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:g}"
    return str(value)
