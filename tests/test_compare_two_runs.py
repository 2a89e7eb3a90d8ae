"""`mqttlab compare` of two plain runs, no suite: no seed sections on the page, a short window's
points drawn, log axes ticked 1-2-5, and terminal figures never cut."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_runs import SMALL, invoke  # tests/ is on sys.path (no package)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("two")
    for name, broker in (("a", "rumqttd"), ("b", "mosquitto")):  # one run each: a plain comparison
        result = invoke("run", "--broker", broker, "--duration", "2s", "--out", str(root / name), *SMALL)
        assert result.exit_code in (0, 1), result.output
    return root


def test_a_plain_comparison_has_no_seed_sections_and_short_windows_show(two_runs: Path):
    result = invoke("compare", str(two_runs / "a"), str(two_runs / "b"), "--out", str(two_runs / "report"), "--no-png")
    assert result.exit_code == 0, result.output
    page = (two_runs / "report" / "report.html").read_text()
    assert "The seeds' statistics" not in page and "As in seed 001" not in page
    assert '"mode":"lines+markers"' in page and '"range":[-0.5,' in page  # a 2 s window's two points are drawn
    # The CDF's log axis is ticked at 1, 2 and 5 of each decade, written in full.
    numeric = [json.loads(f"[{labels}]") for labels in re.findall(r'"ticktext":\[([^\]]*)\]', page) if "%" not in labels]
    assert numeric and all(len(labels) >= 2 for labels in numeric)
    assert {f"{float(label):.0e}"[0] for labels in numeric for label in labels} <= {"1", "2", "5"}


def test_terminal_comparison_figures_are_never_cut(two_runs: Path):
    from mqttlab.cli.compare import _figure

    assert (_figure(21900.0, 3), _figure(999.6, 3), _figure(0.5, 2, "+"), _figure(-1234.5, 3, "+")) == ("21,900", "1,000", "+0.5", "-1,234")
    result = invoke("compare", str(two_runs / "a"), str(two_runs / "b"))
    assert result.exit_code == 0, result.output
    assert "…" not in result.output and "e+" not in result.output
