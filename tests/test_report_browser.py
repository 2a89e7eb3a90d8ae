"""The HTML report opened in headless Chromium (Debian's `chromium`, installed by
scripts/install-test-tools.sh): every plot renders, and the page logs nothing to the console."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mqttlab.analysis import compare_directories
from mqttlab.reports import write_report_bundle
from test_suite_run import quick_suite_dir  # tests/ is on sys.path (no package)

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CONSOLE_LINE = re.compile(r":CONSOLE[:(]")


def open_in_chromium(page: Path) -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, and the console messages it logged."""
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: run scripts/install-test-tools.sh")
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if CONSOLE_LINE.search(line)]


def test_the_console_check_catches_a_page_that_fails(tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>notDefinedAnywhere();</script></body></html>")
    _, console = open_in_chromium(broken)
    assert any("notDefinedAnywhere" in line for line in console)


def test_report_plots_render_in_headless_chromium_without_console_messages(tmp_path):
    comparison = compare_directories([quick_suite_dir()], baseline="mosquitto")
    page = write_report_bundle(comparison, tmp_path, png=False)["html"]
    dom, console = open_in_chromium(page)
    assert console == []
    plots = re.findall(r'<div id="([\w-]+)" class="plotly-graph-div', dom)
    assert {"bars-throughput", "bars-latency_p99", "bars-broker_cpu", "bars-broker_rss_peak", "latency-0", "time-0"} <= set(plots)
    # plotly draws each figure into an <svg class="main-svg"> inside its div: one per plot at least
    assert dom.count('class="main-svg"') >= len(plots)
    # the error bars and the CDF curves were drawn, not just empty axes
    assert 'class="errorbar"' in dom or "class='errorbar'" in dom
    assert dom.count('class="scatterlayer') >= 1


def test_the_summary_table_fits_a_1280_pixel_window_up_to_its_last_figure(tmp_path):
    from cli_runs import SMALL, invoke  # tests/ is on sys.path (no package)

    for broker in ("mosquitto", "rumqttd"):
        for repetition in (1, 2):  # two runs each: every cell has its interval and its difference's
            result = invoke("run", "--broker", broker, "--duration", "1s", "--out", str(tmp_path / "runs" / f"{broker}-{repetition}"), *SMALL)
            assert result.exit_code in (0, 1), result.output
    compared = invoke("compare", str(tmp_path / "runs"), "--baseline", "mosquitto", "--generator-limited", "--out", str(tmp_path / "report"), "--no-png")
    assert compared.exit_code == 0, compared.output
    # The page as a reader opens it, with a line that writes down, once the page has laid itself
    # out, how far the summary table reaches beyond its box.
    page = (tmp_path / "report" / "report.html").read_text()
    measure = ("<script>window.addEventListener('load', () => { const box = document.getElementById('summary-table');"
               " document.body.dataset.overflow = box.scrollWidth - box.clientWidth; });</script></body>")
    measured = tmp_path / "report" / "measured.html"
    measured.write_text(page.replace("</body>", measure))
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: run scripts/install-test-tools.sh")
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900", "--virtual-time-budget=10000",
                           "--dump-dom", measured.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    overflow = re.search(r'data-overflow="(-?\d+)"', done.stdout)
    assert overflow is not None and int(overflow.group(1)) == 0, overflow
    header = re.search(r'id="summary-table".*?</thead>', page, re.S)
    assert header is not None and all(title in header.group(0) for title in ("latency p99", "broker CPU", "broker RSS"))
