"""The paper drawn beside us (reproductions/beside.py): one figure per claim from the rows of the
test page (tests/data/reproduction, made from a real suite), the paper's values distinct from
ours, the axes in the paper's units, the bytes the same for the same data, and runs configured
differently never drawn together."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from matplotlib.colors import to_rgba

from mqttlab.analysis.compare import compare_directories
from mqttlab.reproductions.beside import PALETTE, Line, caption, claim_lines, draw, page_colors, write_beside
from mqttlab.reproductions.evidence import opened
from mqttlab.reproductions.paper_figures import AGREES, NO_PAPER_NUMBER, FigureRow
from mqttlab.reproductions.section import PaperSection, attach_paper

DATA = Path(__file__).resolve().parent / "data" / "reproduction"


@pytest.fixture(scope="module")
def section() -> PaperSection:
    with opened(DATA / "mini" / "evidence.tar.xz") as paths:
        comparison = compare_directories(paths)
        found = attach_paper(comparison, paths, str(DATA / "mini.paper.yaml"))
    assert found is not None
    return found


def _hollow_diamonds(axis) -> list[float]:
    """x of the paper's markers: hollow black diamonds."""
    return [float(x) for line in axis.lines if line.get_marker() == "D" and line.get_markerfacecolor() == "none"
            and to_rgba(line.get_markeredgecolor()) == to_rgba("black") for x in line.get_xdata()]


def _filled_dots(axis) -> list[float]:
    return [float(x) for line in axis.lines if line.get_marker() == "o" and line.get_markerfacecolor() != "none" for x in line.get_xdata()]


def test_every_claim_with_ours_measured_gets_a_figure_that_the_committed_page_embeds(section, tmp_path):
    written = write_beside(section, tmp_path)
    assert [figure.claim for figure in written] == ["qos1-costs-little", "rate-kept", "latency-as-stated", "looks-fine"]
    assert all(figure.path.is_file() and figure.path.name == f"beside-{figure.claim}.png" for figure in written)
    page = (DATA / "mini.md").read_text(encoding="utf-8")
    section_text = page.split("### The paper beside us", 1)[1].split("\n### ", 1)[0]
    for figure in written:
        assert f"(mini/{figure.path.name})" in section_text
        assert (DATA / "mini" / figure.path.name).is_file()
    assert "ours: mean of n = 3 runs with its 95% confidence interval" in section_text and "units: ms" in section_text


def test_a_caption_names_the_figures_of_one_run_among_means(section):
    lines = claim_lines(section, ["latency-qos0", "latency-qos1"])[""]
    single = [replace(line, n=1, interval=None) if line.figure == "latency-qos0" else line for line in lines]
    assert "ours: mean of n = 1–3 runs with its 95% confidence interval; n = 1 (no interval) for latency-qos0" in caption(single)


def test_the_same_rows_give_the_same_bytes(section, tmp_path):
    first = {f.path.name: f.path.read_bytes() for f in write_beside(section, tmp_path / "a")}
    second = {f.path.name: f.path.read_bytes() for f in write_beside(section, tmp_path / "b")}
    assert first == second
    assert all(b"Software" not in data and b"matplotlib" not in data.lower() for data in first.values())


def test_the_axes_are_in_the_papers_units_with_its_values_hollow_and_ours_with_their_interval(section):
    lines = claim_lines(section, ["latency-qos0", "latency-qos1"])[""]
    figure = draw(lines, "latency-as-stated")
    (axis,) = figure.axes
    assert axis.get_xlabel() == "latency mean (ms)" and axis.get_xscale() == "linear"
    assert sorted(_hollow_diamonds(axis)) == [0.5, 0.6]  # the paper's numbers, as mini.paper.yaml states them
    qos1 = next(line for line in lines if line.figure == "latency-qos1")
    assert qos1.n == 3 and qos1.interval is not None and qos1.ours is not None
    assert pytest.approx(qos1.ours) in _filled_dots(axis)
    bars = [segment for collection in axis.collections for segment in collection.get_segments()]
    assert any(pytest.approx(sorted(segment[:, 0].tolist())) == list(qos1.interval) for segment in bars)  # the CI, drawn
    labels = [tick.get_text() for tick in axis.get_yticklabels()]
    assert labels == ["latency-qos0 · n = 3", "latency-qos1 · n = 3"]  # top to bottom, as the claim lists them; one broker: its colour
    assert all(legend.axes is None for legend in figure.legends)  # the legend is the figure's, outside the axes


def test_throughput_is_drawn_in_msg_per_s_with_the_region_where_ours_agrees(section):
    (line,) = claim_lines(section, ["throughput-qos0"], tolerances={"throughput-qos0": 1.1})[""]
    assert line.unit == "msg/s" and line.region == pytest.approx((20 / 1.1, 22.0))
    (axis,) = draw([line], "rate-kept").axes
    assert axis.get_xlabel() == "throughput (msg/s)" and _hollow_diamonds(axis) == [20.0]


def test_values_spanning_decades_get_a_log_axis_ticked_in_full_and_an_open_range_runs_to_its_edge():
    lines = [Line("qos0-throughput", "msg/s", broker="mosquitto", paper=20000, ours=19990, n=2, interval=(19900, 20080), kind="throughput"),
             Line("qos2-latency", "ms", broker="mosquitto", paper_range=(20, None), ours=0.4, n=1, kind="latency_range"),
             Line("qos1-latency", "ms", broker="mosquitto", paper=10, ours=0.3, n=1, kind="latency_mean")]
    figure = draw(lines, "qos-monotone")
    throughput, latency = figure.axes
    assert throughput.get_xscale() == "linear" and throughput.get_xlabel() == "throughput (msg/s)"
    assert latency.get_xscale() == "log" and latency.get_xlabel() == "latency mean (ms, log scale)"
    ticks = [tick.get_text() for tick in latency.get_xticklabels()]
    assert "e" not in "".join(ticks) and "10" in ticks
    (band,) = latency.patches  # the paper's "20–30+ ms": from 20 to the axis' right edge
    assert band.get_x() == pytest.approx(20) and band.get_x() + band.get_width() == pytest.approx(latency.get_xlim()[1])


def _row(figure: str, scenario: str, ours: float) -> FigureRow:
    return FigureRow(figure, "", "latency_mean", "ms", False, 1.0, ours, AGREES, scenario=scenario, broker="mosquitto", runs=1,
                     samples=[ours])


def test_runs_configured_differently_are_drawn_in_figures_of_their_own():
    rows = [_row("f", "p2p [load.duration=2s]", 1.0), _row("f", "p2p [load.duration=4s]", 1.2), _row("g", "p2p [load.duration=2s]", 0.9)]
    rows.append(FigureRow("h", "", "latency_mean", "ms", False, None, None, NO_PAPER_NUMBER))  # nothing of ours: no line
    section = PaperSection("T", "test", "none", rows, [])
    configs = claim_lines(section, ["f", "g", "h"])
    assert sorted(configs) == ["load.duration=2s", "load.duration=4s"]
    assert [line.figure for line in configs["load.duration=2s"]] == ["f", "g"]
    assert [line.ours for line in configs["load.duration=4s"]] == [1.2]


def test_a_value_with_its_sd_draws_the_papers_sd_dashed_and_a_keyed_value_the_key_its_check_reads():
    rows = [FigureRow("s04-latency-mqtt-1000", "", "latency_mean_std", "ms", False, {"mean": 475, "std": 321}, {"mean": 90.0, "std": 40.0},
                      AGREES, scenario="s04", broker="mosquitto", runs=1, samples=[90.0]),
            FigureRow("sprt-up1-t50-c130-mosquitto", "", "sprt_result", "samples", True,
                      {"h0": 0.74, "h1": 0.84, "result": "H1", "h1_accept_pct": 100, "mean_samples": 46.04},
                      {"h0": 0.74, "h1": 0.84, "result": "H0", "h1_accept_pct": 0.0, "mean_samples": 52.0}, AGREES, broker="mosquitto")]
    section = PaperSection("T", "test", "none", rows, [])
    (sd,) = claim_lines(section, ["s04-latency-mqtt-1000"])[""]
    assert (sd.paper, sd.paper_spread, sd.ours) == (475, 321, 90.0)
    (axis,) = draw([sd], "mqtt-bottleneck-8p").axes
    assert _hollow_diamonds(axis) == [475.0]
    assert any(collection.get_linestyle()[0][1] for collection in axis.collections)  # the paper's SD, dashed
    (keyed,) = claim_lines(section, ["sprt-up1-t50-c130-mosquitto"], key="h1_accept_pct")[""]
    assert (keyed.unit, keyed.paper, keyed.ours) == ("%", 100.0, 0.0) and keyed.where == "h1_accept_pct"
    assert len(claim_lines(section, ["sprt-up1-t50-c130-mosquitto"])[""]) == 4  # without a key: each number, never "result"


def test_rows_equal_but_for_their_configuration_are_one_line_and_claims_on_the_same_lines_share_a_figure(tmp_path):
    paper = tmp_path / "t.paper.yaml"
    paper.write_text("""seed: T
title: t
figures:
- {id: connect-bytes, quote: q, where: w, kind: overhead_bytes, unit: bytes, exact: true, value: 25, reproduce: {computed: connect_bytes}}
claims:
- {id: first, text: CONNECT is 25 B., figures: [connect-bytes], check: [{agree: [connect-bytes]}]}
- {id: second, text: So is every CONNECT., figures: [connect-bytes], check: [{agree: [connect-bytes]}]}
""", encoding="utf-8")
    rows = [FigureRow("connect-bytes", "", "overhead_bytes", "bytes", True, 25, 25, AGREES, scenario=f"s{i}", broker="mosquitto")
            for i in range(5)]
    section = PaperSection("T", "t", str(paper), rows, [])
    (line,) = claim_lines(section, ["connect-bytes"])[""]
    assert line.where == "5 configurations" and (line.paper, line.ours) == (25, 25)
    (axis,) = draw([line], "first").axes
    assert axis.get_xlabel() == "overhead (bytes)"
    first, second = write_beside(section, tmp_path / "page")
    assert (first.claim, second.claim, second.same_as) == ("first", "second", "first") and second.path == first.path
    assert sorted(p.name for p in (tmp_path / "page").iterdir()) == ["beside-first.png"]


def test_a_keyed_value_marks_derived_only_the_keys_the_paper_does_not_print():
    row = FigureRow("sprt-up1-t30-c50-mosquitto", "", "sprt_result", "samples", False,
                    {"h1": 1, "result": "H1", "h1_accept_pct": 100, "mean_samples": 44},
                    {"h1": 1, "result": "H0", "h1_accept_pct": 0.0, "mean_samples": 2.7}, AGREES, broker="mosquitto",
                    derived="h1_accept_pct read from the printed result", derived_keys=["h1_accept_pct"])
    section = PaperSection("T", "test", "none", [row], [])
    lines = {line.key: line for line in claim_lines(section, [row.figure])[""]}
    assert lines["h1_accept_pct"].derived and not lines["mean_samples"].derived and not lines["h1"].derived
    assert "derived" not in caption([lines["mean_samples"]]) and "derived from what it prints" in caption([lines["h1_accept_pct"]])
    # Without derived_keys the whole figure is derived, as before.
    whole = {line.key: line for line in claim_lines(PaperSection("T", "test", "none", [replace(row, derived_keys=[])], []), [row.figure])[""]}
    assert all(line.derived for line in whole.values())


def test_derived_keys_must_name_keys_of_the_figures_values(tmp_path):
    from mqttlab.reproductions.paper_file import PaperFileError, load_paper

    paper = tmp_path / "t.paper.yaml"
    paper.write_text("""seed: T
title: t
figures:
- {id: row, quote: q, where: w, kind: sprt_result, unit: samples, exact: false, values: {h1: 1, mean_samples: 44},
   derived: 'h1 read from the text', derived_keys: [h1_accept_pct], reproduce: {smc: sprt}}
claims: []
""", encoding="utf-8")
    with pytest.raises(PaperFileError, match="derived_keys: h1_accept_pct not among the keys of values"):
        load_paper(paper)


def test_signed_values_spanning_decades_get_a_symmetric_log_axis_that_keeps_small_signs_apart():
    # Regression coefficients: 9 ms beside 0.005 ms of either sign; a linear axis draws both small ones at 0.
    lines = [Line("msg-publish", "ms", broker="mosquitto", paper=9.0, ours=-0.8, kind="regression"),
             Line("total-subs", "ms", broker="mosquitto", paper=0.0044, ours=-0.0051, kind="regression")]
    (axis,) = draw(lines, "regression-terms-significant").axes
    assert axis.get_xscale() == "symlog" and "symmetric log scale, linear within ±0.001" in axis.get_xlabel()
    # The two small values, one each side of 0, lie apart by more than a tenth of the axis' width.
    left, right = (axis.transData.transform((x, 0))[0] for x in (-0.0051, 0.0044))
    low, high = (axis.transData.transform((x, 0))[0] for x in axis.get_xlim())
    assert (right - left) / (high - low) > 0.1
    ticks = [tick.get_text() for tick in axis.get_xticklabels()]
    assert "0" in ticks and "-1" in ticks and "10" in ticks and not any("e" in tick for tick in ticks)


def test_a_broker_keeps_its_colour_in_every_figure_of_the_page():
    rows = [_row("a", "s", 1.0), replace(_row("a", "s", 1.5), broker="nanomq"), replace(_row("b", "s", 2.0), broker="nanomq")]
    colors = page_colors(PaperSection("T", "t", "none", rows, []), brokers=["mosquitto", "nanomq"])
    assert colors["mosquitto"] == PALETTE[0] and colors["nanomq"] == PALETTE[1]
    # A figure with nanomq alone draws it in the page's colour for it, not in the palette's first.
    (line,) = claim_lines(PaperSection("T", "t", "none", rows[2:], []), ["b"])[""]
    (axis,) = draw([line], "one", colors=colors).axes
    (dot,) = [drawn for drawn in axis.lines if drawn.get_marker() == "o"]
    assert to_rgba(dot.get_color()) == to_rgba(PALETTE[1])
