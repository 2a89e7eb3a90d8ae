"""`mqttlab compare RESULTS…`: brokers side by side over runs and suites, with confidence
intervals and differences from a baseline; `--out DIR` also writes the HTML report, the CSV
tables and the PNG figures (docs/compare.md). With a seed's paper (`--paper seed003`, or found from
the suite directory's suite.yaml) the report also sets the paper's figures beside ours; seed 000's
`mqttlab smc paper` directory is compared with `--paper seed000 DIR`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from mqttlab.exits import Exit
from mqttlab.numbers import figure_text as _figure

if TYPE_CHECKING:
    from mqttlab.analysis import Comparison

SHORT_TITLES = {"throughput": "delivered/s", "latency_p50": "p50 ms", "latency_p99": "p99 ms", "latency_max": "max ms",
                "loss": "loss %", "broker_cpu": "CPU cores", "broker_rss_peak": "peak RSS MB",
                "fault_outage": "outage s", "fault_recovery": "recovery s", "dropped": "dropped %",
                # The state a broker keeps (docs/state.md), where the runs measured it.
                "offline_delivered": "held deliv. %", "drain_p99": "drain p99 ms", "retained_delivered": "retained %",
                "retained_all_p99": "retained all p99 ms", "wills_delivered": "wills %", "will_p50": "will p50 ms"}


def _refuse(message: str) -> typer.Exit:
    """A problem with what was given: said on one line, exit 2."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(Exit.BAD_INPUT)


@contextlib.contextmanager
def _refused_on(*errors: type[Exception]) -> Iterator[None]:
    """Any of `errors` raised inside is a problem with what was given (`_refuse`)."""
    try:
        yield
    except errors as error:
        raise _refuse(str(error)) from None


def compare_command(
    paths: Annotated[list[Path], typer.Argument(help="Results directories of runs, or suite directories (searched for runs), or a "
                                                "reproduction page's evidence.tar.xz.", show_default=False)],
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="Broker the others are measured against. Default: the first broker run.")] = None,
    confidence: Annotated[float, typer.Option("--confidence", help="Confidence level of the intervals.")] = 0.95,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write report.html, the CSV tables and figures/*.png into this directory.")] = None,
    no_png: Annotated[bool, typer.Option("--no-png", help="With --out: skip the PNG figures.")] = False,
    title: Annotated[str, typer.Option("--title", help="Title of the HTML report.")] = "mqttlab comparison",
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON instead of tables.")] = False,
    paper: Annotated[Optional[str], typer.Option("--paper", help="Set this seed's paper beside the runs: seed001..seed004 "
                                                 "(default: the suite's own, from its suite.yaml), or seed000 with a "
                                                 "`mqttlab smc paper` directory; or a paper file.")] = None,
    page: Annotated[Optional[Path], typer.Option("--page", help="Write the paper vs these runs as a Markdown page (a "
                                                 "reproduction page, docs/reproductions/): command, host, tables, "
                                                 "PNGs and the evidence (evidence.tar.xz, from which the page is made "
                                                 "again) in a folder beside it; remade pages keep the text outside "
                                                 "the generated part.")] = None,
    generator_limited: Annotated[bool, typer.Option("--generator-limited", help="Show the runs flagged generator-limited apart, "
                                                    "in scenarios of their own (by default they are left out of the figures, "
                                                    "as the reproduction pages leave them).")] = False,
) -> None:
    """Compare brokers: per scenario, throughput, latency p50/p99/max, loss, broker CPU and RSS
    with confidence intervals, and each broker's difference from the baseline."""
    from mqttlab.reproductions.evidence import EvidenceError, is_evidence, opened

    with contextlib.ExitStack() as stack:
        with _refused_on(EvidenceError):
            paths = [unpacked for path in paths for unpacked in (stack.enter_context(opened(path)) if is_evidence(path) else [path])]
        _compare(paths, baseline, confidence, out, no_png, title, as_json, paper, page, generator_limited)


def _compare(paths: list[Path], baseline: Optional[str], confidence: float, out: Optional[Path], no_png: bool, title: str,
             as_json: bool, paper: Optional[str], page: Optional[Path], flagged_apart: bool = False) -> None:
    # Imported here: scipy and plotly would slow down every other command's start.
    from mqttlab.analysis import ComparisonError, compare_directories
    from mqttlab.analysis.compare import as_read
    from mqttlab.analysis.findings import comparison_data
    from mqttlab.reproductions.paper_figures import is_smc_directory
    from mqttlab.reproductions.section import attach_paper
    from mqttlab.reproductions.paper_file import PaperFileError

    smc = [path for path in paths if is_smc_directory(path)]
    if smc:
        _compare_smc(smc, paths, paper, out, title, as_json, page)
        return
    from mqttlab.reproductions.capacity_searches import is_capacity_source, searches_in

    # Capacity searches given beside runs (a reproduction's saturation regime) feed the paper's
    # `capacity:` figures; their probes are not compared as runs. Given alone, a search's probes are.
    beside = [path for path in paths if is_capacity_source(path)]
    runs = [path for path in paths if path not in beside] or paths
    with _refused_on(ComparisonError, PaperFileError):
        comparison = compare_directories(runs, baseline=baseline, confidence=confidence)
        attach_paper(comparison, runs, paper, searches_in(beside) if len(runs) < len(paths) else None)
    shown = as_read(comparison, flagged_apart=flagged_apart)
    if as_json:
        typer.echo(json.dumps(comparison_data(shown), indent=2))
    else:
        print_comparison(Console(), shown)
        if comparison.paper is not None:
            print_paper_section(Console(), comparison.paper)
    from mqttlab.reports.capacity import capacity_lines, capacity_rows, capacity_section, find_searches

    searches = find_searches(paths)  # `mqttlab capacity` directories among the paths (docs/capacity.md)
    for line in capacity_lines(capacity_rows(searches)) if not as_json else []:
        Console().print(line, markup=False, highlight=False)
    if out is not None:
        from mqttlab.reproductions.paper_section import write_report_with_paper

        written = write_report_with_paper(shown, out, title=title, png=not no_png, first=[capacity_section(searches)] if searches else [])
        typer.echo(f"report: {written['html']}", err=True)
    if page is not None:
        _write_page(page, comparison.paper, paths, comparison)


def _write_page(page: Path, section: Any, sources: list[Path], comparison: Optional["Comparison"] = None) -> None:
    """The Markdown reproduction page, and beside it (in a folder named as the page) its tables as
    CSV, the comparison's summary PNGs at a size fit to commit and the evidence it was made from."""
    from mqttlab.reproductions.page import write_page

    if section is None:
        raise _refuse("--page needs a paper: give --paper seed00N (or a suite directory whose suite.yaml names a seed)")
    from mqttlab.reproductions.paper_section import CLAIMS_CSV, CSV_NAME, claim_rows, paper_rows
    from mqttlab.reports.tables import csv_keys, summary_table, write_csv

    folder = page.parent / page.stem
    folder.mkdir(parents=True, exist_ok=True)
    tables = [write_csv(paper_rows(section), folder / f"{CSV_NAME}.csv"), write_csv(claim_rows(section), folder / f"{CLAIMS_CSV}.csv")]
    figures: list[Path] = []
    if comparison is not None:
        from mqttlab.analysis.compare import leave_out_generator_limited
        from mqttlab.reports.png import write_pngs

        # The page's table and figures leave generator-limited runs out, as its verdicts do; the
        # CSV keeps a configuration with no other run (counted in generator_limited_runs), the
        # figures draw none of it.
        tables.append(write_csv(summary_table(leave_out_generator_limited(comparison), keys=csv_keys(comparison)), folder / "summary.csv"))
        for old in folder.glob("*.png"):
            old.unlink()
        judged = leave_out_generator_limited(comparison, keep_all_flagged=False)
        figures = [figure for figure in write_pngs(judged, folder, dpi=80, per_scenario=False) if _page_figure(figure, judged)]
        for figure in set(folder.glob("*.png")) - set(figures):
            figure.unlink()
        for figure in figures:
            _palette(figure)
    from mqttlab.reproductions.beside import write_beside
    from mqttlab.reproductions.evidence import EVIDENCE, write_evidence

    beside = write_beside(section, folder, comparison.confidence if comparison is not None else 0.95,
                          comparison.brokers if comparison is not None else None)
    for drawn in beside:
        _palette(drawn.path)
    evidence = write_evidence(sources, folder / EVIDENCE)
    typer.echo(f"page: {write_page(page, section, sources, comparison, figures, tables, evidence, beside)}", err=True)
    from mqttlab.reproductions.readme import update_for_page

    readme = update_for_page(page)  # the README's verdict lines follow the page's
    if readme is not None:
        typer.echo(f"verdicts: {readme}", err=True)


PAGE_BARS = ("throughput", "latency_p50", "latency_p99", "loss")
PAGE_MAX_BARS = 40  # configurations: beyond this a bar chart is unreadable; the rate sweeps stay


def _palette(figure: Path) -> None:
    """Saves a PNG with a 256-colour palette: a plot has few colours, and the file shrinks about
    threefold, which matters for figures committed to the repository."""
    from PIL import Image

    with Image.open(figure) as image:
        small = image.convert("RGB").quantize(colors=256)
    small.save(figure, optimize=True)


def _page_figure(figure: Path, comparison: "Comparison") -> bool:
    """The figures a reproduction page keeps: rate sweeps, seed 002's shark fins (from captures),
    and the headline bar charts while they stay readable."""
    if figure.stem.startswith(("rate-sweep", "shark-fin")):
        return True
    if figure.stem == "mean-sd":  # the mean ± SD bars seeds 001 and 004 drew
        return comparison.paper is not None and comparison.paper.seed in ("001", "004") and len(comparison.scenarios) <= PAGE_MAX_BARS
    return figure.stem in PAGE_BARS and len(comparison.scenarios) <= PAGE_MAX_BARS


def _compare_smc(smc: list[Path], paths: list[Path], paper: Optional[str], out: Optional[Path], title: str, as_json: bool,
                 page: Optional[Path]) -> None:
    """Seed 000: its Tables 2, 3 and 4 (and the learned coefficients) from a `mqttlab smc paper`
    directory beside the paper's; no runs to compare, so the report is the section alone. A second
    directory is a run of the same pipeline in another broker configuration: the claims about
    settings compare the first with it (the page's evidence then holds both)."""
    from mqttlab.reproductions.section import paper_section
    from mqttlab.reproductions.paper_file import PaperFileError

    if len(smc) > 2 or len(paths) != len(smc):
        raise _refuse("give one `mqttlab smc paper` directory, or two (the page's run, then a run in another broker "
                      "configuration), and nothing else (seed 000 has no runs to compare beside it)")
    if paper not in (None, "seed000"):
        raise _refuse(f"--paper: {smc[0]} is a `mqttlab smc paper` directory, which only seed000 describes (got {paper})")
    with _refused_on(PaperFileError):
        reference = paper_section("seed000", smc_directory=smc[1]) if len(smc) == 2 else None
        section = paper_section("seed000", smc_directory=smc[0], reference=reference)
    if as_json:
        typer.echo(json.dumps(section.to_dict(), indent=2))
    else:
        print_paper_section(Console(), section)
    if out is not None:
        from mqttlab.reproductions.paper_section import CLAIMS_CSV, CSV_NAME, claim_rows, paper_page, paper_rows
        from mqttlab.reports.tables import write_csv

        out.mkdir(parents=True, exist_ok=True)
        write_csv(paper_rows(section), out / f"{CSV_NAME}.csv")
        write_csv(claim_rows(section), out / f"{CLAIMS_CSV}.csv")
        (out / "comparison.json").write_text(json.dumps({"paper": section.to_dict()}, indent=2) + "\n", encoding="utf-8")
        html_page = out / "report.html"
        html_page.write_text(paper_page(section, title if title != "mqttlab comparison" else "Seed 000: the paper vs this run"), encoding="utf-8")
        typer.echo(f"report: {html_page}", err=True)
    if page is not None:
        _write_page(page, section, smc)


def print_paper_section(console: Console, section: Any) -> None:
    """Compact: the measured and flagged figures (the not-reproducible ones are counted, listed in
    the report), then each claim's verdict."""
    from mqttlab.reproductions.paper_figures import MEASURED, value_text
    from mqttlab.reproductions.paper_section import BAD, GOOD

    coverage = section.coverage()
    table = Table(title=f"The paper (seed {section.seed}) vs this run", title_justify="left", header_style="bold", pad_edge=False)
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("figure", "left"), ("where", "left"), ("paper", "right"), ("ours", "right"), ("ratio", "right"), ("status", "left"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, overflow="fold")

    for row in section.rows:
        if row.status not in MEASURED and row.ours is None:  # the rest is counted below and listed in the report
            continue
        style = "green" if row.status in GOOD else "red" if row.status in BAD else ""
        where = ", ".join(part for part in (row.scenario, row.broker) if part)
        status = ("⚑ " if row.flagged else "") + row.status
        table.add_row(row.figure, where, value_text(row.paper), value_text(row.ours),
                      f"{row.ratio:.3g}" if row.ratio is not None else "", f"[{style}]{status}[/{style}]" if style else status)
    console.print(table)
    for row in section.flagged:
        console.print(f"⚑ {row.figure}: {row.reason}", style="red")
    claims = Table(title="The paper's claims", title_justify="left", header_style="bold", pad_edge=False)
    claims.add_column("claim", overflow="fold")
    claims.add_column("verdict")
    for claim in section.claims:
        style = "green" if claim.verdict in GOOD else "red" if claim.verdict in BAD else "dim"
        claims.add_row(claim.claim, f"[{style}]{claim.verdict}[/{style}]")
    console.print(claims)
    unmeasured = len({r.figure for r in section.rows}) - coverage["measured"] - coverage["not_here"]
    console.print(f"{coverage['figures']} paper figures: {coverage['measured']} measured here, {unmeasured} not in these "
                  f"results, {coverage['not_here']} not reproducible here (the report says why).", style="dim")


def print_comparison(console: Console, comparison: "Comparison") -> None:
    """What was found first, then per scenario the means with their intervals and each broker's
    difference from the baseline: two tables side by side where the terminal is wide enough, else
    one stacked block per broker, so that no number is ever split across lines."""
    from mqttlab.reports.tables import SUMMARY_METRICS, summary_keys, summary_table

    print_findings(console, comparison)
    rows = summary_table(comparison)
    # The faults' and the state's figures, where runs had them, in tables of their own (80 columns stay readable).
    extra = summary_keys(comparison)[len(SUMMARY_METRICS):]
    faults = tuple(key for key in extra if key.startswith("fault_"))
    state = tuple(key for key in extra if not key.startswith("fault_"))
    key_sets = [(keys, label) for keys, label in ((SUMMARY_METRICS, ""), (faults, " faults"), (state, " state")) if keys]
    for scenario in comparison.scenarios:
        mine = [row for row in rows if row["scenario"] == scenario.scenario]
        measures = {g.latency_measure for g in scenario.groups.values() if g.latency_measure}
        what = " (latency = round trip)" if measures == {"rtt"} else ""
        offered = f"offered {_figure(scenario.offered_per_s)} msg/s; " if scenario.offered_per_s else ""
        for keys, label in key_sets:
            head = f"{scenario.scenario}{label}: {offered if not label else ''}mean ± {comparison.confidence:.0%} CI half-width{what if not label else ''}"
            means = _table(head, keys, "runs")
            for row in mine:
                means.add_row(Text(str(row["broker"])), str(row["runs"]), *(_mean_cell(row, key) for key in keys))
            others = [row for row in mine if row["broker"] != comparison.baseline and row["throughput_diff"] is not None]
            differences = _table(f"{scenario.scenario}{label}: difference from {comparison.baseline} [Welch CI]", keys)
            for row in others:
                differences.add_row(Text(str(row["broker"])), *(_difference_cell(row, key) for key in keys))
            tables = [means, differences] if others else [means]
            if all(_width(console, table) <= console.width for table in tables):
                for table in tables:
                    console.print(table)
            else:
                _print_stacked(console, head, keys, mine, comparison.baseline)
    console.print(
        "n/a: one repetition, so no interval; * the difference's interval excludes 0. delivered: deliveries per second "
        "(without subscribers, acknowledged publishes); offered: what the schedule sent for. "
        "Latency: the round trip in round-trip mode, else end-to-end (PUBACK/PUBCOMP when nobody subscribed).",
        style="dim",
    )
    for path, reason in comparison.excluded:
        console.print(f"left out: {path} ({reason})", style="yellow", markup=False, highlight=False)
    print_calibrations(console, comparison)


def print_calibrations(console: Console, comparison: "Comparison") -> None:
    """The instrument's overhead on each broker's runs' hosts (their manifests' calibration), a
    range where they differ, and the note when runs differ by more than mqttlab.calibration allows."""
    from mqttlab.calibration import DIFFERS

    table = Table(title="instrument overhead on the runs' hosts (calibration, µs, lowest–highest over the runs; "
                        "send: send stamp → wire, wake: arrival → read)", title_justify="left", header_style="bold", pad_edge=False)
    for column in ("broker", "runs", "send p50", "p99", "wake p50", "p99", "stamped"):
        table.add_column(column, justify="left" if column in ("broker", "stamped") else "right", no_wrap=True)
    for row in comparison.calibrations:
        ranges = [row[key] for key in ("send_p50_us", "send_p99_us", "wake_p50_us", "wake_p99_us")]
        table.add_row(Text(str(row["broker"])), f"{row['calibrated']}/{row['runs']}",
                      *("–" if found is None else "–".join(dict.fromkeys(_figure(value, 3) for value in found)) for found in ranges),
                      str(row["stamped"]))
    console.print(table)
    console.print("runs: calibrated / compared. stamped: where the runs' sends / receptions were stamped. Their latency figures "
                  "carry the send part where the engine stamped the sends (client), the wake-up where it stamped the receptions.",
                  style="dim", markup=False, highlight=False)
    for note in (note for note in comparison.notes if note.startswith(DIFFERS)):
        console.print(f"⚠ {note}", style="yellow", markup=False, highlight=False)


def print_findings(console: Console, comparison: "Comparison") -> None:
    """The findings (analysis/findings.py) under their scenario: significant differences, what
    does not differ, what cannot be judged, and a warning line for every broken promise."""
    from mqttlab.analysis.findings import findings

    styles = {"significant": "", "not significant": "dim", "cannot judge": "yellow", "violations": "bold red"}
    console.print(f"Findings against {comparison.baseline} ({comparison.confidence:.0%} intervals)", style="bold", markup=False, highlight=False)
    found = findings(comparison)
    if len(comparison.brokers) < 2:
        console.print(f"  one broker ({comparison.brokers[0]}): no difference to judge", style="yellow", markup=False, highlight=False)
    for scenario in comparison.scenarios:
        mine = [finding for finding in found if finding.scenario == scenario.scenario]
        if mine:
            console.print(f"{scenario.scenario}:", markup=False, highlight=False)
        for finding in mine:
            mark = "⚠ " if finding.kind == "violations" else ""
            console.print(f"  {mark}{finding.text}", style=styles[finding.kind], markup=False, highlight=False)
    left_out = len(comparison.generator_limited_left_out)
    if left_out:
        console.print(f"{left_out} run{'s' if left_out != 1 else ''} flagged generator-limited left out of every figure, as the "
                      "reproduction pages leave them (--generator-limited shows them apart)", style="yellow", markup=False, highlight=False)
    marked = [f"{group.broker} in {scenario.scenario}" for scenario in comparison.scenarios for group in scenario.groups.values()
              if group.generator_limited_runs and group.generator_limited_runs == len(group.runs) and not scenario.generator_limited_apart]
    if marked:
        console.print("shown from generator-limited runs only (no other run; they bound the host as much as the broker): "
                      + "; ".join(marked), style="yellow", markup=False, highlight=False)


def _width(console: Console, table: Table) -> int:
    """The columns a table needs with every cell on its own lines unbroken (rich measures it
    within the terminal's width, which would hide that it does not fit)."""
    return console.measure(table, options=console.options.update_width(10_000)).maximum


def _print_stacked(console: Console, head: str, keys: tuple[str, ...], rows: list[dict[str, Any]], baseline: str) -> None:
    """A narrow terminal's layout: one block per broker, a figure per line, each cell on one line."""
    console.print(escape(head), style="italic", highlight=False)
    for row in rows:
        runs = f"{row['runs']} run{'s' if row['runs'] != 1 else ''}"
        block = Table(title=escape(f"{row['broker']} ({runs})"), title_justify="left", header_style="bold", pad_edge=False)
        block.add_column("figure", no_wrap=True)
        block.add_column("mean ± CI", justify="right", no_wrap=True)
        compared = row["broker"] != baseline and row["throughput_diff"] is not None
        if compared:
            block.add_column(escape(f"− {baseline} [Welch CI]"), justify="right", no_wrap=True)
        for key in keys:
            cells = [SHORT_TITLES[key], _mean_cell(row, key).replace("\n", " ")]
            block.add_row(*cells, *([_difference_cell(row, key).replace("\n", " ")] if compared else []))
        console.print(block)


def _table(title: str, keys: tuple[str, ...], second: Optional[str] = None) -> Table:
    # The title names the user's scenarios and labels: text, never markup.
    table = Table(title=escape(title), title_justify="left", header_style="bold", pad_edge=False)
    table.add_column("broker", no_wrap=True)
    if second is not None:
        table.add_column(second, justify="right", no_wrap=True)
    for key in keys:
        table.add_column(SHORT_TITLES[key], justify="right", no_wrap=True)
    return table


def _mean_cell(row: dict[str, Any], key: str) -> str:
    mean, low, high = row[f"{key}_mean"], row[f"{key}_ci_low"], row[f"{key}_ci_high"]
    if mean is None:
        return "–"
    if low is None or high is None:
        return f"{_figure(mean, 3)}\n±n/a"
    return f"{_figure(mean, 3)}\n±{_figure((high - low) / 2, 2)}"


def _difference_cell(row: dict[str, Any], key: str) -> str:
    diff, low, high = row[f"{key}_diff"], row[f"{key}_diff_low"], row[f"{key}_diff_high"]
    if diff is None:
        return "–"
    if low is None or high is None:
        return f"{_figure(diff, 3, '+')}\n(n/a)"
    marker = "*" if low > 0 or high < 0 else ""
    return f"{_figure(diff, 3, '+')}{marker}\n[{_figure(low, 2, '+')},{_figure(high, 2, '+')}]"
