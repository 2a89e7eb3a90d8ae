"""A verdict on each of the paper's claims, from the paper file's `check:` rules applied to the
rows of paper_figures (each paper figure beside ours). Every verdict carries its rule as text
(what was compared, with which tolerance) and the uncertainty of the numbers it rests on (their
interval, or n = 1). Rows whose runs were all flagged generator-limited never judge: a check
with nothing else says "not judged: generator-limited runs only".

A check's outcome is True (holds), False (does not hold), None (not measured), CANNOT_TELL (an
interval straddles the edge of what the rule asks), LIMITED, or MAGNITUDE: an `agree` check whose
rows disagree with the paper's figures only by lying wholly lower or wholly higher (a different
magnitude on this host, which is not a contradiction of the claim's substance and is said as such)."""

from __future__ import annotations

import datetime as dt
import fnmatch
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Optional, Union

from mqttlab.analysis.stats import mean_interval, welch_difference
from mqttlab.reproductions.paper_figures import (
    BRACKET, CANNOT_TELL, DIFFERS, DISAGREES, LIMITED, MEASURED, FigureRow, base_name, number, value_text as _text,
)
from mqttlab.reproductions.paper_file import Check, Claim

HOLDS, DOES_NOT_HOLD, NOT_MEASURED_HERE, NOT_JUDGED = "holds", "does not hold", "not measured here", "not judged"
MAGNITUDE = "other magnitude here"  # the claim's figures measured wholly lower or higher than the paper's, nothing else failing
Outcome = Union[bool, None, str]  # True, False, None (not measured), CANNOT_TELL, LIMITED, MAGNITUDE
# How a claim's conditions make its verdict, printed on every page beside the claims.
COMBINATION = (f"A claim {HOLDS} when one condition of its rule holds and none fails or cannot tell, the conditions not measured here "
               f"or not judged (generator-limited runs only) set aside, each named beside it; it {DOES_NOT_HOLD} when one fails; when the only failures "
               f"are figures of ours lying wholly lower or wholly higher than the paper's (its rows of the table above), it is "
               f"\"{MAGNITUDE}\" (ours lower or higher, said), not a contradiction of the claim; else a condition that cannot tell "
               f"makes it \"{CANNOT_TELL}\".")
CONFIDENCE = 0.95  # of the Welch interval on a difference of two configurations


@dataclass
class ClaimVerdict:
    claim: str
    text: str
    verdict: str
    evidence: list[str] = field(default_factory=list)  # the numbers the verdict rests on, each with its uncertainty
    rule: str = ""  # the rule in one line (each condition's short form); or, for a claim not judged, why in one line
    # each condition as a sentence a reader can apply by hand to the numbers beside it, its outcome,
    # and how many lines of `evidence` are its (they come in the conditions' order)
    conditions: list[tuple[str, str, int]] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)  # the paper's figures its rule reads (or, unjudged, lists)
    # the rows (figure, configuration, broker) the judged conditions read, after their `where`: where
    # the verdict's numbers come from (a condition not measured here or generator-limited only reads none)
    judged_rows: list[tuple[str, Optional[str], Optional[str]]] = field(default_factory=list)
    # the rows every condition reads, generator-limited ones included: what its figure draws
    read_rows: list[tuple[str, Optional[str], Optional[str]]] = field(default_factory=list)
    # per condition, for one that cannot tell only because its runs are few: how many runs a
    # configuration would decide it, computed (see runs_to_decide); "" where that does not apply
    runs_to_decide: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Reference:
    """A second run of the same pipeline in another configuration, for `unchanged` checks: its
    rows by figure, and what each run's configuration is called ("as-shipped", "tuned")."""

    rows: dict[str, list[FigureRow]]
    label: str
    ours: str = "this run"


def judge_claim(claim: Claim, rows: dict[str, list[FigureRow]], reference: Optional[Reference] = None) -> ClaimVerdict:
    if claim.not_here:
        return ClaimVerdict(claim.id, claim.text, NOT_MEASURED_HERE, [], f"not judged here: {claim.not_here}")
    if not claim.check:
        evidence = [f"{row.figure}{_at(row)}: paper {_text(row.paper)}, ours {_text(row.ours)}{_n(row)}"
                    for name in claim.figures for row in rows.get(name, []) if row.ours is not None]
        return ClaimVerdict(claim.id, claim.text, NOT_JUDGED if evidence else NOT_MEASURED_HERE, evidence,
                            f"not judged: {claim.unjudged}" if claim.unjudged else "no rule in the paper file: the numbers are listed, not judged",
                            figures=list(claim.figures))
    usable = {name: [row for row in found if row.status != LIMITED] for name, found in rows.items()}
    limited = {name: [row for row in found if row.status == LIMITED] for name, found in rows.items()}
    outcomes = []
    for check in claim.check:
        ok, lines = _check(check, usable, reference)
        if check.note:
            lines.insert(1, check.note)  # after the first line, which says what was found
        apart = _made_apart(check, usable) if ok is not None else None
        if apart:
            lines.insert(1 + bool(check.note), apart)
        left_out = sum(len(limited.get(name, [])) for name in dict.fromkeys(check.figure_ids()))
        if left_out:
            lines.append(f"{left_out} configuration(s) left out: generator-limited runs only")
            if ok is None:
                ok = LIMITED
        outcomes.append((ok, lines))
    evidence = [line for _, lines in outcomes for line in lines]
    results = [ok for ok, _ in outcomes]
    verdict = combine_verdict(results)
    if verdict == HOLDS:
        unjudged = sum(ok is None or ok == LIMITED for ok in results)
        if unjudged:
            evidence.append(f"{unjudged} of {len(results)} conditions not judged here (not measured, or generator-limited only)")
    to_decide = [runs_to_decide(check, usable, reference) if ok == CANNOT_TELL else "" for check, ok in zip(claim.check, results)]
    shorts = [short_rule(check) for check in claim.check]
    short = "; and ".join(shorts) if len(shorts) <= 3 else f"{shorts[0]}; and {len(shorts) - 1} more conditions (in full below)"
    return ClaimVerdict(claim.id, claim.text, verdict, evidence, short,
                        [(rule_text(check, _reads_brackets(check, usable)), outcome_word(ok), len(lines))
                         for check, (ok, lines) in zip(claim.check, outcomes)],
                        list(dict.fromkeys(name for check in claim.check for name in check.figure_ids())),
                        list(dict.fromkeys((row.figure, row.scenario, row.broker)
                                           for check, ok in zip(claim.check, results) if ok is not None and ok != LIMITED
                                           for row in _rows_read(check, usable))),
                        list(dict.fromkeys((row.figure, row.scenario, row.broker) for check in claim.check for row in _rows_read(check, rows))),
                        to_decide if any(to_decide) else [])


# Runs this far apart or more were made at different sittings of the host (a pass resumed or added later).
SITTING_GAP = dt.timedelta(hours=1)


def _made_apart(check: Check, rows: dict[str, list[FigureRow]]) -> Optional[str]:
    """A line for a comparison (a ranking, rise, fall, ratio or difference between configurations)
    whose configurations' runs were not made at the same sittings of the host: a shift between
    sittings (the host's other load, its speed that day) is in none of the intervals and moves the
    comparison as its variable would. Said beside the verdict, never part of it."""
    if all(kind is None for kind in (check.increasing, check.decreasing, check.best, check.ratio, check.difference, check.trend)):
        return None
    made = list({(row.figure, row.scenario, row.broker): row for row in _rows_read(check, rows) if row.started}.values())
    if len(made) < 2:
        return None
    times = sorted({dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for row in made for t in row.started})
    sittings = [[times[0], times[0]]]
    for time in times[1:]:
        if time - sittings[-1][1] >= SITTING_GAP:
            sittings.append([time, time])
        sittings[-1][1] = time

    def which(row: FigureRow) -> tuple[int, ...]:
        at = {dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in row.started}
        return tuple(i for i, (first, last) in enumerate(sittings, 1) if any(first <= t <= last for t in at))

    kinds: dict[tuple[int, ...], list[FigureRow]] = {}
    for row in made:
        kinds.setdefault(which(row), []).append(row)
    if len(kinds) < 2:
        return None

    def span(first: dt.datetime, last: dt.datetime) -> str:
        end = "" if last == first else f"–{last:%H:%M}" if last.date() == first.date() else f"–{last:%d %b %H:%M}"
        return f"{first:%d %b %H:%M}{end}"

    def named(key: tuple[int, ...]) -> str:
        return f"sitting {key[0]} alone" if len(key) == 1 else "sittings " + ", ".join(map(str, key[:-1])) + f" and {key[-1]}"

    spans = "; ".join(f"{i}: {span(first, last)}" for i, (first, last) in enumerate(sittings, 1))
    shares = ", ".join(f"{len(found)} from {named(key)}" for key, found in sorted(kinds.items(), key=lambda item: (len(item[0]), item[0])))
    counts = sorted({len(row.started) for row in made})
    runs = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    return (f"made apart: the runs of the {len(made)} rows compared come from {len(sittings)} sittings of the host (UTC {spans}): "
            f"{shares}; {runs} runs a row; a shift between sittings is in none of these intervals and moves the comparison as its variable would")


# The runs a configuration tried in turn when projecting how many would decide a condition.
RUN_LADDER = (4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 70, 100)


def runs_to_decide(check: Check, rows: dict[str, list[FigureRow]], reference: Optional[Reference] = None) -> str:
    """For a condition that cannot tell: the fewest runs a configuration (from RUN_LADDER; one that
    has more keeps its own) at which the same check, on the same numbers, would decide, were each
    configuration's mean and standard deviation over its runs what they are now and only its t
    interval (and its Welch intervals) narrower with n. A projection, computed, never measured: more runs move the means too. Only
    rows whose intervals come from their runs are projected (not a capacity's bracket, a share of
    clients' binomial interval, a best of n); a condition that reads none, or an `agree` (whose
    rows were judged against the paper already) or an `unchanged` one, gets "" (not projected)."""
    if check.agree is not None or check.unchanged is not None:
        return ""
    read = _rows_read(check, rows)
    scalable = [row for row in read if _scalable(row)]
    if not scalable:
        return ""
    fewest = min(len(row.samples) for row in scalable)
    for n in RUN_LADDER:
        if n <= fewest:
            continue
        # A configuration that has n runs or more already keeps its own.
        scaled = {name: [_with_runs(row, n) if _scalable(row) and len(row.samples) < n else row for row in found]
                  for name, found in rows.items()}
        ok, _ = _check(check, scaled, reference)
        if ok is True or ok is False:
            return f"{n} runs a configuration would {'make it hold' if ok is True else 'make it not hold'}"
    return (f"not decided at {RUN_LADDER[-1]} runs a configuration: a difference too small against the runs' spread (or "
            "rows left as they are decide nothing)")


def _scalable(row: FigureRow) -> bool:
    """A row whose interval is its runs' t interval (two or more runs, a mean)."""
    return len(row.samples) >= 2 and row.interval is not None and not row.interval_kind and row.statistic.startswith("mean of")


def _with_runs(row: FigureRow, n: int) -> FigureRow:
    """The row as if it had n runs with its mean and standard deviation: samples placed
    symmetrically around the mean, and their t interval (clipped at 0 as the row's was)."""
    estimate = mean_interval(row.samples)
    mean, sd = estimate.mean or 0.0, estimate.stdev or 0.0
    # n samples with exactly this mean and SD: ±a in pairs, and the mean itself when n is odd.
    a = sd if n % 2 else sd * math.sqrt((n - 1) / n)
    samples = [mean + sign * a for _ in range(n // 2) for sign in (-1, 1)] + ([mean] if n % 2 else [])
    projected = mean_interval(samples)
    low = projected.low if projected.low is not None else mean
    high = projected.high if projected.high is not None else mean
    if low < 0 <= min(row.samples):
        low = 0.0
    return replace(row, samples=samples, interval=[low, high], runs=n)


def _reads_brackets(check: Check, rows: dict[str, list[FigureRow]]) -> bool:
    """Whether the check's figures are capacities (their searches' brackets, not runs' intervals)."""
    found = [row for name in dict.fromkeys(check.figure_ids()) for row in rows.get(name, []) if row.ours is not None]
    return bool(found) and _brackets(*found)


def outcome_word(ok: Outcome) -> str:
    """A condition's outcome as the page and paper_claims.csv print it."""
    return {True: HOLDS, False: DOES_NOT_HOLD, None: NOT_MEASURED_HERE}.get(ok, str(ok))  # type: ignore[arg-type]


def combine_verdict(results: list[Outcome]) -> str:
    """The claim's verdict from its conditions' outcomes, by COMBINATION."""
    if any(ok is False for ok in results):
        return DOES_NOT_HOLD
    if any(ok == MAGNITUDE for ok in results):
        return MAGNITUDE
    if any(ok == CANNOT_TELL for ok in results):
        return CANNOT_TELL
    if all(ok is None for ok in results):
        return NOT_MEASURED_HERE
    if all(ok is None or ok == LIMITED for ok in results):
        return LIMITED
    return HOLDS


def short_rule(check: Check) -> str:
    """The check in a few words, for the claims table's one-line rule (rule_text says it in full):
    its kind, the figures it reads, and its region, direction and share."""
    kind = next(name for name in ("agree", "increasing", "decreasing", "best", "ratio", "difference", "each", "figure", "trend", "unchanged")
                if getattr(check, name) is not None)
    names = list(dict.fromkeys(check.figure_ids()))
    if check.best is not None:
        names = [check.best]
    listed = names[0] if len(names) == 1 else " / ".join(names) if check.ratio else f"{names[0]} … ({len(names)} figures)"
    how = [f"{check.key} of" if check.key else "", listed]
    how.append({"best": "highest" if check.higher_is_better else "lowest", "trend": str(check.trend)}.get(kind, ""))
    how.append(f"along {' → '.join(check.along)}" if check.along and kind == "trend" else "")
    how.append(f"in {_region(*check.within)}{f' {check.unit}' if check.unit else ''}" if check.within is not None else "")
    how.append(f"within ×{check.tolerance:g}" if kind == "unchanged" and check.within is None or check.trend == "flat" else "")
    how.append(f"in ≥ {check.at_least:.0%}" if check.at_least < 1 else "")
    return f"{kind}: " + " ".join(part for part in how if part)


def rule_text(check: Check, brackets: bool = False) -> str:
    """The check as a sentence a reader can apply by hand to the numbers beside it; `brackets`:
    its figures are capacities, each with its search's bracket."""
    if check.agree is not None:
        return f"every measured row of {', '.join(check.agree)} agrees with the paper (each row's tolerance beside it)"
    if check.increasing is not None or check.decreasing is not None:
        names = check.increasing or check.decreasing or []
        return (f"ours {'rises' if check.increasing else 'falls'} along {' → '.join(names)}, per broker, spans not overlapping (a span: "
                "the figure's values and intervals; overlapping intervals cannot tell, overlapping bare values do not "
                f"{'rise' if check.increasing else 'fall'})")
    if check.best is not None:
        bar = "|" if check.absolute else ""
        what = f"{bar}{check.key}{bar} of " if check.key else (f"{bar}ours{bar} of " if check.absolute else "")
        head = f"{what}{check.best} is the {'highest' if check.higher_is_better else 'lowest'} of {', '.join(check.among or [])}"
        if check.key or check.absolute:
            return head + ": value against value (one value each, no interval)"
        if brackets:
            return head + (f": capacities, by their searches' brackets: wholly {'above' if check.higher_is_better else 'below'} "
                           "each rival's, it is; wholly on the other side, it is not; overlapping: cannot tell")
        return (head + f": with two or more runs a side, the Welch {CONFIDENCE:.0%} interval of its difference to each must lie wholly "
                "on its side (across zero: cannot tell); with one run on a side, value against value (no interval)")
    within = _region(*(check.within or [0.0, 0.0]))
    share = f" in at least {check.at_least:.0%} of the configurations" if check.at_least < 1 else " in every configuration"
    if check.ratio is not None:
        return (f"{check.ratio[0]} / {check.ratio[1]} in {within}, bounded from the two figures' intervals where they have them "
                "(across an edge: cannot tell)")
    if check.difference is not None:
        first, second = check.along or ["", ""]
        return (f"{check.difference[0]} − {check.difference[1]} in {within}" + (f" {check.unit}" if check.unit else "")
                + f", configurations paired {first} vs {second}" + (f" where {_where_text(check)}" if check.where else "")
                + f"{share}; with two or more runs a side, the Welch "
                f"{CONFIDENCE:.0%} interval must lie inside (straddling an edge: cannot tell)")
    if check.each is not None:
        what = f"ours' {check.key}" if check.key else "ours"
        return (f"{what} wholly in {within} (its interval, where it has one) in at least {check.at_least:.0%} of the rows of "
                f"{len(check.each)} figures ({', '.join(check.each[:3])}" + (", …)" if len(check.each) > 3 else ")")
                + "; too many wholly outside for that share: does not hold; else cannot tell")
    if check.trend is not None:
        what = (f"flat (highest / lowest within ×{check.tolerance:g}: from the intervals, at most max(high) / min(low) within it "
                 "holds, at least max(low) / min(high) beyond it does not, else cannot tell)" if check.trend == "flat"
                else f"{check.trend} (step by step; where the values have intervals, overlapping steps cannot tell; bare equal values do "
                     f"not {check.trend.removesuffix('s')})")
        names = check.figures or []
        listed = ", ".join(names[:3]) + (f", … ({len(names)} figures)" if len(names) > 3 else "")
        whose = f"ours' {check.key} of " if check.key else ""
        return f"{whose}{listed} {what} along {' → '.join(check.along or [])}{share}"
    if check.unchanged is not None:
        names = check.unchanged
        listed = ", ".join(names[:3]) + (f", … ({len(names)} figures)" if len(names) > 3 else "")
        how = (f"this run − the other in {within}" + (f" {check.unit}" if check.unit else "") if check.within is not None
               else f"within ×{check.tolerance:g} of the other's (same sign)") + (
            ", bounded by the two values' intervals where they have them (a key's own: binomial for a share, ± z standard "
            "errors for an estimate)")
        whose = f"ours' {check.key}" if check.key else "ours"
        return (f"{whose} of {listed} against the same rows of a second run of the pipeline in another configuration: "
                f"{how}; holds when at least {check.at_least:.0%} of the pairs lie wholly inside, does not hold when too many "
                "lie wholly outside for that share, else cannot tell (one run of each configuration)")
    return (f"every row of {check.figure} in {within}" + (f" (where {check.where})" if check.where else "")
            + ", its interval wholly inside where it has one (across an edge: cannot tell)")


def _where_text(check: Check) -> str:
    return " or ".join([check.where] if isinstance(check.where, str) else list(check.where or []))


def _region(low: float, high: float) -> str:
    """[low, high], or "≥ low" / "≤ high" where the other end is open (the paper file's .inf)."""
    if math.isinf(high) and not math.isinf(low):
        return f"≥ {_text(low)}"
    if math.isinf(low) and not math.isinf(high):
        return f"≤ {_text(high)}"
    return f"[{_text(low)}, {_text(high)}]"


def _n(row: FigureRow) -> str:
    return f" ({row.uncertainty})" if row.uncertainty else ""


def _at(row: FigureRow) -> str:
    where = ", ".join(part for part in (row.scenario, row.broker) if part)
    return f" ({where})" if where else ""


def _scalar(row: FigureRow) -> Optional[float]:
    value = row.ours
    if isinstance(value, dict):
        value = value.get("mean")
    if isinstance(value, list) and len(value) == 2 and all(number(v) for v in value):
        return (float(value[0]) + float(value[1])) / 2
    return float(value) if number(value) else None


def _by_broker(rows: list[FigureRow]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for row in rows:
        value = _scalar(row)
        if value is not None:
            out.setdefault(row.broker or "", []).append(value)
    return out


def _aligned(names: list[str], rows: dict[str, list[FigureRow]]) -> list[dict[str, list[float]]]:
    """Our values of each figure by broker, for comparing figures broker by broker; figures of one
    broker each (Aedes vs Mosquitto) are compared with each other under one key."""
    per_figure = [_by_broker(rows.get(name, [])) for name in names]
    common = [b for b in per_figure[0] if all(b in figure for figure in per_figure)] if per_figure else []
    if not common and per_figure and all(len(figure) == 1 for figure in per_figure):
        return [{"": next(iter(figure.values()))} for figure in per_figure]
    return [{b: figure[b] for b in common} for figure in per_figure]


def _keyed(check: Check, row: FigureRow) -> Optional[float]:
    """The number a check reads from a row: its `key` of a value with keys, else the row's scalar."""
    if check.key is None:
        return _scalar(row)
    value = row.ours.get(check.key) if isinstance(row.ours, dict) else None
    return float(value) if number(value) else None


def _bounds(check: Check, row: FigureRow) -> Optional[_Span]:
    """The number a check reads from a row with its interval: the row's interval for its whole
    value, the key's own interval for a key (an SPRT share's binomial one); bare without one."""
    value = _keyed(check, row)
    if value is None:
        return None
    interval = row.interval if check.key is None else row.key_intervals.get(check.key)
    low, high = interval if interval else (value, value)
    return _Span(value, min(low, value), max(high, value), interval is not None)


def _check(check: Check, rows: dict[str, list[FigureRow]], reference: Optional[Reference] = None) -> tuple[Outcome, list[str]]:
    """(True / False / None = not measured, the numbers it rests on)."""
    if check.agree is not None:
        measured = [row for name in check.agree for row in rows.get(name, []) if row.status in MEASURED]
        if not measured:
            return None, [f"not measured: {', '.join(check.agree)}"]
        bad = [row for row in measured if row.status in (DIFFERS, DISAGREES)]
        lines = [f"{row.figure}{_at(row)}: {row.status}{f' ({row.side})' if row.side else ''}: ours {_text(row.ours)}{_n(row)}; "
                 f"rule: {row.rule}" for row in measured]
        if bad:
            return (MAGNITUDE if all(row.side in ("ours lower", "ours higher") for row in bad) else False), lines
        return (CANNOT_TELL if any(row.status == CANNOT_TELL for row in measured) else True), lines
    if check.increasing is not None or check.decreasing is not None:
        names = check.increasing or check.decreasing or []
        rising = check.increasing is not None
        per_figure = _aligned(names, rows)
        brokers = list(per_figure[0]) if per_figure else []
        if not brokers:
            return None, [f"not measured together: {', '.join(names)}"]
        spans_of = _aligned_spans(names, rows)
        lines, outcomes = [], []
        for broker in brokers:
            spans = [figure[broker] for figure in spans_of]
            steps = [_step(a, b, rising) for a, b in zip(spans, spans[1:])]
            outcome = _combine(steps)
            outcomes.append(outcome)
            # Each step's own relation: "<" or ">" where the spans are apart, "≈" where they overlap.
            text = f"{spans[0].text} ({names[0]})"
            for before, step, span, name in zip(spans, steps, spans[1:], names[1:]):
                relation = "≈" if _overlap(before, span) else ("<" if (step is True) == rising else ">")
                text += f" {relation} {span.text} ({name})"
            lines.append(f"{broker or 'ours'}: {text}" + {True: "", False: " — not " + ("rising" if rising else "falling"),
                                                          CANNOT_TELL: " — cannot tell: the intervals overlap"}[outcome])
        return _combine(outcomes), lines
    if check.best is not None:
        return _best(check, rows)
    if check.ratio is not None:
        top, bottom = _aligned(check.ratio, rows)
        brokers = list(top)
        if not brokers:
            return None, [f"not measured together: {' / '.join(check.ratio)}"]
        low, high = check.within or (0.0, math.inf)
        first, second = _aligned_spans(check.ratio, rows)
        lines, outcomes = [], []
        for broker in brokers:
            a, b = first[broker], second[broker]
            ratio = a.center / b.center if b.center else math.inf
            judged: Outcome = low <= ratio <= high
            bounds = ""
            if (a.interval or b.interval) and b.low > 0:
                # From the two intervals: a conservative bound on the ratio, not an interval of its own.
                judged = _inside(a.low / b.high, a.high / b.low, low, high)
                bounds = f", from the intervals {_text(a.low / b.high)}–{_text(a.high / b.low)}"
            outcomes.append(judged)
            mark = {True: "in", False: "outside", CANNOT_TELL: "cannot tell:"}[judged]
            lines.append(f"{broker or 'ours'}: {check.ratio[0]} / {check.ratio[1]} = {a.text} / {b.text} = {ratio:.3g}{bounds} "
                         f"({mark} {_region(low, high)})")
        return _combine(outcomes), lines
    if check.difference is not None:
        return _difference(check, rows)
    if check.each is not None:
        return _each(check, rows)
    if check.unchanged is not None:
        return _unchanged(check, rows, reference)
    if check.trend is not None:
        # A configuration may be a row of several of the figures: each counts once.
        unique = {(row.scenario, row.broker): row for name in check.figures or [] for row in rows.get(name, [])}
        return _trend(check, list(unique.values()))
    scored = [(row, _scalar(row)) for row in rows.get(check.figure or "", []) if _where(check, row)]
    numbers = [(row, v) for row, v in scored if v is not None]
    if not numbers:
        return None, [f"not measured: {check.figure}"]
    low, high = check.within or (0.0, math.inf)
    outcomes = [_inside(row.interval[0], row.interval[1], low, high) if row.interval else _inside(v, v, low, high) for row, v in numbers]
    return _combine(outcomes), [
        f"{row.figure}{_at(row)}: ours {_text(v)}{_n(row)} ({ {True: 'in', False: 'outside', CANNOT_TELL: 'cannot tell:'}[ok]} "
        f"{_region(low, high)})" for (row, v), ok in zip(numbers, outcomes)]


@dataclass
class _Span:
    """Our value of one figure on one broker: the mean of its rows, and the lowest and highest of
    their values and intervals (`interval`: whether any row had one)."""

    center: float
    low: float
    high: float
    interval: bool

    @property
    def text(self) -> str:
        return _text(self.center) if self.low == self.high else f"{_text(self.center)} [{_text(self.low)}–{_text(self.high)}]"


def _aligned_spans(names: list[str], rows: dict[str, list[FigureRow]]) -> list[dict[str, _Span]]:
    """As _aligned, each figure's rows on a broker summed up as a _Span."""
    values = _aligned(names, rows)
    spans: list[dict[str, _Span]] = []
    for name, per_broker in zip(names, values):
        out = {}
        for broker, numbers in per_broker.items():
            mine = [row for row in rows.get(name, []) if _scalar(row) is not None and (not broker or (row.broker or "") == broker)]
            bounds = [*numbers, *(bound for row in mine if row.interval for bound in row.interval)]
            out[broker] = _Span(sum(numbers) / len(numbers), min(bounds), max(bounds), any(row.interval for row in mine))
        spans.append(out)
    return spans


def _step(a: _Span, b: _Span, rising: bool) -> Outcome:
    """b above a (below, when not rising): with no overlap it does or does not; an overlap of
    intervals cannot tell; an overlap of bare values (several configurations) does not."""
    if (a.high < b.low) if rising else (a.low > b.high):
        return True
    if (a.low > b.high) if rising else (a.high < b.low):
        return False
    return CANNOT_TELL if a.interval or b.interval else False


def _overlap(a: _Span, b: _Span) -> bool:
    return a.low <= b.high and b.low <= a.high


def _inside(low: float, high: float, region_low: float, region_high: float) -> Outcome:
    if region_low <= low and high <= region_high:
        return True
    if high < region_low or low > region_high:
        return False
    return CANNOT_TELL


def _combine(outcomes: list[Outcome]) -> Outcome:
    if any(o is False for o in outcomes):
        return False
    if any(o == CANNOT_TELL for o in outcomes):
        return CANNOT_TELL
    return True


def _trend(check: Check, rows: list[FigureRow]) -> tuple[Outcome, list[str]]:
    """Rows that differ only in the `along` axis (the rest of the scenario name and the broker
    the same) form a configuration; the trend holds in a share of them. A rise or fall is judged
    step by step on the rows' intervals where they have them (overlapping: cannot tell, as for
    `increasing`); flat compares the values (highest / lowest within the tolerance)."""
    along = check.along or []
    compared = _trend_groups(check, rows)
    if not compared:
        return None, [f"not measured: {', '.join(check.figures or [])} along {', '.join(along)}"]

    def span(row: FigureRow) -> _Span:
        return _bounds(check, row) or _Span(0.0, 0.0, 0.0, False)

    def holds(found: list[FigureRow]) -> Outcome:
        spans = [span(row) for row in found]
        if check.trend == "flat":
            # The highest / lowest from the intervals: at most max(high) / min(low), at least max(low) / min(high).
            most = max(s.high for s in spans) / min(s.low for s in spans) if min(s.low for s in spans) > 0 else math.inf
            least = max(s.low for s in spans) / min(s.high for s in spans) if min(s.high for s in spans) > 0 else math.inf
            return True if most <= check.tolerance else False if least > check.tolerance else CANNOT_TELL
        return _combine([_step(a, b, check.trend == "rises") for a, b in zip(spans, spans[1:])])

    held = {key: holds(found) for key, found in compared.items()}
    agree = sum(outcome is True for outcome in held.values())
    disagree = sum(outcome is False for outcome in held.values())
    what = f"within ×{check.tolerance:g} (from the intervals)" if check.trend == "flat" else check.trend
    names = check.figures or []
    listed = ", ".join(names) if len(names) <= 3 else f"{len(names)} figures"
    lines = [f"{f'{check.key} of ' if check.key else ''}{listed}: {what} along {' → '.join(along)} in {agree} of {len(held)} configurations"
             f" ({agree / len(held):.0%}; {check.at_least:.0%} asked)"
             + (f", cannot tell in {len(held) - agree - disagree} (intervals overlap)" if len(held) - agree - disagree else "")]
    order = {False: 0, CANNOT_TELL: 1, True: 2}
    for key in sorted(compared, key=lambda k: order[held[k]])[:6]:  # those that break it first
        rest, broker = key
        lines.append(f"{rest}{f' ({broker})' if broker else ''}: " + " → ".join(span(row).text for row in compared[key])
                     + {True: "", False: " ✗", CANNOT_TELL: " ?"}[held[key]])
    if agree >= check.at_least * len(held) - 1e-9:
        return True, lines
    if disagree > (1 - check.at_least) * len(held) + 1e-9:
        return False, lines
    return CANNOT_TELL, lines


def _trend_groups(check: Check, rows: list[FigureRow]) -> dict[tuple[str, str], list[FigureRow]]:
    """A trend's configurations: rows that differ only in the `along` axis, in its order, two or more."""
    groups: dict[tuple[str, str], dict[int, FigureRow]] = {}
    for row in rows:
        if _keyed(check, row) is None or not _where(check, row):
            continue
        found = _position(base_name(row.scenario or ""), check.along or [])
        if found is not None:
            groups.setdefault((found[1], row.broker or ""), {})[found[0]] = row
    return {key: [found[k] for k in sorted(found)] for key, found in groups.items() if len(found) >= 2}


def _rows_read(check: Check, rows: dict[str, list[FigureRow]]) -> list[FigureRow]:
    """The rows a check reads: a trend's those of its configurations, any other's those its `where` keeps."""
    found = [row for name in dict.fromkeys(check.figure_ids()) for row in rows.get(name, []) if row.ours is not None]
    if check.trend is not None:
        return [row for group in _trend_groups(check, found).values() for row in group]
    return [row for row in found if _where(check, row)]


def _position(name: str, along: list[str]) -> Optional[tuple[int, str]]:
    """(which label of `along` the scenario name holds, the name without it); the longest label
    first, so that `mqtt-sn` is not read as `mqtt`."""
    for position, label in sorted(enumerate(along), key=lambda item: -len(item[1])):
        rest = _without_segment(name, label)
        if rest is not None:
            return position, rest
    return None


def _difference(check: Check, rows: dict[str, list[FigureRow]]) -> tuple[Outcome, list[str]]:
    """first − second per configuration, pairing a row of the first figure with the row of the
    second whose scenario differs only in the `along` label, on the same broker; or, where the
    broker is part of what the label changes (seed 004's MQTT-SN runs are RSMB's, its MQTT runs
    Mosquitto's), on the only broker each side has in that configuration."""
    sides: list[dict[tuple[str, str], FigureRow]] = [{}, {}]
    along = check.along or []
    for side, name in enumerate(check.difference or []):
        for row in rows.get(name, []):
            found = _position(base_name(row.scenario or ""), along)
            if found is not None and found[0] == side and _where(check, row) and _scalar(row) is not None:
                sides[side][(found[1], row.broker or "")] = row
    pairs = [(key, sides[0][key], sides[1][key]) for key in sides[0] if key in sides[1]]
    for rest in dict.fromkeys(rest for rest, _ in sides[0]):
        mine = [row for (r, _), row in sides[0].items() if r == rest]
        theirs = [row for (r, _), row in sides[1].items() if r == rest]
        if len(mine) == 1 == len(theirs) and mine[0].broker != theirs[0].broker:
            pairs.append(((rest, f"{mine[0].broker} vs {theirs[0].broker}"), mine[0], theirs[0]))
    if not pairs:
        return None, [f"not measured together: {' − '.join(check.difference or [])} paired {' vs '.join(along)}"]
    low, high = check.within or (-math.inf, math.inf)
    unit = f" {check.unit}" if check.unit else ""
    verdicts, lines = [], []
    for (rest, broker), a, b in pairs:
        d = (_scalar(a) or 0.0) - (_scalar(b) or 0.0)
        welch = welch_difference(a.samples, b.samples, CONFIDENCE) if len(a.samples) >= 2 and len(b.samples) >= 2 else None
        if welch is not None and welch.has_interval:
            lo, hi = welch.low or 0.0, welch.high or 0.0
            verdict = True if low <= lo and hi <= high else False if hi < low or lo > high else CANNOT_TELL
            how = f"{CONFIDENCE:.0%} CI {_text(lo)}–{_text(hi)}, n = {len(a.samples)} and {len(b.samples)}"
        else:
            verdict = low <= d <= high
            how = f"n = {len(a.samples) or '?'} and {len(b.samples) or '?'}"
        verdicts.append(verdict)
        mark = {True: "in", False: "outside", CANNOT_TELL: "cannot tell:"}[verdict]
        lines.append(f"{rest}{f' ({broker})' if broker else ''}: {_text(_scalar(a))} − {_text(_scalar(b))} = {_text(d)}{unit} "
                     f"({how}) {mark} [{_text(low)}, {_text(high)}]")
    agree = sum(v is True for v in verdicts)
    disagree = sum(v is False for v in verdicts)
    lines.insert(0, f"{' − '.join(check.difference or [])}: in [{_text(low)}, {_text(high)}]{unit} in {agree} of {len(verdicts)} "
                    f"configurations, outside in {disagree} ({check.at_least:.0%} asked)")
    if agree >= check.at_least * len(verdicts) - 1e-9:
        return True, lines
    if disagree > (1 - check.at_least) * len(verdicts) + 1e-9:
        return False, lines
    return CANNOT_TELL, lines


def _best(check: Check, rows: dict[str, list[FigureRow]]) -> tuple[Outcome, list[str]]:
    """The named figure ahead of every rival: run by run where both have two or more runs (the
    Welch interval of the difference of their means wholly on its side: ahead; wholly on the
    other: behind; across zero: cannot tell), by the figure's value otherwise (n = 1). With a
    `key`, that key of each row's value (its runs give no interval of it); `absolute`: magnitudes."""
    scored = [(row, _keyed(check, row)) for name in check.among or [] for row in rows.get(name, [])]
    if check.absolute:
        scored = [(row, abs(value) if value is not None else None) for row, value in scored]
    candidates = [(row, value) for row, value in scored if value is not None]
    mine = [(row, value) for row, value in candidates if row.figure == check.best]
    if not mine:
        return None, [f"not measured: {check.best}"]
    best, best_value = mine[0]
    sign = 1.0 if check.higher_is_better else -1.0
    outcomes, lines = [], []
    for rival, value in candidates:
        if rival.figure == check.best:
            continue
        runs = check.key is None and not check.absolute and len(best.samples) >= 2 and len(rival.samples) >= 2
        welch = welch_difference(best.samples, rival.samples, CONFIDENCE) if runs else None
        placed = None  # capacities: where the bracket lies against the rival's ("above", "below"), said as such
        if _brackets(best, rival):
            # Two capacities: a search's bracket is where its knee lies, so disjoint brackets order them.
            (low, high), (their_low, their_high) = best.interval or [], rival.interval or []
            above, below = low > their_high, high < their_low
            outcome: Outcome = CANNOT_TELL if not (above or below) else above if check.higher_is_better else below
            placed = "above" if above else "below" if below else None
            how = f"brackets {_text(low)}–{_text(high)} and {_text(their_low)}–{_text(their_high)}"
        elif welch is not None and welch.has_interval:
            lo, hi = sorted((sign * (welch.low or 0.0), sign * (welch.high or 0.0)))
            outcome = True if lo > 0 else False if hi < 0 else CANNOT_TELL
            how = f"difference {CONFIDENCE:.0%} CI {_text(welch.low or 0.0)}–{_text(welch.high or 0.0)}, n = {len(best.samples)} and {len(rival.samples)}"
        else:
            outcome = sign * (best_value - value) > 0
            how = (f"n = {len(best.samples) or '?'} and {len(rival.samples) or '?'}" if best.samples or rival.samples
                   else "one value each, no interval")
        outcomes.append(outcome)
        mark = placed or {True: "ahead of", False: "behind", CANNOT_TELL: "cannot tell from"}[outcome]
        # Rows of one broker (a model's terms) are told apart by their figure.
        same = (best.broker or "") == (rival.broker or "")
        first, second = (best.figure, rival.figure) if same else (best.broker or best.figure, rival.broker or rival.figure)
        lines.append(f"{first} {_text(best_value)} {mark} {second} {_text(value)} ({how})")
    return _combine(outcomes) if outcomes else None, lines


def _brackets(*rows: FigureRow) -> bool:
    """Rows that are capacities, each with its search's bracket."""
    return all(row.interval_kind == BRACKET and row.interval is not None for row in rows)


def _each(check: Check, rows: dict[str, list[FigureRow]]) -> tuple[Outcome, list[str]]:
    low, high = check.within or (-math.inf, math.inf)
    values = []
    for name in check.each or []:
        for row in rows.get(name, []):
            span = _bounds(check, row)
            if span is not None:
                values.append((row, span, _inside(span.low, span.high, low, high)))
    if not values:
        return None, [f"not measured: {', '.join(check.each or [])}"]
    inside = sum(ok is True for *_, ok in values)
    outside = sum(ok is False for *_, ok in values)
    what = f"{check.key} " if check.key else ""
    lines = [f"{what}wholly in [{_text(low)}, {_text(high)}] in {inside} of {len(values)} rows ({inside / len(values):.0%}; "
             f"{check.at_least:.0%} asked), wholly outside in {outside}" + (", the rest across an edge" if inside + outside < len(values) else "")]
    lines += [f"{row.figure}: {span.text} {'✗' if ok is False else '?'}" for row, span, ok in values if ok is not True][:6]  # those not inside
    return _share_outcome(inside, outside, len(values), check.at_least), lines


def _share_outcome(agree: int, disagree: int, total: int, at_least: float) -> Outcome:
    """Holds when the rows that hold reach the share asked; does not when too many fail for it ever to."""
    if agree >= at_least * total - 1e-9:
        return True
    if disagree > (1 - at_least) * total + 1e-9:
        return False
    return CANNOT_TELL


def _unchanged(check: Check, rows: dict[str, list[FigureRow]], reference: Optional[Reference]) -> tuple[Outcome, list[str]]:
    """Ours against the same row (figure, configuration, broker) of the other run: within the
    tolerance factor (same sign), or with `within` the difference this − other inside it."""
    names = check.unchanged or []
    if reference is None:
        return None, ["not measured: one configuration in these results; this rule compares two runs of the pipeline "
                      "(`mqttlab compare THIS OTHER`)"]
    pairs = []
    for name in names:
        theirs = {(row.scenario, row.broker): row for row in reference.rows.get(name, [])}
        for row in rows.get(name, []):
            other = theirs.get((row.scenario, row.broker))
            a, b = _bounds(check, row), _bounds(check, other) if other is not None else None
            if a is not None and b is not None:
                pairs.append((row, a, b))
    if not pairs:
        return None, [f"not measured in both runs: {', '.join(names[:3])}" + (", …" if len(names) > 3 else "")]

    def close(a: _Span, b: _Span) -> Outcome:
        # From the two intervals (a value without one is its own), the bounds of the difference or ratio.
        if check.within is not None:
            return _inside(a.low - b.high, a.high - b.low, check.within[0], check.within[1])
        if a.center == b.center and a.low == a.high and b.low == b.high:
            return True
        if a.low * a.high <= 0 or b.low * b.high <= 0:  # an interval across zero: no ratio of a sign
            return CANNOT_TELL if a.center * b.center > 0 else False
        if a.center * b.center < 0:
            return False
        ratios = sorted(x / y for x in (a.low, a.high) for y in (b.low, b.high))
        return _inside(ratios[0], ratios[-1], 1 / check.tolerance, check.tolerance)

    held = [(row, a.center, b.center, close(a, b)) for row, a, b in pairs]
    kept = sum(ok is True for *_, ok in held)
    broken = sum(ok is False for *_, ok in held)
    how = (f"{_text(check.within[0])} ≤ {reference.ours} − {reference.label} ≤ {_text(check.within[1])}" if check.within is not None
           else f"within ×{check.tolerance:g}")
    lines = [f"{f'{check.key}: ' if check.key else ''}{reference.ours} against {reference.label}: {how} in {kept} of {len(held)} pairs "
             f"({kept / len(held):.0%}; {check.at_least:.0%} asked), wholly outside in {broken}"]

    def size(item: tuple[FigureRow, float, float, Outcome]) -> float:
        _, mine, theirs = item[:3]
        return abs(mine - theirs) if check.within is not None else (abs(math.log(mine / theirs)) if mine * theirs > 0 else math.inf)

    # The two that changed most, after the count: a page shows a claim's first lines only.
    for row, this, that, ok in sorted((item for item in held if item[3] is not True), key=size, reverse=True)[:2]:
        change = f"{_text(this - that)}" if check.within is not None else (f"×{this / that:.3g}" if this * that > 0 else "sign changed")
        lines.append(f"{row.figure}{_at(row)}: {_text(this)} against {_text(that)} ({change}) {'✗' if ok is False else '?'}")
    return _share_outcome(kept, broken, len(held), check.at_least), lines


def _where(check: Check, row: FigureRow) -> bool:
    """Whether the row's scenario is one the check's `where` (a glob or several) names."""
    if not check.where:
        return True
    globs = [check.where] if isinstance(check.where, str) else check.where
    return any(fnmatch.fnmatchcase(base_name(row.scenario or ""), glob) for glob in globs)


def _without_segment(name: str, label: str) -> Optional[str]:
    """`name` with the dash-delimited run `label` replaced by `*` (`loss-10-qos0` minus `loss-10`:
    `*-qos0`), or None when it is not there as a whole (`loss-1` is not in `loss-10-qos0`)."""
    parts, wanted = name.split("-"), label.split("-")
    for start in range(len(parts) - len(wanted) + 1):
        if parts[start:start + len(wanted)] == wanted:
            return "-".join([*parts[:start], "*", *parts[start + len(wanted):]])
    return None
