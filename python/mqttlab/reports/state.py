"""The state workloads of a comparison as tables (docs/state.md): per scenario that measured an
offline session, a retained read or wills, one row per run with the workload's figures and each
promise's verdict with its count (promises.py judged them; the rules are printed with the table).
The same rows make the report's section, the CSVs and report/state.md, the Markdown that
docs/state.md's measured tables are copied from (`mqttlab suite run state`)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from mqttlab.analysis import Comparison
from mqttlab.analysis.runs import RunFigures
from mqttlab.promises import verdict_text
from mqttlab.state_memory import per_message

Table = list[dict[str, Any]]
Summary = Mapping[str, Any]
MARKDOWN_FILE = "state.md"
TABLE_PREFIX = "state_"
BROKER = "broker"


def _spread_ms(spread: Optional[Mapping[str, Any]]) -> str:
    """p50 / p99 of a spread in seconds, as milliseconds."""
    return f"{spread['p50'] * 1000:,.2f} / {spread['p99'] * 1000:,.2f}" if spread else "—"


def _latency_ms(summary: Summary, measure: str, digits: int) -> str:
    """p50 / max of one of the run's latency histograms, in milliseconds."""
    latency = (summary.get("latency") or {}).get(measure) or {}
    return f"{latency['p50_us'] / 1000:,.{digits}f} / {latency['max_us'] / 1000:,.{digits}f}" if latency.get("count") else "—"


def _offline(summary: Summary) -> dict[str, str]:
    o = summary["offline"]
    rate = o.get("drain_rate_per_s")
    return {"sessions resumed": f"{o['sessions_resumed']}/{o['returned']}",
            "held messages delivered": f"{o['delivered']:,} of {o['owed']:,}",
            "drain ms p50 / p99": _spread_ms(o.get("drain_s")),
            "drain msg/s p50": f"{rate['p50']:,.0f}" if rate else "—",
            "held e2e ms p50 / max": _latency_ms(summary, "e2e_queued", 0),
            "B per queued message": per_message((summary.get("state_memory") or {}).get("queued"))}


def _retained(summary: Summary) -> dict[str, str]:
    r = summary["retained"]
    return {"retained values delivered": f"{r['delivered']:,} of {r['expected']:,}",
            "subscribers complete": f"{r['complete']}/{r['subscribers']}",
            "SUBSCRIBE → first ms p50 / p99": _spread_ms(r.get("first_s")),
            "SUBSCRIBE → all ms p50 / p99": _spread_ms(r.get("all_s")),
            "B per retained message": per_message((summary.get("state_memory") or {}).get("retained"))}


def _wills(summary: Summary) -> dict[str, str]:
    w = summary["wills"]
    return {"wills delivered": f"{w['delivered']:,} of {w['expected']:,}",
            "exit → will ms p50 / max": _latency_ms(summary, "will", 2),
            "copies": str(w["duplicated"])}


# summary.json's section of each state workload -> its figures in the table.
WORKLOADS: dict[str, Callable[[Summary], dict[str, str]]] = {"offline": _offline, "retained": _retained, "wills": _wills}


def _label(run: RunFigures) -> str:
    """The broker with its version, as the launcher reported it (`mosquitto 2.0.11`)."""
    version = run.broker_version or ""
    name = run.broker.split(" (", 1)[0]
    if not version:
        return run.broker
    return run.broker.replace(name, version, 1) if version.lower().startswith(name.lower()) else f"{run.broker} {version}"


def state_row(run: RunFigures) -> dict[str, str]:
    """One run's figures of every state workload it measured, then its promises' verdicts (by
    the promise's name, in the order judged)."""
    summary = run.results.summary
    row = {BROKER: _label(run)}
    for section, figures in WORKLOADS.items():
        if summary.get(section):
            row.update(figures(summary))
    row.update({str(v["promise"]): verdict_text(v) for v in summary.get("promises") or []})
    return row


def _measured(comparison: Comparison) -> dict[str, list[RunFigures]]:
    """`state_<scenario>` -> the runs of each scenario that measured state, broker by broker; the
    repetitions of a broker each have their own row (counts, not means)."""
    found: dict[str, list[RunFigures]] = {}
    for scenario in comparison.scenarios:
        runs = [run for group in scenario.groups.values() for run in group.runs
                if any(run.results.summary.get(section) for section in WORKLOADS)]
        if runs:
            found[TABLE_PREFIX + re.sub(r"[^A-Za-z0-9._-]+", "-", scenario.scenario)] = runs
    return found


def state_tables(comparison: Comparison) -> dict[str, Table]:
    """`state_<scenario>` -> one row per run, for each scenario whose runs measured state."""
    return {name: [state_row(run) for run in runs] for name, runs in _measured(comparison).items()}


def _rules(runs: list[RunFigures]) -> dict[str, str]:
    """The rule of each promise judged in `runs`, by promise."""
    return {str(v["promise"]): str(v["rule"]) for run in runs for v in run.results.summary.get("promises") or []}


def _columns(rows: Table) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def state_markdown(comparison: Comparison) -> str:
    """Each state table in Markdown under its scenario's name, the rules after it: what
    docs/state.md's measured tables are copied from."""
    parts = []
    for name, runs in _measured(comparison).items():
        rows = [state_row(run) for run in runs]
        columns = _columns(rows)
        lines = [f"### {name[len(TABLE_PREFIX):]}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(row.get(column, "—") for column in columns) + " |" for row in rows]
        lines += ["", "Rules:", ""] + [f"- {promise}: {rule}" for promise, rule in _rules(runs).items()]
        parts.append("\n".join(lines))
    if parts and comparison.excluded:
        # A run that did not complete (the broker lost, the run failed) is in no table: say which.
        parts.append("Left out of the tables: " + "; ".join(f"{_run_name(path)} ({reason})" for path, reason in comparison.excluded) + ".")
    return "\n\n".join(parts) + "\n" if parts else ""


def _run_name(path: Path) -> str:
    """A suite's run by its scenario, broker and repetition (<suite>/runs/<scenario>/<broker>/rep-N)."""
    return "/".join(path.parts[-3:]) if path.parent.parent.parent.name == "runs" else str(path)


def state_html(comparison: Comparison) -> str:
    """The report's section: one table per scenario that measured state, its rules beneath."""
    measured = _measured(comparison)
    if not measured:
        return ""
    parts = ['<h2 id="state">The state the brokers kept</h2>',
             '<p class="note">Per run: the state workload\'s figures, then each promise of the protocol it tested with its '
             "verdict and count (kept: the count that kept it; broken: the count that broke it, named), judged by the rule "
             f'printed under the table (docs/state.md). The same tables in Markdown: <a href="{MARKDOWN_FILE}">{MARKDOWN_FILE}</a>.</p>']
    for name, runs in measured.items():
        rows = [state_row(run) for run in runs]
        columns = _columns(rows)
        head = "".join(f'<th class="text">{html.escape(column)}</th>' for column in columns)
        body = "".join("<tr>" + "".join(f'<td class="text">{_cell(row.get(column, "—"))}</td>' for column in columns) + "</tr>"
                       for row in rows)
        rules = "".join(f"<li><b>{html.escape(promise)}</b>: {html.escape(rule)}</li>" for promise, rule in _rules(runs).items())
        parts += [f"<h3>{html.escape(name[len(TABLE_PREFIX):])}</h3>",
                  f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>',
                  f'<ul class="note">{rules}</ul>', f'<p class="csv">CSV: <a href="{name}.csv">{name}.csv</a></p>']
    return "\n".join(parts)


def _cell(text: str) -> str:
    escaped = html.escape(text)
    return f'<span class="worse">{escaped}</span>' if text.startswith("broken") else escaped
