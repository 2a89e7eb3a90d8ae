"""The rate-sweep figures' choices (reports/sweep.py): legend entries in the reader's words, a
log axis where lines at 0.3 and 4 ms would be squeezed together on a linear one, no loss panel
when nothing was lost, and the PNG with its legend under the panels."""

from __future__ import annotations


from mqttlab.reports.sweep import draw_sweep_png, line_label, log_axis, shown_panels


def _row(line: str, rate: float, p50: float, loss: float = 0.0) -> dict:
    return {"shape": "1 pub → 1 sub, QoS 0", "line": line, "protocol": "mqtt", "broker": "mosquitto", "rate_per_publisher": rate,
            "runs": 3, "latency_p50_ms": p50, "latency_p50_sd_ms": 0.01, "latency_p99_ms": p50 * 2, "latency_mean_ms": p50,
            "latency_mean_sd_ms": 0.01, "loss_percent": loss, "loss_sd_percent": 0.0}


def test_a_legend_names_sizes_limits_and_the_timing_method_as_a_reader_would():
    fields = ["publishers.payload.size", "publishers.measure", "network.rate", "network.loss"]
    config = {"publishers.payload.size": 1, "publishers.measure": "topic-sequence", "network.rate": "800kbit", "network.loss": 0.1}
    assert line_label(config, fields) == "1 B, timed by topic and sequence, limit 100 KB/s, loss 10 %"
    assert line_label({"publishers.payload.size": 1500, "publishers.measure": "header"}, fields[:2]) == "1500 B"
    assert line_label({"publishers.payload.size": 1_000_000}, fields[:1]) == "1 MB"
    assert line_label({"publishers.count": 4}, ["publishers.count"]) == "publishers.count=4"


def test_latency_goes_on_a_log_axis_when_its_lines_span_a_factor_of_five_and_loss_only_when_something_was_lost():
    rows = [_row("1 B", 10, 0.35), _row("1 MB", 10, 4.1), _row("1 B", 100, 0.3), _row("1 MB", 100, 3.7)]
    assert log_axis(rows, "latency_p50_ms") and not log_axis(rows[:1] + rows[2:3], "latency_p50_ms")
    assert [panel[0] for panel in shown_panels(rows)] == ["latency_p50_ms", "latency_mean_ms"]
    assert "loss_percent" in [panel[0] for panel in shown_panels([*rows, _row("1 B", 1000, 0.4, loss=2.0)])]


def test_the_png_is_written(tmp_path):
    rows = [_row("1 B", 10, 0.35), _row("1 MB", 10, 4.1), _row("1 B", 100, 0.3), _row("1 MB", 100, 3.7)]
    path = draw_sweep_png(rows, tmp_path / "sweep.png", dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_rate_sweeps_log_axis_is_ticked_1_2_5_in_full():
    from mqttlab.reports.figures import log_ticks

    ticks = log_ticks([1, 10, 100, 1000])
    assert ticks["ticktext"][:4] == ["1", "2", "5", "10"] and "1000" in ticks["ticktext"]
    import inspect

    from mqttlab.reports import sweep

    assert "log_ticks(" in inspect.getsource(sweep.sweep_figures)
