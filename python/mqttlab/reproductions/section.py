"""The paper vs this run: each figure of a seed's paper file beside ours (paper_figures) and a
verdict on each claim (verdicts), for a comparison of a suite's runs or seed 000's `smc paper`
directory; and which seed's paper applies to a results directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Union

from mqttlab.analysis.compare import Comparison
from mqttlab.reproductions.capacity_searches import CapacitySearch
from mqttlab.reproductions.flags import FlagReading, judge_by_current_rule
from mqttlab.reproductions.paper_figures import LIMITED, MEASURED, NO_PAPER_NUMBER, NOT_HERE, FigureRow, SmcPaperResults, figure_rows
from mqttlab.reproductions.paper_file import PaperFile, load_paper, paper_path
from mqttlab.reproductions.verdicts import ClaimVerdict, Reference, judge_claim


@dataclass
class PaperSection:
    seed: str
    title: str
    source: str  # the paper file
    rows: list[FigureRow]
    claims: list[ClaimVerdict]
    configuration: str = ""  # the broker configuration of seed 000's run ("as-shipped", "tuned")
    reference: Optional["PaperSection"] = None  # a second run in another configuration, for `unchanged` checks
    searches: list[CapacitySearch] = field(default_factory=list)  # the capacity searches its `capacity:` figures read
    flags: list[FlagReading] = field(default_factory=list)  # each run's generator-limited flag, as recorded and as judged
    engine_commit: str = ""  # seed 000's run: the engine's commit its paper.json recorded

    @property
    def flagged(self) -> list[FigureRow]:
        return [row for row in self.rows if row.flagged]

    def coverage(self) -> dict[str, int]:
        figures = {row.figure: row for row in self.rows}
        measured = {r.figure for r in self.rows if r.status in MEASURED or (r.status == NO_PAPER_NUMBER and r.ours is not None)}
        not_here = {r.figure for r in figures.values() if r.status == NOT_HERE}
        limited = {r.figure for r in self.rows if r.status == LIMITED} - measured
        return {"figures": len(figures), "not_here": len(not_here), "measured": len(measured), "limited": len(limited),
                "not_run": len(figures) - len(measured) - len(not_here) - len(limited)}

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "title": self.title, "source": self.source, "coverage": self.coverage(),
                "figures": [row.to_dict() for row in self.rows], "claims": [claim.to_dict() for claim in self.claims]}



def paper_name_for(paths: Iterable[Path]) -> Optional[str]:
    """The built-in paper of the suite the results come from: the suite directory's suite.yaml
    names it (`name: seed003`); None when no path is a suite directory of a seed."""
    import yaml

    for path in paths:
        for candidate in (Path(path), *Path(path).parents[:4]):  # a run lies at <suite>/runs/<scenario>/<broker>/rep-N
            copy = candidate / "suite.yaml"
            if not copy.is_file():
                continue
            try:
                name = (yaml.safe_load(copy.read_text(encoding="utf-8")) or {}).get("name")
            except (OSError, ValueError):
                continue
            if name:
                try:
                    paper_path(str(name))
                    return str(name)
                except Exception:  # a suite without a paper file
                    return None
    return None


def attach_paper(comparison: Comparison, paths: Iterable[Path], paper: Optional[str] = None,
                 searches: Optional[list[CapacitySearch]] = None) -> Optional[PaperSection]:
    """Sets `comparison.paper` to the section of `paper`, or of the seed whose suite the results
    come from; leaves it None when neither applies. `searches`: the capacity searches given beside
    the runs. A malformed paper file raises PaperFileError. The comparison's runs are judged, from
    then on, by the generator-limited flag as the current rule reads them again (flags.py)."""
    name = paper if paper is not None else paper_name_for(paths)
    if name is None:
        return None
    flags = judge_by_current_rule(comparison)
    comparison.paper = paper_section(name, comparison, searches=searches)
    comparison.paper.flags = flags
    return comparison.paper


def paper_section(paper: Union[PaperFile, str, Path], comparison: Optional[Comparison] = None,
                  smc_directory: Optional[Path] = None, reference: Optional[PaperSection] = None,
                  searches: Optional[list[CapacitySearch]] = None) -> PaperSection:
    """Every figure of the paper beside ours from `comparison` (a suite's runs) and/or a seed-000
    `smc paper` directory, and a verdict per claim; `reference`: the section of a second run in
    another configuration, which the claims' `unchanged` checks compare ours with."""
    source = str(paper_path(paper)) if not isinstance(paper, PaperFile) else (paper.source or "")
    if not isinstance(paper, PaperFile):
        paper = load_paper(paper)
    smc = SmcPaperResults(Path(smc_directory)) if smc_directory is not None else None
    rows: list[FigureRow] = []
    for figure in paper.figures:
        rows += figure_rows(figure, comparison, smc, searches)
    by_figure: dict[str, list[FigureRow]] = {}
    for row in rows:
        by_figure.setdefault(row.figure, []).append(row)
    configuration = smc.configuration if smc is not None else ""
    other = None
    if reference is not None:
        theirs: dict[str, list[FigureRow]] = {}
        for row in reference.rows:
            theirs.setdefault(row.figure, []).append(row)
        other = Reference(theirs, reference.configuration or "the other run", configuration or "this run")
    claims = [judge_claim(claim, by_figure, other) for claim in paper.claims]
    return PaperSection(paper.seed, paper.title, source, rows, claims, configuration, reference, list(searches or []),
                        engine_commit=smc.engine_commit if smc is not None else "")
