"""Did you mean: the known name a mistyped one was meant to be, or none.

A suggestion is made only for a slip of a few keys (a letter missing, added, changed or two
swapped), so a key that names something else is not sent to a lookalike: `message_expiry` is
not `messages`, however many letters they share."""

from __future__ import annotations

import difflib
from typing import Iterable, Optional


def did_you_mean(word: str, known: Iterable[str]) -> Optional[str]:
    """The closest of `known` within a third of `word`'s length in slips (at least one), or None."""
    allowed = max(1, len(word) // 3)
    for candidate in difflib.get_close_matches(word, list(known), n=3, cutoff=0.6):
        if slips(word, candidate) <= allowed:
            return candidate
    return None


def slips(a: str, b: str) -> int:
    """Letters inserted, deleted, changed or two neighbours swapped to turn `a` into `b`
    (optimal string alignment distance)."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(rows[i - 1][j] + 1, row[j - 1] + 1, rows[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[i - 2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]
