"""`mqttlab compare RESULTS…`: brokers side by side over runs and suites, with confidence
intervals and differences from a baseline; `--out DIR` also writes the HTML report, the CSV
tables and the PNG figures (docs/compare.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from mqttlab.cli.app import app

if TYPE_CHECKING:
    from mqttlab.analysis import Comparison

BAD_INPUT = 2
SHORT_TITLES = {"throughput": "msg/s", "latency_p50": "p50 ms", "latency_p99": "p99 ms", "latency_max": "max ms",
                "loss": "loss %", "broker_cpu": "CPU cores", "broker_rss": "RSS MB"}


@app.command("compare")
def compare_command(
    paths: Annotated[list[Path], typer.Argument(help="Results directories of runs, or suite directories (searched for runs).", show_default=False)],
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="Broker the others are measured against. Default: the first broker run.")] = None,
    confidence: Annotated[float, typer.Option("--confidence", help="Confidence level of the intervals.")] = 0.95,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write report.html, the CSV tables and figures/*.png into this directory.")] = None,
    no_png: Annotated[bool, typer.Option("--no-png", help="With --out: skip the PNG figures.")] = False,
    title: Annotated[str, typer.Option("--title", help="Title of the HTML report.")] = "mqttlab comparison",
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON instead of tables.")] = False,
) -> None:
    """Compare brokers: per scenario, throughput, latency p50/p99/max, loss, broker CPU and RSS
    with confidence intervals, and each broker's difference from the baseline."""
    # Imported here: scipy and plotly would slow down every other command's start.
    from mqttlab.analysis import ComparisonError, compare_directories

    try:
        comparison = compare_directories(paths, baseline=baseline, confidence=confidence)
    except ComparisonError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    if as_json:
        typer.echo(json.dumps(comparison.to_dict(), indent=2))
    else:
        print_comparison(Console(), comparison)
    if out is not None:
        from mqttlab.reports import write_report_bundle

        written = write_report_bundle(comparison, out, title=title, png=not no_png)
        typer.echo(f"report: {written['html']}", err=True)


def print_comparison(console: Console, comparison: "Comparison") -> None:
    """Per scenario: the means with their intervals, then each broker's difference from the
    baseline (a table of its own, so both stay readable in 80 columns)."""
    from mqttlab.reports.tables import SUMMARY_METRICS, summary_table

    rows = summary_table(comparison)
    for scenario in comparison.scenarios:
        mine = [row for row in rows if row["scenario"] == scenario.scenario]
        measures = {g.latency_measure for g in scenario.groups.values() if g.latency_measure}
        what = " (latency = round trip)" if measures == {"rtt"} else ""
        means = _table(f"{scenario.scenario}: mean ± {comparison.confidence:.0%} CI half-width{what}", "runs")
        for row in mine:
            means.add_row(row["broker"], str(row["runs"]), *(_mean_cell(row, key) for key in SUMMARY_METRICS))
        console.print(means)
        others = [row for row in mine if row["broker"] != comparison.baseline and row["throughput_diff"] is not None]
        if others:
            differences = _table(f"{scenario.scenario}: difference from {comparison.baseline} [Welch CI]", "")
            for row in others:
                differences.add_row(row["broker"], "", *(_difference_cell(row, key) for key in SUMMARY_METRICS))
            console.print(differences)
    console.print(
        "n/a: one repetition, so no interval; * the difference's interval excludes 0. "
        "Latency: the round trip in round-trip mode, else end-to-end (PUBACK/PUBCOMP when nobody subscribed).",
        style="dim",
    )
    for path, reason in comparison.excluded:
        console.print(f"left out: {path} ({reason})", style="yellow")


def _table(title: str, second: str) -> Table:
    from mqttlab.reports.tables import SUMMARY_METRICS

    table = Table(title=title, title_justify="left", header_style="bold", pad_edge=False)
    table.add_column("broker", no_wrap=True)
    table.add_column(second, justify="right")
    for key in SUMMARY_METRICS:
        table.add_column(SHORT_TITLES[key], justify="right")
    return table


def _mean_cell(row: dict[str, Any], key: str) -> str:
    mean, low, high = row[f"{key}_mean"], row[f"{key}_ci_low"], row[f"{key}_ci_high"]
    if mean is None:
        return "–"
    if low is None or high is None:
        return f"{mean:.3g}\n±n/a"
    return f"{mean:.3g}\n±{(high - low) / 2:.2g}"


def _difference_cell(row: dict[str, Any], key: str) -> str:
    diff, low, high = row[f"{key}_diff"], row[f"{key}_diff_low"], row[f"{key}_diff_high"]
    if diff is None:
        return "–"
    if low is None or high is None:
        return f"{diff:+.3g}\n(n/a)"
    marker = "*" if low > 0 or high < 0 else ""
    return f"{diff:+.3g}{marker}\n[{low:+.2g},{high:+.2g}]"
