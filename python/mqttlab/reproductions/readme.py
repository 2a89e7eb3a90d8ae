"""The README's verdict lines, generated from the reproduction pages' verdict tables
(docs/reproductions/<page>/paper_claims.csv), so that no hand-written line can state a verdict
the pages do not compute. The block sits between two markers in README.md; `--check` fails
(exit 1) when it differs from what the tables give.

Usage: python -m mqttlab.reproductions.readme [--check] [README.md] [docs/reproductions]"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Optional

from mqttlab.reproductions.paper_figures import CANNOT_TELL
from mqttlab.reproductions.paper_section import CLAIMS_CSV
from mqttlab.reproductions.verdicts import DOES_NOT_HOLD, HOLDS, MAGNITUDE

START = "<!-- verdicts: made by `python -m mqttlab.reproductions.readme` from docs/reproductions/*/paper_claims.csv; not edited by hand -->"
END = "<!-- end of the verdicts -->"
ORDER = (HOLDS, DOES_NOT_HOLD, MAGNITUDE, CANNOT_TELL)  # then every other verdict (not judged, not measured here, ...)


def verdicts(pages: Path) -> dict[str, dict[str, list[str]]]:
    """Page name -> verdict -> claim ids, for every page with a verdict table."""
    found: dict[str, dict[str, list[str]]] = {}
    for table in sorted(pages.glob(f"*/{CLAIMS_CSV}.csv")):
        with table.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        by_verdict: dict[str, list[str]] = {}
        for row in rows:
            by_verdict.setdefault(row["verdict"], []).append(row["claim"])
        found[table.parent.name] = by_verdict
    return found


def block(pages: Path, readme_dir: Path) -> str:
    lines = [START, "", "| page | " + " | ".join(ORDER) + " | not judged here |", "|---|" + "---|" * (len(ORDER) + 1)]
    for name, by_verdict in verdicts(pages).items():
        link = (pages / f"{name}.md").relative_to(readme_dir).as_posix() if (pages / f"{name}.md").is_file() else None
        cells = [_claims(by_verdict.get(v, [])) for v in ORDER]
        rest = {v: ids for v, ids in by_verdict.items() if v not in ORDER}
        cells.append("; ".join(f"{v}: {_claims(ids)}" for v, ids in rest.items()) or "–")
        title = f"[{name}]({link})" if link else name
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", END])


def _claims(ids: list[str]) -> str:
    return f"{len(ids)}: " + ", ".join(f"`{i}`" for i in ids) if ids else "–"


def merged(readme: str, generated: str) -> Optional[str]:
    """The README with its block replaced; None when it has no markers."""
    if START not in readme or END not in readme:
        return None
    head, _, rest = readme.partition(START)
    _, _, tail = rest.partition(END)
    return head + generated + tail


def update_for_page(page: Path) -> Optional[Path]:
    """After a page of <repo>/docs/reproductions/ is written: that repository's README block made
    again from the pages (None when the page lives elsewhere or the README has no block)."""
    pages = page.resolve().parent
    readme = pages.parent.parent / "README.md"
    if pages.name != "reproductions" or pages.parent.name != "docs" or not readme.is_file():
        return None
    text = readme.read_text(encoding="utf-8")
    new = merged(text, block(pages, readme.parent))
    if new is None:
        return None
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return readme


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"]
    readme = paths[0] if paths else Path("README.md")
    pages = paths[1] if len(paths) > 1 else readme.parent / "docs" / "reproductions"
    text = readme.read_text(encoding="utf-8")
    new = merged(text, block(pages, readme.parent))
    if new is None:
        print(f"error: {readme} has no verdict block: put the two lines\n{START}\n{END}\nwhere it belongs", file=sys.stderr)
        return 2
    if check:
        if new != text:
            print(f"{readme}: the verdict block differs from {pages}/*/{CLAIMS_CSV}.csv; run python -m mqttlab.reproductions.readme",
                  file=sys.stderr)
            return 1
        return 0
    if new != text:
        readme.write_text(new, encoding="utf-8")
        print(f"{readme}: verdict block updated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
