"""One self-contained HTML page for a comparison: plotly.js is inlined once, so the report opens
with no network; every table on it is also written as CSV beside it."""

from __future__ import annotations

import datetime as dt
import html
from typing import Any, Optional, Sequence

import plotly.io as pio
from plotly.offline import get_plotlyjs

from mqttlab._version import VERSION
from mqttlab.analysis import Comparison
from mqttlab.analysis.runs import METRIC_BY_KEY, merit
from mqttlab.reports.figures import all_figures, seeds_apply
from mqttlab.reports.state import state_html
from mqttlab.reports.sweep import sweep_figures
from mqttlab.reports.tables import HEADER_NOTE, all_tables, summary_keys

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } td.text, th.text { text-align: left; }
.note { color: #555; font-size: 0.9em; max-width: 80em; } .better { color: #1a7f37; } .worse { color: #b42318; }
.csv { font-size: 0.8em; } .wide { overflow-x: auto; }
table.stacked td { vertical-align: top; line-height: 1.3; } table.stacked th, table.stacked td.text { white-space: normal; }
"""


def render_html(comparison: Comparison, title: str = "mqttlab comparison", first: Sequence[str] = ()) -> str:
    """The report page; `first`: HTML sections placed before the summary (a seed's paper beside
    the runs, which reproductions/ renders: reports never reach up to it)."""
    tables = all_tables(comparison)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
        _intro(comparison),
        _findings_html(comparison),
        *first,
        "<h2>Summary</h2>",
        _summary_html(comparison, tables["summary"]),
        _csv_link("summary"),
        state_html(comparison),
        "<h2>Latency, all repetitions pooled</h2>",
        '<p class="note">Histograms of every repetition added; mean ± standard deviation of the '
        "samples as seed001 reported them, then percentiles. Milliseconds.</p>",
        _plain_html(tables["latency"]),
        _csv_link("latency"),
    ]
    parts += [] if not seeds_apply(comparison) else [
        "<h2>The seeds' statistics</h2>",
        '<p class="note">Mean latency over the repetitions with two standard deviations: over the per-run means '
        "(seed 001's diffusion: one message per run, 20 runs) and of the samples with all repetitions pooled "
        "(seed 001's write/read); <i>paper_sd</i> says which one the seed's figure uses. Throughput mean and best "
        "(seed 003 reported the best of 5), broker memory as a mean over the run (seed 003) and as the peak "
        "(ours).</p>",
        _plain_html(tables["paper_statistics"]),
        _csv_link("paper_statistics"),
    ]
    if "rate_sweep" in tables:
        parts += [
            "<h2>Latency and loss against rate, per protocol</h2>",
            '<p class="note">A line joins runs whose whole configuration is equal except the rate per publisher '
            "(the axis) and the protocol; figures gather the lines of one shape (publishers → subscribers, QoS, "
            "link) and the legend names whatever else differs (payload, limit, loss, ...). Each point is the mean "
            "over the repetitions at one rate, whiskers ± the standard deviation over those repetitions (seed 004's "
            "figure: mean ± SD over its 10 runs). Latency is end-to-end from the intended send time: p50 (ours) and "
            "the mean (as in seed 004); loss counts messages not delivered within the grace period. Dashed: "
            "MQTT-SN.</p>",
        ]
        for index, (_, figure) in enumerate(sweep_figures(comparison, tables["rate_sweep"])):
            parts.append(pio.to_html(figure, include_plotlyjs=False, full_html=False, div_id=f"sweep-{index}",
                                     config={"displaylogo": False, "responsive": True}))
        parts += [_plain_html(tables["rate_sweep"]), _csv_link("rate_sweep")]
    if "rtt" in tables:
        parts += _rtt_section(comparison, tables)
    if "bundling" in tables:
        parts += _bundling_section(tables)
    section = None
    for heading, figure_id, figure in all_figures(comparison):
        if heading != section:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
            section = heading
        parts.append(pio.to_html(figure, include_plotlyjs=False, full_html=False, div_id=figure_id,
                                 config={"displaylogo": False, "responsive": True}))
    parts += [
        "<h2>Scenarios</h2>",
        _plain_html(tables["scenarios"]),
        _csv_link("scenarios"),
        "<h2>Runs</h2>",
        _plain_html(tables["runs"]),
        _csv_link("runs"),
        '<p class="note">The long table of every figure, interval and difference: '
        '<a href="comparison.csv">comparison.csv</a>.</p>',
        "</body></html>",
    ]
    return "\n".join(parts)


def _rtt_section(comparison: Comparison, tables: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Seed 002: the round-trip figures and table, and the protocol overhead tables."""
    from mqttlab.reports.rtt import rtt_figures

    parts = ["<h2>Round-trip time (as in seed 002)</h2>"]
    for figure_id, caption, figure in rtt_figures(comparison):
        parts.append(pio.to_html(figure, include_plotlyjs=False, full_html=False, div_id=figure_id,
                                 config={"displaylogo": False, "responsive": True}))
        parts.append(f'<p class="note">{html.escape(caption)}</p>')
    parts += [
        '<p class="note">One row per configuration and broker: RTT statistics are means over the repetitions of '
        "each run's figure; sd is over the repetitions; round trips are summed.</p>",
        _plain_html(tables["rtt"]), _csv_link("rtt"),
        "<h2>Protocol overhead (as in seed 002)</h2>",
        '<p class="note">Connection packets and acknowledgements: bytes computed from the MQTT encoding of what the '
        "engine sends for the run's settings (no capture is needed: the sizes are fixed by the protocol); frame = "
        "MQTT + 66 B (Ethernet 14, IP 20, TCP 32 with timestamps), as the seed's captures counted, for a packet "
        "alone in its segment.</p>",
        _plain_html(tables["overhead_connection"]), _csv_link("overhead_connection"),
        '<p class="note">PUBLISH: the bytes a PUBLISH adds to its payload for the run\'s topic and QoS, computed '
        "(the seed's 46 B belong to its 42-byte topic); what the clients wrote and read per message sent, measured "
        "by the engine (connects and subscriptions included); over an emulated link, packets and frame bytes per "
        "message as the link counted them.</p>",
        _plain_html(tables["overhead_publish"]), _csv_link("overhead_publish"),
    ]
    return parts


def _bundling_section(tables: dict[str, list[dict[str, Any]]]) -> list[str]:
    parts = ["<h2>Message bundling (as in seed 002)</h2>"]
    if "bundling" in tables:
        parts += ['<p class="note">Message bundling from the runs captured with tshark (<code>options.capture</code> '
                  "or <code>--capture</code>): MQTT packets per TCP segment by type and direction.</p>",
                  _plain_html(tables["bundling"]), _csv_link("bundling")]
    return parts


def _intro(comparison: Comparison) -> str:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    versions = sorted({v for s in comparison.scenarios for g in s.groups.values() for v in g.versions})
    limited = sum(g.generator_limited_runs for s in comparison.scenarios for g in s.groups.values())
    lines = [
        f"{comparison.run_count} runs of {len(comparison.scenarios)} scenarios on {len(comparison.brokers)} brokers "
        f"({html.escape(', '.join(versions) or ', '.join(comparison.brokers))}); made by mqttlab {VERSION} on {now}.",
        f"Means over repetitions with {comparison.confidence:.0%} Student t confidence intervals; differences from the "
        f"baseline <b>{html.escape(comparison.baseline)}</b> with Welch intervals (unequal variances). With a single "
        "repetition no interval exists and none is shown. Best-of-N is the best repetition, as seed003 reported.",
        "Latency is end-to-end from the intended send time (corrected for coordinated omission); runs without "
        "subscribers are judged by PUBLISH → PUBACK (or PUBCOMP). Warm-up is excluded. CPU is in cores "
        "(1.0 = one core busy), RSS is the peak in MB (and its mean, as seed 003 reported it), both over the measured "
        "window. Runs are averaged together only when their whole configuration is equal; runs of one scenario name "
        "configured differently are shown apart, the name followed by what differs.",
        html.escape(HEADER_NOTE),
    ]
    left_out = len(comparison.generator_limited_left_out)
    if left_out:
        lines.append(f"{left_out} run(s) flagged generator-limited are left out of every figure, as the reproduction pages "
                     "leave them (<code>compare --generator-limited</code> shows them apart).")
    if limited:
        lines.append(f'<span class="worse">{limited} run(s) shown were generator-limited: their figures describe mqttlab '
                     "as much as the broker, and judge nothing.</span>")
    for note in comparison.notes:
        lines.append(f'<span class="worse">{html.escape(note)}</span>')
    configs = _broker_configurations(comparison)
    if configs:
        lines.append("Broker configurations: " + html.escape("; ".join(configs)) + ".")
    if comparison.excluded:
        lines.append(f"{len(comparison.excluded)} run(s) did not complete and are left out: "
                     + html.escape("; ".join(f"{path} ({why})" for path, why in comparison.excluded)))
    return "".join(f'<p class="note">{line}</p>' for line in lines)


def _findings_html(comparison: Comparison) -> str:
    """The findings (analysis/findings.py) under their scenario; broken promises first, in red."""
    from mqttlab.analysis.findings import findings

    found = findings(comparison)
    classes = {"significant": "", "not significant": "note", "cannot judge": "note", "violations": "worse"}
    parts = [f"<h2>Findings</h2><p class=\"note\">Against {html.escape(comparison.baseline)} at {comparison.confidence:.0%}: a "
             "difference is significant when its Welch interval excludes 0; its size is said against the baseline's mean.</p>"]
    if len(comparison.brokers) < 2:
        parts.append(f"<p>One broker ({html.escape(comparison.brokers[0])}): no difference to judge.</p>")
    for scenario in comparison.scenarios:
        mine = sorted((finding for finding in found if finding.scenario == scenario.scenario), key=lambda f: f.kind != "violations")
        if not mine:
            continue
        items = "".join(f'<li class="{classes[f.kind]}">{"⚠ " if f.kind == "violations" else ""}{html.escape(f.text)}</li>' for f in mine)
        parts.append(f"<p><b>{html.escape(scenario.scenario)}</b></p><ul>{items}</ul>")
    return "\n".join(parts)


def _broker_configurations(comparison: Comparison) -> list[str]:
    """How each launched broker was configured (tuned / as-shipped / a file) and limited."""
    seen: dict[str, str] = {}
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            for run in group.runs:
                entry = run.results.manifest.get("broker") or {}
                config = entry.get("config")
                if not config or broker in seen:
                    continue
                settings = ", ".join(item["setting"] for item in config.get("settings") or [])
                text = f"{broker}: {config.get('mode')}" + (f" ({settings})" if settings else "")
                limits = entry.get("limits") or {}
                if limits.get("throttled_periods") or limits.get("oom_kills"):
                    text += (f"; in its cgroup {limits.get('throttled_periods')} CPU periods throttled, "
                             f"{limits.get('oom_kills') or 0} OOM kills")
                seen[broker] = text
    return list(seen.values())


def _summary_html(comparison: Comparison, rows: list[dict[str, Any]]) -> str:
    """One column per figure, its cell stacked (mean, interval, best, difference from the baseline
    and its interval), so that the table fits a laptop's width up to the last figure."""
    head = ['<th class="text">scenario</th>', '<th class="text">broker</th>', "<th>runs</th>"]
    keys = summary_keys(comparison)
    saturating = {scenario.scenario: scenario.first_run.saturating for scenario in comparison.scenarios}
    for key in keys:
        metric = METRIC_BY_KEY[key]
        head.append(f"<th>{html.escape(metric.title)} ({metric.unit})</th>")
    body = []
    for row in rows:
        cells = [f'<td class="text">{html.escape(row["scenario"])}</td>', f'<td class="text">{html.escape(row["broker"])}</td>',
                 f"<td>{row['runs']}</td>"]
        for key in keys:
            lines = [f"<b>{_number(row[f'{key}_mean'])}</b>", _interval(row[f"{key}_mean"], row[f"{key}_ci_low"], row[f"{key}_ci_high"]),
                     f"best {_number(row[f'{key}_best'])}" if row[f"{key}_best"] is not None else "",
                     _difference(key, row[f"{key}_diff"], row[f"{key}_diff_low"], row[f"{key}_diff_high"], saturating[row["scenario"]])]
            cells.append("<td>" + "<br>".join(line for line in lines if line) + "</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = (f'<p class="note">Each cell: the mean, its {comparison.confidence:.0%} interval, the best repetition, and the '
               f"difference from {html.escape(comparison.baseline)} (Δ) with its interval.</p>")
    return (f'{caption}<div class="wide" id="summary-table"><table class="stacked"><thead><tr>{"".join(head)}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _plain_html(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>none</p>"
    columns = list(dict.fromkeys(key for row in rows for key in row))
    head = "".join(f'<th class="text">{html.escape(c)}</th>' if _is_text(rows, c) else f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f'<td class="text">{html.escape(str(row.get(c) if row.get(c) is not None else ""))}</td>' if _is_text(rows, c)
                         else f"<td>{_number(row.get(c))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    return f"<div class=\"wide\"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _is_text(rows: list[dict[str, Any]], column: str) -> bool:
    return any(isinstance(row.get(column), str) for row in rows)


def _number(value: Optional[float]) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"


def _interval(mean: Optional[float], low: Optional[float], high: Optional[float]) -> str:
    if mean is None:
        return ""
    if low is None or high is None:
        return "<span title='one repetition: no interval'>[n/a]</span>"
    return f"[{_number(low)}, {_number(high)}]"


def _difference(key: str, diff: Optional[float], low: Optional[float], high: Optional[float], saturating: bool) -> str:
    if diff is None:
        return ""
    if low is None or high is None:
        return f"Δ {diff:+.4g} [n/a]"
    text = f"Δ {diff:+.4g}<br>[{low:+.4g}, {high:+.4g}]"
    higher_is_better = merit(METRIC_BY_KEY[key], saturating)
    if (low > 0 or high < 0) and higher_is_better is not None:  # the interval excludes zero: say which way is better
        better = (diff > 0) == higher_is_better
        return f'<span class="{"better" if better else "worse"}">{text}</span>'
    return text


def _csv_link(name: str) -> str:
    return f'<p class="csv">CSV: <a href="{name}.csv">{name}.csv</a></p>'
