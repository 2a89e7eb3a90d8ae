"""The paper file's check options that read one key of a figure's value (`key` on trend and best,
`absolute`), a check's `note`, and `unchanged`, which judges a claim about settings from two runs
of seed 000's pipeline in two broker configurations given together."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqttlab.cli import app as cli_app
from mqttlab.reproductions.paper_figures import FigureRow
from mqttlab.reproductions.paper_file import Check, Claim
from mqttlab.reproductions.verdicts import DOES_NOT_HOLD, HOLDS, NOT_MEASURED_HERE, Reference, _check, judge_claim, rule_text

app = cli_app.app


def _sprt(figure: str, scenario: str, h1: float, pct: float, broker: str = "mosquitto") -> FigureRow:
    value = {"h0": round(h1 - 0.1, 4), "h1": h1, "result": "H1", "h1_accept_pct": pct, "mean_samples": 44.0}
    return FigureRow(figure=figure, quote="", kind="sprt_result", unit="samples", exact=False, paper=None, ours=value,
                     status="agrees", scenario=scenario, broker=broker)


def _coefficient(figure: str, term: str, estimate: float, t_value: float) -> FigureRow:
    return FigureRow(figure=figure, quote="", kind="regression_coefficient", unit="ms", exact=False, paper=None,
                     ours={"estimate": estimate, "std_error": 0.001, "t_value": t_value, "p_value": 0.0}, status="disagrees",
                     scenario=term, broker="mosquitto")


def test_a_trend_reads_one_key_of_each_row_as_a_bare_value():
    rows = {"a": [_sprt("a", "UP1-t30-c50", 1.0, 100)], "b": [_sprt("b", "UP1-t30-c130", 0.78, 0)],
            "c": [_sprt("c", "UP1-t70-c50", 1.0, 100)], "d": [_sprt("d", "UP1-t70-c130", 1.0, 100)]}
    for found in rows.values():
        found[0].interval = [0.0, 200.0]  # of the whole row: never read as the interval of one key
    falls = Check(trend="falls", key="h1", figures=["a", "b", "c", "d"], along=["c50", "c130"])
    ok, lines = _check(falls, rows)
    # 1 → 1 is no fall: a probability at 1 shows nothing falling.
    assert ok is False
    assert lines[0] == "h1 of 4 figures: falls along c50 → c130 in 1 of 2 configurations (50%; 100% asked)"
    assert "UP1-t70-* (mosquitto): 1 → 1 ✗" in lines and "UP1-t30-* (mosquitto): 1 → 0.78" in lines
    assert _check(falls.model_copy(update={"at_least": 0.5}), rows)[0] is True
    assert rule_text(falls).startswith("ours' h1 of a, b, c, … (4 figures) falls (step by step; where the values have intervals, overlapping steps cannot tell; bare equal values do not fall)")


def test_best_by_the_magnitude_of_one_key_names_the_figures_of_one_broker():
    rows = {"active": [_coefficient("active", "ActiveMsgs", 0.0213, 449.9)],
            "disconnect": [_coefficient("disconnect", "Msg[disconnect]", -1.02, -393.8)],
            "subs": [_coefficient("subs", "Subs", 0.128, 127.9)]}
    best = Check(best="active", among=["active", "disconnect", "subs"], key="t_value", absolute=True)
    ok, lines = _check(best, rows)
    assert ok is True
    assert lines == ["active 449.9 ahead of disconnect 393.8 (one value each, no interval)",
                     "active 449.9 ahead of subs 127.9 (one value each, no interval)"]
    rows["disconnect"][0].ours["t_value"] = -500.0
    assert _check(best, rows)[0] is False
    assert rule_text(best).startswith("|t_value| of active is the highest of active, disconnect, subs: value against value")
    with pytest.raises(ValueError, match="absolute: only with best"):
        Check(each=["active"], within=[0, 1], absolute=True)


def test_unchanged_compares_two_runs_row_by_row_and_says_which_is_which():
    tuned = {"subs": [_coefficient("subs", "Subs", 0.0141, 12.9)], "active": [_coefficient("active", "ActiveMsgs", 0.0287, 536.5)],
             "t30": [_sprt("t30", "UP1-t30-c50", 1.0, 100)], "t50": [_sprt("t50", "UP1-t50-c50", 1.0, 100)]}
    shipped = {"subs": [_coefficient("subs", "Subs", 0.1285, 127.9)], "active": [_coefficient("active", "ActiveMsgs", 0.0213, 449.9)],
               "t30": [_sprt("t30", "UP1-t30-c50", 1.0, 0)], "t50": [_sprt("t50", "UP1-t50-c50", 1.0, 100)]}
    other = Reference(shipped, "as-shipped", "tuned")
    model = Check(unchanged=["subs", "active"], key="estimate", tolerance=2.0)
    ok, lines = _check(model, tuned, other)
    assert ok is False
    assert lines == ["estimate: tuned against as-shipped: within ×2 in 1 of 2 pairs (50%; 100% asked), wholly outside in 1",
                     "subs (Subs, mosquitto): 0.0141 against 0.1285 (×0.11) ✗"]
    shares = Check(unchanged=["t30", "t50"], key="h1_accept_pct", within=[-10, 10])
    ok, lines = _check(shares, tuned, other)
    assert ok is False and lines[0] == "h1_accept_pct: tuned against as-shipped: -10 ≤ tuned − as-shipped ≤ 10 in 1 of 2 pairs (50%; 100% asked), wholly outside in 1"
    assert lines[1] == "t30 (UP1-t30-c50, mosquitto): 100 against 0 (100) ✗"
    assert "against the same rows of a second run of the pipeline in another configuration" in rule_text(shares)
    # One run alone cannot judge it: not measured, and the line says what would.
    claim = Claim(id="settings", text="no difference", check=[model, shares])
    alone = judge_claim(claim, tuned)
    assert alone.verdict == NOT_MEASURED_HERE and "`mqttlab compare THIS OTHER`" in alone.evidence[0]
    assert judge_claim(claim, tuned, other).verdict == DOES_NOT_HOLD
    assert judge_claim(claim, tuned, Reference(tuned, "again", "tuned")).verdict == HOLDS


def test_a_checks_note_follows_the_line_of_what_was_found():
    rows = {"a": [_sprt("a", "UP1-t30-c50", 1.0, 100)]}
    claim = Claim(id="c", text="t", check=[Check(each=["a"], key="h1_accept_pct", within=[90, 100], note="one stream")])
    assert judge_claim(claim, rows).evidence == ["h1_accept_pct wholly in [90, 100] in 1 of 1 rows (100%; 100% asked), wholly outside in 0", "one stream"]


def _latency(scenario: str, mean: float, started: list[str]) -> FigureRow:
    return FigureRow(figure="rtt", quote="", kind="latency", unit="ms", exact=False, paper=None, ours=mean, status="agrees",
                     scenario=scenario, broker="mosquitto", interval=[mean - 0.05, mean + 0.05], started=started)


def test_a_comparison_of_rows_made_at_different_sittings_says_so_beside_its_verdict():
    evening = ["2026-11-27T22:00:00Z", "2026-11-27T22:05:00Z"]
    rises = Claim(id="rises", text="t", check=[Check(trend="rises", figures=["rtt"], along=["qos0", "qos1"])])
    apart = {"rtt": [_latency("qos0-p1", 0.3, evening), _latency("qos1-p1", 0.5, ["2026-11-28T11:30:00Z"])]}
    verdict = judge_claim(rises, apart)
    # The verdict is the rule's; the line says where the runs come from, after what was found.
    assert verdict.verdict == HOLDS
    assert verdict.evidence[1] == ("made apart: the runs of the 2 rows compared come from 2 sittings of the host "
                                   "(UTC 1: 27 Nov 22:00–22:05; 2: 28 Nov 11:30): 1 from sitting 1 alone, 1 from sitting 2 alone; "
                                   "1–2 runs a row; a shift between sittings is in none of these intervals and moves the comparison as its variable would")
    # Runs less than an hour apart are one sitting; rows made alike say nothing.
    together = {"rtt": [_latency("qos0-p1", 0.3, evening), _latency("qos1-p1", 0.5, ["2026-11-27T22:50:00Z"])]}
    assert not any(line.startswith("made apart") for line in judge_claim(rises, together).evidence)
    # A check on each row alone compares nothing between them.
    each = Claim(id="each", text="t", check=[Check(each=["rtt"], within=[0, 1])])
    assert not any(line.startswith("made apart") for line in judge_claim(each, apart).evidence)


def _smc_directory(path: Path, configuration: str, result_30ms: str, subs_us: float) -> Path:
    """A `smc paper` directory in the shape smc/paper.py writes, by hand (its pipeline takes minutes)."""
    (path / "mosquitto" / "learn").mkdir(parents=True)
    (path / "paper.json").write_text(json.dumps({"settings": {"broker_config": configuration},
                                                 "learn": {"mosquitto": {"r_squared_ols": 0.6, "chosen": "empirical"}}}))
    (path / "table2-monte-carlo-time.csv").write_text("profile,broker,model,clients,samples,seconds\nUP1,mosquitto,paper,50,1060,0.5\n")
    (path / "table3-4-sprt.csv").write_text(
        "profile,broker,threshold_ms,clients,H0,H1,result,samples,time_s,system\n"
        f"UP1,mosquitto,30.0,50,0.9,1.0,{result_30ms},44.0,120.0,\n"
        "UP1,mosquitto,50.0,50,0.9,1.0,H1,44.0,120.0,\n")
    (path / "predictions.csv").write_text("broker,profile,model,clients,threshold_ms,p\nmosquitto,UP1,paper,50,30.0,1.0\n"
                                          "mosquitto,UP1,empirical,50,30.0,0.3\n")
    (path / "mosquitto" / "learn" / "coefficients.csv").write_text(
        f"term,Estimate,Std. Error,t value,Pr(>|t|)\nActiveMsgs,21.3,0.05,450.0,0.0\nSubs,{subs_us},1.0,128.0,0.0\n")
    (path / "invocations.json").write_text(json.dumps([{"command": f"mqttlab smc paper ({configuration})", "at": "2026-11-25T08:00:00+00:00"}]))
    return path


def test_two_smc_directories_judge_the_settings_claim_and_the_page_keeps_both(tmp_path):
    tuned = _smc_directory(tmp_path / "tuned", "tuned", "H1", 14.0)
    shipped = _smc_directory(tmp_path / "shipped", "as-shipped", "H0", 128.0)
    page = tmp_path / "pages" / "seed000-tuned.md"
    result = CliRunner().invoke(app, ["compare", str(tuned), str(shipped), "--paper", "seed000", "--page", str(page)], terminal_width=200)
    assert result.exit_code == 0, result.output
    with (page.parent / "seed000-tuned" / "paper_claims.csv").open(encoding="utf-8") as handle:
        claims = {row["claim"]: row for row in csv.DictReader(handle)}
    settings = claims["settings-no-effect"]
    assert settings["verdict"] == DOES_NOT_HOLD
    assert "estimate: tuned against as-shipped: within ×2 in 1 of 2 pairs" in settings["evidence"]
    assert "sprt-up1-t30-c50-mosquitto (UP1-t30-c50, mosquitto): 100 against 0 (100) ✗" in settings["evidence"]
    text = page.read_text(encoding="utf-8")
    assert "mqttlab smc paper (tuned)" in text and "mqttlab smc paper (as-shipped)" in text  # both runs' commands
    assert "not the explore logs" in text  # the evidence says what an smc directory's archive holds
    assert (page.parent / "seed000-tuned" / "beside-settings-no-effect.png").is_file()
    # Made again from its evidence alone, which holds both directories: the same page.
    shutil.rmtree(tuned)
    shutil.rmtree(shipped)
    result = CliRunner().invoke(app, ["compare", str(page.parent / "seed000-tuned" / "evidence.tar.xz"), "--paper", "seed000", "--page",
                                      str(page)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert page.read_text(encoding="utf-8") == text
    # One directory alone: the claim is not measured, and a third directory is refused.
    one = _smc_directory(tmp_path / "one", "tuned", "H1", 14.0)
    result = CliRunner().invoke(app, ["compare", str(one), "--paper", "seed000", "--json"], terminal_width=200)
    verdicts = {claim["claim"]: claim["verdict"] for claim in json.loads(result.output)["claims"]}
    assert verdicts["settings-no-effect"] == NOT_MEASURED_HERE
    more = [str(_smc_directory(tmp_path / name, "tuned", "H1", 14.0)) for name in ("x", "y")]
    result = CliRunner().invoke(app, ["compare", str(one), *more, "--paper", "seed000"], terminal_width=200)
    assert result.exit_code != 0


def test_a_figure_drawn_for_a_keyed_rule_shows_the_rules_range_and_the_other_run():
    from mqttlab.reproductions.beside import caption, claim_lines
    from mqttlab.reproductions.section import PaperSection

    paper = {"h0": 0.9, "h1": 1.0, "result": "H1", "h1_accept_pct": 100, "mean_samples": 44}
    row = _sprt("sprt-a", "UP1-t30-c50", 1.0, 0.0)
    row.paper = paper
    other = PaperSection("000", "t", "none", [_sprt("sprt-a", "UP1-t30-c50", 1.0, 100.0)], [], "as-shipped")
    section = PaperSection("000", "t", "none", [row], [], "tuned", other)
    # The share of clients is judged by the rule's [90, 100], not by ×2 of the paper's 100 (to 200 %).
    (line,) = claim_lines(section, ["sprt-a"], tolerances={"sprt-a": 2.0}, keys={"sprt-a": "h1_accept_pct"},
                          rules={"sprt-a": (90.0, 100.0)})[""]
    assert (line.region, line.rule, line.key) == ((90.0, 100.0), True, "h1_accept_pct")
    # A claim reading one key by another rule (a trend of h1) draws no tolerance band at all.
    (line,) = claim_lines(section, ["sprt-a"], tolerances={"sprt-a": 2.0}, keys={"sprt-a": "h1"})[""]
    assert line.region is None
    # A claim about settings draws the other configuration's value on the same line.
    (line,) = claim_lines(section, ["sprt-a"], keys={"sprt-a": "h1_accept_pct"}, other=other)[""]
    assert (line.ours, line.other) == (0.0, 100.0)
    assert "(filled: ours tuned, hollow circles: ours as-shipped)" in caption([line], runs_drawn="filled: ours tuned, hollow circles: ours as-shipped")
