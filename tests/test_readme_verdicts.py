"""The README's verdict lines are the reproduction pages' own: the generated block equals what the
pages' paper_claims.csv give, and the hand-written seed lines state no verdict of their own."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

from mqttlab.reproductions.readme import END, START, main, update_for_page

ROOT = Path(__file__).resolve().parent.parent
VERDICT_WORDS = re.compile(r"\b(holds?|does not hold|agrees?|disagrees?|reproduced|confirm(s|ed)?|contradicts?)\b", re.IGNORECASE)


def test_the_readme_verdict_block_is_what_the_pages_compute():
    assert main(["--check", str(ROOT / "README.md"), str(ROOT / "docs" / "reproductions")]) == 0


def test_the_hand_written_seed_lines_state_no_verdict():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.split(START)[0].splitlines() if re.match(r"\| \[\d{3}\]\(docs/reproductions/", line)]
    assert len(rows) >= 5
    for row in rows:
        here = row.strip("|").split(" | ")[-1]  # what ran here; the paper's findings are the column before
        assert not VERDICT_WORDS.search(here), f"a verdict in the hand-written line: {row[:60]}…: {VERDICT_WORDS.search(here)}"


def test_the_check_fails_when_a_page_verdict_changes(tmp_path):
    pages = tmp_path / "docs" / "reproductions"
    shutil.copytree(ROOT / "docs" / "reproductions" / "seed004", pages / "seed004", ignore=shutil.ignore_patterns("*.png"))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{START}\n{END}\n", encoding="utf-8")
    assert main(["--check", str(readme), str(pages)]) == 1  # an empty block
    assert main([str(readme), str(pages)]) == 0 and main(["--check", str(readme), str(pages)]) == 0
    table = pages / "seed004" / "paper_claims.csv"
    with table.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[0]["verdict"] = "cannot tell" if rows[0]["verdict"] != "cannot tell" else "holds"  # one page verdict changes
    with table.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["--check", str(readme), str(pages)]) == 1
    readme.write_text("# no block\n", encoding="utf-8")
    assert main(["--check", str(readme), str(pages)]) == 2


def test_writing_a_page_of_docs_reproductions_updates_the_readme_block(tmp_path):
    pages = tmp_path / "docs" / "reproductions"
    shutil.copytree(ROOT / "docs" / "reproductions" / "seed004", pages / "seed004", ignore=shutil.ignore_patterns("*.png", "*.tar.xz"))
    (pages / "seed004.md").write_text("# page\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{START}\n{END}\n", encoding="utf-8")
    assert update_for_page(pages / "seed004.md") == readme
    assert main(["--check", str(readme), str(pages)]) == 0 and "[seed004](docs/reproductions/seed004.md)" in readme.read_text()
    assert update_for_page(tmp_path / "elsewhere" / "seed004.md") is None
