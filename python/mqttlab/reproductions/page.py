"""A reproduction page (docs/reproductions/seed00N.md): the command that made the runs, the host
they ran on, each figure of the paper beside ours, the verdict on each claim, our headline figures
and a few PNGs. Markdown, so it reads on any code host and diffs well.

The generated part sits between two markers; what is outside them (what differs and why, written
after reading the results) is kept when the page is made again from new runs."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from mqttlab.analysis import Comparison
from mqttlab.reproductions.beside import BesideFigure
from mqttlab.reproductions.flags import flag_section
from mqttlab.reproductions.paper_figures import BRACKET, MEASURED, NO_PAPER_NUMBER, NOT_HERE, FigureRow, value_text
from mqttlab.reproductions.section import PaperSection
from mqttlab.reproductions.verdicts import COMBINATION, RUN_LADDER, ClaimVerdict
from mqttlab.reproductions.capacity_searches import CapacitySearch
from mqttlab.results import INVOCATIONS, provenance

START = "<!-- made by `mqttlab compare --page`: this part is replaced when the page is made again -->"
END = "<!-- end of the generated part: what follows is kept -->"
MAX_PLOT_ROWS = 60  # points of the paper's plots without numbers listed with ours; beyond, Our figures has them
EVIDENCE_SHOWN = 4  # numbers shown per claim; a claim over a whole plot rests on dozens
NOT_RECORDED = "not recorded"
HAND_WRITTEN = "## What differs, and why\n\nTo be written after reading the tables above.\n"


def write_page(page: Path, section: PaperSection, sources: list[Path], comparison: Optional[Comparison] = None,
               figures: Optional[list[Path]] = None, tables: Optional[list[Path]] = None, evidence: Optional[Path] = None,
               beside: Optional[list[BesideFigure]] = None) -> Path:
    """Writes (or updates the generated part of) `page`. `figures` (PNG), `tables` (CSV), the
    `evidence` archive and the paper-beside-ours figures (`beside`) are files already written
    beside it, linked relative to the page."""
    generated = generated_part(section, sources, comparison, [f.relative_to(page.parent) for f in figures or []],
                               [f.relative_to(page.parent) for f in tables or []], _beside(page, section, beside or []))
    if evidence is not None:
        generated = _evidence(page, section, evidence, runs=comparison is not None) + "\n\n" + generated
    existing = page.read_text(encoding="utf-8") if page.exists() else None
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(merge(existing, generated, f"Seed {section.seed}: {section.title}"), encoding="utf-8")
    return page


def merge(existing: Optional[str], generated: str, title: str) -> str:
    """The page with its generated part replaced; a new page gets a heading and a section to
    write by hand after the generated part."""
    block = f"{START}\n\n{generated.strip()}\n\n{END}"
    if existing and START in existing and END in existing:
        head, _, rest = existing.partition(START)
        _, _, tail = rest.partition(END)
        return head + block + tail
    return f"# {title}\n\n{block}\n\n{HAND_WRITTEN}"


def generated_part(section: PaperSection, sources: list[Path], comparison: Optional[Comparison], figures: list[Path],
                   tables: Optional[list[Path]] = None, beside: str = "") -> str:
    parts = [_how_made(sources, comparison, section), flag_section(section.flags), _figure_table(section), _not_measured(section), _claims(section), _regimes(section),
             _capacity_table(section)]
    if tables:
        parts.append("Tables as CSV: " + ", ".join(f"[{f.name}]({f.as_posix()})" for f in tables) + ".")
    parts.append(beside)
    if comparison is not None:
        parts.append(_our_figures(comparison))
    if figures:
        parts.append("### Figures\n\n" + "\n\n".join(f"![{f.stem}]({f.as_posix()})" for f in figures))
    return "\n\n".join(part for part in parts if part)


def _how_made(sources: list[Path], comparison: Optional[Comparison], section: PaperSection) -> str:
    lines = ["### How this was made", ""]
    commands = [entry for source in sources for entry in _invocations(source)]
    if commands:
        lines += ["Made by (each command with its UTC start):", "", "```"]
        lines += [f"{entry['command']}    # {entry.get('at', '')}" + (f", a suite of {entry['runs']} runs" if "runs" in entry else "")
                  + (f", {entry['kept']} of them finished earlier and kept" if entry.get("kept") else "")
                  + (f"; {entry['note']}" if entry.get("note") else "") for entry in commands]
        lines += ["```", ""]
    if comparison is not None:
        runs = [run for scenario in comparison.scenarios for group in scenario.groups.values() for run in group.runs]
        hosts = {json.dumps(run.results.manifest.get("host") or {}, sort_keys=True) for run in runs}
        for host in sorted(hosts):
            lines.append(f"Host: {_host_text(json.loads(host))}.")
        versions: dict[str, set[str]] = {}  # broker -> versions seen
        for scenario in comparison.scenarios:
            for broker, group in scenario.groups.items():
                versions.setdefault(broker, set()).update(group.versions)
        brokers = ", ".join(f"{name} {'/'.join(sorted(v)) or '(version unknown)'}" for name, v in versions.items())
        lines.append(f"{len(runs)} runs over {len(comparison.scenarios)} configurations; brokers: {brokers}.")
        lines += _provenance([run.results.manifest for run in runs], section.searches)
        limited = sorted({run.scenario for run in runs if run.generator_limited})
        if limited:
            count = sum(run.generator_limited for run in runs)
            lines.append(f"**{count} of {len(runs)} runs {'is' if count == 1 else 'are'} generator-limited by the flag the "
                         "verdicts use** (the current rule's, read again below; this host could not hold their schedule, so their figures bound the host as much as the broker): "
                         + ", ".join(limited) + ".")
        lines += [f"Note: {note}" for note in comparison.notes]
        lines += [f"Left out: {_relative(path, sources)} ({reason})" for path, reason in comparison.excluded]
    elif section.configuration:  # seed 000's pipeline run
        lines.append(f"Engine commit (as the run's paper.json recorded it): {_short(section.engine_commit or NOT_RECORDED)}.")
    return "\n".join(lines).rstrip()


def _provenance(manifests: list[dict[str, Any]], searches: list[CapacitySearch]) -> list[str]:
    """Which engine measured the runs and the searches' probes (its commit), and what each launched
    broker was built from (a pinned upstream tree's commits), as their manifests recorded it."""
    counts = Counter(str(manifest.get("engine_commit") or NOT_RECORDED) for manifest in manifests)
    probed = {commit for search in searches for commit in search.provenance.get("engine_commits") or [NOT_RECORDED]}
    engines = []
    for commit in sorted(set(counts) | probed):
        measured = ([f"{counts[commit]} runs"] if counts[commit] else []) + (["capacity probes"] if commit in probed else [])
        engines.append(f"{_short(commit)} ({', '.join(measured)})")
    builds = provenance(manifests)["builds"]
    builds += [build for search in searches for build in search.provenance.get("builds") or [] if build not in builds]
    unrecorded = NOT_RECORDED in counts or NOT_RECORDED in probed
    said = f"; {NOT_RECORDED}: made before manifests said" if unrecorded else ""
    lines = [f"Engine commit (as each run's manifest recorded it{said}): {'; '.join(engines)}."]
    built = [f"{build.get('source')} at {', '.join(commit if path == '.' else f'{path} {commit}' for path, commit in (build.get('commits') or {}).items())}"
             for build in builds if build.get("commits")]
    if built:
        lines.append("Built from pinned upstream trees: " + "; ".join(dict.fromkeys(built)) + ".")
    return lines


def _short(commit: str) -> str:
    """A commit id as git abbreviates it, keeping a `+modified` mark."""
    head, plus, mark = commit.partition("+")
    return head[:12] + plus + mark if len(head) == 40 else commit


def _evidence(page: Path, section: PaperSection, evidence: Path, runs: bool = True) -> str:
    """Where the page's evidence is and the command that makes the page again from it; `runs`:
    it holds results directories of runs, else seed 000's `smc paper` directories."""
    from mqttlab.reproductions.paper_file import BUILTIN_DIR

    link = evidence.relative_to(page.parent).as_posix()
    paper = Path(section.source)
    name = paper.name.removesuffix(".paper.yaml") if paper.parent == BUILTIN_DIR else _source(section.source)
    size = evidence.stat().st_size
    return "\n".join([
        "### Evidence", "",
        f"The results this page was made from, in compact form: [{link}]({link}) ({size / 1024:,.0f} KB; "
        + ("each run's manifest, scenario, summary, per-second series and pooled latency histogram" if runs else
           "of each `mqttlab smc paper` directory its paper.json (settings, broker configuration, step times), its tables "
           "as CSV (Table 2, Tables 3/4, predictions, host CPU) and the learned coefficients; not the explore logs")
        + "). The page is made again from it, without running anything, by (in this page's directory):", "",
        "```", f"mqttlab compare {link} --paper {name} --page {page.name}", "```",
    ])


def _invocations(source: Path) -> list[dict[str, Any]]:
    try:
        entries = json.loads((source / INVOCATIONS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [entry for entry in entries if isinstance(entry, dict) and entry.get("command")]


def _relative(path: Path, sources: list[Path]) -> str:
    """A run's path from the directory given to compare (never this machine's scratch directory)."""
    for source in sources:
        if Path(path).is_relative_to(source):
            return Path(path).relative_to(source).as_posix()
    return str(path)


def _host_text(host: dict[str, Any]) -> str:
    memory = host.get("memory_bytes")
    parts = [host.get("cpu_model") or "CPU unknown", f"{host.get('cores', '?')} cores",
             f"{memory / 2**30:.0f} GiB" if memory else None, f"Linux {host['kernel']}" if host.get("kernel") else None]
    return ", ".join(part for part in parts if part)


def _figure_table(section: PaperSection) -> str:
    coverage = section.coverage()
    plots = sum(row.status == NO_PAPER_NUMBER and row.ours is not None for row in section.rows)
    shown = (*MEASURED, NO_PAPER_NUMBER) if plots <= MAX_PLOT_ROWS else MEASURED
    lines = ["### The paper's figures beside ours", "",
             f"Seed {section.seed}, *{section.title}* ({_source(section.source)}): {coverage['figures']} figures: "
             f"{coverage['measured']} measured here, "
             + (f"{coverage['limited']} from generator-limited runs only, " if coverage["limited"] else "")
             + (f"{coverage['not_run']} of configurations these results did not run, " if coverage["not_run"] else "")
             + f"{coverage['not_here']} not reproducible here. Exact figures must be "
             "equal (⚑ when not); a measured one is judged by exactly the rule beside it (the paper's range, or a tolerance "
             "factor written in the paper file), with its uncertainty: with two or more runs the confidence interval of the mean "
             "(Student's t, clipped at 0 for figures that cannot be negative, and a loss share at 100 %) must lie wholly inside (across an edge: "
             "cannot tell); a share of clients has its binomial (Clopper–Pearson) interval, a regression estimate its standard "
             "error; one run, or a best of n runs, has no interval of runs and says so (a share of messages, such as a loss, "
             "keeps its binomial interval over the messages). Each figure of ours says what it is of its runs "
             "(mean, best, one run, a range over groups). Where ours disagrees, the status says whether it is lower or higher "
             "than the paper's: a different magnitude here, not by itself a contradiction. Runs flagged generator-limited "
             "are left out of every verdict on a measured figure; an exact figure (a packet's bytes, an SPRT's arithmetic) keeps "
             "them, as it does not depend on whether the generator kept its schedule."
             + (f" The paper's plots without numbers ({plots} points) are left out of this table: ours are under "
                "\"Our figures\" and in the PNGs." if plots > MAX_PLOT_ROWS else ""), ""]
    for row in section.flagged:
        lines.append(f"- ⚑ **{_cell(row.figure)}**: {_cell(row.reason)}")
    if section.flagged:
        lines.append("")
    # A measured figure the protocol also gives (seed 002's bytes) has that computed one beside it, as "expected".
    expected = any(row.expected is not None for row in section.rows)
    lines += ["| figure | where | paper | ours | " + ("expected (computed) | " if expected else "") + "ours/paper | status | rule |",
              "|---|---|---|---|---|---|---|" + ("---|" if expected else "")]
    # Rows equal but for their configuration (an exact figure, the same in every run) become one.
    same: dict[tuple, list[Any]] = {}
    for row in section.rows:
        if row.status in shown and row.ours is not None:
            key = (row.figure, value_text(row.paper), value_text(row.ours), value_text(row.expected), row.status, row.flagged, row.broker,
                   row.uncertainty, row.rule)
            same.setdefault(key, []).append(row)
    if not same:
        return "\n".join(lines[:-2] + ["No figure measured here has a number in the paper to set ours beside: ours are under \"Our figures\" "
                                       "and in the PNGs, and the claims below judge them."])
    for rows in same.values():
        row = rows[0]
        # Up to three configurations are named (a count hides which they are), more are counted.
        names = [r.scenario for r in rows if r.scenario]
        scenario = (row.scenario if len(rows) == 1 else f"{len(rows)} configurations" if len(rows) > 3 or len(names) < len(rows)
                    else ", ".join(names[:-1]) + f" and {names[-1]}")
        where = ", ".join(part for part in (scenario, row.broker) if part)
        ratio = f"{row.ratio:.3g}" if row.ratio is not None else ""
        status = ("⚑ " if row.flagged else "") + row.status + (f" ({row.side})" if row.side else "")
        ours = _value(row.ours, row.unit) + (f" ({row.uncertainty})" if row.uncertainty else "")
        computed = f"{_cell(_value(row.expected, row.unit)) if row.expected is not None else ''} | " if expected else ""
        paper = _value(row.paper, row.unit) + (f" ({', '.join(row.derived_keys) + ' ' if row.derived_keys else ''}derived, not printed)" if row.derived else "")
        lines.append(f"| {_cell(row.figure)} | {_cell(where)} | {_cell(paper)} | "
                     f"{_cell(ours)} | {computed}{ratio} | {status} | {_cell(row.rule)} |")
    derived: dict[str, list[str]] = {}  # how -> the figures derived so (one line for rows read alike)
    for rows in same.values():
        for row in rows:
            if row.derived and row.figure not in derived.setdefault(row.derived, []):
                derived[row.derived].append(row.figure)
    if derived:
        lines += ["", "Figures in the paper's column that the paper does not print, with how they follow from what it prints:", ""]
        lines += [f"- **{_cell(', '.join(figures))}**: {_cell(how)}" for how, figures in derived.items()]
    return "\n".join(lines)


def _source(source: str) -> str:
    """A built-in paper file by its place in the repository, not this machine's path."""
    from mqttlab.reproductions.paper_file import BUILTIN_DIR

    path = Path(source)
    return f"{BUILTIN_DIR.name}/{path.name}" if path.parent == BUILTIN_DIR else source


def _not_measured(section: PaperSection) -> str:
    """The figures with nothing of ours beside them, grouped by why (most are the paper's
    background, related work or facts about its testbed)."""
    by_reason: dict[str, list[str]] = {}
    seen: set[str] = set()
    shown = {row.figure for row in section.rows if row.status in MEASURED or (row.status == NO_PAPER_NUMBER and row.ours is not None)}
    for row in section.rows:
        if row.status in MEASURED or (row.status == NO_PAPER_NUMBER and row.ours is not None) or row.figure in seen:
            continue
        # A figure measured in some configurations is named here only by those it lacks.
        name = f"{row.figure} ({row.scenario})" if row.figure in shown and row.scenario else row.figure
        if row.figure not in shown:
            seen.add(row.figure)
        elif name in seen:
            continue
        seen.add(name)
        why = (row.reason or row.source or row.status) if row.status == NOT_HERE else (row.reason or row.status)
        by_reason.setdefault(why, []).append(name)
    if not by_reason:
        return ""
    lines = ["### Figures without a measurement here", "", "| why | figures |", "|---|---|"]
    lines += [f"| {_cell(why)} | {_cell(', '.join(figures))} |" for why, figures in by_reason.items()]
    return "\n".join(lines)


def _claims(section: PaperSection) -> str:
    if not section.claims:
        return ""
    lines = ["### The paper's claims", "", COMBINATION, "",
             "| claim | the paper says | verdict here | rule (in full below) | the numbers it rests on |", "|---|---|---|---|---|"]
    for claim in section.claims:
        evidence = claim.evidence[:EVIDENCE_SHOWN] + ([f"… {len(claim.evidence) - EVIDENCE_SHOWN} more in paper_claims.csv"]
                                                      if len(claim.evidence) > EVIDENCE_SHOWN else [])
        lines.append(f"| {_cell(claim.claim)} | {_cell(claim.text)} | {claim.verdict} | {_cell(claim.rule)} | {_cell('; '.join(evidence))} |")
    judged = [claim for claim in section.claims if claim.conditions]
    if judged:
        lines += ["", "The rules in full, each condition with its outcome:", ""]
        lines += [f"- **{_cell(claim.claim)}** ({claim.verdict}): " + "; and ".join(f"{_cell(text)} [{outcome}]" for text, outcome, _ in claim.conditions)
                  + _runs_to_decide(claim) for claim in judged]
        if any(claim.runs_to_decide for claim in judged):
            lines += ["", RUNS_TO_DECIDE]
    return "\n".join(lines)


# What the "runs to decide" of a claim that cannot tell is, printed under the rules in full.
RUNS_TO_DECIDE = ("*Runs to decide* (after a condition that cannot tell): computed, not measured. The same rule on the same "
                  "numbers, were each configuration's mean and standard deviation over its runs what they are here and only "
                  "its t interval (and the Welch intervals between configurations) narrower with more runs: the fewest runs a "
                  f"configuration, of {', '.join(map(str, RUN_LADDER[:-1]))} and {RUN_LADDER[-1]} (one that has more keeps its own), at which it "
                  "would decide, and which way. "
                  "More runs move the means too, so it says how far a verdict is from being decided, not what it would be. "
                  "Rows whose intervals do not come from their runs (a capacity's bracket, a share of clients, a best of n) are "
                  "left as they are; a condition that reads only those, or that compares rows with the paper's, is not projected.")


def _runs_to_decide(claim: ClaimVerdict) -> str:
    found = [(index, text) for index, text in enumerate(claim.runs_to_decide, 1) if text]
    if not found:
        return ""
    several = len(claim.conditions) > 1
    return " — runs to decide: " + "; ".join(f"{f'condition {index}: ' if several else ''}{_cell(text)}" for index, text in found)


def _regimes(section: PaperSection) -> str:
    """For each claim, the regime its numbers come from and the broker configuration they were
    measured in, read from the rows its rule reads: at capacity (a capped broker's searches), at
    an offered load (a suite's runs), or in seed 000's pipeline."""
    by_figure: dict[str, list[FigureRow]] = {}
    for row in section.rows:
        if row.ours is not None:
            by_figure.setdefault(row.figure, []).append(row)
    # a claim's numbers come from the rows its judged conditions read (verdicts.judge_claim: never a
    # generator-limited one, none of a condition they leave unjudged, none for a claim without a rule)
    judged_on = {claim.claim: [row for name in claim.figures for row in by_figure.get(name, [])
                               if (row.figure, row.scenario, row.broker) in claim.judged_rows]
                 for claim in section.claims}
    lines = ["### Regime and broker configuration of each verdict", ""]
    if section.configuration:  # seed 000: one pipeline run per page
        lines += [f"Every verdict of this page is judged on one `mqttlab smc paper` run (explore, learn, predict, verify "
                  f"on Mosquitto {_configuration_words(section.configuration)}), each at the load the paper's step sets; "
                  "a claim about broker settings compares it with the run in the other configuration"
                  + (f" ({_configuration_words(section.reference.configuration)})" if section.reference is not None and section.reference.configuration else "")
                  + ". The tables each verdict reads:", "", "| claim | verdict | read from |", "|---|---|---|"]
        for claim in section.claims:
            tables = sorted({": ".join(row.source.split(": ")[:2]) for row in judged_on[claim.claim] if row.source})  # the table, not its figures
            lines.append(f"| {_cell(claim.claim)} | {claim.verdict} | {_cell('; '.join(tables) or '–')} |")
        return "\n".join(lines)
    labels = ("The broker's configuration is in its label (as-shipped: as its package ships it; no mode named: mqttlab's "
              "tuned settings; a CPU or memory figure: the broker's cgroup limit).")
    if not section.searches:
        lines += ["Every verdict of this page is judged at an offered load: the suite's runs, each holding its schedule "
                  "(open loop; its delivered rate is what was offered unless the broker falls behind) or sending each message "
                  "when the one before completes (closed loop: the broker's own pace sets the rate), under the network condition "
                  "its suite sets for that configuration; no claim is judged at a broker's capacity. Only the figures a verdict could use "
                  "are named (generator-limited runs judge nothing, nor do the other runs of a condition they leave unjudged). " + labels, "",
                  "| claim | verdict | at the offered load |", "|---|---|---|"]
        lines += [f"| {_cell(claim.claim)} | {claim.verdict} | {_configurations(judged_on[claim.claim])} |" for claim in section.claims]
        return "\n".join(lines)
    lines += ["At capacity: the broker's capacity from `mqttlab capacity` searches (below), the broker capped so that it "
              "saturates while the generator stays inside its limits; at the offered load: the suite's runs, whose "
              "delivered rate is what was offered unless the broker falls behind. Only the figures a verdict could use are "
              "named (generator-limited runs judge nothing, nor do the other runs of a condition they leave unjudged). " + labels, "",
              "| claim | verdict | at capacity | at the offered load |", "|---|---|---|---|"]
    for claim in section.claims:
        rows = judged_on[claim.claim]
        at_capacity = _configurations([row for row in rows if row.interval_kind == BRACKET])
        offered = _configurations([row for row in rows if row.interval_kind != BRACKET])
        lines.append(f"| {_cell(claim.claim)} | {claim.verdict} | {at_capacity} | {offered} |")
    return "\n".join(lines)


def _configurations(rows: list[FigureRow]) -> str:
    """A table cell: the configurations of `rows`, each with the brokers (as labelled) it ran on."""
    where = sorted({f"{row.scenario}: {broker}" for row in rows for broker in _labels(row.broker)})
    return _cell("; ".join(_grouped(where)) or "–")


def _configuration_words(configuration: str) -> str:
    return {"as-shipped": "as shipped", "tuned": "with mqttlab's tuned settings"}.get(configuration, configuration)


def _labels(brokers: Optional[str]) -> list[str]:
    """The broker labels of a row: one, or a range row's several joined by ", " (a label's own
    details, in parentheses, hold commas too)."""
    return [part.strip() for part in re.findall(r"[^,(]+(?:\([^)]*\))?", brokers or "") if part.strip()]


def _grouped(where: list[str]) -> list[str]:
    """`configuration: broker` pairs as one entry per configuration, its brokers listed."""
    brokers: dict[str, list[str]] = {}
    for entry in where:
        configuration, _, broker = entry.partition(": ")
        brokers.setdefault(configuration, []).append(broker)
    return [f"{configuration} ({', '.join(names)})" for configuration, names in brokers.items()]


def _capacity_table(section: PaperSection) -> str:
    """The capacity searches the claims at capacity read, one row per search."""
    if not section.searches:
        return ""
    lines = ["### The capacity searches", "",
             "Each search probes offered rates (a fresh broker per probe) and reports the highest rate at which every "
             "repeated probe met the objectives, with its bracket: the knee lies between the capacity and the lowest "
             "rate above it at which a probe broke them (docs/capacity.md); the bracket is the search's, not a "
             "confidence interval. Probes the generator limited judge nothing; their flag is the one the search recorded (the "
             "evidence keeps no probe's plan and raw result, so the current rule cannot read them again). The host's busy "
             "cores (every process's, mean and highest over the probes) say how much else ran beside a capped broker.", "",
             "| search | broker | QoS | objectives | capacity msg/s | bracket | limited by | probes (generator-limited) | "
             "host's busy cores | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in section.searches:
        bracket = f"[{_number(s.bracket[0])}, {_number(s.bracket[1])}]" if s.status == "bracketed" else "–"
        lines.append(f"| {_cell(s.name)} | {_cell(s.broker)} | {'' if s.qos is None else s.qos} | {_cell(s.objectives)} | "
                     f"{_number(s.lower) if s.lower is not None else '–'} | {bracket} | {_cell(s.limited_by) or '–'} | "
                     f"{s.probes} ({s.generator_limited_probes}) | "
                     f"{f'{s.host_busy[0]:.2f} (max {s.host_busy[1]:.2f})' if s.host_busy else 'not recorded'} | "
                     f"{_cell(s.headline if s.status != 'bracketed' else s.status)} |")
    return "\n".join(lines)


def _beside(page: Path, section: PaperSection, figures: list[BesideFigure]) -> str:
    """Under each claim with ours measured, its figure with the paper drawn over ours and a
    caption of one line; the claims without one named."""
    if not figures:
        return ""
    lines = ["### The paper beside us", "",
             "For each claim, the paper's figures it rests on drawn over ours, one line per figure and configuration, one "
             "panel per unit (the paper's), and one figure per engine configuration.", ""]
    for figure in figures:
        if figure.same_as:
            if figure.path == next(f.path for f in figures if f.claim == figure.claim):  # once per claim, not per part
                lines += [f"**{figure.claim}** ({figure.verdict}): drawn on the same lines as {figure.same_as}, above.", ""]
            continue
        link = figure.path.relative_to(page.parent).as_posix()
        lines += [f"**{figure.claim}** ({figure.verdict})", "", f"![{figure.claim}: the paper beside us]({link})", "",
                  f"*{figure.caption[0].upper()}{figure.caption[1:]}*", ""]
    drawn = {figure.claim for figure in figures}
    without = [claim.claim for claim in section.claims if claim.claim not in drawn]
    if without:
        lines.append("No figure for " + ", ".join(without) + ": nothing of ours is measured for them here.")
    return "\n".join(lines).rstrip()


def _our_figures(comparison: Comparison) -> str:
    from mqttlab.analysis.compare import leave_out_generator_limited
    from mqttlab.reports.tables import summary_table, violations_text

    keys: tuple[tuple[str, str], ...] = (("throughput", "msg/s"), ("latency_mean", "mean ms"), ("latency_p50", "p50 ms"), ("latency_p99", "p99 ms"),
            ("loss", "loss %"), ("dropped", "dropped %"), ("broker_cpu", "broker CPU"), ("broker_rss_peak", "broker peak RSS MB"))
    round_trips = any(metric.key == "round_trips_lost" for metric in comparison.metrics)
    if round_trips:  # loss is one way; the round trip's own beside it
        keys = keys[:5] + (("round_trips_lost", "round trips lost %"),) + keys[5:]
    # Generator-limited runs are left out of the means, as of every verdict; a configuration with
    # nothing else is shown from them, marked.
    groups = [group for scenario in comparison.scenarios for group in scenario.groups.values()]
    left_out = {(g.scenario, g.broker): g.generator_limited_runs for g in groups if g.generator_limited_runs < len(g.runs)}
    shown = leave_out_generator_limited(comparison)
    # Where some runs measured the round trip and others could not (an echo never came back), the
    # latter's latency is one way: said per configuration, so its cells are not read as round trips.
    one_way = [f"{g.scenario} ({g.broker})" for g in groups
               if any(run.latency_measure == "rtt" for other in groups for run in other.runs)
               and g.runs and all(run.latency_measure not in (None, "rtt") for run in g.runs)]
    lines = ["### Our figures", "",
             f"Means over the repetitions, ± the {comparison.confidence:.0%} confidence interval's half-width where there "
             "are two or more. Latency is the round trip where the suite measures round trips, else end to end. "
             + ("Loss is one way (messages the subscriber did not get); round trips lost counts the messages whose echo "
                "never came back to the publisher, lost either way, of all sent, warm-up included. " if round_trips else "") +
             "msg/s counts the deliveries from the end of warm-up to the end of the run's grace over the measured "
             "seconds, so a run whose deliveries trail its load can show more than it offered; – under half a second. " +
             "Runs flagged generator-limited are left out (counted with ⚑); a configuration with no other run is shown "
             "from them, marked ⚑ all, and judges nothing."
             + (" No round trip was recorded (no echo came back in time), so latency is end to end, one way, in: "
                + ", ".join(one_way) + "." if one_way else ""), "",
             "| configuration | broker | runs | " + " | ".join(title for _, title in keys) + " |",
             "|---|---|---|" + "---|" * len(keys)]
    for row in summary_table(shown, keys=tuple(key for key, _ in keys)):
        cells = [_estimate(row, key) for key, _ in keys]
        flagged = left_out.get((row["scenario"], row["broker"]))
        runs = f"{row['runs']} (+{flagged} ⚑ left out)" if flagged else (f"{row['runs']} ⚑ all" if row["generator_limited_runs"] else str(row["runs"]))
        lines.append(f"| {_cell(row['scenario'])} | {row['broker']} | {runs} | " + " | ".join(cells) + " |")
    # The promises a broker broke are facts of its runs whatever the generator did: every run counts.
    broken = [f"{g.scenario}, {g.broker}: {violations_text(g.violations, len(g.runs))}" for g in groups if g.violations]
    lines += ["", ("Promises of the protocol the brokers broke, counted in every run (generator-limited ones included; each "
                   "run's summary.json `violations`, by kind, with the runs that broke it): " + "; ".join(broken) + ".")
              if broken else "No run counted a broken promise of the protocol (each run's summary.json `violations`)."]
    return "\n".join(lines)


def _estimate(row: dict[str, Any], key: str) -> str:
    mean, low, high = row.get(f"{key}_mean"), row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    if mean is None:
        return "–"
    if low is None or high is None:
        return _number(mean)
    return f"{_number(mean)} ± {_number((high - low) / 2)}"


def _number(value: float) -> str:
    """Three significant digits without exponents for what a run measures (20,000 msg/s, 0.16 ms)."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _value(value: Any, unit: Optional[str]) -> str:
    text = value_text(value)
    return f"{text} {unit}" if text and unit and isinstance(value, (int, float)) else text


def _cell(text: Any) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")
