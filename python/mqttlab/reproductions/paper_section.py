"""The "paper vs this run" section as tables (the CSV, the terminal) and HTML: each paper figure
beside ours with the ratio, difference and status; exact figures that differ flagged with the
reason; then each claim with its verdict and the numbers it rests on."""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any, Optional, Sequence

from mqttlab.analysis import Comparison
from mqttlab.reports import write_report_bundle
from mqttlab.reproductions.paper_figures import AGREES, DIFFERS, DISAGREES, MATCHES, value_text
from mqttlab.reproductions.section import PaperSection
from mqttlab.reproductions.verdicts import DOES_NOT_HOLD, HOLDS

Table = list[dict[str, Any]]
CSV_NAME = "paper_vs_ours"
CLAIMS_CSV = "paper_claims"
GOOD = (MATCHES, AGREES, HOLDS)
BAD = (DIFFERS, DISAGREES, DOES_NOT_HOLD)
EXPLANATION = (
    "Each figure the paper states beside ours for the same configuration, as the paper file's "
    "<code>reproduce:</code> maps it. Exact figures (protocol bytes, sample sizes) must be equal: one that differs is "
    "flagged with the reason. Others agree when ours lies in the paper's range (a range of ours over brokers: when one "
    "broker's interval lies wholly inside it) or within the mapping's tolerance factor of the paper's number, each row printing its rule; with "
    "two or more runs the confidence interval of ours must lie wholly inside (wholly outside: disagrees; across an "
    "edge: cannot tell). Runs flagged generator-limited are left out. Figures drawn without a number show ours alone. "
    "A claim is judged by its conditions as the claims' section says; claims without a rule say why."
)


def paper_rows(section: PaperSection) -> Table:
    """One row per paper figure and matching configuration (paper_vs_ours.csv)."""
    return [{
        "figure": row.figure, "kind": row.kind, "unit": row.unit, "exact": row.exact,
        "paper": value_text(row.paper), "ours": value_text(row.ours), "expected": value_text(row.expected) if row.expected is not None else "",
        "ratio": row.ratio, "difference": row.difference, "status": row.status,
        "flagged": row.flagged, "scenario": row.scenario, "broker": row.broker, "runs": row.runs,
        "source": row.source, "reason": row.reason, "quote": row.quote, "rule": row.rule, "uncertainty": row.uncertainty,
        "statistic": row.statistic, "interval": _numbers(row.interval), "spans": " ".join(_numbers(span) for span in row.spans),
        "key_intervals": " ".join(f"{key}={_numbers(bounds)}" for key, bounds in row.key_intervals.items()), "side": row.side,
        "derived": row.derived,
    } for row in section.rows]  # fmt: skip


def _numbers(bounds: Optional[list[float]]) -> str:
    """An interval as the CSV keeps it, exactly (repr), for a reader who recomputes a verdict: "low/high"."""
    return f"{bounds[0]!r}/{bounds[1]!r}" if bounds else ""


def claim_rows(section: PaperSection) -> Table:
    return [{"claim": c.claim, "verdict": c.verdict, "rule": c.rule, "evidence": " | ".join(c.evidence), "text": c.text,
             "conditions": " | ".join(outcome for _, outcome, _ in c.conditions), "rule_in_full": " | ".join(text for text, _, _ in c.conditions),
             "condition_lines": " | ".join(str(lines) for *_, lines in c.conditions),
             "runs_to_decide": " | ".join(c.runs_to_decide)}
            for c in section.claims]


def paper_html(section: PaperSection) -> str:
    """The section's HTML: heading, coverage, flagged figures first, the figure table, the claims."""
    coverage = section.coverage()
    parts = [
        '<h2 id="paper-vs-ours">The paper vs this run</h2>',
        f'<p class="note">Seed {html.escape(section.seed)}: <i>{html.escape(section.title)}</i> '
        f"({html.escape(section.source)}). {coverage['figures']} figures: {coverage['measured']} measured here, "
        f"{coverage['not_here']} not reproducible here (each says why). {EXPLANATION}</p>",
    ]
    flagged = section.flagged
    if flagged:
        parts.append(f'<p class="worse"><b>{len(flagged)} exact figure(s) differ from the paper:</b></p><ul>')
        parts += [f'<li class="worse flagged">{html.escape(row.figure)}: {html.escape(row.reason)}</li>' for row in flagged]
        parts.append("</ul>")
    head = "".join(f'<th class="text">{c}</th>' if c in TEXT_COLUMNS else f"<th>{c}</th>" for c in COLUMNS)
    body = []
    for row in paper_rows(section):
        style = "better" if row["status"] in GOOD else "worse" if row["status"] in BAD else ""
        cells = []
        for column in COLUMNS:
            value = row[column]
            text = "" if value is None else ("⚑ yes" if value is True else "" if value is False else
                                             f"{value:.4g}" if isinstance(value, float) else str(value))
            css = ' class="text"' if column in TEXT_COLUMNS else ""
            if column == "status" and style:
                text = f'<span class="{style}">{html.escape(text)}</span>'
            else:
                text = html.escape(text)
            cells.append(f"<td{css}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    parts.append(f'<div class="wide"><table class="paper"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')
    parts.append(f'<p class="csv">CSV: <a href="{CSV_NAME}.csv">{CSV_NAME}.csv</a></p>')
    parts.append("<h3>The paper's claims</h3>")
    claims = []
    for claim in section.claims:
        style = "better" if claim.verdict in GOOD else "worse" if claim.verdict in BAD else ""
        evidence = "<br>".join(html.escape(line) for line in claim.evidence)
        claims.append(f'<tr><td class="text">{html.escape(claim.claim)}</td><td class="text">{html.escape(claim.text)}</td>'
                      f'<td class="text"><span class="{style}">{html.escape(claim.verdict)}</span></td>'
                      f'<td class="text">{html.escape(claim.rule)}</td><td class="text">{evidence}</td></tr>')
    parts.append('<div class="wide"><table class="claims"><thead><tr><th class="text">claim</th><th class="text">the paper says</th>'
                 '<th class="text">verdict here</th><th class="text">rule</th><th class="text">the numbers it rests on</th></tr></thead>'
                 f'<tbody>{"".join(claims)}</tbody></table></div>')
    parts.append(f'<p class="csv">CSV: <a href="{CLAIMS_CSV}.csv">{CLAIMS_CSV}.csv</a></p>')
    return "\n".join(parts)


COLUMNS = ("figure", "paper", "ours", "expected", "unit", "uncertainty", "ratio", "difference", "status", "rule", "flagged", "scenario", "broker",
           "runs", "source", "reason", "quote")
TEXT_COLUMNS = {"figure", "paper", "ours", "expected", "unit", "uncertainty", "status", "rule", "scenario", "broker", "source", "reason", "quote"}


def paper_page(section: PaperSection, title: str) -> str:
    """A page of its own for the section (seed 000, whose `smc paper` directory has no runs to compare)."""
    from mqttlab._version import VERSION as __version__
    from mqttlab.reports.html import STYLE

    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style>", "</head><body>", f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">Made by mqttlab {__version__} on {now}.</p>', paper_html(section), "</body></html>",
    ])


def write_report_with_paper(comparison: Comparison, directory: Path, *, title: str = "mqttlab comparison",
                            png: bool = True, first: Sequence[str] = ()) -> dict[str, Path]:
    """The report bundle (reports/), with the paper's section first and its two CSVs when the
    comparison has a paper attached; `first`: more sections before the summary (capacity)."""
    section = comparison.paper
    if section is None:
        return write_report_bundle(comparison, directory, title=title, png=png, first=first)
    return write_report_bundle(comparison, directory, title=title, png=png,
                               tables={CSV_NAME: paper_rows(section), CLAIMS_CSV: claim_rows(section)}, first=[paper_html(section), *first])
