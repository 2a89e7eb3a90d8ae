"""Figures written for people: three significant digits, never an exponent, so that 21,900 msg/s
reads as such in a table, a finding or a report (`2.19e+04` would not)."""

from __future__ import annotations


def figure_text(value: float, digits: int = 3, sign: str = "") -> str:
    """`value` to `digits` significant digits; `sign="+"` writes the sign of a difference."""
    text = f"{value:{sign}.{digits}g}"
    return f"{value:{sign},.0f}" if "e+" in text else text
