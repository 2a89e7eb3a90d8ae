"""Every verdict on every reproduction page follows from the rule printed beside it and the numbers
shown: each page's tables (paper_vs_ours.csv, paper_claims.csv, what the page prints) are read
back and every status and verdict computed again here, by this file's own reading of the printed
rule (its own binomial and normal intervals from scipy, not mqttlab's), and compared. A rule this
file cannot read is a failure too: a new kind of rule needs its reading here.

What is recomputed: each measured row's status (exact equality, a tolerance factor or the paper's
range with or without our interval, a range of ours over brokers judged on each broker's interval,
an SPRT row's share of clients with Clopper–Pearson intervals, a regression estimate with its
standard error) and the side (lower, higher, other sign) of a disagreement; each claim's verdict
from its conditions' outcomes by the combination the page prints; each condition's outcome from
its own lines of evidence (paper_claims.csv's condition_lines says which): an `agree` from the
rows' statuses, a share of rows, pairs or configurations from the counts it prints, a ratio or a
range from the bounds it prints, a ranking from each Welch interval (or value, or capacity bracket) it prints, a rise
or fall from each step of its chains; and each of those lines' own marks from its numbers."""

from __future__ import annotations

import csv
import math
import re
import shutil
from pathlib import Path
from typing import Optional

import pytest
from scipy.stats import binomtest, norm

ROOT = Path(__file__).resolve().parent.parent
# The pages of docs/reproductions/ and the two of the evidence tests (tests/data/reproduction/).
PAGES = sorted(path.parent for pages in (ROOT / "docs" / "reproductions", ROOT / "tests" / "data" / "reproduction")
               for path in pages.glob("*/paper_claims.csv"))
JUDGED = ("agrees", "disagrees", "cannot tell", "matches", "differs")
LIMITED = "not judged: generator-limited runs only"


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _float(text: str) -> float:
    return float(text.strip().replace("−", "-"))


def _pair(text: str) -> Optional[tuple[float, float]]:
    """The CSV's exact interval "low/high"; None when empty."""
    if not text:
        return None
    low, high = text.split("/")
    return float(low), float(high)


def _values(text: str) -> dict[str, str]:
    """A value with keys as the table prints it: "h0 0.9, h1 1, result 60% H1"."""
    out = {}
    for part in text.split(", "):
        key, _, value = part.partition(" ")
        out[key] = value
    return out


def _numbers(text: str) -> list[float]:
    """Ours as printed: one number, or a range "0.2897–0.547"."""
    return [_float(part) for part in text.split("–") if part]


def _region_status(low: float, high: float, region: tuple[float, float]) -> str:
    if region[0] <= low and high <= region[1]:
        return "agrees"
    if high < region[0] or low > region[1]:
        return "disagrees"
    return "cannot tell"


def _clopper_pearson(percent: float, n: int) -> tuple[float, float]:
    k = round(percent * n / 100)
    interval = binomtest(k, n).proportion_ci(0.95, method="exact")
    return 100 * interval.low, 100 * interval.high


def _paper_region(text: str) -> tuple[float, float]:
    """"[3.5, 33]", "≥ 20" or "≤ 5" as numbers."""
    if text.startswith("≥ "):
        return _float(text[2:]), math.inf
    if text.startswith("≤ "):
        return -math.inf, _float(text[2:])
    low, high = text.strip("[]").split(", ")
    return _float(low), _float(high)


def row_status(row: dict[str, str]) -> str:
    """The row's status from its printed rule and shown numbers; raises on a rule it cannot read."""
    rule, paper, ours = row["rule"], row["paper"], row["ours"]
    interval = _pair(row["interval"])
    if rule == "equal (exact)":
        return "matches" if math.isclose(_float(ours), _float(paper)) else "differs"
    if found := re.fullmatch(r"(.+) equal \(exact\)", rule):
        mine, theirs = _values(ours), _values(paper)
        same = all(math.isclose(_float(mine[key]), _float(theirs[key])) for key in found[1].split(", "))
        return "matches" if same else "differs"
    if found := re.match(r"within ×([\d.]+)(?: \(default tolerance\))? of the paper's ([-\d.e+]+)", rule):
        tolerance, value = _float(found[1]), _float(found[2])
        low, high = interval or (_numbers(ours)[0],) * 2
        return _region_status(low, high, (value / tolerance, value * tolerance))
    if found := re.match(r"in the paper's range (\[[^\]]+\]|[≥≤] [-\d.e+]+)", rule):
        low, high = interval or (_numbers(ours)[0],) * 2
        return _region_status(low, high, _paper_region(found[1]))
    if found := re.match(r"agrees when one group's interval lies wholly in the paper's (\[[^\]]+\]|[≥≤] [-\d.e+]+)", rule):
        statuses = [_region_status(*span, _paper_region(found[1])) for span in _spans(row)]
        return "agrees" if "agrees" in statuses else "disagrees" if set(statuses) == {"disagrees"} else "cannot tell"
    if found := re.match(r"agrees when every group's interval lies wholly within ×([\d.]+) of the paper's ([-\d.e+]+)", rule):
        tolerance, value = _float(found[1]), _float(found[2])
        statuses = [_region_status(*span, (value / tolerance, value * tolerance)) for span in _spans(row)]
        return "agrees" if set(statuses) == {"agrees"} else "disagrees" if "disagrees" in statuses else "cannot tell"
    if found := re.match(r"ours − the paper's share of the (\d+) clients accepting H1 within ±([\d.]+) points", rule):
        n, points = int(found[1]), _float(found[2])
        mine = _clopper_pearson(_float(_values(ours)["h1_accept_pct"]), n)
        theirs = _clopper_pearson(_float(_values(paper)["h1_accept_pct"]), n)
        return _region_status(mine[0] - theirs[1], mine[1] - theirs[0], (-points, points))
    if found := re.match(r"estimate: our (\d+)% interval \(± [\d.]+ standard errors\) within ×([\d.]+).* of the paper's ([-\d.e+]+), same sign", rule):
        z = norm.ppf(0.5 + _float(found[1]) / 200)
        tolerance, theirs = _float(found[2]), _float(found[3])
        mine = _values(ours)
        estimate, error = _float(mine["estimate"]), _float(mine["std_error"])
        low, high = sorted((theirs / tolerance, theirs * tolerance))
        return _region_status(estimate - z * error, estimate + z * error, (low, high))
    if found := re.match(r"each of (.+) within ×([\d.]+).* of the paper's \(one value each", rule):
        mine, theirs, tolerance = _values(ours), _values(paper), _float(found[2])
        ratios = [_float(mine[key]) / _float(theirs[key]) for key in found[1].split(", ")]
        return "agrees" if all(1 / tolerance <= r <= tolerance for r in ratios) else "disagrees"
    raise AssertionError(f"a rule this test cannot read: {rule!r}")


def _spans(row: dict[str, str]) -> list[tuple[float, float]]:
    """A range of ours: each group's interval (its value twice without one); the printed ends without groups."""
    spans = [_pair(span) for span in row["spans"].split()]
    return [span for span in spans if span] or [(v, v) for v in _numbers(row["ours"])]


def row_side(row: dict[str, str]) -> str:
    """Lower or higher: where ours lies against the paper's figure, when it disagrees."""
    if row["status"] != "disagrees" or row["exact"] == "True":
        return ""
    key = "h1_accept_pct" if "h1_accept_pct" in row["paper"] else "estimate" if "estimate" in row["paper"] else None
    mine = [_float(_values(row["ours"])[key])] if key else _numbers(row["ours"])
    theirs = [_float(_values(row["paper"])[key])] if key else _numbers(row["paper"])
    if key == "estimate" and mine[0] * theirs[0] < 0:
        return "other sign"
    return "ours lower" if max(mine) < min(theirs) else "ours higher" if min(mine) > max(theirs) else ""


def page_problems(folder: Path) -> list[str]:
    """Every status, side, condition and verdict of one page that its printed rule and numbers do not give."""
    problems = []
    rows = _read(folder / "paper_vs_ours.csv")
    for row in rows:
        if row["status"] not in JUDGED:
            continue
        where = f"{folder.name}: {row['figure']} ({row['scenario']}, {row['broker']})"
        status = row_status(row)
        if status != row["status"]:
            problems.append(f"{where}: printed {row['status']!r}, its rule gives {status!r}")
        if row_side(row) != row["side"]:
            problems.append(f"{where}: printed side {row['side']!r}, its numbers give {row_side(row)!r}")
    by_figure: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_figure.setdefault(row["figure"], []).append(row)
    for claim in _read(folder / "paper_claims.csv"):
        problems += [f"{folder.name}: {claim['claim']}: {problem}" for problem in claim_problems(claim, by_figure)]
    return problems


def combined(outcomes: list[str]) -> str:
    """The page's printed combination of a claim's conditions."""
    for verdict in ("does not hold", "other magnitude here", "cannot tell"):
        if verdict in outcomes:
            return verdict
    if all(o == "not measured here" for o in outcomes):
        return "not measured here"
    if all(o in ("not measured here", LIMITED) for o in outcomes):
        return LIMITED
    return "holds"


SHARE = re.compile(r"in (\d+) of (\d+) (?:rows|pairs|configurations) \((\d+)%; (\d+)% asked\)(?:, (?:wholly outside|cannot tell) in (\d+))?")
DIFFERENCE = re.compile(r"in (\d+) of (\d+) configurations, outside in (\d+) \((\d+)% asked\)")


def claim_problems(claim: dict[str, str], rows: dict[str, list[dict[str, str]]]) -> list[str]:
    """The claim's verdict from its conditions, and each condition's outcome from its own lines of
    evidence (paper_claims.csv says how many are whose) or, for `agree`, from the rows' statuses."""
    if not claim["conditions"]:
        return []
    outcomes = claim["conditions"].split(" | ")
    texts = claim["rule_in_full"].split(" | ")
    counts = [int(count) for count in claim["condition_lines"].split(" | ")]
    problems = []
    if combined(outcomes) != claim["verdict"]:
        problems.append(f"printed {claim['verdict']!r}, its conditions {outcomes} give {combined(outcomes)!r}")
    evidence = claim["evidence"].split(" | ")
    start = 0
    for text, outcome, count in zip(texts, outcomes, counts):
        lines, start = evidence[start:start + count], start + count
        expected = condition_outcome(text, lines, rows)
        if expected == "not measured here" and any(line.endswith("left out: generator-limited runs only") for line in lines):
            expected = LIMITED
        if expected != outcome:
            problems.append(f"condition {text[:60]!r}: printed {outcome!r}, recomputed {expected!r}")
    for line in evidence:
        problems += _line_problems(line)
    return problems


BEST = re.compile(r"^(.*?) ([-\d.e+]+) (ahead of|behind|above|below|cannot tell from) (.*?) ([-\d.e+]+) \((.*)\)$")


def condition_outcome(text: str, lines: list[str], rows: dict[str, list[dict[str, str]]]) -> str:
    if found := re.match(r"every measured row of (.+) agrees with the paper", text):
        named = [row for name in found[1].split(", ") for row in rows.get(name, [])]
        measured = [row for row in named if row["status"] in JUDGED]
        if not measured:
            return LIMITED if any(row["status"] == LIMITED for row in named) else "not measured here"
        bad = [row for row in measured if row["status"] in ("differs", "disagrees")]
        if bad:
            return "other magnitude here" if all(r["side"] in ("ours lower", "ours higher") for r in bad) else "does not hold"
        return "cannot tell" if any(r["status"] == "cannot tell" for r in measured) else "holds"
    if lines and lines[0].startswith("not measured"):
        return "not measured here"
    if re.search(r"in at least \d+% of|configurations paired|at least \d+% of the pairs|along .* in every configuration", text):
        return _share_outcome(lines[0], text)
    if re.fullmatch(r"(\S+) / (\S+) in .*", text) or text.startswith("every row of "):
        return _all_of([_mark(line) for line in lines if re.search(r"\((in|outside|cannot tell:) \S", line)])
    if found := re.search(r" is the (highest|lowest) of ", text):
        sign = 1.0 if found[1] == "highest" else -1.0
        return _all_of([_ranked(line, sign) for line in lines if BEST.match(line)])
    if found := re.match(r"ours (rises|falls) along ", text):
        return _all_of([_chained(line, found[1] == "rises") for line in lines if re.search(r"\) [≈<>] ", line)])
    raise AssertionError(f"a condition this test cannot read: {text!r}")


def _ranked(line: str, sign: float) -> str:
    """A ranking's line: ahead when the Welch interval of the difference lies wholly on its side
    (without one, when its value is the better), behind when wholly on the other; two capacities by
    their brackets."""
    found = BEST.match(line)
    assert found, line
    if brackets := re.fullmatch(r"brackets ([-\d.e+]+)–([-\d.e+inf]+) and ([-\d.e+]+)–([-\d.e+inf]+)", found[6]):
        # Two capacities: their searches' brackets, wholly above or below each other, or overlapping.
        low, high, their_low, their_high = (_float(brackets[i]) for i in range(1, 5))
        above, below = low > their_high, high < their_low
        # Printed as where the bracket lies; the verdict follows from which side the ranking wants.
        mark = "cannot tell from" if not (above or below) else "above" if above else "below"
        assert mark == found[3], f"{line[:80]}: printed {found[3]!r}, its brackets give {mark!r}"
        return "cannot tell" if mark == "cannot tell from" else "holds" if (above if sign > 0 else below) else "does not hold"
    elif interval := re.search(r"difference 95% CI ([-\d.e+]+)–([-\d.e+]+)", found[6]):
        low, high = sorted((sign * _float(interval[1]), sign * _float(interval[2])))
        mark = "ahead of" if low > 0 else "behind" if high < 0 else "cannot tell from"
    else:
        mark = "ahead of" if sign * (_float(found[2]) - _float(found[5])) > 0 else "behind"
    assert mark == found[3], f"{line[:80]}: printed {found[3]!r}, its numbers give {mark!r}"
    return {"ahead of": "holds", "behind": "does not hold", "cannot tell from": "cannot tell"}[mark]


def _chained(line: str, rising: bool) -> str:
    """A broker's rise or fall: every step the right way; a step the wrong way does not; spans that
    overlap cannot tell where they are intervals (a bare value's overlap does not rise)."""
    steps = re.findall(r"\) ([≈<>]) ", line)
    if ("<" if not rising else ">") in steps:
        return "does not hold"
    if "≈" in steps:
        return "cannot tell" if "[" in line else "does not hold"
    return "holds"


def _share_outcome(line: str, text: str) -> str:
    """A condition over a share: holds when the count that holds reaches the share asked, does not
    when too many fail for it ever to, else cannot tell."""
    if found := DIFFERENCE.search(line):
        agree, total, disagree, asked = (int(found[i]) for i in (1, 2, 3, 4))
    else:
        found = SHARE.search(line)
        assert found, line
        agree, total, asked = int(found[1]), int(found[2]), int(found[4])
        rest = int(found[5] or 0)
        # A trend ("rises along …") prints how many cannot tell, if any: the rest fail; the others
        # print how many fail.
        disagree = total - agree - rest if "cannot tell in" in line or " along " in line else rest
    share = asked / 100
    if agree >= share * total - 1e-9:
        return "holds"
    if disagree > (1 - share) * total + 1e-9:
        return "does not hold"
    return "cannot tell"


def _mark(line: str) -> str:
    """What a line of a ratio or range condition printed: in, outside, or cannot tell."""
    found = re.search(r"\((in|outside|cannot tell:) (?:\[[^\]]+\]|[≥≤] [-\d.e+]+)\)$", line)
    assert found, line
    return {"in": "holds", "outside": "does not hold", "cannot tell:": "cannot tell"}[found[1]]


def _line_region(line: str) -> tuple[float, float]:
    found = re.search(r"\((?:in|outside|cannot tell:) (\[[^\]]+\]|[≥≤] [-\d.e+]+)\)$", line)
    assert found, line
    return _paper_region(found[1])


def _all_of(outcomes: list[str]) -> str:
    if not outcomes:
        return "not measured here"
    return "does not hold" if "does not hold" in outcomes else "cannot tell" if "cannot tell" in outcomes else "holds"


SPAN = r"([-\d.e+]+)(?: \[([-\d.e+]+)–([-\d.e+]+)\])? \([^)]+\)"


def _chain_problems(line: str) -> list[str]:
    """A rise or fall printed as a chain, "0.34 [0.30–0.39] (a) ≈ 0.42 [0.33–0.51] (b) < 1.1 [0.73–1.5] (c)":
    each relation from the two spans it joins (≈ where they overlap)."""
    spans = [(_float(m[2] or m[1]), _float(m[3] or m[1])) for m in re.finditer(SPAN, line)]
    relations = re.findall(r"\) ([≈<>]) ", line)
    problems = []
    for (a, b), relation in zip(zip(spans, spans[1:]), relations):
        expected = "<" if a[1] < b[0] else ">" if a[0] > b[1] else "≈"
        if expected != relation:
            problems.append(f"{line[:80]}: printed {relation!r} between {a} and {b}, their spans give {expected!r}")
    return problems


def _line_problems(line: str) -> list[str]:
    """A ratio's mark from the bounds it prints, a Welch comparison's side from its interval, a chain's steps."""
    if re.search(r"\) [≈<>] [-\d.e+]+", line):
        return _chain_problems(line)
    if found := re.search(r"= ([-\d.e+]+)(?:, from the intervals ([-\d.e+]+)–([-\d.e+]+))? \((in|outside|cannot tell:) (\[[^\]]+\]|[≥≤] [-\d.e+]+)\)$", line):
        low, high = (_float(found[2]), _float(found[3])) if found[2] else (_float(found[1]),) * 2
        mark = {"agrees": "in", "disagrees": "outside", "cannot tell": "cannot tell:"}[_region_status(low, high, _paper_region(found[5]))]
        return [] if mark == found[4] else [f"{line[:80]}: printed {found[4]!r}, its bounds give {mark!r}"]
    if found := re.search(r": ours ([-\d.e+]+) (?:\((?:.*CI ([-\d.e+]+)–([-\d.e+]+))?.*)?\((in|outside|cannot tell:) (\[[^\]]+\]|[≥≤] [-\d.e+]+)\)$", line):
        low, high = (_float(found[2]), _float(found[3])) if found[2] else (_float(found[1]),) * 2
        mark = {"agrees": "in", "disagrees": "outside", "cannot tell": "cannot tell:"}[_region_status(low, high, _paper_region(found[5]))]
        return [] if mark == found[4] else [f"{line[:80]}: printed {found[4]!r}, its numbers give {mark!r}"]
    if found := re.search(r" ([-\d.e+]+) (ahead of|behind|cannot tell from) .* ([-\d.e+]+) \(difference 95% CI ([-\d.e+]+)–([-\d.e+]+),", line):
        low, high = _float(found[4]), _float(found[5])
        across = low <= 0 <= high
        if (found[2] == "cannot tell from") != across:
            return [f"{line[:80]}: printed {found[2]!r} with an interval {'across' if across else 'clear of'} zero"]
    return []


@pytest.mark.parametrize("folder", PAGES, ids=[folder.name for folder in PAGES])
def test_every_verdict_on_the_page_follows_from_its_printed_rule(folder):
    assert page_problems(folder) == []


def test_the_recomputation_finds_a_verdict_its_rule_does_not_give(tmp_path):
    pages = {folder.name: folder for folder in PAGES}
    folder = tmp_path / "seed003-tuned"  # a page with a row that agrees and a ranking of runs
    shutil.copytree(pages["seed003-tuned"], folder, ignore=shutil.ignore_patterns("*.png", "*.tar.xz", "steadiness"))
    rows = _read(folder / "paper_vs_ours.csv")
    judged = next(row for row in rows if row["status"] == "agrees")
    judged["status"] = "disagrees"  # a row the rule beside it says agrees
    _write(folder / "paper_vs_ours.csv", rows)
    claims = _read(folder / "paper_claims.csv")
    claims[0]["verdict"] = "holds" if claims[0]["verdict"] != "holds" else "cannot tell"
    ranked = next(claim for claim in claims[1:] if " is the highest of " in claim["rule_in_full"])
    outcomes = ranked["conditions"].split(" | ")
    outcomes[-1] = "holds" if outcomes[-1] != "holds" else "does not hold"  # a condition its own lines do not give
    ranked["conditions"] = " | ".join(outcomes)
    _write(folder / "paper_claims.csv", claims)
    problems = page_problems(folder)
    assert any(judged["figure"] in p and "its rule gives 'agrees'" in p for p in problems), problems
    assert any(p.startswith(f"seed003-tuned: {claims[0]['claim']}: printed") for p in problems), problems
    assert any(p.startswith(f"seed003-tuned: {ranked['claim']}: condition") for p in problems), problems


def test_a_share_of_clients_is_judged_by_its_binomial_interval_not_a_factor():
    row = {"rule": "ours − the paper's share of the 50 clients accepting H1 within ±10 points, bounded by the two 95% Clopper–Pearson intervals",
           "paper": "h1 0.88, h1_accept_pct 88", "ours": "h1 1, h1_accept_pct 100", "interval": "", "spans": ""}
    assert row_status(row) == "cannot tell"  # 88 % and 100 % of 50 clients: within ×2, but not told apart from 10 points
    row["paper"] = "h1_accept_pct 60"
    assert row_status(row) == "disagrees"


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
