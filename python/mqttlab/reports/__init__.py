"""Reports of a comparison: one self-contained HTML page, every table as CSV, PNG figures."""

from __future__ import annotations

import json
from pathlib import Path

from mqttlab.analysis import Comparison
from mqttlab.reports.html import render_html
from mqttlab.reports.png import write_pngs
from mqttlab.reports.tables import all_tables, write_csv


def write_report_bundle(comparison: Comparison, directory: Path, *, title: str = "mqttlab comparison", png: bool = True) -> dict[str, Path]:
    """Writes report.html, <table>.csv for every table, comparison.json and figures/*.png into
    `directory`; returns the paths by kind ("html", "json", "csv:<name>", "png:<name>")."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, rows in all_tables(comparison).items():
        paths[f"csv:{name}"] = write_csv(rows, directory / f"{name}.csv")
    if comparison.paper is not None:
        from mqttlab.reports.paper_section import CLAIMS_CSV, CSV_NAME, claim_rows, paper_rows

        paths[f"csv:{CSV_NAME}"] = write_csv(paper_rows(comparison.paper), directory / f"{CSV_NAME}.csv")
        paths[f"csv:{CLAIMS_CSV}"] = write_csv(claim_rows(comparison.paper), directory / f"{CLAIMS_CSV}.csv")
    paths["json"] = directory / "comparison.json"
    paths["json"].write_text(json.dumps(comparison.to_dict(), indent=2) + "\n", encoding="utf-8")
    if png:
        for figure in write_pngs(comparison, directory / "figures"):
            paths[f"png:{figure.stem}"] = figure
    paths["html"] = directory / "report.html"
    paths["html"].write_text(render_html(comparison, title), encoding="utf-8")
    return paths


__all__ = ["render_html", "write_report_bundle", "write_pngs"]
