"""The paper drawn beside us: for each claim of a seed, one PNG with the paper's values and
ranges over ours, written beside its reproduction page (`seed00N/beside-<claim>.png`).

Each figure is a dot plot, one line per paper figure and configuration: the paper's number as a
hollow black diamond (its SD as a dashed bar where it gives one), its range as a grey band (an open
end runs to the axis' edge); ours filled, coloured by broker, with the confidence interval as an
error bar where there are two or more runs (n is written beside each line). A figure per claim,
one panel per unit (in the paper file's unit, the paper's), a log axis where the values span more
than a factor of 20, and one figure per engine configuration (runs of one scenario configured
differently are compared apart, compare.scenario_labels, and never drawn together). The bytes are
the same for the same rows: no date or software version is written into the PNG."""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import matplotlib

matplotlib.use("Agg")  # no display: figures are only written to files
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure as PlotFigure  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from mqttlab.reproductions.paper_figures import LIMITED, NOT_HERE, NOT_MEASURED, FigureRow, number, value_text  # noqa: E402
from mqttlab.reproductions.section import PaperSection  # noqa: E402

PREFIX = "beside-"
WIDTH_IN, DPI = 9.0, 100  # 900 px: the width of a Markdown page on a code host
ROW_IN = 0.3  # height of one line of the dot plot
MAX_LINES = 40  # lines per figure; a claim over more (seed 000's 60 SPRT rows) is drawn in parts
LOG_SPAN = 5.0  # values spanning more than this factor get a log axis (as the rate sweeps)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
RANGE_OF_OURS = "#17becf"  # ours as a range over brokers: a colour no broker has
MEAN_KEYS, SPREAD_KEYS = ("mean", "estimate"), ("std", "std_error")  # a value with its spread ({mean, std}, a coefficient)
# What a key of an SPRT row is, on an axis: H1 is the model's Monte Carlo prediction, not the SPRT's result.
KEY_NAMES = {"h0": "H0 (the model's prediction − 0.1)", "h1": "H1 (the model's Monte Carlo prediction)",
             "h1_accept_pct": "share of clients accepting H1 (SPRT on the broker)", "time_s": "SPRT wall time",
             "mean_samples": "SPRT samples per client", "estimate": "regression coefficient", "t_value": "t value"}
KEY_UNITS = {"h0": "probability", "h1": "probability", "h1_accept_pct": "%", "time_s": "s", "mean_samples": "samples"}


@dataclass
class Line:
    """One line of a dot plot: a paper figure (or one key of it) in one configuration."""

    figure: str  # the paper figure's id
    unit: str
    where: str = ""  # its configuration and broker, where the claim draws the figure on several lines
    broker: str = ""
    paper: Optional[float] = None
    paper_spread: Optional[float] = None  # the paper's SD (or standard error) around `paper`
    paper_spread_name: str = "SD"  # which of the two it is, for the legend
    derived: bool = False  # the paper's number is computed from what it prints, not printed
    paper_range: Optional[tuple[Optional[float], Optional[float]]] = None  # None: open on that side
    ours: Optional[float] = None
    ours_range: Optional[tuple[float, float]] = None  # a range of ours over brokers or configurations
    interval: Optional[tuple[float, float]] = None  # the confidence interval of `ours` (n >= 2), a one-run share's binomial, a capacity's bracket
    n: int = 0
    kind: str = ""  # the paper file's kind of figure (latency_mean, throughput_range, ...), named on the axis
    region: Optional[tuple[float, float]] = None  # where ours agrees with `paper`: within the figure's tolerance factor
    rule: bool = False  # `region` is where the claim's rule wants ours (its `within`), not the figure's tolerance
    other: Optional[float] = None  # ours in a second run in another configuration (a claim about settings)
    key: str = ""  # the key of the figure's value this line draws, where the value has keys
    limited: bool = False  # every run behind ours was flagged generator-limited: shown hollow, never judged
    left_out: int = 0  # runs flagged generator-limited left out of ours (the others' mean is drawn)
    statistic: str = ""  # what ours is of its runs ("mean of 5 runs", "best of 5 runs", "range of 4 groups' means of 5 runs")
    interval_kind: str = ""  # which interval `interval` is where not the runs' t interval ("binomial", a capacity's "bracket")

    def values(self, spread: bool = True) -> list[float]:
        """Every value drawn; without `spread`, less the interval and the paper's SD (which may reach below zero)."""
        found = [self.paper, self.ours, self.other, *(self.paper_range or ()), *(self.ours_range or ()), *(self.region or ())]
        if spread:
            found += [*(self.interval or ())]
            if self.paper is not None and self.paper_spread is not None:
                found += [self.paper - self.paper_spread, self.paper + self.paper_spread]
        return [float(v) for v in found if v is not None and math.isfinite(v)]

    @property
    def has_paper(self) -> bool:
        return self.paper is not None or self.paper_range is not None


@dataclass
class BesideFigure:
    claim: str
    verdict: str
    path: Path
    caption: str
    lines: list[Line] = field(default_factory=list)
    same_as: str = ""  # a claim drawn on the same lines as an earlier one shares its figure


def claim_lines(section: PaperSection, figure_ids: list[str], key: Optional[str] = None,
                tolerances: Optional[dict[str, float]] = None, keys: Optional[dict[str, str]] = None,
                rules: Optional[dict[str, tuple[float, float]]] = None, other: Optional[PaperSection] = None,
                only: Optional[set[tuple[str, Optional[str], Optional[str]]]] = None) -> dict[str, list[Line]]:
    """The lines of a claim's figures that have a value of ours, by engine configuration ("" when
    the runs of each scenario were configured alike). `key`: of figures whose values have keys,
    only this one (the key the claim's check reads), or per figure in `keys`; `tolerances`: the
    tolerance factor of each figure judged by one (the region where ours agrees is drawn around
    the paper's number); `rules`: per figure, the range the claim's rule wants ours in, drawn
    instead; `other`: a second run in another configuration, its value drawn on each line; `only`:
    the rows (figure, configuration, broker) to draw, those the claim's conditions read."""
    by_config: dict[str, list[Line]] = {}
    drawn = [row for row in section.rows if row.figure in figure_ids and row.ours is not None and row.status not in (NOT_HERE, NOT_MEASURED)
             and (only is None or (row.figure, row.scenario, row.broker) in only)]
    one_broker = len({row.broker for row in drawn}) == 1  # then its colour and the legend name it, not every label
    for figure in figure_ids:
        # Rows equal but for their configuration (an exact figure, the same in every run) are one line, as on the page.
        same: dict[tuple[Any, ...], list[FigureRow]] = {}
        for row in (row for row in drawn if row.figure == figure):
            config = row.scenario.split(" [", 1)[1].rstrip("]") if row.scenario and " [" in row.scenario else ""
            key_ = (config, value_text(row.paper), value_text(row.ours), row.broker, row.uncertainty, row.status)
            same.setdefault(key_, []).append(row)
        for (config, *_), rows in same.items():
            row = rows[0]
            scenario = (row.scenario or "").split(" [", 1)[0] if len(same) > 1 else ""
            where = f"{len(rows)} configurations" if len(rows) > 1 else scenario
            read = (keys or {}).get(figure, key)
            for line in _lines(row, read, where, name_broker=not one_broker):
                factor = (tolerances or {}).get(figure)
                if figure in (rules or {}) and (line.key or None) == read:
                    line.region, line.rule = (rules or {})[figure], True
                elif factor and line.paper and line.ours is not None and not row.exact and read is None:
                    # A claim that reads one key of the value judges that key by its own rule, not by
                    # the figure's tolerance: no ×2 band (to 200 % of a share, to 2 of a probability).
                    line.region = (line.paper / factor, line.paper * factor)
                if other is not None:
                    line.other = _other(other, row, read if line.key else None)
                by_config.setdefault(config, []).append(line)
    return by_config


def _lines(row: FigureRow, key: Optional[str], scenario: str, name_broker: bool = True) -> list[Line]:
    # A broker is labelled by its name alone ("mosquitto", not "mosquitto (CPUs 0)"), and not at all where the figure's id names it.
    brokers = re.sub(r"\s*\([^)]*\)", "", row.broker or "")
    where = ", ".join(part for part in (scenario, brokers if name_broker and brokers and brokers not in row.figure else None) if part)
    line = Line(row.figure, row.unit or "", where, broker=row.broker or "", n=len(row.samples) or (row.runs or 0), kind=row.kind,
                interval=(float(row.interval[0]), float(row.interval[1])) if row.interval else None, limited=row.status == LIMITED,
                left_out=row.limited if row.status != LIMITED else 0, statistic=row.statistic, derived=bool(row.derived),
                interval_kind=row.interval_kind)
    paper, ours = row.paper, row.ours
    if isinstance(ours, dict):
        theirs: dict[Any, Any] = paper if isinstance(paper, dict) else {}
        mean = next((k for k in MEAN_KEYS if number(ours.get(k))), None)
        if mean is not None:  # a value with its spread: the paper's spread drawn around its value
            spread = next((k for k in SPREAD_KEYS if number(theirs.get(k))), None)
            return [replace(line, ours=float(ours[mean]), paper=float(theirs[mean]) if number(theirs.get(mean)) else None,
                            paper_spread=float(theirs[spread]) if spread else None,
                            paper_spread_name="standard error" if spread == "std_error" else "SD")]
        found = []
        for name, mine in ours.items():  # keys of their own (bytes per layer, an SPRT row's figures): a line each
            other = theirs.get(name, theirs.get(str(name)))
            if number(mine) and (key is None or str(name) == key):
                found.append(replace(line, where=", ".join(part for part in (where, str(name)) if part), unit=KEY_UNITS.get(str(name), line.unit), ours=float(mine),
                                     interval=None, paper=float(other) if number(other) else None, key=str(name),
                                     derived=line.derived and (not row.derived_keys or str(name) in row.derived_keys)))
        return found
    if isinstance(ours, list) and len(ours) == 2 and all(number(v) for v in ours):
        line.ours_range, line.broker = (float(ours[0]), float(ours[1])), ""
    elif number(ours):
        line.ours = float(ours)
    else:
        return []
    if isinstance(paper, list) and len(paper) == 2 and any(number(v) for v in paper):
        line.paper_range = (float(paper[0]) if number(paper[0]) else None, float(paper[1]) if number(paper[1]) else None)
    elif number(paper):
        line.paper = float(paper)
    return [line]


def _against_other(lines: list[Line], checks: dict[str, Any]) -> list[Line]:
    """Each line as this run's value against the other run's, by its check's rule: their ratio
    (a `tolerance` factor, its region [1/t, t]) or their difference (`within`, its region that)."""
    found = []
    for line in lines:
        check = checks.get(line.figure)
        if check is None or line.ours is None or line.other is None:
            continue
        if check.within is not None:
            found.append(replace(line, ours=line.ours - line.other, unit=f"{line.unit}, this run − the other", other=None, paper=None,
                                 paper_spread=None, interval=None, region=(check.within[0], check.within[1]), rule=True))
        elif line.ours * line.other > 0:
            found.append(replace(line, ours=line.ours / line.other, unit="this run / the other", other=None, paper=None, paper_spread=None,
                                 interval=None, region=(1 / check.tolerance, check.tolerance), rule=True))
        else:
            found.append(replace(line, ours=None, unit="this run / the other", other=None, paper=None, paper_spread=None, interval=None,
                                 where=", ".join(part for part in (line.where, "sign changed") if part)))
    return found


def _runs(section: PaperSection) -> str:
    """Which run is which on a figure that draws two: this section's and its reference's."""
    return f"filled: ours {section.configuration or 'this run'}, hollow circles: ours {_runs_other(section)}"


def _runs_other(section: PaperSection) -> str:
    return (section.reference.configuration if section.reference is not None else "") or "the other run"


def _check_key(claim: Any) -> Optional[str]:
    return next((check.key for check in claim.check or [] if check.key), None)


def _other(section: PaperSection, row: FigureRow, key: Optional[str]) -> Optional[float]:
    """The same row's value (its `key`, or its estimate) in another run's section."""
    found = next((r for r in section.rows if r.figure == row.figure and r.scenario == row.scenario and r.broker == row.broker), None)
    value = found.ours if found is not None else None
    if isinstance(value, dict):
        value = value.get(key) if key is not None and key in value else next((value.get(k) for k in MEAN_KEYS if k in value), None)
    return float(value) if number(value) else None


def write_beside(section: PaperSection, folder: Path, confidence: float = 0.95, brokers: Optional[list[str]] = None) -> list[BesideFigure]:
    """One PNG per claim (and engine configuration, and part of MAX_LINES lines) with ours measured,
    in `folder`; the old ones removed first. Claims in the paper file's order. `brokers`: the
    page's brokers in the order its other figures colour them."""
    from mqttlab.reproductions.paper_figures import DEFAULT_TOLERANCE
    from mqttlab.reproductions.paper_file import load_paper

    folder.mkdir(parents=True, exist_ok=True)
    for old in sorted(folder.glob(f"{PREFIX}*.png")):
        old.unlink()
    paper = load_paper(section.source)
    verdicts = {claim.claim: claim.verdict for claim in section.claims}
    # A claim with a rule draws the rows its conditions read (a trend's axis, a rule's `where`;
    # generator-limited ones hollow), not every row of its figures; one without draws what it lists.
    read = {claim.claim: set(claim.read_rows) for claim in section.claims if claim.conditions and claim.read_rows}
    tolerances = {f.id: f.reproduce.tolerance or DEFAULT_TOLERANCE for f in paper.figures if not f.exact}
    written: list[BesideFigure] = []
    drawn: dict[tuple[Any, ...], list[BesideFigure]] = {}  # the figures of the lines drawn so far
    colors = page_colors(section, brokers)
    for claim in paper.claims:
        if claim.not_here:  # nothing here can judge it: its figures' rows of ours would read as an answer
            continue
        ids = list(dict.fromkeys([*claim.figures, *(name for check in claim.check or [] for name in check.figure_ids())]))
        keys = {name: check.key for check in claim.check or [] if check.key for name in check.figure_ids()}
        # An `each` check's range is what the claim asks of each row (of its key, if it names one: a
        # share of clients in [90, 100] %; a fin's fall in [0, 0.1]): drawn instead of a tolerance
        # factor around the paper's number.
        rules = {name: (check.within[0], check.within[1]) for check in claim.check or [] if check.each and check.within
                 for name in check.each}
        # So is a `figure` check's range on its figure (an RTT in [0, 1000] ms, a time ratio ≥ 1).
        rules.update({check.figure: (check.within[0], check.within[1]) for check in claim.check or [] if check.figure and check.within})
        settings = any(check.unchanged for check in claim.check or [])
        if settings and section.reference is None and all(check.unchanged for check in claim.check or []):
            continue  # one run: nothing to set beside it, and the paper beside ours says nothing about settings
        other = section.reference if settings else None
        configs = claim_lines(section, ids, _check_key(claim), tolerances, keys, rules, other, read.get(claim.id))
        runs_drawn = _runs(section) if other is not None else ""
        if other is not None and all(check.unchanged for check in claim.check or []):
            # A claim about settings compares the two runs, not the paper: drawn as this run against
            # the other, so that a change is seen at its own scale (a ×9 shift of a 0.005 ms term).
            checks = {name: check for check in claim.check or [] for name in check.unchanged or []}
            configs = {config: _against_other(lines, checks) for config, lines in configs.items()}
            runs_drawn = f"each point ours {section.configuration or 'this run'} against ours {_runs_other(section)}: their ratio, or difference"
        same = tuple((config, tuple((line.figure, line.where) for line in lines)) for config, lines in configs.items())
        if same and same in drawn:  # seed 002's claims on RTT by QoS and payload all rest on one figure: drawn once
            written += [replace(earlier, claim=claim.id, verdict=verdicts.get(claim.id, ""), same_as=earlier.claim) for earlier in drawn[same]]
            continue
        first = len(written)
        for index, (config, lines) in enumerate(configs.items()):
            parts = [lines[start:start + MAX_LINES] for start in range(0, len(lines), MAX_LINES)]
            for part_number, part in enumerate(parts):
                suffix = (f"-{index + 1}" if len(configs) > 1 else "") + (f"-part{part_number + 1}" if len(parts) > 1 else "")
                path = folder / f"{PREFIX}{_file_name(claim.id)}{suffix}.png"
                title = claim.id + (f" [{config}]" if config else "") + (f" (part {part_number + 1} of {len(parts)})" if len(parts) > 1 else "")
                figure = draw(part, title, claim.text, scale=lines, colors=colors)
                save(figure, path)
                written.append(BesideFigure(claim.id, verdicts.get(claim.id, ""), path,
                                            caption(part, config, confidence, runs_drawn), part))
        drawn[same] = written[first:]
    return written


def page_colors(section: PaperSection, brokers: Optional[list[str]] = None) -> dict[str, str]:
    """One colour per broker on the whole page (in the order of its other figures, `brokers`, then
    as the rows name them), so that a colour means the same broker in every figure; ours without a
    broker (a range, a computed figure) after them."""
    names = [*dict.fromkeys([*(brokers or []), *(row.broker for row in section.rows if row.broker)]), ""]
    return {broker: PALETTE[index % len(PALETTE)] for index, broker in enumerate(names)}


def draw(lines: list[Line], title: str, text: str = "", scale: Optional[list[Line]] = None,
         colors: Optional[dict[str, str]] = None) -> PlotFigure:
    """The dot plot: one panel per unit, in the order the units first appear. `scale`: the lines
    whose values set each panel's axis (all the parts of one claim's figure share one scale);
    `colors`: each broker's colour across the page (without: by first appearance here)."""
    units = list(dict.fromkeys(line.unit for line in lines))
    panels = [[line for line in lines if line.unit == unit] for unit in units]
    sizes = [len(_slots(panel)) for panel in panels]
    height = sum(sizes) * ROW_IN + 1.0 * len(panels) + 1.3
    figure = plt.figure(figsize=(WIDTH_IN, height), layout="constrained")
    axes = figure.subplots(len(panels), 1, squeeze=False, height_ratios=[size + 2 for size in sizes])[:, 0]
    # A figure of ours without a broker (computed, or a range over brokers) has a colour of its own, named "ours".
    brokers = list(dict.fromkeys(line.broker for line in lines if line.broker or line.ours is not None))
    known = colors or {}
    colors = {broker: known.get(broker) or PALETTE[(len(known) + index) % len(PALETTE)] for index, broker in enumerate(brokers)}
    for axis, unit, panel in zip(axes, units, panels):
        _panel(axis, unit, panel, colors, [line for line in scale or lines if line.unit == unit])
    figure.suptitle("\n".join([title, *textwrap.wrap(text, 110, max_lines=3, placeholder=" …")]), fontsize=9, x=0.01, ha="left")
    handles = _legend(lines, colors)
    # As many columns as the figure's width holds, each as wide as the longest entry (at 8 pt about
    # 13 characters an inch, the marker's included): a legend wider is cut at both edges.
    widest = max((len(handle.get_label()) + 6) / 13 for handle in handles) if handles else 1.0
    per_row = int((WIDTH_IN - 0.3) // widest)
    figure.legend(handles=handles, loc="outside lower center", ncol=max(1, min(per_row, 4)), fontsize=8, frameon=False)
    return figure


def _panel(axis: Any, unit: str, lines: list[Line], colors: dict[str, str], scale: list[Line]) -> None:
    data = [v for line in scale for v in replace(line, region=None).values()]
    edges, kind_edges = _region_edges(scale, data)
    values = data + edges
    # The scale follows the values themselves; an interval or SD reaching below zero (n = 2: t = 12.7) is cut at the edge.
    bare = [v for line in scale for v in replace(line, region=None).values(spread=False)]
    core, kind = bare + edges, bare + kind_edges  # kind: what chooses a log axis
    positive = [v for v in kind if v > 0]
    log = bool(positive) and len(positive) == len(kind) and max(positive) / min(positive) > LOG_SPAN
    # Values of both signs spanning more than that (regression coefficients of 9 ms and 0.01 ms): a
    # linear axis would draw the small ones at 0, hiding their sign and their ratios; a symmetric log
    # axis, linear only within the smallest of them, shows both.
    sizes = [abs(v) for v in kind if v != 0]
    signed_log = not log and any(v < 0 for v in kind) and max(sizes) / min(sizes) > LOG_SPAN
    linear_within = 10.0 ** math.floor(math.log10(min(sizes))) if signed_log else None
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if log:
        left, right = min(positive) / 1.6, max(v for v in values if v > 0) * 1.6
        axis.set_xscale("log")
    elif linear_within is not None:
        left, right = min(low * 1.6, -linear_within), max(high * 1.6, linear_within)
        axis.set_xscale("symlog", linthresh=linear_within, linscale=0.5)
        # 0 and each decade beyond the linear part, both sides (a tick at ±linthresh would crowd 0)
        decades = range(round(math.log10(linear_within)) + 1, math.ceil(math.log10(max(-left, right))) + 1)
        ticks = sorted([0.0, *(sign * 10.0**k for k in decades for sign in (-1, 1) if left <= sign * 10.0**k <= right)])
        axis.xaxis.set_major_locator(FixedLocator(ticks))
        axis.xaxis.set_minor_locator(NullLocator())
        axis.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    else:
        # A quantity that is never negative (every value drawn is not) starts at 0; an interval below it is cut there.
        left = 0.0 if min(core, default=0.0) >= 0 else low - ((high - low) * 0.12 or 1.0)
        right = high + (0.05 * (high - left) or abs(high) * 0.1 or 1.0)
    floor = left  # where an interval or SD is cut
    axis.set_xlim(left - (0.02 * (right - left) if left == 0 else 0), right)  # a marker at 0 drawn whole
    slots = _slots(lines)
    ys = list(range(len(slots)))[::-1]  # the first line on top
    for y, (_, line) in zip(ys, slots):
        if line is None:
            continue
        if line.paper_range is not None:
            start = line.paper_range[0] if line.paper_range[0] is not None else left
            end = line.paper_range[1] if line.paper_range[1] is not None else right
            axis.barh(y, end - start, left=start, height=0.7, color="0.85", edgecolor="0.25", linewidth=0.8, zorder=1)
        if line.region is not None:
            # just under the line, so that the paper's SD (dashed, on the line) stays apart from it; an open end to the axis's edge
            region = (max(line.region[0], left), min(line.region[1], right))
            axis.plot(region, [y - 0.25, y - 0.25], color="black", linestyle=":", linewidth=1, marker="|", markersize=7, zorder=2)
        color = colors.get(line.broker, RANGE_OF_OURS)
        if line.ours_range is not None:
            bar = axis.errorbar([(line.ours_range[0] + line.ours_range[1]) / 2], [y], xerr=[[(line.ours_range[1] - line.ours_range[0]) / 2]] * 2,
                                fmt="none", ecolor=RANGE_OF_OURS, elinewidth=3, capsize=5, capthick=2, zorder=3)
            if line.limited:
                bar[-1][0].set_linestyle("--")
        if line.other is not None:
            axis.plot([line.other], [y], marker="o", linestyle="none", markersize=9, markerfacecolor="none", markeredgecolor=color,
                      markeredgewidth=1.5, zorder=3)
        if line.ours is not None:
            xerr = [[line.ours - max(line.interval[0], floor)], [line.interval[1] - line.ours]] if line.interval else None
            axis.errorbar([line.ours], [y], xerr=xerr, fmt="o", color=color, markersize=6, capsize=4, elinewidth=1.5, zorder=3,
                          markerfacecolor="white" if line.limited else color, markeredgewidth=1.5)
            if line.interval and line.interval[0] < floor:
                # An interval reaching below the axis (to 0, on a log axis) goes on: an arrow says so, not a cap.
                axis.plot([floor], [y], marker="<", color=color, markersize=7, zorder=3)
        if line.paper is not None:
            spread = [[line.paper - max(line.paper - line.paper_spread, floor)], [line.paper_spread]] if line.paper_spread else None
            drawn = axis.errorbar([line.paper], [y], xerr=spread, fmt="D", markersize=8, markerfacecolor="none", markeredgecolor="black",
                                  markeredgewidth=1.5, ecolor="black", elinewidth=1, capsize=4, zorder=4)
            if spread:
                drawn[-1][0].set_linestyle("--")
    axis.set_yticks(ys, [label for label, _ in slots], fontsize=8)
    for tick, (_, line) in zip(axis.get_yticklabels(), slots):
        if line is None:
            tick.set_fontweight("bold")
    axis.set_ylim(-0.7, len(slots) - 0.3)
    named = list(dict.fromkeys(KEY_NAMES.get(line.key, line.key) if line.key else _kind(line.kind, unit) for line in lines if line.kind))
    # "latency" (a range of means) and "latency mean" on one axis are one quantity: the longer name says it
    kinds = ", ".join(name for name in named if not any(other != name and other.startswith(name) for other in named))
    scale_name = ", log scale" if log else f", symmetric log scale, linear within ±{linear_within:g}" if linear_within is not None else ""
    axis.set_xlabel(f"{kinds or 'value'} ({unit or 'no unit'}{scale_name})", fontsize=9)
    axis.tick_params(axis="x", labelsize=8)
    axis.grid(axis="x", alpha=0.3, which="major")
    if log:
        _log_ticks(axis, left, right)
    elif right >= 10_000:
        axis.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))  # 20,000 msg/s, never 20000 or 2e4


def _region_edges(scale: list[Line], data: list[float]) -> tuple[list[float], list[float]]:
    """The rules' region edges that set a panel's axis, and those of them that choose its kind. An open end far past what is drawn (an RTT of seconds "from 1,000 ms", up to 1e9) sets
    nothing: its region runs to the axis's edge. A lower edge at or below 0 (an RTT in [0, 1000] ms)
    does not keep the axis linear: a log axis draws the region from its edge, as an interval cut there."""
    reach = 100 * max((abs(v) for v in data), default=math.inf)
    edges, kind = [], []
    for line in scale:
        for index, edge in enumerate(line.region or ()):
            if edge is None or not math.isfinite(edge) or abs(edge) > reach:
                continue
            edges.append(float(edge))
            if index > 0 or edge > 0:
                kind.append(float(edge))
    return edges, kind


def _kind(kind: str, unit: str = "") -> str:
    # throughput_range and throughput are one quantity on one axis (the range is drawn as a range);
    # overhead_bytes in bytes is "overhead (bytes)"
    kind = kind.removesuffix("_range").removesuffix("_std")
    return (kind.removesuffix(f"_{unit}") if unit else kind).replace("_", " ")


def _slots(lines: list[Line]) -> list[tuple[str, Optional[Line]]]:
    """The labelled lines of a panel, top to bottom: a figure drawn on several lines gets a heading
    of its own (its id, bold, no data) and its lines say only where they differ."""
    slots: list[tuple[str, Optional[Line]]] = []
    for index, line in enumerate(lines):
        if sum(other.figure == line.figure for other in lines) == 1 or not line.where:
            slots.append((" · ".join(part for part in (line.figure, line.where) if part) + _n(line), line))
            continue
        if index == 0 or lines[index - 1].figure != line.figure:
            slots.append((line.figure, None))
        slots.append((line.where + _n(line), line))
    return slots


def _n(line: Line) -> str:
    return (f" · n = {line.n}" if line.n else "") + (" · gen.-limited" if line.limited else "")


def _log_ticks(axis: Any, left: float, right: float) -> None:
    """Ticks at 1, 2 and 5 of each decade, written out in full (never 2×10³ or bare minor digits)."""
    ticks = [m * 10.0 ** k for k in range(math.floor(math.log10(left)), math.ceil(math.log10(right)) + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if left <= t <= right]
    if len(ticks) > 9:  # many decades: 1s only
        ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")]
    axis.xaxis.set_major_locator(FixedLocator(ticks))
    axis.xaxis.set_minor_locator(NullLocator())
    axis.set_xticklabels([f"{t:,.0f}" if t >= 1000 else f"{t:g}" for t in ticks])


def _legend(lines: list[Line], colors: dict[str, str]) -> list[Any]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = []
    if any(line.paper is not None for line in lines):
        names = sorted({line.paper_spread_name for line in lines if line.paper_spread})
        spread = f" (± its {' or '.join(names)}, dashed)" if names else ""
        handles.append(Line2D([], [], marker="D", linestyle="none", markerfacecolor="none", markeredgecolor="black",
                              markeredgewidth=1.5, markersize=8, label=f"the paper{spread}"))
    if any(line.region is not None and not line.rule for line in lines):
        handles.append(Line2D([], [], color="black", linestyle=":", marker="|", label="where ours agrees (× tolerance)", markersize=7))
    if any(line.region is not None and line.rule for line in lines):
        handles.append(Line2D([], [], color="black", linestyle=":", marker="|", label="where the claim's rule wants ours", markersize=7))
    if any(line.paper_range is not None for line in lines):
        handles.append(Patch(facecolor="0.85", edgecolor="0.25", label="the paper's range"))
    handles += [Line2D([], [], marker="o", linestyle="none", color=color, markersize=6, label=f"ours: {broker}" if broker else "ours")
                for broker, color in colors.items()]
    if any(line.limited and line.ours is not None for line in lines):
        handles.append(Line2D([], [], marker="o", linestyle="none", color="0.3", markerfacecolor="white", markeredgewidth=1.5,
                              markersize=6, label="ours, generator-limited"))
    if any(line.other is not None for line in lines):
        handles.append(Line2D([], [], marker="o", linestyle="none", color="0.3", markerfacecolor="none", markeredgewidth=1.5,
                              markersize=9, label="ours, the other configuration"))
    if any(line.ours_range is not None for line in lines):
        handles.append(Line2D([], [], color=RANGE_OF_OURS, linewidth=3, label="ours: range over brokers"))
    return handles


def caption(lines: list[Line], config: str = "", confidence: float = 0.95, runs_drawn: str = "") -> str:
    """One line: what is drawn, in which units, and n; `runs_drawn`: which run is which, where a
    line carries two of ours (a claim about settings)."""
    units = ", ".join(dict.fromkeys(line.unit or "no unit" for line in lines))
    with_paper = [line for line in lines if line.has_paper]
    marks = [text for text, present in (("values (hollow black diamonds)", any(line.paper is not None for line in lines)),
                                        ("ranges (grey bands)", any(line.paper_range is not None for line in lines))) if present]
    drawn = (f"the paper's {' and '.join(marks)} beside ours (filled, by broker)" if with_paper else
             "ours alone (filled, by broker): the paper gives no number for these figures")
    if any(line.region is not None and not line.rule for line in lines):
        drawn += ", dotted: where ours would agree, by the figure's tolerance factor"
    if any(line.region is not None and line.rule for line in lines):
        drawn += ", dotted: the region the claim's rule wants ours in"
    derived = list(dict.fromkeys(line.figure for line in with_paper if line.derived))
    if derived:
        which = ", ".join(derived) if len(derived) <= 3 else f"{len(derived)} figures (listed under the table)"
        drawn += f" (the paper's of {which} derived from what it prints, not printed)"
    if runs_drawn:
        drawn += f" ({runs_drawn})"
    if with_paper and len(with_paper) < len(lines):
        drawn += f" (the paper gives a number for {len(with_paper)} of {len(lines)} lines)"
    judged = [line for line in lines if line.ours is not None and not line.limited]
    # What ours is where it is not a mean of runs (a capacity's bracket, a best of n), said per figure;
    # the runs per point count the others only.
    drawn_ours = [line for line in lines if not line.limited and (line.ours is not None or line.ours_range is not None)]
    others = {line.figure: line.statistic for line in drawn_ours if line.statistic and not line.statistic.startswith(("mean", "one run"))}
    counts = sorted({line.n for line in judged if line.n and line.figure not in others})
    stated = "; ".join(f"{statistic} for {figure}" for figure, statistic in others.items())
    # A one-run share of messages (a loss) keeps its binomial interval over the messages.
    single_binomial = [line.figure for line in judged if line.n == 1 and line.interval_kind == "binomial"]
    single = [line.figure for line in judged if line.n == 1 and not line.interval_kind and line.figure not in others]
    limited = [line for line in lines if line.limited]
    if len(limited) == len(lines):
        runs = ("every line from runs flagged generator-limited (hollow circles, dashed ranges; this host could not hold their "
                "schedule): shown, not judged, no interval")
    elif not counts and any(line.ours_range is not None for line in lines):
        statistics = ", ".join(dict.fromkeys(line.statistic for line in lines if line.ours_range is not None and line.statistic))
        runs = f"ours are ranges over brokers ({statistics or 'their runs are in the table above'})"
    elif not counts and stated:
        runs = "ours: " + stated
    elif not counts:
        runs = ("ours computed, or read from a table of ours, not from repeated runs: no interval of runs drawn (a share's or "
                "an estimate's own interval, where the rule uses one, is in the claims' table)")
    elif counts == [1]:
        runs = "; ".join(part for part in ("n = 1 run per point: no interval", stated) if part)
    elif not any(line.interval for line in judged):
        statistics = ", ".join(dict.fromkeys(line.statistic for line in judged if line.statistic))
        runs = "ours: " + (statistics or f"n = {_span(counts)} runs per point") + ", without an interval"
    else:
        runs = f"ours: mean of n = {_span(counts)} runs with its {confidence:.0%} confidence interval"
        if single:
            runs += f"; n = 1 (no interval) for {', '.join(dict.fromkeys(single))}"
        if single_binomial:
            runs += f"; n = 1 with its binomial interval over the messages for {', '.join(dict.fromkeys(single_binomial))}"
        if stated:
            runs += "; " + stated
    if limited and len(limited) < len(lines):
        runs += (f"; {len(limited)} line{'s' * (len(limited) != 1)} from runs flagged generator-limited (hollow circles, dashed "
                 "ranges; this host could not hold their schedule): shown, not judged, no interval")
    left_out = {line.figure: line.left_out for line in lines if line.left_out}
    if left_out:
        runs += "; generator-limited runs left out: " + ", ".join(f"{count} of {figure}" for figure, count in left_out.items())
    where = f"; engine configuration {config}" if config else ""
    return f"{drawn}; units: {units}; {runs}{where}."


def _span(counts: list[int]) -> str:
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"


def save(figure: PlotFigure, path: Path) -> Path:
    """The PNG without the software version or a date, so that the same lines give the same bytes."""
    figure.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(figure)
    return path


def _file_name(claim: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", claim).strip("-")


__all__ = ["BesideFigure", "Line", "caption", "claim_lines", "draw", "save", "write_beside"]
