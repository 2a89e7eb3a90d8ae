"""Reports of a comparison: one self-contained HTML page, every table as CSV, PNG figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

from mqttlab.analysis import Comparison
from mqttlab.analysis.findings import comparison_data
from mqttlab.reports.html import render_html
from mqttlab.reports.png import write_pngs
from mqttlab.reports.state import MARKDOWN_FILE, state_markdown
from mqttlab.reports.tables import all_tables, write_csv


def write_report_bundle(comparison: Comparison, directory: Path, *, title: str = "mqttlab comparison", png: bool = True,
                        tables: Optional[dict[str, list[dict[str, Any]]]] = None, first: Sequence[str] = ()) -> dict[str, Path]:
    """Writes report.html, <table>.csv for every table, comparison.json and figures/*.png into
    `directory`, and state.md for runs of the state workloads; returns the paths by kind ("html",
    "json", "csv:<name>", "png:<name>", "md:state"). `tables` and `first` (HTML sections before
    the summary) are what a caller adds: a seed's paper section."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, rows in {**all_tables(comparison), **(tables or {})}.items():
        paths[f"csv:{name}"] = write_csv(rows, directory / f"{name}.csv")
    paths["json"] = directory / "comparison.json"
    paths["json"].write_text(json.dumps(comparison_data(comparison), indent=2) + "\n", encoding="utf-8")
    if png:
        for figure in write_pngs(comparison, directory / "figures"):
            paths[f"png:{figure.stem}"] = figure
    markdown = state_markdown(comparison)
    if markdown:  # the state workloads' tables as docs/state.md shows them
        paths["md:state"] = directory / MARKDOWN_FILE
        paths["md:state"].write_text(markdown, encoding="utf-8")
    paths["html"] = directory / "report.html"
    paths["html"].write_text(render_html(comparison, title, first), encoding="utf-8")
    return paths


__all__ = ["render_html", "write_report_bundle", "write_pngs"]
