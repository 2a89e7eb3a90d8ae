"""Figures for learn and predict: interactive HTML (plotly, self-contained) and PNG (matplotlib)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on a server
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
from plotly.subplots import make_subplots  # noqa: E402

from mqttlab.smc.log import MESSAGE_TYPES  # noqa: E402

_SCATTER_POINTS = 5000  # enough to see the shape; the HTML stays small


def learn_figures(rows: pd.DataFrame, correlation: pd.DataFrame, out_dir: Path, seed: int = 0) -> list[Path]:
    """Correlation matrix and latency-vs-load scatter, the paper's look at the data before fitting."""
    out_dir = Path(out_dir)
    shown = rows.sample(min(len(rows), _SCATTER_POINTS), random_state=seed)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Pearson correlation", "Latency against open exchanges"))
    fig.add_trace(
        go.Heatmap(z=correlation.to_numpy(), x=list(correlation.columns), y=list(correlation.index), zmin=-1, zmax=1, colorscale="RdBu"),
        row=1,
        col=1,
    )
    for msg in MESSAGE_TYPES:
        part = shown[shown["Msg"] == msg]
        fig.add_trace(
            go.Scattergl(x=part["ActiveMsgs"], y=part["Latency_us"] / 1e3, mode="markers", name=msg, marker={"size": 3}),
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="ActiveMsgs", row=1, col=2)
    # Latencies are right-skewed; a log axis shows the bulk and the tail together.
    fig.update_yaxes(title_text="latency [ms]", type="log", row=1, col=2)
    html = out_dir / "learn.html"
    fig.write_html(html, include_plotlyjs=True)

    png = out_dir / "learn.png"
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    image = left.imshow(correlation.to_numpy(), vmin=-1, vmax=1, cmap="RdBu")
    left.set_xticks(range(len(correlation)), correlation.columns, rotation=45, ha="right")
    left.set_yticks(range(len(correlation)), correlation.index)
    figure.colorbar(image, ax=left)
    for msg in MESSAGE_TYPES:
        part = shown[shown["Msg"] == msg]
        right.scatter(part["ActiveMsgs"], part["Latency_us"] / 1e3, s=3, label=msg)
    right.set_xlabel("ActiveMsgs")
    right.set_ylabel("latency [ms]")
    right.set_yscale("log")
    right.legend()
    figure.tight_layout()
    figure.savefig(png, dpi=120)
    plt.close(figure)
    return [html, png]


def predict_figures(table: pd.DataFrame, curves: pd.DataFrame, out_dir: Path, title: str) -> list[Path]:
    """Probability against clients per threshold (the paper's Fig. 5/6) and the DKW curves."""
    out_dir = Path(out_dir)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("P(all messages < t) by clients", "P(worst < t) with DKW band"))
    for threshold, part in table.groupby("threshold_ms"):
        fig.add_trace(
            go.Scatter(
                x=part["clients"],
                y=part["p"],
                mode="lines+markers",
                name=f"t = {threshold:g} ms",
                error_y={"type": "data", "symmetric": False, "array": part["cp_high"] - part["p"], "arrayminus": part["p"] - part["cp_low"]},
            ),
            row=1,
            col=1,
        )
    for clients, part in curves.groupby("clients"):
        fig.add_trace(go.Scatter(x=part["threshold_ms"], y=part["dkw_high"], mode="lines", line={"width": 0}, showlegend=False), row=1, col=2)
        fig.add_trace(
            go.Scatter(x=part["threshold_ms"], y=part["dkw_low"], mode="lines", line={"width": 0}, fill="tonexty", showlegend=False),
            row=1,
            col=2,
        )
        fig.add_trace(go.Scatter(x=part["threshold_ms"], y=part["p"], mode="lines", name=f"{clients} clients"), row=1, col=2)
    fig.update_xaxes(title_text="clients", row=1, col=1)
    fig.update_xaxes(title_text="threshold [ms]", row=1, col=2)
    fig.update_yaxes(title_text="probability", range=[0, 1.02])
    fig.update_layout(title=title)
    html = out_dir / "predict.html"
    fig.write_html(html, include_plotlyjs=True)

    png = out_dir / "predict.png"
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    for threshold, part in table.groupby("threshold_ms"):
        errors = np.vstack([part["p"] - part["cp_low"], part["cp_high"] - part["p"]])
        left.errorbar(part["clients"], part["p"], yerr=errors, marker="o", capsize=3, label=f"t = {threshold:g} ms")
    left.set_xlabel("clients")
    left.set_ylabel("P(all messages < t)")
    left.set_ylim(0, 1.02)
    left.legend()
    for clients, part in curves.groupby("clients"):
        line = right.plot(part["threshold_ms"], part["p"], label=f"{clients} clients")[0]
        right.fill_between(part["threshold_ms"], part["dkw_low"], part["dkw_high"], color=line.get_color(), alpha=0.2)
    right.set_xlabel("threshold [ms]")
    right.set_ylabel("P(worst latency < t)")
    right.set_ylim(0, 1.02)
    right.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(png, dpi=120)
    plt.close(figure)
    return [html, png]
